#include "tools/train_report.h"

#include <cmath>
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
