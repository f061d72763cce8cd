// trn-comm-test's output: nccl-tests' table (size, count, type, redop, then time, algbw and busbw
// as host figures and as simulated device figures, and #wrong), or one JSON object per row.
#pragma once

#include <string>
#include <vector>

#include "rank_bench.hpp"

namespace trn::comm_test {

struct RunInfo {
  uint32_t ranks = 1;
  uint32_t processes = 1;
  uint32_t hosts = 1;
  std::string mode;       // "threads", "processes", "torchrun"
  std::string transport;  // the communicator's: "device", "fabric (net)"
};

std::string table_text(const Settings &s, const RunInfo &info, const std::vector<Row> &rows);
// One line of JSON per row.
std::string json_lines(const Settings &s, const RunInfo &info, const std::vector<Row> &rows);

}  // namespace trn::comm_test
