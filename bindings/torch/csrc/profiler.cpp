#include "profiler.hpp"

#include <ATen/record_function.h>
#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "check.hpp"
#include "events.hpp"

namespace torch_trn {

// One op's device work: written by its queue (the two timestamps) while the profile records.
struct DeviceRecord {
  std::string name;
  int64_t correlation = 0;
  int device = 0;
  trn_queue_t queue = nullptr;
  uint64_t thread = 0;
  trn_timestamp_t start{}, end{};
  bool submitted = false;  // both timestamps were queued
};

namespace {

using libkineto::ActivityType;

// The activities trn's device work is reported as: kernels and copies (PyTorch shows them as the
// PrivateUse1 device's, since trn renamed it), and the runtime's own range per op.
const std::set<ActivityType> &trn_activities() {
  static const std::set<ActivityType> kinds = {ActivityType::CONCURRENT_KERNEL,
                                               ActivityType::GPU_MEMCPY, ActivityType::GPU_MEMSET,
                                               ActivityType::PRIVATEUSE1_RUNTIME};
  return kinds;
}

// The recording state: one profile records at a time (kineto's own rule). Records live in a
// deque (stable addresses: the queues write into them) until the session has read them.
struct Recorder {
  std::atomic<bool> on{false};
  std::atomic<int> open{0};  // DeviceRanges between their two timestamps
  std::mutex mutex;
  std::deque<DeviceRecord> records;
  std::unordered_set<trn_queue_t> queues;
  at::CallbackHandle names = 0;
};
Recorder &recorder() {
  static Recorder *r = new Recorder();  // never destroyed: queues may write into records late
  return *r;
}

// Per thread: the innermost aten op's name (from a RecordFunction callback installed while
// recording), kineto's correlation id of the op, and how deep in DeviceRanges the thread is.
thread_local std::vector<std::string> t_names;
thread_local std::vector<uint64_t> t_correlations;
thread_local int t_depth = 0;

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
int64_t system_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class TrnSession : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    Recorder &r = recorder();
    std::lock_guard lock(r.mutex);
    r.records.clear();
    r.queues.clear();
    r.names = at::addGlobalCallback(
        at::RecordFunctionCallback(
            [](const at::RecordFunction &fn) -> std::unique_ptr<at::ObserverContext> {
              t_names.emplace_back(fn.name());
              return nullptr;
            },
            [](const at::RecordFunction &, at::ObserverContext *) {
              if (!t_names.empty()) t_names.pop_back();
            })
            .scopes({at::RecordScope::FUNCTION}));
    clock_offset_ns_ = system_ns() - static_cast<int64_t>(monotonic_ns());
    r.on.store(true, std::memory_order_release);
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    Recorder &r = recorder();
    r.on.store(false, std::memory_order_release);
    // Ranges still open (an op of another thread being queued) queue their end timestamp next:
    // wait for them, bounded, then for the queues to write every timestamp.
    const uint64_t deadline = monotonic_ns() + wait_timeout_ns();
    while (r.open.load(std::memory_order_acquire) > 0 && monotonic_ns() < deadline)
      std::this_thread::yield();
    std::lock_guard lock(r.mutex);
    if (r.names) at::removeCallback(r.names);
    r.names = 0;
    bool written = r.open.load(std::memory_order_acquire) == 0;
    for (trn_queue_t q : r.queues) written &= trn_queue_finish(q, wait_timeout_ns()) == TRN_SUCCESS;
    for (const DeviceRecord &d : r.records)
      if (d.submitted && d.start.host_ns != 0 && d.end.host_ns != 0) done_.push_back(d);
    // A queue that did not finish may still write into the records: they are kept, never freed.
    if (written)
      r.records.clear();
    else
      new std::deque<DeviceRecord>(std::move(r.records));
    r.queues.clear();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger &logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger &logger, libkineto::getLinkedActivityCallback linked,
                    int64_t, int64_t) override {
    activities_.clear();
    for (const DeviceRecord &d : done_) {
      auto &a = activities_.emplace_back(span_, ActivityType::CONCURRENT_KERNEL, d.name);
      a.startTime = static_cast<int64_t>(d.start.host_ns) + clock_offset_ns_;
      // The op's device time (simulated), from when its queue reached it.
      a.endTime = a.startTime + static_cast<int64_t>(d.end.device_ns - d.start.device_ns);
      a.id = static_cast<int32_t>(d.correlation);
      a.device = d.device;
      a.resource = static_cast<int32_t>(reinterpret_cast<uintptr_t>(d.queue) & 0x7fffffff);
      a.threadId = static_cast<int32_t>(d.thread);
      if (linked && d.correlation) a.linked = linked(static_cast<int32_t>(d.correlation));
      a.addMetadataQuoted("device", "trn:" + std::to_string(d.device));
      a.addMetadataQuoted("clock", "simulated device time");
      logger.handleGenericActivity(a);
    }
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override { return nullptr; }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

  void pushCorrelationId(uint64_t id) override { t_correlations.push_back(id); }
  void popCorrelationId() override {
    if (!t_correlations.empty()) t_correlations.pop_back();
  }

 private:
  int64_t clock_offset_ns_ = 0;
  std::vector<DeviceRecord> done_;
  libkineto::TraceSpan span_{0, 0, "trn"};
  std::deque<libkineto::GenericTraceActivity> activities_;
};

class TrnActivityProfiler : public libkineto::IActivityProfiler {
 public:
  const std::string &name() const override { return name_; }
  const std::set<ActivityType> &availableActivities() const override { return trn_activities(); }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType> &kinds, const libkineto::Config &) override {
    for (ActivityType k : kinds)
      if (trn_activities().count(k)) return std::make_unique<TrnSession>();
    return nullptr;
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t, int64_t, const std::set<ActivityType> &kinds,
      const libkineto::Config &config) override {
    return configure(kinds, config);
  }

 private:
  std::string name_ = "trn";
};

REGISTER_PRIVATEUSE1_PROFILER(TrnActivityProfiler);

}  // namespace

DeviceRange::DeviceRange(trn_queue_t queue, int device_index) {
  Recorder &r = recorder();
  if (!r.on.load(std::memory_order_relaxed)) return;
  nested_ = true;
  if (t_depth++ > 0 || !queue) return;
  {
    std::lock_guard lock(r.mutex);
    if (!r.on.load(std::memory_order_acquire)) return;
    r.open.fetch_add(1, std::memory_order_acq_rel);
    DeviceRecord &d = r.records.emplace_back();
    // "trn:aten::mm": the device side of the op, a row of its own beside the CPU op's.
    d.name = "trn:" + (t_names.empty() ? std::string("op") : t_names.back());
    d.correlation = t_correlations.empty() ? 0 : static_cast<int64_t>(t_correlations.back());
    d.device = device_index;
    d.queue = queue;
    d.thread = static_cast<uint64_t>(gettid());
    r.queues.insert(queue);
    record_ = &d;
  }
  queue_ = queue;
  if (submit_when_room(queue, [&] {
        return trn_queue_write_timestamp(queue, &record_->start, nullptr, nullptr);
      }) != TRN_SUCCESS)
    record_ = nullptr;
}

DeviceRange::~DeviceRange() {
  if (nested_) --t_depth;
  if (!queue_) return;
  if (record_ && submit_when_room(queue_, [&] {
                   return trn_queue_write_timestamp(queue_, &record_->end, nullptr, nullptr);
                 }) == TRN_SUCCESS)
    record_->submitted = true;
  recorder().open.fetch_sub(1, std::memory_order_acq_rel);
}

}  // namespace torch_trn
