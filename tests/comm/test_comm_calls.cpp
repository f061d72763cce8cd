// Ranks that call different collectives (another count, dtype, op, root or kind) fail, every one
// of them, naming both calls, before any rank's collective completes; ranks that call alike run
// on past the table of calls' ring.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "support/sim_env.hpp"
#include "thread_world.hpp"

using namespace trn::test;

namespace {

struct Call {
  const char *kind = "all_reduce";
  uint64_t count = 2048;
  trn_dtype_t dtype = TRN_DTYPE_F32;
  trn_comm_red_op_t op = TRN_COMM_SUM;
  uint32_t root = 0;
  const char *text = "";  // how the failure names it
};

trn_result_t make_call(trn_comm_t comm, trn_queue_t queue, trn_mem_t buf, const Call &call) {
  const trn_comm_buffer_t b{buf, 0};
  if (std::strcmp(call.kind, "barrier") == 0)
    return trn_comm_barrier(comm, queue, nullptr, nullptr);
  if (std::strcmp(call.kind, "broadcast") == 0)
    return trn_comm_broadcast(comm, queue, b, b, call.count, call.dtype, call.root, nullptr,
                              nullptr);
  return trn_comm_all_reduce(comm, queue, b, b, call.count, call.dtype, call.op, nullptr, nullptr);
}

}  // namespace

TEST_CASE("ranks that call different collectives all fail, naming both calls", "[comm][failure]") {
  SimEnv env;
  const Call usual{"all_reduce", 2048, TRN_DTYPE_F32,
                   TRN_COMM_SUM, 0,    "all_reduce of 2048 x f32 (sum)"};
  const Call broadcast{"broadcast",  2048, TRN_DTYPE_F32,
                       TRN_COMM_SUM, 0,    "broadcast of 2048 x f32 rooted at rank 0"};
  const auto [mine, theirs] =
      GENERATE_COPY(std::pair{usual, Call{"all_reduce", 1024, TRN_DTYPE_F32, TRN_COMM_SUM, 0,
                                          "all_reduce of 1024 x f32 (sum)"}},
                    std::pair{usual, Call{"all_reduce", 2048, TRN_DTYPE_I32, TRN_COMM_SUM, 0,
                                          "all_reduce of 2048 x i32 (sum)"}},
                    std::pair{usual, Call{"all_reduce", 2048, TRN_DTYPE_F32, TRN_COMM_MAX, 0,
                                          "all_reduce of 2048 x f32 (max)"}},
                    std::pair{usual, Call{"barrier", 0, TRN_DTYPE_F32, TRN_COMM_SUM, 0, "barrier"}},
                    std::pair{broadcast, Call{"broadcast", 2048, TRN_DTYPE_F32, TRN_COMM_SUM, 1,
                                              "broadcast of 2048 x f32 rooted at rank 1"}});
  INFO(mine.text << " against " << theirs.text);
  // Rank 2 calls otherwise, after a collective every rank made alike.
  ThreadWorld world(3, 4096, 20'000);
  const auto failures = world.each([&](uint32_t r) -> std::string {
    RankResources &res = world.ranks[r];
    trn_mem_t buf = nullptr;
    if (trn_mem_alloc(res.pool, 1 << 16, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf) != TRN_SUCCESS)
      return trn_last_error();
    std::string wrong;
    // Either call may report the failure: two ranks whose second calls differ fail the
    // communicator while the third may still wait on the first, which then fails as well.
    trn_result_t result = make_call(world.comms[r], res.queue, buf, usual);
    if (result == TRN_SUCCESS) result = trn_comm_synchronize(world.comms[r], 20'000'000'000ull);
    if (result == TRN_SUCCESS) {
      result = make_call(world.comms[r], res.queue, buf, r == 2 ? theirs : mine);
      if (result == TRN_SUCCESS) result = trn_comm_synchronize(world.comms[r], 20'000'000'000ull);
    }
    const std::string why = comm_error();
    if (result != TRN_ERROR_COLLECTIVE) {
      wrong = std::string("rank ") + std::to_string(r) + " got " + trn_result_name(result);
    } else if (why.find(mine.text) == std::string::npos ||
               why.find(theirs.text) == std::string::npos ||
               why.find("differs between ranks") == std::string::npos) {
      wrong = "rank " + std::to_string(r) + "'s error does not name both calls: " + why;
    }
    trn_queue_finish(res.queue, 10'000'000'000ull);
    trn_queue_reset(res.queue);
    trn_mem_free(buf);
    return wrong;
  });
  for (const auto &f : failures) FAIL_CHECK(f);
}

TEST_CASE("ranks that call alike run on past the table of calls, with exact results", "[comm]") {
  SimEnv env;
  // More collectives than a rank's row of the table holds: its entries are used again.
  constexpr uint32_t kCalls = 300;
  ThreadWorld world(3, 4096, 30'000);
  const auto failures = world.each([&](uint32_t r) -> std::string {
    RankResources &res = world.ranks[r];
    trn_mem_t buf = nullptr;
    if (trn_mem_alloc(res.pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &buf) != TRN_SUCCESS)
      return trn_last_error();
    const int32_t one = static_cast<int32_t>(r + 1);
    std::string wrong;
    if (trn_mem_write(buf, 0, &one, sizeof one) != TRN_SUCCESS) wrong = trn_last_error();
    // Each step sums the ranks' values: 1 + 2 + 3, then 3 * 6, ... (i32 wraps alike everywhere).
    for (uint32_t i = 0; i < kCalls && wrong.empty(); ++i)
      if (trn_comm_all_reduce(world.comms[r], res.queue, {buf, 0}, {buf, 0}, 1, TRN_DTYPE_I32,
                              TRN_COMM_SUM, nullptr, nullptr) != TRN_SUCCESS)
        wrong = "collective " + std::to_string(i + 1) + ": " + comm_error();
    if (wrong.empty() && trn_comm_synchronize(world.comms[r], 30'000'000'000ull) != TRN_SUCCESS)
      wrong = comm_error();
    uint32_t expect = 6;
    for (uint32_t i = 1; i < kCalls; ++i) expect *= 3;
    int32_t got = 0;
    if (wrong.empty() && trn_mem_read(buf, 0, &got, sizeof got) != TRN_SUCCESS)
      wrong = trn_last_error();
    if (wrong.empty() && static_cast<uint32_t>(got) != expect)
      wrong = "rank " + std::to_string(r) + " has " + std::to_string(got) + ", not " +
              std::to_string(static_cast<int32_t>(expect));
    trn_mem_free(buf);
    return wrong;
  });
  for (const auto &f : failures) FAIL_CHECK(f);
}
