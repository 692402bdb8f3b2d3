// Pad: constant, reflect, edge and wrap modes (arguments in ops/array/pad.h). Each output
// coordinate maps, per dimension, to a source coordinate or to "padding" (math::pad_source).
#include <algorithm>
#include <optional>
#include <vector>

#include "engine/op_facts.h"
#include "engine/rewrites/graph_patterns.h"
#include "ops/array/pad.h"

namespace dprun {
namespace {

class PadKernel : public OpKernel {
 public:
  explicit PadKernel(const KernelInfo& info) : params_(info) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    const int64_t r = x.rank();
    const Shape& in = x.shape();
    const PadLayout layout = params_.layout(ctx, x);
    const Shape& out_shape = layout.out_shape;

    // Per dimension: source coordinate of each output coordinate, -1 for padding.
    std::vector<std::vector<int64_t>> maps(static_cast<size_t>(r));
    for (size_t d = 0; d < static_cast<size_t>(r); ++d) {
      auto& map = maps[d];
      map.resize(static_cast<size_t>(out_shape[d]));
      for (int64_t o = 0; o < out_shape[d]; ++o)
        map[static_cast<size_t>(o)] = math::pad_source(params_.mode(), o - layout.begin[d], in[d]);
    }

    Tensor& y = ctx.allocate_output(0, out_shape, x.dtype());
    if (y.numel() == 0) return;
    const std::vector<int64_t> in_strides = contiguous_strides(in);
    const int64_t row = r > 0 ? out_shape.back() : 1;
    const int64_t rows = y.numel() / row;
    const std::vector<int64_t> last_map = r > 0 ? maps.back() : std::vector<int64_t>{0};
    visit_element_size(dtype_size(x.dtype()), [&](auto zero) {
      using U = decltype(zero);
      const U* src = static_cast<const U*>(x.raw_data());
      U* dst = static_cast<U*>(y.raw_data());
      const U pad_value = *static_cast<const U*>(layout.fill.raw_data());
      ctx.parallel_for(rows, std::max<int64_t>(1, 4096 / row), [&](int64_t b, int64_t e) {
        for (int64_t rr = b; rr < e; ++rr) {
          // Source offset of this row's outer coordinates, or -1 when any is padding.
          int64_t rest = rr, off = 0;
          for (int64_t d = r - 2; d >= 0 && off >= 0; --d) {
            const size_t du = static_cast<size_t>(d);
            const int64_t i = maps[du][static_cast<size_t>(rest % out_shape[du])];
            rest /= out_shape[du];
            off = i < 0 ? -1 : off + i * in_strides[du];
          }
          U* o = dst + rr * row;
          if (off < 0) {
            std::fill(o, o + row, pad_value);
            continue;
          }
          for (int64_t k = 0; k < row; ++k) {
            const int64_t i = last_map[static_cast<size_t>(k)];
            o[k] = i < 0 ? pad_value : src[off + i];
          }
        }
      });
    });
  }

 private:
  PadParams params_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Pad", .since = 1, .factory = make_kernel<PadKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
/// Pad's pads in NCHW order ([begin N, C, H, W, end N, C, H, W]) when they are known when the
/// graph is compiled: the `pads` (opset 2-10) or `paddings` (opset 1) attribute, or a constant
/// input 1 (opset 11 on). Nullopt for other forms, including Pad-18's `axes` input.
std::optional<std::vector<int64_t>> pad_amounts(const Graph& graph, const Node& n) {
  for (const char* attr : {"pads", "paddings"})
    if (n.has_attr(attr)) {
      std::vector<int64_t> pads = n.attr_ints(attr);
      return pads.size() == 8 ? std::optional(pads) : std::nullopt;
    }
  if (n.inputs.size() < 2 || n.inputs[1].empty() || (n.inputs.size() > 3 && !n.inputs[3].empty()))
    return std::nullopt;
  auto t = constant_value(graph, n.inputs[1]);
  if (!t || t->dtype() != DType::Int64 || t->numel() != 8) return std::nullopt;
  return std::vector<int64_t>(t->data<int64_t>(), t->data<int64_t>() + 8);
}

bool pad_runs_in_nhwc(const LayoutQuery& query) {
  return query.is_nhwc(query.node.inputs[0]) && pad_amounts(query.graph, query.node).has_value();
}

/// The pads reordered for an NHWC value; padding by nothing (exporters emit it before some
/// pools) becomes an Identity, a view of the input.
void pad_to_nhwc(LayoutEdit& edit) {
  Node& m = edit.node;
  const std::vector<int64_t> nchw = *pad_amounts(edit.graph, m);
  std::vector<int64_t> pads;
  for (size_t half : {0, 4})
    for (size_t d : {0, 2, 3, 1}) pads.push_back(nchw[half + d]);
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; })) {
    m.op_type = "Identity";
    m.inputs.resize(1);
    m.attributes.clear();
    return;
  }
  for (const char* attr : {"pads", "paddings"})
    if (m.has_attr(attr)) m.attributes[attr] = Attribute::of_ints(pads);
  if (!m.has_attr("pads") && !m.has_attr("paddings"))
    edit.replace_input_with_constant(1, "pads", Tensor::from_vector<int64_t>({8}, pads));
}

DPRUN_REGISTER_OP_FACTS({.op_type = "Pad",
                         .shape = ShapeKind::SameRank,
                         .layout = {.runs_in_nhwc = pad_runs_in_nhwc, .to_nhwc = pad_to_nhwc}});

}  // namespace
}  // namespace dprun
