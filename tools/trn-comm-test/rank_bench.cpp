#include "rank_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <thread>

#include "tool_common/clock.hpp"

namespace trn::comm_test {

namespace {

void check(trn_result_t result, const std::string &what) {
  if (result != TRN_SUCCESS)
    throw RankError{what + ": " + trn_result_name(result) + ": " + trn_last_error()};
}

// A communicator call: its own error text names the operation and the ranks.
void check_comm(trn_result_t result, const std::string &what) {
  if (result != TRN_SUCCESS)
    throw RankError{what + ": " + trn_result_name(result) + ": " + trn_comm_last_error()};
}

// A timestamp on the queue, waiting out a queue filled by a large operation's commands.
void write_timestamp(trn_queue_t queue, trn_timestamp_t *at, uint64_t timeout_ns) {
  const auto deadline = trn::tools::steady_deadline(timeout_ns);
  trn_result_t r;
  while ((r = trn_queue_write_timestamp(queue, at, nullptr, nullptr)) == TRN_ERROR_QUEUE_FULL &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  check(r, "writing a timestamp on the rank's queue");
}

// Operations timed on the device per size (after the host-timed ones).
constexpr uint32_t kDeviceTimedIters = 20;

double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// The rank's queue, pool and buffers, let go in reverse order.
struct Buffers {
  trn_queue_t queue = nullptr;
  trn_pool_t pool = nullptr;
  trn_mem_t send = nullptr, recv = nullptr, stats = nullptr;

  Buffers(trn_device_t device, trn_core_t core, uint64_t send_bytes, uint64_t recv_bytes) {
    trn_core_properties_t props = TRN_CORE_PROPERTIES_INIT;
    check(trn_core_get_properties(core, &props), "reading the rank's core");
    trn_queue_desc_t qd = TRN_QUEUE_DESC_INIT;
    qd.kind = TRN_QUEUE_KIND_COMPUTE;
    qd.core = core;
    check(trn_queue_create(&qd, &queue), "creating the rank's compute queue");
    trn_pool_desc_t pd = TRN_POOL_DESC_INIT;
    pd.hbm_bank = props.hbm_bank;
    check(trn_pool_create(device, &pd, &pool), "creating the rank's pool");
    check(trn_mem_alloc(pool, send_bytes, 0, TRN_MEM_CATEGORY_TENSORS, 0, &send),
          "allocating the send buffer");
    check(trn_mem_alloc(pool, recv_bytes, 0, TRN_MEM_CATEGORY_TENSORS, 0, &recv),
          "allocating the receive buffer");
    check(trn_mem_alloc(pool, 64, 0, TRN_MEM_CATEGORY_TENSORS, 0, &stats),
          "allocating the figures' buffer");
  }
  ~Buffers() {
    if (queue) trn_queue_finish(queue, 10'000'000'000ull);
    trn_mem_free(stats);
    trn_mem_free(recv);
    trn_mem_free(send);
    trn_pool_destroy(pool);
    trn_queue_destroy(queue);
  }
  Buffers(const Buffers &) = delete;
  Buffers &operator=(const Buffers &) = delete;
};

// values[i] reduced with `redop` over all ranks, in place (f32 through the communicator).
void reduce_figures(const Rank &rank, Buffers &b, std::vector<float> &values,
                    trn_comm_red_op_t redop, uint64_t timeout_ns) {
  const uint64_t bytes = values.size() * sizeof(float);
  check(trn_mem_write(b.stats, 0, values.data(), bytes), "writing the rank's figures");
  check_comm(trn_comm_all_reduce(rank.comm, b.queue, {b.stats, 0}, {b.stats, 0}, values.size(),
                                 TRN_DTYPE_F32, redop, nullptr, nullptr),
             "gathering the figures");
  check_comm(trn_comm_synchronize(rank.comm, timeout_ns), "gathering the figures");
  check(trn_mem_read(b.stats, 0, values.data(), bytes), "reading the figures");
}

}  // namespace

uint64_t wait_ns(const Settings &s) {
  constexpr uint64_t kGraceNs = 5'000'000'000ull;
  return s.timeout_ns > UINT64_MAX - kGraceNs ? UINT64_MAX : s.timeout_ns + kGraceNs;
}

std::vector<Shape> shapes(const Settings &s, uint32_t ranks) {
  std::vector<Shape> out;
  auto add = [&](uint64_t bytes) {
    const Shape shape = shape_of(s.op, bytes, s.dtype, ranks);
    if (out.empty() || shape.size_bytes != out.back().size_bytes) out.push_back(shape);
  };
  for (double size = static_cast<double>(s.min_bytes); size <= static_cast<double>(s.max_bytes);
       size *= s.step_factor) {
    add(static_cast<uint64_t>(size));
    if (s.step_factor <= 1) break;
  }
  add(s.max_bytes);
  return out;
}

std::vector<Row> run_rank(const Settings &s, const Rank &rank) {
  const std::vector<Shape> all = shapes(s, rank.ranks);
  const uint64_t es = trn_dtype_size(s.dtype);
  uint64_t max_send = 0, max_recv = 0;
  for (const Shape &shape : all) {
    max_send = std::max(max_send, shape.send_count);
    max_recv = std::max(max_recv, shape.recv_count);
  }
  Buffers b(rank.device, rank.core, max_send * es, max_recv * es);
  {
    // The input once for every size: element i of a rank's send buffer is the same at any size.
    std::vector<std::byte> host(max_send * es);
    for (uint64_t i = 0; i < max_send; ++i)
      encode(s.dtype, input_value(rank.rank, i), &host[i * es]);
    check(trn_mem_write(b.send, 0, host.data(), host.size()), "writing the input");
  }
  std::vector<std::byte> output(max_recv * es);
  std::vector<Row> rows;
  for (const Shape &shape : all) {
    Row row;
    row.shape = shape;
    const uint64_t recv_bytes = row.shape.recv_count * es;
    // A marker no result can hold (huge or NaN in every dtype), so unwritten output counts wrong.
    check(trn_queue_memset(b.queue, b.recv, 0, 0x7f, recv_bytes, nullptr, nullptr),
          "marking the output");
    // Host time: from the enqueue to the completion of each operation, the operations back to
    // back (as the ranks of an application issue them, and as OpenMPI's baseline measures).
    // Device time: the queue's simulated clock between timestamps written around an operation,
    // in iterations of their own (the timestamps' submissions and the finish between them would
    // stagger the ranks' arrivals, which the host time would count).
    auto once = [&] {
      check_comm(
          enqueue(s.op, rank.comm, b.queue, {b.send, 0}, {b.recv, 0}, row.shape, s.dtype, s.redop,
                  rank.rank, rank.ranks),
          std::string(op_name(s.op)) + " of " + std::to_string(row.shape.size_bytes) + " bytes");
      check_comm(
          trn_comm_synchronize(rank.comm, wait_ns(s)),
          std::string(op_name(s.op)) + " of " + std::to_string(row.shape.size_bytes) + " bytes");
    };
    for (uint32_t i = 0; i < s.warmup; ++i) once();
    std::vector<double> host_us, device_us;
    for (uint32_t i = 0; i < s.iters; ++i) {
      const double start = now_us();
      once();
      host_us.push_back(now_us() - start);
    }
    // The simulated time moves only with the queue's commands, so a timestamp written after
    // completion still reads the operation's end; it varies little from one to the next.
    for (uint32_t i = 0; i < std::min(s.iters, kDeviceTimedIters); ++i) {
      trn_timestamp_t before{}, after{};
      write_timestamp(b.queue, &before, wait_ns(s));
      once();
      write_timestamp(b.queue, &after, wait_ns(s));
      check(trn_queue_finish(b.queue, wait_ns(s)), "waiting for the timestamps");
      device_us.push_back(static_cast<double>(after.device_ns - before.device_ns) / 1000.0);
    }
    check(trn_queue_finish(b.queue, wait_ns(s)), "finishing the rank's queue");
    uint64_t wrong = 0;
    if (writes_output(s.op, rank.rank, rank.ranks)) {
      check(trn_mem_read(b.recv, 0, output.data(), recv_bytes), "reading the output");
      for (uint64_t i = 0; i < row.shape.recv_count; ++i) {
        const auto want = expected_value(s.op, s.redop, row.shape, rank.rank, rank.ranks, i);
        if (want && decode(s.dtype, &output[i * es]) != *want) ++wrong;
      }
    }
    std::vector<float> slowest{static_cast<float>(median(host_us)),
                               static_cast<float>(median(device_us))};
    reduce_figures(rank, b, slowest, TRN_COMM_MAX, wait_ns(s));
    std::vector<float> total{static_cast<float>(wrong)};
    reduce_figures(rank, b, total, TRN_COMM_SUM, wait_ns(s));
    row.host_us = slowest[0];
    row.device_us = slowest[1];
    row.wrong = static_cast<uint64_t>(std::llround(total[0]));
    if (rank.rank == 0) rows.push_back(row);
  }
  return rows;
}

}  // namespace trn::comm_test
