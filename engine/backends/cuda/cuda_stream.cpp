#include "engine/backends/cuda/cuda_stream.h"

#include <cstddef>
#include <vector>

namespace dprun {

namespace {
std::vector<cudaStream_t>& thread_streams() {
  thread_local std::vector<cudaStream_t> streams;
  return streams;
}

cudaStream_t& slot(int device) {
  auto& streams = thread_streams();
  size_t index = static_cast<size_t>(device);
  if (streams.size() <= index) streams.resize(index + 1, nullptr);
  return streams[index];
}
}  // namespace

cudaStream_t current_stream(int device) {
  const auto& streams = thread_streams();
  size_t index = static_cast<size_t>(device);
  return index < streams.size() ? streams[index] : nullptr;
}

CurrentStreamScope::CurrentStreamScope(int device, cudaStream_t stream)
    : device_(device), previous_(slot(device)) {
  slot(device) = stream;
}

CurrentStreamScope::~CurrentStreamScope() {
  slot(device_) = previous_;
}

}  // namespace dprun
