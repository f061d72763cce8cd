// trn-run: run a kernel binary or a program on a NeuronCore with inputs from numpy .npy files,
// write its outputs as .npy files, compare them with expected arrays and report what the launch did
// (simulated time, per-engine activity, MFU, DMA). A kernel test harness in any language can
// drive it: write .npy files, run trn-run, read the exit code (docs/trn-run.md).
//
// Exit codes: 0 success, 1 an --expect comparison failed, 2 an error (usage, files, any trn
// error), 3 the kernel faulted on the device.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/parse.hpp"
#include "common/read_file.hpp"
#include "tool_common/cli_checks.hpp"
#include "tool_common/cli_parse.hpp"
#include "tool_common/device_snapshot.hpp"
#include "tool_common/json_text.hpp"
#include "tool_common/table.hpp"
#include "trn-run/compare.hpp"
#include "trn-run/elements.hpp"
#include "trn-run/npy.hpp"
#include "trn-run/scalar_value.hpp"
#include "trn/trn.h"

namespace {

using json = nlohmann::ordered_json;  // keys in the order written
namespace npy = trn::tools::npy;

constexpr int kExitOk = 0;
constexpr int kExitMismatch = 1;
constexpr int kExitError = 2;
constexpr int kExitFault = 3;
constexpr int kSchemaVersion = 1;

// Every failure of the run: the message and the exit code it leads to.
struct RunError {
  int code;
  std::string message;
  json fault;  // the fault record for kExitFault, else null
};

std::string format(const char *pattern, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char *pattern, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, pattern);
  std::vsnprintf(buffer, sizeof buffer, pattern, args);
  va_end(args);
  return buffer;
}

[[noreturn]] void fail(const std::string &message) {
  throw RunError{kExitError, message, nullptr};
}

void check(trn_result_t result, const std::string &what) {
  if (result != TRN_SUCCESS) fail(what + ": " + trn_result_name(result) + ": " + trn_last_error());
}

// ------------------------------------------------------------------------------------------------
// Dtypes: the kernel's, numpy's, and values as doubles for comparisons.

using trn::run::DTypeInfo;
using trn::run::Elem;
using trn::run::elem_of;
using trn::run::file_elem;
using trn::run::is_raw_bits_dtype;

const DTypeInfo &dtype_info(trn_dtype_t dtype) {
  if (const DTypeInfo *info = trn::run::find_dtype_info(dtype)) return *info;
  fail(format("the kernel has an argument of unknown dtype %d", static_cast<int>(dtype)));
}

// ------------------------------------------------------------------------------------------------
// Kernel arguments and the files bound to them.

std::vector<uint64_t> arg_shape(const trn_kernel_arg_t &arg) {
  return std::vector<uint64_t>(arg.shape, arg.shape + std::min(arg.rank, 8u));
}

const char *direction_name(trn_arg_direction_t d) {
  return d == TRN_ARG_IN ? "in" : d == TRN_ARG_OUT ? "out" : "inout";
}

// How to re-save a .npy file with the dtype an argument needs.
std::string how_to_convert(const std::string &path, trn_dtype_t dtype) {
  const std::string name = dtype_info(dtype).numpy_name;
  const bool ml = is_raw_bits_dtype(dtype);  // bf16 and fp8 types come from ml_dtypes
  return std::string("convert it with numpy: python3 -c \"import numpy as np") +
         (ml ? ", ml_dtypes" : "") + "; np.save('" + path + "', np.load('" + path + "').astype(" +
         (ml ? "ml_dtypes." + name : "'" + name + "'") + "))\"";
}

// "f32[128,512]"
std::string describe_type(const trn_kernel_arg_t &arg) {
  std::string s = std::string(dtype_info(arg.dtype).name) + "[";
  for (uint32_t i = 0; i < arg.rank && i < TRN_KERNEL_MAX_RANK; ++i)
    s += (i ? "," : "") + std::to_string(arg.shape[i]);
  return s + "]";
}

// "a (in f32[128,512])", "alpha (scalar f32)"
std::string describe_arg(const trn_kernel_arg_t &arg) {
  if (arg.kind == TRN_ARG_KIND_SCALAR)
    return std::string(arg.name) + " (scalar " + dtype_info(arg.dtype).name + ")";
  return std::string(arg.name) + " (" + direction_name(arg.direction) + " " + describe_type(arg) +
         ")";
}

std::string describe_file(const npy::Array &a) {
  return "'" + a.descr + "' " + npy::format_shape(a.shape);
}

// NAME=FILE (or NAME=VALUE) pairs of one option, checked against the kernel's arguments.
std::map<std::string, std::string> parse_bindings(const std::vector<std::string> &values,
                                                  const char *option,
                                                  const char *value_word = "FILE.npy") {
  std::map<std::string, std::string> out;
  for (const std::string &value : values) {
    const size_t eq = value.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == value.size())
      fail(format("%s '%s': expected NAME=%s", option, value.c_str(), value_word));
    const std::string name = value.substr(0, eq);
    if (!out.emplace(name, value.substr(eq + 1)).second)
      fail(format("%s %s is given twice", option, name.c_str()));
  }
  return out;
}

npy::Array read_npy(const std::string &option, const std::string &name, const std::string &path) {
  npy::Array array;
  if (auto why = npy::read_file(path, array))
    fail(option + " " + name + ": cannot read " + path + ": " + *why);
  return array;
}

// JSON has no NaN or infinity: strings for those.
json number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

// ------------------------------------------------------------------------------------------------
// The run.

struct Options {
  std::string kernel_path;
  uint32_t device = 0, core = 0;
  std::vector<std::string> ins, outs, expects, scalars;
  std::string out_dir, profile_path;
  double rtol = 1e-5, atol = 1e-8;
  bool json = false;
  uint32_t repeat = 1;
  double timeout_s = 600;
};

// Set when a launch outlived --timeout: it is still running, and destroying its queue (or
// shutting the runtime down) would wait for it. The tool then reports and exits without either.
bool g_launch_stuck = false;

// Handles released in reverse order of creation, whatever way the run ends (but a stuck launch).
struct Resources {
  trn_kernel_t kernel = nullptr;
  trn_program_t program = nullptr;
  trn_tensor_set_t inputs = nullptr, outputs = nullptr;
  trn_pool_t pool = nullptr;
  std::vector<trn_mem_t> mems;
  trn_queue_t queue = nullptr;
  trn_profile_t profile = nullptr;
  ~Resources() {
    if (g_launch_stuck) return;  // the process ends next; its memory and cores go with it
    trn_queue_destroy(queue);
    for (trn_mem_t mem : mems) trn_mem_free(mem);
    trn_pool_destroy(pool);
    if (profile) trn_profile_destroy(profile);
    trn_kernel_destroy(kernel);
    trn_tensor_set_destroy(inputs);
    trn_tensor_set_destroy(outputs);
    trn_program_destroy(program);
  }
};

trn_device_t pick_device(uint32_t index) {
  uint32_t count = 0;
  check(trn_device_get(&count, nullptr), "listing devices");
  std::vector<trn_device_t> devices(count);
  check(trn_device_get(&count, devices.data()), "listing devices");
  devices.resize(count);
  if (devices.empty()) fail("no devices: " + trn::tools::no_device_reason());
  if (index >= devices.size())
    fail(format("there is no device %u (devices: 0-%zu)", index, devices.size() - 1));
  return devices[index];
}

// --core N is the N-th core this process may use (as with CUDA_VISIBLE_DEVICES: with
// TRN_VISIBLE_CORES=3, --core 0 is core id 3); reports keep the physical ids.
trn_core_t pick_core(trn_device_t device, uint32_t index, trn_core_properties_t *properties) {
  uint32_t count = 0;
  check(trn_core_get(device, &count, nullptr), "listing cores");
  std::vector<trn_core_t> cores(count);
  check(trn_core_get(device, &count, cores.data()), "listing cores");
  cores.resize(count);
  if (index < cores.size()) {
    check(trn_core_get_properties(cores[index], properties), "reading core properties");
    return cores[index];
  }
  if (cores.empty())
    fail(
        format("core %u of the device is not visible to this process: it sees no core of this "
               "device (TRN_VISIBLE_CORES or NEURON_RT_VISIBLE_CORES; trn-ls shows the core ids)",
               index));
  fail(
      format("core %u of the device is not visible to this process: it sees %zu core%s of "
             "this device, --core 0-%zu (TRN_VISIBLE_CORES or NEURON_RT_VISIBLE_CORES)",
             index, cores.size(), cores.size() == 1 ? "" : "s", cores.size() - 1));
}

// After TRN_ERROR_CORE_BUSY: which --core values are free now.
std::string free_cores_hint(trn_device_t device) {
  uint32_t count = 0;
  trn_core_get(device, &count, nullptr);
  std::vector<trn_core_t> cores(count);
  trn_core_get(device, &count, cores.data());
  std::vector<uint32_t> free;
  for (uint32_t i = 0; i < count && i < cores.size(); ++i) {
    trn_process_info_t owner = TRN_PROCESS_INFO_INIT;
    if (trn_core_get_owner(cores[i], &owner) == TRN_SUCCESS && owner.pid == 0) free.push_back(i);
  }
  return free.empty() ? "; every core this process sees is in use"
                      : "; to use another core, pass --core " +
                            trn::common::format_index_list(free) + " (free now)";
}

json fault_json(const trn_queue_fault_t &f) {
  return {{"result", trn_result_name(f.result)},
          {"command", f.command},
          {"sequence", f.sequence},
          {"kernel", f.kernel},
          {"engine", f.engine},
          {"instruction", f.instruction},
          {"source_line", f.source_line},
          {"opcode", f.opcode},
          {"reason", f.reason}};
}

// After a failed trn_queue_finish: the fault record as an error.
[[noreturn]] void fail_queue(trn_queue_t queue, trn_result_t result, double timeout_s) {
  if (result == TRN_TIMEOUT) {
    g_launch_stuck = true;
    fail(format("the launch did not complete within %g s (--timeout)", timeout_s));
  }
  trn_queue_fault_t f = TRN_QUEUE_FAULT_INIT;
  if (trn_queue_get_fault(queue, &f) != TRN_SUCCESS || f.result == TRN_SUCCESS)
    check(result, "waiting for the launch");
  const bool kernel_fault = (f.result >= 400 && f.result < 500) || f.kernel[0] != '\0';
  std::string message =
      format("%s: %s", kernel_fault ? "kernel fault" : "launch failed", trn_result_name(f.result));
  if (f.kernel[0]) message += format(" in kernel '%s'", f.kernel);
  if (f.engine[0]) message += format(", engine %s", f.engine);
  if (f.engine[0] || f.opcode[0]) {
    message += format(", instruction %u", f.instruction);
    if (f.opcode[0]) message += format(" (%s)", f.opcode);
  }
  if (f.source_line) message += format(", source line %u", f.source_line);
  message += std::string(": ") + f.reason;
  throw RunError{kernel_fault ? kExitFault : kExitError, message, fault_json(f)};
}

// Assembly text rather than a kernel binary: a .s name, or printable text with a directive.
bool looks_like_assembly(const std::string &path, const std::vector<std::byte> &bytes) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".s" || ext == ".S" || ext == ".asm") return true;
  const std::string_view head(reinterpret_cast<const char *>(bytes.data()),
                              std::min<size_t>(bytes.size(), 4096));
  if (head.find('\0') != std::string_view::npos) return false;
  return head.find(".kernel") != std::string_view::npos ||
         head.find(".engine") != std::string_view::npos;
}

// A program (trn_program_load) rather than a kernel: the ELF type trn gives programs (0xFE50, at
// offset 16 of the header; docs/programs.md).
bool is_program_image(const std::vector<std::byte> &bytes) {
  return bytes.size() >= 18 && bytes[0] == std::byte{0x7f} && bytes[16] == std::byte{0x50} &&
         bytes[17] == std::byte{0xFE};
}

// Programs carry their weights: allowed far larger than kernels.
constexpr uint64_t kMaxProgramFileBytes = uint64_t{64} << 30;

// The first bytes of a file, enough to tell a program from a kernel (empty if unreadable: the
// full read then says why).
std::vector<std::byte> file_head(const std::string &path) {
  // Only a regular file: opening a FIFO would wait for a writer, /dev/zero never ends.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return {};
  std::vector<std::byte> head(64);
  std::ifstream in(path, std::ios::binary);
  in.read(reinterpret_cast<char *>(head.data()), static_cast<std::streamsize>(head.size()));
  head.resize(in ? head.size() : static_cast<size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  return head;
}

// The kernel binary's or program's bytes: a regular file within the limit of its kind, and not
// assembly source.
std::vector<std::byte> read_kernel_file(const std::string &path) {
  std::vector<std::byte> bytes;
  const uint64_t limit =
      is_program_image(file_head(path)) ? kMaxProgramFileBytes : trn::common::kMaxKernelFileBytes;
  if (auto err = trn::common::read_regular_file(path, limit, bytes))
    fail("cannot read kernel file " + path + ": " + err->reason);
  const bool elf = bytes.size() >= 4 && bytes[0] == std::byte{0x7f} && bytes[1] == std::byte{'E'} &&
                   bytes[2] == std::byte{'L'} && bytes[3] == std::byte{'F'};
  if (!elf && looks_like_assembly(path, bytes)) {
    const std::string binary = std::filesystem::path(path).replace_extension(".trnk").string();
    fail("kernel file " + path + " is assembly source, not a kernel binary: assemble it with " +
         "trn-as first (trn-as " + path + " -o " + binary + ", then trn-run " + binary + ")");
  }
  return bytes;
}

struct Report {
  json doc;
  std::string text;
  int code = kExitOk;
};

std::string us(uint64_t ns) {
  return format("%.3f", static_cast<double>(ns) / 1000.0);
}

// What trn-run runs: a kernel, or a program whose external tensors are bound as a kernel's
// tensor arguments are.
struct Target {
  bool program = false;
  trn_kernel_properties_t properties = TRN_KERNEL_PROPERTIES_INIT;
  std::vector<trn_kernel_arg_t> args;
  const char *what() const { return program ? "program" : "kernel"; }
  const char *unit() const { return program ? "tensor" : "argument"; }
};

// The command line's NAME=... pairs, by option.
struct Bindings {
  std::map<std::string, std::string> ins, outs, expects, scalars;
};

Bindings parse_all_bindings(const Options &o) {
  return {parse_bindings(o.ins, "--in"), parse_bindings(o.outs, "--out"),
          parse_bindings(o.expects, "--expect"), parse_bindings(o.scalars, "--scalar", "VALUE")};
}

// Loads the program's tensors as arguments. Loaded from its file, so that the safetensors files
// its constants name are found beside it.
void load_program(const Options &o, const Bindings &b, trn_device_t device, Target &t,
                  Resources &r) {
  check(trn_program_load_file(device, o.kernel_path.c_str(), &r.program),
        "loading program " + o.kernel_path);
  trn_program_properties_t pp = TRN_PROGRAM_PROPERTIES_INIT;
  check(trn_program_get_properties(r.program, &pp), "reading the program's properties");
  std::snprintf(t.properties.name, sizeof t.properties.name, "%s", pp.name);
  uint32_t count = 0;
  check(trn_program_get_tensors(r.program, &count, nullptr), "listing the program's tensors");
  std::vector<trn_program_tensor_t> tensors(count, TRN_PROGRAM_TENSOR_INIT);
  check(trn_program_get_tensors(r.program, &count, tensors.data()),
        "listing the program's tensors");
  for (uint32_t i = 0; i < count; ++i) {
    trn_kernel_arg_t arg = TRN_KERNEL_ARG_INIT;
    std::snprintf(arg.name, sizeof arg.name, "%s", tensors[i].name);
    arg.dtype = tensors[i].dtype;
    arg.direction = tensors[i].direction;
    arg.rank = tensors[i].rank;
    std::copy(tensors[i].shape, tensors[i].shape + tensors[i].rank, arg.shape);
    arg.bytes = tensors[i].bytes;
    arg.kind = TRN_ARG_KIND_TENSOR;
    t.args.push_back(arg);
  }
  if (!b.scalars.empty())
    fail("--scalar: a program has no scalar arguments (its launches carry their own)");
  if (!o.profile_path.empty())
    fail(
        "--profile: profiles record kernel launches; run the program's kernels one by one to "
        "trace them");
}

void load_kernel(const Options &o, const std::vector<std::byte> &image, trn_device_t device,
                 Target &t, Resources &r) {
  check(trn_kernel_load(device, image.data(), image.size(), &r.kernel),
        "loading kernel " + o.kernel_path);
  check(trn_kernel_get_properties(r.kernel, &t.properties), "reading the kernel's properties");
  uint32_t arg_count = 0;
  check(trn_kernel_get_args(r.kernel, &arg_count, nullptr), "listing the kernel's arguments");
  t.args.assign(arg_count, TRN_KERNEL_ARG_INIT);
  check(trn_kernel_get_args(r.kernel, &arg_count, t.args.data()), "listing the kernel's arguments");
  t.args.resize(std::min<size_t>(arg_count, t.args.size()));
}

Target load_target(const Options &o, const Bindings &b, const std::vector<std::byte> &image,
                   trn_device_t device, Resources &r) {
  Target t;
  t.program = is_program_image(image);
  if (t.program)
    load_program(o, b, device, t, r);
  else
    load_kernel(o, image, device, t, r);
  return t;
}

// The argument a name given on the command line names: it must be one.
const trn_kernel_arg_t &find_arg(const Target &t, const std::string &name, const char *option) {
  for (const auto &arg : t.args)
    if (name == arg.name) return arg;
  std::string list;
  for (const auto &arg : t.args) list += (list.empty() ? "" : ", ") + describe_arg(arg);
  fail(format("%s %s: %s '%s' has no %s '%s'; its %ss: %s", option, name.c_str(), t.what(),
              t.properties.name, t.unit(), name.c_str(), t.unit(),
              list.empty() ? "none" : list.c_str()));
}

// Every name given is an argument of the kind and direction its option takes.
void check_bindings(const Target &t, const Bindings &b) {
  for (const auto &[name, path] : b.ins) {
    if (find_arg(t, name, "--in").kind == TRN_ARG_KIND_SCALAR)
      fail("--in " + name + ": argument " + describe_arg(find_arg(t, name, "--in")) +
           " is a scalar; give its value with --scalar " + name + "=VALUE");
    if (find_arg(t, name, "--in").direction == TRN_ARG_OUT)
      fail("--in " + name + ": argument " + describe_arg(find_arg(t, name, "--in")) +
           " is an output; --in is for in and inout arguments");
  }
  for (const auto &[name, text] : b.scalars)
    if (find_arg(t, name, "--scalar").kind != TRN_ARG_KIND_SCALAR)
      fail("--scalar " + name + ": argument " + describe_arg(find_arg(t, name, "--scalar")) +
           " is a tensor; give it a file with --in " + name + "=FILE.npy");
}

// Scalar arguments: each needs a value of its dtype. Indexed by argument.
std::vector<trn_scalar_t> parse_scalars(const Target &t, const Bindings &b) {
  std::vector<trn_scalar_t> values(t.args.size());
  for (size_t i = 0; i < t.args.size(); ++i) {
    if (t.args[i].kind != TRN_ARG_KIND_SCALAR) continue;
    auto it = b.scalars.find(t.args[i].name);
    if (it == b.scalars.end())
      fail(format("argument %s needs a value: --scalar %s=VALUE", describe_arg(t.args[i]).c_str(),
                  t.args[i].name));
    if (auto why = trn::run::parse_scalar(it->second, t.args[i].dtype, &values[i]))
      fail("--scalar " + it->first + ": " + *why);
  }
  return values;
}

// --out and --expect name arguments the kernel writes.
void check_outputs_named(const Target &t, const Bindings &b) {
  for (const auto *files : {&b.outs, &b.expects}) {
    const char *option = files == &b.outs ? "--out" : "--expect";
    for (const auto &[name, path] : *files)
      if (find_arg(t, name, option).direction == TRN_ARG_IN)
        fail(std::string(option) + " " + name + ": argument " +
             describe_arg(find_arg(t, name, option)) +
             " is an input; only out and inout arguments are written by the kernel");
  }
}

// Inputs: present, with the argument's dtype and shape. Indexed by argument.
std::vector<npy::Array> read_inputs(const Target &t, const Bindings &b) {
  std::vector<npy::Array> inputs(t.args.size());
  for (size_t i = 0; i < t.args.size(); ++i) {
    const trn_kernel_arg_t &arg = t.args[i];
    if (arg.direction == TRN_ARG_OUT || arg.kind == TRN_ARG_KIND_SCALAR) continue;
    auto it = b.ins.find(arg.name);
    if (it == b.ins.end())
      fail(format("argument %s needs an input: --in %s=FILE.npy", describe_arg(arg).c_str(),
                  arg.name));
    npy::Array a = read_npy("--in", arg.name, it->second);
    const auto elem = file_elem(a.dtype, arg.dtype);
    const bool same_type =
        elem && *elem == elem_of(arg.dtype) && a.dtype.itemsize == dtype_info(arg.dtype).size;
    const bool same_shape = a.shape == arg_shape(arg);
    if (!same_type || !same_shape) {
      std::string want = std::string("'") + dtype_info(arg.dtype).numpy_name + "'";
      if (arg.dtype == TRN_DTYPE_BF16) want += " (or '<u2' bit patterns)";
      if (arg.dtype == TRN_DTYPE_FP8_E4M3 || arg.dtype == TRN_DTYPE_FP8_E5M2)
        want += " (or '|u1' bit patterns)";
      fail(format("--in %s: %s holds %s, but argument %s needs dtype %s and shape %s: %s", arg.name,
                  it->second.c_str(), describe_file(a).c_str(), describe_arg(arg).c_str(),
                  want.c_str(), npy::format_shape(arg_shape(arg)).c_str(),
                  !same_type ? "the dtype differs" : "the shape differs") +
           (!same_type ? "; " + how_to_convert(it->second, arg.dtype) : std::string()));
    }
    if (a.data.size() != arg.bytes)
      fail(format("--in %s: %s holds %zu bytes, argument %s needs %llu", arg.name,
                  it->second.c_str(), a.data.size(), describe_arg(arg).c_str(),
                  static_cast<unsigned long long>(arg.bytes)));
    inputs[i] = std::move(a);
  }
  return inputs;
}

// Expected arrays: any numeric dtype, the argument's shape. By argument name.
std::map<std::string, npy::Array> read_expected(const Target &t, const Bindings &b) {
  std::map<std::string, npy::Array> expected;
  for (const auto &[name, path] : b.expects) {
    const trn_kernel_arg_t &arg = find_arg(t, name, "--expect");
    npy::Array a = read_npy("--expect", name, path);
    if (!file_elem(a.dtype, arg.dtype))
      fail("--expect " + name + ": " + path + " holds " + describe_file(a) +
           ", which cannot be compared as numbers");
    if (a.shape != arg_shape(arg))
      fail("--expect " + name + ": " + path + " holds " + describe_file(a) + ", but argument " +
           describe_arg(arg) + " has shape " + npy::format_shape(arg_shape(arg)));
    expected.emplace(name, std::move(a));
  }
  return expected;
}

void check_out_dir(const std::string &dir) {
  if (dir.empty()) return;
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec))
    fail("--out-dir " + dir + ": no such directory (create it first)");
  if (!std::filesystem::is_directory(dir, ec)) fail("--out-dir " + dir + ": not a directory");
}

// Device memory for every tensor argument, one pool on the core's nearest bank, with the inputs
// written; scalars bound by value. The launch's bindings, indexed by argument.
std::vector<trn_kernel_binding_t> upload(const Target &t, trn_device_t device,
                                         const trn_core_properties_t &core_properties,
                                         const std::vector<trn_scalar_t> &scalar_values,
                                         const std::vector<npy::Array> &inputs, Resources &r) {
  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  pool_desc.kind = TRN_POOL_KIND_DEVICE;
  pool_desc.hbm_bank = core_properties.hbm_bank;
  check(trn_pool_create(device, &pool_desc, &r.pool),
        format("creating a memory pool on HBM bank %u", pool_desc.hbm_bank));
  const std::vector<trn_kernel_arg_t> &args = t.args;
  std::vector<trn_kernel_binding_t> bindings(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind == TRN_ARG_KIND_SCALAR) {
      r.mems.push_back(nullptr);  // keeps r.mems indexed by argument
      bindings[i].mem = nullptr;
      bindings[i].value = scalar_values[i];
      continue;
    }
    trn_mem_t mem = nullptr;
    check(trn_mem_alloc(r.pool, std::max<uint64_t>(args[i].bytes, 1), 0, TRN_MEM_CATEGORY_TENSORS,
                        0, &mem),
          format("allocating %llu bytes for argument %s",
                 static_cast<unsigned long long>(args[i].bytes), args[i].name));
    r.mems.push_back(mem);
    bindings[i] = {mem, 0};
    if (args[i].direction != TRN_ARG_OUT && !inputs[i].data.empty())
      check(trn_mem_write(mem, 0, inputs[i].data.data(), inputs[i].data.size()),
            format("uploading argument %s", args[i].name));
  }
  return bindings;
}

// The compute queue on the core, a profile, and for a program the tensor sets it executes with.
void prepare_launch(const Options &o, const Target &t, trn_device_t device, trn_core_t core,
                    const trn_core_properties_t &core_properties, Resources &r) {
  trn_queue_desc_t queue_desc = TRN_QUEUE_DESC_INIT;
  queue_desc.kind = TRN_QUEUE_KIND_COMPUTE;
  queue_desc.core = core;
  const std::string queue_what =
      format("creating a compute queue on core %u", core_properties.index);
  const trn_result_t created = trn_queue_create(&queue_desc, &r.queue);
  if (created == TRN_ERROR_CORE_BUSY)
    fail(queue_what + ": " + trn_result_name(created) + ": " + trn_last_error() +
         free_cores_hint(device));
  check(created, queue_what);
  check(trn_profile_create(o.profile_path.empty() ? 0u : TRN_PROFILE_FLAG_TRACE, &r.profile),
        "creating a profile");
  if (!t.program) return;
  check(trn_tensor_set_create(&r.inputs), "creating a tensor set");
  check(trn_tensor_set_create(&r.outputs), "creating a tensor set");
  for (size_t i = 0; i < t.args.size(); ++i)
    check(trn_tensor_set_add(t.args[i].direction == TRN_ARG_OUT ? r.outputs : r.inputs,
                             t.args[i].name, r.mems[i], 0),
          format("binding tensor %s", t.args[i].name));
}

// What the launches did: the last one's profile summary (a program's: its simulated time only)
// and the host time of them all.
struct Timing {
  trn_profile_summary_t summary = TRN_PROFILE_SUMMARY_INIT;
  uint64_t host_ns_total = 0;
};

Timing launch_all(const Options &o, const Target &t,
                  const std::vector<trn_kernel_binding_t> &bindings, Resources &r) {
  trn_launch_desc_t launch = TRN_LAUNCH_DESC_INIT;
  launch.kernel = r.kernel;
  launch.args = bindings.data();
  launch.arg_count = static_cast<uint32_t>(bindings.size());
  launch.profile = r.profile;
  const uint64_t timeout_ns = trn::tools::seconds_to_ns(o.timeout_s);
  Timing timing;
  trn_profile_summary_t &s = timing.summary;
  for (uint32_t i = 0; i < o.repeat; ++i) {
    if (t.program) {
      // An execution is timed by the queue's timestamps around it, in simulated time.
      trn_timestamp_t before{}, after{};
      check(trn_queue_write_timestamp(r.queue, &before, nullptr, nullptr), "timing the program");
      check(trn_queue_execute(r.queue, r.program, r.inputs, r.outputs, nullptr, nullptr),
            "executing the program");
      check(trn_queue_write_timestamp(r.queue, &after, nullptr, nullptr), "timing the program");
      if (trn_result_t fr = trn_queue_finish(r.queue, timeout_ns); fr != TRN_SUCCESS)
        fail_queue(r.queue, fr, o.timeout_s);
      s = TRN_PROFILE_SUMMARY_INIT;
      s.total_ns = after.device_ns - before.device_ns;
      timing.host_ns_total += after.host_ns - before.host_ns;
      continue;
    }
    check(trn_queue_launch(r.queue, &launch, nullptr, nullptr), "launching the kernel");
    if (trn_result_t fr = trn_queue_finish(r.queue, timeout_ns); fr != TRN_SUCCESS)
      fail_queue(r.queue, fr, o.timeout_s);
    s = TRN_PROFILE_SUMMARY_INIT;
    check(trn_profile_get_summary(r.profile, &s), "reading the profile");
    timing.host_ns_total += s.host_ns;
  }
  return timing;
}

// The outputs written and compared: their JSON records, their text lines, and the exit code the
// comparisons lead to.
struct OutputResults {
  json outputs = json::array(), expects = json::array();
  std::string text;
  int code = kExitOk;
};

// One comparison's JSON record and text.
void report_comparison(const Options &o, const trn_kernel_arg_t &arg, const trn::run::Comparison &c,
                       OutputResults &results) {
  using trn::run::format_index;
  using trn::run::Mismatch;
  using trn::run::unravel;
  json first = json::array();
  for (const Mismatch &m : c.first)
    first.push_back({{"index", unravel(m.index, arg_shape(arg))},
                     {"got", number(m.got)},
                     {"want", number(m.want)}});
  results.expects.push_back({{"name", c.name},
                             {"path", c.path},
                             {"ok", c.mismatches == 0},
                             {"elements", c.elements},
                             {"mismatches", c.mismatches},
                             {"max_abs_error", number(c.max_abs)},
                             {"max_rel_error", number(c.max_rel)},
                             {"first_mismatches", first}});
  std::string &text = results.text;
  if (c.mismatches == 0) {
    text += format("expect %s: ok, %llu elements, max abs error %.6g, max rel error %.6g\n",
                   arg.name, static_cast<unsigned long long>(c.elements), c.max_abs, c.max_rel);
    return;
  }
  results.code = kExitMismatch;
  text += format(
      "expect %s: MISMATCH in %llu of %llu elements (rtol %g, atol %g); max abs error %.6g, "
      "max rel error %.6g\n",
      arg.name, static_cast<unsigned long long>(c.mismatches),
      static_cast<unsigned long long>(c.elements), o.rtol, o.atol, c.max_abs, c.max_rel);
  for (const Mismatch &m : c.first)
    text += format("  %s%s: got %.9g, want %.9g (abs error %.6g)\n", arg.name,
                   format_index(unravel(m.index, arg_shape(arg))).c_str(), m.got, m.want,
                   std::fabs(m.got - m.want));
  if (c.mismatches > c.first.size())
    text += format("  ... and %llu more\n",
                   static_cast<unsigned long long>(c.mismatches - c.first.size()));
}

// Outputs: download, write, compare.
OutputResults write_and_compare(const Options &o, const Target &t, const Bindings &b,
                                const std::map<std::string, npy::Array> &expected,
                                const Resources &r) {
  OutputResults results;
  for (size_t i = 0; i < t.args.size(); ++i) {
    const trn_kernel_arg_t &arg = t.args[i];
    if (arg.direction == TRN_ARG_IN) continue;
    std::vector<std::string> paths;
    if (auto it = b.outs.find(arg.name); it != b.outs.end()) paths.push_back(it->second);
    if (!o.out_dir.empty())
      paths.push_back(
          (std::filesystem::path(o.out_dir) / (std::string(arg.name) + ".npy")).string());
    auto want = expected.find(arg.name);
    if (paths.empty() && want == expected.end()) continue;
    std::vector<std::byte> data(arg.bytes);
    if (!data.empty())
      check(trn_mem_read(r.mems[i], 0, data.data(), data.size()),
            format("downloading argument %s", arg.name));
    const DTypeInfo &info = dtype_info(arg.dtype);
    for (const std::string &path : paths) {
      if (auto why = npy::write_file(path, info.out_descr, arg_shape(arg), data))
        fail(format("writing output %s to %s: %s", arg.name, path.c_str(), why->c_str()));
      results.outputs.push_back({{"name", arg.name},
                                 {"path", path},
                                 {"descr", info.out_descr},
                                 {"shape", arg_shape(arg)}});
      results.text += format(
          "wrote %s to %s ('%s' %s%s)\n", arg.name, path.c_str(), info.out_descr,
          npy::format_shape(arg_shape(arg)).c_str(),
          is_raw_bits_dtype(arg.dtype) ? format(", %s bit patterns", info.numpy_name).c_str() : "");
    }
    if (want == expected.end()) continue;
    report_comparison(
        o, arg,
        trn::run::compare(arg.name, b.expects.at(arg.name), elem_of(arg.dtype), data,
                          *file_elem(want->second.dtype, arg.dtype), want->second, o.rtol, o.atol),
        results);
  }
  return results;
}

// The report of a run that completed: JSON and text.
Report make_report(const Options &o, const Target &t, const trn_core_properties_t &core_properties,
                   const Timing &timing, const OutputResults &results) {
  const trn_profile_summary_t &s = timing.summary;
  Report report;
  report.code = results.code;
  json engines = json::array();
  trn::tools::Table table({"engine", "instructions", "busy us", "active %", "wait us"});
  for (int e = 0; e < TRN_ENGINE_COUNT; ++e) {
    engines.push_back({{"engine", trn_engine_name(static_cast<trn_engine_t>(e))},
                       {"instructions", s.engine_instructions[e]},
                       {"busy_ns", s.engine_busy_ns[e]},
                       {"active_percent", number(s.engine_active_percent[e])},
                       {"wait_ns", s.engine_wait_ns[e]}});
    table.add_row({trn_engine_name(static_cast<trn_engine_t>(e)),
                   std::to_string(s.engine_instructions[e]), us(s.engine_busy_ns[e]),
                   format("%.1f", s.engine_active_percent[e]), us(s.engine_wait_ns[e])});
  }
  json args_json = json::array();
  for (const auto &arg : t.args)
    args_json.push_back({{"name", arg.name},
                         {"direction", direction_name(arg.direction)},
                         {"dtype", dtype_info(arg.dtype).name},
                         {"shape", arg_shape(arg)}});
  const uint64_t host_ns_mean = timing.host_ns_total / o.repeat;
  report.doc = {{"schema_version", kSchemaVersion},
                {"trn_version", trn_get_version_string()},
                {t.program ? "program" : "kernel",
                 {{"name", t.properties.name},
                  {"path", o.kernel_path},
                  {t.program ? "tensors" : "args", args_json}}},
                {"device", o.device},
                {"core", core_properties.index},
                {"core_id", core_properties.global_id},
                {t.program ? "executions" : "launches", o.repeat},
                {"simulated_ns", s.total_ns},
                {"host_ns", host_ns_mean},
                {"engines", engines},
                {"tensor_flops", s.tensor_flops},
                {"peak_flops", number(s.peak_flops)},
                {"mfu_percent", number(s.mfu_percent)},
                {"dma",
                 {{"transfers", s.dma_transfers},
                  {"bytes", s.dma_bytes},
                  {"utilization_percent", number(s.dma_utilization_percent)}}},
                {"outputs", results.outputs},
                {"expect", results.expects},
                {"trace", o.profile_path.empty() ? json(nullptr) : json(o.profile_path)},
                {"fault", nullptr},
                {"error", nullptr},
                {"exit_code", report.code}};

  std::string &text = report.text;
  if (t.program) {
    // Engine counters come from a launch's profile; an execution reports its time only.
    for (const char *key : {"engines", "tensor_flops", "peak_flops", "mfu_percent", "dma", "trace"})
      report.doc.erase(key);
    text +=
        format("program %s on device %u core %u: %zu tensors, %u execution%s\n", t.properties.name,
               o.device, core_properties.index, t.args.size(), o.repeat, o.repeat == 1 ? "" : "s");
    text += format("simulated time %s us, host time %.3f ms%s\n", us(s.total_ns).c_str(),
                   static_cast<double>(host_ns_mean) / 1e6, o.repeat > 1 ? " per execution" : "");
    text += results.text;
    return report;
  }
  text +=
      format("kernel %s on device %u core %u: %zu arguments, %u launch%s\n", t.properties.name,
             o.device, core_properties.index, t.args.size(), o.repeat, o.repeat == 1 ? "" : "es");
  text += format("simulated time %s us, host time %.3f ms%s\n", us(s.total_ns).c_str(),
                 static_cast<double>(host_ns_mean) / 1e6, o.repeat > 1 ? " per launch" : "");
  text += table.render();
  text += format("MFU %.2f %% (%llu tensor flops, peak %.1f TFLOP/s bf16)\n", s.mfu_percent,
                 static_cast<unsigned long long>(s.tensor_flops), s.peak_flops / 1e12);
  text += format("DMA %llu transfers, %llu bytes, utilisation %.1f %%\n",
                 static_cast<unsigned long long>(s.dma_transfers),
                 static_cast<unsigned long long>(s.dma_bytes), s.dma_utilization_percent);
  text += results.text;
  if (!o.profile_path.empty())
    text += "trace written to " + o.profile_path +
            " (open it in https://ui.perfetto.dev or chrome://tracing)\n";
  return report;
}

Report run(const Options &o) {
  const std::vector<std::byte> image = read_kernel_file(o.kernel_path);
  const Bindings b = parse_all_bindings(o);

  Resources r;
  trn_device_t device = pick_device(o.device);
  trn_core_properties_t core_properties = TRN_CORE_PROPERTIES_INIT;
  trn_core_t core = pick_core(device, o.core, &core_properties);
  const Target t = load_target(o, b, image, device, r);

  // Everything given is checked and read before any device memory is taken.
  check_bindings(t, b);
  const std::vector<trn_scalar_t> scalar_values = parse_scalars(t, b);
  check_outputs_named(t, b);
  const std::vector<npy::Array> inputs = read_inputs(t, b);
  const std::map<std::string, npy::Array> expected = read_expected(t, b);
  check_out_dir(o.out_dir);

  const std::vector<trn_kernel_binding_t> bindings =
      upload(t, device, core_properties, scalar_values, inputs, r);
  prepare_launch(o, t, device, core, core_properties, r);
  const Timing timing = launch_all(o, t, bindings, r);
  const OutputResults results = write_and_compare(o, t, b, expected, r);
  if (!o.profile_path.empty())
    check(trn_profile_write_trace(r.profile, o.profile_path.c_str()),
          "writing the trace to " + o.profile_path);
  return make_report(o, t, core_properties, timing, results);
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{
      "trn-run: run a kernel binary or a program on a NeuronCore with inputs from .npy files, "
      "write and check its outputs, report simulated time and engine activity.\nExit codes: 0 ok, "
      "1 --expect "
      "mismatch, 2 error, 3 kernel fault."};
  Options o;
  app.add_option("kernel", o.kernel_path,
                 "kernel binary (.trnk, from trn-as) or program (.trnp, docs/programs.md)")
      ->required();
  app.add_option("--device", o.device, "device index (default 0)");
  app.add_option(
      "--core", o.core,
      "the N-th core of the device this process may use (default 0; see TRN_VISIBLE_CORES)");
  app.add_option("--in", o.ins, "NAME=FILE.npy: input for an in/inout argument (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--scalar", o.scalars,
                 "NAME=VALUE: the value of a scalar argument, f32 or i32 (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--out", o.outs, "NAME=FILE.npy: write an out/inout argument (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--out-dir", o.out_dir, "write every out/inout argument to DIR/NAME.npy");
  app.add_option("--expect", o.expects,
                 "NAME=FILE.npy: compare an out/inout argument with an array (repeatable)")
      ->allow_extra_args(false);
  app.add_option("--rtol", o.rtol, "relative tolerance of --expect (default 1e-5)")
      ->check(trn::tools::non_negative_finite());
  app.add_option("--atol", o.atol, "absolute tolerance of --expect (default 1e-8)")
      ->check(trn::tools::non_negative_finite());
  app.add_option("--profile", o.profile_path, "write a Chrome trace (Perfetto) of the launch");
  app.add_flag("--json", o.json, "print one JSON object instead of text");
  app.add_option("--repeat", o.repeat, "launch N times (outputs and profile: the last launch)")
      ->check(CLI::Range(1u, UINT32_MAX));
  app.add_option("--timeout", o.timeout_s,
                 "seconds to wait for each launch (default 600; inf: no limit)")
      ->check(trn::tools::positive_seconds());
  app.set_version_flag("--version", std::string("trn-run ") + trn_get_version_string());
  std::string usage_error;
  if (auto status = trn::tools::parse_command_line(app, "trn-run", argc, argv, &usage_error)) {
    if (*status != kExitOk && trn::tools::names_flag(argc, argv, "--json"))
      std::cout << trn::tools::json_text(json{{"schema_version", kSchemaVersion},
                                              {"trn_version", trn_get_version_string()},
                                              {"error", usage_error},
                                              {"fault", nullptr},
                                              {"exit_code", *status}},
                                         2)
                << "\n";
    return *status;
  }

  int code = kExitOk;
  try {
    Report report = run(o);
    if (o.json)
      std::cout << trn::tools::json_text(report.doc, 2) << "\n";
    else
      std::fputs(report.text.c_str(), stdout);
    code = report.code;
  } catch (const RunError &e) {
    std::fprintf(stderr, "trn-run: %s\n", e.message.c_str());
    if (o.json) {
      json doc = {{"schema_version", kSchemaVersion},
                  {"trn_version", trn_get_version_string()},
                  {"error", e.message},
                  {"fault", e.fault},
                  {"exit_code", e.code}};
      std::cout << trn::tools::json_text(doc, 2) << "\n";
    }
    code = e.code;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "trn-run: %s\n", e.what());
    code = kExitError;
  }
  if (g_launch_stuck) {  // see g_launch_stuck: waiting for the launch is what --timeout refuses
    std::fflush(stdout);
    std::_Exit(code);
  }
  trn_runtime_shutdown();
  return code;
}
