// `dprun convert MODEL.onnx --save OUT.onnx`: the model's inference form, to serve a model that
// was exported for training (engine/autograd/inference_graph.h).
#include <cstdio>
#include <memory>

#include "engine/autograd/inference_graph.h"
#include "loader/onnx_loader.h"
#include "tools/cli_args.h"
#include "tools/commands.h"
#include "tools/report_files.h"

namespace dprun::cli {

int convert_command(int argc, char** argv, int first) {
  Args args(argc, argv, first, {{"save"}});
  if (args.positionals().size() != 1) throw UsageError("convert expects one model file");
  const std::string path = args.positionals()[0];
  const auto save = args.get("save");
  if (!save) throw UsageError("--save OUT.onnx is required");
  check_writable(*save, "save");
  const std::shared_ptr<Graph> graph = load_graph(path);
  const std::vector<std::string> changed = training_mode_nodes(*graph);
  save_graph(inference_graph(*graph), {}, *save);
  std::printf(
      "%s: %zu node%s switched to inference (BatchNormalization on its running "
      "statistics, Dropout as Identity); saved %s\n",
      path.c_str(), changed.size(), changed.size() == 1 ? "" : "s", save->c_str());
  return 0;
}

}  // namespace dprun::cli
