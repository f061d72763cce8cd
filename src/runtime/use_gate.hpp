// The users of an allocation and its closing: queue commands and host calls enter while it is
// open and leave when done; a free closes it, waits for those inside, then returns the memory.
// Entering and leaving are one atomic operation each and never block (a reader-writer lock costs
// two library calls on every command's operands, each taking its cache line twice); a user that
// arrives after the close is turned away, which is how a command learns that its memory was
// freed before it ran.
#pragma once

#include <atomic>
#include <cstdint>

namespace trn::rt {

class UseGate {
 public:
  // False once closed (the caller must not touch the memory; nothing to leave).
  bool enter() {
    if ((word_.fetch_add(1, std::memory_order_acquire) & kClosed) == 0) return true;
    leave();
    return false;
  }
  // After a successful enter(): the last user out of a closed gate wakes its closer.
  void leave() {
    if (word_.fetch_sub(1, std::memory_order_release) == (kClosed | 1)) word_.notify_all();
  }
  // Closes it for good and waits until every user inside has left (users are brief: a copy or a
  // host call that runs). False when it was closed already (someone else frees the memory).
  bool close() {
    uint32_t seen = word_.fetch_or(kClosed, std::memory_order_acq_rel);
    if ((seen & kClosed) != 0) return false;
    for (seen |= kClosed; seen != kClosed; seen = word_.load(std::memory_order_acquire))
      word_.wait(seen, std::memory_order_acquire);
    return true;
  }
  bool closed() const { return (word_.load(std::memory_order_acquire) & kClosed) != 0; }

  // A host call's use for one scope; `entered()` says whether the memory may be touched.
  class Hold {
   public:
    explicit Hold(UseGate &gate) : gate_(gate.enter() ? &gate : nullptr) {}
    ~Hold() {
      if (gate_) gate_->leave();
    }
    Hold(const Hold &) = delete;
    Hold &operator=(const Hold &) = delete;
    bool entered() const { return gate_ != nullptr; }

   private:
    UseGate *gate_;
  };

 private:
  static constexpr uint32_t kClosed = 1u << 31;
  std::atomic<uint32_t> word_{0};  // kClosed | the users inside
};

}  // namespace trn::rt
