// TopK: the k largest (or smallest) elements along `axis` and their int64 indices.
// k is an attribute in opset 1 and an input from opset 10; `largest` and `sorted` exist from
// opset 11. Ties keep the smaller index first. The output is sorted even when sorted=0 (the
// order is then unspecified, so sorted is a valid choice). NaN counts as larger than every
// number, as in numpy's sort order.
#include <algorithm>
#include <cmath>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"
#include "ops/cpu/axis_walk.h"

namespace dprun {
namespace {

template <class C>
bool is_nan_value(C v) {
  if constexpr (std::is_floating_point_v<C>)
    return std::isnan(v);
  else
    return false;
}

/// a > b with NaN above every number.
template <class C>
bool greater_than(C a, C b) {
  const bool an = is_nan_value(a), bn = is_nan_value(b);
  if (an || bn) return an && !bn;
  return a > b;
}

class TopKKernel : public OpKernel {
 public:
  explicit TopKKernel(const KernelInfo& info)
      : k_from_input_(info.opset >= 10),
        k_attr_(info.node.attr_int("k", -1)),
        axis_(info.node.attr_int("axis", -1)),
        largest_(info.node.attr_int("largest", 1) != 0) {
    if (!k_from_input_ && !info.node.has_attr("k")) info.node.fail("attribute k is required");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    int64_t k = k_attr_;
    if (k_from_input_) {
      const Tensor& kt = ctx.input(1);
      if (kt.rank() > 1)
        ctx.fail("k must be a 1-D tensor of one element, got shape ", shape_to_string(kt.shape()));
      k = read_int_scalar(ctx, kt, "k");
    }
    const int64_t a = axis_index(ctx, x.shape(), axis_);
    const AxisSplit split = split_at_axis(x.shape(), a);
    const int64_t D = split.size;
    if (k < 0 || k > D)
      ctx.fail("k = ", k, " is out of range for axis ", a, " of size ", D, " in input shape ",
               shape_to_string(x.shape()));
    Shape out_shape = x.shape();
    out_shape[static_cast<size_t>(a)] = k;
    Tensor& values = ctx.allocate_output(0, out_shape, x.dtype());
    Tensor* indices = nullptr;
    if (ctx.output_count() > 1) indices = &ctx.allocate_output(1, out_shape, DType::Int64);
    if (values.numel() == 0) return;
    auto run = [&](auto tag) {
      using T = decltype(tag);
      using C = compute_t<T>;
      const T* xp = x.data<T>();
      T* vp = values.data<T>();
      int64_t* ip = indices ? indices->data<int64_t>() : nullptr;
      const bool largest = largest_;
      auto before = [largest](const std::pair<C, int64_t>& p, const std::pair<C, int64_t>& q) {
        const bool pq = largest ? greater_than(p.first, q.first) : greater_than(q.first, p.first);
        const bool qp = largest ? greater_than(q.first, p.first) : greater_than(p.first, q.first);
        if (pq || qp) return pq;
        return p.second < q.second;  // equal values: smaller index first
      };
      ctx.parallel_for(split.lanes(), std::max<int64_t>(1, 4096 / std::max<int64_t>(D, 1)),
                       [&](int64_t begin, int64_t end) {
                         std::vector<std::pair<C, int64_t>> items(static_cast<size_t>(D));
                         for_each_lane(split, begin, end, [&](const AxisLane& lane) {
                           const T* p = xp + lane.start(D);
                           for (int64_t d = 0; d < D; ++d)
                             items[static_cast<size_t>(d)] = {load_as<C>(p[d * lane.stride]), d};
                           std::partial_sort(items.begin(), items.begin() + k, items.end(), before);
                           const int64_t base = lane.start(k);
                           for (int64_t d = 0; d < k; ++d) {
                             const auto& item = items[static_cast<size_t>(d)];
                             vp[base + d * lane.stride] = store_as<T>(item.first);
                             if (ip) ip[base + d * lane.stride] = item.second;
                           }
                         });
                       });
    };
    visit_float_or_integer_dtype(ctx, x.dtype(), run);
  }

 private:
  bool k_from_input_;
  int64_t k_attr_;
  int64_t axis_;
  bool largest_;
};

DPRUN_REGISTER_KERNEL({.op_type = "TopK", .since = 1, .factory = make_kernel<TopKKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
// Kept in float32: values that differ in float32 tie in 16 bits and change the indices chosen.
DPRUN_REGISTER_OP_FACTS({.op_type = "TopK",
                         .dtype = OutputDTypeRule::fixed_after_first(DType::Int64),
                         .float32_only = true});

}  // namespace
}  // namespace dprun
