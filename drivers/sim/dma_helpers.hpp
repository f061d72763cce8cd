// Host threads that move a large transfer's bytes beside the thread running its command, as a
// DMA ring's engines share one transfer. They live as long as the driver instance: a thread
// started per transfer cost about 55 us, and its exit unmapped its stack (a TLB shootdown on
// every core), which on a small virtual machine made one 16 MiB copy in five take 2-5 times as
// long as the others.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "drivers/hal.h"

namespace trn::sim {

class DmaHelpers {
 public:
  // Pieces are whole pages, so that every dtype's elements fall whole into one.
  static constexpr uint64_t kPieceAlign = 4096;
  // Pieces per thread: a helper that wakes late (a parked thread takes tens of microseconds
  // here) leaves its share to the others instead of holding up the transfer's end.
  static constexpr uint32_t kPiecesPerThread = 4;

  // `threads` counts the caller: threads - 1 helpers, started on the first transfer.
  explicit DmaHelpers(unsigned threads);
  ~DmaHelpers();  // joins the helpers; no transfer may be running
  DmaHelpers(const DmaHelpers &) = delete;
  DmaHelpers &operator=(const DmaHelpers &) = delete;

  unsigned threads() const { return threads_; }

  // Runs part(offset, bytes, why) over [0, bytes): the caller and whichever helpers are free
  // take page-aligned pieces in turn (the caller all of them when none is), and it returns once
  // every piece is done. The first failure is the result, with its reason in *why.
  template <typename Part>
  trn_result_t run(uint64_t bytes, Part &&part, std::string *why) {
    using Fn = std::remove_reference_t<Part>;
    return run_pieces(
        bytes,
        [](void *p, uint64_t at, uint64_t n, std::string *w) {
          return (*static_cast<Fn *>(p))(at, n, w);
        },
        &part, why);
  }

 private:
  using PartFn = trn_result_t (*)(void *context, uint64_t at, uint64_t bytes, std::string *why);
  struct Job;
  trn_result_t run_pieces(uint64_t bytes, PartFn fn, void *context, std::string *why);
  void start_locked();
  void loop();

  const unsigned threads_;
  std::mutex mu_;  // guards everything below
  std::condition_variable work_;
  std::deque<std::shared_ptr<Job>> jobs_;  // transfers with pieces nobody took yet
  std::vector<std::thread> helpers_;
  bool started_ = false;  // helpers were started (as many as the system gave)
  bool stop_ = false;
};

}  // namespace trn::sim
