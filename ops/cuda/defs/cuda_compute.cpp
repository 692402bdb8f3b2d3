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
      if (it == c.factories.end())
        fail("the CUDA kernel '", name, "' for node '", info.node.name,
             "' is not in this build (dprun was built without the CUDA toolkit)");
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
