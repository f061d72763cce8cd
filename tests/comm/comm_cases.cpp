#include "comm_cases.hpp"

#include <sstream>

namespace trn::test {

const char *collective_name(Collective c) {
  switch (c) {
    case Collective::all_reduce: return "all_reduce";
    case Collective::all_gather: return "all_gather";
    case Collective::reduce_scatter: return "reduce_scatter";
    case Collective::broadcast: return "broadcast";
    case Collective::reduce: return "reduce";
    case Collective::all_to_all: return "all_to_all";
    case Collective::send_recv: return "send_recv";
    case Collective::barrier: return "barrier";
  }
  return "?";
}

std::string describe(const CaseSpec &spec, uint32_t ranks) {
  std::ostringstream out;
  out << collective_name(spec.collective) << " " << trn_dtype_name(spec.dtype) << " "
      << trn_comm_red_op_name(spec.op) << " count " << spec.count << " root " << spec.root
      << (spec.in_place ? " in place" : " out of place") << " on " << ranks << " ranks";
  return out.str();
}

std::vector<CaseSpec> every_case(uint32_t root, const std::vector<uint64_t> &counts,
                                 trn_comm_red_op_t (*op_of)(trn_dtype_t)) {
  std::vector<CaseSpec> specs;
  for (trn_dtype_t dtype : {TRN_DTYPE_F32, TRN_DTYPE_BF16, TRN_DTYPE_F16, TRN_DTYPE_I32})
    for (Collective c : {Collective::all_reduce, Collective::all_gather, Collective::reduce_scatter,
                         Collective::broadcast, Collective::reduce, Collective::all_to_all,
                         Collective::send_recv, Collective::barrier})
      for (bool in_place : {false, true})
        for (uint64_t count : counts) {
          CaseSpec spec;
          spec.collective = c;
          spec.dtype = dtype;
          spec.in_place = in_place;
          spec.count = count;
          spec.root = root;
          spec.op = op_of(dtype);
          specs.push_back(spec);
        }
  return specs;
}

namespace {

// Element i of block b of this rank's input: distinct per rank and block.
double input(const CaseSpec &spec, uint32_t rank, uint64_t i) {
  return input_value(rank, i, spec.op);
}

}  // namespace

std::string run_case(RankResources &res, trn_comm_t comm, uint32_t r, uint32_t n,
                     const CaseSpec &spec) {
  const uint64_t es = trn_dtype_size(spec.dtype);
  const uint64_t c = spec.count;
  uint64_t send_count = c, recv_count = c;
  switch (spec.collective) {
    case Collective::all_gather: recv_count = c * n; break;
    case Collective::reduce_scatter: send_count = c * n; break;
    case Collective::all_to_all: send_count = recv_count = c * n; break;
    default: break;
  }
  // In place: one allocation holding the larger of the two, the input where NCCL puts it.
  const uint64_t total = std::max(send_count, recv_count) * es;
  trn_mem_t a = nullptr, b = nullptr;
  if (trn_mem_alloc(res.pool, total, 0, TRN_MEM_CATEGORY_TENSORS, 0, &a) != TRN_SUCCESS ||
      trn_mem_alloc(res.pool, total, 0, TRN_MEM_CATEGORY_TENSORS, 0, &b) != TRN_SUCCESS)
    return std::string("trn_mem_alloc: ") + trn_last_error();
  trn_comm_buffer_t send{a, 0}, recv{spec.in_place ? a : b, 0};
  if (spec.in_place && spec.collective == Collective::all_gather) send.offset = r * c * es;
  if (spec.in_place && spec.collective == Collective::reduce_scatter) recv.offset = r * c * es;

  std::vector<uint8_t> host(total, 0);
  // The recv buffer starts as a marker (0x5a), so writes outside the result would show.
  std::vector<uint8_t> marker(total, 0x5a);
  trn_mem_write(b, 0, marker.data(), total);
  trn_mem_write(a, 0, marker.data(), total);
  std::vector<uint8_t> in(send_count * es);
  for (uint64_t i = 0; i < send_count; ++i) encode(spec.dtype, input(spec, r, i), &in[i * es]);
  trn_mem_write(send.mem, send.offset, in.data(), in.size());

  trn_result_t result = TRN_SUCCESS;
  const trn_dtype_t t = spec.dtype;
  switch (spec.collective) {
    case Collective::all_reduce:
      result = trn_comm_all_reduce(comm, res.queue, send, recv, c, t, spec.op, nullptr, nullptr);
      break;
    case Collective::all_gather:
      result = trn_comm_all_gather(comm, res.queue, send, recv, c, t, nullptr, nullptr);
      break;
    case Collective::reduce_scatter:
      result =
          trn_comm_reduce_scatter(comm, res.queue, send, recv, c, t, spec.op, nullptr, nullptr);
      break;
    case Collective::broadcast:
      result = trn_comm_broadcast(comm, res.queue, send, recv, c, t, spec.root, nullptr, nullptr);
      break;
    case Collective::reduce:
      result =
          trn_comm_reduce(comm, res.queue, send, recv, c, t, spec.op, spec.root, nullptr, nullptr);
      break;
    case Collective::all_to_all:
      result = trn_comm_all_to_all(comm, res.queue, send, recv, c, t, nullptr, nullptr);
      break;
    case Collective::send_recv:
      // Even ranks send to the next, odd ones receive from the previous (a lone last rank idles).
      if (r % 2 == 0 && r + 1 < n)
        result = trn_comm_send(comm, res.queue, send, c, t, r + 1, nullptr, nullptr);
      else if (r % 2 == 1)
        result = trn_comm_recv(comm, res.queue, recv, c, t, r - 1, nullptr, nullptr);
      break;
    case Collective::barrier: result = trn_comm_barrier(comm, res.queue, nullptr, nullptr); break;
  }
  std::string wrong;
  if (result != TRN_SUCCESS) wrong = std::string("the call failed: ") + trn_comm_last_error();
  if (wrong.empty() && trn_comm_synchronize(comm, 60'000'000'000ull) != TRN_SUCCESS)
    wrong = std::string("trn_comm_synchronize: ") + trn_comm_last_error();
  if (wrong.empty()) trn_mem_read(recv.mem, 0, host.data(), total);

  // What recv must hold (NaN: not written by the operation, the marker must remain).
  auto expected = [&](uint64_t i) -> double {
    switch (spec.collective) {
      case Collective::all_reduce: return reduce_values(spec.op, n, i, t);
      case Collective::all_gather: return input(spec, static_cast<uint32_t>(i / c), i % c);
      case Collective::reduce_scatter: return reduce_values(spec.op, n, r * c + i, t);
      case Collective::broadcast: return input(spec, spec.root, i);
      case Collective::reduce: return reduce_values(spec.op, n, i, t);
      case Collective::all_to_all: return input(spec, static_cast<uint32_t>(i / c), r * c + i % c);
      default: return input(spec, r - 1, i);
    }
  };
  const bool writes = !(spec.collective == Collective::barrier ||
                        (spec.collective == Collective::reduce && r != spec.root) ||
                        (spec.collective == Collective::send_recv && r % 2 == 0));
  uint64_t bad = 0;
  std::string first;
  if (wrong.empty() && writes) {
    for (uint64_t i = 0; i < recv_count; ++i) {
      const double want = in_dtype(t, expected(i));
      const double have = decode(t, &host[recv.offset + i * es]);
      if (have != want && !(std::isnan(have) && std::isnan(want))) {
        if (bad++ == 0)
          first = "element " + std::to_string(i) + " is " + std::to_string(have) + ", expected " +
                  std::to_string(want);
      }
    }
    if (bad) wrong = std::to_string(bad) + " of " + std::to_string(recv_count) + " wrong; " + first;
  }
  trn_queue_finish(res.queue, 10'000'000'000ull);
  trn_mem_free(a);
  trn_mem_free(b);
  return wrong.empty() ? "" : "rank " + std::to_string(r) + ": " + describe(spec, n) + ": " + wrong;
}

}  // namespace trn::test
