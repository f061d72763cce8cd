// Settings from the environment: TRN_COMM_TIMEOUT_MS, TRN_COMM_CHUNK_BYTES,
// TRN_COMM_SEND_IN_PLACE, TRN_COMM_SOCKET_ADDR, TRN_COMM_PORT, and torchrun's RANK, WORLD_SIZE,
// LOCAL_RANK, MASTER_ADDR, MASTER_PORT. A malformed value throws TRN_ERROR_INVALID_CONFIG naming
// it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "comm/socket.hpp"

namespace trn::comm {

uint64_t default_timeout_ns();
// TRN_COMM_CHUNK_BYTES, when set.
std::optional<uint64_t> env_chunk_bytes();
// The staging chunk when neither the descriptor nor TRN_COMM_CHUNK_BYTES names one: larger
// when ranks on one host use several devices, so that chunks cross NeuronLink (config.cpp says
// why).
uint64_t default_chunk_bytes(bool device_links);
// The larger of the two defaults: the eager limit trn gives rxm (so that a chunk of either
// default goes eagerly), and a communicator's chunk until the rendezvous' table is read.
uint64_t larger_default_chunk_bytes();
// Bytes up to which all-reduce uses recursive doubling rather than a ring
// (TRN_COMM_RING_MIN_BYTES, default 256 KiB); read once per communicator, as every rank must
// choose alike.
uint64_t default_ring_min_bytes();
// TRN_COMM_SEND_IN_PLACE (default 1): whether large chunks to other hosts go from where they are
// rather than through the outbox. Each rank's own choice (the receiver cannot tell).
bool send_in_place_enabled();
// Where trn_comm_get_unique_id listens: TRN_COMM_SOCKET_ADDR or 127.0.0.1.
std::string socket_address();

struct TorchrunEnv {
  uint32_t rank = 0;
  uint32_t world_size = 1;
  std::optional<uint32_t> local_rank;
  Endpoint rendezvous;  // where rank 0 serves the rendezvous
  uint64_t token = 0;   // the same on every rank of the job
};

TorchrunEnv read_torchrun_env();

}  // namespace trn::comm
