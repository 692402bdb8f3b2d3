#include "loader/shape_inference_guard.h"

#include <onnx/defs/shape_inference.h>

#include <functional>
#include <vector>

namespace dprun {

namespace {

// An op whose ONNX inference reads dims of its inputs `inputs` without checking their rank:
// each must have at least `min_rank` dims.
struct RankGuard {
  std::vector<size_t> inputs;
  int min_rank;
};

const std::map<std::string, RankGuard>& rank_guards() {
  // N x C x D1 ... (X) and C x M/group x k1 ... (W): at least one spatial dim.
  static const std::map<std::string, RankGuard> guards = {{"ConvTranspose", {{0, 1}, 3}}};
  return guards;
}

onnx::InferenceFunction guarded(const std::string& op, const RankGuard& guard,
                                onnx::InferenceFunction infer) {
  return [op, guard, infer](onnx::InferenceContext& ctx) {
    for (size_t i : guard.inputs) {
      if (i >= ctx.getNumInputs() || !onnx::hasInputShape(ctx, i)) continue;
      const int rank = ctx.getInputType(i)->tensor_type().shape().dim_size();
      if (rank < guard.min_rank)
        fail_shape_inference(op, " input ", i, " has rank ", rank, "; it needs ", guard.min_rank,
                             " or more");
    }
    if (infer) infer(ctx);
  };
}

}  // namespace

const onnx::OpSchema* GuardedSchemaRegistry::GetSchema(const std::string& key, int max_version,
                                                       const std::string& domain) const {
  const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(key, max_version, domain);
  const auto guard = rank_guards().find(key);
  if (schema == nullptr || !domain.empty() || guard == rank_guards().end()) return schema;
  std::lock_guard<std::mutex> lock(mutex_);
  auto& copy = guarded_[schema];
  if (!copy) {
    copy = std::make_unique<onnx::OpSchema>(*schema);
    copy->TypeAndShapeInferenceFunction(
        guarded(key, guard->second, schema->GetTypeAndShapeInferenceFunction()));
  }
  return copy.get();
}

}  // namespace dprun
