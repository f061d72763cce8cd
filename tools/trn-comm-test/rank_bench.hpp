// One rank's part of a trn-comm-test run: its buffers on its core, and for every size the
// warm-up, the timed iterations (host time from enqueue to completion, and the simulated device
// time between two timestamps on the rank's queue) and the check of its output. The figures of
// all ranks meet in rank 0 through the communicator itself (the slowest rank's P50 times, the
// total of wrong elements), so the same code serves ranks as threads, forked processes and a
// torchrun world.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collective.hpp"

namespace trn::comm_test {

struct Settings {
  Op op = Op::all_reduce;
  trn_dtype_t dtype = TRN_DTYPE_F32;
  trn_comm_red_op_t redop = TRN_COMM_SUM;
  uint64_t min_bytes = 8;
  uint64_t max_bytes = uint64_t{1} << 20;
  double step_factor = 2;
  uint32_t iters = 20;
  uint32_t warmup = 5;
  uint64_t timeout_ns = 60'000'000'000ull;
};

// How long the tool waits on an operation: the communicator's deadline and a few seconds more,
// so that a rank that stopped taking part shows as the communicator's diagnosis
// (TRN_ERROR_COLLECTIVE naming the operation and the ranks) rather than as this wait's timeout.
uint64_t wait_ns(const Settings &s);

// The shapes of the sizes from min to max, each step_factor times the last (max included when
// it falls between), for `ranks` ranks: a size rounds down to whole elements (and whole blocks
// per rank where the op splits its buffer), and sizes that round to the same shape give one row.
std::vector<Shape> shapes(const Settings &s, uint32_t ranks);

struct Row {
  Shape shape;
  double host_us = 0;    // P50 of the slowest rank
  double device_us = 0;  // P50 of the slowest rank, simulated time
  uint64_t wrong = 0;    // elements wrong over all ranks
};

// A rank: its device and core, its communicator (made by the caller), rank and size.
struct Rank {
  trn_device_t device = nullptr;
  trn_core_t core = nullptr;
  trn_comm_t comm = nullptr;
  uint32_t rank = 0;
  uint32_t ranks = 1;
};

struct RankError {
  std::string message;
};

// Runs every size on this rank. Rank 0 gets the rows; the others an empty list. Throws RankError.
std::vector<Row> run_rank(const Settings &settings, const Rank &rank);

}  // namespace trn::comm_test
