#pragma once
// CUDA graph capture on the GPUs (engine/stream_capture.h; cuda_capture.cpp).

namespace dprun {

/// Whether the calling thread's capture on GPU `device` keeps the host memory at `src` (so a
/// copy from it may be captured: each replay reads it again).
bool cuda_capture_keeps(int device, const void* src);

}  // namespace dprun
