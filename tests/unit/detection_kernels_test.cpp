// Object-detection kernels: NonMaxSuppression (ops/image/nms.cpp) per class, with
// max_output_boxes_per_class, the score threshold and center_point_box, and RoiAlign
// (ops/image/roi_align.cpp) on a linear image with and without the half-pixel offset; expected
// selections and samples are worked out by hand.
#include <gtest/gtest.h>

#include "engine/error.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::expect_values;
using testing::make_node;
using testing::run_node;

TEST(DetectionKernels, SuppressesOverlapsPerClass) {
  // Boxes as [y1, x1, y2, x2]; box 1 overlaps box 0 heavily, box 2 is apart.
  Tensor boxes = Tensor::from_vector<float>({1, 3, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, 5, 1, 6});
  Tensor scores = Tensor::from_vector<float>({1, 2, 3}, {0.9f, 0.8f, 0.7f, 0.1f, 0.2f, 0.95f});
  Node n = make_node("NonMaxSuppression", {"b", "s", "m", "iou", "st"}, {"sel"});
  auto out =
      run_node(n,
               {boxes, scores, Tensor::from_vector<int64_t>({1}, {5}),
                Tensor::from_vector<float>({1}, {0.5f}), Tensor::from_vector<float>({1}, {0.15f})},
               11)[0];
  // Class 0: 0 kept, 1 suppressed, 2 kept. Class 1: 2 (0.95), 1 (0.2) then 0 under threshold.
  expect_values(out, {4, 3}, {0, 0, 0, 0, 0, 2, 0, 1, 2, 0, 1, 1});
  // max_output_boxes_per_class limits each class.
  auto one =
      run_node(n,
               {boxes, scores, Tensor::from_vector<int64_t>({1}, {1}),
                Tensor::from_vector<float>({1}, {0.5f}), Tensor::from_vector<float>({1}, {0.f})},
               11)[0];
  expect_values(one, {2, 3}, {0, 0, 0, 0, 1, 2});
  EXPECT_THROW(
      run_node(n,
               {Tensor::from_vector<float>({1, 3, 3}, std::vector<float>(9, 0)), scores,
                Tensor::from_vector<int64_t>({1}, {1}), Tensor::from_vector<float>({1}, {0.5f}),
                Tensor::from_vector<float>({1}, {0.f})},
               11),
      Error);
}

TEST(DetectionKernels, CenterPointFormat) {
  // [x_center, y_center, w, h]: the two boxes coincide.
  Tensor boxes = Tensor::from_vector<float>({1, 2, 4}, {0.5f, 0.5f, 1, 1, 0.5f, 0.5f, 1, 1});
  Tensor scores = Tensor::from_vector<float>({1, 1, 2}, {0.3f, 0.6f});
  Node n = make_node("NonMaxSuppression", {"b", "s", "m", "iou"}, {"sel"});
  n.attributes["center_point_box"] = Attribute::of_int(1);
  auto out = run_node(
      n, {boxes, scores, Tensor::from_vector<int64_t>({1}, {3}), Tensor::scalar<float>(0.5f)},
      11)[0];
  expect_values(out, {1, 3}, {0, 0, 1});
}

TEST(DetectionKernels, LinearImage) {
  // Pixel value = column index; rows identical.
  std::vector<float> img(16);
  for (int i = 0; i < 16; ++i) img[i] = static_cast<float>(i % 4);
  Tensor x = Tensor::from_vector<float>({1, 1, 4, 4}, img);
  Tensor rois = Tensor::from_vector<float>({1, 4}, {0, 0, 4, 4});
  Node n = make_node("RoiAlign", {"x", "r", "b"}, {"y"});
  n.attributes["output_height"] = Attribute::of_int(2);
  n.attributes["output_width"] = Attribute::of_int(2);
  n.attributes["sampling_ratio"] = Attribute::of_int(1);
  // half_pixel: samples at x = 0.5 and 2.5.
  expect_values(run_node(n, {x, rois, Tensor::from_vector<int64_t>({1}, {0})}, 16)[0], {1, 1, 2, 2},
                {0.5, 2.5, 0.5, 2.5});
  // Opset 10 (no half-pixel offset): samples at x = 1 and 3.
  expect_values(run_node(n, {x, rois, Tensor::from_vector<int64_t>({1}, {0})}, 10)[0], {1, 1, 2, 2},
                {1, 3, 1, 3});
  EXPECT_THROW(run_node(n, {x, rois, Tensor::from_vector<int64_t>({1}, {1})}, 16), Error);
}

}  // namespace
}  // namespace dprun
