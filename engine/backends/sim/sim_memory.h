#pragma once
// Memory of the simulated devices (engine/backends/sim): host memory that the host can touch
// only through the device. Each allocation is its own page-aligned mapping, mapped PROT_NONE
// except while a scope (SimAccess) names it: a sim kernel opens its operands, a copy its source
// and destination. Host code that reads device memory directly, which on a GPU would read
// garbage or crash, stops the process with a message saying it touched simulated device
// memory; so does a kernel that reads device memory it was not given.
//
// Each mapping also keeps which work (SimWork) last wrote it and read it since, on which stream
// (sim_streams.h), so that work reading or writing memory that work on another stream still
// uses, as far as the host knows (it has not waited, nor has the stream waited for an event
// after that work), fails as a race on a GPU would, and so does freeing memory that a stream
// other than the ones the CUDA allocator orders its reuse after still uses: its own stream, the
// freeing stream when a context's, and the streams recorded with record_stream.
//
// While a stream captures or replays a graph (sim_capture.h), its allocations come from the
// graph's private pool (SimGraphPool): at capture, a block freed earlier in the capture or a new
// mapping, and the addresses given are recorded in order; at replay, the n-th allocation must ask
// for the bytes the n-th asked for at capture and gets its address. The pool's mappings go to no
// one else while the graph lives, and are unmapped once it is gone and their last user frees them.
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/allocator.h"
#include "engine/backends/sim/sim_streams.h"

namespace dprun {

class Tensor;

/// The private memory pool of one captured graph of a simulated device. Its fields belong to
/// the device's SimMemory, which changes them under its lock.
struct SimGraphPool {
  std::map<size_t, std::vector<uintptr_t>> free;       // unused mappings, by mapped size
  std::map<uintptr_t, int> users;                      // allocations holding each mapping
  std::vector<std::pair<size_t, uintptr_t>> sequence;  // at capture: bytes asked, address given
  size_t next = 0;                                     // at replay: the next of `sequence`
  bool replaying = false;
  bool released = false;  // the graph is gone
};

/// The memory of one simulated device. Thread-safe.
class SimMemory : public Allocator {
 public:
  explicit SimMemory(Device device) : device_(device) {}
  ~SimMemory() override;
  /// A new mapping of `bytes` rounded up to whole pages; open while any scope of the device is
  /// (a kernel's outputs are allocated inside its scope), closed from the last one's end. It
  /// belongs to the calling thread's current stream of the device, as a CUDA block does.
  void* allocate(size_t bytes) override;
  /// Unmaps the memory. Stops the process, naming the work, when work the host has not waited
  /// for still uses it on a stream other than its own, the calling thread's current one and the
  /// recorded ones (the CUDA allocator would hand it out again before that work is done).
  void deallocate(void* ptr, size_t bytes) override;
  Device device() const override { return device_; }
  AllocatorStats stats() const override;

  /// Opens the mappings that hold `pointers` (addresses in this device's memory; others are
  /// ignored) until the matching close(pointers). Scopes nest, per mapping, on any thread.
  void open(const std::vector<const void*>& pointers);
  void close(const std::vector<const void*>& pointers);

  /// Checks an access at `at` by the work described by `what` to the mapping holding `pointer`
  /// against the earlier work on it, then records it. Throws Error when the earlier work is on
  /// another stream and the host has not waited for it: a read after a write, or a write after
  /// a read or a write. Does nothing for a pointer outside this device's memory.
  void order(const SimStreamPoint& at, const std::shared_ptr<const std::string>& what,
             const void* pointer, bool write);
  /// The start of the mapping holding `pointer`; 0 when none does.
  uintptr_t mapping_of(const void* pointer);
  /// record_stream: the mapping holding `pointer` is used on `stream`, which its release orders
  /// its reuse after, as the CUDA allocator does with an event recorded there when it is freed.
  void record_stream(const void* pointer, SimStreamId stream);

  /// Starts a replay of the graph that owns `pool`: allocations repeat the capture's.
  void begin_replay(SimGraphPool& pool);
  /// Ends it; throws Error when the replay made fewer allocations than the capture.
  void end_replay(SimGraphPool& pool);
  /// The graph that owns `pool` is gone: its unused mappings are unmapped, the others when
  /// their last user frees them. Never throws.
  void release_pool(SimGraphPool& pool) noexcept;

 private:
  struct Access {
    SimStreamPoint at;
    std::shared_ptr<const std::string> what;
  };
  struct Mapping {
    size_t bytes = 0;
    int opened = 0;      // scopes naming it
    bool fresh = false;  // made while a scope was open: open until none is
    SimStreamId owner = 0;
    Access last_write;                   // at.stream == 0 when never written
    std::vector<Access> reads;           // since the last write, the latest per stream
    std::vector<SimStreamId> recorded;   // record_stream's, with work pending when recorded
    std::shared_ptr<SimGraphPool> pool;  // the graph pool that owns it; nullptr for most
  };
  // The mapping that holds `pointer`; mappings_.end() when none does.
  std::map<uintptr_t, Mapping>::iterator holding(const void* pointer);
  // Stops the process when freeing `m` now would let the CUDA allocator reuse it too early.
  void check_release(const Mapping& m) const;
  // A new mapping of `size` bytes (whole pages), open when a scope is. Caller holds mutex_.
  uintptr_t map_locked(size_t size, std::shared_ptr<SimGraphPool> pool);
  // Opens a pool's mapping handed out again, as a new one is. Caller holds mutex_.
  void reopen_locked(uintptr_t address, Mapping& m);
  // An allocation of `bytes` from a graph's pool. Caller holds mutex_.
  void* allocate_from_pool_locked(const std::shared_ptr<SimGraphPool>& pool, size_t bytes);
  // A pool mapping's user frees it. Caller holds mutex_.
  void free_to_pool_locked(std::map<uintptr_t, Mapping>::iterator it);

  Device device_;
  mutable std::mutex mutex_;
  std::map<uintptr_t, Mapping> mappings_;  // by start address
  int scopes_ = 0;                         // scopes open on the device
  std::vector<uintptr_t> made_in_scope_;   // the fresh mappings
  AllocatorStats stats_;
};

/// Opens the memory of a simulated device behind `pointers` for the lifetime of the object;
/// does nothing for a device of another type.
class SimAccess {
 public:
  SimAccess(Device device, std::vector<const void*> pointers);
  ~SimAccess();
  SimAccess(const SimAccess&) = delete;
  SimAccess& operator=(const SimAccess&) = delete;

 private:
  std::shared_ptr<SimMemory> memory_;
  std::vector<const void*> pointers_;
};

/// One piece of work of a simulated device, booked when made on the calling thread's current
/// stream of `device` (sim_streams.h): a kernel or a copy. reads() and writes() check and record
/// its accesses to simulated device memory (SimMemory::order: they throw Error naming both
/// pieces of work and their streams when they race); pointers outside it are ignored.
class SimWork {
 public:
  SimWork(Device device, std::string what);
  void reads(Device device, const void* data);
  void writes(Device device, const void* data);
  /// The host waits for this work and everything booked before it on its stream.
  void wait();
  SimStreamId stream() const { return at_.stream; }

 private:
  void access(Device device, const void* data, bool write);
  SimStreamPoint at_;
  std::shared_ptr<const std::string> what_;
};

/// For its lifetime, the calling thread runs a sim kernel that reads `operands` (data in
/// `device`'s memory) where they are, as the CUDA kernel it stands for reads them on the GPU.
/// The CPU code computing the kernel may copy such an operand to the host to read it (an index
/// list, say): that copy is the simulation's, not one a GPU would make, so SimBackend::copy
/// neither books it on a stream nor counts it in traffic(). Scopes do not nest.
class SimInPlaceReads {
 public:
  SimInPlaceReads(Device device, const std::vector<const void*>& operands);
  ~SimInPlaceReads();
  SimInPlaceReads(const SimInPlaceReads&) = delete;
  SimInPlaceReads& operator=(const SimInPlaceReads&) = delete;

  /// Whether a copy from `src` on `device` reads an operand of the calling thread's kernel.
  static bool covers(Device device, const void* src);
};

/// The memory of simulated `device`.
std::shared_ptr<SimMemory> sim_memory(Device device);

/// The data of those `tensors` that are defined and on `device`, for a SimAccess.
std::vector<const void*> data_on(Device device, const std::vector<const Tensor*>& tensors);

}  // namespace dprun
