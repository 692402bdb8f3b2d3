#pragma once
// The checksum of a training checkpoint (engine/training/checkpoint_state.h): one 64-bit value
// over every initializer of the checkpoint's graph, names and bytes (the parameters, the running
// statistics, the optimizer's buffers, the loss scaler, the run's step and settings), so that
// a byte changed anywhere in them is found when the run resumes. Header-only so that tests can
// seal a checkpoint they edit on purpose, to reach the checks behind the checksum.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/training/distributed_data_parallel.h"
#include "engine/tensor.h"

namespace dprun {

/// The initializer that holds the checksum itself (left out of it).
inline constexpr char kCheckpointChecksum[] = "dprun.state.checksum";

/// checksum_tensors over each initializer's name (as bytes) then its value, in name order,
/// leaving out kCheckpointChecksum. String tensors count by name only (their elements are not
/// bytes in memory); a checkpoint's own tensors are numbers.
inline uint64_t checkpoint_checksum(const std::map<std::string, Tensor>& initializers) {
  std::vector<Tensor> parts;
  for (const auto& [name, value] : initializers) {
    if (name == kCheckpointChecksum) continue;
    parts.push_back(Tensor::from_vector<uint8_t>({static_cast<int64_t>(name.size())},
                                                 std::vector<uint8_t>(name.begin(), name.end())));
    if (value.dtype() != DType::String) parts.push_back(value);
  }
  return checksum_tensors(parts);
}

}  // namespace dprun
