// Where(condition, X, Y) with numpy broadcasting over all three inputs. Values are moved
// as raw bytes of their element size, so every dtype is supported.
#include "engine/op_facts.h"
#include "ops/cpu/elementwise.h"

namespace dprun::ew {
namespace {

template <class E>
void where_bytes(const ExecutionContext& exec, const Tensor& cond, const Tensor& x, const Tensor& y,
                 Tensor& out) {
  const auto plan = make_plan<3>(out.shape(), {&cond.shape(), &x.shape(), &y.shape()});
  const bool* pc = cond.data<bool>();
  const E* px = static_cast<const E*>(x.raw_data());
  const E* py = static_cast<const E*>(y.raw_data());
  E* po = static_cast<E*>(out.raw_data());
  run_plan(exec, plan,
           [&](int64_t o, const std::array<int64_t, 3>& offs, const std::array<int64_t, 3>& st,
               int64_t n) {
             const bool* c = pc + offs[0];
             const E* a = px + offs[1];
             const E* b = py + offs[2];
             E* z = po + o;
             if (st[0] && st[1] && st[2]) {
               for (int64_t i = 0; i < n; ++i) z[i] = c[i] ? a[i] : b[i];
             } else {
               for (int64_t i = 0; i < n; ++i) z[i] = c[i * st[0]] ? a[i * st[1]] : b[i * st[2]];
             }
           });
}

class WhereKernel : public OpKernel {
 public:
  explicit WhereKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& cond = ctx.input(0);
    const Tensor& x = ctx.input(1);
    const Tensor& y = ctx.input(2);
    check_where_inputs(ctx, cond, x, y);
    Shape out_shape = broadcast_all(ctx, {&cond.shape(), &x.shape(), &y.shape()});
    Tensor& out = ctx.allocate_output(0, out_shape, x.dtype());
    switch (dtype_size(x.dtype())) {
      case 1:
        where_bytes<uint8_t>(ctx.execution(), cond, x, y, out);
        break;
      case 2:
        where_bytes<uint16_t>(ctx.execution(), cond, x, y, out);
        break;
      case 4:
        where_bytes<uint32_t>(ctx.execution(), cond, x, y, out);
        break;
      case 8:
        where_bytes<uint64_t>(ctx.execution(), cond, x, y, out);
        break;
      default:
        fail_dtype(ctx, x.dtype());
    }
  }
};

DPRUN_REGISTER_KERNEL({.op_type = "Where", .since = 9, .factory = make_kernel<WhereKernel>});

}  // namespace
}  // namespace dprun::ew

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "Where",
                         .dtype = OutputDTypeRule::same_as_input(1),
                         .shape = ShapeKind::Broadcast});

}  // namespace
}  // namespace dprun
