// C entry points for queues.
#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>

#include "common/clock.hpp"
#include "runtime/api_support.hpp"
#include "runtime/kernel.hpp"
#include "runtime/memory.hpp"
#include "runtime/program.hpp"
#include "runtime/queue.hpp"
#include "runtime/session.hpp"

using namespace trn::rt;

namespace {

constexpr uint32_t kDefaultCapacity = 1024;
constexpr uint32_t kMaxCapacity = 1u << 20;

trn_result_t resolve_points(Session &session, const trn_sem_point_t *points, uint32_t count,
                            const char *name, bool signals, SemRefs *out) {
  if (count > 0 && points == nullptr)
    return fail(TRN_ERROR_NULL_POINTER, std::string("sync->") + name +
                                            " is NULL but its count is " + std::to_string(count));
  for (uint32_t i = 0; i < count; ++i) {
    auto sem = session.sems.find_shared(from_handle(points[i].sem));
    if (!sem)  // find_shared recorded why
      return fail(TRN_ERROR_INVALID_HANDLE,
                  std::string("sync->") + name + "[" + std::to_string(i) + "]: " + last_detail());
    if (signals && sem->queue_timeline())
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  std::string("sync->signals[") + std::to_string(i) +
                      "] is a queue's own semaphore, which only its queue signals");
    out->push_back({std::move(sem), points[i].value});
  }
  return TRN_SUCCESS;
}

// A scalar argument's binding: no memory, the value travels in the command.
trn_result_t bind_scalar(const trn_kernel_arg_t &arg, const trn_kernel_binding_t &binding,
                         const std::string &what, Command &command) {
  if (binding.mem)
    return fail(TRN_ERROR_INVALID_KERNEL_ARG,
                what + " is a scalar argument (" + trn_dtype_name(arg.dtype) +
                    "): its mem must be NULL; pass the value in .value (." +
                    (arg.dtype == TRN_DTYPE_I32 ? "i32" : "f32") + ")");
  command.args.emplace_back();  // no memory to hold while it runs
  // Only the low 4 bytes are the value (f32 and i32 alike): the rest of the caller's union may
  // be anything, so it is not passed on.
  uint32_t bits = 0;
  std::memcpy(&bits, &binding.value, sizeof bits);
  trn_hal_binding_t hal{};
  hal.scalar_bits = bits;
  hal.bytes = 0;
  command.bindings.push_back(hal);
  return TRN_SUCCESS;
}

// Looks the queue up, fills the command's synchronisation, and submits it.
template <typename Fill>
trn_result_t submit(trn_queue_t handle, const trn_sync_t *sync, uint64_t *sequence, Fill fill) {
  TRN_GET_SESSION(session);
  auto *queue = session->queues.find_fast(handle, &result);
  if (!queue) return result;
  Command command;
  if (sync) {
    if (trn_result_t r =
            resolve_points(*session, sync->waits, sync->wait_count, "waits", false, &command.waits);
        r != TRN_SUCCESS)
      return r;
    if (trn_result_t r = resolve_points(*session, sync->signals, sync->signal_count, "signals",
                                        true, &command.signals);
        r != TRN_SUCCESS)
      return r;
  }
  if (trn_result_t r = fill(*session, *queue, command); r != TRN_SUCCESS) return r;
  if (queue->capturing()) {
    // Recorded, not run: it has no sequence number of its own.
    if (trn_result_t r = queue->record(command); r != TRN_SUCCESS) return r;
    if (sequence) *sequence = 0;
    return TRN_SUCCESS;
  }
  return queue->submit(std::move(command), sequence);
}

enum class Access { read, write };

// The allocation behind `handle` holding [offset, offset+size), which the command reads or
// writes; `name` says which operand it is in messages.
trn_result_t resolve_range(Session &session, trn_mem_t handle, uint64_t offset, uint64_t size,
                           const char *name, Access access, std::shared_ptr<Mem> *out) {
  auto mem = session.mems.find_shared(from_handle(handle));
  if (!mem)  // find_shared recorded why
    return fail(TRN_ERROR_INVALID_HANDLE, std::string(name) + ": " + last_detail());
  if (access == Access::write && mem->device_read_only())
    return fail(TRN_ERROR_INVALID_ARGUMENT,
                std::string(name) +
                    ": host memory registered with TRN_MEM_REGISTER_READ_ONLY, which the device "
                    "only reads: register it without the flag to copy into it");
  if (offset > mem->size || size > mem->size - offset)
    return fail(TRN_ERROR_OUT_OF_RANGE,
                std::string(name) + ": " + outside_allocation(offset, size, mem->size));
  *out = std::move(mem);
  return TRN_SUCCESS;
}

// A command between one allocation and something outside it (host memory, a file): the
// allocation is the destination when the command writes into it, else the source; the outside
// side's address (a host pointer, a file offset) takes the other operand slot, for the fault
// record.
trn_result_t fill_one_allocation(Session &session, Command::Kind kind, trn_mem_t mem,
                                 uint64_t mem_offset, uint64_t size, bool into_mem,
                                 uint64_t outside_address, Command *command) {
  std::shared_ptr<Mem> held;
  if (trn_result_t r =
          resolve_range(session, mem, mem_offset, size, into_mem ? "destination" : "source",
                        into_mem ? Access::write : Access::read, &held);
      r != TRN_SUCCESS)
    return r;
  const uint64_t address = held->address + mem_offset;
  command->kind = kind;
  (into_mem ? command->destination_offset : command->source_offset) = mem_offset;
  (into_mem ? command->destination : command->source) = std::move(held);
  command->destination_address = into_mem ? address : outside_address;
  command->source_address = into_mem ? outside_address : address;
  command->size = size;
  return TRN_SUCCESS;
}

// A file read (into `mem`) or write (from it). The descriptor's being open is checked when the
// command runs; the range must be one a file can have.
trn_result_t fill_file_command(Session &session, Command::Kind kind, trn_mem_t mem,
                               uint64_t mem_offset, int fd, uint64_t file_offset, uint64_t size,
                               Command *command) {
  if (fd < 0)
    return fail(TRN_ERROR_INVALID_ARGUMENT,
                "fd " + std::to_string(fd) + " is not a file descriptor: pass an open one");
  // Only a regular file or a block device has offsets. A pipe or a socket has none (pread fails
  // on it, and io_uring reads it from where it stands whatever the offset); an eventfd, a
  // timerfd or a terminal would block the driver's read for as long as nothing comes, and its
  // queue, its finish and its destruction with it. Refused now rather than read out of place or
  // waited on for ever. A descriptor that is not open is the command's fault when it runs, as
  // documented.
  if (struct stat st{}; ::fstat(fd, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
    return fail(TRN_ERROR_INVALID_ARGUMENT,
                "fd " + std::to_string(fd) + " is " +
                    (S_ISDIR(st.st_mode)    ? "a directory"
                     : S_ISFIFO(st.st_mode) ? "a pipe"
                     : S_ISSOCK(st.st_mode) ? "a socket"
                     : S_ISCHR(st.st_mode)  ? "a character device (a terminal, /dev/zero, ...)"
                                            : "not a file (an eventfd, a timerfd, an epoll or "
                                              "signal descriptor)") +
                    ", which has no file offsets: file reads and writes need a regular file (or "
                    "a block device); move a stream's bytes through host memory "
                    "(trn_queue_write, trn_queue_read)");
  // O_APPEND puts every write at the end of the file, not at the offset asked for.
  if (const int flags = ::fcntl(fd, F_GETFL);
      kind == Command::Kind::write_file && flags >= 0 && (flags & O_APPEND) != 0)
    return fail(TRN_ERROR_INVALID_ARGUMENT,
                "fd " + std::to_string(fd) +
                    " was opened with O_APPEND, which writes at the end of the file whatever the "
                    "offset: open it without O_APPEND to write at file_offset");
  if (file_offset > static_cast<uint64_t>(INT64_MAX) ||
      size > static_cast<uint64_t>(INT64_MAX) - file_offset)
    return fail(TRN_ERROR_OUT_OF_RANGE, "file bytes " + std::to_string(file_offset) + " + " +
                                            std::to_string(size) +
                                            " run past the largest file offset (2^63 - 1)");
  if (trn_result_t r = fill_one_allocation(session, kind, mem, mem_offset, size,
                                           kind == Command::Kind::read_file, file_offset, command);
      r != TRN_SUCCESS)
    return r;
  command->fd = fd;
  command->file_offset = file_offset;
  return TRN_SUCCESS;
}

// A copy between an allocation and the caller's host memory: into `mem` (write) or out of it
// (read). The host side is a plain pointer, which the command passes to the driver as one.
trn_result_t fill_host_copy(Session &session, Command::Kind kind, trn_mem_t mem,
                            uint64_t mem_offset, void *host, uint64_t size, Command *command) {
  const bool write = kind == Command::Kind::write;
  if (!host) return fail(TRN_ERROR_NULL_POINTER, write ? "source is NULL" : "destination is NULL");
  if (trn_result_t r = fill_one_allocation(session, kind, mem, mem_offset, size, write,
                                           reinterpret_cast<uintptr_t>(host), command);
      r != TRN_SUCCESS)
    return r;
  command->host = host;
  return TRN_SUCCESS;
}

// Waiting for a queue from one of its own host functions would wait for itself.
trn_result_t refuse_self_wait(const Queue &queue, const char *call) {
  if (Queue::running_host_call() != &queue) return TRN_SUCCESS;
  return fail(TRN_ERROR_INVALID_ARGUMENT,
              std::string(call) +
                  " was called from a host function of the queue it waits for (the queue runs "
                  "nothing more until the function returns): wait elsewhere, or signal a "
                  "semaphore from the function");
}

}  // namespace

extern "C" {

TRN_API trn_result_t trn_queue_create(const trn_queue_desc_t *desc, trn_queue_t *queue_out) {
  return TRN_API_CALL({
    trn_queue_desc_t d = TRN_QUEUE_DESC_INIT;
    if (trn_result_t r = read_desc(desc, TRN_STRUCT_QUEUE_DESC, "TRN_QUEUE_DESC_INIT", &d);
        r != TRN_SUCCESS)
      return r;
    if (!queue_out) return fail(TRN_ERROR_NULL_POINTER, "queue is NULL");
    TRN_GET_SESSION(session);
    Core *core = lookup_core(*session, d.core, &result);
    if (!core) return fail(result, std::string("desc.core: ") + last_detail());
    const uint32_t kind_bits = enum_bits(d.kind);
    if (kind_bits != 0 && kind_bits != TRN_QUEUE_KIND_COMPUTE && kind_bits != TRN_QUEUE_KIND_COPY)
      return fail(TRN_ERROR_INVALID_ENUM,
                  "desc.kind " + std::to_string(kind_bits) +
                      " is not TRN_QUEUE_KIND_COMPUTE or TRN_QUEUE_KIND_COPY");
    const trn_queue_kind_t kind =
        kind_bits == TRN_QUEUE_KIND_COMPUTE ? TRN_QUEUE_KIND_COMPUTE : TRN_QUEUE_KIND_COPY;
    const uint32_t capacity = d.capacity == 0 ? kDefaultCapacity : d.capacity;
    if (capacity > kMaxCapacity)
      return fail(TRN_ERROR_INVALID_ARGUMENT, "desc.capacity " + std::to_string(capacity) +
                                                  " is above the limit of " +
                                                  std::to_string(kMaxCapacity));
    Device &device = *core->device;
    const uint32_t engines = core->layout.dma_engines;
    const uint32_t dma_engines = d.dma_engines == 0 ? engines : d.dma_engines;
    if (dma_engines > engines)
      return fail(TRN_ERROR_OUT_OF_RANGE, "desc.dma_engines " + std::to_string(dma_engines) +
                                              " is more than the core's " +
                                              std::to_string(engines));
    const uint32_t priority_bits = enum_bits(d.priority);
    if (priority_bits > TRN_QUEUE_PRIORITY_HIGH)
      return fail(TRN_ERROR_INVALID_ENUM,
                  "desc.priority " + std::to_string(priority_bits) +
                      " is not TRN_QUEUE_PRIORITY_LOW, _NORMAL or _HIGH (0 means NORMAL)");
    const bool compute = kind == TRN_QUEUE_KIND_COMPUTE;
    if (trn_result_t r = check_visible(*core); r != TRN_SUCCESS) return r;
    std::shared_ptr<Queue> queue;
    {
      // Compute queues use the core's engines and take the core; copy queues share its DMA
      // engines. Under the device's lock, so that a shutdown or trn_core_release on another
      // thread cannot release the core between the claim and the driver's queue on it.
      std::lock_guard lock(device.mu);
      if (trn_result_t r = compute ? acquire_core_locked(*core) : check_not_shut_down(device);
          r != TRN_SUCCESS)
        return r;
      if (trn_result_t r =
              Queue::create(device, *core, kind, capacity, dma_engines, priority_bits, &queue);
          r != TRN_SUCCESS)
        return r;
      if (compute) ++core->queues;
    }
    queue->timeline_handle = session->sems.insert(queue->timeline());
    *queue_out = to_handle<trn_queue_t>(session->queues.insert(std::move(queue)));
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_queue_destroy(trn_queue_t handle) {
  return TRN_API_CALL({
    if (handle == nullptr) return TRN_SUCCESS;
    TRN_GET_SESSION(session);
    {
      auto *queue = session->queues.find_fast(handle, &result);
      if (!queue) return result;
      if (trn_result_t r = refuse_self_wait(*queue, "trn_queue_destroy"); r != TRN_SUCCESS)
        return r;
    }
    auto queue = session->queues.remove(from_handle(handle));
    if (!queue) return invalid_handle(HandleKind::queue, from_handle(handle));
    queue->shutdown();
    queue->timeline()->close_watchers();
    session->sems.remove(queue->timeline_handle);
    if (!queue->is_compute()) return TRN_SUCCESS;
    Device &device = *queue->core().device;
    std::lock_guard lock(device.mu);
    --queue->core().queues;
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_queue_copy(trn_queue_t queue, trn_mem_t destination,
                                    uint64_t destination_offset, trn_mem_t source,
                                    uint64_t source_offset, uint64_t size, const trn_sync_t *sync,
                                    uint64_t *sequence) {
  return TRN_API_CALL({
    return submit(queue, sync, sequence, [&](Session &session, Queue &, Command &command) {
      std::shared_ptr<Mem> to, from;
      if (trn_result_t r = resolve_range(session, destination, destination_offset, size,
                                         "destination", Access::write, &to);
          r != TRN_SUCCESS)
        return r;
      if (trn_result_t r =
              resolve_range(session, source, source_offset, size, "source", Access::read, &from);
          r != TRN_SUCCESS)
        return r;
      command.kind = Command::Kind::copy;
      command.destination = to;
      command.source = from;
      command.destination_offset = destination_offset;
      command.source_offset = source_offset;
      command.destination_address = to->address + destination_offset;
      command.source_address = from->address + source_offset;
      command.size = size;
      return TRN_SUCCESS;
    });
  });
}

TRN_API trn_result_t trn_queue_memset(trn_queue_t queue, trn_mem_t destination, uint64_t offset,
                                      uint8_t value, uint64_t size, const trn_sync_t *sync,
                                      uint64_t *sequence) {
  return TRN_API_CALL({
    return submit(queue, sync, sequence, [&](Session &session, Queue &, Command &command) {
      std::shared_ptr<Mem> to;
      if (trn_result_t r =
              resolve_range(session, destination, offset, size, "destination", Access::write, &to);
          r != TRN_SUCCESS)
        return r;
      command.kind = Command::Kind::memset;
      command.destination = to;
      command.destination_offset = offset;
      command.destination_address = to->address + offset;
      command.size = size;
      command.value = value;
      return TRN_SUCCESS;
    });
  });
}

namespace {

bool reducible(uint32_t dtype) {
  return dtype == TRN_DTYPE_F32 || dtype == TRN_DTYPE_BF16 || dtype == TRN_DTYPE_F16 ||
         dtype == TRN_DTYPE_I32;
}

// Whether [x, x+bytes) and [y, y+bytes) meet without being the same range.
bool partly_overlap(uint64_t x, uint64_t y, uint64_t bytes) {
  return bytes > 0 && x != y && x < y + bytes && y < x + bytes;
}

}  // namespace

// Every driver implements the REDUCE command: interface 2.2 added it, and the loader refuses a
// driver of an older minor version than the runtime's (driver_loader.cpp).
static_assert(TRN_HAL_VERSION_MINOR(TRN_HAL_VERSION) >= 2);

TRN_API trn_result_t trn_queue_reduce(trn_queue_t queue, trn_mem_t destination,
                                      uint64_t destination_offset, trn_mem_t a, uint64_t a_offset,
                                      trn_mem_t b, uint64_t b_offset, uint64_t count,
                                      trn_dtype_t dtype, trn_reduce_op_t op, const trn_sync_t *sync,
                                      uint64_t *sequence) {
  // The caller's enums as the integers they hold (a C caller may pass any value).
  const uint32_t dtype_bits = enum_bits(dtype), op_bits = enum_bits(op);
  return TRN_API_CALL({
    return submit(queue, sync, sequence, [&](Session &session, Queue &, Command &command) {
      if (op_bits > TRN_REDUCE_MIN) {
        // AVG, ARGMAX and ARGMIN are ops of the one enum that the DMA engines do not compute.
        const std::string name = trn_reduce_op_name(static_cast<trn_reduce_op_t>(op_bits));
        return fail(TRN_ERROR_INVALID_ENUM,
                    "reduce op " + std::to_string(static_cast<int32_t>(op_bits)) +
                        (name == "unknown" ? " is not a trn_reduce_op_t"
                                           : " (" + name + ") is not one the DMA engines compute") +
                        ": use TRN_REDUCE_SUM, _PROD, _MAX or _MIN");
      }
      if (!reducible(dtype_bits)) {
        const bool known = dtype_bits < TRN_DTYPE_FORCE_INT32 &&
                           trn_dtype_size(static_cast<trn_dtype_t>(dtype_bits)) != 0;
        if (!known)
          return fail(TRN_ERROR_INVALID_ENUM, "dtype " +
                                                  std::to_string(static_cast<int32_t>(dtype_bits)) +
                                                  " is not a trn_dtype_t");
        return fail(TRN_ERROR_INVALID_ARGUMENT,
                    "dtype " + std::to_string(dtype_bits) + " (" +
                        trn_dtype_name(static_cast<trn_dtype_t>(dtype_bits)) +
                        ") cannot be reduced by the DMA engines: use TRN_DTYPE_F32, BF16, F16 or "
                        "I32 (or an elementwise kernel, trn_ops_binary)");
      }
      if (count > UINT32_MAX)
        return fail(TRN_ERROR_INVALID_ARGUMENT,
                    "a reduce of " + std::to_string(count) +
                        " elements: one command takes fewer than 2^32; split it");
      const uint64_t bytes = count * trn_dtype_size(dtype);
      std::shared_ptr<Mem> to, from_a, from_b;
      if (trn_result_t r = resolve_range(session, destination, destination_offset, bytes,
                                         "destination", Access::write, &to);
          r != TRN_SUCCESS)
        return r;
      if (trn_result_t r = resolve_range(session, a, a_offset, bytes, "a", Access::read, &from_a);
          r != TRN_SUCCESS)
        return r;
      if (trn_result_t r = resolve_range(session, b, b_offset, bytes, "b", Access::read, &from_b);
          r != TRN_SUCCESS)
        return r;
      command.kind = Command::Kind::reduce;
      command.destination_address = to->address + destination_offset;
      command.source_address = from_a->address + a_offset;
      command.second_address = from_b->address + b_offset;
      for (const auto &[operand, name] :
           {std::pair{command.source_address, "a"}, std::pair{command.second_address, "b"}})
        if (partly_overlap(command.destination_address, operand, bytes))
          return fail(TRN_ERROR_INVALID_ARGUMENT,
                      std::string("the destination partly overlaps operand ") + name +
                          ": reduce in place (the same offset) or into separate memory");
      command.destination = to;
      command.source = from_a;
      command.second = from_b;
      command.destination_offset = destination_offset;
      command.source_offset = a_offset;
      command.size = bytes;
      command.dtype = dtype;
      command.reduce_op = op;
      return TRN_SUCCESS;
    });
  });
}

TRN_API trn_result_t trn_queue_write(trn_queue_t queue, trn_mem_t destination,
                                     uint64_t destination_offset, const void *source, uint64_t size,
                                     const trn_sync_t *sync, uint64_t *sequence) {
  return TRN_API_CALL({
    return submit(queue, sync, sequence, [&](Session &session, Queue &, Command &command) {
      return fill_host_copy(session, Command::Kind::write, destination, destination_offset,
                            const_cast<void *>(source), size, &command);
    });
  });
}

TRN_API trn_result_t trn_queue_read(trn_queue_t queue, void *destination, trn_mem_t source,
                                    uint64_t source_offset, uint64_t size, const trn_sync_t *sync,
                                    uint64_t *sequence) {
  return TRN_API_CALL({
    return submit(queue, sync, sequence, [&](Session &session, Queue &, Command &command) {
      return fill_host_copy(session, Command::Kind::read, source, source_offset, destination, size,
                            &command);
    });
  });
}

TRN_API trn_result_t trn_queue_read_file(trn_queue_t queue, trn_mem_t destination,
                                         uint64_t destination_offset, int fd, uint64_t file_offset,
                                         uint64_t size, const trn_sync_t *sync,
                                         uint64_t *sequence) {
  return TRN_API_CALL({
    return submit(queue, sync, sequence, [&](Session &session, Queue &, Command &command) {
      return fill_file_command(session, Command::Kind::read_file, destination, destination_offset,
                               fd, file_offset, size, &command);
    });
  });
}

TRN_API trn_result_t trn_queue_write_file(trn_queue_t queue, int fd, uint64_t file_offset,
                                          trn_mem_t source, uint64_t source_offset, uint64_t size,
                                          const trn_sync_t *sync, uint64_t *sequence) {
  return TRN_API_CALL({
    return submit(queue, sync, sequence, [&](Session &session, Queue &, Command &command) {
      return fill_file_command(session, Command::Kind::write_file, source, source_offset, fd,
                               file_offset, size, &command);
    });
  });
}

TRN_API trn_result_t trn_queue_write_timestamp(trn_queue_t queue, trn_timestamp_t *destination,
                                               const trn_sync_t *sync, uint64_t *sequence) {
  return TRN_API_CALL({
    return submit(queue, sync, sequence, [&](Session &, Queue &, Command &command) {
      if (!destination) return fail(TRN_ERROR_NULL_POINTER, "destination is NULL");
      command.kind = Command::Kind::timestamp;
      command.host = destination;
      command.destination_address = reinterpret_cast<uintptr_t>(destination);
      command.size = sizeof(trn_timestamp_t);
      return TRN_SUCCESS;
    });
  });
}

TRN_API trn_result_t trn_queue_host_call(trn_queue_t queue, trn_host_fn_t fn, void *user,
                                         const trn_sync_t *sync, uint64_t *sequence) {
  return TRN_API_CALL({
    return submit(queue, sync, sequence, [&](Session &, Queue &, Command &command) {
      if (!fn) return fail(TRN_ERROR_NULL_POINTER, "fn is NULL");
      command.kind = Command::Kind::host_call;
      command.host_fn = fn;
      command.host_user = user;
      return TRN_SUCCESS;
    });
  });
}

TRN_API trn_result_t trn_queue_free(trn_queue_t queue, trn_mem_t mem, const trn_sync_t *sync,
                                    uint64_t *sequence) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    const trn_result_t r =
        submit(queue, sync, sequence, [&](Session &in, Queue &, Command &command) {
          command.freed = in.mems.lookup(from_handle(mem));
          if (!command.freed) {
            invalid_handle(HandleKind::mem, from_handle(mem));
            return fail(TRN_ERROR_INVALID_HANDLE, std::string("mem: ") + last_detail());
          }
          command.kind = Command::Kind::free;
          command.destination_address = command.freed->address;
          command.size = command.freed->size;
          return TRN_SUCCESS;
        });
    // The handle goes once the free is queued (a failed submission leaves it valid); the
    // command holds the allocation until it releases it. Of two frees racing, one succeeds: the
    // other's queued command finds the memory released already, which changes nothing.
    if (r == TRN_SUCCESS && !session->mems.remove(from_handle(mem)))
      return fail(TRN_ERROR_INVALID_HANDLE,
                  "mem: the memory was freed by another call while this one ran");
    return r;
  });
}

TRN_API trn_result_t trn_queue_barrier(trn_queue_t queue, const trn_sync_t *sync,
                                       uint64_t *sequence) {
  return TRN_API_CALL({
    return submit(queue, sync, sequence, [](Session &, Queue &, Command &command) {
      command.kind = Command::Kind::barrier;
      return TRN_SUCCESS;
    });
  });
}

TRN_API trn_result_t trn_queue_finish(trn_queue_t handle, uint64_t timeout_ns) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *queue = session->queues.find_fast(handle, &result);
    if (!queue) return result;
    if (trn_result_t r = refuse_self_wait(*queue, "trn_queue_finish"); r != TRN_SUCCESS) return r;
    return queue->finish(timeout_ns);
  });
}

TRN_API trn_result_t trn_device_synchronize(trn_device_t device_handle, uint64_t timeout_ns) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    Device *device = lookup_device(*session, device_handle, &result);
    if (!device) return result;
    std::vector<std::shared_ptr<Queue>> queues;
    for (auto &queue : session->queues.all())
      if (queue->core().device == device) {
        if (trn_result_t r = refuse_self_wait(*queue, "trn_device_synchronize"); r != TRN_SUCCESS)
          return r;
        queues.push_back(std::move(queue));
      }
    // Every queue is waited for; the first fault found is the result.
    const uint64_t deadline = trn::common::deadline_after(timeout_ns);
    trn_result_t first = TRN_SUCCESS;
    std::string first_why;
    for (auto &queue : queues) {
      const uint64_t now = trn::common::monotonic_ns();
      const trn_result_t r = queue->finish(deadline > now ? deadline - now : 0);
      if (r == TRN_TIMEOUT) return r;
      if (r != TRN_SUCCESS && first == TRN_SUCCESS) {
        first = r;
        first_why =
            "the queue on core " + std::to_string(queue->core().index) + ": " + last_detail();
      }
    }
    return first == TRN_SUCCESS ? first : fail(first, first_why);
  });
}

TRN_API trn_result_t trn_device_get_timestamps(trn_device_t device_handle, uint64_t *device_ns,
                                               uint64_t *host_ns) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    Device *device = lookup_device(*session, device_handle, &result);
    if (!device) return result;
    if (!device_ns || !host_ns)
      return fail(TRN_ERROR_NULL_POINTER, device_ns ? "host_ns is NULL" : "device_ns is NULL");
    *device_ns = device->driver->ops.device_time_ns(device->driver->instance, device->driver_index);
    *host_ns = trn::common::monotonic_ns();
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_queue_get_semaphore(trn_queue_t handle, trn_sem_t *sem) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *queue = session->queues.find_fast(handle, &result);
    if (!queue) return result;
    if (!sem) return fail(TRN_ERROR_NULL_POINTER, "sem is NULL");
    *sem = to_handle<trn_sem_t>(queue->timeline_handle);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_queue_get_fault(trn_queue_t handle, trn_queue_fault_t *fault) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *queue = session->queues.find_fast(handle, &result);
    if (!queue) return result;
    if (trn_result_t r =
            check_struct(fault, TRN_STRUCT_QUEUE_FAULT, "fault", "TRN_QUEUE_FAULT_INIT");
        r != TRN_SUCCESS)
      return r;
    trn_queue_fault_t full = TRN_QUEUE_FAULT_INIT;
    queue->fault(&full);
    copy_struct(full, fault);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_queue_reset(trn_queue_t handle) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *queue = session->queues.find_fast(handle, &result);
    if (!queue) return result;
    return queue->reset();
  });
}

TRN_API trn_result_t trn_queue_launch(trn_queue_t queue_handle, const trn_launch_desc_t *desc,
                                      const trn_sync_t *sync, uint64_t *sequence) {
  return TRN_API_CALL({
    trn_launch_desc_t d = TRN_LAUNCH_DESC_INIT;
    if (trn_result_t r = read_desc(desc, TRN_STRUCT_LAUNCH_DESC, "TRN_LAUNCH_DESC_INIT", &d);
        r != TRN_SUCCESS)
      return r;
    return submit(
        queue_handle, sync, sequence,
        [&](Session &session, Queue &queue, Command &command) -> trn_result_t {
          trn_result_t r = TRN_SUCCESS;
          auto kernel = session.kernels.find(d.kernel, &r);
          if (!kernel) return fail(r, std::string("desc.kernel: ") + last_detail());
          if (kernel->device != queue.core().device)
            return fail(TRN_ERROR_INVALID_ARGUMENT, "desc.kernel was loaded for device " +
                                                        std::to_string(kernel->device->index) +
                                                        ", the queue is on device " +
                                                        std::to_string(queue.core().device->index) +
                                                        "; load it for this device too");
          if (!queue.is_compute())
            return fail(TRN_ERROR_INVALID_ARGUMENT,
                        "kernels launch on compute queues (TRN_QUEUE_KIND_COMPUTE); this is a copy "
                        "queue");
          const auto &args = kernel->args;
          if (d.arg_count != args.size())
            return fail(TRN_ERROR_INVALID_KERNEL_ARG,
                        "kernel '" + kernel->name() + "' takes " + std::to_string(args.size()) +
                            " arguments but desc.arg_count is " + std::to_string(d.arg_count));
          if (d.arg_count && !d.args) return fail(TRN_ERROR_NULL_POINTER, "desc.args is NULL");
          for (uint32_t i = 0; i < d.arg_count; ++i) {
            const std::string what =
                "desc.args[" + std::to_string(i) + "] ('" + std::string(args[i].name) + "')";
            if (args[i].kind == TRN_ARG_KIND_SCALAR) {
              if (trn_result_t sr = bind_scalar(args[i], d.args[i], what, command);
                  sr != TRN_SUCCESS)
                return sr;
              continue;
            }
            // The same error as before scalar arguments existed, with a message that says why.
            if (!d.args[i].mem)
              return fail(TRN_ERROR_INVALID_HANDLE,
                          what + " is a tensor argument (" + trn_dtype_name(args[i].dtype) + ", " +
                              std::to_string(args[i].bytes) +
                              " bytes) but its mem is NULL: bind device memory to it");
            auto mem = session.mems.lookup(from_handle(d.args[i].mem));
            if (!mem) {
              invalid_handle(HandleKind::mem, from_handle(d.args[i].mem));
              return fail(TRN_ERROR_INVALID_HANDLE, what + ": " + last_detail());
            }
            if (mem->kind != TRN_POOL_KIND_DEVICE || mem->device != kernel->device)
              return fail(TRN_ERROR_INVALID_KERNEL_ARG,
                          what + " is not device memory of the kernel's device");
            const uint64_t need = args[i].bytes;
            if (d.args[i].offset > mem->size || mem->size - d.args[i].offset < need)
              return fail(TRN_ERROR_INVALID_KERNEL_ARG,
                          what + " needs " + std::to_string(need) + " bytes (" +
                              trn_dtype_name(args[i].dtype) + "), but the allocation has " +
                              std::to_string(mem->size) + " bytes from offset " +
                              std::to_string(d.args[i].offset));
            command.args.push_back(mem);
            command.bindings.push_back(
                {mem->address + d.args[i].offset, mem->size - d.args[i].offset});
          }
          if (d.profile) {
            command.profile = session.profiles.find(d.profile, &r);
            if (!command.profile) return fail(r, std::string("desc.profile: ") + last_detail());
          }
          command.kind = Command::Kind::launch;
          command.kernel = std::move(kernel);
          return TRN_SUCCESS;
        });
  });
}

TRN_API trn_result_t trn_queue_execute(trn_queue_t queue_handle, trn_program_t program_handle,
                                       trn_tensor_set_t inputs_handle,
                                       trn_tensor_set_t outputs_handle, const trn_sync_t *sync,
                                       uint64_t *sequence) {
  return TRN_API_CALL({
    return submit(
        queue_handle, sync, sequence,
        [&](Session &session, Queue &queue, Command &command) -> trn_result_t {
          trn_result_t r = TRN_SUCCESS;
          auto program = session.programs.find(program_handle, &r);
          if (!program) return fail(r, std::string("program: ") + last_detail());
          if (program->device != queue.core().device)
            return fail(TRN_ERROR_INVALID_ARGUMENT, "the program was loaded for device " +
                                                        std::to_string(program->device->index) +
                                                        ", the queue is on device " +
                                                        std::to_string(queue.core().device->index) +
                                                        "; load it for this device too");
          if (!queue.is_compute())
            return fail(TRN_ERROR_INVALID_ARGUMENT,
                        "programs run on compute queues (TRN_QUEUE_KIND_COMPUTE); this is a copy "
                        "queue");
          std::shared_ptr<TensorSet> inputs, outputs;
          if (inputs_handle && !(inputs = session.tensor_sets.find(inputs_handle, &r)))
            return fail(r, std::string("inputs: ") + last_detail());
          if (outputs_handle && !(outputs = session.tensor_sets.find(outputs_handle, &r)))
            return fail(r, std::string("outputs: ") + last_detail());
          command.kind = Command::Kind::execute;
          // One queue runs its executions in order: those in flight together share buffers.
          return bind_program(session, program, queue.timeline_handle, inputs.get(), outputs.get(),
                              &command.run);
        });
  });
}

TRN_API trn_result_t trn_queue_begin_capture(trn_queue_t handle) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto *queue = session->queues.find_fast(handle, &result);
    if (!queue) return result;
    return queue->begin_capture();
  });
}

TRN_API trn_result_t trn_queue_end_capture(trn_queue_t handle, trn_program_t *program) {
  return TRN_API_CALL({
    if (!program) return fail(TRN_ERROR_NULL_POINTER, "program is NULL");
    TRN_GET_SESSION(session);
    auto *queue = session->queues.find_fast(handle, &result);
    if (!queue) return result;
    std::shared_ptr<Program> captured;
    if (trn_result_t r = queue->end_capture(&captured); r != TRN_SUCCESS) return r;
    *program = to_handle<trn_program_t>(session->programs.insert(std::move(captured)));
    return TRN_SUCCESS;
  });
}

}  // extern "C"
