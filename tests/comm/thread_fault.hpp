// Fault injection for thread creation: this test binary defines pthread_create (the libraries'
// std::thread calls reach it before the C library's), which forwards every call unless a test
// armed a failure, as a process at its thread or memory limit would see.
#pragma once

#include <cstdint>

namespace trn::test {

// The next `allowed` thread creations succeed, every one after them fails with EAGAIN until
// disarm_thread_failure.
void arm_thread_failure(uint32_t allowed);
void disarm_thread_failure();

// Arms on construction, disarms on destruction.
struct ThreadFailure {
  explicit ThreadFailure(uint32_t allowed) { arm_thread_failure(allowed); }
  ~ThreadFailure() { disarm_thread_failure(); }
  ThreadFailure(const ThreadFailure &) = delete;
  ThreadFailure &operator=(const ThreadFailure &) = delete;
};

}  // namespace trn::test
