// Shape and data-movement kernels: Reshape family, Transpose, Concat/Split, Slice, Gather*,
// Scatter*, Shape/Size, Expand/Tile, Pad, constants, Range, Trilu, DepthToSpace/SpaceToDepth,
// OneHot, NonZero/Compress/Unique, ReverseSequence, Dropout.
#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "op_test_util.h"

namespace dprun {
namespace {

using testing::expect_values;
using testing::make_node;
using testing::run_node;

template <class T>
std::vector<T> values(const Tensor& t) {
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

/// 0, 1, 2, ... in the given shape.
template <class T>
Tensor iota(Shape shape) {
  std::vector<T> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<T>(i);
  return Tensor::from_vector<T>(shape, v);
}

Tensor i64(Shape shape, std::vector<int64_t> v) {
  return Tensor::from_vector<int64_t>(shape, v);
}
Tensor i64(const std::vector<int64_t>& v) {
  return Tensor::from_vector<int64_t>({static_cast<int64_t>(v.size())}, v);
}

Tensor run1(const Node& node, const std::vector<Tensor>& inputs, int64_t opset) {
  return run_node(node, inputs, opset).at(0);
}

/// Row-major multi-index of flat element i.
std::vector<int64_t> unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = i % shape[d];
    i /= shape[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

// ---------------------------------------------------------------- Reshape family

TEST(TensorOpsReshape, ZeroCopiesDimAndMinusOneInfers) {
  Node n = make_node("Reshape", {"x", "s"}, {"y"});
  Tensor x = iota<float>({2, 3, 4});
  Tensor y = run1(n, {x, i64({0, -1})}, 14);
  EXPECT_EQ(y.shape(), (Shape{2, 12}));
  EXPECT_EQ(values<float>(y), values<float>(x));
  EXPECT_EQ(run1(n, {x, i64({4, 0, 2})}, 5).shape(), (Shape{4, 3, 2}));
}

TEST(TensorOpsReshape, AllowZeroKeepsZeroDims) {
  Node n = make_node("Reshape", {"x", "s"}, {"y"});
  n.attributes["allowzero"] = Attribute::of_int(1);
  Tensor x = Tensor::zeros({0, 3, 4}, DType::Float32);
  EXPECT_EQ(run1(n, {x, i64({3, 4, 0})}, 14).shape(), (Shape{3, 4, 0}));
  // 0 and -1 together are ambiguous with allowzero.
  EXPECT_THROW(run1(n, {x, i64({0, -1})}, 14), Error);
}

TEST(TensorOpsReshape, Opset1ReadsShapeAttribute) {
  Node n = make_node("Reshape", {"x"}, {"y"});
  n.attributes["shape"] = Attribute::of_ints({-1, 2});
  Tensor y = run1(n, {iota<int32_t>({2, 3})}, 1);
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
}

TEST(TensorOpsReshape, Errors) {
  Node n = make_node("Reshape", {"x", "s"}, {"y"});
  Tensor x = iota<float>({2, 3});
  EXPECT_THROW(run1(n, {x, i64({-1, -1})}, 14), Error);
  EXPECT_THROW(run1(n, {x, i64({4, 2})}, 14), Error);
  EXPECT_THROW(run1(n, {x, i64({4, -1})}, 14), Error);
  EXPECT_THROW(run1(n, {x, i64({-2, 3})}, 14), Error);
  EXPECT_THROW(run1(n, {x, i64({2, 3, 0})}, 14), Error);  // 0 past the input rank
}

TEST(TensorOpsReshape, FlattenAxes) {
  Node n = make_node("Flatten", {"x"}, {"y"});
  Tensor x = iota<float>({2, 3, 4, 5});
  EXPECT_EQ(run1(n, {x}, 13).shape(), (Shape{2, 60}));
  n.attributes["axis"] = Attribute::of_int(0);
  EXPECT_EQ(run1(n, {x}, 13).shape(), (Shape{1, 120}));
  n.attributes["axis"] = Attribute::of_int(-1);
  EXPECT_EQ(run1(n, {x}, 13).shape(), (Shape{24, 5}));
  n.attributes["axis"] = Attribute::of_int(4);
  EXPECT_EQ(run1(n, {x}, 13).shape(), (Shape{120, 1}));
  n.attributes["axis"] = Attribute::of_int(5);
  EXPECT_THROW(run1(n, {x}, 13), Error);
}

TEST(TensorOpsReshape, SqueezeAttrAndInput) {
  Tensor x = iota<float>({1, 3, 1, 5});
  Node attr = make_node("Squeeze", {"x"}, {"y"});
  attr.attributes["axes"] = Attribute::of_ints({-2});
  EXPECT_EQ(run1(attr, {x}, 11).shape(), (Shape{1, 3, 5}));
  Node none = make_node("Squeeze", {"x"}, {"y"});
  EXPECT_EQ(run1(none, {x}, 1).shape(), (Shape{3, 5}));
  EXPECT_EQ(run1(none, {x}, 13).shape(), (Shape{3, 5}));
  Node input = make_node("Squeeze", {"x", "a"}, {"y"});
  EXPECT_EQ(run1(input, {x, i64({0})}, 13).shape(), (Shape{3, 1, 5}));
  EXPECT_THROW(run1(input, {x, i64({1})}, 13), Error);  // size 3, not 1
  EXPECT_THROW(run1(input, {x, i64({4})}, 13), Error);
}

TEST(TensorOpsReshape, UnsqueezeAttrAndInput) {
  Tensor x = iota<float>({3, 4});
  Node attr = make_node("Unsqueeze", {"x"}, {"y"});
  attr.attributes["axes"] = Attribute::of_ints({0, 3});
  EXPECT_EQ(run1(attr, {x}, 11).shape(), (Shape{1, 3, 4, 1}));
  Node input = make_node("Unsqueeze", {"x", "a"}, {"y"});
  Tensor y = run1(input, {x, i64({-1, 1})}, 13);
  EXPECT_EQ(y.shape(), (Shape{3, 1, 4, 1}));
  EXPECT_TRUE(y.shares_storage_with(x) || values<float>(y) == values<float>(x));
  EXPECT_THROW(run1(input, {x, i64({1, 1})}, 13), Error);
  EXPECT_THROW(run1(input, {x, i64({4})}, 13), Error);
}

// ---------------------------------------------------------------- Transpose

template <class T>
std::vector<T> naive_transpose(const Tensor& x, const std::vector<int64_t>& perm) {
  const Shape& in = x.shape();
  Shape out(perm.size());
  for (size_t k = 0; k < perm.size(); ++k) out[k] = in[static_cast<size_t>(perm[k])];
  std::vector<T> result(static_cast<size_t>(x.numel()));
  const T* src = x.data<T>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    std::vector<int64_t> o = unravel(i, out), s(in.size());
    for (size_t k = 0; k < perm.size(); ++k) s[static_cast<size_t>(perm[k])] = o[k];
    result[static_cast<size_t>(i)] = src[ravel(s, in)];
  }
  return result;
}

TEST(TensorOpsTranspose, DefaultReversesDims) {
  Node n = make_node("Transpose", {"x"}, {"y"});
  Tensor x = iota<float>({2, 3, 4});
  Tensor y = run1(n, {x}, 13);
  EXPECT_EQ(y.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(values<float>(y), naive_transpose<float>(x, {2, 1, 0}));
}

TEST(TensorOpsTranspose, MatchesNaiveForAllPermutationsOf4D) {
  Tensor x = iota<float>({2, 3, 4, 5});
  std::vector<int64_t> perm = {0, 1, 2, 3};
  do {
    Node n = make_node("Transpose", {"x"}, {"y"});
    n.attributes["perm"] = Attribute::of_ints(perm);
    EXPECT_EQ(values<float>(run1(n, {x}, 13)), naive_transpose<float>(x, perm))
        << shape_to_string(perm);
  } while (std::next_permutation(perm.begin(), perm.end()));
}

TEST(TensorOpsTranspose, AttentionAndLargeTiledCasesOtherDtypes) {
  // (B, S, H, D) -> (B, H, S, D), int8 and double.
  Node n = make_node("Transpose", {"x"}, {"y"});
  n.attributes["perm"] = Attribute::of_ints({0, 2, 1, 3});
  Tensor a = iota<int8_t>({2, 5, 3, 4});
  EXPECT_EQ(values<int8_t>(run1(n, {a}, 13)), naive_transpose<int8_t>(a, {0, 2, 1, 3}));
  Tensor b = iota<double>({2, 33, 4, 65});
  n.attributes["perm"] = Attribute::of_ints({0, 3, 2, 1});
  EXPECT_EQ(values<double>(run1(n, {b}, 13)), naive_transpose<double>(b, {0, 3, 2, 1}));
  // A large 2-D transpose takes the tiled path (uneven tile edges).
  Node t = make_node("Transpose", {"x"}, {"y"});
  Tensor c = iota<int64_t>({67, 129});
  EXPECT_EQ(values<int64_t>(run1(t, {c}, 1)), naive_transpose<int64_t>(c, {1, 0}));
  Tensor f16 = Tensor::zeros({40, 3, 50}, DType::Float16);
  for (int64_t i = 0; i < f16.numel(); ++i)
    f16.data<Float16>()[i] = Float16(static_cast<float>(i % 1000));
  Tensor y = run1(t, {f16}, 13);
  EXPECT_EQ(y.shape(), (Shape{50, 3, 40}));
  EXPECT_EQ(static_cast<float>(y.data<Float16>()[1]), 150.0f);  // out[0,0,1] = in[1,0,0]
}

TEST(TensorOpsTranspose, FewChannelsInterleaveAcrossPlanes) {
  // NCHW to NHWC with 2 to 4 channels interleaves whole planes (more than one block of 1024
  // elements per plane, with a partial last block), for every element size; 5 channels take
  // the general path.
  Node n = make_node("Transpose", {"x"}, {"y"});
  n.attributes["perm"] = Attribute::of_ints({0, 2, 3, 1});
  for (int64_t c : {2, 3, 4, 5}) {
    SCOPED_TRACE(c);
    Tensor f = iota<float>({2, c, 37, 41});
    EXPECT_EQ(values<float>(run1(n, {f}, 13)), naive_transpose<float>(f, {0, 2, 3, 1}));
    Tensor b = iota<int8_t>({3, c, 5, 7});
    EXPECT_EQ(values<int8_t>(run1(n, {b}, 13)), naive_transpose<int8_t>(b, {0, 2, 3, 1}));
    Tensor d = iota<int64_t>({1, c, 4, 300});
    EXPECT_EQ(values<int64_t>(run1(n, {d}, 13)), naive_transpose<int64_t>(d, {0, 2, 3, 1}));
  }
  // A 2-D [C, P] -> [P, C] has no outer dim.
  Node t = make_node("Transpose", {"x"}, {"y"});
  Tensor two = iota<double>({3, 2049});
  EXPECT_EQ(values<double>(run1(t, {two}, 13)), naive_transpose<double>(two, {1, 0}));
}

TEST(TensorOpsTranspose, RejectsBadPerm) {
  Node n = make_node("Transpose", {"x"}, {"y"});
  n.attributes["perm"] = Attribute::of_ints({0, 0, 1});
  EXPECT_THROW(run1(n, {iota<float>({2, 3, 4})}, 13), Error);
  n.attributes["perm"] = Attribute::of_ints({1, 0});
  EXPECT_THROW(run1(n, {iota<float>({2, 3, 4})}, 13), Error);
}

// ---------------------------------------------------------------- Concat / Split

TEST(TensorOpsConcat, NegativeAxisAndEmptyParts) {
  Node n = make_node("Concat", {"a", "b", "c"}, {"y"});
  n.attributes["axis"] = Attribute::of_int(-1);
  Tensor a = iota<int64_t>({2, 2});
  Tensor b = Tensor::zeros({2, 0}, DType::Int64);
  Tensor c = i64({2, 1}, {7, 8});
  Tensor y = run1(n, {a, b, c}, 13);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{0, 1, 7, 2, 3, 8}));
}

TEST(TensorOpsConcat, Opset1DefaultsToAxis1AndLaterRequiresAxis) {
  Node n = make_node("Concat", {"a", "b"}, {"y"});
  Tensor a = iota<float>({1, 2}), b = iota<float>({1, 2});
  EXPECT_EQ(run1(n, {a, b}, 1).shape(), (Shape{1, 4}));
  EXPECT_THROW(run1(n, {a, b}, 13), Error);
}

TEST(TensorOpsConcat, RejectsMismatchedShapes) {
  Node n = make_node("Concat", {"a", "b"}, {"y"});
  n.attributes["axis"] = Attribute::of_int(0);
  EXPECT_THROW(run1(n, {iota<float>({2, 2}), iota<float>({2, 3})}, 13), Error);
  EXPECT_THROW(run1(n, {iota<float>({2, 2}), iota<float>({2})}, 13), Error);
  n.attributes["axis"] = Attribute::of_int(2);
  EXPECT_THROW(run1(n, {iota<float>({2, 2}), iota<float>({2, 2})}, 13), Error);
}

TEST(TensorOpsSplit, SizesFromInputAndAttribute) {
  Tensor x = iota<float>({2, 6});
  Node in = make_node("Split", {"x", "s"}, {"a", "b"});
  in.attributes["axis"] = Attribute::of_int(-1);
  auto outs = run_node(in, {x, i64({2, 4})}, 13);
  EXPECT_EQ(values<float>(outs[0]), (std::vector<float>{0, 1, 6, 7}));
  EXPECT_EQ(values<float>(outs[1]), (std::vector<float>{2, 3, 4, 5, 8, 9, 10, 11}));
  Node attr = make_node("Split", {"x"}, {"a", "b"});
  attr.attributes["axis"] = Attribute::of_int(1);
  attr.attributes["split"] = Attribute::of_ints({5, 1});
  outs = run_node(attr, {x}, 11);
  EXPECT_EQ(outs[0].shape(), (Shape{2, 5}));
  EXPECT_EQ(values<float>(outs[1]), (std::vector<float>{5, 11}));
}

TEST(TensorOpsSplit, EqualPartsAndNumOutputs) {
  Node n = make_node("Split", {"x"}, {"a", "b", "c"});
  auto outs = run_node(n, {iota<int32_t>({6})}, 13);
  EXPECT_EQ(values<int32_t>(outs[2]), (std::vector<int32_t>{4, 5}));
  EXPECT_THROW(run_node(n, {iota<int32_t>({7})}, 13), Error);
  // Opset 18: ceil-sized chunks, the last one smaller.
  n.attributes["num_outputs"] = Attribute::of_int(3);
  outs = run_node(n, {iota<int32_t>({7})}, 18);
  EXPECT_EQ(outs[0].shape(), (Shape{3}));
  EXPECT_EQ(outs[1].shape(), (Shape{3}));
  EXPECT_EQ(values<int32_t>(outs[2]), (std::vector<int32_t>{6}));
  n.attributes["num_outputs"] = Attribute::of_int(2);
  EXPECT_THROW(run_node(n, {iota<int32_t>({7})}, 18), Error);
}

TEST(TensorOpsSplit, RejectsBadSizes) {
  Node n = make_node("Split", {"x", "s"}, {"a", "b"});
  EXPECT_THROW(run_node(n, {iota<float>({6}), i64({2, 3})}, 13), Error);
  EXPECT_THROW(run_node(n, {iota<float>({6}), i64({7, -1})}, 13), Error);
  EXPECT_THROW(run_node(n, {iota<float>({6}), i64({6})}, 13), Error);
}

// ---------------------------------------------------------------- Slice

TEST(TensorOpsSlice, Opset1Attributes) {
  Node n = make_node("Slice", {"x"}, {"y"});
  n.attributes["starts"] = Attribute::of_ints({1, 0});
  n.attributes["ends"] = Attribute::of_ints({2, 3});
  Tensor y = run1(n, {iota<float>({2, 4})}, 1);
  EXPECT_EQ(values<float>(y), (std::vector<float>{4, 5, 6}));
  n.attributes["axes"] = Attribute::of_ints({1});
  n.attributes["starts"] = Attribute::of_ints({-1});
  n.attributes["ends"] = Attribute::of_ints({1000});
  EXPECT_EQ(values<float>(run1(n, {iota<float>({2, 4})}, 9)), (std::vector<float>{3, 7}));
}

TEST(TensorOpsSlice, NegativeStepsAndClamping) {
  Node n = make_node("Slice", {"x", "s", "e", "a", "p"}, {"y"});
  Tensor x = iota<int32_t>({5});
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(values<int32_t>(run1(n, {x, i64({-1}), i64({lo}), i64({0}), i64({-1})}, 13)),
            (std::vector<int32_t>{4, 3, 2, 1, 0}));
  EXPECT_EQ(values<int32_t>(run1(n, {x, i64({hi}), i64({0}), i64({-1}), i64({-2})}, 13)),
            (std::vector<int32_t>{4, 2}));
  EXPECT_EQ(values<int32_t>(run1(n, {x, i64({1}), i64({hi}), i64({0}), i64({3})}, 10)),
            (std::vector<int32_t>{1, 4}));
  EXPECT_EQ(run1(n, {x, i64({10}), i64({20}), i64({0}), i64({1})}, 13).shape(), (Shape{0}));
  EXPECT_EQ(run1(n, {x, i64({3}), i64({1}), i64({0}), i64({1})}, 13).shape(), (Shape{0}));
}

TEST(TensorOpsSlice, MatchesNaiveOn3D) {
  Tensor x = iota<float>({4, 5, 6});
  Node n = make_node("Slice", {"x", "s", "e", "a", "p"}, {"y"});
  Tensor y = run1(n, {x, i64({3, 1, -1}), i64({0, 5, 0}), i64({0, -2, 2}), i64({-2, 2, -2})}, 13);
  ASSERT_EQ(y.shape(), (Shape{2, 2, 3}));
  std::vector<float> expected;
  for (int64_t i = 3; i > 0; i -= 2)
    for (int64_t j = 1; j < 5; j += 2)
      for (int64_t k = 5; k > 0; k -= 2)
        expected.push_back(static_cast<float>((i * 5 + j) * 6 + k));
  EXPECT_EQ(values<float>(y), expected);
  // Default axes/steps.
  Node d = make_node("Slice", {"x", "s", "e"}, {"y"});
  EXPECT_EQ(run1(d, {x, i64({1, 1}), i64({3, -1})}, 13).shape(), (Shape{2, 3, 6}));
}

TEST(TensorOpsSlice, Errors) {
  Node n = make_node("Slice", {"x", "s", "e", "a", "p"}, {"y"});
  Tensor x = iota<float>({4, 5});
  EXPECT_THROW(run1(n, {x, i64({0}), i64({1}), i64({0}), i64({0})}, 13), Error);
  EXPECT_THROW(run1(n, {x, i64({0, 0}), i64({1, 1}), i64({0, -2}), i64({1, 1})}, 13), Error);
  EXPECT_THROW(run1(n, {x, i64({0}), i64({1}), i64({2}), i64({1})}, 13), Error);
  EXPECT_THROW(run1(n, {x, i64({0, 0}), i64({1}), i64({0}), i64({1})}, 13), Error);
}

// ---------------------------------------------------------------- Gather family

TEST(TensorOpsGather, EmbeddingRowsWithNegativeInt32Indices) {
  Node n = make_node("Gather", {"x", "i"}, {"y"});
  Tensor table = iota<float>({5, 3});
  Tensor idx = Tensor::from_vector<int32_t>({2, 2}, {4, -5, 1, -1});
  Tensor y = run1(n, {table, idx}, 13);
  EXPECT_EQ(y.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{12, 13, 14, 0, 1, 2, 3, 4, 5, 12, 13, 14}));
}

TEST(TensorOpsGather, InnerAxisAndScalarIndex) {
  Node n = make_node("Gather", {"x", "i"}, {"y"});
  n.attributes["axis"] = Attribute::of_int(-1);
  Tensor x = iota<int64_t>({2, 3});
  Tensor y = run1(n, {x, i64({2}, {2, 0})}, 11);
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{2, 0, 5, 3}));
  n.attributes["axis"] = Attribute::of_int(0);
  Tensor s = run1(n, {x, Tensor::scalar<int64_t>(1)}, 1);
  EXPECT_EQ(s.shape(), (Shape{3}));
  EXPECT_EQ(values<int64_t>(s), (std::vector<int64_t>{3, 4, 5}));
  Tensor flags = Tensor::from_vector<bool>({3}, {true, false, true});
  EXPECT_EQ(values<bool>(run1(n, {flags, i64({1, 2})}, 13)), (std::vector<bool>{false, true}));
}

TEST(TensorOpsGather, RejectsOutOfRangeIndices) {
  Node n = make_node("Gather", {"x", "i"}, {"y"});
  EXPECT_THROW(run1(n, {iota<float>({3, 2}), i64({3})}, 13), Error);
  EXPECT_THROW(run1(n, {iota<float>({3, 2}), i64({-4})}, 13), Error);
  EXPECT_THROW(run1(n, {iota<float>({3, 2}), Tensor::from_vector<float>({1}, {0})}, 13), Error);
  n.attributes["axis"] = Attribute::of_int(2);
  EXPECT_THROW(run1(n, {iota<float>({3, 2}), i64({0})}, 13), Error);
}

TEST(TensorOpsGather, ElementsWithNegativeIndices) {
  Node n = make_node("GatherElements", {"x", "i"}, {"y"});
  n.attributes["axis"] = Attribute::of_int(1);
  Tensor x = iota<float>({3, 3});
  Tensor y = run1(n, {x, i64({2, 2}, {-1, 0, 1, -3})}, 13);
  EXPECT_EQ(values<float>(y), (std::vector<float>{2, 0, 4, 3}));
  EXPECT_THROW(run1(n, {x, i64({1, 1}, {3})}, 13), Error);
  EXPECT_THROW(run1(n, {x, i64({2}, {0, 1})}, 13), Error);
}

TEST(TensorOpsGather, NDWithBatchDims) {
  Node n = make_node("GatherND", {"x", "i"}, {"y"});
  Tensor x = iota<int32_t>({2, 2, 2});
  Tensor y = run1(n, {x, i64({2, 2}, {0, 1, -1, 0})}, 13);
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{2, 3, 4, 5}));
  n.attributes["batch_dims"] = Attribute::of_int(1);
  Tensor z = run1(n, {x, i64({2, 1}, {1, 0})}, 13);
  EXPECT_EQ(z.shape(), (Shape{2, 2}));
  EXPECT_EQ(values<int32_t>(z), (std::vector<int32_t>{2, 3, 4, 5}));
  EXPECT_THROW(run1(n, {x, i64({2, 1}, {2, 0})}, 13), Error);
  EXPECT_THROW(run1(n, {x, i64({3, 1}, {0, 0, 0})}, 13), Error);  // batch dims differ
  n.attributes["batch_dims"] = Attribute::of_int(0);
  EXPECT_THROW(run1(n, {x, i64({1, 4}, {0, 0, 0, 0})}, 13), Error);  // tuple too long
}

// ---------------------------------------------------------------- Scatter family

TEST(TensorOpsScatter, NDReductions) {
  Node n = make_node("ScatterND", {"x", "i", "u"}, {"y"});
  Tensor x = Tensor::from_vector<float>({4}, {1, 2, 3, 4});
  Tensor idx = i64({3, 1}, {-1, 0, 3});
  Tensor upd = Tensor::from_vector<float>({3}, {10, 20, 30});
  EXPECT_EQ(values<float>(run1(n, {x, idx, upd}, 13)), (std::vector<float>{20, 2, 3, 30}));
  const std::vector<std::pair<std::string, std::vector<float>>> cases = {{"add", {21, 2, 3, 44}},
                                                                         {"mul", {20, 2, 3, 1200}},
                                                                         {"max", {20, 2, 3, 30}},
                                                                         {"min", {1, 2, 3, 4}}};
  for (const auto& [red, expected] : cases) {
    n.attributes["reduction"] = Attribute::of_string(red);
    EXPECT_EQ(values<float>(run1(n, {x, idx, upd}, 18)), expected) << red;
  }
  n.attributes["reduction"] = Attribute::of_string("avg");
  EXPECT_THROW(run1(n, {x, idx, upd}, 18), Error);
}

TEST(TensorOpsScatter, NDSlicesAndErrors) {
  Node n = make_node("ScatterND", {"x", "i", "u"}, {"y"});
  Tensor x = Tensor::zeros({3, 2}, DType::Int64);
  Tensor y = run1(n, {x, i64({1, 1}, {1}), i64({1, 2}, {5, 6})}, 11);
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{0, 0, 5, 6, 0, 0}));
  EXPECT_EQ(values<int64_t>(x), (std::vector<int64_t>(6, 0)));  // input untouched
  EXPECT_THROW(run1(n, {x, i64({1, 1}, {3}), i64({1, 2}, {5, 6})}, 11), Error);
  EXPECT_THROW(run1(n, {x, i64({1, 1}, {0}), i64({1, 3}, {5, 6, 7})}, 11), Error);
  EXPECT_THROW(run1(n, {x, i64({1, 3}, {0, 0, 0}), i64({1}, {5})}, 11), Error);
}

TEST(TensorOpsScatter, ElementsAndLegacyScatter) {
  Tensor x = Tensor::zeros({2, 3}, DType::Float32);
  Tensor idx = i64({2, 2}, {-1, 2, 0, 0});
  Tensor upd = Tensor::from_vector<float>({2, 2}, {1, 2, 3, 4});
  Node n = make_node("ScatterElements", {"x", "i", "u"}, {"y"});
  n.attributes["axis"] = Attribute::of_int(1);
  EXPECT_EQ(values<float>(run1(n, {x, idx, upd}, 13)), (std::vector<float>{0, 0, 2, 4, 0, 0}));
  n.attributes["reduction"] = Attribute::of_string("add");
  EXPECT_EQ(values<float>(run1(n, {x, idx, upd}, 16)), (std::vector<float>{0, 0, 3, 7, 0, 0}));
  Node old = make_node("Scatter", {"x", "i", "u"}, {"y"});
  EXPECT_EQ(values<float>(run1(
                old, {x, i64({1, 2}, {1, 0}), Tensor::from_vector<float>({1, 2}, {5, 6})}, 10)),
            (std::vector<float>{0, 6, 0, 5, 0, 0}));
  EXPECT_THROW(run1(n, {x, i64({1, 1}, {3}), Tensor::from_vector<float>({1, 1}, {1})}, 16), Error);
  EXPECT_THROW(run1(n, {x, i64({1, 1}, {0}), Tensor::from_vector<float>({1, 2}, {1, 2})}, 16),
               Error);
}

// ---------------------------------------------------------------- Shape / Size

TEST(TensorOpsShape, StartEndAndSize) {
  Tensor x = Tensor::zeros({3, 4, 5}, DType::Float32);
  Node n = make_node("Shape", {"x"}, {"y"});
  EXPECT_EQ(values<int64_t>(run1(n, {x}, 1)), (std::vector<int64_t>{3, 4, 5}));
  n.attributes["start"] = Attribute::of_int(-2);
  EXPECT_EQ(values<int64_t>(run1(n, {x}, 15)), (std::vector<int64_t>{4, 5}));
  n.attributes["end"] = Attribute::of_int(-1);
  EXPECT_EQ(values<int64_t>(run1(n, {x}, 15)), (std::vector<int64_t>{4}));
  n.attributes["start"] = Attribute::of_int(10);
  EXPECT_EQ(run1(n, {x}, 15).shape(), (Shape{0}));
  Node s = make_node("Size", {"x"}, {"y"});
  Tensor size = run1(s, {x}, 13);
  EXPECT_EQ(size.shape(), Shape{});
  EXPECT_EQ(values<int64_t>(size), (std::vector<int64_t>{60}));
}

// ---------------------------------------------------------------- Expand / Tile

TEST(TensorOpsExpand, BroadcastsBothWays) {
  Node n = make_node("Expand", {"x", "s"}, {"y"});
  Tensor x = Tensor::from_vector<float>({3, 1}, {1, 2, 3});
  Tensor y = run1(n, {x, i64({2, 1, 2})}, 13);
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  EXPECT_EQ(run1(n, {x, i64({1, 1})}, 8).shape(), (Shape{3, 1}));
  EXPECT_THROW(run1(n, {x, i64({2, 2})}, 13), Error);
  EXPECT_THROW(run1(n, {x, i64({-1, 1})}, 13), Error);
}

TEST(TensorOpsTile, RepeatsAndLegacyForm) {
  Node n = make_node("Tile", {"x", "r"}, {"y"});
  Tensor x = iota<int32_t>({2, 2});
  Tensor y = run1(n, {x, i64({2, 3})}, 13);
  EXPECT_EQ(y.shape(), (Shape{4, 6}));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(y.data<int32_t>()[i * 6 + j], (i % 2) * 2 + j % 2);
  EXPECT_THROW(run1(n, {x, i64({2})}, 13), Error);
  EXPECT_THROW(run1(n, {x, i64({1, -1})}, 13), Error);
  Node legacy = make_node("Tile", {"x", "t", "a"}, {"y"});
  Tensor z = run1(legacy, {x, Tensor::scalar<int64_t>(3), Tensor::scalar<int64_t>(1)}, 1);
  EXPECT_EQ(values<int32_t>(z), (std::vector<int32_t>{0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3}));
}

// ---------------------------------------------------------------- Pad

/// numpy.pad reference for one mode, pads in ONNX layout covering all dims.
std::vector<float> naive_pad(const Tensor& x, const std::vector<int64_t>& pads,
                             const std::string& mode, float value) {
  const Shape& in = x.shape();
  const size_t r = in.size();
  Shape out(r);
  for (size_t d = 0; d < r; ++d) out[d] = in[d] + pads[d] + pads[d + r];
  std::vector<float> result(static_cast<size_t>(shape_numel(out)));
  for (int64_t i = 0; i < static_cast<int64_t>(result.size()); ++i) {
    std::vector<int64_t> o = unravel(i, out), s(r);
    bool pad = false;
    for (size_t d = 0; d < r; ++d) {
      int64_t v = o[d] - pads[d], n = in[d];
      if (v < 0 || v >= n) {
        if (mode == "constant") pad = true;
        if (mode == "edge") v = std::clamp<int64_t>(v, 0, n - 1);
        if (mode == "wrap") v = ((v % n) + n) % n;
        if (mode == "reflect")
          while (v < 0 || v >= n) v = v < 0 ? -v : 2 * (n - 1) - v;
      }
      s[d] = v;
    }
    result[static_cast<size_t>(i)] = pad ? value : x.data<float>()[ravel(s, in)];
  }
  return result;
}

TEST(TensorOpsPad, ModesMatchNaive) {
  Tensor x = iota<float>({3, 4});
  const std::vector<int64_t> pads = {2, 1, 1, 3};
  for (std::string mode : {"constant", "reflect", "edge", "wrap"}) {
    Node n = make_node("Pad", {"x", "p", "v"}, {"y"});
    n.attributes["mode"] = Attribute::of_string(mode);
    Tensor y = run1(n, {x, i64(pads), Tensor::scalar<float>(-1)}, 19);
    EXPECT_EQ(y.shape(), (Shape{6, 8})) << mode;
    EXPECT_EQ(values<float>(y), naive_pad(x, pads, mode, -1)) << mode;
  }
}

TEST(TensorOpsPad, NegativePadsCrop) {
  Node n = make_node("Pad", {"x", "p"}, {"y"});
  Tensor y = run1(n, {iota<float>({3, 4}), i64({-1, 1, 0, -2})}, 13);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<float>(y), (std::vector<float>{0, 4, 5, 0, 8, 9}));
}

TEST(TensorOpsPad, AxesInputAndIntData) {
  Node n = make_node("Pad", {"x", "p", "", "a"}, {"y"});
  Tensor x = iota<int32_t>({2, 3});
  Tensor y = run1(n, {x, i64({1, 1}), i64({-1})}, 18);
  EXPECT_EQ(y.shape(), (Shape{2, 5}));
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{0, 0, 1, 2, 0, 0, 3, 4, 5, 0}));
  EXPECT_THROW(run1(n, {x, i64({1, 1, 1, 1}), i64({0})}, 18), Error);
}

TEST(TensorOpsPad, AttributeOpsets) {
  Tensor x = iota<float>({2});
  Node v2 = make_node("Pad", {"x"}, {"y"});
  v2.attributes["pads"] = Attribute::of_ints({1, 2});
  v2.attributes["value"] = Attribute::of_float(9);
  EXPECT_EQ(values<float>(run1(v2, {x}, 2)), (std::vector<float>{9, 0, 1, 9, 9}));
  Node v1 = make_node("Pad", {"x"}, {"y"});
  v1.attributes["paddings"] = Attribute::of_ints({0, 1});
  v1.attributes["mode"] = Attribute::of_string("edge");
  EXPECT_EQ(values<float>(run1(v1, {x}, 1)), (std::vector<float>{0, 1, 1}));
}

TEST(TensorOpsPad, Errors) {
  Node n = make_node("Pad", {"x", "p"}, {"y"});
  EXPECT_THROW(run1(n, {iota<float>({2, 2}), i64({1, 1})}, 13), Error);
  EXPECT_THROW(run1(n, {iota<float>({2, 2}), i64({-3, 0, 0, 0})}, 13), Error);
  n.attributes["mode"] = Attribute::of_string("mirror");
  EXPECT_THROW(run1(n, {iota<float>({2, 2}), i64({0, 0, 0, 0})}, 13), Error);
  n.attributes["mode"] = Attribute::of_string("reflect");
  EXPECT_THROW(run1(n, {Tensor::zeros({0, 2}, DType::Float32), i64({1, 0, 0, 0})}, 13), Error);
}

// ---------------------------------------------------------------- Constants

TEST(TensorOpsConstant, AttributeForms) {
  Node n = make_node("Constant", {}, {"y"});
  Attribute t;
  t.kind = Attribute::Kind::Tensor;
  t.t = iota<int32_t>({2, 2});
  n.attributes["value"] = t;
  EXPECT_EQ(values<int32_t>(run1(n, {}, 13)), (std::vector<int32_t>{0, 1, 2, 3}));
  Node f = make_node("Constant", {}, {"y"});
  f.attributes["value_float"] = Attribute::of_float(2.5f);
  Tensor fy = run1(f, {}, 12);
  EXPECT_EQ(fy.shape(), Shape{});
  EXPECT_EQ(values<float>(fy), (std::vector<float>{2.5f}));
  Node ints = make_node("Constant", {}, {"y"});
  ints.attributes["value_ints"] = Attribute::of_ints({4, 5});
  EXPECT_EQ(values<int64_t>(run1(ints, {}, 13)), (std::vector<int64_t>{4, 5}));
  Node none = make_node("Constant", {}, {"y"});
  EXPECT_THROW(run1(none, {}, 13), Error);
}

TEST(TensorOpsConstant, ConstantOfShape) {
  Node n = make_node("ConstantOfShape", {"s"}, {"y"});
  Tensor z = run1(n, {i64({2, 3})}, 9);
  EXPECT_EQ(z.dtype(), DType::Float32);
  EXPECT_EQ(values<float>(z), (std::vector<float>(6, 0.0f)));
  Attribute v;
  v.kind = Attribute::Kind::Tensor;
  v.t = Tensor::from_vector<int32_t>({1}, {7});
  n.attributes["value"] = v;
  EXPECT_EQ(values<int32_t>(run1(n, {i64({2})}, 9)), (std::vector<int32_t>{7, 7}));
  EXPECT_EQ(run1(n, {i64({0})}, 9).shape(), (Shape{0}));
  EXPECT_THROW(run1(n, {i64({-1})}, 9), Error);
}

TEST(TensorOpsConstant, EyeLike) {
  Node n = make_node("EyeLike", {"x"}, {"y"});
  n.attributes["k"] = Attribute::of_int(-1);
  Tensor y = run1(n, {Tensor::zeros({3, 2}, DType::Int32)}, 9);
  EXPECT_EQ(y.dtype(), DType::Int32);
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{0, 0, 1, 0, 0, 1}));
  n.attributes["dtype"] = Attribute::of_int(static_cast<int64_t>(DType::Float64));
  n.attributes["k"] = Attribute::of_int(1);
  EXPECT_EQ(values<double>(run1(n, {Tensor::zeros({2, 3}, DType::Int32)}, 9)),
            (std::vector<double>{0, 1, 0, 0, 0, 1}));
  EXPECT_THROW(run1(n, {Tensor::zeros({3}, DType::Int32)}, 9), Error);
}

// ---------------------------------------------------------------- Range / Trilu

TEST(TensorOpsRange, FloatAndNegativeIntDelta) {
  Node n = make_node("Range", {"a", "b", "c"}, {"y"});
  Tensor f = run1(
      n, {Tensor::scalar<float>(1), Tensor::scalar<float>(2), Tensor::scalar<float>(0.3f)}, 11);
  ASSERT_EQ(f.shape(), (Shape{4}));
  EXPECT_NEAR(f.data<float>()[3], 1.9f, 1e-6);
  Tensor i = run1(
      n, {Tensor::scalar<int32_t>(10), Tensor::scalar<int32_t>(4), Tensor::scalar<int32_t>(-3)},
      11);
  EXPECT_EQ(values<int32_t>(i), (std::vector<int32_t>{10, 7}));
  Tensor e = run1(
      n, {Tensor::scalar<int64_t>(5), Tensor::scalar<int64_t>(1), Tensor::scalar<int64_t>(2)}, 11);
  EXPECT_EQ(e.shape(), (Shape{0}));
  EXPECT_THROW(
      run1(n, {Tensor::scalar<int64_t>(0), Tensor::scalar<int64_t>(1), Tensor::scalar<int64_t>(0)},
           11),
      Error);
  EXPECT_THROW(
      run1(n, {Tensor::scalar<int64_t>(0), Tensor::scalar<int32_t>(1), Tensor::scalar<int64_t>(1)},
           11),
      Error);
}

TEST(TensorOpsTrilu, UpperLowerWithK) {
  Tensor x = iota<int64_t>({2, 3, 3});
  Node up = make_node("Trilu", {"x", "k"}, {"y"});
  Tensor y = run1(up, {x, Tensor::scalar<int64_t>(1)}, 14);
  EXPECT_EQ(values<int64_t>(y),
            (std::vector<int64_t>{0, 1, 2, 0, 0, 5, 0, 0, 0, 0, 10, 11, 0, 0, 14, 0, 0, 0}));
  Node low = make_node("Trilu", {"x"}, {"y"});
  low.attributes["upper"] = Attribute::of_int(0);
  Tensor z = run1(low, {iota<float>({2, 3})}, 14);
  EXPECT_EQ(values<float>(z), (std::vector<float>{0, 0, 0, 3, 4, 0}));
  Node lowk = make_node("Trilu", {"x", "k"}, {"y"});
  lowk.attributes["upper"] = Attribute::of_int(0);
  EXPECT_EQ(values<float>(run1(lowk, {iota<float>({2, 3}), Tensor::scalar<int64_t>(-5)}, 14)),
            (std::vector<float>(6, 0.0f)));
  EXPECT_THROW(run1(low, {iota<float>({3})}, 14), Error);
}

// ---------------------------------------------------------------- DepthToSpace / SpaceToDepth

TEST(TensorOpsDepthSpace, ModesMatchFormula) {
  const int64_t b = 2, c = 8, h = 2, w = 3, oc = c / (b * b);
  Tensor x = iota<float>({1, c, h, w});
  for (std::string mode : {"DCR", "CRD"}) {
    Node n = make_node("DepthToSpace", {"x"}, {"y"});
    n.attributes["blocksize"] = Attribute::of_int(b);
    n.attributes["mode"] = Attribute::of_string(mode);
    Tensor y = run1(n, {x}, 13);
    ASSERT_EQ(y.shape(), (Shape{1, oc, h * b, w * b}));
    for (int64_t ch = 0; ch < oc; ++ch)
      for (int64_t i = 0; i < h * b; ++i)
        for (int64_t j = 0; j < w * b; ++j) {
          int64_t bi = i % b, bj = j % b;
          int64_t src_c = mode == "DCR" ? (bi * b + bj) * oc + ch : ch * b * b + bi * b + bj;
          EXPECT_EQ(y.data<float>()[(ch * h * b + i) * w * b + j],
                    x.data<float>()[(src_c * h + i / b) * w + j / b]);
        }
  }
}

TEST(TensorOpsDepthSpace, SpaceToDepthInvertsDCR) {
  Tensor x = iota<int16_t>({2, 3, 4, 6});
  Node s2d = make_node("SpaceToDepth", {"x"}, {"y"});
  s2d.attributes["blocksize"] = Attribute::of_int(2);
  Tensor y = run1(s2d, {x}, 13);
  EXPECT_EQ(y.shape(), (Shape{2, 12, 2, 3}));
  Node d2s = make_node("DepthToSpace", {"x"}, {"y"});
  d2s.attributes["blocksize"] = Attribute::of_int(2);
  EXPECT_EQ(values<int16_t>(run1(d2s, {y}, 1)), values<int16_t>(x));
  s2d.attributes["blocksize"] = Attribute::of_int(4);
  EXPECT_THROW(run1(s2d, {x}, 13), Error);
  d2s.attributes["blocksize"] = Attribute::of_int(3);
  EXPECT_THROW(run1(d2s, {x}, 13), Error);
}

// ------------------------------------------------------- OneHot / NonZero / Compress / Unique

TEST(TensorOpsOneHot, AxisAndNegativeIndices) {
  Node n = make_node("OneHot", {"i", "d", "v"}, {"y"});
  Tensor idx = i64({3}, {0, -1, 7});
  Tensor values_t = Tensor::from_vector<int32_t>({2}, {0, 5});
  Tensor y = run1(n, {idx, Tensor::scalar<float>(3), values_t}, 11);
  EXPECT_EQ(y.shape(), (Shape{3, 3}));
  EXPECT_EQ(values<int32_t>(y), (std::vector<int32_t>{5, 0, 0, 0, 0, 5, 0, 0, 0}));
  n.attributes["axis"] = Attribute::of_int(0);
  Tensor z =
      run1(n, {Tensor::from_vector<float>({2}, {1, 2}), Tensor::scalar<int64_t>(3), values_t}, 9);
  EXPECT_EQ(z.shape(), (Shape{3, 2}));
  EXPECT_EQ(values<int32_t>(z), (std::vector<int32_t>{0, 0, 5, 0, 0, 5}));
  EXPECT_THROW(run1(n, {idx, Tensor::scalar<float>(0), values_t}, 11), Error);
  EXPECT_THROW(run1(n, {idx, Tensor::scalar<float>(3), Tensor::from_vector<int32_t>({1}, {1})}, 11),
               Error);
}

TEST(TensorOpsNonZero, Coordinates) {
  Node n = make_node("NonZero", {"x"}, {"y"});
  Tensor y = run1(n, {Tensor::from_vector<float>({2, 3}, {0, 1, 0, 2, 0, -3})}, 13);
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(values<int64_t>(y), (std::vector<int64_t>{0, 1, 1, 1, 0, 2}));
  EXPECT_EQ(run1(n, {Tensor::zeros({4}, DType::Bool)}, 9).shape(), (Shape{1, 0}));
}

TEST(TensorOpsCompress, AxisAndFlattened) {
  Node n = make_node("Compress", {"x", "c"}, {"y"});
  Tensor x = iota<float>({3, 2});
  Tensor cond = Tensor::from_vector<bool>({2}, {false, true});
  n.attributes["axis"] = Attribute::of_int(-1);
  EXPECT_EQ(values<float>(run1(n, {x, cond}, 11)), (std::vector<float>{1, 3, 5}));
  Node flat = make_node("Compress", {"x", "c"}, {"y"});
  Tensor c5 = Tensor::from_vector<bool>({5}, {false, true, true, false, true});
  EXPECT_EQ(values<float>(run1(flat, {x, c5}, 9)), (std::vector<float>{1, 2, 4}));
  Tensor long_c = Tensor::from_vector<bool>({3}, {true, false, true});
  EXPECT_THROW(run1(n, {x, long_c}, 11), Error);
}

TEST(TensorOpsUnique, SortedUnsortedAndAxis) {
  Tensor x = Tensor::from_vector<float>({6}, {2, 1, 1, 3, 4, 3});
  auto s = run_node(make_node("Unique", {"x"}, {"y", "i", "inv", "c"}), {x}, 11);
  expect_values(s[0], {4}, {1, 2, 3, 4});
  expect_values(s[1], {4}, {1, 0, 3, 4});
  expect_values(s[2], {6}, {1, 0, 0, 2, 3, 2});
  expect_values(s[3], {4}, {2, 1, 2, 1});
  Node un = make_node("Unique", {"x"}, {"y", "i", "inv", "c"});
  un.attributes["sorted"] = Attribute::of_int(0);
  auto u = run_node(un, {x}, 11);
  expect_values(u[0], {4}, {2, 1, 3, 4});
  expect_values(u[1], {4}, {0, 1, 3, 4});
  expect_values(u[2], {6}, {0, 1, 1, 2, 3, 2});
  expect_values(u[3], {4}, {1, 2, 2, 1});
  Tensor m = Tensor::from_vector<int64_t>({3, 2}, {1, 0, 0, 1, 1, 0});
  Node ax = make_node("Unique", {"x"}, {"y", "i", "inv", "c"});
  ax.attributes["axis"] = Attribute::of_int(-2);
  auto a = run_node(ax, {m}, 11);
  expect_values(a[0], {2, 2}, {0, 1, 1, 0});
  expect_values(a[2], {3}, {1, 0, 1});
  ax.attributes["axis"] = Attribute::of_int(2);
  EXPECT_THROW(run_node(ax, {m}, 11), Error);
}

// ---------------------------------------------------------------- ReverseSequence

TEST(TensorOpsReverseSequence, BatchAndTimeMajor) {
  Tensor x = iota<float>({3, 2});  // time-major: [time=3, batch=2]
  Node n = make_node("ReverseSequence", {"x", "l"}, {"y"});
  EXPECT_EQ(values<float>(run1(n, {x, i64({3, 2})}, 10)), (std::vector<float>{4, 3, 2, 1, 0, 5}));
  n.attributes["batch_axis"] = Attribute::of_int(0);
  n.attributes["time_axis"] = Attribute::of_int(1);
  Tensor b = iota<float>({2, 3, 2});  // [batch=2, time=3, feature=2]
  EXPECT_EQ(values<float>(run1(n, {b, i64({2, 0})}, 10)),
            (std::vector<float>{2, 3, 0, 1, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_THROW(run1(n, {b, i64({4, 0})}, 10), Error);
  EXPECT_THROW(run1(n, {b, i64({1})}, 10), Error);
}

// ---------------------------------------------------------------- Dropout

TEST(TensorOpsDropout, InferenceIsIdentityWithTrueMask) {
  Tensor x = iota<float>({2, 3});
  Node n = make_node("Dropout", {"x"}, {"y", "m"});
  auto outs = run_node(n, {x}, 13);
  EXPECT_EQ(values<float>(outs[0]), values<float>(x));
  EXPECT_EQ(values<bool>(outs[1]), (std::vector<bool>(6, true)));
  // Opset 7-9 masks have the input's type.
  outs = run_node(n, {x}, 7);
  EXPECT_EQ(values<float>(outs[1]), (std::vector<float>(6, 1.0f)));
  // training_mode=false ignores the ratio.
  Node t = make_node("Dropout", {"x", "r", "t"}, {"y"});
  EXPECT_EQ(
      values<float>(run1(t, {x, Tensor::scalar<float>(0.9f), Tensor::scalar<bool>(false)}, 12)),
      values<float>(x));
}

TEST(TensorOpsDropout, TrainingWithSeedMatchesNumpy) {
  // numpy: RandomState(3).uniform(size=8) = [.551 .708 .291 .511 .893 .896 .126 .207]
  Node n = make_node("Dropout", {"x", "r", "t"}, {"y", "m"});
  n.attributes["seed"] = Attribute::of_int(3);
  Tensor x = Tensor::from_vector<float>({8}, std::vector<float>(8, 1.0f));
  auto outs = run_node(n, {x, Tensor::scalar<float>(0.5f), Tensor::scalar<bool>(true)}, 13);
  EXPECT_EQ(values<float>(outs[0]), (std::vector<float>{2, 2, 0, 2, 2, 2, 0, 0}));
  EXPECT_EQ(values<bool>(outs[1]),
            (std::vector<bool>{true, true, false, true, true, true, false, false}));
  EXPECT_THROW(run_node(n, {x, Tensor::scalar<float>(1.0f), Tensor::scalar<bool>(true)}, 13),
               Error);
}

}  // namespace
}  // namespace dprun
