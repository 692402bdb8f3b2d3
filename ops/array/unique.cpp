// Unique: the distinct elements (no axis: of the flattened input) or distinct slices along
// `axis`, sorted ascending (slices compared lexicographically) or in order of first occurrence.
// Outputs: Y, indices of first occurrences, inverse_indices (input -> Y position), counts.
#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

#include "engine/op_facts.h"
#include "ops/common/reduce_common.h"

namespace dprun {
namespace {

class UniqueKernel : public OpKernel {
 public:
  explicit UniqueKernel(const KernelInfo& info) {
    sorted_ = info.node.attr_int("sorted", 1) != 0;
    if (info.node.has_attr("axis")) axis_ = info.node.attr_int("axis");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    Shape shape = x.shape();
    int64_t axis = 0;
    if (axis_) {
      axis = *axis_;
      if (axis < -x.rank() || axis >= x.rank())
        ctx.fail("axis ", axis, " is out of range for rank ", x.rank());
      if (axis < 0) axis += x.rank();
    } else {
      shape = {x.numel()};
    }
    const int64_t outer = dims_product(shape, 0, axis);
    const int64_t len = shape[static_cast<size_t>(axis)];
    const int64_t inner = dims_product(shape, axis + 1, static_cast<int64_t>(shape.size()));
    visit_dtype(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* xs = x.data<T>();
      // Slice j: elements (o, j, i) for every outer o and inner i.
      auto at = [&](int64_t j, int64_t e) {
        return load_as<compute_t<T>>(xs[((e / inner) * len + j) * inner + e % inner]);
      };
      const int64_t slice = outer * inner;
      auto less = [&](int64_t a, int64_t b) {
        for (int64_t e = 0; e < slice; ++e) {
          auto va = at(a, e), vb = at(b, e);
          if (va < vb) return true;
          if (vb < va) return false;
        }
        return false;
      };
      auto equal = [&](int64_t a, int64_t b) {
        for (int64_t e = 0; e < slice; ++e)
          if (!(at(a, e) == at(b, e))) return false;
        return true;
      };
      // Group slices: a stable sort keeps the first occurrence first within equal runs.
      std::vector<int64_t> order(static_cast<size_t>(len));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), less);
      std::vector<int64_t> first, counts, inverse(static_cast<size_t>(len));
      for (size_t p = 0; p < order.size(); ++p) {
        if (p == 0 || !equal(order[p - 1], order[p])) {
          first.push_back(order[p]);
          counts.push_back(0);
        }
        inverse[static_cast<size_t>(order[p])] = static_cast<int64_t>(first.size()) - 1;
        ++counts.back();
      }
      const int64_t u = static_cast<int64_t>(first.size());
      // Position of each group in the output order.
      std::vector<int64_t> pos(static_cast<size_t>(u));
      std::iota(pos.begin(), pos.end(), 0);
      if (!sorted_) {
        std::vector<int64_t> by_first(static_cast<size_t>(u));
        std::iota(by_first.begin(), by_first.end(), 0);
        std::sort(by_first.begin(), by_first.end(), [&](int64_t a, int64_t b) {
          return first[static_cast<size_t>(a)] < first[static_cast<size_t>(b)];
        });
        for (int64_t r = 0; r < u; ++r)
          pos[static_cast<size_t>(by_first[static_cast<size_t>(r)])] = r;
      }
      std::vector<int64_t> out_first(static_cast<size_t>(u)), out_counts(static_cast<size_t>(u));
      for (int64_t g = 0; g < u; ++g) {
        out_first[static_cast<size_t>(pos[static_cast<size_t>(g)])] = first[static_cast<size_t>(g)];
        out_counts[static_cast<size_t>(pos[static_cast<size_t>(g)])] =
            counts[static_cast<size_t>(g)];
      }
      Shape y_shape = shape;
      y_shape[static_cast<size_t>(axis)] = u;
      if (!axis_) y_shape = {u};
      T* y = ctx.allocate_output(0, y_shape, x.dtype()).data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t g = 0; g < u; ++g)
          for (int64_t i = 0; i < inner; ++i)
            y[(o * u + g) * inner + i] =
                xs[(o * len + out_first[static_cast<size_t>(g)]) * inner + i];
      auto write = [&](size_t idx, const std::vector<int64_t>& v) {
        if (!ctx.output_wanted(idx)) return;
        Tensor& t = ctx.allocate_output(idx, {static_cast<int64_t>(v.size())}, DType::Int64);
        std::copy(v.begin(), v.end(), t.data<int64_t>());
      };
      std::vector<int64_t> inv_out(inverse.size());
      for (size_t j = 0; j < inverse.size(); ++j) inv_out[j] = pos[static_cast<size_t>(inverse[j])];
      write(1, out_first);
      write(2, inv_out);
      write(3, out_counts);
    });
  }

 private:
  bool sorted_ = true;
  std::optional<int64_t> axis_;
};

DPRUN_REGISTER_KERNEL({.op_type = "Unique", .since = 11, .factory = make_kernel<UniqueKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Unique",
                         .dtype = OutputDTypeRule::fixed_after_first(DType::Int64)});

}  // namespace
}  // namespace dprun
