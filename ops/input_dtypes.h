#pragma once
// The check that a node's operands share one dtype, with one message for every kernel that
// makes it (the 16-bit products and convolutions on the CPU and on CUDA).
#include <string>

#include "engine/kernel.h"

namespace dprun {

/// Fails unless the node's inputs 0 .. count - 1 that are present all have input 0's dtype,
/// naming them as `names` does ("X, W and B"): "expects X, W and B of one dtype, got <x>, <w>,
/// <b>".
inline void check_one_dtype(const KernelContext& ctx, const char* names, size_t count) {
  const DType dtype = ctx.input(0).dtype();
  bool same = true;
  std::string got;
  for (size_t i = 0; i < count && i < ctx.input_count(); ++i) {
    const Tensor* t = ctx.optional_input(i);
    if (t == nullptr) continue;
    same = same && t->dtype() == dtype;
    got += (got.empty() ? "" : ", ") + t->describe();
  }
  if (!same) ctx.fail("expects ", names, " of one dtype, got ", got);
}

}  // namespace dprun
