#include "thread_fault.hpp"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>
#include <cerrno>

namespace {

std::atomic<bool> armed{false};
std::atomic<int64_t> allowed_left{0};

using CreateFn = int (*)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

CreateFn real_create() {
  static std::atomic<CreateFn> real{nullptr};
  CreateFn fn = real.load(std::memory_order_acquire);
  if (!fn) {
    fn = reinterpret_cast<CreateFn>(dlsym(RTLD_NEXT, "pthread_create"));
    real.store(fn, std::memory_order_release);
  }
  return fn;
}

}  // namespace

namespace trn::test {

void arm_thread_failure(uint32_t allowed) {
  allowed_left.store(allowed);
  armed.store(true);
}

void disarm_thread_failure() {
  armed.store(false);
}

}  // namespace trn::test

// Default visibility: the project compiles with hidden symbols, and this one must be exported.
extern "C" __attribute__((visibility("default"))) int pthread_create(pthread_t *thread,
                                                                     const pthread_attr_t *attr,
                                                                     void *(*start)(void *),
                                                                     void *arg) {
  if (armed.load() && allowed_left.fetch_sub(1) <= 0) return EAGAIN;
  CreateFn fn = real_create();
  return fn ? fn(thread, attr, start, arg) : EAGAIN;
}
