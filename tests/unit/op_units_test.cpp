// Every op is one unit: its facts, kernels (every device), gradient rule and case table are
// registered from one family folder, ops/<family>/ (docs/architecture.md, "Op families").
// The registries record the file of each registration; these tests walk them, so an op added
// outside a family, or split over two, fails here.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "engine/autograd/gradient_registry.h"
#include "engine/kernel.h"
#include "engine/op_facts.h"
#include "op_cases/op_cases.h"

namespace dprun {
namespace {

// ops/ folders that hold what several families share, never an op's registration.
const std::set<std::string> kSharedFolders = {"common", "cpu", "cuda", "grad", "math", "sim"};

/// The family folder of a registering file: the folder after the last "/ops/" of its path,
/// "" when it is not directly in one.
std::string family_of(const std::string& source) {
  const size_t at = source.rfind("/ops/");
  const std::string rest = at == std::string::npos ? source : source.substr(at + 5);
  if (at == std::string::npos && rest.rfind("ops/", 0) != 0) return "";
  const std::string relative = at == std::string::npos ? rest.substr(4) : rest;
  const size_t slash = relative.find('/');
  if (slash == std::string::npos || relative.find('/', slash + 1) != std::string::npos) return "";
  return relative.substr(0, slash);
}

/// The tests register ops of their own (test domains) from tests/.
bool registered_by_a_test(const std::string& source) {
  return source.find("/tests/") != std::string::npos || source.rfind("tests/", 0) == 0;
}

std::string op_name(const std::string& domain, const std::string& op_type) {
  return (domain.empty() ? "ai.onnx" : domain) + "::" + op_type;
}

/// Each op's registering files, by the kind of registration.
std::map<std::string, std::set<std::string>> registrations() {
  std::map<std::string, std::set<std::string>> files;
  for (const OpFacts* f : OpFactsRegistry::instance().definitions())
    files[op_name(f->domain, f->op_type)].insert(f->source);
  for (const KernelDef& def : KernelRegistry::instance().definitions())
    // The simulated devices follow the CUDA definitions (ops/sim): theirs are copies.
    if (def.device != DeviceType::Sim) files[op_name(def.domain, def.op_type)].insert(def.source);
  for (const GradientDef& def : GradientRegistry::instance().definitions())
    files[op_name(def.domain, def.op_type)].insert(def.source);
  return files;
}

TEST(OpUnits, FamilyOfReadsTheFolderAfterOps) {
  EXPECT_EQ(family_of("/src/dprun/ops/conv/conv.cpp"), "conv");
  EXPECT_EQ(family_of("ops/array/pad_grad.cpp"), "array");
  EXPECT_EQ(family_of("/src/dprun/ops/cuda/defs/cuda_compute.cpp"), "");
  EXPECT_EQ(family_of("/src/dprun/engine/kernel.cpp"), "");
  EXPECT_EQ(family_of(""), "");
}

TEST(OpUnits, EveryRegistrationIsInAFamilyFolder) {
  size_t checked = 0;
  for (const auto& [op, files] : registrations())
    for (const std::string& file : files) {
      if (registered_by_a_test(file)) continue;
      ++checked;
      const std::string family = family_of(file);
      EXPECT_TRUE(!family.empty() && !kSharedFolders.count(family))
          << op << " is registered in " << (file.empty() ? "a file not recorded" : file);
    }
  EXPECT_GT(checked, 400u);  // the registries were walked
}

TEST(OpUnits, EachOpIsRegisteredFromOneFamily) {
  for (const auto& [op, files] : registrations()) {
    std::set<std::string> families;
    for (const std::string& file : files)
      if (!registered_by_a_test(file)) families.insert(family_of(file));
    if (families.empty()) continue;
    EXPECT_EQ(families.size(), 1u)
        << op << " is registered from " << ::testing::PrintToString(files);
  }
}

TEST(OpUnits, EachCaseTableLivesWithItsOps) {
  const auto files = registrations();
  auto family_of_op = [&](const std::string& op) {
    // The case tables name ai.onnx ops and the rewrites' ops by op_type alone.
    for (const std::string domain : {"ai.onnx", "dprun"})
      if (auto it = files.find(domain + "::" + op); it != files.end())
        return family_of(*it->second.begin());
    return std::string("(unregistered)");
  };
  for (const testing::OpCaseTable& table : testing::op_case_tables()) {
    const std::string family = family_of(table.source);
    EXPECT_FALSE(family.empty() || kSharedFolders.count(family))
        << table.family << " is in " << table.source;
    for (const auto* ops : {&table.covered, &table.host_only})
      for (const std::string& op : *ops)
        EXPECT_EQ(family_of_op(op), family)
            << table.family << " (" << table.source << ") covers " << op;
  }
}

}  // namespace
}  // namespace dprun
