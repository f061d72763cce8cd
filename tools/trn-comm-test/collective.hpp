// The operations trn-comm-test measures, with nccl-tests' definitions: what a "size" means for
// each (the bytes of the largest buffer a rank sees), how many elements each rank sends and
// receives for it, the bus bandwidth factor (busbw = algbw * factor, the bytes that cross the
// slowest link relative to an ideal ring), and what each rank's output must hold.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "trn/trn.h"
#include "trn/trn_comm.h"

namespace trn::comm_test {

enum class Op { all_reduce, all_gather, reduce_scatter, broadcast, all_to_all, send_recv };

// "allr" -> Op::all_reduce; nullopt for an unknown name.
std::optional<Op> parse_op(const std::string &name);
const char *op_name(Op op);
// Every name parse_op takes, for messages: "allr, allg, ...".
std::string op_names();

// One size of one operation on `ranks` ranks.
struct Shape {
  uint64_t size_bytes = 0;  // nccl-tests' size (after rounding to whole elements per rank)
  uint64_t count = 0;       // the elements of that size
  uint64_t block = 0;       // per-rank block: send count of all-gather, recv of reduce-scatter...
  uint64_t send_count = 0;  // elements this rank's send buffer holds
  uint64_t recv_count = 0;  // elements its recv buffer holds
};

// The shape of `size_bytes` rounded down to whole elements per rank (at least one).
Shape shape_of(Op op, uint64_t size_bytes, trn_dtype_t dtype, uint32_t ranks);
double bus_factor(Op op, uint32_t ranks);

// Enqueues the operation on `queue` for rank `rank` (send/recv: even ranks send to the next,
// odd ones receive from the previous; a last even rank without a partner takes no part).
trn_result_t enqueue(Op op, trn_comm_t comm, trn_queue_t queue, trn_comm_buffer_t send,
                     trn_comm_buffer_t recv, const Shape &shape, trn_dtype_t dtype,
                     trn_comm_red_op_t redop, uint32_t rank, uint32_t ranks);

// Element i of rank r's input: small integers, so every dtype and every order of summation is
// exact and results can be compared bit for bit.
double input_value(uint32_t rank, uint64_t i);
// What element i of rank `rank`'s output must hold (sum, max or min as reductions); nullopt when
// this rank's output is not written (a send/recv rank that only sends).
std::optional<double> expected_value(Op op, trn_comm_red_op_t redop, const Shape &shape,
                                     uint32_t rank, uint32_t ranks, uint64_t i);
bool writes_output(Op op, uint32_t rank, uint32_t ranks);

// Exact small integers to and from the device's encodings (f32, bf16, f16, i32).
void encode(trn_dtype_t dtype, double value, void *out);
double decode(trn_dtype_t dtype, const void *in);

}  // namespace trn::comm_test
