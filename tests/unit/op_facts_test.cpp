// The per-op facts registry (engine/op_facts.h): every ai.onnx op with a CPU kernel registers
// facts, and the facts give exactly what the central op lists they replaced gave. Those lists
// are written out once here, as they stood in gradient_builder.cpp (output types, random ops),
// shape_propagation.cpp (shape rules), half_precision.cpp (float32 ops) and layout_rewrite.cpp
// (NHWC-agnostic ops), so the move is checked op by op.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/autograd/shape_propagation.h"
#include "engine/kernel.h"
#include "engine/op_facts.h"
#include "engine/rewrites/half_precision.h"

namespace dprun {
namespace {

using Rule = OutputDTypeRule;

std::set<std::string> ops_with_facts(bool (*pick)(const OpFacts&)) {
  std::set<std::string> ops;
  for (const OpFacts* f : OpFactsRegistry::instance().definitions())
    if (f->domain.empty() && pick(*f)) ops.insert(f->op_type);
  return ops;
}

TEST(OpFacts, EveryOnnxOpWithACpuKernelHasFacts) {
  std::set<std::string> missing;
  for (const KernelDef& def : KernelRegistry::instance().definitions())
    if (def.domain.empty() && def.device == DeviceType::CPU &&
        OpFactsRegistry::instance().find("", def.op_type) == nullptr)
      missing.insert(def.op_type);
  std::string names;
  for (const auto& op : missing) names += " " + op;
  EXPECT_TRUE(missing.empty()) << "ops without DPRUN_REGISTER_OP_FACTS beside their CPU kernel:"
                               << names;
}

TEST(OpFacts, NoOpRegistersTwice) {
  EXPECT_EQ(OpFactsRegistry::instance().duplicates(), std::vector<std::string>{});
}

TEST(OpFacts, UnknownOpGetsTheDefaults) {
  const OpFacts& f = OpFactsRegistry::instance().get("", "NoSuchOp");
  EXPECT_EQ(OpFactsRegistry::instance().find("", "NoSuchOp"), nullptr);
  EXPECT_EQ(f.dtype, Rule::same_as_input(0));
  EXPECT_EQ(f.dtype_function, nullptr);
  EXPECT_EQ(f.shape, ShapeKind::None);
  EXPECT_EQ(f.shape_rule, nullptr);
  EXPECT_FALSE(f.float32_only);
  EXPECT_EQ(f.layout, LayoutRule{});
  EXPECT_FALSE(f.random);
  EXPECT_FALSE(f.keeps_values);
  // An unknown op's outputs have the type of its first present input.
  Node node;
  node.op_type = "NoSuchOp";
  node.inputs = {"", "b"};
  auto type = f.output_dtype(node, 0, [](size_t i) -> std::optional<DType> {
    return i == 1 ? DType::Int8 : DType::Float32;
  });
  EXPECT_EQ(type, DType::Int8);
}

TEST(OpFacts, DomainsAreKeptApart) {
  EXPECT_NE(OpFactsRegistry::instance().find("ai.onnx", "Relu"), nullptr);
  EXPECT_EQ(OpFactsRegistry::instance().find("ai.onnx", "Relu"),
            OpFactsRegistry::instance().find("", "Relu"));
  EXPECT_EQ(OpFactsRegistry::instance().find("com.example", "Relu"), nullptr);
}

// gradient_builder.cpp's output_dtype and fixed_dtype, list by list.
TEST(OpFacts, OutputTypeRulesAreTheOldLists) {
  std::map<std::string, Rule> expected;
  for (const char* op : {"Shape", "Size", "NonZero", "ArgMax", "ArgMin", "NonMaxSuppression"})
    expected[op] = Rule::fixed(DType::Int64);  // int64_ops
  for (const char* op : {"TopK", "MaxPool", "Unique"})
    expected[op] = Rule::fixed_after_first(DType::Int64);  // int64_tail_ops
  for (const char* op : {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not", "And",
                         "Or", "Xor", "IsNaN", "IsInf"})
    expected[op] = Rule::fixed(DType::Bool);                   // bool_ops
  expected["Dropout"] = Rule::fixed_after_first(DType::Bool);  // the mask
  expected["MatMulInteger"] = expected["ConvInteger"] = Rule::fixed(DType::Int32);
  for (const char* op : {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                         "EyeLike", "Bernoulli"})
    expected[op] = Rule::from_attribute("dtype");  // dtype_attr_ops
  expected["Multinomial"] = Rule::from_attribute("dtype", DType::Int32);
  expected["Where"] = expected["CastLike"] = expected["DequantizeLinear"] = Rule::same_as_input(1);
  expected["OneHot"] = Rule::same_as_input(2);  // the value_input map
  for (const char* op : {"If", "Loop", "Scan"}) expected[op] = Rule::unknown();
  for (const auto& [op, rule] : expected) {
    const OpFacts* f = OpFactsRegistry::instance().find("", op);
    ASSERT_NE(f, nullptr) << op;
    EXPECT_EQ(f->dtype, rule) << op;
    EXPECT_EQ(f->dtype_function, nullptr) << op;
  }
  // Every other op: input 0's type, or its own function (the old special cases).
  const std::set<std::string> functions = {"Cast", "QuantizeLinear", "LayerNormalization",
                                           "Constant", "ConstantOfShape"};
  for (const OpFacts* f : OpFactsRegistry::instance().definitions()) {
    if (!f->domain.empty() || expected.count(f->op_type)) continue;
    EXPECT_EQ(f->dtype, Rule::same_as_input(0)) << f->op_type;
    EXPECT_EQ(f->dtype_function != nullptr, functions.count(f->op_type) == 1) << f->op_type;
  }
}

// The special cases, through the registered functions.
TEST(OpFacts, OutputTypeFunctions) {
  auto facts = [](const char* op) { return OpFactsRegistry::instance().get("", op); };
  const InputDType int8_inputs = [](size_t) -> std::optional<DType> { return DType::Int8; };
  const InputDType f64_inputs = [](size_t) -> std::optional<DType> { return DType::Float64; };
  Node cast;
  cast.op_type = "Cast";
  cast.inputs = {"x"};
  cast.attributes["to"] = Attribute::of_int(static_cast<int64_t>(DType::Float16));
  EXPECT_EQ(facts("Cast").output_dtype(cast, 0, f64_inputs), DType::Float16);

  Node quantize;
  quantize.op_type = "QuantizeLinear";
  quantize.inputs = {"x", "scale"};
  EXPECT_EQ(facts("QuantizeLinear").output_dtype(quantize, 0, f64_inputs), DType::UInt8);
  quantize.inputs.push_back("zero_point");
  EXPECT_EQ(facts("QuantizeLinear").output_dtype(quantize, 0, int8_inputs), DType::Int8);

  Node norm;
  norm.op_type = "LayerNormalization";
  norm.inputs = {"x", "scale"};
  EXPECT_EQ(facts("LayerNormalization").output_dtype(norm, 0, f64_inputs), DType::Float64);
  EXPECT_EQ(facts("LayerNormalization").output_dtype(norm, 1, f64_inputs), DType::Float64);
  EXPECT_EQ(facts("LayerNormalization").output_dtype(norm, 2, int8_inputs), DType::Float32);

  Node constant;
  constant.op_type = "Constant";
  EXPECT_EQ(facts("Constant").output_dtype(constant, 0, f64_inputs), std::nullopt);
  constant.attributes["value"] = Attribute::of_tensor(Tensor::from_vector<int32_t>({1}, {7}));
  EXPECT_EQ(facts("Constant").output_dtype(constant, 0, f64_inputs), DType::Int32);

  Node fill;
  fill.op_type = "ConstantOfShape";
  fill.inputs = {"shape"};
  EXPECT_EQ(facts("ConstantOfShape").output_dtype(fill, 0, int8_inputs), DType::Float32);
  fill.attributes["value"] = Attribute::of_tensor(Tensor::from_vector<int64_t>({1}, {0}));
  EXPECT_EQ(facts("ConstantOfShape").output_dtype(fill, 0, int8_inputs), DType::Int64);

  Node random;
  random.op_type = "RandomNormalLike";
  random.inputs = {"x"};
  EXPECT_EQ(facts("RandomNormalLike").output_dtype(random, 0, f64_inputs), DType::Float64);
  random.attributes["dtype"] = Attribute::of_int(static_cast<int64_t>(DType::Float16));
  EXPECT_EQ(facts("RandomNormalLike").output_dtype(random, 0, f64_inputs), DType::Float16);
}

// shape_propagation.cpp's lists and the ops it had its own code for.
TEST(OpFacts, ShapeRulesAreTheOldLists) {
  std::map<std::string, ShapeKind> expected;
  for (const char* op : {"Abs",
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
                         "Trilu"})
    expected[op] = ShapeKind::SameAsInput0;  // same_shape_ops (Dropout has its own rule)
  for (const char* op :
       {"Add",  "And",         "BitShift", "Div",  "Equal", "Greater", "GreaterOrEqual",
        "Less", "LessOrEqual", "Max",      "Mean", "Min",   "Mod",     "Mul",
        "Or",   "Pow",         "Sub",      "Sum",  "Where", "Xor"})
    expected[op] = ShapeKind::Broadcast;
  for (const char* op : {"Conv", "ConvInteger"}) expected[op] = ShapeKind::Convolution;
  expected["ConvTranspose"] = ShapeKind::TransposedConvolution;
  for (const char* op : {"AveragePool", "LpPool", "MaxPool"}) expected[op] = ShapeKind::Pool;
  for (const char* op : {"GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool"})
    expected[op] = ShapeKind::GlobalPool;
  for (const char* op :
       {"DepthToSpace", "Pad", "Resize", "Slice", "SpaceToDepth", "Tile", "Upsample"})
    expected[op] = ShapeKind::SameRank;
  for (const char* op : {"ArgMax", "ArgMin"}) expected[op] = ShapeKind::ReduceAxis;
  for (const char* op : {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
                         "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare"})
    expected[op] = ShapeKind::ReduceAxes;
  const std::set<std::string> own_rules = {
      "Transpose", "MatMul",          "Gemm",     "Reshape", "Flatten",
      "Unsqueeze", "Squeeze",         "Concat",   "Gather",  "Shape",
      "Size",      "NonZero",         "RNN",      "GRU",     "LSTM",
      "Expand",    "ConstantOfShape", "Constant", "Dropout"};
  for (const OpFacts* f : OpFactsRegistry::instance().definitions()) {
    if (!f->domain.empty()) continue;
    auto it = expected.find(f->op_type);
    EXPECT_EQ(f->shape, it == expected.end() ? ShapeKind::None : it->second) << f->op_type;
    EXPECT_EQ(f->shape_rule != nullptr, own_rules.count(f->op_type) == 1) << f->op_type;
  }
  for (const auto& [op, kind] : expected)
    EXPECT_NE(OpFactsRegistry::instance().find("", op), nullptr) << op;
}

TEST(OpFacts, Float32OpsAreTheOldList) {
  const std::set<std::string> old = {"Resize",
                                     "Upsample",
                                     "Range",
                                     "CumSum",
                                     "TopK",
                                     "NonMaxSuppression",
                                     "RoiAlign",
                                     "QuantizeLinear",
                                     "DequantizeLinear",
                                     "DynamicQuantizeLinear",
                                     "RandomNormal",
                                     "RandomNormalLike",
                                     "RandomUniform",
                                     "RandomUniformLike",
                                     "Bernoulli"};
  EXPECT_EQ(ops_with_facts([](const OpFacts& f) { return f.float32_only; }), old);
  EXPECT_EQ(float32_ops(), old);
}

TEST(OpFacts, LayoutAgnosticOpsAreTheOldLists) {
  const std::set<std::string> unary = {"Relu",      "LeakyRelu", "Sigmoid", "HardSigmoid",
                                       "HardSwish", "Tanh",      "Elu",     "Selu",
                                       "Softplus",  "Identity",  "Dropout"};
  const std::set<std::string> binary = {"Add", "Mul", "Sub", "Div"};
  EXPECT_EQ(ops_with_facts([](const OpFacts& f) { return f.layout == kLayoutUnary; }), unary);
  EXPECT_EQ(ops_with_facts([](const OpFacts& f) { return f.layout == kLayoutBinary; }), binary);
}

TEST(OpFacts, OpsWithAnNhwcRuleOfTheirOwnAreTheOldBranches) {
  // The ops the layout rewrite once special-cased: their rules are registered with them.
  const std::set<std::string> own = {
      "Conv", "MaxPool", "AveragePool", "GlobalAveragePool", "BatchNormalization",
      "Pad",  "Concat",  "Clip"};
  EXPECT_EQ(ops_with_facts([](const OpFacts& f) {
              return f.layout.runs_in_nhwc != nullptr && f.layout != kLayoutUnary &&
                     f.layout != kLayoutBinary;
            }),
            own);
  EXPECT_EQ(ops_with_facts([](const OpFacts& f) { return f.layout.to_nhwc != nullptr; }),
            (std::set<std::string>{"Conv", "MaxPool", "AveragePool", "GlobalAveragePool",
                                   "BatchNormalization", "Pad", "Concat"}));
  EXPECT_EQ(ops_with_facts([](const OpFacts& f) { return f.layout.absorbs_activation; }),
            (std::set<std::string>{"Conv", "BatchNormalization"}));
  EXPECT_EQ(ops_with_facts([](const OpFacts& f) { return f.layout.all_inputs; }),
            (std::set<std::string>{"Add", "Mul", "Sub", "Div", "Concat"}));
}

TEST(OpFacts, ValueKeepingOpsAreTheOldList) {
  // `dprun run` bounds generated indices through these (tools/inputs.cpp).
  EXPECT_EQ(ops_with_facts([](const OpFacts& f) { return f.keeps_values; }),
            (std::set<std::string>{"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity",
                                   "Expand", "Transpose"}));
}

TEST(OpFacts, RandomOpsAreTheOldList) {
  const std::set<std::string> old = {
      "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
      "Bernoulli",    "Multinomial",   "Dropout"};
  EXPECT_EQ(ops_with_facts([](const OpFacts& f) { return f.random; }), old);
  for (const OpFacts* f : OpFactsRegistry::instance().definitions()) {
    if (f->domain.empty()) continue;
    EXPECT_FALSE(f->random || f->float32_only) << f->op_type;
  }
}

}  // namespace
}  // namespace dprun
