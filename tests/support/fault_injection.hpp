// Fault injection: this test binary defines pthread_create (the libraries' std::thread calls
// reach it before the C library's) and the throwing forms of the global operator new (every
// library's allocations reach them), which pass each call on to the definition they stand in
// front of unless a test armed a failure, as a process at its thread or memory limit would see
// it. Link it with trn_add_test(... FAULT_INJECTION). It needs the next definitions in shared
// objects (libstdc++, libc, GCC's shared sanitizer runtimes), and says so and aborts otherwise.
#pragma once

#include <cstdint>

namespace trn::test {

// On the calling thread only: the next `allowed` thread creations succeed, every one after them
// fails with EAGAIN until disarm_thread_failure.
void arm_thread_failure(uint32_t allowed);
void disarm_thread_failure();

// Arms on construction, disarms on destruction.
struct ThreadFailure {
  explicit ThreadFailure(uint32_t allowed) { arm_thread_failure(allowed); }
  ~ThreadFailure() { disarm_thread_failure(); }
  ThreadFailure(const ThreadFailure &) = delete;
  ThreadFailure &operator=(const ThreadFailure &) = delete;
};

// On the calling thread only: the next `allowed` allocations with operator new succeed, the
// `failures` after them throw std::bad_alloc (one: as an allocation too large for the memory left
// would; many: as memory that ran out), and the rest succeed again.
void arm_allocation_failure(uint64_t allowed, uint64_t failures = 1);
void disarm_allocation_failure();

struct AllocationFailure {
  explicit AllocationFailure(uint64_t allowed, uint64_t failures = 1) {
    arm_allocation_failure(allowed, failures);
  }
  ~AllocationFailure() { disarm_allocation_failure(); }
  AllocationFailure(const AllocationFailure &) = delete;
  AllocationFailure &operator=(const AllocationFailure &) = delete;
};

}  // namespace trn::test
