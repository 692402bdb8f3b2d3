// AheadWorker (engine/training/ahead_worker.h): values made on its thread in request order,
// errors rethrown by take(), and a worker destroyed with a request outstanding.
#include "engine/training/ahead_worker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace dprun {
namespace {

TEST(AheadWorker, MakesEachRequestedValueOnItsOwnThread) {
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::thread::id> makers;
  AheadWorker<std::string> ahead([&](int64_t k) {
    makers.push_back(std::this_thread::get_id());
    return "batch " + std::to_string(k);
  });
  std::vector<std::string> got;
  ahead.request(3);
  for (int64_t k = 3; k < 7; ++k) {
    got.push_back(ahead.take());
    ahead.request(k + 1);
  }
  got.push_back(ahead.take());
  EXPECT_EQ(got, (std::vector<std::string>{"batch 3", "batch 4", "batch 5", "batch 6", "batch 7"}));
  ASSERT_EQ(makers.size(), 5u);
  for (const std::thread::id& id : makers) {
    EXPECT_NE(id, caller);
    EXPECT_EQ(id, makers[0]);  // one thread for the worker's life
  }
}

TEST(AheadWorker, TakeRethrowsWhatMakingThrewAndGoesOn) {
  AheadWorker<int> ahead([](int64_t k) -> int {
    if (k == 1) throw std::runtime_error("batch 1 is past the end of the data");
    return static_cast<int>(k * 10);
  });
  ahead.request(0);
  EXPECT_EQ(ahead.take(), 0);
  ahead.request(1);
  try {
    ahead.take();
    FAIL() << "take() returned";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "batch 1 is past the end of the data");
  }
  ahead.request(2);
  EXPECT_EQ(ahead.take(), 20);
}

TEST(AheadWorker, ADestroyedWorkerFinishesWhatItWasMaking) {
  std::atomic<bool> started = false;
  std::atomic<int> made = 0;
  {
    AheadWorker<int> ahead([&](int64_t k) {
      started = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      ++made;
      return static_cast<int>(k);
    });
    ahead.request(0);
    while (!started) std::this_thread::yield();
  }
  EXPECT_EQ(made.load(), 1);  // the destructor waited for it
}

}  // namespace
}  // namespace dprun
