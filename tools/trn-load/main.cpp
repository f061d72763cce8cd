// trn-load: lists the tensors of a safetensors file (name, dtype, shape, bytes, file offset), or
// loads all or some of them into a device's memory through queue-ordered file reads, with
// progress and throughput.
//
// Exit codes: 0 success, 1 the file is not a valid safetensors file (or changed while it was
// loaded), 2 any other error (usage, files, trn errors).
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/parse.hpp"
#include "common/read_file.hpp"
#include "tool_common/cli_parse.hpp"
#include "tool_common/device_snapshot.hpp"
#include "tool_common/json_text.hpp"
#include "tool_common/table.hpp"
#include "trn/safetensors.hpp"
#include "trn/trn.h"

namespace {

namespace st = trn::safetensors;
using json = nlohmann::ordered_json;

constexpr int kExitOk = 0;
constexpr int kExitBadFile = 1;
constexpr int kExitError = 2;

struct Options {
  std::string path;
  std::optional<uint32_t> device;
  uint32_t core = 0;
  std::vector<std::string> tensors;
  bool json = false;
};

struct ToolError {
  int code;
  std::string message;
};

void check(trn_result_t result, const std::string &what) {
  if (result != TRN_SUCCESS)
    throw ToolError{kExitError, what + ": " + trn_result_name(result) + ": " + trn_last_error()};
}

// The index-th of what a two-call enumeration lists; `hint` ends the message when there is none,
// `none` says why the list is empty.
template <typename Handle, typename List, typename None>
Handle nth(uint32_t index, const char *what, const std::string &hint, List list, None none) {
  uint32_t count = 0;
  check(list(&count, nullptr), std::string("listing ") + what + "s");
  std::vector<Handle> all(count);
  check(list(&count, all.data()), std::string("listing ") + what + "s");
  if (index >= count)
    throw ToolError{kExitError,
                    "there is no " + std::string(what) + " " + std::to_string(index) +
                        (count == 0   ? " (" + none() + ")"
                         : count == 1 ? " (this process sees only " + std::string(what) + " 0)"
                                      : " (this process sees " + std::string(what) + "s 0 to " +
                                            std::to_string(count - 1) + ")") +
                        hint};
  return all[index];
}

// A name as a terminal shows it: control characters (a NUL would end the line) escaped.
std::string printable(const std::string &name) {
  std::string out;
  for (const char c : name) {
    if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
      out += c;
      continue;
    }
    char escaped[8];
    std::snprintf(escaped, sizeof escaped, "\\x%02x", static_cast<unsigned char>(c));
    out += escaped;
  }
  return out;
}

json tensor_json(const st::TensorInfo &t, const st::Header &h) {
  return {{"name", t.name},
          {"dtype", t.dtype_name},
          {"shape", t.shape},
          {"bytes", t.bytes()},
          {"file_offset", h.data_offset + t.begin}};
}

// The listing, row by row as it is printed: nothing of its size is held (a checkpoint may list a
// million tensors).
void print_list(const st::Header &h, const std::vector<const st::TensorInfo *> &shown) {
  trn::tools::Table::print(stdout, {"tensor", "dtype", "shape", "bytes", "file offset"},
                           shown.size(), [&](size_t i) -> std::vector<std::string> {
                             const st::TensorInfo *t = shown[i];
                             return {printable(t->name), t->dtype_name, st::shape_text(t->shape),
                                     std::to_string(t->bytes()),
                                     std::to_string(h.data_offset + t->begin)};
                           });
  uint64_t total = 0;
  for (const st::TensorInfo *t : shown) total += t->bytes();
  std::printf("%zu tensor%s, %s (header %llu bytes)\n", shown.size(), shown.size() == 1 ? "" : "s",
              trn::common::format_bytes(total).c_str(),
              static_cast<unsigned long long>(h.header_bytes));
  for (const auto &[key, value] : h.metadata)
    std::printf("metadata %s = %s\n", printable(key).c_str(), printable(value).c_str());
}

// Progress on stderr, redrawn in place when it is a terminal.
void show_progress(uint64_t loaded, uint64_t total) {
  const bool tty = ::isatty(STDERR_FILENO) != 0;
  // Whole percents rounded down: 100% only once everything is in (99.7% is not done).
  const uint64_t percent =
      total
          ? static_cast<uint64_t>(100.0 * static_cast<double>(loaded) / static_cast<double>(total))
          : 100;
  std::fprintf(stderr, "%sloading: %s of %s (%llu%%)%s", tty ? "\r" : "",
               trn::common::format_bytes(loaded).c_str(), trn::common::format_bytes(total).c_str(),
               static_cast<unsigned long long>(percent),
               tty ? (loaded == total ? "\n" : "") : "\n");
}

int run(const Options &o) {
  int fd = -1;
  if (auto err = trn::common::open_regular_file(o.path, &fd))
    throw ToolError{kExitError, "cannot open '" + o.path + "': " + err->reason};
  st::Header header;
  try {
    header = st::read_header(fd);
  } catch (const st::Error &e) {
    ::close(fd);
    // Unreadable (not a regular file, an I/O error) is not malformed.
    throw ToolError{e.result() == TRN_ERROR_FILE ? kExitError : kExitBadFile,
                    o.path + ": " + e.what()};
  }
  std::vector<const st::TensorInfo *> shown;
  for (const std::string &name : o.tensors) {
    const st::TensorInfo *t = header.find(name);
    if (!t) {
      ::close(fd);
      throw ToolError{kExitError, "no tensor '" + name + "' in " + o.path};
    }
    shown.push_back(t);
  }
  if (o.tensors.empty())
    for (const st::TensorInfo &t : header.tensors) shown.push_back(&t);
  // Made only for --json: a document of a million tensors takes over a gigabyte.
  auto make_doc = [&] {
    json doc = {{"file", o.path}, {"header_bytes", header.header_bytes}};
    doc["metadata"] = header.metadata;
    doc["tensors"] = json::array();
    for (const st::TensorInfo *t : shown) doc["tensors"].push_back(tensor_json(*t, header));
    return doc;
  };
  if (!o.device) {
    ::close(fd);
    if (o.json)
      std::cout << trn::tools::json_text(make_doc(), 2) << "\n";
    else
      print_list(header, shown);
    return kExitOk;
  }
  // No device at all: the drivers' reason, in the line every tool prints.
  trn_device_t device = nth<trn_device_t>(
      *o.device, "device", " (trn-ls lists them; TRN_SIM_DEVICES sets how many)",
      [](uint32_t *n, trn_device_t *d) { return trn_device_get(n, d); },
      [] { return "no devices: " + trn::tools::no_device_reason(); });
  trn_core_t core = nth<trn_core_t>(
      o.core, "core", " (--core counts the cores TRN_VISIBLE_CORES lets this process use)",
      [&](uint32_t *n, trn_core_t *c) { return trn_core_get(device, n, c); },
      [] { return std::string("this process sees none"); });
  // Reports name the core by its id on the device, as trn-ls and trn-top do.
  trn_core_properties_t core_properties = TRN_CORE_PROPERTIES_INIT;
  check(trn_core_get_properties(core, &core_properties), "reading the core's properties");
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = core;
  desc.kind = TRN_QUEUE_KIND_COPY;
  trn_queue_t queue = nullptr;
  check(trn_queue_create(&desc, &queue), "creating a copy queue");
  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  trn_pool_t pool = nullptr;
  check(trn_pool_create(device, &pool_desc, &pool), "creating a device pool");
  st::LoadOptions options;
  options.names = o.tensors;
  if (!o.json) options.progress = show_progress;
  const auto start = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  try {
    st::Loaded loaded = st::load(fd, header, pool, queue, options);
    for (const st::LoadedTensor &t : loaded.tensors()) bytes += t.info.bytes();
  } catch (const st::Error &e) {
    ::close(fd);
    throw ToolError{e.result() == TRN_ERROR_FILE ? kExitBadFile : kExitError,
                    o.path + ": " + e.what()};
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(fd);
  const double rate = seconds > 0 ? static_cast<double>(bytes) / seconds : 0;
  if (o.json) {
    json doc = make_doc();
    doc["loaded"] = {{"device", *o.device},
                     {"core", core_properties.index},
                     {"bytes", bytes},
                     {"seconds", seconds},
                     {"bytes_per_s", rate}};
    std::cout << trn::tools::json_text(doc, 2) << "\n";
  } else {
    std::printf("loaded %zu tensor%s, %s in %.3f s (%s/s) to device %u core %u\n", shown.size(),
                shown.size() == 1 ? "" : "s", trn::common::format_bytes(bytes).c_str(), seconds,
                trn::common::format_bytes(static_cast<uint64_t>(rate)).c_str(), *o.device,
                core_properties.index);
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{
      "trn-load: list the tensors of a safetensors file, or load them into a device's memory.\n"
      "Exit codes: 0 ok, 1 not a valid safetensors file, 2 error."};
  Options o;
  app.add_option("file", o.path, "safetensors file")->required();
  app.add_option("--device", o.device, "load into this device (index); without it: list");
  app.add_option("--core", o.core,
                 "the N-th core of the device whose DMA queue loads (default 0; see "
                 "TRN_VISIBLE_CORES)");
  app.add_option("--tensor", o.tensors, "only this tensor (repeatable)")->allow_extra_args(false);
  app.add_flag("--json", o.json, "print one JSON object instead of text (no progress)");
  app.set_version_flag("--version", std::string("trn-load ") + trn_get_version_string());
  std::string usage_error;
  if (auto status = trn::tools::parse_command_line(app, "trn-load", argc, argv, &usage_error)) {
    if (*status != kExitOk && trn::tools::names_flag(argc, argv, "--json"))
      std::cout << trn::tools::json_text(json{{"error", usage_error}, {"exit_code", *status}}, 2)
                << "\n";
    return *status;
  }
  // One tensor named twice is loaded once.
  std::vector<std::string> unique;
  for (const std::string &name : o.tensors)
    if (std::find(unique.begin(), unique.end(), name) == unique.end()) unique.push_back(name);
  o.tensors = std::move(unique);
  int code = kExitOk;
  try {
    if (app.count("--core") > 0 && !o.device)
      throw ToolError{kExitError, "--core needs --device (without it trn-load only lists)"};
    code = run(o);
  } catch (const ToolError &e) {
    std::fprintf(stderr, "trn-load: %s\n", e.message.c_str());
    if (o.json)
      std::cout << trn::tools::json_text(json{{"error", e.message}, {"exit_code", e.code}}, 2)
                << "\n";
    code = e.code;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "trn-load: %s\n", e.what());
    code = kExitError;
  }
  trn_runtime_shutdown();
  return code;
}
