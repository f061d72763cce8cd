#include "comm/config.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "comm/error.hpp"

namespace trn::comm {

namespace {

std::optional<std::string> env(const char *name) {
  const char *value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::string(value);
}

// A whole number from `low` to `high` (a multiple of `step`), or TRN_ERROR_INVALID_CONFIG naming
// the variable and every rule.
uint64_t parse_number(const char *name, const std::string &text, uint64_t low, uint64_t high,
                      uint64_t step = 1, const char *why_step = "") {
  char *end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno != 0 || value < low || value > high ||
      value % step != 0)
    fail(TRN_ERROR_INVALID_CONFIG,
         std::string(name) + "='" + text + "' is not a " +
             (step > 1 ? "multiple of " + std::to_string(step) : std::string("number")) + " from " +
             std::to_string(low) + " to " + std::to_string(high) + why_step);
  return value;
}

uint64_t required(const char *name, uint64_t low, uint64_t high) {
  const auto text = env(name);
  if (!text)
    fail(TRN_ERROR_INVALID_CONFIG,
         std::string(name) +
             " is not set: trn_comm_init_from_env needs RANK, WORLD_SIZE, MASTER_ADDR and "
             "MASTER_PORT, as torchrun sets them");
  return parse_number(name, *text, low, high);
}

uint64_t fnv1a(const std::string &text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

}  // namespace

uint64_t default_timeout_ns() {
  if (auto text = env("TRN_COMM_TIMEOUT_MS"))
    return parse_number("TRN_COMM_TIMEOUT_MS", *text, 1, 86'400'000) * 1'000'000ull;
  return 300'000'000'000ull;
}

std::optional<uint64_t> env_chunk_bytes() {
  if (auto text = env("TRN_COMM_CHUNK_BYTES"))
    return parse_number("TRN_COMM_CHUNK_BYTES", *text, 4096, 64ull << 20, 4096,
                        " (staging slots are whole pages)");
  return std::nullopt;
}

uint64_t default_chunk_bytes(bool device_links) {
  // Between devices a larger chunk pays each transfer's fixed costs (a NeuronLink hop's latency)
  // half as often: 512 KiB lowered the simulated busbw of 2 devices from 85 to 61 GB/s. Within
  // a device a chunk is copied into the peer's slot and reduced there by this host's cores while
  // its bytes are still in their caches: with 1 MiB chunks a 2-process all-reduce of 4 MiB took
  // 2.3 times as long and one of 16 MiB 1.5 times. Across hosts the chunks pipeline (the sends
  // run a chunk ahead): with one device per host, 512 KiB took 10-15% off an all-reduce of 4 and
  // 16 MiB between two hosts over TCP, against 1 MiB.
  return device_links ? 1ull << 20 : 512ull << 10;
}

uint64_t larger_default_chunk_bytes() {
  return std::max(default_chunk_bytes(true), default_chunk_bytes(false));
}

uint64_t default_ring_min_bytes() {
  if (auto text = env("TRN_COMM_RING_MIN_BYTES"))
    return parse_number("TRN_COMM_RING_MIN_BYTES", *text, 0, UINT64_MAX);
  return 256 * 1024;
}

bool send_in_place_enabled() {
  if (auto text = env("TRN_COMM_SEND_IN_PLACE"))
    return parse_number("TRN_COMM_SEND_IN_PLACE", *text, 0, 1) == 1;
  return true;
}

std::string socket_address() {
  return env("TRN_COMM_SOCKET_ADDR").value_or("127.0.0.1");
}

TorchrunEnv read_torchrun_env() {
  TorchrunEnv out;
  out.world_size = static_cast<uint32_t>(required("WORLD_SIZE", 1, 64));
  out.rank = static_cast<uint32_t>(required("RANK", 0, out.world_size - 1));
  if (env("LOCAL_RANK"))
    out.local_rank = static_cast<uint32_t>(required("LOCAL_RANK", 0, 1u << 20));
  const auto address = env("MASTER_ADDR");
  if (!address)
    fail(TRN_ERROR_INVALID_CONFIG,
         "MASTER_ADDR is not set: trn_comm_init_from_env needs RANK, "
         "WORLD_SIZE, MASTER_ADDR and MASTER_PORT, as torchrun sets them");
  uint64_t port = required("MASTER_PORT", 1, 65535);
  // torchrun's own store listens on MASTER_PORT; the communicator's rendezvous takes the next.
  if (env("TORCHELASTIC_RUN_ID")) port = port == 65535 ? 65534 : port + 1;
  if (auto text = env("TRN_COMM_PORT")) port = parse_number("TRN_COMM_PORT", *text, 1, 65535);
  out.rendezvous = {*address, static_cast<uint16_t>(port)};
  // Not the world size: ranks that disagree on it must meet, so that the rendezvous says so.
  out.token =
      fnv1a("trn-comm:" + out.rendezvous.text() + ":" + env("TORCHELASTIC_RUN_ID").value_or(""));
  return out;
}

}  // namespace trn::comm
