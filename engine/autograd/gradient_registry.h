#pragma once
// The table of per-op gradient rules. Each rule lives in its own file under ops/grad/ and
// registers in one line, like a kernel:
//
//   DPRUN_REGISTER_GRADIENT({.op_type = "Add", .since = 7, .rule = add_grad});
//
// A rule receives a GradientContext for one forward node and emits ordinary ONNX nodes that
// compute the input gradients GI(i) from the forward inputs I(i), outputs O(i) and output
// gradients GO(i).
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace dprun {

class GradientContext;

using GradientRule = void (*)(GradientContext&);

/// One registration: the rule for (domain, op_type) at forward opsets [since, until].
struct GradientDef {
  std::string domain;  // "" = ai.onnx
  std::string op_type;
  int64_t since = 1;
  int64_t until = INT_MAX;
  GradientRule rule = nullptr;
  /// The source file that registered the rule (DPRUN_REGISTER_GRADIENT sets it).
  std::string source = {};
};

/// The process-wide gradient rule table.
class GradientRegistry {
 public:
  static GradientRegistry& instance();
  /// Adds a definition, registered by the file `source` when given; returns true so it can
  /// initialise a static.
  bool add(GradientDef def, const char* source = nullptr);
  /// The rule with the highest `since` covering `opset`, or nullptr.
  const GradientDef* find(const std::string& domain, const std::string& op_type,
                          int64_t opset) const;
  /// True when any rule exists for (domain, op_type), at whatever opset.
  bool knows_op(const std::string& domain, const std::string& op_type) const;
  const std::vector<GradientDef>& definitions() const { return defs_; }

 private:
  std::vector<GradientDef> defs_;
};

}  // namespace dprun

#define DPRUN_GRAD_CONCAT_INNER(a, b) a##b
#define DPRUN_GRAD_CONCAT(a, b) DPRUN_GRAD_CONCAT_INNER(a, b)
/// Registers a GradientDef (given as a braced designated initializer) at static-init time.
#define DPRUN_REGISTER_GRADIENT(...)                                                           \
  [[maybe_unused]] static const bool DPRUN_GRAD_CONCAT(dprun_gradient_registered_, __LINE__) = \
      ::dprun::GradientRegistry::instance().add(::dprun::GradientDef __VA_ARGS__, __FILE__)
