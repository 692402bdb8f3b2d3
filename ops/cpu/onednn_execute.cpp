// onednn::execute_reusing (ops/cpu/onednn_util.h): per-thread memory objects per primitive.
#include <array>
#include <unordered_map>
#include <vector>

#include "ops/cpu/onednn_util.h"

namespace dprun::onednn {

namespace {

constexpr size_t kReusedPrimitives = 1024;
constexpr size_t kMaxArgs = 8;

/// A primitive's argument objects on one thread. `primitive` keeps it alive, so its handle,
/// the cache's key, cannot name another primitive while the entry exists.
struct ReusedArgs {
  dnnl::primitive primitive;
  std::vector<std::pair<int, dnnl::memory>> memories;

  dnnl::memory& slot(int arg, const dnnl::memory::desc& desc, void* data) {
    for (auto& [id, memory] : memories)
      if (id == arg) {
        memory.set_data_handle(data);
        return memory;
      }
    return memories.emplace_back(arg, dnnl::memory(desc, cpu_engine(), data)).second;
  }
};

}  // namespace

void execute_reusing(const dnnl::primitive& prim, const dnnl::memory::desc& scratchpad,
                     std::initializer_list<MemoryArg> args) {
  thread_local std::unordered_map<dnnl_primitive_t, ReusedArgs> reused;
  thread_local std::vector<char> buffer;
  auto it = reused.find(prim.get());
  if (it == reused.end()) {
    if (reused.size() >= kReusedPrimitives) reused.clear();
    it = reused.emplace(prim.get(), ReusedArgs{prim, {}}).first;
  }
  ReusedArgs& entry = it->second;
  std::array<dnnl_exec_arg_t, kMaxArgs + 1> exec;  // + the scratchpad
  DPRUN_CHECK(args.size() <= kMaxArgs, "execute_reusing: ", args.size(), " arguments");
  int n = 0;
  for (const MemoryArg& a : args) {
    const dnnl::memory& m =
        a.desc ? entry.slot(a.arg, *a.desc, const_cast<void*>(a.data)) : a.memory;
    exec[n++] = {a.arg, m.get()};
  }
  if (const size_t bytes = scratchpad.get_size(); bytes > 0) {
    if (buffer.size() < bytes) buffer.resize(bytes);
    exec[n++] = {DNNL_ARG_SCRATCHPAD,
                 entry.slot(DNNL_ARG_SCRATCHPAD, scratchpad, buffer.data()).get()};
  }
  dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), thread_stream().get(), n, exec.data()),
                          "could not execute a primitive");
  thread_stream().wait();
}

}  // namespace dprun::onednn
