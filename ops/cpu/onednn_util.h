#pragma once
// Shared plumbing of the oneDNN fast paths: the CPU engine, a stream per thread, plain
// memory descriptors for Tensors, a per-kernel primitive cache keyed by shapes, and the
// reference kernel a fast path falls back to for shapes oneDNN rejects.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/kernel.h"
#include "ops/common/shape_cache.h"

namespace dprun::onednn {

/// The process-wide CPU engine (oneDNN engines are thread-safe).
inline dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

/// One stream per calling thread: concurrent replicas never share a stream.
inline dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

inline dnnl::memory::dims to_dims(const Shape& shape) {
  return dnnl::memory::dims(shape.begin(), shape.end());
}

/// Dense row-major strides of `shape`.
inline dnnl::memory::dims dense_strides(const Shape& shape) {
  dnnl::memory::dims strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * std::max<int64_t>(shape[i], 1);
  return strides;
}

/// oneDNN's data type for float32, float16 and bfloat16 (f32 for any other dtype).
inline dnnl::memory::data_type data_type_of(DType dtype) {
  return dtype == DType::Float16    ? dnnl::memory::data_type::f16
         : dtype == DType::BFloat16 ? dnnl::memory::data_type::bf16
                                    : dnnl::memory::data_type::f32;
}

/// A plain (row-major) descriptor of `shape`, f32 unless told otherwise.
inline dnnl::memory::desc plain_desc(const Shape& shape,
                                     dnnl::memory::data_type type = dnnl::memory::data_type::f32) {
  return dnnl::memory::desc(to_dims(shape), type, dense_strides(shape));
}

/// Wraps tensor memory (no copy) as a oneDNN memory object of the given descriptor.
inline dnnl::memory wrap(const dnnl::memory::desc& desc, const void* data) {
  return dnnl::memory(desc, cpu_engine(), const_cast<void*>(data));
}

/// Attributes for every primitive: the caller supplies the scratchpad. In oneDNN's default
/// (library) mode, primitives share one scratchpad unless the library was built with
/// concurrent execution enabled, and replicas execute primitives concurrently: without this,
/// results race (seen as run-to-run differences with several CPU devices).
inline dnnl::primitive_attr concurrent_attr(dnnl::primitive_attr attr = {}) {
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

/// Executes `prim` on this thread's stream with scratchpad memory from a per-thread buffer
/// (`scratchpad` is the primitive descriptor's scratchpad_desc()), and waits for it.
inline void execute(const dnnl::primitive& prim, const dnnl::memory::desc& scratchpad,
                    std::unordered_map<int, dnnl::memory> args) {
  thread_local std::vector<char> buffer;
  size_t bytes = scratchpad.get_size();
  if (bytes > 0) {
    if (buffer.size() < bytes) buffer.resize(bytes);
    args[DNNL_ARG_SCRATCHPAD] = dnnl::memory(scratchpad, cpu_engine(), buffer.data());
  }
  prim.execute(thread_stream(), args);
  thread_stream().wait();
}

/// One memory argument of a primitive execution (execute_reusing): `desc`, the descriptor the
/// primitive was built with for it, and this call's `data`; or, with `desc` null, a memory
/// object made elsewhere (packed weights), used as it is.
struct MemoryArg {
  int arg;
  const dnnl::memory::desc* desc;
  const void* data;
  dnnl::memory memory = {};
};

/// execute() for the fast paths that run every call: this thread keeps the memory objects of
/// each primitive's arguments and points them at each call's data, instead of making new ones
/// (about 1 us a call with five arguments, more than a small primitive's whole execution
/// takes). The same primitive must be passed the same descriptor for an argument on every call
/// (its own descriptors are). A thread keeps the objects of at most kReusedPrimitives
/// primitives, each holding its primitive alive, then starts over.
void execute_reusing(const dnnl::primitive& prim, const dnnl::memory::desc& scratchpad,
                     std::initializer_list<MemoryArg> args);

/// A float buffer of this thread's for `Owner`'s slot `slot` (0 or 1), of at least `floats`
/// floats, 64-byte aligned as the allocator's tensors are (oneDNN's vector loads and stores of a
/// misaligned buffer split cache lines); grown on demand and kept between calls, like
/// execute_reusing's objects. Each Owner type has its own buffers.
template <class Owner>
float* aligned_thread_buffer(int slot, size_t floats) {
  constexpr size_t kAlignFloats = 64 / sizeof(float);
  thread_local std::vector<float> buffers[2];
  std::vector<float>& b = buffers[slot];
  if (b.size() < floats + kAlignFloats) b.resize(floats + kAlignFloats);
  const auto address = reinterpret_cast<uintptr_t>(b.data());
  return b.data() + ((64 - address % 64) % 64) / sizeof(float);
}

/// Multiply-adds below which a oneDNN primitive is created and executed on one thread
/// (run_sized). Splitting such small work costs more than it saves: a standalone oneDNN matmul
/// on this project's 2-vCPU AMD EPYC took 7.1 us on one thread and 10.5 on two at 0.2M
/// multiply-adds, 5.5 against 7.9 at 0.5M, 15.4 against 15.2 at 1.6M, 14.1-17.0 against 19.4 at
/// 2.1M, and in a model the next small op then also finds its input in one core's cache.
inline constexpr double kSerialMultiplyAdds = 2e6;

/// Runs fn, which looks up (creating if needed) and executes a kernel's oneDNN primitives, on
/// one thread (ExecutionContext::run_on_one_thread) when `multiply_adds` is below
/// kSerialMultiplyAdds and the context has several threads, else as it is. oneDNN fixes a
/// primitive's thread count when it creates it; the choice here depends only on the shapes that
/// key the kernel's cache, so a cached primitive always runs as it was created.
template <class F>
void run_sized(KernelContext& ctx, double multiply_adds, F&& fn) {
  if (ctx.threads() > 1 && multiply_adds < kSerialMultiplyAdds)
    ctx.execution().run_on_one_thread(fn);
  else
    fn();
}

/// How a kernel that runs its primitives a few images at a time splits a batch: `tile` images
/// per call, the largest divisor of the batch whose per-call value between primitives takes at
/// most the kernel's byte bound (one image when even that is wider); with several threads and at
/// least as many images, each thread runs whole tiles (`per_thread`, oneDNN then runs one thread
/// inside each primitive), else the tiles run in turn with oneDNN's threads inside each.
struct ImageTiles {
  int64_t tile = 1;
  bool per_thread = false;

  /// The tiling of `images` images of `image_bytes` each, within `max_bytes` per tile, on
  /// `threads` threads.
  static ImageTiles of(int64_t images, int64_t image_bytes, int64_t max_bytes, int threads) {
    ImageTiles tiles;
    tiles.per_thread = threads > 1 && images >= threads;
    for (int64_t t = images; t > 1; --t)
      if (images % t == 0 && t * image_bytes <= max_bytes &&
          (!tiles.per_thread || images / t >= threads)) {
        tiles.tile = t;
        break;
      }
    return tiles;
  }

  /// Runs run_tile(t) for every tile t of `images` images, per_thread or in turn.
  template <class RunTile>
  void for_each(KernelContext& ctx, int64_t images, const RunTile& run_tile) const {
    const auto run_tiles = [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) run_tile(t);
    };
    if (per_thread)
      ctx.parallel_for(images / tile, 1, run_tiles);
    else
      run_tiles(0, images / tile);
  }
};

/// Copies `from` into `to` (different layouts) with a reorder using a caller scratchpad.
inline void reorder_into(const dnnl::memory& from, const dnnl::memory& to) {
  dnnl::reorder::primitive_desc pd(from, to, concurrent_attr());
  execute(dnnl::reorder(pd), pd.scratchpad_desc(), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

/// Returns `user` when its layout is what the primitive wants, else a reordered copy.
inline dnnl::memory to_layout(const dnnl::memory& user, const dnnl::memory::desc& wanted) {
  if (user.get_desc() == wanted) return user;
  dnnl::memory out(wanted, cpu_engine());
  reorder_into(user, out);
  return out;
}

/// A memory of `desc` over a buffer of `ctx`'s device allocator, which `keep` holds: for the
/// copies a kernel makes in a primitive's layout (activations, weights being trained), which
/// then come from the cached memory that tensors use. oneDNN's own (malloc) would leave glibc
/// keeping such large freed blocks in its heap beside that cache, or mapping and faulting them
/// in anew at each call.
inline dnnl::memory allocated_memory(const KernelContext& ctx, const dnnl::memory::desc& desc,
                                     Tensor& keep) {
  keep = Tensor::empty({static_cast<int64_t>(desc.get_size())}, DType::UInt8, ctx.device());
  return wrap(desc, keep.raw_data());
}

/// to_layout() into allocated_memory().
inline dnnl::memory to_layout(const KernelContext& ctx, const dnnl::memory& user,
                              const dnnl::memory::desc& wanted, Tensor& keep) {
  if (user.get_desc() == wanted) return user;
  dnnl::memory out = allocated_memory(ctx, wanted, keep);
  reorder_into(user, out);
  return out;
}

using dprun::shape_key;
using dprun::ShapeCache;

/// The reference kernel for the same node, used when oneDNN rejects a particular shape.
inline std::unique_ptr<OpKernel> make_reference(const KernelInfo& info) {
  std::string why;
  auto kernel = KernelRegistry::instance().create(info, &why, "reference");
  if (!kernel) info.node.fail("no reference kernel to fall back to: ", why);
  return kernel;
}

/// The reference kernel of the node read in float32: a 16-bit fast path has no 16-bit reference
/// of its own, and hands its float32 work, never its own inputs, to the float32 path
/// (run_in_float32, ops/cpu/run_in_float32.h).
inline std::unique_ptr<OpKernel> make_float32_reference(const KernelInfo& info) {
  KernelInfo as_float32 = info;
  for (auto& type : as_float32.input_types)
    if (type && is_16bit_float(type->dtype)) type->dtype = DType::Float32;
  return make_reference(as_float32);
}

}  // namespace dprun::onednn
