// `dprun inspect MODEL.onnx`: what a model takes, gives, uses, and what dprun lacks for it.
#include <cstdio>
#include <map>

#include "engine/plan.h"
#include "loader/onnx_loader.h"
#include "tools/cli_args.h"
#include "tools/commands.h"

namespace dprun::cli {

int inspect_command(int argc, char** argv, int first) {
  Args args(argc, argv, first, {});
  if (args.positionals().size() != 1) throw UsageError("inspect expects one model file");
  const std::string path = args.positionals()[0];
  auto graph = load_graph(path);

  std::printf("model %s\n", path.c_str());
  std::printf("  graph '%s', IR version %lld, producer %s %s\n", graph->name.c_str(),
              static_cast<long long>(graph->ir_version), graph->producer_name.c_str(),
              graph->producer_version.c_str());
  std::printf("opset imports:\n");
  for (const auto& [domain, version] : graph->opset_imports)
    std::printf("  %-20s %lld\n", domain.empty() ? "ai.onnx" : domain.c_str(),
                static_cast<long long>(version));
  std::printf("inputs:\n");
  for (const ValueInfo* in : graph->required_inputs())
    std::printf("  %-24s %s\n", in->name.c_str(), in->type.to_string().c_str());
  for (const auto& in : graph->inputs)
    if (graph->initializers.count(in.name))
      std::printf("  %-24s %s (optional, has a default)\n", in.name.c_str(),
                  in.type.to_string().c_str());
  std::printf("outputs:\n");
  for (const auto& out : graph->outputs)
    std::printf("  %-24s %s\n", out.name.c_str(), out.type.to_string().c_str());

  std::map<std::string, int> histogram;
  for (const Node& node : graph->nodes)
    histogram[(node.domain.empty() ? "" : node.domain + "::") + node.op_type]++;
  std::printf("ops (%zu nodes):\n", graph->nodes.size());
  for (const auto& [op, count] : histogram) std::printf("  %-28s %d\n", op.c_str(), count);

  int64_t params = 0;
  size_t bytes = 0;
  for (const auto& [name, t] : graph->initializers) {
    params += t.numel();
    bytes += t.nbytes();
  }
  std::printf("parameters: %zu tensors, %lld values, %.2f MB\n", graph->initializers.size(),
              static_cast<long long>(params), static_cast<double>(bytes) / 1e6);

  auto missing = unsupported_nodes(*graph, DeviceType::CPU);
  if (missing.empty()) {
    std::printf("kernels: every node has a cpu kernel\n");
  } else {
    std::printf("kernels: %zu node%s without a cpu kernel:\n", missing.size(),
                missing.size() == 1 ? "" : "s");
    for (const auto& m : missing) std::printf("  %s\n", m.c_str());
  }
  return 0;
}

}  // namespace dprun::cli
