// Models that crash ONNX 1.12's own shape inference are loaded without it crashing: the
// guarded schema registry (loader/shape_inference_guard.h) fails such a node's inference, and
// the engine refuses the node by name. The model is the one tests/fuzz/fuzz_onnx_loader.cpp
// found: a ConvTranspose whose input X has rank 2 (no spatial dims).
#include <google/protobuf/text_format.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <string>

#include "engine/error.h"
#include "engine/model.h"
#include "loader/onnx_loader.h"

namespace dprun {
namespace {

// A ConvTranspose of X (dims `x_dims`, text-format dims) and W [1, 2, 3, 3], serialized.
std::string conv_transpose_model(const std::string& x_dims) {
  const std::string text = R"(ir_version: 7 opset_import { version: 11 }
    graph { name: "g"
      node { name: "up" op_type: "ConvTranspose" input: "X" input: "W" output: "Y" }
      input { name: "X" type { tensor_type { elem_type: 1 shape { )" +
                           x_dims + R"( } } } }
      input { name: "W" type { tensor_type { elem_type: 1 shape {
        dim { dim_value: 1 } dim { dim_value: 2 } dim { dim_value: 3 } dim { dim_value: 3 } } } } }
      output { name: "Y" type { tensor_type { elem_type: 1 shape {
        dim { dim_param: "n" } dim { dim_param: "c" } dim { dim_param: "h" } dim { dim_param: "w" } } } } } })";
  onnx::ModelProto model;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &model));
  return model.SerializeAsString();
}

TEST(ShapeInferenceGuard, ConvTransposeWithoutSpatialDimsIsRefusedByNameNotACrash) {
  const std::string bytes = conv_transpose_model("dim { dim_value: 3 } dim { dim_value: 3 }");
  auto graph = load_graph_from_buffer(bytes.data(), bytes.size());
  try {
    Model model(graph, Device::cpu());
    model.run(std::vector<Tensor>{Tensor::zeros({3, 3}, DType::Float32),
                                  Tensor::zeros({1, 2, 3, 3}, DType::Float32)});
    ADD_FAILURE() << "a ConvTranspose on a rank-2 input ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ConvTranspose"), std::string::npos) << e.what();
  }
}

TEST(ShapeInferenceGuard, AWellFormedConvTransposeStillGetsItsOutputShape) {
  const std::string bytes = conv_transpose_model(
      "dim { dim_value: 1 } dim { dim_value: 1 } dim { dim_value: 3 } dim { dim_value: 3 }");
  auto graph = load_graph_from_buffer(bytes.data(), bytes.size());
  ASSERT_TRUE(graph->type_of("Y").has_value() && graph->type_of("Y")->shape.has_value());
  EXPECT_EQ(shape_to_string(*graph->type_of("Y")->shape), "[1, 2, 5, 5]");
}

}  // namespace
}  // namespace dprun
