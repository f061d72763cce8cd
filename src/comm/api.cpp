// The C entry points of trn_comm.h: handles, argument checks, errors.
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <system_error>
#include <thread>

#include "comm/bootstrap.hpp"
#include "comm/bytes.hpp"
#include "comm/communicator.hpp"
#include "comm/config.hpp"
#include "comm/error.hpp"
#include "comm/operations.hpp"

using namespace trn::comm;

namespace {

// Handles are numbers that are never reused, so a destroyed or made-up handle is refused rather
// than followed. The table's lock is held only to look up or change it.
struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, std::shared_ptr<Comm>> comms;
  uintptr_t next = 0x7c0000;
};

Registry &registry() {
  static Registry *instance = new Registry();  // never destroyed: used by exit-time destroys
  return *instance;
}

trn_comm_t add(std::shared_ptr<Comm> comm) {
  Registry &r = registry();
  std::lock_guard lock(r.mutex);
  const uintptr_t id = r.next += 16;
  r.comms.emplace(id, std::move(comm));
  return reinterpret_cast<trn_comm_t>(id);
}

std::shared_ptr<Comm> find(trn_comm_t handle) {
  if (!handle) fail(TRN_ERROR_INVALID_HANDLE, "comm is NULL");
  Registry &r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.comms.find(reinterpret_cast<uintptr_t>(handle));
  if (it == r.comms.end())
    fail(TRN_ERROR_INVALID_HANDLE, "comm is not a live communicator (destroyed, or not one)");
  return it->second;
}

std::shared_ptr<Comm> remove_comm(trn_comm_t handle) {
  Registry &r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.comms.find(reinterpret_cast<uintptr_t>(handle));
  if (it == r.comms.end())
    fail(TRN_ERROR_INVALID_HANDLE, "comm is not a live communicator (destroyed, or not one)");
  auto comm = std::move(it->second);
  r.comms.erase(it);
  return comm;
}

// The result of the exception being handled, recorded with its reason as trn_comm_last_error()
// and as trn_last_error() (one channel for every layer). Nothing escapes: out of memory while
// describing a failure leaves the result to say it.
trn_result_t record_failure(const char *function) noexcept {
  const trn_result_t result = current_result();
  try {
    set_last_error(std::string());  // no stale reason stays, should the new one not be made
    trn_set_last_error(nullptr);
    set_last_error(std::string(function) + ": " + current_reason());
    trn_set_last_error(last_error());
  } catch (...) {
  }
  return result;
}

// Runs an entry point: errors become its result and trn_comm_last_error().
template <typename Body>
trn_result_t api_call(const char *function, Body body) noexcept {
  try {
    body();
    set_last_error("");
    return TRN_SUCCESS;
  } catch (...) {
    return record_failure(function);
  }
}

CommConfig config_of(const trn_comm_desc_t *desc) {
  CommConfig config;
  if (!desc) return config;
  if (desc->header.type != TRN_STRUCT_COMM_DESC ||
      desc->header.size < offsetof(trn_comm_desc_t, chunk_bytes) + sizeof(uint64_t))
    fail(TRN_ERROR_INVALID_STRUCT, "desc was not set up with TRN_COMM_DESC_INIT");
  config.core = desc->core;
  config.rank = desc->rank;
  config.size = desc->size;
  config.timeout_ns = desc->timeout_ns;
  config.chunk_bytes = desc->chunk_bytes;
  return config;
}

uint64_t random_token() {
  std::random_device device;
  return (static_cast<uint64_t>(device()) << 32) ^ device() ^ now_ns();
}

// The LOCAL_RANK-th visible core, counting across devices.
trn_core_t core_for_local_rank(uint32_t local_rank) {
  uint32_t count = 0;
  check(trn_device_get(&count, nullptr), "trn_device_get");
  std::vector<trn_device_t> devices(count);
  check(trn_device_get(&count, devices.data()), "trn_device_get");
  uint32_t left = local_rank;
  for (trn_device_t device : devices) {
    uint32_t cores = 0;
    check(trn_core_get(device, &cores, nullptr), "trn_core_get");
    if (left < cores) {
      std::vector<trn_core_t> list(cores);
      check(trn_core_get(device, &cores, list.data()), "trn_core_get");
      return list[left];
    }
    left -= cores;
  }
  fail(TRN_ERROR_INVALID_CONFIG, "LOCAL_RANK=" + std::to_string(local_rank) +
                                     " but this process sees fewer visible cores (check "
                                     "TRN_VISIBLE_CORES and TRN_SIM_DEVICES)");
}

uint64_t operation(trn_comm_t handle, OpKind kind, const OpArgs &args) {
  auto comm = find(handle);
  return run_operation(*comm, kind, args);
}

void set_sequence(uint64_t *out, uint64_t value) {
  if (out) *out = value;
}

int32_t read_int(const std::vector<uint8_t> &in, size_t at) {
  return take<int32_t>(in, &at, "trn_comm_split's colour and key");
}

}  // namespace

extern "C" {

TRN_COMM_API uint32_t trn_comm_get_version(void) {
  return TRN_COMM_API_VERSION;
}

TRN_COMM_API const char *trn_comm_last_error(void) {
  return last_error();
}

TRN_COMM_API const char *trn_comm_red_op_name(trn_comm_red_op_t op) {
  return trn_reduce_op_name(op);
}

TRN_COMM_API trn_result_t trn_comm_get_unique_id(trn_comm_unique_id_t *id) {
  return api_call(__func__, [&] {
    if (!id) fail(TRN_ERROR_NULL_POINTER, "id is NULL");
    const RendezvousId made =
        start_root_service({socket_address(), 0}, random_token(), default_timeout_ns());
    *id = encode_id(made);
  });
}

TRN_COMM_API trn_result_t trn_comm_init_rank(const trn_comm_unique_id_t *id,
                                             const trn_comm_desc_t *desc, trn_comm_t *comm) {
  return api_call(__func__, [&] {
    if (!id) fail(TRN_ERROR_NULL_POINTER, "id is NULL");
    if (!desc) fail(TRN_ERROR_NULL_POINTER, "desc is NULL");
    if (!comm) fail(TRN_ERROR_NULL_POINTER, "comm is NULL");
    *comm = nullptr;
    const CommConfig config = config_of(desc);
    const RendezvousId where = decode_id(*id);
    *comm = add(Comm::create(where, config));
  });
}

TRN_COMM_API trn_result_t trn_comm_init_from_env(const trn_comm_desc_t *desc, trn_comm_t *comm) {
  return api_call(__func__, [&] {
    if (!comm) fail(TRN_ERROR_NULL_POINTER, "comm is NULL");
    *comm = nullptr;
    CommConfig config = config_of(desc);
    const TorchrunEnv env = read_torchrun_env();
    config.rank = env.rank;
    config.size = env.world_size;
    if (!config.core) config.core = core_for_local_rank(env.local_rank.value_or(env.rank));
    if (config.rank == 0) {
      const uint64_t timeout = config.timeout_ns ? config.timeout_ns : default_timeout_ns();
      try {
        start_root_service(env.rendezvous, env.token, timeout);
      } catch (const CommError &e) {
        // Another job's rendezvous may hold the port: it says whose, and fails itself when its
        // ranks may be of both jobs (two jobs started together; bootstrap.cpp, late()).
        const std::string answer = ask_rendezvous({env.rendezvous, env.token}, config.size);
        if (answer.empty()) throw;
        fail(TRN_ERROR_COLLECTIVE,
             std::string(e.what()) + "; the rendezvous there says: " + answer);
      }
    }
    *comm = add(Comm::create({env.rendezvous, env.token}, config));
  });
}

TRN_COMM_API trn_result_t trn_comm_init_all(uint32_t count, const trn_core_t *cores,
                                            const trn_comm_desc_t *desc, trn_comm_t *comms) {
  return api_call(__func__, [&] {
    if (!cores) fail(TRN_ERROR_NULL_POINTER, "cores is NULL");
    if (!comms) fail(TRN_ERROR_NULL_POINTER, "comms is NULL");
    if (count == 0) fail(TRN_ERROR_INVALID_ARGUMENT, "count is 0");
    // Before any rank starts: one rank refused later would leave the others waiting at the
    // rendezvous for the whole timeout.
    for (uint32_t i = 0; i < count; ++i) {
      if (!cores[i])
        fail(TRN_ERROR_NULL_POINTER,
             "cores[" + std::to_string(i) + "] is NULL: give every rank's NeuronCore");
      // A session gives each core one handle: equal handles are one core.
      for (uint32_t j = 0; j < i; ++j)
        if (cores[j] == cores[i])
          fail(TRN_ERROR_INVALID_ARGUMENT,
               "cores[" + std::to_string(i) + "] and cores[" + std::to_string(j) +
                   "] are the same core: each rank of this process needs a core of its own");
    }
    CommConfig config = config_of(desc);
    const uint64_t timeout = config.timeout_ns ? config.timeout_ns : default_timeout_ns();
    std::vector<std::shared_ptr<Comm>> made(count);
    std::vector<trn_result_t> results(count, TRN_SUCCESS);
    std::vector<std::string> reasons(count);
    // Every rank's thread starts first and waits for the word: a thread the process cannot
    // start then fails the call before any rank went to the rendezvous (where the others would
    // wait for it until the timeout).
    std::mutex start_mutex;
    std::condition_variable start_cv;
    enum class Start { waiting, go, cancelled } start = Start::waiting;
    RendezvousId id;
    std::vector<std::thread> threads;
    // On every way out, the threads started are told (cancelled unless told to go) and joined.
    struct JoinAll {
      std::mutex &mutex;
      std::condition_variable &cv;
      Start &start;
      std::vector<std::thread> &threads;
      ~JoinAll() {
        {
          std::lock_guard lock(mutex);
          if (start == Start::waiting) start = Start::cancelled;
        }
        cv.notify_all();
        for (auto &thread : threads)
          if (thread.joinable()) thread.join();
      }
    } join_all{start_mutex, start_cv, start, threads};
    threads.reserve(count);
    for (uint32_t i = 0; i < count; ++i) {
      try {
        threads.emplace_back([&, i] {
          {
            std::unique_lock lock(start_mutex);
            start_cv.wait(lock, [&] { return start != Start::waiting; });
            if (start == Start::cancelled) return;
          }
          try {
            CommConfig mine = config;
            mine.core = cores[i];
            mine.rank = i;
            mine.size = count;
            made[i] = Comm::create(id, mine);
          } catch (...) {
            results[i] = current_result();
            try {
              reasons[i] = current_reason();
            } catch (...) {
            }
          }
        });
      } catch (const std::system_error &e) {
        fail(TRN_ERROR_OUT_OF_HOST_MEMORY,
             "cannot start a thread for rank " + std::to_string(i) + " of " +
                 std::to_string(count) + " (" + e.what() +
                 "): the process is at its limit of threads or memory");
      }
    }
    id = start_root_service({"127.0.0.1", 0}, random_token(), timeout);
    {
      std::lock_guard lock(start_mutex);
      start = Start::go;
    }
    start_cv.notify_all();
    for (auto &thread : threads) thread.join();
    for (uint32_t i = 0; i < count; ++i) {
      if (results[i] == TRN_SUCCESS) continue;
      for (auto &comm : made)
        if (comm) comm->shutdown(true);
      // Named once: the rendezvous' messages may name the rank already.
      const std::string rank = "rank " + std::to_string(i) + ": ";
      const std::string why = reasons[i].empty() ? "out of host memory" : reasons[i];
      throw CommError(results[i], why.rfind(rank, 0) == 0 ? why : rank + why);
    }
    for (uint32_t i = 0; i < count; ++i) comms[i] = add(std::move(made[i]));
  });
}

TRN_COMM_API trn_result_t trn_comm_split(trn_comm_t handle, int32_t color, int32_t key,
                                         trn_comm_t *new_comm) {
  return api_call(__func__, [&] {
    if (!new_comm) fail(TRN_ERROR_NULL_POINTER, "new_comm is NULL");
    *new_comm = nullptr;
    auto comm = find(handle);
    // Like an operation: one at a time on the communicator, never after it was destroyed.
    const auto serialised = comm->begin_operation();
    // Round 1: everyone's colour and key.
    std::vector<uint8_t> mine;
    put(&mine, color);
    put(&mine, key);
    const auto all = comm->gather(mine, "trn_comm_split");
    std::vector<std::pair<std::pair<int32_t, uint32_t>, uint32_t>> group;  // (key, rank), rank
    for (uint32_t r = 0; r < all.size(); ++r)
      if (color >= 0 && read_int(all[r], 0) == color)
        group.push_back({{read_int(all[r], 4), r}, r});
    std::sort(group.begin(), group.end());
    // Round 2: each group's first rank serves the new communicator's rendezvous.
    std::vector<uint8_t> offer;
    const bool leader = color >= 0 && group.front().second == comm->rank();
    std::optional<CommError> no_rendezvous;
    if (leader) {
      try {
        const RendezvousId id =
            start_root_service({socket_address(), 0}, random_token(), comm->timeout_ns());
        const trn_comm_unique_id_t bytes = encode_id(id);
        offer.assign(bytes.internal, bytes.internal + sizeof bytes.internal);
      } catch (const CommError &e) {
        no_rendezvous = e;  // offered empty: the group's other ranks fail at once, not later
      }
    }
    const auto offers = comm->gather(offer, "trn_comm_split");
    if (no_rendezvous) throw *no_rendezvous;
    if (color < 0) return;
    const auto &chosen = offers[group.front().second];
    if (chosen.size() != sizeof(trn_comm_unique_id_t))
      fail(TRN_ERROR_COLLECTIVE, "trn_comm_split: the group's first rank made no rendezvous");
    trn_comm_unique_id_t id{};
    std::memcpy(id.internal, chosen.data(), sizeof id.internal);
    CommConfig config;
    config.core = comm->core();
    config.size = static_cast<uint32_t>(group.size());
    for (uint32_t i = 0; i < group.size(); ++i)
      if (group[i].second == comm->rank()) config.rank = i;
    config.timeout_ns = comm->timeout_ns();
    config.chunk_bytes = comm->chunk_bytes();
    *new_comm = add(Comm::create(decode_id(id), config));
  });
}

TRN_COMM_API trn_result_t trn_comm_destroy(trn_comm_t handle) {
  return api_call(__func__, [&] {
    if (!handle) return;
    remove_comm(handle)->shutdown(false);
  });
}

TRN_COMM_API trn_result_t trn_comm_abort(trn_comm_t handle) {
  return api_call(__func__, [&] {
    if (!handle) return;
    remove_comm(handle)->shutdown(true);
  });
}

TRN_COMM_API trn_result_t trn_comm_get_info(trn_comm_t handle, trn_comm_info_t *info) {
  return api_call(__func__, [&] {
    auto comm = find(handle);
    if (!info) fail(TRN_ERROR_NULL_POINTER, "info is NULL");
    if (info->header.type != TRN_STRUCT_COMM_INFO || info->header.size < sizeof(trn_comm_info_t))
      fail(TRN_ERROR_INVALID_STRUCT, "info was not set up with TRN_COMM_INFO_INIT");
    comm->fill_info(info);
  });
}

TRN_COMM_API trn_result_t trn_comm_get_error(trn_comm_t handle) {
  return api_call(__func__, [&] {
    auto comm = find(handle);
    if (auto why = comm->error(); !why.empty()) fail(TRN_ERROR_COLLECTIVE, why);
  });
}

TRN_COMM_API trn_result_t trn_comm_synchronize(trn_comm_t handle, uint64_t timeout_ns) {
  return api_call(__func__, [&] {
    if (find(handle)->synchronize(timeout_ns) == TRN_TIMEOUT)
      fail(TRN_TIMEOUT,
           "the communicator's operations did not complete within the timeout "
           "(they go on; wait again, or abort the communicator)");
  });
}

TRN_COMM_API trn_result_t trn_comm_all_reduce(trn_comm_t comm, trn_queue_t queue,
                                              trn_comm_buffer_t send, trn_comm_buffer_t recv,
                                              uint64_t count, trn_dtype_t dtype,
                                              trn_comm_red_op_t op, const trn_sync_t *sync,
                                              uint64_t *sequence) {
  return api_call(__func__, [&] {
    set_sequence(sequence, operation(comm, OpKind::all_reduce,
                                     {queue, send, recv, count, dtype, op, 0, sync}));
  });
}

TRN_COMM_API trn_result_t trn_comm_all_gather(trn_comm_t comm, trn_queue_t queue,
                                              trn_comm_buffer_t send, trn_comm_buffer_t recv,
                                              uint64_t count, trn_dtype_t dtype,
                                              const trn_sync_t *sync, uint64_t *sequence) {
  return api_call(__func__, [&] {
    set_sequence(sequence, operation(comm, OpKind::all_gather,
                                     {queue, send, recv, count, dtype, TRN_COMM_SUM, 0, sync}));
  });
}

TRN_COMM_API trn_result_t trn_comm_reduce_scatter(trn_comm_t comm, trn_queue_t queue,
                                                  trn_comm_buffer_t send, trn_comm_buffer_t recv,
                                                  uint64_t count, trn_dtype_t dtype,
                                                  trn_comm_red_op_t op, const trn_sync_t *sync,
                                                  uint64_t *sequence) {
  return api_call(__func__, [&] {
    set_sequence(sequence, operation(comm, OpKind::reduce_scatter,
                                     {queue, send, recv, count, dtype, op, 0, sync}));
  });
}

TRN_COMM_API trn_result_t trn_comm_broadcast(trn_comm_t comm, trn_queue_t queue,
                                             trn_comm_buffer_t send, trn_comm_buffer_t recv,
                                             uint64_t count, trn_dtype_t dtype, uint32_t root,
                                             const trn_sync_t *sync, uint64_t *sequence) {
  return api_call(__func__, [&] {
    set_sequence(sequence, operation(comm, OpKind::broadcast,
                                     {queue, send, recv, count, dtype, TRN_COMM_SUM, root, sync}));
  });
}

TRN_COMM_API trn_result_t trn_comm_reduce(trn_comm_t comm, trn_queue_t queue,
                                          trn_comm_buffer_t send, trn_comm_buffer_t recv,
                                          uint64_t count, trn_dtype_t dtype, trn_comm_red_op_t op,
                                          uint32_t root, const trn_sync_t *sync,
                                          uint64_t *sequence) {
  return api_call(__func__, [&] {
    set_sequence(sequence, operation(comm, OpKind::reduce,
                                     {queue, send, recv, count, dtype, op, root, sync}));
  });
}

TRN_COMM_API trn_result_t trn_comm_all_to_all(trn_comm_t comm, trn_queue_t queue,
                                              trn_comm_buffer_t send, trn_comm_buffer_t recv,
                                              uint64_t count, trn_dtype_t dtype,
                                              const trn_sync_t *sync, uint64_t *sequence) {
  return api_call(__func__, [&] {
    set_sequence(sequence, operation(comm, OpKind::all_to_all,
                                     {queue, send, recv, count, dtype, TRN_COMM_SUM, 0, sync}));
  });
}

TRN_COMM_API trn_result_t trn_comm_send(trn_comm_t comm, trn_queue_t queue, trn_comm_buffer_t send,
                                        uint64_t count, trn_dtype_t dtype, uint32_t peer,
                                        const trn_sync_t *sync, uint64_t *sequence) {
  return api_call(__func__, [&] {
    set_sequence(sequence, operation(comm, OpKind::send,
                                     {queue, send, {}, count, dtype, TRN_COMM_SUM, peer, sync}));
  });
}

TRN_COMM_API trn_result_t trn_comm_recv(trn_comm_t comm, trn_queue_t queue, trn_comm_buffer_t recv,
                                        uint64_t count, trn_dtype_t dtype, uint32_t peer,
                                        const trn_sync_t *sync, uint64_t *sequence) {
  return api_call(__func__, [&] {
    set_sequence(sequence, operation(comm, OpKind::recv,
                                     {queue, {}, recv, count, dtype, TRN_COMM_SUM, peer, sync}));
  });
}

TRN_COMM_API trn_result_t trn_comm_barrier(trn_comm_t comm, trn_queue_t queue,
                                           const trn_sync_t *sync, uint64_t *sequence) {
  return api_call(__func__, [&] {
    set_sequence(sequence, operation(comm, OpKind::barrier,
                                     {queue, {}, {}, 0, TRN_DTYPE_F32, TRN_COMM_SUM, 0, sync}));
  });
}

}  // extern "C"
