#include "tools/bench_rounds.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>

namespace dprun::cli {

void progress(const char* label, int done, int total) {
  static const bool tty = isatty(STDERR_FILENO);
  if (!tty) return;
  // At most 5 redraws a second (and always the last): a fast model's thousands of steps would
  // otherwise write megabytes of bar to the terminal.
  using Clock = std::chrono::steady_clock;
  static Clock::time_point last_drawn;
  const auto now = Clock::now();
  if (done != total && done != 1 && now - last_drawn < std::chrono::milliseconds(200)) return;
  last_drawn = now;
  const int width = 30;
  int filled = total ? done * width / total : width;
  std::fprintf(stderr, "\r%-12s [%s%s] %d/%d", label, std::string(filled, '#').c_str(),
               std::string(width - filled, ' ').c_str(), done, total);
  if (done == total) std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
}

StepSpread step_spread(std::vector<double> step_ms) {
  StepSpread s;
  s.steps = step_ms.size();
  if (step_ms.empty()) return s;
  std::sort(step_ms.begin(), step_ms.end());
  // Nearest rank: the smallest value with at least p of the steps at or below it.
  auto rank = [&](double p) {
    auto k = static_cast<size_t>(std::max(1.0, std::ceil(p * static_cast<double>(s.steps))));
    return step_ms[std::min(k, s.steps) - 1];
  };
  s.p10 = rank(0.1);
  s.median = rank(0.5);
  s.p90 = rank(0.9);
  return s;
}

const RoundResult& BenchResult::best() const {
  return *std::max_element(rounds.begin(), rounds.end(), [](const auto& a, const auto& b) {
    return a.samples_per_s < b.samples_per_s;
  });
}

double BenchResult::median_samples_per_s() const {
  const double median = spread().median;
  return median > 0 ? static_cast<double>(rounds.front().rows_per_step) / (median * 1e-3) : 0;
}

StepSpread BenchResult::spread() const {
  std::vector<double> all;
  for (const RoundResult& r : rounds) all.insert(all.end(), r.step_ms.begin(), r.step_ms.end());
  return step_spread(std::move(all));
}

DeviceListBench::DeviceListBench(const std::shared_ptr<Model>& model,
                                 const DataParallelOptions& options,
                                 const std::vector<Tensor>& inputs)
    : module_(model), parallel_(model, options), inputs_(inputs) {
  result_.devices = options.device_ids;
}

GraphStats DeviceListBench::graph_stats() const {
  std::vector<std::shared_ptr<Model>> models = parallel_.replicas();
  // With one device DataParallel runs its module itself, as PyTorch's does: no replicas.
  if (models.empty()) models.push_back(module_);
  GraphStats sum;
  for (const std::shared_ptr<Model>& model : models) {
    const GraphStats s = model->graph_stats();
    sum.captures += s.captures;
    sum.replays += s.replays;
    sum.fallbacks += s.fallbacks;
    if (!s.last_fallback.empty()) sum.last_fallback = s.last_fallback;
  }
  return sum;
}

void DeviceListBench::warm(int steps, const char* label) {
  for (int i = 0; i < steps; ++i) {
    parallel_.forward(inputs_);
    progress(label, i + 1, steps);
  }
}

void DeviceListBench::time_round(int iters, const char* label) {
  using Clock = std::chrono::steady_clock;
  RoundResult round;
  round.step_ms.reserve(static_cast<size_t>(iters));
  std::map<Device, DeviceFigures> figures;
  int64_t rows = 0;
  const auto start = Clock::now();
  auto step_start = start;
  for (int i = 0; i < iters; ++i) {
    parallel_.forward(inputs_);
    const auto step_end = Clock::now();
    round.step_ms.push_back(
        std::chrono::duration<double, std::milli>(step_end - step_start).count());
    // Outside the step's clock: the report copy and the bookkeeping below.
    DataParallelRun run = parallel_.last_run();
    rows = 0;
    for (int64_t r : run.chunk_rows) rows += r;
    for (size_t r = 0; r < run.timings.size(); ++r) {
      auto& f = figures[run.timings[r].device];
      f.device = run.timings[r].device;
      f.rows = r < run.chunk_rows.size() ? run.chunk_rows[r] : 0;
      f.busy_ms += run.timings[r].busy_seconds * 1e3 / iters;
    }
    progress(label, i + 1, iters);
    step_start = Clock::now();
  }
  // Throughput over the steps alone, as the sum of their clocks.
  double ms = 0;
  for (double s : round.step_ms) ms += s;
  round.ms_per_iter = ms / iters;
  round.rows_per_step = std::max<int64_t>(rows, 1);
  round.samples_per_s = ms > 0 ? static_cast<double>(round.rows_per_step) * iters / (ms * 1e-3) : 0;
  for (const Device& d : result_.devices) {
    auto it = figures.find(d);
    round.per_device.push_back(it != figures.end() ? it->second : DeviceFigures{d, 0, 0});
  }
  result_.rounds.push_back(std::move(round));
}

}  // namespace dprun::cli
