// One collective run on one rank and checked against the host reference. Returns "" when every
// element is right, else what was wrong. No Catch2 assertions: it also runs in forked children
// and in rank threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "comm_world.hpp"

namespace trn::test {

enum class Collective {
  all_reduce,
  all_gather,
  reduce_scatter,
  broadcast,
  reduce,
  all_to_all,
  send_recv,
  barrier
};

const char *collective_name(Collective c);

struct CaseSpec {
  Collective collective = Collective::all_reduce;
  trn_dtype_t dtype = TRN_DTYPE_F32;
  trn_comm_red_op_t op = TRN_COMM_SUM;
  bool in_place = false;
  uint64_t count = 1;
  uint32_t root = 0;
};

std::string describe(const CaseSpec &spec, uint32_t ranks);

// Every collective x dtype x (out of place, in place), once per count of `counts`, with `root`
// and the reduction `op_of` picks for each dtype.
std::vector<CaseSpec> every_case(uint32_t root, const std::vector<uint64_t> &counts,
                                 trn_comm_red_op_t (*op_of)(trn_dtype_t));

// Runs `spec` on this rank (every rank must run the same specs in the same order).
std::string run_case(RankResources &rank, trn_comm_t comm, uint32_t my_rank, uint32_t ranks,
                     const CaseSpec &spec);

}  // namespace trn::test
