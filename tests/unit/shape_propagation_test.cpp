// propagate_shape: the output shapes the gradient builder works out where a graph carries no
// inferred type. Shapes are written as strings ("[batch, 3, ?]", "?" an unknown dim).
#include <gtest/gtest.h>

#include <map>

#include "engine/autograd/shape_propagation.h"

namespace dprun {
namespace {

// "[batch, 3, ?]"-style shapes: a number is known, "?" unknown, anything else a symbol.
SymbolicShape parse(const std::vector<std::string>& dims) {
  SymbolicShape s;
  for (const auto& d : dims) {
    if (d == "?")
      s.push_back(Dim{});
    else if (std::isdigit(static_cast<unsigned char>(d[0])))
      s.push_back(Dim::known(std::stoll(d)));
    else
      s.push_back(Dim::named(d));
  }
  return s;
}

class ShapePropagation : public ::testing::Test {
 protected:
  // The shape of output `output` of an `op` node reading `inputs`, as a string, or "none".
  std::string shape(const std::string& op, std::vector<std::string> inputs,
                    std::map<std::string, Attribute> attrs = {}, size_t output = 0) {
    Node node;
    node.op_type = op;
    node.name = op;
    node.inputs = std::move(inputs);
    node.outputs = {"out0", "out1"};
    node.attributes = std::move(attrs);
    ShapeSource source{[&](const std::string& v) -> std::optional<SymbolicShape> {
                         auto it = shapes_.find(v);
                         if (it == shapes_.end()) return std::nullopt;
                         return it->second;
                       },
                       [&](const std::string& v) -> std::optional<Tensor> {
                         auto it = constants_.find(v);
                         if (it == constants_.end()) return std::nullopt;
                         return it->second;
                       }};
    auto s = propagate_shape(node, output, source);
    return s ? shape_to_string(*s) : "none";
  }

  void declare(const std::string& name, const std::vector<std::string>& dims) {
    shapes_[name] = parse(dims);
  }
  void constant(const std::string& name, std::vector<int64_t> values) {
    int64_t n = static_cast<int64_t>(values.size());
    constants_[name] = Tensor::from_vector<int64_t>({n}, values);
    shapes_[name] = {Dim::known(n)};
  }

  std::map<std::string, SymbolicShape> shapes_;
  std::map<std::string, Tensor> constants_;
};

TEST_F(ShapePropagation, SameShapeOps) {
  declare("x", {"batch", "seq", "8"});
  EXPECT_EQ(shape("LayerNormalization", {"x", "s", "b"}), "[batch, seq, 8]");
  EXPECT_EQ(shape("Relu", {"x"}), "[batch, seq, 8]");
  EXPECT_EQ(shape("Dropout", {"x"}, {}, 1), "[batch, seq, 8]");  // the mask
  // LayerNormalization's Mean output has another shape: not claimed.
  EXPECT_EQ(shape("LayerNormalization", {"x", "s", "b"}, {}, 1), "none");
  EXPECT_EQ(shape("Relu", {"unknown"}), "none");
  EXPECT_EQ(shape("NoSuchOp", {"x"}), "none");
}

TEST_F(ShapePropagation, Broadcasting) {
  declare("a", {"batch", "1", "8"});
  declare("b", {"5", "1"});
  declare("c", {"n"});
  EXPECT_EQ(shape("Add", {"a", "b"}), "[batch, 5, 8]");
  declare("d", {"m", "1"});
  // A symbol against 8 broadcasts to 8 (the symbol is 1 or 8); two symbols to an unknown dim.
  EXPECT_EQ(shape("Mul", {"a", "c"}), "[batch, 1, 8]");
  EXPECT_EQ(shape("Where", {"d", "a", "b"}), "[batch, 5, 8]");
  EXPECT_EQ(shape("Where", {"d", "a", "c"}), "[batch, m, 8]");
  EXPECT_EQ(shape("Add", {"d", "c"}), "[m, n]");
  declare("f", {"k"});
  EXPECT_EQ(shape("Add", {"c", "f"}), "[?]");
  declare("e", {"3"});
  EXPECT_EQ(shape("Add", {"a", "e"}), "none");  // 8 against 3
  EXPECT_EQ(shape("Add", {"a", "b"}, {{"broadcast", Attribute::of_int(1)}}), "none");
}

TEST_F(ShapePropagation, ConvAndPools) {
  declare("x", {"batch", "3", "8", "8"});
  constants_["w"] = Tensor::zeros({6, 3, 3, 3}, DType::Float32);
  EXPECT_EQ(shape("Conv", {"x", "w"}), "[batch, 6, ?, ?]");
  EXPECT_EQ(shape("MaxPool", {"x"}, {{"kernel_shape", Attribute::of_ints({2, 2})}}),
            "[batch, 3, ?, ?]");
  EXPECT_EQ(shape("MaxPool", {"x"}, {{"kernel_shape", Attribute::of_ints({2, 2})}}, 1),
            "[batch, 3, ?, ?]");
  EXPECT_EQ(shape("GlobalAveragePool", {"x"}), "[batch, 3, 1, 1]");
  constants_["wt"] = Tensor::zeros({3, 2, 3, 3}, DType::Float32);
  EXPECT_EQ(shape("ConvTranspose", {"x", "wt"}, {{"group", Attribute::of_int(3)}}),
            "[batch, 6, ?, ?]");
  EXPECT_EQ(shape("Pad", {"x", "pads"}), "[?, ?, ?, ?]");
}

TEST_F(ShapePropagation, TransposeMatMulGemm) {
  declare("x", {"batch", "2", "seq", "4"});
  declare("w", {"4", "8"});
  declare("v", {"4"});
  EXPECT_EQ(shape("Transpose", {"x"}, {{"perm", Attribute::of_ints({0, 2, 1, 3})}}),
            "[batch, seq, 2, 4]");
  EXPECT_EQ(shape("Transpose", {"w"}), "[8, 4]");
  EXPECT_EQ(shape("MatMul", {"x", "w"}), "[batch, 2, seq, 8]");
  EXPECT_EQ(shape("MatMul", {"x", "v"}), "[batch, 2, seq]");
  EXPECT_EQ(shape("MatMul", {"v", "w"}), "[8]");
  declare("a", {"m", "4"});
  EXPECT_EQ(shape("Gemm", {"a", "w"}), "[m, 8]");
  EXPECT_EQ(shape("Gemm", {"a", "w"},
                  {{"transA", Attribute::of_int(1)}, {"transB", Attribute::of_int(1)}}),
            "[4, 4]");
}

TEST_F(ShapePropagation, ReshapeFlattenSqueezeUnsqueeze) {
  declare("x", {"batch", "6"});
  constant("to", {0, -1, 3});
  EXPECT_EQ(shape("Reshape", {"x", "to"}), "[batch, ?, 3]");
  declare("computed", {"4"});  // a shape computed at run time: only its length is known
  EXPECT_EQ(shape("Reshape", {"x", "computed"}), "[?, ?, ?, ?]");
  EXPECT_EQ(shape("Reshape", {"x", "fed"}), "none");
  declare("y", {"2", "3", "4"});
  EXPECT_EQ(shape("Flatten", {"y"}), "[2, 12]");
  EXPECT_EQ(shape("Flatten", {"x"}, {{"axis", Attribute::of_int(0)}}), "[1, ?]");
  constant("axes", {0, -1});
  EXPECT_EQ(shape("Unsqueeze", {"x", "axes"}), "[1, batch, 6, 1]");
  EXPECT_EQ(shape("Unsqueeze", {"x"}, {{"axes", Attribute::of_ints({1})}}), "[batch, 1, 6]");
  declare("z", {"1", "batch", "1"});
  constant("last", {-1});
  EXPECT_EQ(shape("Squeeze", {"z", "last"}), "[1, batch]");
  // Without axes every dim of size 1 goes, and a symbol might be 1.
  EXPECT_EQ(shape("Squeeze", {"z"}), "none");
  declare("ones", {"1", "5", "1"});
  EXPECT_EQ(shape("Squeeze", {"ones"}), "[5]");
}

TEST_F(ShapePropagation, ConcatGatherReduceShapeExpand) {
  declare("a", {"batch", "2"});
  declare("b", {"batch", "3"});
  declare("c", {"batch", "k"});
  EXPECT_EQ(shape("Concat", {"a", "b"}, {{"axis", Attribute::of_int(1)}}), "[batch, 5]");
  EXPECT_EQ(shape("Concat", {"a", "c"}, {{"axis", Attribute::of_int(-1)}}), "[batch, ?]");
  EXPECT_EQ(shape("Concat", {"a", "unknown"}, {{"axis", Attribute::of_int(1)}}), "[batch, ?]");
  declare("table", {"11", "8"});
  declare("idx", {"batch", "seq"});
  EXPECT_EQ(shape("Gather", {"table", "idx"}), "[batch, seq, 8]");
  declare("x", {"batch", "3", "4"});
  EXPECT_EQ(shape("ReduceSum", {"x"}, {{"axes", Attribute::of_ints({1})}}), "[batch, 1, 4]");
  constant("axes", {0, -1});
  EXPECT_EQ(shape("ReduceMean", {"x", "axes"}, {{"keepdims", Attribute::of_int(0)}}), "[3]");
  EXPECT_EQ(shape("ReduceMax", {"x"}, {{"keepdims", Attribute::of_int(0)}}), "[]");
  EXPECT_EQ(shape("ReduceSum", {"x", "fed"}), "[?, ?, ?]");
  EXPECT_EQ(shape("ReduceSum", {"x", "fed"}, {{"keepdims", Attribute::of_int(0)}}), "none");
  EXPECT_EQ(shape("Shape", {"x"}), "[3]");
  EXPECT_EQ(shape("Shape", {"x"}, {{"start", Attribute::of_int(1)}}), "[2]");
  constant("to", {2, 1, 4});
  EXPECT_EQ(shape("Expand", {"x", "to"}), "[2, 3, 4]");
  declare("one", {"1", "4"});
  EXPECT_EQ(shape("Expand", {"one", "to"}), "[2, 1, 4]");
  constant("bad", {5});
  EXPECT_EQ(shape("Expand", {"x", "bad"}), "[?, ?, ?]");  // 4 against 5: only the rank
}

}  // namespace
}  // namespace dprun
