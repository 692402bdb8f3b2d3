#include "tools/train_report.h"

#include <cmath>
#include <cstdio>

#include "engine/backend.h"
#include "tools/process_memory.h"
#include "tools/report_files.h"

namespace dprun::cli {

namespace {

// Rows over the steps' time, the time each step waited for its batches included: a run held
// up by its data is that much slower.
double samples_per_s(const std::vector<StepRecord>& steps, size_t first) {
  int64_t rows = 0;
  double seconds = 0;
  for (size_t i = first; i < steps.size(); ++i) {
    rows += steps[i].rows;
    seconds += steps[i].seconds + steps[i].data_wait_seconds;
  }
  return seconds > 0 ? static_cast<double>(rows) / seconds : 0;
}

}  // namespace

Throughput measure_throughput(const std::vector<StepRecord>& steps, int64_t warmup_steps) {
  Throughput t;
  t.overall_samples_per_s = samples_per_s(steps, 0);
  t.warmup_steps = static_cast<int64_t>(steps.size()) > warmup_steps ? warmup_steps : 0;
  t.samples_per_s = samples_per_s(steps, static_cast<size_t>(t.warmup_steps));
  return t;
}

Progress::Progress(int64_t total, const GradScaler* scaler, ProgressOptions options)
    : total_(total), scaler_(scaler), options_(options) {}

void Progress::update(int64_t step, double loss, double samples_per_s) {
  const auto now = Clock::now();
  const double since = std::chrono::duration<double>(now - last_shown_).count();
  if (options_.every_steps > 0 || !options_.terminal) {
    const bool due = options_.every_steps > 0 ? step % options_.every_steps == 0
                                              : since >= options_.every_seconds;
    if (!due) return;
    last_shown_ = now;
    std::printf("step %lld/%lld: loss %.6f (this batch), %.1f samples/s%s\n",
                static_cast<long long>(step), static_cast<long long>(total_), loss, samples_per_s,
                scaling().c_str());
    std::fflush(stdout);
    return;
  }
  if (step != total_ && since < 1.0 / options_.redraws_per_second) return;
  last_shown_ = now;
  draw_bar(step, loss, samples_per_s);
}

void Progress::draw_bar(int64_t step, double loss, double samples_per_s) {
  const int width = 30;
  const int filled = static_cast<int>(width * step / total_);
  std::fprintf(stderr, "\r[%-*s] step %lld/%lld  loss %.5f  %.1f samples/s%s", width,
               std::string(static_cast<size_t>(filled), '#').c_str(), static_cast<long long>(step),
               static_cast<long long>(total_), loss, samples_per_s, scaling().c_str());
  bar_shown_ = step != total_;
  if (step == total_) std::fprintf(stderr, "\n");
}

void Progress::epoch_done(int64_t epoch, double mean_loss, double samples_per_s,
                          const std::optional<ValidationResult>& val) {
  if (bar_shown_) std::fprintf(stderr, "\n");
  bar_shown_ = false;
  std::printf("epoch %lld: loss %.6f, %.1f samples/s", static_cast<long long>(epoch + 1), mean_loss,
              samples_per_s);
  if (val) {
    std::printf(", val_loss %.6f", val->loss);
    if (val->accuracy) std::printf(", val_accuracy %.4f", *val->accuracy);
  }
  std::printf("%s\n", scaling().c_str());
  std::fflush(stdout);
}

std::string Progress::scaling() const {
  if (!scaler_) return "";
  char text[96];
  std::snprintf(text, sizeof text, ", loss scale %g, %lld skipped",
                static_cast<double>(scaler_->scale()),
                static_cast<long long>(scaler_->skipped_steps()));
  return text;
}

void write_train_json(const std::string& path, const TrainReport& report) {
  JsonReport out;
  auto per_step = [&](auto value) {
    JsonReport list = JsonReport::array();
    for (const StepRecord& step : report.steps) list.push_back(value(step));
    return list;
  };
  out["losses"] = per_step([](const StepRecord& s) { return s.loss; });
  out["lrs"] = per_step([](const StepRecord& s) { return s.lr; });
  out["step_seconds"] = per_step([](const StepRecord& s) { return s.seconds; });
  out["data_wait_seconds"] = per_step([](const StepRecord& s) { return s.data_wait_seconds; });
  out["samples_per_s"] = report.throughput.samples_per_s;
  out["samples_per_s_overall"] = report.throughput.overall_samples_per_s;
  out["warmup_steps"] = report.throughput.warmup_steps;
  out["devices"] = report.devices;
  out["peak_bytes"] = JsonReport::array();
  for (const Device& d : report.devices)
    out["peak_bytes"].push_back(backend_for(d).allocator(d)->stats().peak_in_use);
  out["peak_resident_bytes"] = peak_resident_bytes() - report.baseline_resident_bytes;
  out["parameters"] = report.parameters;
  out["validation"] = JsonReport::array();
  for (const ValidationResult& v : report.validation) {
    JsonReport result = {{"loss", v.loss}};
    if (v.accuracy) result["accuracy"] = *v.accuracy;
    out["validation"].push_back(result);
  }
  if (!report.steps.empty() && report.steps.front().loss_scale) {
    out["loss_scales"] = per_step([](const StepRecord& s) { return s.loss_scale.value_or(0); });
    out["skipped_steps"] = JsonReport::array();
    for (size_t i = 0; i < report.steps.size(); ++i)
      if (report.steps[i].skipped) out["skipped_steps"].push_back(i + 1);
  }
  // A float16 step that overflowed has no finite norm: written as null.
  if (!report.steps.empty() && report.steps.front().grad_norm)
    out["grad_norms"] = per_step([](const StepRecord& s) { return s.grad_norm.value_or(0); });
  if (!report.ranks.is_null()) out["ranks"] = report.ranks;
  out["profiled"] = !report.profile.is_null();
  if (!report.profile.is_null()) out["profile"] = report.profile;
  write_json_report(path, out);
}

}  // namespace dprun::cli
