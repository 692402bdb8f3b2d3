#pragma once
// ONNX's shape inference, minus the crashes a malformed model can cause in it.
//
// ONNX 1.12's inference functions trust some input ranks a model can break: ConvTranspose's
// reads the spatial dims of X and W without checking there are any, so a ConvTranspose on a
// rank-2 input crashes the process (found by tests/fuzz/fuzz_onnx_loader.cpp). The guarded
// registry hands ONNX's inference copies of those ops' schemas whose function checks the
// ranks first and fails the node's inference instead (an onnx::InferenceError, which inference
// treats as "no type for this output"); the kernel then refuses the node by name.
#include <onnx/defs/schema.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace dprun {

class GuardedSchemaRegistry : public onnx::ISchemaRegistry {
 public:
  /// The schema ONNX's registry has, or a guarded copy of it for the ops listed in the .cpp.
  const onnx::OpSchema* GetSchema(const std::string& key, int max_version,
                                  const std::string& domain) const override;

 private:
  mutable std::mutex mutex_;
  mutable std::map<const onnx::OpSchema*, std::unique_ptr<onnx::OpSchema>> guarded_;
};

}  // namespace dprun
