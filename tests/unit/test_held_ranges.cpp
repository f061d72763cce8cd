// The ranges of device memory a process holds, and a caller's memo of them: a memo answers only
// while the ranges are unchanged, so a release is seen by the next lookup.
#include <catch2/catch.hpp>

#include "sim/held_ranges.hpp"

using trn::sim::HeldRanges;
using trn::sim::HeldRangesMemo;

TEST_CASE("held ranges: an address inside one held range is held and one across two is not") {
  HeldRanges held;
  held.add(4096, 8192);
  held.add(12288, 4096);  // adjacent, but a range of its own
  CHECK(held.holds(4096, 8192));
  CHECK(held.holds(8000, 0));
  CHECK_FALSE(held.holds(0, 16));
  CHECK_FALSE(held.holds(12000, 1000));  // runs from one range into the next
  CHECK_FALSE(held.holds(16384, 1));
}

TEST_CASE("held ranges: a memo answers for its ranges until any range changes") {
  HeldRanges held, other;
  held.add(0, 1 << 20);
  other.add(0, 1 << 20);
  HeldRangesMemo memo;
  REQUIRE(held.holds(4096, 64, &memo));        // looked up and noted
  CHECK(held.holds(65536, 4096, &memo));       // another address of the noted range
  CHECK_FALSE(held.holds(1 << 20, 1, &memo));  // past its end: not from the memo
  CHECK(other.holds(4096, 64, &memo));         // another device's ranges: its own entry
  held.remove(0, 1 << 20);
  CHECK_FALSE(held.holds(4096, 64, &memo));  // released: the memo's entry is out of date
  CHECK(other.holds(4096, 64, &memo));
  held.add(0, 4096);
  CHECK(held.holds(0, 4096, &memo));
  CHECK_FALSE(held.holds(4096, 64, &memo));
}

TEST_CASE("held ranges: a memo sees an export dropped and a range released in part") {
  HeldRanges held;
  held.add(0, 65536);
  held.note_export(1, 7, 8192, 4096);
  HeldRangesMemo memo;
  REQUIRE(held.holds(8192, 4096, &memo));
  REQUIRE(held.holds(0, 4096, &memo));
  CHECK(held.drop_export(1, 7) == std::make_pair(uint64_t{8192}, uint64_t{4096}));
  CHECK_FALSE(held.holds(8192, 4096, &memo));
  CHECK(held.holds(0, 4096, &memo));
  held.remove(0, 2048);
  CHECK_FALSE(held.holds(0, 4096, &memo));
  CHECK(held.holds(2048, 2048, &memo));
}
