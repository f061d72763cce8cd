#include "sim/dma_helpers.hpp"

#include <algorithm>
#include <climits>
#include <exception>
#include <new>
#include <system_error>
#include <utility>

#include "common/thread_name.hpp"
#include "sim/wait_primitives.hpp"

namespace trn::sim {

// One transfer's pieces. Shared with the helpers that took it from the list, so that a helper
// finding no piece left never touches a job its caller has already returned from.
struct DmaHelpers::Job {
  Job(PartFn part, void *with, uint64_t total, uint64_t each, uint32_t count)
      : fn(part), context(with), bytes(total), piece(each), pieces(count), unfinished(count) {}

  // Takes the next piece and runs it; false when every piece was taken.
  bool run_one() {
    const uint32_t i = next.fetch_add(1, std::memory_order_relaxed);
    if (i >= pieces) return false;
    const uint64_t at = i * piece;
    std::string reason;
    if (const trn_result_t r = run_piece(at, &reason); r != TRN_SUCCESS) {
      std::lock_guard lock(failure_mu);
      if (result == TRN_SUCCESS) {
        result = r;
        why = std::move(reason);
      }
    }
    if (unfinished.fetch_sub(1, std::memory_order_acq_rel) == 1)
      futex_wake(&unfinished, INT_MAX, FutexScope::process_private);
    return true;
  }

  // Nothing thrown leaves a piece: on a helper it would end the process, and on the caller it
  // would return while helpers still ran pieces over the caller's frame.
  trn_result_t run_piece(uint64_t at, std::string *reason) noexcept {
    try {
      return fn(context, at, std::min(piece, bytes - at), reason);
    } catch (const std::bad_alloc &) {
      *reason = "out of memory";  // short enough to need no allocation
      return TRN_ERROR_OUT_OF_HOST_MEMORY;
    } catch (const std::exception &e) {
      try {
        *reason = std::string("moving bytes failed: ") + e.what();
      } catch (...) {
      }
      return TRN_ERROR_INTERNAL;
    }
  }

  const PartFn fn;
  void *const context;
  const uint64_t bytes, piece;
  const uint32_t pieces;
  std::atomic<uint32_t> next{0};
  std::atomic<uint32_t> unfinished;  // pieces not yet done; the caller sleeps on it
  std::mutex failure_mu;             // guards result and why
  trn_result_t result = TRN_SUCCESS;
  std::string why;
};

DmaHelpers::DmaHelpers(unsigned threads) : threads_(std::max(1u, threads)) {}

DmaHelpers::~DmaHelpers() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_.notify_all();
  for (std::thread &helper : helpers_) helper.join();
}

void DmaHelpers::start_locked() {
  if (started_) return;
  started_ = true;
  for (unsigned i = 1; i < threads_; ++i) {
    try {
      helpers_.emplace_back([this] { loop(); });
      common::name_thread(helpers_.back(), "trn-dma");
    } catch (const std::system_error &) {
      break;  // no thread to spare: the callers run more of their pieces themselves
    }
  }
}

trn_result_t DmaHelpers::run_pieces(uint64_t bytes, PartFn fn, void *context, std::string *why) {
  // Rounded up twice (to a share of the bytes, then to a page), so the pieces cover every byte
  // in at most `wanted` of them.
  const uint64_t wanted = uint64_t{threads_} * kPiecesPerThread;
  const uint64_t share = bytes / wanted + (bytes % wanted != 0);
  const uint64_t piece = std::max(kPieceAlign, (share + kPieceAlign - 1) & ~(kPieceAlign - 1));
  const uint64_t pieces = bytes / piece + (bytes % piece != 0);
  if (threads_ == 1 || pieces <= 1) return fn(context, 0, bytes, why);
  std::shared_ptr<Job> job;
  try {
    job = std::make_shared<Job>(fn, context, bytes, piece, static_cast<uint32_t>(pieces));
    std::lock_guard lock(mu_);
    start_locked();
    jobs_.push_back(job);
  } catch (const std::bad_alloc &) {
    return fn(context, 0, bytes, why);  // not shared: all of it here
  }
  work_.notify_all();
  while (job->run_one()) {
  }
  {
    std::lock_guard lock(mu_);
    jobs_.erase(std::remove(jobs_.begin(), jobs_.end(), job), jobs_.end());
  }
  // The pieces helpers took end within a piece's time: spin briefly, then sleep on the count.
  constexpr uint64_t kSpinNs = 20'000;
  SpinPhase spin(monotonic_ns(), kSpinNs);
  for (uint32_t left; (left = job->unfinished.load(std::memory_order_acquire)) != 0;)
    if (!spin.next()) futex_wait(&job->unfinished, left, 1'000'000, FutexScope::process_private);
  std::lock_guard lock(job->failure_mu);
  if (job->result != TRN_SUCCESS) *why = std::move(job->why);
  return job->result;
}

void DmaHelpers::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    work_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (stop_) return;
    std::shared_ptr<Job> job = jobs_.front();
    lock.unlock();
    while (job->run_one()) {
    }
    lock.lock();
    // Every piece is taken: nobody else need look at it (its caller may have dropped it).
    jobs_.erase(std::remove(jobs_.begin(), jobs_.end(), job), jobs_.end());
  }
}

}  // namespace trn::sim
