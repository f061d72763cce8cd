// trn-top's live screen on a pseudo-terminal of 80x24: the first frame, the keys that pick the
// device and the table, and no busy loop when its standard input is at end of file.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <regex>
#include <string>

#include "support/pty_child.hpp"
#include "support/sim_env.hpp"

using trn::test::PtyChild;
using trn::test::SimEnv;

namespace {

constexpr char kRedraw[] = "\x0c";  // Ctrl-L: the whole screen again, not only what changed
constexpr int kDrawnMs = 20000;

}  // namespace

TEST_CASE("trn-top's live screen: the first frame has no period yet, keys pick device and table") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  PtyChild top({TRN_TOP_PATH, "-d", "500"}, 24, 80, false);
  // Deadlines, not fixed waits: a loaded machine or a sanitizer build draws and answers late.
  {
    const bool drawn = top.read_until(std::regex("first sample"), kDrawnMs) &&
                       top.read_until(std::regex("device 0/2"), kDrawnMs);
    INFO(top.output());
    REQUIRE(drawn);
    CHECK_THAT(top.output(), !Catch::Contains("period 0.0"));
  }
  size_t mark = top.output().size();
  top.send(std::string("d") + kRedraw);
  CHECK(top.read_until(std::regex("device 1/2"), kDrawnMs, mark));
  mark = top.output().size();
  top.send(std::string("e") + kRedraw);
  CHECK(top.read_until(std::regex("TENSOR%"), kDrawnMs, mark));
  top.send("q");
  const int status = top.wait(10000);
  REQUIRE(status != -1);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("trn-top's live screen does not spin when its standard input is at end of file") {
  SimEnv env;
  PtyChild top({TRN_TOP_PATH, "-d", "1000"}, 24, 80, true);
  {
    INFO(top.output());
    REQUIRE(top.read_until(std::regex("first sample"), kDrawnMs));  // started, first frame drawn
  }
  const size_t mark = top.output().size();
  const double before = top.cpu_seconds();
  top.read_for(2000);
  const double used = top.cpu_seconds() - before;
  INFO("CPU time over 2 s: " << used << " s");
  CHECK(used < 0.5);  // a loop polling a closed input burns the whole 2 s
  // Still sampling every second: "first sample" became "period 1.0 s" (only the characters
  // that changed are written, so only its tail is sure to appear in one piece; a loaded
  // machine, or a sanitizer build, may take longer over a sample).
  INFO(top.output());
  CHECK(top.read_until(std::regex("[0-9]\\.[0-9] s"), kDrawnMs, mark));
  ::kill(top.pid(), SIGTERM);
  const int status = top.wait(10000);
  REQUIRE(status != -1);
  CHECK(WIFEXITED(status));
}
