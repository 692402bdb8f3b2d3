// StringNormalizer: removes stop words from a [C] or [1, C] string tensor and changes case.
// Case folding is ASCII-only: the `locale` attribute is accepted but ignored, so non-ASCII
// letters keep their case (both for stop-word matching and for the output).
#include <algorithm>
#include <cctype>
#include <set>

#include "engine/kernel.h"
#include "engine/op_facts.h"

namespace dprun {
namespace {

std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

class StringNormalizerKernel : public OpKernel {
 public:
  enum class Case { None, Lower, Upper };

  explicit StringNormalizerKernel(const KernelInfo& info)
      : case_sensitive_(info.node.attr_int("is_case_sensitive", 0) != 0) {
    std::string action = info.node.attr_string("case_change_action", "NONE");
    if (action == "LOWER")
      case_ = Case::Lower;
    else if (action == "UPPER")
      case_ = Case::Upper;
    else if (action != "NONE")
      info.node.fail("unknown case_change_action '", action, "'");
    for (const auto& word : info.node.attr_strings("stopwords"))
      stopwords_.insert(case_sensitive_ ? word : ascii_lower(word));
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() != DType::String) ctx.fail("input must be a string tensor, got ", x.describe());
    bool two_d = x.rank() == 2;
    if (!(x.rank() == 1 || (two_d && x.shape()[0] == 1)))
      ctx.fail("input must have shape [C] or [1, C], got ", shape_to_string(x.shape()));
    const std::string* in = x.data<std::string>();
    std::vector<std::string> kept;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const std::string& word = in[i];
      if (stopwords_.count(case_sensitive_ ? word : ascii_lower(word))) continue;
      kept.push_back(case_ == Case::Lower   ? ascii_lower(word)
                     : case_ == Case::Upper ? ascii_upper(word)
                                            : word);
    }
    // Everything filtered out: the output holds one empty string.
    if (kept.empty()) kept.emplace_back();
    int64_t count = static_cast<int64_t>(kept.size());
    Tensor& y = ctx.allocate_output(0, two_d ? Shape{1, count} : Shape{count}, DType::String);
    std::move(kept.begin(), kept.end(), y.data<std::string>());
  }

 private:
  bool case_sensitive_;
  Case case_ = Case::None;
  std::set<std::string> stopwords_;
};

DPRUN_REGISTER_KERNEL({.op_type = "StringNormalizer",
                       .since = 10,
                       .dtypes = {DType::String},
                       .factory = make_kernel<StringNormalizerKernel>});

}  // namespace
}  // namespace dprun

// The ops' facts (engine/op_facts.h): output types, shapes, 16-bit and layout policy.
namespace dprun {
namespace {
DPRUN_REGISTER_OP_FACTS({.op_type = "StringNormalizer"});

}  // namespace
}  // namespace dprun
