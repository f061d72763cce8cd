#include "support/fault_injection.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace {

// Thread creations this thread makes before they fail; negative: none fails.
thread_local int64_t threads_left = -1;
// Allocations this thread makes before the ones that fail (negative: none fails), and how many
// fail then.
thread_local int64_t allocations_left = -1;
thread_local uint64_t failures_left = 0;

// Whether this allocation is one to fail (after them the next ones succeed again).
bool fail_this_allocation() {
  if (allocations_left < 0) return false;
  if (allocations_left > 0) {
    --allocations_left;
    return false;
  }
  if (--failures_left == 0) allocations_left = -1;
  return true;
}

// The definition this one stands in front of (the C++ library's, or a sanitizer's, which then
// keeps checking every allocation and its matching delete).
template <typename Fn>
Fn next_definition(const char *symbol) {
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, symbol));
  if (!fn) {
    // A static C++ library or sanitizer runtime has no next definition to pass calls on to.
    std::fprintf(stderr, "fault injection: no definition of %s after this one (%s)\n", symbol,
                 dlerror());
    std::abort();
  }
  return fn;
}

}  // namespace

namespace trn::test {

void arm_thread_failure(uint32_t allowed) {
  threads_left = allowed;
}

void disarm_thread_failure() {
  threads_left = -1;
}

void arm_allocation_failure(uint64_t allowed, uint64_t failures) {
  failures_left = failures;
  allocations_left = failures == 0 ? -1 : static_cast<int64_t>(allowed);
}

void disarm_allocation_failure() {
  allocations_left = -1;
}

}  // namespace trn::test

// Default visibility: the project compiles with hidden symbols, and this one must be exported.
extern "C" __attribute__((visibility("default"))) int pthread_create(pthread_t *thread,
                                                                     const pthread_attr_t *attr,
                                                                     void *(*start)(void *),
                                                                     void *arg) {
  using CreateFn = int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
  static const auto next = next_definition<CreateFn>("pthread_create");
  if (threads_left == 0) return EAGAIN;
  if (threads_left > 0) --threads_left;
  return next(thread, attr, start, arg);
}

// The throwing forms of the global operator new: the nothrow ones and every operator delete
// stay the library's own.
void *operator new(std::size_t bytes) {
  static const auto next = next_definition<void *(*)(std::size_t)>("_Znwm");
  if (fail_this_allocation()) throw std::bad_alloc();
  return next(bytes);
}
void *operator new[](std::size_t bytes) {
  static const auto next = next_definition<void *(*)(std::size_t)>("_Znam");
  if (fail_this_allocation()) throw std::bad_alloc();
  return next(bytes);
}
void *operator new(std::size_t bytes, std::align_val_t alignment) {
  static const auto next =
      next_definition<void *(*)(std::size_t, std::align_val_t)>("_ZnwmSt11align_val_t");
  if (fail_this_allocation()) throw std::bad_alloc();
  return next(bytes, alignment);
}
void *operator new[](std::size_t bytes, std::align_val_t alignment) {
  static const auto next =
      next_definition<void *(*)(std::size_t, std::align_val_t)>("_ZnamSt11align_val_t");
  if (fail_this_allocation()) throw std::bad_alloc();
  return next(bytes, alignment);
}
