// `dprun convert MODEL.onnx --save OUT.onnx`: the model's inference form, to serve a model that
// was exported for training (engine/autograd/inference_graph.h).
#include <cstdio>
#include <memory>

#include "engine/autograd/inference_graph.h"
#include "engine/training/preprocessing_graph.h"
#include "loader/onnx_loader.h"
#include "tools/command_line.h"
#include "tools/commands.h"
#include "tools/report_files.h"
#include "tools/transform_flags.h"
#include "tools/usage_error.h"

namespace dprun::cli {

namespace {

struct ConvertFlags {
  std::string model;
  std::optional<std::string> save;
  std::optional<int64_t> external_data_threshold;
  bool embed_preprocessing = false;
  TransformFlags transforms;
};

std::unique_ptr<CLI::App> convert_app(ConvertFlags& flags) {
  auto app = command_app(
      "usage: dprun convert MODEL.onnx --save OUT.onnx\n"
      "write the inference form of a model exported for training (BatchNormalization on its "
      "running\nstatistics, Dropout as Identity), to serve it");
  add_model_path(*app, flags.model);
  add_text(*app, "--save", "OUT.onnx", flags.save, "where to write it (required)")->required();
  add_integer(*app, "--external-data-threshold", "BYTES", flags.external_data_threshold, 0,
              INT64_MAX,
              "write the tensors to OUT.onnx.data beside the model when they hold more than "
              "BYTES in all (default 2000000000, inside protobuf's 2 GiB limit); 0 writes "
              "every tensor of 1 KiB or more there");
  add_flag(*app, "--embed-preprocessing", flags.embed_preprocessing,
           "write --layout and --normalize into the model as ONNX nodes in front of its inputs, "
           "for uint8 files (Cast, Div by 255, Sub, Div, Transpose): the model then takes the "
           "stored images directly, as `dprun train --embed-preprocessing` saves it");
  add_transform_options(*app, flags.transforms, false);
  return app;
}

int convert(const ConvertFlags& flags) {
  const std::string& path = flags.model;
  const std::string& save = *flags.save;
  check_writable(save, "save");
  const std::map<std::string, InputTransform> transforms = input_transforms(flags.transforms);
  if (flags.embed_preprocessing && transforms.empty())
    throw UsageError(
        "--embed-preprocessing needs --layout or --normalize: there is nothing to embed");
  if (!flags.embed_preprocessing && !transforms.empty())
    throw UsageError(
        "--layout and --normalize are written into the model with --embed-preprocessing");
  const std::shared_ptr<Graph> graph = load_graph(path);
  const std::vector<std::string> changed = training_mode_nodes(*graph);
  SaveOptions options;
  if (flags.external_data_threshold)
    options.external_data_threshold = static_cast<uint64_t>(*flags.external_data_threshold);
  Graph served = inference_graph(*graph);
  if (flags.embed_preprocessing) {
    std::map<std::string, DType> stored;  // what image data sets store
    for (const auto& [name, transform] : transforms) stored[name] = DType::UInt8;
    served = with_embedded_preprocessing(served, transforms, stored);
  }
  save_graph(served, {}, save, options);
  std::printf(
      "%s: %zu node%s switched to inference (BatchNormalization on its running "
      "statistics, Dropout as Identity); saved %s\n",
      path.c_str(), changed.size(), changed.size() == 1 ? "" : "s", save.c_str());
  return 0;
}

}  // namespace

int convert_command(int argc, char** argv, int first) {
  ConvertFlags flags;
  auto app = convert_app(flags);
  parse_command_line(*app, argc, argv, first);
  return convert(flags);
}

std::string convert_help() {
  ConvertFlags flags;
  return command_help(*convert_app(flags));
}

}  // namespace dprun::cli
