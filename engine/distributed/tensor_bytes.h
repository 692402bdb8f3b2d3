#pragma once
// Tensors as bytes, to move them between ranks (ProcessGroup::gather carries bytes).
#include <cstdint>
#include <span>
#include <vector>

#include "engine/tensor.h"

namespace dprun {

/// Every tensor's dtype, shape and contents, in order. Throws Error for a string tensor, which
/// has no byte form.
std::vector<uint8_t> pack_tensors(const std::vector<Tensor>& tensors);

/// The tensors pack_tensors() wrote, as new CPU tensors. Throws Error when `bytes` are not
/// such a record.
std::vector<Tensor> unpack_tensors(std::span<const uint8_t> bytes);

}  // namespace dprun
