// NonMaxSuppression: greedy per (batch, class) box selection by descending score, dropping
// boxes whose IoU with an already selected box exceeds iou_threshold. Output rows are
// [batch, class, box] in batch, class, selection order.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

struct Box {
  double y1, x1, y2, x2;
};

double iou(const Box& a, const Box& b) {
  const double ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const double iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (ih <= 0 || iw <= 0) return 0;
  const double inter = ih * iw;
  const double area_a = (a.y2 - a.y1) * (a.x2 - a.x1);
  const double area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  const double uni = area_a + area_b - inter;
  if (area_a <= 0 || area_b <= 0 || uni <= 0) return 0;
  return inter / uni;
}

class NonMaxSuppressionKernel : public OpKernel {
 public:
  explicit NonMaxSuppressionKernel(const KernelInfo& info) {
    center_point_box_ = info.node.attr_int("center_point_box", 0);
    if (center_point_box_ != 0 && center_point_box_ != 1)
      info.node.fail("center_point_box must be 0 or 1, got ", center_point_box_);
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& boxes = ctx.input(0);
    const Tensor& scores = ctx.input(1);
    if (boxes.rank() != 3 || boxes.dim(2) != 4)
      ctx.fail("boxes must have shape [batch, boxes, 4], got ", shape_to_string(boxes.shape()));
    if (scores.rank() != 3 || scores.dim(0) != boxes.dim(0) || scores.dim(2) != boxes.dim(1))
      ctx.fail("scores ", shape_to_string(scores.shape()), " must be [batch, classes, ",
               boxes.dim(1), "] for boxes ", shape_to_string(boxes.shape()));
    int64_t max_out = 0;
    if (const Tensor* t = ctx.optional_input(2); t && t->numel() > 0)
      max_out = read_int_scalar(ctx, *t, "max_output_boxes_per_class");
    double iou_thr = 0, score_thr = -INFINITY;
    bool has_score_thr = false;
    if (const Tensor* t = ctx.optional_input(3); t && t->numel() > 0)
      iou_thr = t->item_as_double(0);
    if (const Tensor* t = ctx.optional_input(4); t && t->numel() > 0) {
      score_thr = t->item_as_double(0);
      has_score_thr = true;
    }
    if (iou_thr < 0 || iou_thr > 1) ctx.fail("iou_threshold must be in [0, 1], got ", iou_thr);
    const int64_t B = boxes.dim(0), N = boxes.dim(1), C = scores.dim(1);
    std::vector<int64_t> selected;  // flattened triples
    for (int64_t b = 0; b < B; ++b) {
      std::vector<Box> bx(static_cast<size_t>(N));
      for (int64_t i = 0; i < N; ++i) {
        const int64_t o = (b * N + i) * 4;
        double v0 = boxes.item_as_double(o), v1 = boxes.item_as_double(o + 1),
               v2 = boxes.item_as_double(o + 2), v3 = boxes.item_as_double(o + 3);
        Box& r = bx[static_cast<size_t>(i)];
        if (center_point_box_) {  // [x_center, y_center, width, height]
          r = {v1 - v3 / 2, v0 - v2 / 2, v1 + v3 / 2, v0 + v2 / 2};
        } else {  // [y1, x1, y2, x2], corners in either order
          r = {std::min(v0, v2), std::min(v1, v3), std::max(v0, v2), std::max(v1, v3)};
        }
      }
      for (int64_t c = 0; c < C; ++c) {
        if (max_out <= 0) break;
        std::vector<int64_t> order;
        std::vector<double> sc(static_cast<size_t>(N));
        for (int64_t i = 0; i < N; ++i) {
          sc[static_cast<size_t>(i)] = scores.item_as_double((b * C + c) * N + i);
          if (!has_score_thr || sc[static_cast<size_t>(i)] > score_thr) order.push_back(i);
        }
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
          return sc[static_cast<size_t>(x)] > sc[static_cast<size_t>(y)];
        });
        std::vector<int64_t> kept;
        for (int64_t i : order) {
          if (static_cast<int64_t>(kept.size()) >= max_out) break;
          bool keep = true;
          for (int64_t k : kept)
            if (iou(bx[static_cast<size_t>(i)], bx[static_cast<size_t>(k)]) > iou_thr) {
              keep = false;
              break;
            }
          if (!keep) continue;
          kept.push_back(i);
          selected.insert(selected.end(), {b, c, i});
        }
      }
    }
    const int64_t count = static_cast<int64_t>(selected.size() / 3);
    Tensor& y = ctx.allocate_output(0, {count, 3}, DType::Int64);
    std::copy(selected.begin(), selected.end(), y.data<int64_t>());
  }

 private:
  int64_t center_point_box_ = 0;
};

DPRUN_REGISTER_KERNEL({.op_type = "NonMaxSuppression",
                       .since = 10,
                       .dtypes = kFloatTypes,
                       .factory = make_kernel<NonMaxSuppressionKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
// Kept in float32: box coordinates: positions 16 bits would round.
DPRUN_REGISTER_OP_FACTS({.op_type = "NonMaxSuppression",
                         .dtype = OutputDTypeRule::fixed(DType::Int64),
                         .float32_only = true});

}  // namespace
}  // namespace dprun
