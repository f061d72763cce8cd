#include "runtime/sem.hpp"

#include <linux/futex.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "common/log.hpp"
#include "common/parse.hpp"
#include "runtime/error.hpp"
#include "runtime/session.hpp"

namespace trn::rt {

namespace {

std::atomic_ref<uint64_t> value_of(trn_hal_sem_cell_t *cell) {
  return std::atomic_ref(cell->value);
}
std::atomic_ref<uint32_t> word(uint32_t &w) {
  return std::atomic_ref(w);
}

void futex_wake_all(uint32_t *address, bool shared) {
  syscall(SYS_futex, address, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr,
          0);
}

void futex_wait(uint32_t *address, uint32_t expected, uint64_t timeout_ns, bool shared) {
  struct timespec ts {};
  ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000u);
  ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000u);
  syscall(SYS_futex, address, shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE, expected, &ts, nullptr, 0);
}

void cpu_relax() {
  __builtin_ia32_pause();
}

}  // namespace

uint64_t monotonic_ns() {
  struct timespec now {};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
}

namespace {

constexpr uint64_t kDefaultSpinNs = 20000;
constexpr uint64_t kMaxSpinNs = 10'000'000'000;  // 10 s: a budget, not a way to never sleep
std::atomic<uint64_t> spin_budget{kDefaultSpinNs};

}  // namespace

trn_result_t load_spin_budget(std::string *why) {
  uint64_t budget = kDefaultSpinNs;
  if (auto text = common::env("TRN_SPIN_NS")) {
    auto value = common::parse_uint(*text);
    if (!value || *value > kMaxSpinNs) {
      *why = "TRN_SPIN_NS='" + *text +
             "' is not a spin time: use nanoseconds, a whole number from 0 to 10000000000 (10 s)";
      return TRN_ERROR_INVALID_CONFIG;
    }
    budget = *value;
  }
  spin_budget.store(budget, std::memory_order_relaxed);
  return TRN_SUCCESS;
}

uint64_t spin_budget_ns() {
  return spin_budget.load(std::memory_order_relaxed);
}

Sem::Sem(Device &device, uint64_t initial_value, bool queue_timeline)
    : device_(device),
      local_(std::make_unique<trn_hal_sem_cell_t>()),
      cell_(local_.get()),
      queue_timeline_(queue_timeline) {
  cell_->value = initial_value;
}

Sem::Sem(Device &device, trn_hal_sem_cell_t *cell, uint32_t record, uint64_t id)
    : device_(device), cell_(cell), record_(record), id_(id) {}

Sem::~Sem() {
  close_watchers();
}

bool Sem::try_use() {
  uint32_t seen = uses_.load(std::memory_order_relaxed);
  do {
    if (seen & kDestroyed) return false;
  } while (!uses_.compare_exchange_weak(seen, seen + 1, std::memory_order_acquire,
                                        std::memory_order_relaxed));
  return true;
}

void Sem::end_use() {
  uses_.fetch_sub(1, std::memory_order_release);
}

trn_result_t Sem::destroy() {
  uint32_t seen = 0;
  if (uses_.compare_exchange_strong(seen, kDestroyed, std::memory_order_acq_rel))
    return TRN_SUCCESS;
  if (seen & kDestroyed)
    return ::trn::rt::fail(TRN_ERROR_INVALID_HANDLE, "the semaphore was destroyed by another call");
  return ::trn::rt::fail(
      TRN_ERROR_HANDLE_IN_USE,
      std::to_string(seen) +
          " queued commands still wait on or signal the semaphore: finish them first");
}

uint64_t Sem::value() const {
  return value_of(cell_).load(std::memory_order_acquire);
}

bool Sem::failed() const {
  return word(cell_->failed).load(std::memory_order_acquire) != 0;
}

void Sem::poke() {
  word(cell_->wake).fetch_add(1, std::memory_order_release);
  if (word(cell_->sleepers).load(std::memory_order_acquire) != 0)
    futex_wake_all(&cell_->wake, shared());
}

void Sem::signal(uint64_t value, bool clear_failure) {
  auto current = value_of(cell_);
  uint64_t seen = current.load(std::memory_order_relaxed);
  while (seen < value && !current.compare_exchange_weak(seen, value, std::memory_order_release,
                                                        std::memory_order_relaxed)) {
  }
  if (clear_failure) word(cell_->failed).store(0, std::memory_order_release);
  poke();
  notify_watchers();
}

void Sem::fail(const std::string &reason) {
  {
    std::lock_guard lock(mu_);
    reason_ = reason;
  }
  word(cell_->failed).store(1, std::memory_order_release);
  poke();
  notify_watchers();
}

std::string Sem::failure_reason() const {
  std::lock_guard lock(mu_);
  return reason_.empty() ? "the queue that was to signal it failed" : reason_;
}

trn_result_t Sem::wait(uint64_t value, uint64_t timeout_ns, const std::atomic<bool> *interrupt) {
  auto reached = [&] { return value_of(cell_).load(std::memory_order_acquire) >= value; };
  if (reached()) return TRN_SUCCESS;
  if (failed()) return TRN_ERROR_CANCELLED;
  if (timeout_ns == 0) return TRN_TIMEOUT;
  const uint64_t start = monotonic_ns();
  const uint64_t deadline = timeout_ns > UINT64_MAX - start ? UINT64_MAX : start + timeout_ns;
  const uint64_t spin_until = std::min(deadline, start + spin_budget_ns());
  // Spin: a signal from another running thread is seen within ~0.1 us.
  for (uint32_t i = 0;; ++i) {
    if (reached()) return TRN_SUCCESS;
    if (failed()) return TRN_ERROR_CANCELLED;
    if (interrupt && interrupt->load(std::memory_order_acquire)) return TRN_ERROR_CANCELLED;
    if ((i & 63) == 0 && monotonic_ns() >= spin_until) break;
    cpu_relax();
  }
  // Sleep: re-check after announcing ourselves, so a signal in between is never missed.
  for (;;) {
    const uint32_t seen = word(cell_->wake).load(std::memory_order_acquire);
    word(cell_->sleepers).fetch_add(1, std::memory_order_acq_rel);
    if (reached() || failed() || (interrupt && interrupt->load(std::memory_order_acquire))) {
      word(cell_->sleepers).fetch_sub(1, std::memory_order_acq_rel);
    } else {
      const uint64_t now = monotonic_ns();
      if (now >= deadline) {
        word(cell_->sleepers).fetch_sub(1, std::memory_order_acq_rel);
        return TRN_TIMEOUT;
      }
      // Shared cells are also signalled by other processes; sleep in slices so that a process
      // that died mid-signal (its wake never came) costs at most a slice.
      // An interruptible wait (a queue worker) re-checks its flag every 10 ms.
      uint64_t slice = deadline - now;
      if (shared()) slice = std::min<uint64_t>(slice, 100'000'000);
      if (interrupt) slice = std::min<uint64_t>(slice, 10'000'000);
      futex_wait(&cell_->wake, seen, slice, shared());
      word(cell_->sleepers).fetch_sub(1, std::memory_order_acq_rel);
    }
    if (reached()) return TRN_SUCCESS;
    if (failed()) return TRN_ERROR_CANCELLED;
    if (interrupt && interrupt->load(std::memory_order_acquire)) return TRN_ERROR_CANCELLED;
    if (monotonic_ns() >= deadline) return TRN_TIMEOUT;
  }
}

trn_result_t Sem::watch(uint64_t value, int *fd) {
  // A connected socket pair, not an eventfd: the caller's end is the descriptor it owns, and
  // when the caller closes it our end hangs up, so a watch whose caller lost interest is found
  // and closed (an eventfd gives no such sign: its duplicates would live until the value came).
  // A socket also lets us send without SIGPIPE if the caller closed its end in between.
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, ends) != 0)
    return ::trn::rt::fail(
        errno == EMFILE || errno == ENFILE ? TRN_ERROR_OUT_OF_HOST_MEMORY : TRN_ERROR_DRIVER,
        std::string("cannot create the semaphore's descriptor: ") + std::strerror(errno) +
            "; close descriptors no longer needed");
  shutdown(ends[0], SHUT_WR);  // the caller's end only reads
  {
    std::lock_guard lock(mu_);
    reap_abandoned_locked();
    watchers_.push_back({ends[1], value});
  }
  *fd = ends[0];
  notify_watchers();
  if (shared()) watch_shared(shared_from_this());
  return TRN_SUCCESS;
}

void Sem::reap_abandoned_locked() {
  if (watchers_.empty()) return;
  std::vector<pollfd> polled(watchers_.size());
  for (size_t i = 0; i < watchers_.size(); ++i) polled[i] = {watchers_[i].fd, 0, 0};
  if (poll(polled.data(), polled.size(), 0) <= 0) return;
  size_t i = 0;
  std::erase_if(watchers_, [&](const Watcher &w) {
    const bool hung_up = (polled[i++].revents & (POLLHUP | POLLERR)) != 0;
    if (hung_up) close(w.fd);
    return hung_up;
  });
}

void Sem::notify_watchers() {
  std::lock_guard lock(mu_);
  if (watchers_.empty()) return;
  const uint64_t now = value();
  const bool is_failed = failed();
  std::erase_if(watchers_, [&](const Watcher &w) {
    if (now < w.value && !is_failed) return false;
    const uint64_t one = 1;  // what an eventfd read would give
    (void)!send(w.fd, &one, sizeof one, MSG_NOSIGNAL | MSG_DONTWAIT);
    close(w.fd);
    return true;
  });
}

void Sem::close_watchers() {
  std::lock_guard lock(mu_);
  for (const Watcher &w : watchers_) close(w.fd);  // the caller's end reads end-of-file
  watchers_.clear();
}

bool Sem::has_watchers() const {
  std::lock_guard lock(mu_);
  return !watchers_.empty();
}

void hold_sem(Sem &sem) {
  if (!sem.shared()) return;
  std::lock_guard lock(sem.device().memory_mu);
  ++sem.device().sem_holds[{sem.record(), sem.id()}];
}

void release_sem(Sem &sem) {
  if (!sem.shared()) return;
  Device &device = sem.device();
  {
    // The driver knows one hold per process: let go only with this process's last handle.
    std::lock_guard lock(device.memory_mu);
    auto it = device.sem_holds.find({sem.record(), sem.id()});
    if (it != device.sem_holds.end() && --it->second > 0) return;
    if (it != device.sem_holds.end()) device.sem_holds.erase(it);
  }
  trn_hal_error_t err{};
  if (device.driver->ops.sem_release(device.driver->instance, device.driver_index, sem.record(),
                                     sem.id(), &err) != TRN_SUCCESS)
    common::logger("runtime")->warn("releasing a shared semaphore: {}", err.message);
}

namespace {

// Shared semaphores may be signalled by other processes, which cannot write our eventfds: a
// thread polls the watched ones every millisecond while there are any, then exits.
struct SharedWatch {
  std::mutex mu;  // guards sems and running
  std::vector<std::shared_ptr<Sem>> sems;
  bool running = false;
};

SharedWatch &shared_watch() {
  static SharedWatch *instance = new SharedWatch;  // never destroyed: its thread may outlive exit
  return *instance;
}

void shared_watch_loop() {
  SharedWatch &watch = shared_watch();
  for (;;) {
    std::vector<std::shared_ptr<Sem>> sems;
    {
      std::lock_guard lock(watch.mu);
      std::erase_if(watch.sems, [](const auto &sem) { return !sem->has_watchers(); });
      if (watch.sems.empty()) {
        watch.running = false;
        return;
      }
      sems = watch.sems;
    }
    for (auto &sem : sems) sem->notify_watchers();
    struct timespec pause {
      0, 1'000'000
    };
    nanosleep(&pause, nullptr);
  }
}

}  // namespace

void watch_shared(std::shared_ptr<Sem> sem) {
  SharedWatch &watch = shared_watch();
  std::lock_guard lock(watch.mu);
  watch.sems.push_back(std::move(sem));
  if (!watch.running) {
    watch.running = true;
    std::thread(shared_watch_loop).detach();
  }
}

}  // namespace trn::rt
