// `dprun bench MODEL.onnx`: throughput of data-parallel inference over a device list, with a
// per-device breakdown, and (--sweep) the scaling table over 1..N devices.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "engine/parallel/device_list.h"
#include "loader/onnx_loader.h"
#include "tools/commands.h"
#include "tools/distributed_cli.h"
#include "tools/format.h"
#include "tools/parallel_options.h"
#include "tools/run_distributed.h"

namespace dprun::cli {

namespace {

struct DeviceFigures {
  Device device;
  int64_t rows = 0;
  double busy_ms = 0;  // mean per iteration
};

struct BenchResult {
  std::vector<Device> devices;
  double samples_per_s = 0;
  double ms_per_iter = 0;
  std::vector<DeviceFigures> per_device;
};

void progress(const char* label, int done, int total) {
  static const bool tty = isatty(STDERR_FILENO);
  if (!tty) return;
  const int width = 30;
  int filled = total ? done * width / total : width;
  std::fprintf(stderr, "\r%-12s [%s%s] %d/%d", label, std::string(filled, '#').c_str(),
               std::string(width - filled, ' ').c_str(), done, total);
  if (done == total) std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
}

// Time spent per op type and per node, summed over replicas, from per-node observers.
class OpProfile {
 public:
  NodeObserver observer() {
    NodeObserver obs;
    obs.before = [this](const Node& node, Device, std::span<const Tensor* const> inputs) {
      started() = std::chrono::steady_clock::now();
      std::lock_guard lock(mutex_);
      if (by_node_.count(node_key(node)) == 0) {
        // The first call's input shapes, as the node was first seen: execution order.
        std::string shapes;
        for (const Tensor* t : inputs) {
          if (!shapes.empty()) shapes += ' ';
          shapes += t ? shape_to_string(t->shape()) : std::string("-");
        }
        by_node_[node_key(node)] = {node.op_type, shapes, 0.0, order_.size()};
        order_.push_back(node_key(node));
      }
    };
    obs.after = [this](const Node& node, Device, std::span<const Tensor>) {
      double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started()).count();
      std::lock_guard lock(mutex_);
      auto& entry = by_op_[node.op_type];
      entry.first += s;
      entry.second += 1;
      by_node_[node_key(node)].seconds += s;
    };
    return obs;
  }
  void print(int iters) const {
    std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(by_op_.begin(),
                                                                         by_op_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
    double total = 0;
    for (const auto& r : rows) total += r.second.first;
    std::printf("\n%-24s %8s %12s %7s\n", "op", "calls/it", "ms/it", "share");
    for (const auto& [op, figures] : rows)
      std::printf("%-24s %8lld %12.3f %6.1f%%\n", op.c_str(),
                  static_cast<long long>(figures.second / iters), figures.first * 1e3 / iters,
                  total > 0 ? 100.0 * figures.first / total : 0.0);
  }
  /// One row per node in execution order: op, ms per iteration, first output, input shapes.
  void print_nodes(int iters) const {
    std::printf("\n%-24s %10s  %s\n", "op", "ms/it", "node (first output): input shapes");
    for (const std::string& key : order_) {
      const NodeFigures& n = by_node_.at(key);
      std::printf("%-24s %10.3f  %s: %s\n", n.op.c_str(), n.seconds * 1e3 / iters, key.c_str(),
                  n.input_shapes.c_str());
    }
  }

 private:
  struct NodeFigures {
    std::string op, input_shapes;
    double seconds = 0;
    size_t order = 0;
  };
  // A node's first output names it in every replica (node names are optional).
  static std::string node_key(const Node& node) {
    return node.outputs.empty() ? node.name : node.outputs[0];
  }
  static std::chrono::steady_clock::time_point& started() {
    thread_local std::chrono::steady_clock::time_point t;
    return t;
  }
  std::mutex mutex_;
  std::map<std::string, std::pair<double, int64_t>> by_op_;
  std::map<std::string, NodeFigures> by_node_;
  std::vector<std::string> order_;
};

BenchResult bench_devices(const std::shared_ptr<Model>& model, DataParallelOptions options,
                          const std::vector<Tensor>& inputs, int64_t batch, int warmup, int iters,
                          const char* label) {
  DataParallel parallel(model, options);
  for (int i = 0; i < warmup; ++i) {
    parallel.forward(inputs);
    progress(label, i + 1, warmup + iters);
  }
  BenchResult result;
  result.devices = options.device_ids;
  std::map<Device, DeviceFigures> figures;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) {
    parallel.forward(inputs);
    DataParallelRun run = parallel.last_run();
    for (size_t r = 0; r < run.timings.size(); ++r) {
      auto& f = figures[run.timings[r].device];
      f.device = run.timings[r].device;
      f.rows = r < run.chunk_rows.size() ? run.chunk_rows[r] : 0;
      f.busy_ms += run.timings[r].busy_seconds * 1e3 / iters;
    }
    progress(label, warmup + i + 1, warmup + iters);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.ms_per_iter = seconds * 1e3 / iters;
  result.samples_per_s = static_cast<double>(batch) * iters / seconds;
  for (const Device& d : options.device_ids) {
    auto it = figures.find(d);
    result.per_device.push_back(it != figures.end() ? it->second : DeviceFigures{d, 0, 0});
  }
  return result;
}

}  // namespace

int bench_command(int argc, char** argv, int first) {
  auto specs = parallel_option_specs();
  specs.insert(specs.end(), {{"iters"},
                             {"warmup"},
                             {"json"},
                             {"sweep", false},
                             {"profile", false},
                             {"profile-nodes", false}});
  auto distributed = distributed_option_specs(false);
  specs.insert(specs.end(), distributed.begin(), distributed.end());
  Args args(argc, argv, first, specs);
  if (args.positionals().size() != 1) throw UsageError("bench expects one model file");
  const std::string model_path = args.positionals()[0];
  // Before the devices are parsed: the ranks on a host share its cores.
  std::optional<DistributedRun> dist = start_distributed(args);
  DataParallelOptions options = parse_parallel_options(args);
  InputOptions input_options = parse_input_options(args);
  int iters = static_cast<int>(args.get_int("iters", 20, 1, 1000000));
  int warmup = static_cast<int>(args.get_int("warmup", 3, 0, 1000000));
  bool sweep = args.has("sweep");
  if (dist) {
    if (args.has("profile") || args.has("profile-nodes"))
      throw UsageError("--profile and --profile-nodes are not available with --distributed");
    return bench_on_ranks(*dist, model_path, parse_model_options(args), options, input_options,
                          warmup, iters, sweep, args.get("json").value_or(""));
  }

  auto model = std::make_shared<Model>(
      load_model(model_path, options.device_ids.front(), {}, parse_model_options(args)));
  std::vector<Tensor> inputs = prepare_inputs(*model, input_options);
  int64_t batch = input_options.batch;

  BenchResult main = bench_devices(model, options, inputs, batch, warmup, iters, "bench");
  if (args.has("profile") || args.has("profile-nodes")) {
    // A separate pass: observers add a little time to every node.
    OpProfile profile;
    DataParallelOptions observed = options;
    observed.observers.push_back(profile.observer());
    bench_devices(model, observed, inputs, batch, 0, iters, "profile");
    if (args.has("profile")) profile.print(iters);
    if (args.has("profile-nodes")) profile.print_nodes(iters);
  }
  std::printf("model %s, batch %lld, %d iterations (+%d warm-up)\n", model_path.c_str(),
              static_cast<long long>(batch), iters, warmup);
  std::printf("%-10s %8s %12s %8s\n", "device", "rows", "busy ms/it", "share");
  for (const auto& f : main.per_device)
    std::printf("%-10s %8lld %12.3f %7.1f%%\n", f.device.to_string().c_str(),
                static_cast<long long>(f.rows), f.busy_ms,
                main.ms_per_iter > 0 ? 100.0 * f.busy_ms / main.ms_per_iter : 0.0);
  std::printf("%.3f ms per iteration, %.1f samples/s\n", main.ms_per_iter, main.samples_per_s);

  std::vector<BenchResult> scaling;
  if (sweep) {
    for (size_t k = 1; k <= options.device_ids.size(); ++k) {
      DataParallelOptions subset = options;
      subset.device_ids.assign(options.device_ids.begin(),
                               options.device_ids.begin() + static_cast<long>(k));
      if (!subset.weights.empty()) subset.weights.resize(k);
      std::string label = "sweep " + std::to_string(k);
      scaling.push_back(bench_devices(model, subset, inputs, batch, warmup, iters, label.c_str()));
    }
    std::printf("\n%-8s %12s %9s %11s\n", "devices", "samples/s", "speed-up", "efficiency");
    for (size_t k = 0; k < scaling.size(); ++k) {
      double speedup = scaling[k].samples_per_s / scaling[0].samples_per_s;
      std::printf("%-8zu %12.1f %8.2fx %10.1f%%\n", k + 1, scaling[k].samples_per_s, speedup,
                  100.0 * speedup / static_cast<double>(k + 1));
    }
  }

  if (auto path = args.get("json")) {
    std::ostringstream out;
    out << "{\n  \"model\": " << json_string(model_path) << ",\n  \"batch\": " << batch
        << ",\n  \"iters\": " << iters << ",\n  \"warmup\": " << warmup
        << ",\n  \"threads\": " << options.threads << ",\n  \"devices\": [";
    for (size_t i = 0; i < main.devices.size(); ++i)
      out << (i ? ", " : "") << json_string(main.devices[i].to_string());
    out << "],\n  \"samples_per_s\": " << main.samples_per_s
        << ",\n  \"ms_per_iter\": " << main.ms_per_iter << ",\n  \"per_device\": [";
    for (size_t i = 0; i < main.per_device.size(); ++i) {
      const auto& f = main.per_device[i];
      out << (i ? ", " : "") << "{\"device\": " << json_string(f.device.to_string())
          << ", \"rows\": " << f.rows << ", \"busy_ms\": " << f.busy_ms
          << ", \"share\": " << (main.ms_per_iter > 0 ? f.busy_ms / main.ms_per_iter : 0) << "}";
    }
    out << "]";
    if (sweep) {
      out << ",\n  \"sweep\": [";
      for (size_t k = 0; k < scaling.size(); ++k) {
        double speedup = scaling[k].samples_per_s / scaling[0].samples_per_s;
        out << (k ? ", " : "") << "{\"devices\": " << k + 1
            << ", \"samples_per_s\": " << scaling[k].samples_per_s << ", \"speedup\": " << speedup
            << ", \"efficiency\": " << speedup / static_cast<double>(k + 1) << "}";
      }
      out << "]";
    }
    out << "\n}\n";
    write_file_atomically(*path, out.str());
  }
  return 0;
}

}  // namespace dprun::cli
