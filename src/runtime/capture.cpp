#include "runtime/capture.hpp"

#include <algorithm>
#include <set>

#include "isa/dtype.hpp"
#include "runtime/error.hpp"
#include "runtime/kernel.hpp"
#include "runtime/memory.hpp"
#include "runtime/program.hpp"
#include "runtime/queue.hpp"

namespace trn::rt {

namespace {

// A tensor name the program format accepts, from a kernel argument's name.
std::string tensor_name(const std::string &arg) {
  std::string name;
  for (char c : arg.substr(0, isa::kMaxTensorNameLength - 8)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    name.push_back(ok ? c : '_');
  }
  return name;
}

}  // namespace

uint32_t Capture::use(const std::shared_ptr<Mem> &mem, uint64_t offset, uint64_t bytes, bool read,
                      bool written) {
  auto [it, added] = tensor_of_.emplace(mem.get(), static_cast<uint32_t>(tensors_.size()));
  if (added) {
    tensors_.emplace_back();
    tensors_.back().mem = mem;
  }
  Tensor &t = tensors_[it->second];
  t.lo = std::min(t.lo, offset);
  t.hi = std::max(t.hi, offset + bytes);
  t.read |= read;
  t.written |= written;
  return it->second;
}

trn_result_t Capture::record(const Command &c) {
  if (!c.waits.empty() || !c.signals.empty())
    return fail(TRN_ERROR_INVALID_ARGUMENT,
                "the queue is capturing, and a captured command cannot wait for or signal "
                "semaphores: pass the sync list to trn_queue_execute of the captured program "
                "instead");
  isa::ProgramStep step;
  // Nothing to do, nothing to record (a program's copies and memsets move at least a byte).
  if ((c.kind == Command::Kind::copy || c.kind == Command::Kind::memset) && c.size == 0)
    return TRN_SUCCESS;
  switch (c.kind) {
    case Command::Kind::copy: {
      auto dst = c.destination.lock(), src = c.source.lock();
      if (!dst || !src) return fail(TRN_ERROR_INVALID_HANDLE, "the memory was freed meanwhile");
      step.kind = isa::StepKind::kCopy;
      step.dst = {use(dst, c.destination_offset, c.size, false, true), c.destination_offset};
      step.src = {use(src, c.source_offset, c.size, true, false), c.source_offset};
      step.bytes = c.size;
      break;
    }
    case Command::Kind::memset: {
      auto dst = c.destination.lock();
      if (!dst) return fail(TRN_ERROR_INVALID_HANDLE, "the memory was freed meanwhile");
      step.kind = isa::StepKind::kMemset;
      step.dst = {use(dst, c.destination_offset, c.size, false, true), c.destination_offset};
      step.bytes = c.size;
      step.value = c.value;
      break;
    }
    case Command::Kind::launch: {
      if (c.profile)
        return fail(TRN_ERROR_INVALID_ARGUMENT,
                    "the queue is capturing: a captured launch cannot fill a profile (launch "
                    "without desc.profile)");
      step.kind = isa::StepKind::kLaunch;
      auto [kit, added] =
          kernel_of_.emplace(c.kernel.get(), static_cast<uint32_t>(kernels_.size()));
      if (added) kernels_.push_back(c.kernel);
      step.kernel = kit->second;
      for (size_t i = 0; i < c.kernel->args.size(); ++i) {
        const trn_kernel_arg_t &arg = c.kernel->args[i];
        isa::StepArg a;
        if (arg.kind == TRN_ARG_KIND_SCALAR) {
          a.scalar = true;
          a.scalar_bits = static_cast<uint32_t>(c.bindings[i].scalar_bits);
          step.args.push_back(a);
          continue;
        }
        auto mem = c.args[i].lock();
        if (!mem) return fail(TRN_ERROR_INVALID_HANDLE, "the memory was freed meanwhile");
        const uint64_t offset = c.bindings[i].device_address - mem->address;
        const bool fresh = !tensor_of_.contains(mem.get());
        a.ref = {
            use(mem, offset, arg.bytes, arg.direction != TRN_ARG_OUT, arg.direction != TRN_ARG_IN),
            offset};
        Tensor &t = tensors_[a.ref.tensor];
        if (fresh || t.arg_name.empty()) {
          t.arg_name = arg.name;
          t.arg_offset = offset;
          t.arg_bytes = arg.bytes;
          t.arg_dtype = arg.dtype;
          t.arg_shape.assign(arg.shape, arg.shape + arg.rank);
        }
        step.args.push_back(a);
      }
      break;
    }
    default:
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  std::string("the queue is capturing, which records launches, copies and "
                              "memsets; this command (") +
                      command_name(c.kind) +
                      ") cannot be captured: issue it before trn_queue_begin_capture or after "
                      "trn_queue_end_capture");
  }
  if (steps_.size() >= isa::kMaxProgramSteps)
    return fail(TRN_ERROR_OUT_OF_RANGE, "the capture holds " + std::to_string(steps_.size()) +
                                            " steps, the most a program has");
  // One queue runs in order: each step follows the one before.
  if (!steps_.empty()) step.deps.push_back(static_cast<uint32_t>(steps_.size() - 1));
  steps_.push_back(std::move(step));
  return TRN_SUCCESS;
}

trn_result_t Capture::finish(Device &device, std::shared_ptr<Program> *out) {
  isa::ProgramImage image;
  image.name = "captured";
  for (const auto &k : kernels_) image.kernels.push_back(k->image);
  std::set<std::string> names;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Tensor &t = tensors_[i];
    isa::ProgramTensor pt;
    std::string base = t.arg_name.empty() ? "mem" + std::to_string(i) : tensor_name(t.arg_name);
    pt.name = base;
    for (int n = 1; names.contains(pt.name); ++n) pt.name = base + "_" + std::to_string(n);
    names.insert(pt.name);
    pt.role = !t.written ? isa::TensorRole::kInput
              : !t.read  ? isa::TensorRole::kOutput
                         : isa::TensorRole::kInOut;
    const uint64_t bytes = t.hi - t.lo;
    if (!t.arg_name.empty() && t.arg_offset == t.lo && t.arg_bytes == bytes &&
        !t.arg_shape.empty()) {
      pt.dtype = static_cast<isa::DType>(t.arg_dtype);
      pt.shape = t.arg_shape;
    } else {
      pt.dtype = isa::DType::kU8;
      pt.shape = {bytes};
    }
    image.tensors.push_back(std::move(pt));
  }
  auto rebase = [&](isa::TensorRef &ref) { ref.offset -= tensors_[ref.tensor].lo; };
  for (isa::ProgramStep &s : steps_) {
    for (isa::StepArg &a : s.args)
      if (!a.scalar) rebase(a.ref);
    if (s.kind != isa::StepKind::kLaunch) rebase(s.dst);
    if (s.kind == isa::StepKind::kCopy) rebase(s.src);
  }
  image.steps = std::move(steps_);
  // What is saved must load again: the recorded program passes the reader's every check.
  const auto bytes = isa::write_program(image);
  isa::ProgramImage checked;
  if (auto why = isa::read_program(bytes, checked))
    return fail(TRN_ERROR_INTERNAL, "the captured program does not read back: " + *why);
  return Program::create(device, std::move(checked), kernels_, "", out);
}

}  // namespace trn::rt
