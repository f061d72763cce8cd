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
  // Room for a "_N" suffix that makes it unique.
  for (char c : arg.substr(0, isa::kMaxTensorNameLength - 8))
    name.push_back(isa::is_tensor_name_char(c) ? c : '_');
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
  // A tensor starts where its allocation does: bound at offset 0, the replay touches the bytes
  // the recorded work did.
  t.hi = std::max(t.hi, offset + bytes);
  t.read |= read;
  t.written |= written;
  return it->second;
}

namespace {

// One use of an allocation by a command being recorded, checked before anything is recorded.
struct PendingUse {
  std::shared_ptr<Mem> mem;
  uint64_t offset = 0, bytes = 0;
  bool read = false, written = false;
  const trn_kernel_arg_t *arg = nullptr;  // a launch's tensor argument
};

}  // namespace

trn_result_t Capture::record(const Command &c) {
  if (!c.waits.empty() || !c.signals.empty())
    return fail(TRN_ERROR_INVALID_ARGUMENT,
                "the queue is capturing, and a captured command cannot wait for or signal "
                "semaphores: pass the sync list to trn_queue_execute of the captured program "
                "instead");
  // Nothing to do, nothing to record (a program's copies and memsets move at least a byte).
  if ((c.kind == Command::Kind::copy || c.kind == Command::Kind::memset) && c.size == 0)
    return TRN_SUCCESS;
  std::vector<PendingUse> uses;
  auto pending = [&](const std::weak_ptr<Mem> &weak, uint64_t offset, uint64_t bytes, bool read,
                     bool written, const trn_kernel_arg_t *arg = nullptr) {
    uses.push_back({weak.lock(), offset, bytes, read, written, arg});
  };
  switch (c.kind) {
    case Command::Kind::copy:
      pending(c.destination, c.destination_offset, c.size, false, true);
      pending(c.source, c.source_offset, c.size, true, false);
      break;
    case Command::Kind::memset:
      pending(c.destination, c.destination_offset, c.size, false, true);
      break;
    case Command::Kind::launch:
      if (c.profile)
        return fail(TRN_ERROR_INVALID_ARGUMENT,
                    "the queue is capturing: a captured launch cannot fill a profile (launch "
                    "without desc.profile)");
      for (size_t i = 0; i < c.kernel->args.size(); ++i) {
        const trn_kernel_arg_t &arg = c.kernel->args[i];
        if (arg.kind == TRN_ARG_KIND_SCALAR) continue;
        auto mem = c.args[i].lock();
        const uint64_t offset = mem ? c.bindings[i].device_address - mem->address : 0;
        pending(c.args[i], offset, arg.bytes, arg.direction != TRN_ARG_OUT,
                arg.direction != TRN_ARG_IN, &arg);
      }
      break;
    default:
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  std::string("the queue is capturing, which records launches, copies and "
                              "memsets; this command (") +
                      command_name(c.kind) +
                      ") cannot be captured: issue it before trn_queue_begin_capture or after "
                      "trn_queue_end_capture");
  }
  // Every check first: a refused command leaves the recording as it was.
  size_t new_tensors = 0;
  for (const PendingUse &u : uses) {
    if (!u.mem)
      return fail(TRN_ERROR_INVALID_HANDLE,
                  "memory this command names was freed while the command was issued: keep "
                  "allocations alive while capturing, then issue the command again");
    if (u.mem->kind != TRN_POOL_KIND_DEVICE)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  "the queue is capturing, and a program's tensors are device memory: this "
                  "command uses host memory; copy it to or from device memory outside the "
                  "capture");
    if (!tensor_of_.contains(u.mem.get()) &&
        std::none_of(uses.begin(), uses.end(),
                     [&](const PendingUse &o) { return &o < &u && o.mem == u.mem; }))
      ++new_tensors;
  }
  const bool new_kernel = c.kind == Command::Kind::launch && !kernel_of_.contains(c.kernel.get());
  if (steps_.size() >= isa::kMaxProgramSteps ||
      tensors_.size() + new_tensors > isa::kMaxProgramTensors ||
      kernels_.size() + (new_kernel ? 1 : 0) > isa::kMaxProgramKernels)
    return fail(
        TRN_ERROR_OUT_OF_RANGE,
        "the capture holds " + std::to_string(steps_.size()) + " steps, " +
            std::to_string(tensors_.size()) + " tensors and " + std::to_string(kernels_.size()) +
            " kernels; this command would pass what a program holds (" +
            std::to_string(isa::kMaxProgramSteps) + ", " + std::to_string(isa::kMaxProgramTensors) +
            ", " + std::to_string(isa::kMaxProgramKernels) + "): end the capture first");

  isa::ProgramStep step;
  auto ref = [&](const PendingUse &u) {
    return isa::TensorRef{use(u.mem, u.offset, u.bytes, u.read, u.written), u.offset};
  };
  switch (c.kind) {
    case Command::Kind::copy:
      step.kind = isa::StepKind::kCopy;
      step.dst = ref(uses[0]);
      step.src = ref(uses[1]);
      step.bytes = c.size;
      break;
    case Command::Kind::memset:
      step.kind = isa::StepKind::kMemset;
      step.dst = ref(uses[0]);
      step.bytes = c.size;
      step.value = c.value;
      break;
    default: {  // launch
      step.kind = isa::StepKind::kLaunch;
      auto [kit, added] =
          kernel_of_.emplace(c.kernel.get(), static_cast<uint32_t>(kernels_.size()));
      if (added) kernels_.push_back(c.kernel);
      step.kernel = kit->second;
      size_t next = 0;
      for (size_t i = 0; i < c.kernel->args.size(); ++i) {
        const trn_kernel_arg_t &arg = c.kernel->args[i];
        isa::StepArg a;
        if (arg.kind == TRN_ARG_KIND_SCALAR) {
          a.scalar = true;
          a.scalar_bits = static_cast<uint32_t>(c.bindings[i].scalar_bits);
          step.args.push_back(a);
          continue;
        }
        const PendingUse &u = uses[next++];
        a.ref = ref(u);
        Tensor &t = tensors_[a.ref.tensor];
        if (t.arg_name.empty()) {  // named after the first argument bound to it
          t.arg_name = arg.name;
          t.arg_offset = u.offset;
          t.arg_bytes = arg.bytes;
          t.arg_dtype = arg.dtype;
          t.arg_shape.assign(arg.shape, arg.shape + arg.rank);
        }
        step.args.push_back(a);
      }
      break;
    }
  }
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
    const uint64_t bytes = t.hi;
    if (!t.arg_name.empty() && t.arg_offset == 0 && t.arg_bytes == bytes && !t.arg_shape.empty()) {
      pt.dtype = static_cast<isa::DType>(t.arg_dtype);
      pt.shape = t.arg_shape;
    } else {
      pt.dtype = isa::DType::kU8;
      pt.shape = {bytes};
    }
    image.tensors.push_back(std::move(pt));
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
