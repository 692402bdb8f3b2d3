// RNN, GRU and LSTM: backpropagation through time, unrolled over the sequence.
//
// The node's outputs hold only the hidden states (and LSTM's last cell state), so the rule
// recomputes each direction's steps from the node's inputs, then walks them backwards. For
// direction d, with W_d [G*H, in], R_d [G*H, H], and the gates' pre-activations
//   A_t = X_t W_d^T + H_prev R_d^T + Wb + Rb   (X W_d^T of every step is one MatMul)
// in ONNX's gate order (LSTM i o f c, GRU z r h):
//   RNN   H_t = f(A_t), f = Tanh or Relu.            dA = dH * f'
//   LSTM  C_t = f*C_prev + i*g, H_t = o*tanh(C_t); peepholes P = [Pi Po Pf] add Pi*C_prev to
//         i, Pf*C_prev to f and Po*C_t to o.
//         dC = dC_next + dH*o*(1 - tanh^2 C_t) + dA_o*Po, dC_prev = dC*f + dA_i*Pi + dA_f*Pf
//   GRU   H_t = n + z*(H_prev - n), n = tanh(X_h + (r*H_prev) R_h^T + Rb_h + Wb_h), or with
//         linear_before_reset tanh(X_h + r*(H_prev R_h^T + Rb_h) + Wb_h): the recurrent
//         product of the h gate is scaled by r, so its rows of dR and dRb differ from dA's.
// dH_prev = the direct part (GRU's z*dH) + dA_rec R_d. With every step's dA stacked
// [seq*batch, G*H] in time order: dX = dA W_d, dW_d = dA^T X, dR_d = dA_rec^T H_prev,
// dWb and dRb the column sums of dA and dA_rec, dP from the peephole products.
//
// The sequence length must be known when the gradient is built (it is unrolled); the batch may
// be dynamic. sequence_lens is accepted only as a constant holding the full length for every
// batch entry. Activations: the defaults, and Relu for RNN; clip and input_forget are refused.
//
// The nodes are marked as one region for the CPU backend, which may run it as one fused oneDNN
// node (engine/rewrites/rnn_grad_fusion.h): the received gradients pass through Identities
// first, the given ones through Identities last, followed by an unread Constant describing
// which are which. The graph stays plain ONNX.
#include <algorithm>
#include <cctype>

#include "engine/rewrites/rnn_grad_fusion.h"
#include "ops/grad/grad_util.h"

namespace dprun {
namespace {

enum class Cell { Rnn, Gru, Lstm };

// What the node asks for, once checked against what the rule supports.
struct RnnAttrs {
  Cell cell = Cell::Lstm;
  int64_t gates = 4;
  int64_t dirs = 1;
  bool reverse = false;
  int64_t layout = 0;
  int64_t seq = 0;
  int64_t hidden = 0;
  bool linear_before_reset = false;
  std::vector<bool> relu;  // per direction (RNN only)
};

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

// Per direction, whether the RNN's activation is Relu. Only the default activations (and Relu
// for RNN, PyTorch's nonlinearity='relu') have derivatives here.
std::vector<bool> relu_per_direction(GradientContext& ctx, Cell cell, int64_t dirs) {
  std::vector<std::string> defaults = {"sigmoid", "tanh", "tanh"};
  if (cell == Cell::Gru) defaults = {"sigmoid", "tanh"};
  if (cell == Cell::Rnn) defaults = {"tanh"};
  const size_t per_dir = defaults.size();
  std::vector<std::string> names;
  if (ctx.node().has_attr("activations")) names = ctx.node().attr_strings("activations");
  std::vector<bool> relu(static_cast<size_t>(dirs), false);
  if (names.empty()) return relu;
  if (dirs == 2 && names.size() == per_dir) {  // one direction's list serves both
    const std::vector<std::string> once = names;
    names.insert(names.end(), once.begin(), once.end());
  }
  if (names.size() != per_dir * relu.size())
    ctx.fail("expected ", per_dir * relu.size(), " activations, got ", names.size());
  for (size_t k = 0; k < names.size(); ++k) {
    const std::string name = lowercase(names[k]);
    if (name == defaults[k % per_dir]) continue;
    if (cell == Cell::Rnn && name == "relu") {
      relu[k] = true;
      continue;
    }
    ctx.fail("activation '", names[k], "' is not supported (only the defaults",
             cell == Cell::Rnn ? " and Relu" : "", ")");
  }
  return relu;
}

// X's sequence axis must have a size known now: the recurrence is unrolled over it.
int64_t sequence_length(GradientContext& ctx, int64_t layout) {
  const size_t axis = layout == 0 ? 0 : 1;
  std::optional<SymbolicShape> shape;
  if (auto c = ctx.constant_value(ctx.I(0))) {
    shape = SymbolicShape{};
    for (int64_t d : c->shape()) shape->push_back(Dim::known(d));
  } else if (auto t = ctx.type_of(ctx.I(0)); t && t->shape) {
    shape = t->shape;
  }
  if (!shape || shape->size() != 3 || !(*shape)[axis].is_known())
    ctx.fail("the sequence length (dim ", axis, " of X '", ctx.I(0),
             "') must be known when the gradient is built, since the recurrence is unrolled over "
             "it: export the model with a fixed sequence length");
  return (*shape)[axis].value;
}

int64_t hidden_size(GradientContext& ctx) {
  if (ctx.node().has_attr("hidden_size")) return ctx.node().attr_int("hidden_size");
  if (auto r = grad::static_dims(ctx, ctx.I(2)); r && r->size() == 3) return (*r)[2];
  ctx.fail("hidden_size is not given and R's shape is unknown");
}

// Only the full length everywhere: shorter sequences would freeze states per batch entry.
void check_sequence_lens(GradientContext& ctx, int64_t seq) {
  if (ctx.input_count() <= 4 || ctx.I(4).empty()) return;
  auto lens = ctx.constant_value(ctx.I(4));
  if (!lens)
    ctx.fail("sequence_lens '", ctx.I(4), "' is not a constant; the gradient supports only ",
             "sequences of the full length ", seq, " (omit sequence_lens)");
  for (int64_t i = 0; i < lens->numel(); ++i)
    if (static_cast<int64_t>(lens->item_as_double(i)) != seq)
      ctx.fail("sequence_lens holds ", static_cast<int64_t>(lens->item_as_double(i)),
               "; the gradient supports only sequences of the full length ", seq);
}

RnnAttrs read_attrs(GradientContext& ctx, Cell cell) {
  const Node& node = ctx.node();
  // The biases and gates broadcast numpy-style (zeros at opsets 7 and 8: zeros_shaped_like).
  if (ctx.onnx_opset() < 7) ctx.fail("needs ai.onnx opset >= 7 (numpy broadcasting)");
  RnnAttrs a;
  a.cell = cell;
  a.gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  const std::string dir = node.attr_string("direction", "forward");
  if (dir == "reverse") a.reverse = true;
  if (dir == "bidirectional") a.dirs = 2;
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional")
    ctx.fail("direction '", dir, "' is not forward, reverse or bidirectional");
  a.layout = node.attr_int("layout", 0);
  if (a.layout != 0 && a.layout != 1) ctx.fail("layout must be 0 or 1, got ", a.layout);
  if (node.has_attr("clip")) ctx.fail("clip is not supported");
  if (node.attr_int("input_forget", 0) != 0) ctx.fail("input_forget=1 is not supported");
  a.linear_before_reset = node.attr_int("linear_before_reset", 0) != 0;
  a.relu = relu_per_direction(ctx, cell, a.dirs);
  a.seq = sequence_length(ctx, a.layout);
  a.hidden = hidden_size(ctx);
  check_sequence_lens(ctx, a.seq);
  return a;
}

// One direction's inputs, as the steps read them.
struct Direction {
  bool reverse = false;
  bool relu = false;
  std::string w, r, rt;                  // W_d [GH, in], R_d [GH, H], R_d^T
  std::string r_zr, r_h, r_zr_t, r_h_t;  // GRU without linear_before_reset: R_d by gates
  std::string xw, xw_h;                  // X W_d^T + biases [seq, batch, GH]; GRU: z r part, h part
  std::string rb_h;                      // GRU linear_before_reset: Rb's h part
  std::string pi, po, pf;                // LSTM peepholes
  std::string h0, c0;                    // initial states [batch, H]
};

// One time step's recomputed forward values. Empty names are absent values: the previous
// state of the first step when the node has no initial state.
struct Step {
  std::string h_prev, c_prev;
  std::string i, o, f, g, c, tanh_c;  // LSTM
  std::string zr, z, r, n, hmn, rec;  // GRU: hmn = h_prev - n; rec as in the header
  std::string h;
};

// One step's gradients.
struct StepGrad {
  std::string dx;        // dA [batch, GH]: rows of dX, dW and dWb
  std::string dr;        // dA_rec [batch, GH]: rows of dR and dRb
  std::string dzr, dan;  // GRU without linear_before_reset: dA of z r, and of h (for dR)
  std::string dh_prev, dc_prev;
  std::string dpi, dpo, dpf;  // peephole products, [batch, H]
};

// Builds the backward nodes of one RNN/GRU/LSTM node.
class Bptt {
 public:
  Bptt(GradientContext& ctx, RnnAttrs a) : ctx_(ctx), a_(std::move(a)) {
    dtype_ = ctx.dtype_of(ctx.I(0));
  }

  void run();

 private:
  bool has_input(size_t i) const { return ctx_.input_count() > i && !ctx_.I(i).empty(); }

  // ---- emission helpers ----
  std::string op(const std::string& type, std::vector<std::string> in,
                 std::map<std::string, Attribute> attrs = {}) {
    return ctx_.emit(type, std::move(in), std::move(attrs));
  }
  std::string add(const std::string& x, const std::string& y) { return op("Add", {x, y}); }
  std::string sub(const std::string& x, const std::string& y) { return op("Sub", {x, y}); }
  std::string mul(const std::string& x, const std::string& y) { return op("Mul", {x, y}); }
  std::string matmul(const std::string& x, const std::string& y) { return op("MatMul", {x, y}); }
  std::string transpose(const std::string& x, std::vector<int64_t> perm = {1, 0}) {
    return op("Transpose", {x}, {{"perm", Attribute::of_ints(std::move(perm))}});
  }
  // x + y where either may be absent.
  std::string add_opt(const std::string& x, const std::string& y) {
    if (x.empty()) return y;
    if (y.empty()) return x;
    return add(x, y);
  }
  std::string concat(const std::vector<std::string>& parts, int64_t axis) {
    if (parts.size() == 1) return parts[0];
    return op("Concat", parts, {{"axis", Attribute::of_int(axis)}});
  }
  // x[..., index, ...] along `axis`, the axis dropped.
  std::string pick(const std::string& x, int64_t index, int64_t axis = 0) {
    auto it = indices_.find(index);
    if (it == indices_.end())
      it = indices_.emplace(index, ctx_.constant(Tensor::scalar<int64_t>(index))).first;
    return op("Gather", {x, it->second}, {{"axis", Attribute::of_int(axis)}});
  }
  std::vector<std::string> split(const std::string& x, const std::vector<int64_t>& sizes,
                                 int64_t axis) {
    std::map<std::string, Attribute> attrs{{"axis", Attribute::of_int(axis)}};
    if (ctx_.onnx_opset() < 13) {
      attrs["split"] = Attribute::of_ints(sizes);
      return ctx_.emit_n("Split", {x}, sizes.size(), attrs);
    }
    return ctx_.emit_n("Split", {x, ctx_.ints(sizes)}, sizes.size(), attrs);
  }
  std::string one() {
    if (one_.empty()) one_ = ctx_.scalar(1, dtype_);
    return one_;
  }
  // dy * s * (1 - s) for s = sigmoid(a); dy * (1 - t^2) for t = tanh(a).
  std::string sigmoid_grad(const std::string& dy, const std::string& s) {
    return mul(dy, mul(s, sub(one(), s)));
  }
  std::string tanh_grad(const std::string& dy, const std::string& t) {
    return mul(dy, sub(one(), mul(t, t)));
  }
  // Zeros shaped like a [batch, H] value, built once.
  std::string zeros_like(const std::string& like) {
    if (zeros_.empty()) zeros_ = zeros_shaped_like(like);
    return zeros_;
  }
  // (grad::zeros_like needs a value whose type is known; emitted ones are typed only later.)
  // `like` is of X's type. Before opset 9, which has ConstantOfShape, the cast of
  // Greater(like, like): false everywhere, NaN included.
  std::string zeros_shaped_like(const std::string& like) {
    if (ctx_.onnx_opset() < 9) return ctx_.cast(op("Greater", {like, like}), dtype_);
    return grad::zeros_of_shape(ctx_, op("Shape", {like}), dtype_);
  }
  std::string column_sums(const std::string& x) {
    return grad::reduce(ctx_, "ReduceSum", x, {0}, false);
  }
  // A^T B for A, B stacked [rows, .] from per-step lists.
  std::string weight_grad(const std::vector<std::string>& a, const std::vector<std::string>& b) {
    return matmul(transpose(concat(a, 0)), concat(b, 0));
  }
  std::string stack_dirs(const std::vector<std::string>& per_dir) {
    std::vector<std::string> parts;
    for (const auto& v : per_dir) parts.push_back(ctx_.unsqueeze(v, {0}));
    return concat(parts, 0);
  }
  // A [dirs, batch, H] state (layout 1: [batch, dirs, H]) in the [dirs, batch, H] order.
  std::string state_major(const std::string& v) {
    return a_.layout == 0 ? v : transpose(v, {1, 0, 2});
  }

  // ---- the passes ----
  Direction direction(int64_t d);
  void add_biases(Direction& dir, int64_t d);
  std::vector<Step> forward(const Direction& dir);
  void rnn_step(const Direction& dir, Step& s, int64_t t);
  void lstm_step(const Direction& dir, Step& s, int64_t t);
  void gru_step(const Direction& dir, Step& s, int64_t t);
  std::vector<StepGrad> backward(const Direction& dir, const std::vector<Step>& steps, int64_t d);
  StepGrad rnn_back(const Direction& dir, const Step& s, const std::string& dh, bool need_prev);
  StepGrad lstm_back(const Direction& dir, const Step& s, const std::string& dh,
                     const std::string& dc, bool need_prev);
  StepGrad gru_back(const Direction& dir, const Step& s, const std::string& dh, bool need_prev);
  void input_grads(const Direction& dir, const std::vector<Step>& steps,
                   const std::vector<StepGrad>& grads);
  std::string recurrent_weight_grad(const Direction& dir, const std::vector<Step>& steps,
                                    const std::vector<StepGrad>& grads);
  std::string peephole_grad(const std::vector<Step>& steps, const std::vector<StepGrad>& grads);
  void set_results();

  GradientContext& ctx_;
  RnnAttrs a_;
  DType dtype_ = DType::Float32;
  std::map<int64_t, std::string> indices_;
  std::string one_, zeros_;
  std::string x_seq_major_, x_rows_;  // X as [seq, batch, in] and [seq*batch, in]
  std::string go_y_, go_h_, go_c_;    // output gradients in the layout 0 order
  std::string dx_;                    // dX [seq*batch, in], summed over the directions
  std::vector<std::string> dw_, dr_, db_, dp_, dh0_, dc0_;  // per direction
  int64_t received_[3] = {0, 0, 0};  // which output gradients the region reads
};

Direction Bptt::direction(int64_t d) {
  const int64_t H = a_.hidden;
  Direction dir;
  dir.reverse = a_.reverse || d == 1;
  dir.relu = a_.relu[static_cast<size_t>(d)];
  dir.w = pick(ctx_.I(1), d);
  dir.r = pick(ctx_.I(2), d);
  dir.xw = matmul(x_seq_major_, transpose(dir.w));
  if (a_.cell == Cell::Gru && !a_.linear_before_reset) {
    auto parts = split(dir.r, {2 * H, H}, 0);
    dir.r_zr = parts[0], dir.r_h = parts[1];
    dir.r_zr_t = transpose(parts[0]);
    dir.r_h_t = transpose(parts[1]);
  } else {
    dir.rt = transpose(dir.r);
  }
  add_biases(dir, d);
  if (has_input(7)) {
    auto p = split(pick(ctx_.I(7), d), {H, H, H}, 0);
    dir.pi = p[0], dir.po = p[1], dir.pf = p[2];
  }
  if (has_input(5)) dir.h0 = pick(state_major(ctx_.I(5)), d);
  if (a_.cell == Cell::Lstm && has_input(6)) dir.c0 = pick(state_major(ctx_.I(6)), d);
  return dir;
}

// Adds Wb + Rb to X W^T, but for GRU's h gate with linear_before_reset only Wb (Rb_h is
// scaled by r inside the step). GRU's X W^T is split into its z r and h parts.
void Bptt::add_biases(Direction& dir, int64_t d) {
  const int64_t H = a_.hidden, GH = a_.gates * H;
  std::string wb, rb;
  if (has_input(3)) {
    auto b = split(pick(ctx_.I(3), d), {GH, GH}, 0);
    wb = b[0], rb = b[1];
  }
  if (a_.cell != Cell::Gru) {
    if (!wb.empty()) dir.xw = add(dir.xw, add(wb, rb));
    return;
  }
  auto xw = split(dir.xw, {2 * H, H}, 2);
  dir.xw = xw[0], dir.xw_h = xw[1];
  if (wb.empty()) return;
  auto w = split(wb, {2 * H, H}, 0);
  auto r = split(rb, {2 * H, H}, 0);
  dir.xw = add(dir.xw, add(w[0], r[0]));
  if (a_.linear_before_reset) {
    dir.xw_h = add(dir.xw_h, w[1]);
    dir.rb_h = r[1];
  } else {
    dir.xw_h = add(dir.xw_h, add(w[1], r[1]));
  }
}

std::vector<Step> Bptt::forward(const Direction& dir) {
  std::vector<Step> steps(static_cast<size_t>(a_.seq));  // by time index
  std::string h = dir.h0, c = dir.c0;
  for (int64_t p = 0; p < a_.seq; ++p) {
    const int64_t t = dir.reverse ? a_.seq - 1 - p : p;
    Step& s = steps[static_cast<size_t>(t)];
    s.h_prev = h;
    s.c_prev = c;
    if (a_.cell == Cell::Rnn) rnn_step(dir, s, t);
    if (a_.cell == Cell::Lstm) lstm_step(dir, s, t);
    if (a_.cell == Cell::Gru) gru_step(dir, s, t);
    h = s.h;
    c = s.c;
  }
  return steps;
}

void Bptt::rnn_step(const Direction& dir, Step& s, int64_t t) {
  std::string pre = pick(dir.xw, t);
  if (!s.h_prev.empty()) pre = add(pre, matmul(s.h_prev, dir.rt));
  s.h = op(dir.relu ? "Relu" : "Tanh", {pre});
}

void Bptt::lstm_step(const Direction& dir, Step& s, int64_t t) {
  const int64_t H = a_.hidden;
  std::string pre = pick(dir.xw, t);
  if (!s.h_prev.empty()) pre = add(pre, matmul(s.h_prev, dir.rt));
  auto a = split(pre, {H, H, H, H}, 1);  // i o f c
  const bool peep = !dir.pi.empty() && !s.c_prev.empty();
  s.i = op("Sigmoid", {peep ? add(a[0], mul(dir.pi, s.c_prev)) : a[0]});
  s.g = op("Tanh", {a[3]});
  s.c = mul(s.i, s.g);
  if (!s.c_prev.empty()) {  // without a previous cell state f has no effect
    s.f = op("Sigmoid", {peep ? add(a[2], mul(dir.pf, s.c_prev)) : a[2]});
    s.c = add(mul(s.f, s.c_prev), s.c);
  }
  s.o = op("Sigmoid", {dir.po.empty() ? a[1] : add(a[1], mul(dir.po, s.c))});
  s.tanh_c = op("Tanh", {s.c});
  s.h = mul(s.o, s.tanh_c);
}

void Bptt::gru_step(const Direction& dir, Step& s, int64_t t) {
  const int64_t H = a_.hidden;
  std::string zr = pick(dir.xw, t), xh = pick(dir.xw_h, t);
  std::string hr_h;  // with linear_before_reset: H_prev R_h^T + Rb_h
  if (!s.h_prev.empty() && a_.linear_before_reset) {
    auto hr = split(matmul(s.h_prev, dir.rt), {2 * H, H}, 1);
    zr = add(zr, hr[0]);
    hr_h = hr[1];
  } else if (!s.h_prev.empty()) {
    zr = add(zr, matmul(s.h_prev, dir.r_zr_t));
  }
  s.zr = op("Sigmoid", {zr});
  auto gates = split(s.zr, {H, H}, 1);
  s.z = gates[0], s.r = gates[1];
  std::string pre = xh;
  if (a_.linear_before_reset) {
    s.rec = add_opt(hr_h, dir.rb_h);
    if (!s.rec.empty()) pre = add(pre, mul(s.r, s.rec));
  } else if (!s.h_prev.empty()) {
    s.rec = mul(s.r, s.h_prev);
    pre = add(pre, matmul(s.rec, dir.r_h_t));
  }
  s.n = op("Tanh", {pre});
  s.hmn = s.h_prev.empty() ? op("Neg", {s.n}) : sub(s.h_prev, s.n);
  s.h = add(s.n, mul(s.z, s.hmn));
}

std::vector<StepGrad> Bptt::backward(const Direction& dir, const std::vector<Step>& steps,
                                     int64_t d) {
  std::vector<StepGrad> grads(steps.size());
  std::string go_y = go_y_.empty() ? "" : pick(go_y_, d, 1);  // [seq, batch, H]
  std::string dh = go_h_.empty() ? "" : pick(go_h_, d);
  std::string dc = go_c_.empty() ? "" : pick(go_c_, d);
  const bool want_initial = ctx_.wants_GI(5) || ctx_.wants_GI(6);
  for (int64_t p = a_.seq - 1; p >= 0; --p) {
    const int64_t t = dir.reverse ? a_.seq - 1 - p : p;
    const Step& s = steps[static_cast<size_t>(t)];
    if (!go_y.empty()) dh = add_opt(dh, pick(go_y, t));
    // Only LSTM's Y_c can bring a gradient without one for the hidden state.
    if (dh.empty() && (a_.cell != Cell::Lstm || dc.empty())) dh = zeros_like(s.h);
    const bool need_prev = p > 0 || want_initial;
    StepGrad& g = grads[static_cast<size_t>(t)];
    if (a_.cell == Cell::Rnn) g = rnn_back(dir, s, dh, need_prev);
    if (a_.cell == Cell::Lstm) g = lstm_back(dir, s, dh, dc, need_prev);
    if (a_.cell == Cell::Gru) g = gru_back(dir, s, dh, need_prev);
    dh = g.dh_prev;
    dc = g.dc_prev;
  }
  dh0_.push_back(dh);
  dc0_.push_back(dc);
  return grads;
}

StepGrad Bptt::rnn_back(const Direction& dir, const Step& s, const std::string& dh,
                        bool need_prev) {
  StepGrad g;
  if (dir.relu) {
    std::string positive = op("Greater", {s.h, ctx_.scalar(0, dtype_)});
    g.dx = mul(dh, ctx_.cast(positive, dtype_));
  } else {
    g.dx = tanh_grad(dh, s.h);
  }
  g.dr = g.dx;
  if (need_prev && !s.h_prev.empty()) g.dh_prev = matmul(g.dx, dir.r);
  return g;
}

StepGrad Bptt::lstm_back(const Direction& dir, const Step& s, const std::string& dh,
                         const std::string& dc, bool need_prev) {
  StepGrad g;
  std::string dc_total = dc, dao;
  if (!dh.empty()) {
    dao = sigmoid_grad(mul(dh, s.tanh_c), s.o);
    dc_total = add_opt(dc_total, tanh_grad(mul(dh, s.o), s.tanh_c));
    if (!dir.po.empty()) {
      dc_total = add(dc_total, mul(dao, dir.po));
      g.dpo = mul(dao, s.c);
    }
  } else {
    dao = zeros_like(s.h);
  }
  std::string dai = sigmoid_grad(mul(dc_total, s.g), s.i);
  std::string dag = tanh_grad(mul(dc_total, s.i), s.g);
  std::string daf = zeros_like(s.h);
  if (!s.c_prev.empty()) {
    daf = sigmoid_grad(mul(dc_total, s.c_prev), s.f);
    if (need_prev) g.dc_prev = mul(dc_total, s.f);
    if (!dir.pi.empty()) {
      if (need_prev) g.dc_prev = add(g.dc_prev, add(mul(dai, dir.pi), mul(daf, dir.pf)));
      g.dpi = mul(dai, s.c_prev);
      g.dpf = mul(daf, s.c_prev);
    }
  }
  g.dx = g.dr = concat({dai, dao, daf, dag}, 1);
  if (need_prev && !s.h_prev.empty()) g.dh_prev = matmul(g.dx, dir.r);
  return g;
}

StepGrad Bptt::gru_back(const Direction& dir, const Step& s, const std::string& dh,
                        bool need_prev) {
  StepGrad g;
  std::string dh_direct = mul(dh, s.z);
  std::string dan = tanh_grad(sub(dh, dh_direct), s.n);  // dn = dh * (1 - z)
  std::string dz = mul(dh, s.hmn);
  // r only acts through rec: without it (first step, no initial state or bias) dr is 0.
  std::string dr = zeros_like(s.h), drh;
  if (a_.linear_before_reset && !s.rec.empty()) dr = mul(dan, s.rec);
  if (!a_.linear_before_reset && !s.h_prev.empty()) {
    drh = matmul(dan, dir.r_h);  // the gradient of r * H_prev
    dr = mul(drh, s.h_prev);
  }
  g.dzr = sigmoid_grad(concat({dz, dr}, 1), s.zr);
  g.dx = concat({g.dzr, dan}, 1);
  g.dan = dan;
  g.dr = a_.linear_before_reset ? concat({g.dzr, mul(dan, s.r)}, 1) : g.dx;
  if (!need_prev || s.h_prev.empty()) return g;
  if (a_.linear_before_reset) {
    g.dh_prev = add(dh_direct, matmul(g.dr, dir.r));
  } else {
    g.dh_prev = add(add(dh_direct, mul(drh, s.r)), matmul(g.dzr, dir.r_zr));
  }
  return g;
}

// dR_d = dA_rec^T H_prev over the steps that have a previous state (GRU without
// linear_before_reset: its h gate's rows against r * H_prev).
std::string Bptt::recurrent_weight_grad(const Direction& dir, const std::vector<Step>& steps,
                                        const std::vector<StepGrad>& grads) {
  std::vector<std::string> dr, dzr, dan, h_prev, rec;
  for (size_t t = 0; t < steps.size(); ++t) {
    if (steps[t].h_prev.empty()) continue;
    h_prev.push_back(steps[t].h_prev);
    dr.push_back(grads[t].dr);
    if (a_.cell == Cell::Gru && !a_.linear_before_reset) {
      dzr.push_back(grads[t].dzr);
      dan.push_back(grads[t].dan);
      rec.push_back(steps[t].rec);
    }
  }
  if (h_prev.empty()) return zeros_shaped_like(dir.r);  // one step, no initial state
  if (dzr.empty()) return weight_grad(dr, h_prev);
  return concat({weight_grad(dzr, h_prev), weight_grad(dan, rec)}, 0);
}

// dP = [sum dA_i*C_prev, sum dA_o*C, sum dA_f*C_prev] over steps and batch.
std::string Bptt::peephole_grad(const std::vector<Step>& steps,
                                const std::vector<StepGrad>& grads) {
  std::vector<std::string> parts;
  for (auto member : {&StepGrad::dpi, &StepGrad::dpo, &StepGrad::dpf}) {
    std::vector<std::string> rows;
    for (const auto& g : grads)
      if (!(g.*member).empty()) rows.push_back(g.*member);
    if (rows.empty()) {  // one step without an initial cell state, or no gradient on o
      rows.push_back(zeros_like(steps[0].h));
    }
    parts.push_back(column_sums(concat(rows, 0)));
  }
  return concat(parts, 0);
}

void Bptt::input_grads(const Direction& dir, const std::vector<Step>& steps,
                       const std::vector<StepGrad>& grads) {
  std::vector<std::string> dx_rows, dr_rows;
  for (const auto& g : grads) {
    dx_rows.push_back(g.dx);
    dr_rows.push_back(g.dr);
  }
  const std::string dx = concat(dx_rows, 0);  // [seq*batch, GH] in time order, as x_rows_
  if (ctx_.wants_GI(0)) dx_ = add_opt(dx_, matmul(dx, dir.w));
  if (ctx_.wants_GI(1)) dw_.push_back(matmul(transpose(dx), x_rows_));
  if (ctx_.wants_GI(2)) dr_.push_back(recurrent_weight_grad(dir, steps, grads));
  if (ctx_.wants_GI(3))
    db_.push_back(concat({column_sums(dx), column_sums(concat(dr_rows, 0))}, 0));
  if (ctx_.wants_GI(7) && a_.cell == Cell::Lstm) dp_.push_back(peephole_grad(steps, grads));
}

void Bptt::set_results() {
  std::string given[8];
  if (!dx_.empty()) {
    std::string dx = ctx_.reshape_like(dx_, x_seq_major_);
    given[0] = a_.layout == 0 ? dx : transpose(dx, {1, 0, 2});
  }
  if (!dw_.empty()) given[1] = stack_dirs(dw_);
  if (!dr_.empty()) given[2] = stack_dirs(dr_);
  if (!db_.empty()) given[3] = stack_dirs(db_);
  if (!dp_.empty()) given[7] = stack_dirs(dp_);
  auto initial = [&](size_t input, const std::vector<std::string>& per_dir) {
    if (!ctx_.wants_GI(input)) return;
    for (const auto& v : per_dir)
      if (v.empty()) return;  // no gradient reached it (it cannot: wants_GI says it does)
    given[input] = state_major(stack_dirs(per_dir));
  };
  initial(5, dh0_);
  if (a_.cell == Cell::Lstm) initial(6, dc0_);
  // The region's end (engine/rewrites/rnn_grad_fusion.h): an Identity per given gradient in
  // input order, then the table.
  std::vector<int64_t> table = {kRnnGradMagic, kRnnGradVersion};
  table.insert(table.end(), received_, received_ + 3);
  for (size_t k = 0; k < 8; ++k) {
    const bool give = !given[k].empty() && ctx_.wants_GI(k);
    if (give) ctx_.set_GI(k, op("Identity", {given[k]}));
    table.push_back(give ? 1 : 0);
  }
  ctx_.ints(table);
}

void Bptt::run() {
  // The region's start (engine/rewrites/rnn_grad_fusion.h): an Identity per received gradient.
  std::string go[3];
  for (size_t k = 0; k < 3; ++k)
    if (ctx_.has_GO(k) && (k < 2 || a_.cell == Cell::Lstm)) {
      go[k] = op("Identity", {ctx_.GO(k)});
      received_[k] = 1;
    }
  x_seq_major_ = a_.layout == 0 ? ctx_.I(0) : transpose(ctx_.I(0), {1, 0, 2});
  x_rows_ = op("Flatten", {x_seq_major_}, {{"axis", Attribute::of_int(2)}});
  if (!go[0].empty()) go_y_ = a_.layout == 0 ? go[0] : transpose(go[0], {1, 2, 0, 3});
  if (!go[1].empty()) go_h_ = state_major(go[1]);
  if (!go[2].empty()) go_c_ = state_major(go[2]);
  for (int64_t d = 0; d < a_.dirs; ++d) {
    Direction dir = direction(d);
    std::vector<Step> steps = forward(dir);
    input_grads(dir, steps, backward(dir, steps, d));
  }
  set_results();
}

void rnn_grad(GradientContext& ctx) {
  Bptt(ctx, read_attrs(ctx, Cell::Rnn)).run();
}
void gru_grad(GradientContext& ctx) {
  Bptt(ctx, read_attrs(ctx, Cell::Gru)).run();
}
void lstm_grad(GradientContext& ctx) {
  Bptt(ctx, read_attrs(ctx, Cell::Lstm)).run();
}

DPRUN_REGISTER_GRADIENT({.op_type = "RNN", .since = 1, .rule = rnn_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "GRU", .since = 1, .rule = gru_grad});
DPRUN_REGISTER_GRADIENT({.op_type = "LSTM", .since = 1, .rule = lstm_grad});

}  // namespace
}  // namespace dprun
