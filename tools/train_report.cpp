#include "tools/train_report.h"

#include <cmath>
#include <cstdio>
#include <sstream>

#include "engine/backend.h"
#include "tools/format.h"

namespace dprun::cli {

namespace {

double samples_per_s(const std::vector<StepRecord>& steps, size_t first) {
  int64_t rows = 0;
  double seconds = 0;
  for (size_t i = first; i < steps.size(); ++i) {
    rows += steps[i].rows;
    seconds += steps[i].seconds;
  }
  return seconds > 0 ? static_cast<double>(rows) / seconds : 0;
}

template <typename T, typename F>
void write_list(std::ostringstream& out, const std::vector<T>& items, F write) {
  out << "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out << ", ";
    write(items[i]);
  }
  out << "]";
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
  std::ostringstream out;
  out.precision(9);
  out << "{\n  \"losses\": ";
  write_list(out, report.steps, [&](const StepRecord& s) { out << s.loss; });
  out << ",\n  \"lrs\": ";
  write_list(out, report.steps, [&](const StepRecord& s) { out << s.lr; });
  out << ",\n  \"step_seconds\": ";
  write_list(out, report.steps, [&](const StepRecord& s) { out << s.seconds; });
  out << ",\n  \"samples_per_s\": " << report.throughput.samples_per_s
      << ",\n  \"samples_per_s_overall\": " << report.throughput.overall_samples_per_s
      << ",\n  \"warmup_steps\": " << report.throughput.warmup_steps << ",\n  \"devices\": ";
  write_list(out, report.devices, [&](const Device& d) { out << json_string(d.to_string()); });
  out << ",\n  \"peak_bytes\": ";
  write_list(out, report.devices,
             [&](const Device& d) { out << backend_for(d).allocator(d)->stats().peak_in_use; });
  out << ",\n  \"parameters\": ";
  write_list(out, report.parameters, [&](const std::string& p) { out << json_string(p); });
  out << ",\n  \"validation\": ";
  write_list(out, report.validation, [&](const ValidationResult& v) {
    out << "{\"loss\": " << v.loss;
    if (v.accuracy) out << ", \"accuracy\": " << *v.accuracy;
    out << "}";
  });
  if (!report.steps.empty() && report.steps.front().loss_scale) {
    out << ",\n  \"loss_scales\": ";
    write_list(out, report.steps, [&](const StepRecord& s) { out << s.loss_scale.value_or(0); });
    std::vector<size_t> skipped;
    for (size_t i = 0; i < report.steps.size(); ++i)
      if (report.steps[i].skipped) skipped.push_back(i + 1);
    out << ",\n  \"skipped_steps\": ";
    write_list(out, skipped, [&](size_t step) { out << step; });
  }
  if (!report.steps.empty() && report.steps.front().grad_norm) {
    out << ",\n  \"grad_norms\": ";
    // A float16 step that overflowed has no finite norm: JSON's null.
    write_list(out, report.steps, [&](const StepRecord& s) {
      const double norm = s.grad_norm.value_or(0);
      if (std::isfinite(norm))
        out << norm;
      else
        out << "null";
    });
  }
  if (!report.ranks_json.empty()) out << ",\n  \"ranks\": " << report.ranks_json;
  out << "\n}\n";
  write_file_atomically(path, out.str());
}

}  // namespace dprun::cli
