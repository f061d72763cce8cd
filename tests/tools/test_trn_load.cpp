// trn-load: listing a safetensors file's tensors (text and JSON), loading them into a private
// simulated device with progress and throughput, and a malformed file's message and exit code.
#include <sys/resource.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/sim_env.hpp"
#include "support/subprocess.hpp"
#include "support/temp_files.hpp"

using nlohmann::json;
using trn::test::SimEnv;
using trn::test::TempDir;

namespace {

constexpr int kTimeoutMs = 60000;

using Result = trn::test::ProgramResult;

Result trn_load(std::vector<std::string> args) {
  args.insert(args.begin(), TRN_LOAD_PATH);
  return trn::test::run_program(args, kTimeoutMs);
}

// A safetensors file: the header's length, the header, `data` bytes.
std::string write_file(const TempDir &dir, const std::string &name, const std::string &header,
                       uint64_t data) {
  std::vector<uint8_t> bytes(8);
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(header.size() >> (8 * i));
  bytes.insert(bytes.end(), header.begin(), header.end());
  bytes.resize(bytes.size() + data, 0x3c);
  const std::string path = dir.file(name);
  trn::test::Fd fd(trn::test::create_file(path, bytes));
  return path;
}

const std::string kHeader =
    R"({"__metadata__":{"format":"pt"},"embed":{"dtype":"BF16","shape":[1024,512],"data_offsets":[0,1048576]},)"
    R"("head.bias":{"dtype":"F32","shape":[7],"data_offsets":[1048576,1048604]}})";
constexpr uint64_t kData = 1048604;

json parse_json(const std::string &output) {
  const size_t start = output.find('{');
  REQUIRE(start != std::string::npos);
  return json::parse(output.substr(start));
}

}  // namespace

TEST_CASE("trn-load lists a file's tensors", "[trn-load]") {
  TempDir dir;
  const std::string path = write_file(dir, "m.safetensors", kHeader, kData);
  Result r = trn_load({path});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("embed") != std::string::npos);
  CHECK(r.output.find("[1024, 512]") != std::string::npos);
  CHECK(r.output.find("BF16") != std::string::npos);
  CHECK(r.output.find(std::to_string(8 + kHeader.size() + 1048576)) != std::string::npos);
  CHECK(r.output.find("2 tensors") != std::string::npos);
  CHECK(r.output.find("metadata format = pt") != std::string::npos);
  r = trn_load({path, "--json", "--tensor", "head.bias"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  const json doc = parse_json(r.output);
  REQUIRE(doc["tensors"].size() == 1);
  CHECK(doc["tensors"][0]["name"] == "head.bias");
  CHECK(doc["tensors"][0]["bytes"] == 28);
  CHECK(doc["tensors"][0]["file_offset"] == 8 + kHeader.size() + 1048576);
  CHECK(doc["metadata"]["format"] == "pt");
  CHECK_FALSE(doc.contains("loaded"));
}

TEST_CASE("trn-load loads tensors into a device with progress and throughput", "[trn-load]") {
  SimEnv env;
  TempDir dir;
  const std::string path = write_file(dir, "m.safetensors", kHeader, kData);
  Result r = trn_load({path, "--device", "0"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("loading: ") != std::string::npos);
  CHECK(r.output.find("(100%)") != std::string::npos);
  CHECK(r.output.find("loaded 2 tensors, 1.0 MiB in ") != std::string::npos);
  CHECK(r.output.find("/s) to device 0 core 0") != std::string::npos);
  r = trn_load({path, "--device", "0", "--tensor", "embed", "--json"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  const json doc = parse_json(r.output);
  CHECK(doc["loaded"]["bytes"] == 1048576);
  CHECK(doc["loaded"]["bytes_per_s"].get<double>() > 0);
  r = trn_load({path, "--device", "7"});
  CHECK(r.code == 2);
  CHECK(r.output.find("there is no device 7") != std::string::npos);
  r = trn_load({path, "--tensor", "nope"});
  CHECK(r.code == 2);
  CHECK(r.output.find("no tensor 'nope'") != std::string::npos);
}

TEST_CASE("trn-load refuses a malformed file with its message and exit code 1", "[trn-load]") {
  SimEnv env;
  TempDir dir;
  const std::string bad = write_file(
      dir, "bad.safetensors", R"({"w":{"dtype":"F32","shape":[16],"data_offsets":[0,16]}})", 16);
  Result r = trn_load({bad});
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK(r.output.find("trn-load: " + bad +
                      ": safetensors header: tensor 'w': shape [16] of F32 is 64 bytes but "
                      "data_offsets [0, 16] hold 16") != std::string::npos);
  r = trn_load({bad, "--json"});
  CHECK(r.code == 1);
  CHECK(parse_json(r.output)["exit_code"] == 1);
  // A message quoting bytes that are not UTF-8 is still a JSON report.
  const std::string binary =
      write_file(dir, "binary.safetensors",
                 "{\"\xff\xfe\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
  r = trn_load({binary, "--json"});
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK(parse_json(r.output)["exit_code"] == 1);
  // Cut short: the header promises more data than the file has.
  const std::string cut = write_file(dir, "cut.safetensors", kHeader, 1000);
  r = trn_load({cut, "--device", "0"});
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK(r.output.find("run past the data section") != std::string::npos);
  r = trn_load({dir.file("missing.safetensors")});
  CHECK(r.code == 2);
  CHECK(r.output.find("cannot open") != std::string::npos);
  r = trn_load({});
  CHECK(r.code == 2);
  // With --json a usage error is a JSON report too.
  r = trn_load({bad, "--bogus", "--json"});
  INFO(r.output);
  CHECK(r.code == 2);
  const json usage = parse_json(r.output);
  CHECK(usage["exit_code"] == 2);
  CHECK(usage["error"].get<std::string>().find("--bogus") != std::string::npos);
}

TEST_CASE("trn-load refuses what is not a regular file without waiting, exit code 2",
          "[trn-load]") {
  TempDir dir;
  const std::string fifo = dir.file("pipe.safetensors");
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  // No writer: opening it for reading would wait for one forever.
  Result r = trn_load({fifo});
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find("a pipe (FIFO), not a regular file") != std::string::npos);
  r = trn_load({dir.path()});
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find("a directory, not a regular file") != std::string::npos);
}

TEST_CASE("with no device trn-load says why in the words every tool uses", "[trn-load]") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "0");
  TempDir dir;
  const std::string path = write_file(dir, "m.safetensors", kHeader, kData);
  const Result r = trn_load({path, "--device", "0"});
  INFO(r.output);
  CHECK(r.code == 2);
  CHECK(r.output.find("there is no device 0 (no devices: sim driver: TRN_SIM_DEVICES=0") !=
        std::string::npos);
  // Listing needs no device.
  CHECK(trn_load({path}).code == 0);
}

TEST_CASE("trn-load names cores by id and loads a tensor named twice once", "[trn-load]") {
  SimEnv env;
  env.set("TRN_VISIBLE_CORES", "1");
  TempDir dir;
  // F64 and I64 load as trn's host dtypes; a name with a NUL is listed escaped.
  const std::string header = R"({"d":{"dtype":"F64","shape":[2],"data_offsets":[0,16]},)"
                             R"("a\u0000b":{"dtype":"I64","shape":[1],"data_offsets":[16,24]}})";
  const std::string path = write_file(dir, "w.safetensors", header, 24);
  Result r = trn_load({path});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("a\\x00b") != std::string::npos);
  CHECK(r.output.find("2 tensors, 24 B") != std::string::npos);
  r = trn_load({path, "--device", "0", "--tensor", "d", "--tensor", "d"});
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK(r.output.find("loaded 1 tensor, 16 B") != std::string::npos);
  CHECK(r.output.find("to device 0 core 1\n") != std::string::npos);
  r = trn_load({path, "--device", "0", "--core", "1"});
  CHECK(r.code == 2);
  CHECK(r.output.find("there is no core 1 (this process sees only core 0)") != std::string::npos);
  r = trn_load({path, "--core", "0"});
  CHECK(r.code == 2);
  CHECK(r.output.find("--core needs --device") != std::string::npos);
}

TEST_CASE("trn-load lists a million tensors in under four times the header's size in memory",
          "[trn-load][heavy]") {
  // 1e6 one-element tensors, an 89 MB header: a document of it took 1.3 GB.
  constexpr uint64_t kTensors = 1'000'000;
  TempDir dir;
  std::string header = "{";
  header.reserve(90'000'000);
  for (uint64_t i = 0; i < kTensors; ++i)
    header += "\"model.layers." + std::to_string(i) +
              ".weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" +
              std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]},";
  header.back() = '}';
  const uint64_t header_bytes = header.size();
  const std::string path = write_file(dir, "big.safetensors", header, 4 * kTensors);
  header = std::string();
  const Result r = trn_load({path});
  REQUIRE(r.code == 0);
  CHECK(r.output.find("1000000 tensors, 3.8 MiB") != std::string::npos);
  CHECK(r.output.find("| model.layers.999999.weight |") != std::string::npos);
  // trn-load is the only child this test process waited for: the children's peak is its own.
  rusage usage{};
  REQUIRE(getrusage(RUSAGE_CHILDREN, &usage) == 0);
  const uint64_t peak = static_cast<uint64_t>(usage.ru_maxrss) * 1024;
  INFO("peak " << peak / 1'000'000 << " MB for a header of " << header_bytes / 1'000'000 << " MB");
  CHECK(peak <= 4 * header_bytes);
}
