#include "ops/cuda/defs/cuda_compute.h"

#include <map>
#include <mutex>
#include <set>

#include "engine/error.h"

namespace dprun {

namespace {

struct Computes {
  std::mutex mutex;
  std::map<std::string, KernelFactory> factories;
  std::set<std::string> used;
};

Computes& computes() {
  static Computes c;
  return c;
}

// What a plan for cuda:N holds in a build without the CUDA toolkit: the plan is the one a build
// with it makes (the definitions are the same), but nothing can run it. A run never gets here:
// such a build has no CUDA backend, so no cuda:N device to run on.
class ComputeNotInThisBuild final : public OpKernel {
 public:
  explicit ComputeNotInThisBuild(std::string name) : name_(std::move(name)) {}
  void compute(KernelContext& ctx) const override {
    ctx.fail("the CUDA kernel '", name_, "' is not in this build (dprun was built without the ",
             "CUDA toolkit)");
  }

 private:
  std::string name_;
};

}  // namespace

bool add_cuda_compute(const std::string& name, KernelFactory factory) {
  Computes& c = computes();
  std::lock_guard lock(c.mutex);
  if (c.factories.count(name)) fail("the CUDA compute '", name, "' is supplied twice");
  c.factories.emplace(name, std::move(factory));
  return true;
}

KernelFactory cuda_compute(const std::string& name) {
  {
    Computes& c = computes();
    std::lock_guard lock(c.mutex);
    c.used.insert(name);
  }
  return [name](const KernelInfo& info) -> std::unique_ptr<OpKernel> {
    KernelFactory factory;
    {
      Computes& c = computes();
      std::lock_guard lock(c.mutex);
      auto it = c.factories.find(name);
      if (it == c.factories.end()) return std::make_unique<ComputeNotInThisBuild>(name);
      factory = it->second;
    }
    return factory(info);
  };
}

std::vector<std::string> cuda_compute_names() {
  Computes& c = computes();
  std::lock_guard lock(c.mutex);
  std::vector<std::string> out;
  for (const auto& [name, factory] : c.factories) out.push_back(name);
  return out;
}

std::vector<std::string> cuda_compute_names_used() {
  Computes& c = computes();
  std::lock_guard lock(c.mutex);
  return {c.used.begin(), c.used.end()};
}

}  // namespace dprun
