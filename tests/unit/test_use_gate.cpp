// The use gate of an allocation: users enter and leave without blocking, a close turns later
// users away and waits for those inside before the memory may go.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "runtime/use_gate.hpp"

using trn::rt::UseGate;

TEST_CASE(
    "use gate: users enter an open gate and none after the close and a second close is refused") {
  UseGate gate;
  CHECK_FALSE(gate.closed());
  REQUIRE(gate.enter());
  REQUIRE(gate.enter());  // the same user twice (an operand named twice) counts twice
  gate.leave();
  gate.leave();
  CHECK(gate.close());
  CHECK(gate.closed());
  CHECK_FALSE(gate.enter());
  CHECK_FALSE(gate.close());  // freed already: the second free does nothing
  UseGate::Hold hold(gate);
  CHECK_FALSE(hold.entered());
}

TEST_CASE("use gate: a close waits for the user inside and returns only after it left") {
  UseGate gate;
  REQUIRE(gate.enter());
  std::atomic<bool> left{false}, closed{false};
  std::thread closer([&] {
    CHECK(gate.close());
    closed = true;
    CHECK(left.load());  // never returned while the user was inside
  });
  // The closer turns new users away at once, before the one inside leaves.
  while (!gate.closed()) std::this_thread::yield();
  CHECK_FALSE(gate.enter());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK_FALSE(closed.load());
  left = true;
  gate.leave();
  closer.join();
  CHECK(closed.load());
}

TEST_CASE(
    "use gate: users on several threads racing a close either finish inside or are turned away") {
  for (int round = 0; round < 200; ++round) {
    UseGate gate;
    std::atomic<int> inside{0}, after_close{0};
    std::atomic<bool> closed{false};
    std::vector<std::thread> users;
    for (int t = 0; t < 3; ++t)
      users.emplace_back([&] {
        for (int i = 0; i < 200; ++i) {
          UseGate::Hold hold(gate);
          if (!hold.entered()) continue;
          inside.fetch_add(1);
          if (closed.load()) after_close.fetch_add(1);  // a user inside a returned close
          inside.fetch_sub(1);
        }
      });
    std::thread closer([&] {
      REQUIRE(gate.close());
      closed = true;
      CHECK(inside.load() == 0);
    });
    for (auto &u : users) u.join();
    closer.join();
    CHECK(after_close.load() == 0);
    CHECK_FALSE(gate.enter());
  }
}
