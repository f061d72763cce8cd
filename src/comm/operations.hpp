// The collective operations as sequences of queue commands (docs/collectives.md, "Algorithms").
#pragma once

#include <cstdint>

#include "comm/communicator.hpp"

namespace trn::comm {

struct OpArgs {
  trn_queue_t queue = nullptr;
  trn_comm_buffer_t send{};
  trn_comm_buffer_t recv{};
  uint64_t count = 0;
  trn_dtype_t dtype = TRN_DTYPE_F32;
  trn_comm_red_op_t op = TRN_COMM_SUM;
  uint32_t root = 0;  // broadcast, reduce; the peer of send and recv
  const trn_sync_t *sync = nullptr;
};

enum class OpKind {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  reduce,
  all_to_all,
  send,
  recv,
  barrier
};

// "all_reduce", "barrier", ...
const char *op_kind_name(OpKind kind);

// Validates, enqueues and records one operation; returns the sequence number of its last
// command. Throws CommError (nothing enqueued for argument errors; the communicator failed if
// the operation could be enqueued only in part).
uint64_t run_operation(Comm &comm, OpKind kind, const OpArgs &args);

}  // namespace trn::comm
