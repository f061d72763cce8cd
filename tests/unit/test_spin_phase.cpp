// The simulated device's spin phase: how long a waiter spins before it sleeps.
#include <catch2/catch.hpp>

#include "sim/wait_primitives.hpp"

namespace {

using trn::sim::monotonic_ns;
using trn::sim::SpinPhase;

// Calls next() until it says the budget is spent; returns the calls that said to go on.
uint64_t spin_out(SpinPhase &spin) {
  uint64_t calls = 0;
  while (spin.next()) ++calls;
  return calls;
}

}  // namespace

TEST_CASE("a zero spin budget sleeps at once (TRN_SPIN_NS=0)", "[spin]") {
  SpinPhase spin(monotonic_ns(), 0);
  CHECK_FALSE(spin.next());
}

TEST_CASE("a budget already spent when the wait starts spins not at all", "[spin]") {
  SpinPhase spin(monotonic_ns() - 1'000'000, 500'000);
  CHECK_FALSE(spin.next());
}

TEST_CASE("a spin lasts its budget, through the pause phase and the yielding one", "[spin]") {
  // Budgets shorter and longer than the pause phase.
  const uint64_t budget = GENERATE(uint64_t{1'000}, SpinPhase::kPauseNs, uint64_t{2'000'000});
  INFO("budget " << budget << " ns");
  const uint64_t start = monotonic_ns();
  SpinPhase spin(start, budget);
  const uint64_t calls = spin_out(spin);
  const uint64_t spent = monotonic_ns() - start;
  // It spun, unless the thread lost its core for longer than the budget before its first look
  // (a 1 us budget on a loaded machine or in a sanitizer build): then ending at once is right.
  if (budget >= 1'000'000) CHECK(calls > 0);
  CHECK(spent >= budget);
  CHECK(spent < budget + 1'000'000'000);  // ends: a loaded machine may be late, never endless
  CHECK_FALSE(spin.next());               // and stays ended
}

TEST_CASE("a budget that would pass the clock's end spins until told otherwise", "[spin]") {
  // UINT64_MAX means "spin for ever": the end saturates instead of wrapping to the past.
  SpinPhase spin(monotonic_ns(), UINT64_MAX);
  for (int i = 0; i < 1000; ++i) REQUIRE(spin.next());
}

TEST_CASE("a zero pause phase yields from the first check and still lasts its budget", "[spin]") {
  // A waiter whose signaller may share its core (a host thread running its queue's commands)
  // yields at once. Whether it keeps yielding depends on the core: a yield that finds nobody
  // else to run turns it back to pause-spins for a while (which of the two happens here
  // depends on what else the machine runs), so only the budget is certain.
  constexpr uint64_t kBudget = 2'000'000;
  const uint64_t start = monotonic_ns();
  trn::sim::YieldHistory history;
  SpinPhase yielding(start, kBudget, 0, &history);
  const uint64_t checks = spin_out(yielding);
  const uint64_t spent = monotonic_ns() - start;
  INFO(checks << " checks, the last yield " << (history.idle ? "idle" : "ran another thread"));
  CHECK(checks > 0);
  CHECK(spent >= kBudget);
  CHECK(spent < kBudget + 1'000'000'000);
  CHECK_FALSE(yielding.next());
}

TEST_CASE("a waiter running its queue's commands yields from the start, for ten budgets",
          "[spin]") {
  using trn::sim::spin_plan;
  using trn::sim::SpinStyle;
  const trn::sim::SpinPlan standard = spin_plan(SpinStyle::standard, 20'000);
  CHECK(standard.budget_ns == 20'000);
  CHECK(standard.pause_ns == SpinPhase::kPauseNs);
  const trn::sim::SpinPlan yielding = spin_plan(SpinStyle::yielding, 20'000);
  CHECK(yielding.budget_ns == 20'000 * trn::sim::kYieldingBudgets);
  CHECK(yielding.pause_ns == 0);
  // TRN_SPIN_NS=0 sleeps at once in either style; a budget near the clock's end saturates.
  CHECK(spin_plan(SpinStyle::yielding, 0).budget_ns == 0);
  CHECK(spin_plan(SpinStyle::yielding, UINT64_MAX / 2).budget_ns == UINT64_MAX);
}
