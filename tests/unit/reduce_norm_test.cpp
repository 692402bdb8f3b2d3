// Reduce*, ArgMax/ArgMin, CumSum and TopK against naive references written here.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>

#include "op_test_util.h"
#include "unit/reduce_norm_test_util.h"

namespace dprun {
namespace {

using testing::make_node;
using testing::run_node;
using namespace reduce_norm_test;

/// Naive reduction: groups every input element by its output index, then applies `f`.
struct NaiveReduce {
  Shape out_shape;
  std::vector<double> out;
};
NaiveReduce naive_reduce(const Tensor& x, std::vector<int64_t> axes, bool keepdims,
                         const std::function<double(const std::vector<double>&)>& f) {
  const int64_t rank = x.rank();
  std::vector<bool> red(static_cast<size_t>(rank), axes.empty());
  for (auto a : axes) red[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  Shape kept_shape, out_shape;
  for (int64_t d = 0; d < rank; ++d) {
    if (!red[d]) kept_shape.push_back(x.shape()[d]);
    if (!red[d] || keepdims) out_shape.push_back(red[d] ? 1 : x.shape()[d]);
  }
  std::vector<std::vector<double>> groups(static_cast<size_t>(shape_numel(kept_shape)));
  for (int64_t i = 0; i < x.numel(); ++i) {
    auto idx = unravel(i, x.shape());
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < rank; ++d)
      if (!red[d]) kept.push_back(idx[d]);
    groups[static_cast<size_t>(ravel(kept, kept_shape))].push_back(x.item_as_double(i));
  }
  NaiveReduce r{out_shape, {}};
  for (auto& g : groups) r.out.push_back(f(g));
  return r;
}

double sum_of(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0);
}

const std::map<std::string, std::function<double(const std::vector<double>&)>>& reference_ops() {
  static const std::map<std::string, std::function<double(const std::vector<double>&)>> ops = {
      {"ReduceSum", sum_of},
      {"ReduceMean", [](const auto& v) { return sum_of(v) / static_cast<double>(v.size()); }},
      {"ReduceMax",
       [](const auto& v) {
         double m = -INFINITY;
         for (double x : v) m = std::max(m, x);
         return m;
       }},
      {"ReduceMin",
       [](const auto& v) {
         double m = INFINITY;
         for (double x : v) m = std::min(m, x);
         return m;
       }},
      {"ReduceProd",
       [](const auto& v) {
         double p = 1;
         for (double x : v) p *= x;
         return p;
       }},
      {"ReduceL1",
       [](const auto& v) {
         double s = 0;
         for (double x : v) s += std::abs(x);
         return s;
       }},
      {"ReduceL2",
       [](const auto& v) {
         double s = 0;
         for (double x : v) s += x * x;
         return std::sqrt(s);
       }},
      {"ReduceSumSquare",
       [](const auto& v) {
         double s = 0;
         for (double x : v) s += x * x;
         return s;
       }},
      {"ReduceLogSum", [](const auto& v) { return std::log(sum_of(v)); }},
      {"ReduceLogSumExp",
       [](const auto& v) {
         double s = 0;
         for (double x : v) s += std::exp(x);
         return std::log(s);
       }},
  };
  return ops;
}

/// Runs a reduction with axes given the way `opset` expects for `op`.
Tensor run_reduce(const std::string& op, const Tensor& x, const std::vector<int64_t>& axes,
                  bool keepdims, int64_t opset, bool noop = false) {
  const bool as_input = opset >= (op == "ReduceSum" ? 13 : 18);
  Node n = make_node(
      op, as_input ? std::vector<std::string>{"x", "axes"} : std::vector<std::string>{"x"}, {"y"});
  n.attributes["keepdims"] = Attribute::of_int(keepdims);
  if (noop) n.attributes["noop_with_empty_axes"] = Attribute::of_int(1);
  if (as_input)
    return run_node(n, {x, Tensor::from_vector<int64_t>({static_cast<int64_t>(axes.size())}, axes)},
                    opset)[0];
  if (!axes.empty()) n.attributes["axes"] = Attribute::of_ints(axes);
  return run_node(n, {x}, opset)[0];
}

TEST(ReduceTest, AllOpsMatchNaiveReferenceOverAxisLayouts) {
  // Positive inputs keep ReduceLogSum finite.
  const Tensor x = random_tensor({2, 3, 4, 5}, 1, 0.1f, 2.f);
  const std::vector<std::vector<int64_t>> axes_sets = {
      {3}, {2, 3}, {1}, {0}, {1, 2}, {0, 2}, {1, 3}, {0, 1, 2, 3}, {-1}, {-3, -1}, {}};
  for (const auto& [op, f] : reference_ops()) {
    for (int64_t opset : {11, 13, 18}) {
      for (const auto& axes : axes_sets) {
        for (bool keep : {true, false}) {
          SCOPED_TRACE(op + " opset " + std::to_string(opset) + " axes " + shape_to_string(axes) +
                       " keepdims " + std::to_string(keep));
          auto ref = naive_reduce(x, axes, keep, f);
          expect_close(run_reduce(op, x, axes, keep, opset), ref.out_shape, ref.out, 2e-5);
        }
      }
    }
  }
}

TEST(ReduceTest, LargeInputsUseParallelPaths) {
  const Tensor x = random_tensor({16, 40, 300}, 2);
  for (const auto& axes : std::vector<std::vector<int64_t>>{{2}, {1}, {0, 2}}) {
    auto ref = naive_reduce(x, axes, true, reference_ops().at("ReduceMean"));
    expect_close(run_reduce("ReduceMean", x, axes, true, 13), ref.out_shape, ref.out, 1e-5);
  }
}

TEST(ReduceTest, Float64AndIntegerTypes) {
  const Tensor xd = Tensor::from_vector<double>({2, 3}, {1.5, -2, 3, 4, 5, -6.25});
  expect_close(run_reduce("ReduceSum", xd, {1}, false, 13), {2}, {2.5, 2.75}, 1e-12);
  const Tensor xi = Tensor::from_vector<int32_t>({2, 3}, {1, -2, 3, 4, 5, -7});
  Tensor s = run_reduce("ReduceSum", xi, {1}, false, 13);
  EXPECT_EQ(s.dtype(), DType::Int32);
  expect_close(s, {2}, {2, 2});
  expect_close(run_reduce("ReduceMax", xi, {0}, true, 18), {1, 3}, {4, 5, 3});
  expect_close(run_reduce("ReduceMin", xi, {}, false, 13), {}, {-7});
  expect_close(run_reduce("ReduceProd", xi, {1}, false, 13), {2}, {-6, -140});
  expect_close(run_reduce("ReduceL1", xi, {1}, false, 13), {2}, {6, 16});
  expect_close(
      run_reduce("ReduceMean", Tensor::from_vector<int64_t>({3}, {1, 2, 4}), {}, false, 13), {},
      {2});  // 7 / 3 truncates
}

TEST(ReduceTest, AxesInputOpsetsAndNoop) {
  const Tensor x = Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
  // Omitted or empty axes input: all axes.
  Node n = make_node("ReduceSum", {"x"}, {"y"});
  expect_close(run_node(n, {x}, 13)[0], {1, 1}, {10});
  expect_close(run_reduce("ReduceSum", x, {}, false, 13), {}, {10});
  // noop_with_empty_axes returns the input unchanged.
  expect_close(run_reduce("ReduceSum", x, {}, true, 13, true), {2, 2}, {1, 2, 3, 4});
  expect_close(run_reduce("ReduceMax", x, {}, true, 18, true), {2, 2}, {1, 2, 3, 4});
  // Opset 1 attribute form; an int32 axes input.
  expect_close(run_reduce("ReduceMean", x, {0}, true, 1), {1, 2}, {2, 3});
  Node n32 = make_node("ReduceMin", {"x", "axes"}, {"y"});
  expect_close(run_node(n32, {x, Tensor::from_vector<int32_t>({1}, {-1})}, 18)[0], {2, 1}, {1, 3});
}

TEST(ReduceTest, EmptySetReductionsGiveIdentity) {
  const Tensor x = Tensor::from_vector<float>({2, 0, 3}, {});
  const double inf = std::numeric_limits<double>::infinity();
  const std::map<std::string, double> want = {
      {"ReduceSum", 0},          {"ReduceProd", 1},
      {"ReduceMax", -inf},       {"ReduceMin", inf},
      {"ReduceL1", 0},           {"ReduceL2", 0},
      {"ReduceSumSquare", 0},    {"ReduceLogSum", -inf},
      {"ReduceLogSumExp", -inf}, {"ReduceMean", std::nan("")}};
  for (const auto& [op, v] : want) {
    SCOPED_TRACE(op);
    expect_close(run_reduce(op, x, {1}, false, 18), {2, 3}, std::vector<double>(6, v));
  }
  // Kept zero-size dims give an empty output.
  EXPECT_EQ(run_reduce("ReduceSum", x, {2}, true, 13).numel(), 0);
}

TEST(ReduceTest, BoolMaxMinAreAnyAll) {
  const Tensor x = Tensor::from_vector<bool>({2, 2}, {true, false, false, false});
  Tensor mx = run_reduce("ReduceMax", x, {1}, false, 20);
  EXPECT_EQ(mx.dtype(), DType::Bool);
  expect_close(mx, {2}, {1, 0});
  expect_close(run_reduce("ReduceMin", x, {0}, false, 20), {2}, {0, 0});
  // An empty set gives the identity: false for max, true for min.
  const Tensor e = Tensor::from_vector<bool>({0, 2}, {});
  expect_close(run_reduce("ReduceMax", e, {0}, false, 20), {2}, {0, 0});
  expect_close(run_reduce("ReduceMin", e, {0}, false, 20), {2}, {1, 1});
}

TEST(ReduceTest, LogSumExpIsStableForLargeInputs) {
  const Tensor x = Tensor::from_vector<float>({2, 2}, {1000, 1000, -1000, -999});
  expect_close(run_reduce("ReduceLogSumExp", x, {1}, false, 13), {2},
               {1000 + std::log(2.0), -999 + std::log(1 + std::exp(-1.0))}, 1e-6);
}

TEST(ReduceTest, MaxPropagatesNaN) {
  const Tensor x = Tensor::from_vector<float>({3}, {1, NAN, 2});
  EXPECT_TRUE(std::isnan(run_reduce("ReduceMax", x, {}, false, 13).item_as_double()));
  EXPECT_TRUE(std::isnan(run_reduce("ReduceMin", x, {}, false, 13).item_as_double()));
}

TEST(ReduceTest, Errors) {
  const Tensor x = random_tensor({2, 3}, 3);
  EXPECT_THROW(run_reduce("ReduceSum", x, {2}, true, 13), Error);
  EXPECT_THROW(run_reduce("ReduceMean", x, {-3}, true, 13), Error);
  EXPECT_THROW(run_reduce("ReduceMean", x, {1, -1}, true, 13), Error);
  EXPECT_THROW(run_reduce("ReduceMax", x, {0, 0}, true, 18), Error);
  // axes as an attribute where it must be an input.
  Node n = make_node("ReduceMean", {"x"}, {"y"});
  n.attributes["axes"] = Attribute::of_ints({0});
  EXPECT_THROW(run_node(n, {x}, 18), Error);
  // Float axes input.
  Node m = make_node("ReduceSum", {"x", "axes"}, {"y"});
  EXPECT_THROW(run_node(m, {x, Tensor::from_vector<float>({1}, {0})}, 13), Error);
  // Bool data.
  EXPECT_THROW(run_reduce("ReduceSum", Tensor::from_vector<bool>({2}, {true, false}), {}, true, 13),
               Error);
}

// ---------------------------------------------------------------- ArgMax / ArgMin

TEST(ArgMaxTest, MatchesNaiveReference) {
  const Tensor x = random_tensor({3, 4, 5}, 4);
  for (const std::string op : {"ArgMax", "ArgMin"}) {
    for (int64_t axis : {0, 1, 2, -1}) {
      for (bool keep : {true, false}) {
        Node n = make_node(op, {"x"}, {"y"});
        n.attributes["axis"] = Attribute::of_int(axis);
        n.attributes["keepdims"] = Attribute::of_int(keep);
        auto ref = naive_reduce(x, {axis}, keep, [&](const std::vector<double>& v) {
          auto it = op == "ArgMax" ? std::max_element(v.begin(), v.end())
                                   : std::min_element(v.begin(), v.end());
          return static_cast<double>(it - v.begin());
        });
        Tensor y = run_node(n, {x}, 13)[0];
        EXPECT_EQ(y.dtype(), DType::Int64);
        expect_close(y, ref.out_shape, ref.out);
      }
    }
  }
}

TEST(ArgMaxTest, TiesAndSelectLastIndex) {
  const Tensor x = Tensor::from_vector<int32_t>({2, 3}, {2, 5, 5, 1, 1, 0});
  Node n = make_node("ArgMax", {"x"}, {"y"});
  n.attributes["axis"] = Attribute::of_int(1);
  expect_close(run_node(n, {x}, 11)[0], {2, 1}, {1, 0});
  n.attributes["select_last_index"] = Attribute::of_int(1);
  expect_close(run_node(n, {x}, 12)[0], {2, 1}, {2, 1});
  Node m = make_node("ArgMin", {"x"}, {"y"});
  m.attributes["keepdims"] = Attribute::of_int(0);  // default axis 0
  m.attributes["select_last_index"] = Attribute::of_int(1);
  expect_close(run_node(m, {x}, 13)[0], {3}, {1, 1, 1});
}

TEST(ArgMaxTest, Errors) {
  Node n = make_node("ArgMax", {"x"}, {"y"});
  n.attributes["axis"] = Attribute::of_int(2);
  EXPECT_THROW(run_node(n, {random_tensor({2, 3}, 5)}, 13), Error);
  Node m = make_node("ArgMin", {"x"}, {"y"});
  m.attributes["axis"] = Attribute::of_int(1);
  EXPECT_THROW(run_node(m, {Tensor::from_vector<float>({2, 0}, {})}, 13), Error);
}

// ---------------------------------------------------------------- CumSum

TEST(CumSumTest, ExclusiveReverseAxesMatchNaive) {
  const Tensor x = random_tensor({3, 4, 5}, 6);
  for (int64_t axis : {0, 1, 2, -1}) {
    for (int ex : {0, 1}) {
      for (int rev : {0, 1}) {
        Node n = make_node("CumSum", {"x", "axis"}, {"y"});
        n.attributes["exclusive"] = Attribute::of_int(ex);
        n.attributes["reverse"] = Attribute::of_int(rev);
        const int64_t a = axis < 0 ? axis + 3 : axis;
        std::vector<double> want(static_cast<size_t>(x.numel()));
        for (int64_t i = 0; i < x.numel(); ++i) {
          auto idx = unravel(i, x.shape());
          double s = 0;
          for (int64_t k = 0; k < x.shape()[a]; ++k) {
            const bool take =
                rev ? (ex ? k > idx[a] : k >= idx[a]) : (ex ? k < idx[a] : k <= idx[a]);
            if (!take) continue;
            auto j = idx;
            j[a] = k;
            s += x.item_as_double(ravel(j, x.shape()));
          }
          want[static_cast<size_t>(i)] = s;
        }
        expect_close(run_node(n, {x, Tensor::scalar<int64_t>(axis)}, 14)[0], x.shape(), want);
      }
    }
  }
}

TEST(CumSumTest, IntegerDataAndInt32Axis) {
  const Tensor x = Tensor::from_vector<int64_t>({2, 2}, {1, 2, 3, 4});
  Node n = make_node("CumSum", {"x", "axis"}, {"y"});
  expect_close(run_node(n, {x, Tensor::from_vector<int32_t>({1}, {0})}, 11)[0], {2, 2},
               {1, 2, 4, 6});
}

TEST(CumSumTest, Errors) {
  const Tensor x = random_tensor({2, 2}, 7);
  Node n = make_node("CumSum", {"x", "axis"}, {"y"});
  EXPECT_THROW(run_node(n, {x, Tensor::scalar<int64_t>(2)}, 14), Error);
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<int64_t>({2}, {0, 1})}, 14), Error);
  EXPECT_THROW(run_node(n, {x, Tensor::scalar<float>(0)}, 14), Error);
}

// ---------------------------------------------------------------- TopK

/// Naive TopK along axis: stable sort of (value, index) pairs.
void check_topk(const std::vector<Tensor>& got, const Tensor& x, int64_t axis, int64_t k,
                bool largest) {
  const int64_t rank = x.rank(), a = axis < 0 ? axis + rank : axis;
  Shape out_shape = x.shape();
  out_shape[a] = k;
  std::vector<double> vals(static_cast<size_t>(shape_numel(out_shape))), idxs(vals.size());
  for (int64_t i = 0; i < shape_numel(out_shape); ++i) {
    auto idx = unravel(i, out_shape);
    std::vector<std::pair<double, int64_t>> items;
    for (int64_t d = 0; d < x.shape()[a]; ++d) {
      auto j = idx;
      j[a] = d;
      items.push_back({x.item_as_double(ravel(j, x.shape())), d});
    }
    std::stable_sort(items.begin(), items.end(), [&](const auto& p, const auto& q) {
      return largest ? p.first > q.first : p.first < q.first;
    });
    vals[static_cast<size_t>(i)] = items[static_cast<size_t>(idx[a])].first;
    idxs[static_cast<size_t>(i)] = static_cast<double>(items[static_cast<size_t>(idx[a])].second);
  }
  expect_close(got[0], out_shape, vals);
  EXPECT_EQ(got[1].dtype(), DType::Int64);
  expect_close(got[1], out_shape, idxs);
}

TEST(TopKTest, OpsetVariantsMatchNaive) {
  const Tensor x = random_tensor({3, 6, 4}, 8);
  for (int64_t axis : {0, 1, 2, -1}) {
    const int64_t k = 2;
    Node n1 = make_node("TopK", {"x"}, {"v", "i"});
    n1.attributes["k"] = Attribute::of_int(k);
    n1.attributes["axis"] = Attribute::of_int(axis);
    check_topk(run_node(n1, {x}, 1), x, axis, k, true);
    Node n10 = make_node("TopK", {"x", "k"}, {"v", "i"});
    n10.attributes["axis"] = Attribute::of_int(axis);
    check_topk(run_node(n10, {x, Tensor::from_vector<int64_t>({1}, {k})}, 10), x, axis, k, true);
    for (int largest : {0, 1}) {
      Node n11 = n10;
      n11.attributes["largest"] = Attribute::of_int(largest);
      n11.attributes["sorted"] = Attribute::of_int(1);
      check_topk(run_node(n11, {x, Tensor::from_vector<int64_t>({1}, {3})}, 11), x, axis, 3,
                 largest);
    }
  }
}

TEST(TopKTest, TiesKeepSmallerIndexFirst) {
  const Tensor x = Tensor::from_vector<int32_t>({1, 6}, {3, 1, 3, 2, 1, 3});
  Node n = make_node("TopK", {"x", "k"}, {"v", "i"});
  auto out = run_node(n, {x, Tensor::from_vector<int64_t>({1}, {4})}, 11);
  expect_close(out[0], {1, 4}, {3, 3, 3, 2});
  expect_close(out[1], {1, 4}, {0, 2, 5, 3});
  n.attributes["largest"] = Attribute::of_int(0);
  out = run_node(n, {x, Tensor::from_vector<int64_t>({1}, {3})}, 11);
  expect_close(out[0], {1, 3}, {1, 1, 2});
  expect_close(out[1], {1, 3}, {1, 4, 3});
  // k = 0 gives empty outputs.
  out = run_node(n, {x, Tensor::from_vector<int64_t>({1}, {0})}, 11);
  EXPECT_EQ(out[0].numel(), 0);
}

TEST(TopKTest, Errors) {
  const Tensor x = random_tensor({2, 3}, 9);
  Node n = make_node("TopK", {"x", "k"}, {"v", "i"});
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<int64_t>({1}, {4})}, 11), Error);
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<int64_t>({1}, {-1})}, 11), Error);
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<int64_t>({2}, {1, 1})}, 11), Error);
  n.attributes["axis"] = Attribute::of_int(2);
  EXPECT_THROW(run_node(n, {x, Tensor::from_vector<int64_t>({1}, {1})}, 11), Error);
  Node n1 = make_node("TopK", {"x"}, {"v", "i"});  // opset 1 requires the k attribute
  EXPECT_THROW(run_node(n1, {x}, 1), Error);
}

}  // namespace
}  // namespace dprun
