// TfIdfVectorizer (ops/text/tfidf.cpp): unigram and skip-bigram counts in TF, TFIDF and IDF
// modes against counts worked out by hand, and the float input it refuses.
#include <gtest/gtest.h>

#include "engine/error.h"
#include "op_test_util.h"

namespace dprun {
namespace {

using testing::expect_values;
using testing::make_node;
using testing::run_node;

TEST(TextKernels, CountsUniAndBigramsWithSkips) {
  Node n = make_node("TfIdfVectorizer", {"x"}, {"y"});
  n.attributes["min_gram_length"] = Attribute::of_int(1);
  n.attributes["max_gram_length"] = Attribute::of_int(2);
  n.attributes["max_skip_count"] = Attribute::of_int(1);
  n.attributes["mode"] = Attribute::of_string("TF");
  n.attributes["ngram_counts"] = Attribute::of_ints({0, 2});
  n.attributes["ngram_indexes"] = Attribute::of_ints({0, 1, 2});
  n.attributes["pool_int64s"] = Attribute::of_ints({7, 8, 7, 9});  // unigrams 7, 8; bigram (7, 9)
  Tensor x = Tensor::from_vector<int32_t>({2, 3}, {7, 8, 9, 7, 9, 7});
  // Row 0: 7 once, 8 once, (7, 9) with one skip. Row 1: 7 twice, (7, 9) adjacent.
  expect_values(run_node(n, {x}, 9)[0], {2, 3}, {1, 1, 1, 2, 0, 1});
  n.attributes["mode"] = Attribute::of_string("TFIDF");
  n.attributes["weights"] = [] {
    Attribute a;
    a.kind = Attribute::Kind::Floats;
    a.floats = {0.5f, 2.f, 3.f};
    return a;
  }();
  expect_values(run_node(n, {x}, 9)[0], {2, 3}, {0.5, 2, 3, 1, 0, 3});
  n.attributes["mode"] = Attribute::of_string("IDF");
  expect_values(run_node(n, {x}, 9)[0], {2, 3}, {0.5, 2, 3, 0.5, 0, 3});
  EXPECT_THROW(run_node(n, {Tensor::from_vector<float>({2}, {1, 2})}, 9), Error);
}

}  // namespace
}  // namespace dprun
