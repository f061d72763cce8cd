#include "ops/submit.hpp"

#include <fmt/format.h>

#include <chrono>
#include <thread>

#include "ops/error.hpp"

namespace trn::ops {

namespace {

// How long a full queue is waited out before the op gives up.
constexpr auto kQueueFullDeadline = std::chrono::seconds(30);

}  // namespace

trn_kernel_binding_t scalar_f32(float value) {
  trn_kernel_binding_t b{};
  b.mem = nullptr;
  b.value.bits = 0;
  b.value.f32 = value;
  return b;
}

trn_kernel_binding_t tensor_binding(trn_mem_t mem, uint64_t offset) {
  trn_kernel_binding_t b{};
  b.mem = mem;
  b.offset = offset;
  return b;
}

void Commands::launch(const KernelPtr &kernel, std::vector<trn_kernel_binding_t> args) {
  kernels_.push_back(kernel);
  trn_queue_t q = queue_;
  commands_.push_back([q, k = kernel.get(), args = std::move(args)](const trn_sync_t *sync) {
    trn_launch_desc_t desc = TRN_LAUNCH_DESC_INIT;
    desc.kernel = k->kernel;
    desc.args = args.data();
    desc.arg_count = static_cast<uint32_t>(args.size());
    return trn_queue_launch(q, &desc, sync, nullptr);
  });
}

void Commands::read(void *destination, trn_mem_t source, uint64_t offset, uint64_t size) {
  trn_queue_t q = queue_;
  commands_.push_back([=](const trn_sync_t *sync) {
    return trn_queue_read(q, destination, source, offset, size, sync, nullptr);
  });
}

void Commands::write(trn_mem_t destination, uint64_t offset, const void *source, uint64_t size) {
  trn_queue_t q = queue_;
  commands_.push_back([=](const trn_sync_t *sync) {
    return trn_queue_write(q, destination, offset, source, size, sync, nullptr);
  });
}

void Commands::host_call(trn_host_fn_t fn, void *user) {
  trn_queue_t q = queue_;
  commands_.push_back(
      [=](const trn_sync_t *sync) { return trn_queue_host_call(q, fn, user, sync, nullptr); });
}

void Commands::copy(trn_mem_t destination, uint64_t destination_offset, trn_mem_t source,
                    uint64_t source_offset, uint64_t size) {
  trn_queue_t q = queue_;
  commands_.push_back([=](const trn_sync_t *sync) {
    return trn_queue_copy(q, destination, destination_offset, source, source_offset, size, sync,
                          nullptr);
  });
}

void Commands::barrier() {
  trn_queue_t q = queue_;
  commands_.push_back([q](const trn_sync_t *sync) { return trn_queue_barrier(q, sync, nullptr); });
}

// Kernels loaded before the runtime restarted are let go, every stale one (not only the first),
// and reported before anything is queued: the retry then loads them all again. Checked up front
// because an op's first command need not be a launch, and once a command is queued the op cannot
// be issued again.
void Commands::drop_stale_kernels() const {
  bool stale = false;
  for (const KernelPtr &k : kernels_) {
    trn_kernel_properties_t p = TRN_KERNEL_PROPERTIES_INIT;
    if (trn_kernel_get_properties(k->kernel, &p) == TRN_ERROR_INVALID_HANDLE) {
      forget_kernel(k);
      forget_device(k->device_index);
      stale = true;
    }
  }
  if (stale) throw StaleHandle{};
}

namespace {

// The runtime's message without the name of the call that gave it ("trn_sem_query: "), which the
// op's caller never made.
std::string without_call(const std::string &message) {
  const std::string call = "trn_sem_query: ";
  return message.rfind(call, 0) == 0 ? message.substr(call.size()) : message;
}

}  // namespace

void check_sync(const trn_sync_t *sync) {
  if (!sync) return;
  auto check_points = [](const trn_sem_point_t *points, uint32_t count, const char *name,
                         const char *count_name) {
    if (count > 0 && !points)
      fail(TRN_ERROR_NULL_POINTER,
           fmt::format("sync->{} is NULL but sync->{} is {}", name, count_name, count));
    for (uint32_t i = 0; i < count; ++i) {
      uint64_t value = 0;
      const trn_result_t r = trn_sem_query(points[i].sem, &value);
      if (r == TRN_ERROR_NULL_POINTER || r == TRN_ERROR_INVALID_HANDLE)
        fail(r, fmt::format("sync->{}[{}]: {}", name, i, without_call(trn_last_error())));
    }
  };
  check_points(sync->waits, sync->wait_count, "waits", "wait_count");
  check_points(sync->signals, sync->signal_count, "signals", "signal_count");
}

void Commands::submit() {
  drop_stale_kernels();
  const trn_sync_t none{};
  const trn_sync_t *sync = sync_ ? sync_ : &none;
  for (size_t i = 0; i < commands_.size(); ++i) {
    // Waits on the first command, signals on the last, nothing between.
    trn_sync_t part{};
    if (i == 0) {
      part.waits = sync->waits;
      part.wait_count = sync->wait_count;
    }
    if (i + 1 == commands_.size()) {
      part.signals = sync->signals;
      part.signal_count = sync->signal_count;
    }
    const auto deadline = std::chrono::steady_clock::now() + kQueueFullDeadline;
    trn_result_t r;
    while ((r = commands_[i](&part)) == TRN_ERROR_QUEUE_FULL &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (r == TRN_SUCCESS) {
      ++submitted_;
      continue;
    }
    if (i == 0) check(r, "submitting the op");
    check(r, fmt::format("submitting command {} of the op's {} (the commands before it are queued "
                         "and will run; its signals will not be given)",
                         i + 1, commands_.size())
                 .c_str());
  }
}

}  // namespace trn::ops
