// trn-top (batch mode) and trn-monitor watching a process that works on two cores: the numbers
// they report, the monitor's JSON schema, the Prometheus endpoint scraped over loopback, and
// the dead process disappearing at once.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/sim_env.hpp"
#include "support/subprocess.hpp"

using nlohmann::json;
using trn::test::Child;
using trn::test::run_command;
using trn::test::SimEnv;

namespace {

std::vector<json> monitor_documents(const std::string &count = "2",
                                    const std::vector<std::string> &extra = {}) {
  std::vector<std::string> argv = {TRN_MONITOR_PATH, "-n", count, "-i", "300"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  int status = 0;
  const std::string out = run_command(argv, 20000, &status);
  INFO(out);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::vector<json> docs;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);)
    if (!line.empty() && line.front() == '{') docs.push_back(json::parse(line));
  return docs;
}

// Every document of schema_version 1 has these fields with these types.
void check_schema(const json &doc) {
  REQUIRE(doc.at("schema_version") == 1);
  REQUIRE(doc.at("trn_version").is_string());
  REQUIRE(doc.at("timestamp_unix_ns").is_number_unsigned());
  REQUIRE(doc.at("period_ns").is_number_unsigned());
  REQUIRE((doc.at("error").is_null() || doc.at("error").is_string()));
  REQUIRE(doc.at("devices").is_array());
  for (const json &device : doc.at("devices")) {
    REQUIRE(device.at("device").is_number_unsigned());
    REQUIRE(device.at("generation").is_string());
    REQUIRE(device.at("period_ns").is_number_unsigned());
    REQUIRE(device.at("error").is_null());
    const json &memory = device.at("memory");
    for (const char *key : {"total_bytes", "used_bytes", "allocated_bytes"})
      REQUIRE(memory.at(key).is_number_unsigned());
    REQUIRE(memory.at("by_category").size() == 6);
    for (const json &core : device.at("cores")) {
      REQUIRE(core.at("core").is_number_unsigned());
      REQUIRE(core.at("core_id").is_number_unsigned());
      REQUIRE((core.at("owner_pid").is_null() || core.at("owner_pid").is_number_integer()));
      for (const char *key :
           {"busy_percent", "simulated_dma_busy_percent", "commands_per_s", "dma_bytes_per_s"})
        REQUIRE(core.at(key).is_number());
      for (const char *key :
           {"commands_completed", "commands_failed", "dma_bytes", "kernels_completed",
            "kernels_faulted", "kernel_simulated_ns", "tensor_flops"})
        REQUIRE(core.at(key).is_number_unsigned());
      for (const char *group : {"engine_instructions", "engine_busy_simulated_ns"})
        for (const char *engine : {"tensor", "vector", "scalar", "gpsimd", "sync"})
          REQUIRE(core.at(group).at(engine).is_number_unsigned());
    }
    for (const json &process : device.at("processes")) {
      REQUIRE(process.at("pid").is_number_integer());
      REQUIRE(process.at("command").is_string());
      REQUIRE(process.at("neuroncore_ids").is_array());
      REQUIRE(process.at("memory_reserved_bytes").is_number_unsigned());
      REQUIRE(process.at("memory_allocated_bytes").is_number_unsigned());
      REQUIRE(process.at("memory_by_category").is_object());
      REQUIRE(process.at("error").is_null());
    }
  }
}

const json *find_process(const json &device, int pid) {
  for (const json &process : device.at("processes"))
    if (process.at("pid") == pid) return &process;
  return nullptr;
}

// GET over loopback; "" when nothing answers.
std::string http_request(uint16_t port, const std::string &method, const std::string &path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval timeout{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) == 0) {
    const std::string request = method + " " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
    (void)!write(fd, request.data(), request.size());
    char buffer[4096];
    for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;)
      response.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return response;
}

std::string http_get(uint16_t port, const std::string &path) {
  return http_request(port, "GET", path);
}

}  // namespace

TEST_CASE("trn-top and trn-monitor report a process working on two cores, then its death") {
  SimEnv env;
  Child worker({TRN_TEST_HOLDER, "--work", "0", "1"});
  REQUIRE(worker.read_line(20000) == "working " + std::to_string(worker.pid()));
  const std::string pid = std::to_string(worker.pid());

  int status = 0;
  const std::string top = run_command({TRN_TOP_PATH, "-b", "-n", "4", "-d", "300"}, 20000, &status);
  INFO(top);
  REQUIRE(WEXITSTATUS(status) == 0);
  std::istringstream lines(top);
  std::set<std::string> busy_cores;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string core, owner;
    double busy = 0;
    if (fields >> core >> owner >> busy && (core == "0" || core == "1") && owner == pid && busy > 0)
      busy_cores.insert(core);
  }
  // Both cores, each in at least one of the snapshots (a loaded machine may leave a core's
  // thread without a turn for a whole period).
  CHECK(busy_cores == std::set<std::string>{"0", "1"});
  CHECK_THAT(top, Catch::Contains("Memory  used 64 MiB / 96 GiB"));
  CHECK_THAT(top, Catch::Contains(pid + " "));

  // Each core's work shows in at least one period: a loaded machine may leave the worker's
  // thread for a core without a turn for a whole period.
  const auto docs = monitor_documents("4");
  REQUIRE(docs.size() == 4);
  for (const json &doc : docs) check_schema(doc);
  const json &device = docs.back().at("devices").at(0);
  CHECK(device.at("memory").at("used_bytes").get<uint64_t>() >= (64u << 20));
  for (int core = 0; core < 2; ++core) {
    CHECK(device.at("cores").at(core).at("owner_pid") == worker.pid());
    double busy = 0, commands = 0, dma = 0;
    for (const json &doc : docs) {
      const json &c = doc.at("devices").at(0).at("cores").at(core);
      busy = std::max(busy, c.at("busy_percent").get<double>());
      commands = std::max(commands, c.at("commands_per_s").get<double>());
      dma = std::max(dma, c.at("dma_bytes_per_s").get<double>());
    }
    INFO("core " << core);
    CHECK(busy > 0);
    CHECK(commands > 0);
    CHECK(dma > 0);
  }
  CHECK(device.at("cores").at(2).at("owner_pid").is_null());
  const json *listed = find_process(device, worker.pid());
  REQUIRE(listed != nullptr);
  CHECK(listed->at("neuroncore_ids") == json::array({0, 1}));
  CHECK(listed->at("memory_allocated_bytes") == (64u << 20));

  worker.kill(SIGKILL);
  REQUIRE(worker.wait(10000) != -1);
  const auto after = monitor_documents();
  REQUIRE(!after.empty());
  const json &gone = after.front().at("devices").at(0);
  CHECK(find_process(gone, std::stoi(pid)) == nullptr);
  CHECK(gone.at("cores").at(0).at("owner_pid").is_null());
  CHECK(gone.at("memory").at("used_bytes") == 0);
  const std::string top_after =
      run_command({TRN_TOP_PATH, "-b", "-n", "1", "-d", "100"}, 20000, &status);
  CHECK_THAT(top_after, !Catch::Contains(pid + " "));
  CHECK_THAT(top_after, Catch::Contains("(no process uses this device)"));
}

TEST_CASE("trn-monitor serves Prometheus text over loopback and writes a textfile") {
  SimEnv env;
  const uint16_t port = trn::test::free_port();
  // Runs until the test ends it: a slow answer must not meet a monitor that already left.
  Child monitor(
      {TRN_MONITOR_PATH, "-n", "100000", "-i", "200", "--prometheus", std::to_string(port)});
  REQUIRE(!monitor.read_line(20000).empty());  // the first document: the endpoint is up
  const std::string metrics = http_get(port, "/metrics");
  INFO(metrics);
  CHECK_THAT(metrics, Catch::StartsWith("HTTP/1.1 200 OK"));
  CHECK_THAT(metrics, Catch::Contains("text/plain; version=0.0.4"));
  CHECK_THAT(metrics, Catch::Contains("\ntrn_up 1\n"));
  CHECK_THAT(metrics, Catch::Contains("# TYPE trn_core_busy_ratio gauge"));
  CHECK_THAT(metrics, Catch::Contains("trn_core_busy_ratio{device=\"0\",core=\"7\"} 0"));
  CHECK_THAT(metrics, Catch::Contains("trn_device_memory_total_bytes{device=\"0\"} 103079215104"));
  CHECK_THAT(http_get(port, "/other"), Catch::StartsWith("HTTP/1.1 404"));
  CHECK_THAT(http_get(port, "/metrics?name[]=trn_up"), Catch::StartsWith("HTTP/1.1 200 OK"));
  const std::string post = http_request(port, "POST", "/metrics");
  CHECK_THAT(post, Catch::StartsWith("HTTP/1.1 405"));
  CHECK_THAT(post, Catch::Contains("\r\nAllow: GET, HEAD\r\n"));
  const std::string head = http_request(port, "HEAD", "/metrics");
  CHECK_THAT(head, Catch::StartsWith("HTTP/1.1 200 OK"));
  CHECK_THAT(head, !Catch::Contains("trn_up"));  // the headers alone
  monitor.kill(SIGTERM);
  CHECK(monitor.wait(10000) != -1);

  const std::string textfile = env.root() + "/trn.prom";
  monitor_documents("1", {"--prometheus-textfile", textfile});
  std::ifstream in(textfile);
  std::stringstream text;
  text << in.rdbuf();
  CHECK_THAT(text.str(), Catch::Contains("trn_up 1"));
}

TEST_CASE("a malformed TRN_LOG_LEVEL is reported when the runtime starts") {
  SimEnv env;
  env.set("TRN_LOG_LEVEL", "loud");
  int status = 0;
  const std::string ls = run_command({TRN_LS_PATH}, 20000, &status);
  CHECK(WEXITSTATUS(status) == 0);
  CHECK_THAT(ls, Catch::Contains("TRN_LOG_LEVEL='loud' is not a level"));
}

TEST_CASE("no device and unreadable state give the same one line in every tool") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "0");
  int status = 0;
  const std::string top = run_command({TRN_TOP_PATH, "-b", "-n", "1", "-d", "100"}, 20000, &status);
  CHECK_THAT(top, Catch::Contains("no devices: sim driver: TRN_SIM_DEVICES=0"));
  const auto docs = monitor_documents("1");
  REQUIRE(!docs.empty());
  CHECK(docs.front().at("devices").empty());
  CHECK_THAT(docs.front().at("no_device_reason").get<std::string>(),
             Catch::Contains("sim driver: TRN_SIM_DEVICES=0"));
  const std::string ls = run_command({TRN_LS_PATH}, 20000, &status);
  CHECK_THAT(ls, Catch::Contains("no devices: sim driver: TRN_SIM_DEVICES=0"));
  // A device asked for by number does not exist: exit 2, with the reason.
  const std::string one =
      run_command({TRN_TOP_PATH, "-b", "-n", "1", "-d", "100", "--device", "0"}, 20000, &status);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK_THAT(one, Catch::Contains("there is no device 0 (no devices: sim driver"));

  env.set("TRN_SIM_DEVICES", nullptr);
  env.set("TRN_VISIBLE_CORES", "x");
  const std::string reason = "TRN_VISIBLE_CORES='x' is malformed";
  // Unreadable: the whole reason, wrapped rather than cut at the width, and exit status 1.
  const std::string narrow =
      run_command({TRN_TOP_PATH, "-b", "-n", "1", "-d", "100", "-w", "40"}, 20000, &status);
  CHECK(WEXITSTATUS(status) == 1);
  std::string joined = narrow;
  std::replace(joined.begin(), joined.end(), '\n', ' ');
  CHECK_THAT(joined, Catch::Contains(reason));
  const auto bad = monitor_documents("1");
  REQUIRE(!bad.empty());
  CHECK_THAT(bad.front().at("error").get<std::string>(), Catch::Contains(reason));
  CHECK_THAT(run_command({TRN_LS_PATH}, 20000, &status), Catch::Contains(reason));
}

namespace {

// The per-core rows of trn-top's core table: core id, then BUSY%, UTIL% and DMA% ("-" = -1).
struct CoreRow {
  uint32_t core = 0;
  double busy = -1, utilization = -1, dma = -1;
};

double figure(const std::string &text) {
  return text == "-" ? -1 : std::stod(text);
}

std::vector<CoreRow> core_rows(const std::string &top) {
  std::vector<CoreRow> rows;
  std::istringstream lines(top);
  for (std::string line; std::getline(lines, line);) {
    const size_t open = line.find('['), close = line.find(']');
    if (line.empty() || !std::isdigit(static_cast<unsigned char>(line[0])) ||
        open == std::string::npos || close == std::string::npos)
      continue;
    std::istringstream before(line.substr(0, open)), after(line.substr(close + 1));
    std::string owner, busy, utilization, dma;
    CoreRow row;
    if (!(before >> row.core >> owner >> busy) || !(after >> utilization >> dma)) continue;
    row.busy = figure(busy);
    row.utilization = figure(utilization);
    row.dma = figure(dma);
    rows.push_back(row);
  }
  return rows;
}

int exit_code(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("trn-top -b shows every device, --device only one") {
  SimEnv env;
  env.set("TRN_SIM_DEVICES", "2");
  int status = 0;
  const std::string all = run_command({TRN_TOP_PATH, "-b", "-n", "2", "-d", "100"}, 20000, &status);
  INFO(all);
  CHECK(exit_code(status) == 0);
  CHECK_THAT(all, Catch::Contains("device 0/2") && Catch::Contains("device 1/2"));
  std::set<uint32_t> ids;
  for (const CoreRow &row : core_rows(all)) ids.insert(row.core);
  CHECK(ids.size() == 16);  // physical ids 0-15 of both devices

  const std::string one =
      run_command({TRN_TOP_PATH, "-b", "-n", "1", "-d", "100", "--device", "1"}, 20000, &status);
  INFO(one);
  CHECK(exit_code(status) == 0);
  CHECK_THAT(one, Catch::Contains("device 1/2") && !Catch::Contains("device 0/2"));
  const auto rows = core_rows(one);
  REQUIRE(rows.size() == 8);
  CHECK(rows.front().core == 8);

  const std::string bad =
      run_command({TRN_TOP_PATH, "-b", "-n", "1", "-d", "100", "--device", "2"}, 20000, &status);
  CHECK(exit_code(status) != 0);
  CHECK_THAT(bad, Catch::Contains("there is no device 2 (devices: 0-1)"));
}

TEST_CASE("trn-top and trn-monitor watch every core whatever TRN_VISIBLE_CORES says") {
  SimEnv env;
  env.set("TRN_VISIBLE_CORES", "3");
  int status = 0;
  const std::string top = run_command({TRN_TOP_PATH, "-b", "-n", "1", "-d", "100"}, 20000, &status);
  INFO(top);
  std::vector<uint32_t> ids;
  for (const CoreRow &row : core_rows(top)) ids.push_back(row.core);
  CHECK(ids == std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7});
  const auto docs = monitor_documents("1");
  REQUIRE(docs.size() == 1);
  check_schema(docs.front());
  CHECK(docs.front().at("devices").at(0).at("cores").size() == 8);
  CHECK_THAT(run_command({TRN_LS_PATH}, 20000, &status), Catch::Contains("| 0-7 "));
}

TEST_CASE("trn-top's figures are percentages of the period, at most 100") {
  SimEnv env;
  Child worker({TRN_TEST_HOLDER, "--work", "0", "1"});
  REQUIRE(worker.read_line(20000) == "working " + std::to_string(worker.pid()));
  int status = 0;
  const std::string top = run_command({TRN_TOP_PATH, "-b", "-n", "3", "-d", "100"}, 20000, &status);
  INFO(top);
  CHECK(exit_code(status) == 0);
  CHECK_THAT(top, !Catch::Contains("period 0.0") && !Catch::Contains("first sample"));
  const auto rows = core_rows(top);
  CHECK(rows.size() == 24);
  for (const CoreRow &row : rows) {
    INFO("core " << row.core);
    for (double value : {row.busy, row.utilization, row.dma}) {
      CHECK(value >= 0);
      CHECK(value <= 100);
    }
  }
  const std::string engines =
      run_command({TRN_TOP_PATH, "-b", "-n", "1", "-d", "100", "--engines"}, 20000, &status);
  CHECK_THAT(engines, Catch::Contains("TENSOR%") && Catch::Contains("GPSIMD%") &&
                          Catch::Contains("TFLOP/s"));
}

TEST_CASE("trn-monitor: an unwritable textfile is an error") {
  SimEnv env;
  const std::string path = env.root() + "/no-such-directory/trn.prom";
  int status = 0;
  const std::string out = run_command(
      {TRN_MONITOR_PATH, "-n", "3", "-i", "100", "--prometheus-textfile", path}, 20000, &status);
  INFO(out);
  CHECK(exit_code(status) == 1);
  CHECK_THAT(out, Catch::Contains("cannot write " + path + ".tmp: No such file or directory"));
  CHECK_THAT(out, !Catch::Contains("schema_version"));  // it stops before the first document
}

TEST_CASE("trn-monitor answers a scrape while idle clients hold connections open") {
  SimEnv env;
  const uint16_t port = trn::test::free_port();
  Child monitor({TRN_MONITOR_PATH, "-n", "100", "-i", "200", "--prometheus", std::to_string(port)});
  REQUIRE(!monitor.read_line(20000).empty());
  std::vector<int> idle;
  for (int i = 0; i < 8; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof address) == 0);
    idle.push_back(fd);  // connected, and silent
  }
  // http_get gives up after 5 s; one idle client used to cost the others 1 s each.
  const std::string metrics = http_get(port, "/metrics");
  for (int fd : idle) close(fd);
  CHECK_THAT(metrics, Catch::StartsWith("HTTP/1.1 200 OK") && Catch::Contains("\ntrn_up 1\n"));
  monitor.kill(SIGTERM);
  CHECK(monitor.wait(10000) != -1);
}
