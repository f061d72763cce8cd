#include "report.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "tool_common/json_text.hpp"
#include "tool_common/table.hpp"

namespace trn::comm_test {

namespace {

// GB/s (1e9 bytes per second, as nccl-tests prints) of `bytes` in `us` microseconds.
double gbps(uint64_t bytes, double us) {
  return us > 0 ? static_cast<double>(bytes) / (us * 1e3) : 0;
}

const char *redop_text(const Settings &s) {
  return s.op == Op::all_reduce || s.op == Op::reduce_scatter ? trn_comm_red_op_name(s.redop) : "-";
}

// 0 hosts: joined by hand-set torchrun variables without LOCAL_WORLD_SIZE, so not known.
std::string hosts_text(uint32_t hosts) {
  if (hosts == 0) return "hosts unknown";
  return fmt::format("{} host{}", hosts, hosts == 1 ? "" : "s");
}

}  // namespace

std::string table_text(const Settings &s, const RunInfo &info, const std::vector<Row> &rows) {
  const double factor = bus_factor(s.op, info.ranks);
  tools::Table table({"size(B)", "count", "type", "redop", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
                      "sim time(us)", "sim algbw(GB/s)", "sim busbw(GB/s)", "#wrong"});
  uint64_t wrong = 0;
  for (const Row &r : rows) {
    const double alg = gbps(r.shape.size_bytes, r.host_us);
    const double sim_alg = gbps(r.shape.size_bytes, r.device_us);
    table.add_row({std::to_string(r.shape.size_bytes), std::to_string(r.shape.count),
                   trn_dtype_name(s.dtype), redop_text(s), fmt::format("{:.1f}", r.host_us),
                   fmt::format("{:.3f}", alg), fmt::format("{:.3f}", alg * factor),
                   fmt::format("{:.1f}", r.device_us), fmt::format("{:.2f}", sim_alg),
                   fmt::format("{:.2f}", sim_alg * factor), std::to_string(r.wrong)});
    wrong += r.wrong;
  }
  std::string out = fmt::format(
      "# {} on {} rank{} ({}, {} process{}, {}, transport {}), {} warm-up and {} timed "
      "iterations per size\n"
      "# time: host P50 of the slowest rank, enqueue to completion, operations back to back; "
      "sim: simulated device time on the ranks' queues (P50 of up to 20 more operations)\n",
      op_name(s.op), info.ranks, info.ranks == 1 ? "" : "s", info.mode, info.processes,
      info.processes == 1 ? "" : "es", hosts_text(info.hosts), info.transport, s.warmup, s.iters);
  out += table.render();
  out += fmt::format("# {} wrong element{}\n", wrong, wrong == 1 ? "" : "s");
  return out;
}

std::string json_lines(const Settings &s, const RunInfo &info, const std::vector<Row> &rows) {
  const double factor = bus_factor(s.op, info.ranks);
  std::string out;
  for (const Row &r : rows) {
    const double alg = gbps(r.shape.size_bytes, r.host_us);
    const double sim_alg = gbps(r.shape.size_bytes, r.device_us);
    nlohmann::ordered_json j = {{"op", op_name(s.op)},
                                {"ranks", info.ranks},
                                {"processes", info.processes},
                                {"mode", info.mode},
                                {"hosts", info.hosts},
                                {"transport", info.transport},
                                {"size", r.shape.size_bytes},
                                {"count", r.shape.count},
                                {"type", trn_dtype_name(s.dtype)},
                                {"redop", redop_text(s)},
                                {"time_us", r.host_us},
                                {"algbw_gbps", alg},
                                {"busbw_gbps", alg * factor},
                                {"sim_time_us", r.device_us},
                                {"sim_algbw_gbps", sim_alg},
                                {"sim_busbw_gbps", sim_alg * factor},
                                {"wrong", r.wrong}};
    out += trn::tools::json_text(j) + "\n";
  }
  return out;
}

}  // namespace trn::comm_test
