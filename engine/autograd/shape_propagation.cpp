#include "engine/autograd/shape_propagation.h"

#include <algorithm>
#include <set>

namespace dprun {

namespace {

using Shape_ = std::optional<SymbolicShape>;

const std::set<std::string>& same_shape_ops() {
  static const std::set<std::string> ops = {"Abs",
                                            "Acos",
                                            "Acosh",
                                            "Asin",
                                            "Asinh",
                                            "Atan",
                                            "Atanh",
                                            "BatchNormalization",
                                            "Cast",
                                            "CastLike",
                                            "Ceil",
                                            "Celu",
                                            "Clip",
                                            "Cos",
                                            "Cosh",
                                            "CumSum",
                                            "Dropout",
                                            "Elu",
                                            "Erf",
                                            "Exp",
                                            "Floor",
                                            "Gelu",
                                            "GroupNormalization",
                                            "HardSigmoid",
                                            "HardSwish",
                                            "Hardmax",
                                            "Identity",
                                            "InstanceNormalization",
                                            "IsInf",
                                            "IsNaN",
                                            "LRN",
                                            "LayerNormalization",
                                            "LeakyRelu",
                                            "Log",
                                            "LogSoftmax",
                                            "LpNormalization",
                                            "MeanVarianceNormalization",
                                            "Mish",
                                            "Neg",
                                            "Not",
                                            "PRelu",
                                            "Reciprocal",
                                            "Relu",
                                            "ReverseSequence",
                                            "Round",
                                            "Selu",
                                            "Shrink",
                                            "Sigmoid",
                                            "Sign",
                                            "Sin",
                                            "Sinh",
                                            "Softmax",
                                            "Softplus",
                                            "Softsign",
                                            "Sqrt",
                                            "Tan",
                                            "Tanh",
                                            "ThresholdedRelu",
                                            "Trilu"};
  return ops;
}

const std::set<std::string>& broadcasting_ops() {
  static const std::set<std::string> ops = {
      "Add",  "And",         "BitShift", "Div",  "Equal", "Greater", "GreaterOrEqual",
      "Less", "LessOrEqual", "Max",      "Mean", "Min",   "Mod",     "Mul",
      "Or",   "Pow",         "Sub",      "Sum",  "Where", "Xor"};
  return ops;
}

// Conv and pools: [N, C, D1, ...] in and out.
const std::set<std::string>& windowed_ops() {
  static const std::set<std::string> ops = {
      "AveragePool",  "Conv",          "ConvInteger", "ConvTranspose", "GlobalAveragePool",
      "GlobalLpPool", "GlobalMaxPool", "LpPool",      "MaxPool"};
  return ops;
}

// Ops whose output has the input's rank but dims that depend on values or attributes.
const std::set<std::string>& same_rank_ops() {
  static const std::set<std::string> ops = {"DepthToSpace", "Pad",  "Resize",  "Slice",
                                            "SpaceToDepth", "Tile", "Upsample"};
  return ops;
}

const std::set<std::string>& reduce_ops() {
  static const std::set<std::string> ops = {
      "ArgMax",    "ArgMin",     "ReduceL1",  "ReduceL2",   "ReduceLogSum", "ReduceLogSumExp",
      "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",    "ReduceSumSquare"};
  return ops;
}

std::optional<int64_t> axis_in(int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) return std::nullopt;
  return a;
}

SymbolicShape unknown_dims(size_t rank) {
  return SymbolicShape(rank);
}

Dim product(const SymbolicShape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) {
    if (!s[i].is_known()) return Dim{};
    p *= s[i].value;
  }
  return Dim::known(p);
}

class Propagator {
 public:
  Propagator(const Node& node, size_t output, const ShapeSource& source)
      : node_(node), output_(output), source_(source) {}

  Shape_ run() const {
    const std::string& op = node_.op_type;
    if (same_shape_ops().count(op)) {
      bool covered = output_ == 0 || (op == "Dropout" && output_ == 1);
      return covered ? input(0) : std::nullopt;
    }
    if (broadcasting_ops().count(op)) return output_ == 0 ? broadcast() : std::nullopt;
    if (windowed_ops().count(op)) return windowed();
    if (same_rank_ops().count(op)) {
      auto x = input(0);
      return x ? Shape_(unknown_dims(x->size())) : std::nullopt;
    }
    if (reduce_ops().count(op)) return reduce();
    if (op == "Transpose") return transpose();
    if (op == "MatMul") return matmul();
    if (op == "Gemm") return gemm();
    if (op == "Reshape") return reshape();
    if (op == "Flatten") return flatten();
    if (op == "Unsqueeze") return unsqueeze();
    if (op == "Squeeze") return squeeze();
    if (op == "Concat") return concat();
    if (op == "Gather") return gather();
    if (op == "Shape") return shape_of();
    if (op == "Size") return SymbolicShape{};
    if (op == "NonZero") {  // [rank of the input, number of nonzero elements]
      auto x = input(0);
      return x ? Shape_(SymbolicShape{Dim::known(static_cast<int64_t>(x->size())), Dim{}})
               : std::nullopt;
    }
    if (op == "RNN" || op == "GRU" || op == "LSTM") return recurrent();
    if (op == "Expand") return expand();
    if (op == "ConstantOfShape") return constant_of_shape();
    if (op == "Constant" && node_.has_attr("value"))
      return from_dims(node_.attr_tensor("value").shape());
    return std::nullopt;
  }

 private:
  Shape_ input(size_t i) const {
    if (i >= node_.inputs.size() || node_.inputs[i].empty()) return std::nullopt;
    return source_.shape(node_.inputs[i]);
  }

  std::optional<Tensor> constant(size_t i) const {
    if (i >= node_.inputs.size() || node_.inputs[i].empty()) return std::nullopt;
    return source_.constant(node_.inputs[i]);
  }

  static SymbolicShape from_dims(const Shape& dims) {
    SymbolicShape s;
    for (int64_t d : dims) s.push_back(Dim::known(d));
    return s;
  }

  // Integer values of a 1-D constant input, or of the attribute `attr` (older opsets).
  std::optional<std::vector<int64_t>> ints_from(size_t i, const std::string& attr) const {
    if (node_.has_attr(attr)) return node_.attr_ints(attr);
    auto c = constant(i);
    if (!c) return std::nullopt;
    std::vector<int64_t> v;
    for (int64_t k = 0; k < c->numel(); ++k)
      v.push_back(static_cast<int64_t>(c->item_as_double(k)));
    return v;
  }

  // The length of a 1-D input (a shape or axes list) when its own shape is known.
  std::optional<int64_t> length_of(size_t i) const {
    if (auto c = constant(i); c && c->rank() == 1) return c->numel();
    auto s = input(i);
    if (!s || s->size() != 1 || !(*s)[0].is_known()) return std::nullopt;
    return (*s)[0].value;
  }

  Shape_ broadcast() const {
    if (node_.has_attr("broadcast")) return std::nullopt;  // legacy, axis-aligned broadcasting
    Shape_ result;
    for (size_t i = 0; i < node_.inputs.size(); ++i) {
      auto s = input(i);
      if (!s) return std::nullopt;
      result = result ? broadcast_symbolic(*result, *s) : s;
      if (!result) return std::nullopt;
    }
    return result;
  }

  Shape_ windowed() const {
    const std::string& op = node_.op_type;
    bool indices = op == "MaxPool" && output_ == 1;
    if (output_ != 0 && !indices) return std::nullopt;
    auto x = input(0);
    if (!x || x->size() < 2) return std::nullopt;
    SymbolicShape out = unknown_dims(x->size());
    out[0] = (*x)[0];
    if (op == "Conv" || op == "ConvInteger" || op == "ConvTranspose") {
      auto w = input(1);
      if (auto c = constant(1)) w = from_dims(c->shape());
      if (w && w->size() == x->size()) {
        if (op != "ConvTranspose") {
          out[1] = (*w)[0];
        } else if ((*w)[1].is_known()) {
          out[1] = Dim::known((*w)[1].value * node_.attr_int("group", 1));
        }
      }
    } else {
      out[1] = (*x)[1];
    }
    if (op.rfind("Global", 0) == 0)
      for (size_t i = 2; i < out.size(); ++i) out[i] = Dim::known(1);
    return out;
  }

  Shape_ reduce() const {
    auto x = input(0);
    if (!x) return std::nullopt;
    int64_t rank = static_cast<int64_t>(x->size());
    bool keepdims = node_.attr_int("keepdims", 1) != 0;
    std::vector<int64_t> axes;
    if (node_.op_type == "ArgMax" || node_.op_type == "ArgMin") {
      axes = {node_.attr_int("axis", 0)};
    } else {
      bool axes_input = node_.inputs.size() > 1 && !node_.inputs[1].empty();
      auto given = ints_from(1, "axes");
      if (!given && axes_input)  // axes fed at run time: only keepdims tells the rank
        return keepdims ? Shape_(unknown_dims(x->size())) : std::nullopt;
      if (given) axes = *given;
      if (axes.empty() && node_.attr_int("noop_with_empty_axes", 0) != 0) return x;
      if (axes.empty())
        for (int64_t a = 0; a < rank; ++a) axes.push_back(a);
    }
    std::vector<bool> reduced(x->size(), false);
    for (int64_t a : axes) {
      auto n = axis_in(a, rank);
      if (!n) return std::nullopt;
      reduced[static_cast<size_t>(*n)] = true;
    }
    SymbolicShape out;
    for (size_t i = 0; i < x->size(); ++i) {
      if (!reduced[i])
        out.push_back((*x)[i]);
      else if (keepdims)
        out.push_back(Dim::known(1));
    }
    return out;
  }

  Shape_ transpose() const {
    auto x = input(0);
    if (!x) return std::nullopt;
    std::vector<int64_t> perm = node_.attr_ints("perm", {});
    if (perm.empty())
      for (size_t i = x->size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    if (perm.size() != x->size()) return std::nullopt;
    SymbolicShape out;
    for (int64_t p : perm) {
      if (p < 0 || p >= static_cast<int64_t>(x->size())) return std::nullopt;
      out.push_back((*x)[static_cast<size_t>(p)]);
    }
    return out;
  }

  Shape_ matmul() const {
    auto a = input(0), b = input(1);
    if (!a || !b || a->empty() || b->empty()) return std::nullopt;
    bool a_vector = a->size() == 1, b_vector = b->size() == 1;
    SymbolicShape sa = *a, sb = *b;
    if (a_vector) sa.insert(sa.begin(), Dim::known(1));
    if (b_vector) sb.push_back(Dim::known(1));
    SymbolicShape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
    auto batch = broadcast_symbolic(batch_a, batch_b);
    SymbolicShape out = batch ? *batch : unknown_dims(std::max(batch_a.size(), batch_b.size()));
    if (!a_vector) out.push_back(sa[sa.size() - 2]);
    if (!b_vector) out.push_back(sb.back());
    return out;
  }

  Shape_ gemm() const {
    auto a = input(0), b = input(1);
    if (auto c = constant(1)) b = from_dims(c->shape());
    SymbolicShape out = unknown_dims(2);
    if (a && a->size() == 2) out[0] = (*a)[node_.attr_int("transA", 0) != 0 ? 1 : 0];
    if (b && b->size() == 2) out[1] = (*b)[node_.attr_int("transB", 0) != 0 ? 0 : 1];
    return out;
  }

  Shape_ reshape() const {
    std::optional<std::vector<int64_t>> target = ints_from(1, "shape");
    if (!target) {
      auto rank = length_of(1);
      return rank ? Shape_(unknown_dims(static_cast<size_t>(*rank))) : std::nullopt;
    }
    auto x = input(0);
    bool allow_zero = node_.attr_int("allowzero", 0) != 0;
    SymbolicShape out;
    for (size_t i = 0; i < target->size(); ++i) {
      int64_t v = (*target)[i];
      if (v == 0 && !allow_zero)
        out.push_back(x && i < x->size() ? (*x)[i] : Dim{});
      else if (v < 0)
        out.push_back(Dim{});
      else
        out.push_back(Dim::known(v));
    }
    return out;
  }

  Shape_ flatten() const {
    auto x = input(0);
    if (!x) return SymbolicShape(2);
    int64_t rank = static_cast<int64_t>(x->size());
    int64_t axis = node_.attr_int("axis", 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis > rank) return std::nullopt;
    return SymbolicShape{product(*x, 0, static_cast<size_t>(axis)),
                         product(*x, static_cast<size_t>(axis), x->size())};
  }

  Shape_ unsqueeze() const {
    auto x = input(0);
    auto axes = ints_from(1, "axes");
    if (!x || !axes) return std::nullopt;
    int64_t rank = static_cast<int64_t>(x->size() + axes->size());
    std::vector<bool> inserted(static_cast<size_t>(rank), false);
    for (int64_t a : *axes) {
      auto n = axis_in(a, rank);
      if (!n) return std::nullopt;
      inserted[static_cast<size_t>(*n)] = true;
    }
    SymbolicShape out;
    size_t next = 0;
    for (int64_t i = 0; i < rank; ++i) {
      if (inserted[static_cast<size_t>(i)])
        out.push_back(Dim::known(1));
      else if (next < x->size())
        out.push_back((*x)[next++]);
      else
        return std::nullopt;
    }
    return out;
  }

  Shape_ squeeze() const {
    auto x = input(0);
    if (!x) return std::nullopt;
    bool axes_input = node_.inputs.size() > 1 && !node_.inputs[1].empty();
    auto axes = ints_from(1, "axes");
    if (axes_input && !axes) return std::nullopt;
    int64_t rank = static_cast<int64_t>(x->size());
    std::vector<bool> removed(x->size(), false);
    if (!axes || axes->empty()) {
      for (size_t i = 0; i < x->size(); ++i) {
        if (!(*x)[i].is_known()) return std::nullopt;  // maybe 1, maybe not
        removed[i] = (*x)[i].value == 1;
      }
    } else {
      for (int64_t a : *axes) {
        auto n = axis_in(a, rank);
        if (!n) return std::nullopt;
        removed[static_cast<size_t>(*n)] = true;
      }
    }
    SymbolicShape out;
    for (size_t i = 0; i < x->size(); ++i)
      if (!removed[i]) out.push_back((*x)[i]);
    return out;
  }

  Shape_ concat() const {
    Shape_ first;
    bool all_known = true;
    int64_t total = 0;
    std::optional<size_t> axis;
    for (size_t i = 0; i < node_.inputs.size(); ++i) {
      auto s = input(i);
      if (!s) {
        all_known = false;
        continue;
      }
      auto a = axis_in(node_.attr_int("axis", 0), static_cast<int64_t>(s->size()));
      if (!a) return std::nullopt;
      axis = static_cast<size_t>(*a);
      if (!first) first = s;
      const Dim& d = (*s)[*axis];
      if (d.is_known())
        total += d.value;
      else
        all_known = false;
    }
    if (!first) return std::nullopt;
    (*first)[*axis] = all_known ? Dim::known(total) : Dim{};
    return first;
  }

  Shape_ gather() const {
    auto data = input(0);
    auto indices = input(1);
    if (auto c = constant(1)) indices = from_dims(c->shape());
    if (!data || !indices) return std::nullopt;
    auto axis = axis_in(node_.attr_int("axis", 0), static_cast<int64_t>(data->size()));
    if (!axis) return std::nullopt;
    SymbolicShape out(data->begin(), data->begin() + *axis);
    out.insert(out.end(), indices->begin(), indices->end());
    out.insert(out.end(), data->begin() + *axis + 1, data->end());
    return out;
  }

  Shape_ shape_of() const {
    auto x = input(0);
    if (!x) return SymbolicShape(1);  // 1-D whatever the input: its length is its rank
    int64_t rank = static_cast<int64_t>(x->size());
    auto clamp = [&](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
    int64_t start = clamp(node_.attr_int("start", 0));
    int64_t end = clamp(node_.attr_int("end", rank));
    return SymbolicShape{Dim::known(std::max<int64_t>(end - start, 0))};
  }

  Shape_ expand() const {
    auto x = input(0);
    if (!x) return std::nullopt;
    if (auto c = constant(1)) {
      SymbolicShape target;
      for (int64_t k = 0; k < c->numel(); ++k)
        target.push_back(Dim::known(static_cast<int64_t>(c->item_as_double(k))));
      if (auto out = broadcast_symbolic(*x, target)) return out;
      return unknown_dims(std::max(x->size(), target.size()));
    }
    auto length = length_of(1);
    if (!length) return std::nullopt;
    return unknown_dims(std::max(x->size(), static_cast<size_t>(*length)));
  }

  // RNN, GRU, LSTM: Y [seq, dirs, batch, H] (layout 1: [batch, seq, dirs, H]), the states
  // [dirs, batch, H] (layout 1: [batch, dirs, H]); seq and batch from X, H from hidden_size.
  Shape_ recurrent() const {
    auto x = input(0);
    if (!x || x->size() != 3) return std::nullopt;
    const bool batch_first = node_.attr_int("layout", 0) == 1;
    const Dim seq = (*x)[batch_first ? 1 : 0], batch = (*x)[batch_first ? 0 : 1];
    const Dim dirs =
        Dim::known(node_.attr_string("direction", "forward") == "bidirectional" ? 2 : 1);
    const Dim hidden =
        node_.has_attr("hidden_size") ? Dim::known(node_.attr_int("hidden_size")) : Dim{};
    if (output_ == 0)
      return batch_first ? SymbolicShape{batch, seq, dirs, hidden}
                         : SymbolicShape{seq, dirs, batch, hidden};
    return batch_first ? SymbolicShape{batch, dirs, hidden} : SymbolicShape{dirs, batch, hidden};
  }

  // ConstantOfShape: its input holds the output's dims; its length is the output's rank.
  Shape_ constant_of_shape() const {
    if (auto c = constant(0)) {
      SymbolicShape dims;
      for (int64_t k = 0; k < c->numel(); ++k)
        dims.push_back(Dim::known(static_cast<int64_t>(c->item_as_double(k))));
      return dims;
    }
    auto length = length_of(0);
    if (!length) return std::nullopt;
    return unknown_dims(static_cast<size_t>(*length));
  }

  const Node& node_;
  size_t output_;
  const ShapeSource& source_;
};

}  // namespace

bool same_dim(const Dim& a, const Dim& b) {
  if (a.is_known() || b.is_known()) return a.is_known() && b.is_known() && a.value == b.value;
  return !a.symbol.empty() && a.symbol == b.symbol;
}

std::optional<SymbolicShape> broadcast_symbolic(const SymbolicShape& a, const SymbolicShape& b) {
  size_t rank = std::max(a.size(), b.size());
  SymbolicShape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const Dim* da = i + a.size() >= rank ? &a[i + a.size() - rank] : nullptr;
    const Dim* db = i + b.size() >= rank ? &b[i + b.size() - rank] : nullptr;
    if (!da || (db && da->is_known() && da->value == 1)) {
      out[i] = *db;
    } else if (!db || (db->is_known() && db->value == 1)) {
      out[i] = *da;
    } else if (da->is_known() || db->is_known()) {
      // A size other than 1 is the result: the other side is 1 or the same size.
      if (da->is_known() && db->is_known() && da->value != db->value) return std::nullopt;
      out[i] = da->is_known() ? *da : *db;
    } else if (same_dim(*da, *db)) {
      out[i] = *da;
    }  // else two symbols, either may be 1: unknown
  }
  return out;
}

std::optional<SymbolicShape> propagate_shape(const Node& node, size_t output,
                                             const ShapeSource& source) {
  if (!canonical_domain(node.domain).empty() || output >= node.outputs.size()) return std::nullopt;
  return Propagator(node, output, source).run();
}

}  // namespace dprun
