// The fence between API calls and trn_runtime_shutdown: a store-buffering litmus test (Dekker's
// pattern). Each side stores its flag, fences, loads the other's; x86 lets both loads see the
// old values unless both sides fence, so a call side that only orders for the compiler relies on
// the heavy side making it fence.
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "runtime/asymmetric_fence.hpp"

using namespace trn::rt;

TEST_CASE("the fence's heavy side uses membarrier where the kernel has it") {
#if defined(__SANITIZE_THREAD__)
  CHECK_FALSE(detail::g_membarrier_registered);  // ThreadSanitizer sees full fences only
#else
  const long supported = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  CHECK(detail::g_membarrier_registered ==
        (supported > 0 && (supported & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0));
#endif
  heavy_fence();  // returns, registered or not
  light_fence();
}

TEST_CASE("a light and a heavy fence never let both sides miss the other's store") {
  constexpr uint64_t kRounds = 20000;
  struct alignas(64) Flag {
    std::atomic<uint64_t> value{0};
  };
  Flag x, y, start, done;
  uint64_t light_saw[kRounds] = {};
  // Spins, then yields: on a loaded machine the two sides rarely run at once, and a waiter that
  // only spun would burn its whole time slice each round. The waits lie outside each side's
  // store, fence and load, so a context switch there changes nothing the test checks.
  const auto wait_until_reaches = [](const Flag &flag, uint64_t round) {
    for (int spins = 0; flag.value.load(std::memory_order_acquire) < round; ++spins)
      if (spins > 1000) std::this_thread::yield();
  };
  std::thread light_side([&] {
    for (uint64_t i = 1; i <= kRounds; ++i) {
      wait_until_reaches(start, i);
      x.value.store(i, std::memory_order_relaxed);
      light_fence();
      light_saw[i - 1] = y.value.load(std::memory_order_relaxed);
      done.value.store(i, std::memory_order_release);
    }
  });
  uint64_t both_missed = 0;
  for (uint64_t i = 1; i <= kRounds; ++i) {
    start.value.store(i, std::memory_order_release);
    y.value.store(i, std::memory_order_relaxed);
    heavy_fence();
    const uint64_t heavy_saw = x.value.load(std::memory_order_relaxed);
    wait_until_reaches(done, i);
    // Each round stores its number: a value below it is the previous round's, a miss.
    if (heavy_saw < i && light_saw[i - 1] < i) ++both_missed;
  }
  light_side.join();
  CHECK(both_missed == 0);
}
