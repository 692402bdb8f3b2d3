// Sequence ops (SequenceEmpty/Construct/Insert/At/Erase/Length, ConcatFromSequence,
// SplitToSequence) and the Optional family. Sequences are immutable shared lists of tensors:
// every op that "changes" one builds a new list whose tensors share storage with the old.
// An optional without value is an empty value (no tensor, no sequence).
#include <algorithm>

#include "engine/kernel.h"
#include "engine/op_facts.h"

namespace dprun {
namespace {

const TensorSequence& sequence_input(const KernelContext& ctx, size_t i) {
  const TensorSequence* seq = ctx.input_sequence(i);
  if (seq == nullptr)
    ctx.fail("input ", i, ctx.has_input(i) ? " is a tensor" : " is missing",
             " where a sequence is expected");
  return *seq;
}

// A position input: an int32 or int64 scalar (or 1-element tensor).
int64_t read_position(const KernelContext& ctx, const Tensor& t) {
  if (t.numel() != 1) ctx.fail("position must be a scalar, got ", t.describe());
  if (t.dtype() == DType::Int64) return t.data<int64_t>()[0];
  if (t.dtype() == DType::Int32) return t.data<int32_t>()[0];
  ctx.fail("position must be int32 or int64, got ", dtype_name(t.dtype()));
}

// Resolves a possibly negative position against a sequence of `size`; `inclusive_end` admits
// `size` itself (insert at the back).
size_t resolve_position(const KernelContext& ctx, int64_t pos, size_t size, bool inclusive_end) {
  int64_t n = static_cast<int64_t>(size);
  int64_t hi = inclusive_end ? n : n - 1;
  if (pos < -n || pos > hi)
    ctx.fail("position ", pos, " is out of range for a sequence of ", n, " tensor",
             n == 1 ? "" : "s");
  return static_cast<size_t>(pos < 0 ? pos + n : pos);
}

void check_element(const KernelContext& ctx, const TensorSequence& seq, const Tensor& t) {
  if (!seq.empty() && seq.front().dtype() != t.dtype())
    ctx.fail("cannot add a ", dtype_name(t.dtype()), " tensor to a sequence of ",
             dtype_name(seq.front().dtype()), " tensors");
}

class SequenceEmptyKernel : public OpKernel {
 public:
  explicit SequenceEmptyKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override { ctx.set_output_sequence(0, TensorSequence{}); }
};

class SequenceConstructKernel : public OpKernel {
 public:
  explicit SequenceConstructKernel(const KernelInfo& info) : count_(info.node.inputs.size()) {
    if (count_ == 0) info.node.fail("needs at least one input");
  }
  void compute(KernelContext& ctx) const override {
    TensorSequence seq;
    for (size_t i = 0; i < count_; ++i) {
      const Tensor& t = ctx.input(i);
      check_element(ctx, seq, t);
      seq.push_back(t);
    }
    ctx.set_output_sequence(0, std::move(seq));
  }

 private:
  size_t count_;
};

class SequenceInsertKernel : public OpKernel {
 public:
  explicit SequenceInsertKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const TensorSequence& in = sequence_input(ctx, 0);
    const Tensor& t = ctx.input(1);
    check_element(ctx, in, t);
    size_t pos = in.size();
    if (const Tensor* p = ctx.optional_input(2))
      pos = resolve_position(ctx, read_position(ctx, *p), in.size(), true);
    TensorSequence out = in;
    out.insert(out.begin() + static_cast<std::ptrdiff_t>(pos), t);
    ctx.set_output_sequence(0, std::move(out));
  }
};

class SequenceAtKernel : public OpKernel {
 public:
  explicit SequenceAtKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const TensorSequence& in = sequence_input(ctx, 0);
    size_t pos = resolve_position(ctx, read_position(ctx, ctx.input(1)), in.size(), false);
    ctx.set_output(0, in[pos]);
  }
};

class SequenceEraseKernel : public OpKernel {
 public:
  explicit SequenceEraseKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const TensorSequence& in = sequence_input(ctx, 0);
    if (in.empty()) ctx.fail("cannot erase from an empty sequence");
    size_t pos = in.size() - 1;
    if (const Tensor* p = ctx.optional_input(1))
      pos = resolve_position(ctx, read_position(ctx, *p), in.size(), false);
    TensorSequence out = in;
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(pos));
    ctx.set_output_sequence(0, std::move(out));
  }
};

class SequenceLengthKernel : public OpKernel {
 public:
  explicit SequenceLengthKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    const TensorSequence& in = sequence_input(ctx, 0);
    ctx.set_output(0, Tensor::scalar<int64_t>(static_cast<int64_t>(in.size())).to(ctx.device()));
  }
};

class ConcatFromSequenceKernel : public OpKernel {
 public:
  explicit ConcatFromSequenceKernel(const KernelInfo& info)
      : axis_(info.node.attr_int("axis")), new_axis_(info.node.attr_int("new_axis", 0) != 0) {}
  void compute(KernelContext& ctx) const override {
    const TensorSequence& in = sequence_input(ctx, 0);
    if (in.empty()) ctx.fail("cannot concatenate an empty sequence");
    int64_t rank = in.front().rank();
    int64_t out_rank = new_axis_ ? rank + 1 : rank;
    if (axis_ < -out_rank || axis_ >= out_rank)
      ctx.fail("axis ", axis_, " is out of range for ", new_axis_ ? "stacking" : "concatenating",
               " tensors of rank ", rank);
    int64_t axis = axis_ < 0 ? axis_ + out_rank : axis_;
    std::vector<Tensor> parts;
    for (const Tensor& t : in) {
      if (!new_axis_) {
        parts.push_back(t);
        continue;
      }
      if (t.shape() != in.front().shape())
        ctx.fail("cannot stack tensors of shapes ", shape_to_string(in.front().shape()), " and ",
                 shape_to_string(t.shape()));
      Shape s = t.shape();
      s.insert(s.begin() + axis, 1);
      parts.push_back(t.reshape(s));
    }
    ctx.set_output(0, concat(parts, axis, ctx.device()));
  }

 private:
  int64_t axis_;
  bool new_axis_;
};

class SplitToSequenceKernel : public OpKernel {
 public:
  explicit SplitToSequenceKernel(const KernelInfo& info)
      : axis_(info.node.attr_int("axis", 0)), keepdims_(info.node.attr_int("keepdims", 1) != 0) {}
  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.rank() == 0) ctx.fail("cannot split a scalar");
    if (axis_ < -x.rank() || axis_ >= x.rank())
      ctx.fail("axis ", axis_, " is out of range for ", x.describe());
    int64_t axis = axis_ < 0 ? axis_ + x.rank() : axis_;
    int64_t length = x.shape()[axis];
    std::vector<int64_t> sizes;
    bool squeeze = false;
    if (const Tensor* split = ctx.optional_input(1)) {
      std::vector<int64_t> values;
      for (int64_t i = 0; i < split->numel(); ++i) {
        if (!is_integral(split->dtype())) ctx.fail("split must be int32 or int64");
        values.push_back(static_cast<int64_t>(split->item_as_double(i)));
      }
      if (split->rank() == 0) {
        int64_t chunk = values[0];
        if (chunk <= 0) ctx.fail("split size must be positive, got ", chunk);
        for (int64_t start = 0; start < length; start += chunk)
          sizes.push_back(std::min(chunk, length - start));
      } else {
        int64_t total = 0;
        for (int64_t v : values) {
          if (v < 0) ctx.fail("split sizes must not be negative");
          total += v;
        }
        if (total != length)
          ctx.fail("split sizes sum to ", total, " but dimension ", axis, " of ", x.describe(),
                   " has ", length);
        sizes = values;
      }
    } else {
      sizes.assign(static_cast<size_t>(length), 1);
      squeeze = !keepdims_;
    }
    TensorSequence out;
    int64_t start = 0;
    for (int64_t size : sizes) {
      Tensor part = x.narrow(axis, start, size);
      start += size;
      if (squeeze) {
        Shape s = part.shape();
        s.erase(s.begin() + axis);
        part = part.reshape(s);
      }
      out.push_back(part);
    }
    ctx.set_output_sequence(0, std::move(out));
  }

 private:
  int64_t axis_;
  bool keepdims_;
};

// Optional(x) wraps x (tensor or sequence); Optional() is an optional without value.
class OptionalKernel : public OpKernel {
 public:
  explicit OptionalKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    if (ctx.input_is_sequence(0))
      ctx.set_output_sequence(0, ctx.input_sequence_ptr(0));
    else if (ctx.has_input(0))
      ctx.set_output(0, ctx.input(0));
    else
      ctx.set_output_none(0);
  }
};

class OptionalHasElementKernel : public OpKernel {
 public:
  explicit OptionalHasElementKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    bool has = ctx.input_is_sequence(0) || ctx.has_input(0);
    ctx.set_output(0, Tensor::scalar<bool>(has).to(ctx.device()));
  }
};

class OptionalGetElementKernel : public OpKernel {
 public:
  explicit OptionalGetElementKernel(const KernelInfo&) {}
  void compute(KernelContext& ctx) const override {
    if (ctx.input_is_sequence(0))
      ctx.set_output_sequence(0, ctx.input_sequence_ptr(0));
    else if (ctx.has_input(0))
      ctx.set_output(0, ctx.input(0));
    else
      ctx.fail("the optional input has no value");
  }
};

DPRUN_REGISTER_KERNEL({.op_type = "SequenceEmpty",
                       .since = 11,
                       .factory = make_kernel<SequenceEmptyKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "SequenceConstruct",
                       .since = 11,
                       .factory = make_kernel<SequenceConstructKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "SequenceInsert",
                       .since = 11,
                       .factory = make_kernel<SequenceInsertKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "SequenceAt",
                       .since = 11,
                       .factory = make_kernel<SequenceAtKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "SequenceErase",
                       .since = 11,
                       .factory = make_kernel<SequenceEraseKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "SequenceLength",
                       .since = 11,
                       .factory = make_kernel<SequenceLengthKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "ConcatFromSequence",
                       .since = 11,
                       .factory = make_kernel<ConcatFromSequenceKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "SplitToSequence",
                       .since = 11,
                       .factory = make_kernel<SplitToSequenceKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "Optional", .since = 15, .factory = make_kernel<OptionalKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "OptionalHasElement",
                       .since = 15,
                       .factory = make_kernel<OptionalHasElementKernel>});
DPRUN_REGISTER_KERNEL({.op_type = "OptionalGetElement",
                       .since = 15,
                       .factory = make_kernel<OptionalGetElementKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "ConcatFromSequence"});
DPRUN_REGISTER_OP_FACTS({.op_type = "Optional"});
DPRUN_REGISTER_OP_FACTS({.op_type = "OptionalGetElement"});
DPRUN_REGISTER_OP_FACTS({.op_type = "OptionalHasElement"});
DPRUN_REGISTER_OP_FACTS({.op_type = "SequenceAt"});
DPRUN_REGISTER_OP_FACTS({.op_type = "SequenceConstruct"});
DPRUN_REGISTER_OP_FACTS({.op_type = "SequenceEmpty"});
DPRUN_REGISTER_OP_FACTS({.op_type = "SequenceErase"});
DPRUN_REGISTER_OP_FACTS({.op_type = "SequenceInsert"});
DPRUN_REGISTER_OP_FACTS({.op_type = "SequenceLength"});
DPRUN_REGISTER_OP_FACTS({.op_type = "SplitToSequence"});

}  // namespace
}  // namespace dprun
