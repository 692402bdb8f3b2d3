// String tensors (DType::String) and StringNormalizer.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "graph_test_util.h"

namespace dprun {
namespace {

using testing::make_node;
using testing::run_node;
using testing::strings_attr;
using testing::values_of;

using Strings = std::vector<std::string>;

Tensor strings(Shape shape, Strings v) {
  return Tensor::from_vector<std::string>(shape, v);
}

TEST(StringTensor, HoldsCopiesAndSlicesStrings) {
  Tensor t = strings({2, 2}, {"a", "bb", "a longer string that is not small", ""});
  EXPECT_EQ(t.dtype(), DType::String);
  EXPECT_THROW(t.nbytes(), Error);  // raw-byte code must not touch strings
  EXPECT_THROW(t.data<float>(), Error);
  Tensor c = t.clone();
  EXPECT_FALSE(c.shares_storage_with(t));
  c.data<std::string>()[0] = "changed";
  EXPECT_EQ(t.data<std::string>()[0], "a");
  EXPECT_EQ(values_of<std::string>(t.narrow(1, 1, 1)),
            (Strings{"bb", ""}));  // inner-dimension slice copies
  EXPECT_EQ(values_of<std::string>(t.narrow(0, 1, 1)),
            (Strings{"a longer string that is not small", ""}));
  Tensor joined = concat({t, t.narrow(1, 0, 1)}, 1, Device::cpu());
  EXPECT_EQ(joined.shape(), (Shape{2, 3}));
  EXPECT_EQ(values_of<std::string>(joined),
            (Strings{"a", "bb", "a", "a longer string that is not small", "",
                     "a longer string that is not small"}));
  Tensor target = Tensor::zeros({2, 2}, DType::String);
  EXPECT_EQ(target.data<std::string>()[3], "");
  target.copy_from(t);
  EXPECT_EQ(values_of<std::string>(target), values_of<std::string>(t));
  EXPECT_EQ(values_of<std::string>(t.reshape({4})), values_of<std::string>(t));
}

Node normalizer(const std::string& action, int64_t case_sensitive, Strings stopwords) {
  Node n = make_node("StringNormalizer", {"x"}, {"y"});
  if (!action.empty()) n.attributes["case_change_action"] = Attribute::of_string(action);
  n.attributes["is_case_sensitive"] = Attribute::of_int(case_sensitive);
  if (!stopwords.empty()) n.attributes["stopwords"] = strings_attr(stopwords);
  return n;
}

TEST(StringNormalizer, RemovesStopwordsCaseSensitively) {
  auto out = run_node(normalizer("LOWER", 1, {"monday"}),
                      {strings({4}, {"monday", "Monday", "TUESDAY", "x"})}, 10);
  EXPECT_EQ(out[0].shape(), (Shape{3}));
  EXPECT_EQ(values_of<std::string>(out[0]), (Strings{"monday", "tuesday", "x"}));
}

TEST(StringNormalizer, CaseInsensitiveUpperOnTwoDims) {
  auto out = run_node(normalizer("UPPER", 0, {"MONDAY"}),
                      {strings({1, 4}, {"Monday", "tuesday", "monday", "Wed"})}, 10);
  EXPECT_EQ(out[0].shape(), (Shape{1, 2}));
  EXPECT_EQ(values_of<std::string>(out[0]), (Strings{"TUESDAY", "WED"}));
}

TEST(StringNormalizer, AllRemovedGivesOneEmptyString) {
  auto out = run_node(normalizer("", 1, {"a"}), {strings({2}, {"a", "a"})}, 10);
  EXPECT_EQ(out[0].shape(), (Shape{1}));
  EXPECT_EQ(values_of<std::string>(out[0]), (Strings{""}));
  out = run_node(normalizer("NONE", 0, {}), {strings({2}, {"Mixed", "case"})}, 10);
  EXPECT_EQ(values_of<std::string>(out[0]), (Strings{"Mixed", "case"}));
}

TEST(StringNormalizer, RejectsBadShapesAndAttributes) {
  EXPECT_THROW(run_node(normalizer("LOWER", 1, {}), {strings({2, 2}, {"a", "b", "c", "d"})}, 10),
               Error);
  EXPECT_THROW(run_node(normalizer("TITLE", 1, {}), {strings({1}, {"a"})}, 10), Error);
  EXPECT_THROW(run_node(normalizer("LOWER", 1, {}), {Tensor::scalar<float>(1)}, 10), Error);
}

Node cast(DType to) {
  Node n = make_node("Cast", {"x"}, {"y"});
  n.attributes["to"] = Attribute::of_int(static_cast<int64_t>(to));
  return n;
}

TEST(StringCast, NumbersToShortestText) {
  auto out = run_node(cast(DType::String),
                      {Tensor::from_vector<float>({5}, {0.5f, 0.039187793f, -3.0f, 1e20f,
                                                        std::numeric_limits<float>::infinity()})},
                      13);
  EXPECT_EQ(out[0].dtype(), DType::String);
  EXPECT_EQ(values_of<std::string>(out[0]), (Strings{"0.5", "0.039187793", "-3", "1e+20", "INF"}));
  out = run_node(cast(DType::String), {Tensor::from_vector<int64_t>({2}, {-12, 7})}, 13);
  EXPECT_EQ(values_of<std::string>(out[0]), (Strings{"-12", "7"}));
}

TEST(StringCast, TextToNumbers) {
  auto out = run_node(cast(DType::Float32), {strings({3}, {"0.25", "-1e3", "NaN"})}, 13);
  EXPECT_EQ(out[0].data<float>()[0], 0.25f);
  EXPECT_EQ(out[0].data<float>()[1], -1000.0f);
  EXPECT_TRUE(std::isnan(out[0].data<float>()[2]));
  out = run_node(cast(DType::Int32), {strings({2}, {"42", "-5"})}, 13);
  EXPECT_EQ(values_of<int32_t>(out[0]), (std::vector<int32_t>{42, -5}));
  EXPECT_THROW(run_node(cast(DType::Float32), {strings({1}, {"not a number"})}, 13), Error);
  // CastLike takes the string target from its second input.
  Node like = make_node("CastLike", {"x", "t"}, {"y"});
  out = run_node(like, {Tensor::from_vector<int32_t>({1}, {3}), strings({1}, {""})}, 15);
  EXPECT_EQ(values_of<std::string>(out[0]), (Strings{"3"}));
}

TEST(StringTensor, NumericKernelRefusesStrings) {
  EXPECT_THROW(run_node(make_node("Relu", {"x"}, {"y"}), {strings({1}, {"a"})}, 14), Error);
}

}  // namespace
}  // namespace dprun
