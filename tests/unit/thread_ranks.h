#pragma once
// Runs a function once per rank of a thread process group, each on its own thread, and
// returns what each rank threw (empty strings for ranks that returned). With `reduce_devices`,
// rank r's group sums in reduce_devices[r]'s memory.
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "engine/distributed/rank_failure.h"
#include "engine/distributed/thread_process_group.h"

namespace dprun::testing {

inline std::vector<std::string> run_ranks(int size, const std::function<void(ProcessGroup&)>& body,
                                          ProcessGroupOptions options = {},
                                          std::vector<Device> reduce_devices = {}) {
  auto groups = make_thread_process_groups(size, options, std::move(reduce_devices));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        body(*groups[static_cast<size_t>(r)]);
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  std::vector<std::string> messages;
  for (const auto& e : errors) messages.push_back(error_message(e));
  return messages;
}

}  // namespace dprun::testing
