// Submission checks: everything about a buffer that can be refused before anything runs.
#include "sim/command_check.hpp"

#include "isa/dtype.hpp"
#include "sim/launch.hpp"
#include "sim/reduce_math.hpp"

namespace trn::sim {

namespace {

bool ranges_overflow(uint64_t address, uint64_t bytes) {
  return bytes > UINT64_MAX - address;
}

trn_result_t check_reduce(trn_hal_instance_t &instance, HeldRangesMemo *memo,
                          const trn_hal_command_t &c, std::string *why) {
  const auto &r = c.u.reduce;
  if (!reduce_dtype_supported(r.dtype)) {
    *why = "a reduce of dtype " + std::to_string(r.dtype) +
           ": the DMA engines reduce TRN_DTYPE_F32, BF16, F16 and I32";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  if (!reduce_op_supported(r.op)) {
    *why = "reduce op " + std::to_string(r.op) + " is not TRN_REDUCE_SUM, _PROD, _MAX or _MIN";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  const uint64_t bytes = uint64_t{r.count} * isa::dtype_size(static_cast<isa::DType>(r.dtype));
  const std::pair<uint64_t, const char *> operands[] = {
      {r.destination, "destination"}, {r.a, "operand a"}, {r.b, "operand b"}};
  MemorySpan span;
  for (const auto &[address, name] : operands) {
    if (ranges_overflow(address, bytes)) {
      *why = std::string("a reduce of ") + std::to_string(bytes) + " bytes at its " + name +
             " runs past the end of the address space";
      return TRN_ERROR_INVALID_ARGUMENT;
    }
    if (trn_result_t result = resolve(instance, address, bytes, &span, why, memo);
        result != TRN_SUCCESS) {
      *why = std::string("reduce ") + name + ": " + *why;
      return result;
    }
    // Elementwise in order: the destination may be an operand, not overlap one otherwise.
    if (address != r.destination && address < r.destination + bytes &&
        r.destination < address + bytes) {
      *why = std::string("the reduce's destination partly overlaps its ") + name +
             ": reduce in place (the same address) or into separate memory";
      return TRN_ERROR_INVALID_ARGUMENT;
    }
  }
  return TRN_SUCCESS;
}

trn_result_t check_command(trn_hal_instance_t &instance, HeldRangesMemo *memo,
                           DeviceRuntime &device, trn_hal_queue_kind_t kind,
                           const trn_hal_command_t &c, std::string *why) {
  MemorySpan span;
  switch (c.kind) {
    case TRN_HAL_COMMAND_COPY: {
      const uint32_t flags = c.u.copy.flags;
      if ((flags & ~(TRN_HAL_COPY_HOST_SOURCE | TRN_HAL_COPY_HOST_DESTINATION)) != 0 ||
          flags == (TRN_HAL_COPY_HOST_SOURCE | TRN_HAL_COPY_HOST_DESTINATION)) {
        *why = "copy flags " + std::to_string(flags) +
               " are not 0, TRN_HAL_COPY_HOST_SOURCE or TRN_HAL_COPY_HOST_DESTINATION";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      if (ranges_overflow(c.u.copy.destination, c.u.copy.bytes) ||
          ranges_overflow(c.u.copy.source, c.u.copy.bytes)) {
        *why = "a copy of " + std::to_string(c.u.copy.bytes) +
               " bytes runs past the end of the "
               "address space";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      if (trn_result_t r =
              resolve_operand(instance, c.u.copy.destination, c.u.copy.bytes,
                              (flags & TRN_HAL_COPY_HOST_DESTINATION) != 0, &span, why, memo);
          r != TRN_SUCCESS) {
        *why = "copy destination: " + *why;
        return r;
      }
      if (trn_result_t r =
              resolve_operand(instance, c.u.copy.source, c.u.copy.bytes,
                              (flags & TRN_HAL_COPY_HOST_SOURCE) != 0, &span, why, memo);
          r != TRN_SUCCESS) {
        *why = "copy source: " + *why;
        return r;
      }
      return TRN_SUCCESS;
    }
    case TRN_HAL_COMMAND_MEMSET:
      if (c.u.memset.value > 255) {
        *why = "a memset value must be a byte (0-255), not " + std::to_string(c.u.memset.value);
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      if (ranges_overflow(c.u.memset.destination, c.u.memset.bytes)) {
        *why = "a memset of " + std::to_string(c.u.memset.bytes) +
               " bytes runs past the end of the address space";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      if (trn_result_t r =
              resolve(instance, c.u.memset.destination, c.u.memset.bytes, &span, why, memo);
          r != TRN_SUCCESS) {
        *why = "memset destination: " + *why;
        return r;
      }
      return TRN_SUCCESS;
    case TRN_HAL_COMMAND_LAUNCH:
      if (kind != TRN_HAL_QUEUE_COMPUTE) {
        *why = "a copy queue cannot launch kernels: submit launches to a compute queue";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      return check_launch(instance, device, c.u.launch.kernel, c.u.launch.args,
                          c.u.launch.arg_count, why);
    case TRN_HAL_COMMAND_SEM_WAIT:
    case TRN_HAL_COMMAND_SEM_SIGNAL:
      if (c.u.sem.sem == nullptr) {
        *why = std::string("a semaphore ") +
               (c.kind == TRN_HAL_COMMAND_SEM_WAIT ? "wait" : "signal") + " names no semaphore";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      return TRN_SUCCESS;
    case TRN_HAL_COMMAND_TIMESTAMP:
      if (trn_result_t r =
              resolve_operand(instance, timestamp_address(c), sizeof(trn_hal_timestamp_t),
                              c.u.timestamp.host != nullptr, &span, why);
          r != TRN_SUCCESS) {
        *why = "timestamp destination: " + *why;
        return r;
      }
      return TRN_SUCCESS;
    case TRN_HAL_COMMAND_HOST_CALL:
      if (c.u.host_call.fn == nullptr) {
        *why = "a host call names no function";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      return TRN_SUCCESS;
    case TRN_HAL_COMMAND_FILE_READ:
    case TRN_HAL_COMMAND_FILE_WRITE: {
      const char *what = c.kind == TRN_HAL_COMMAND_FILE_READ ? "file read" : "file write";
      if (c.u.file.fd < 0) {
        *why = std::string("a ") + what + " names file descriptor " + std::to_string(c.u.file.fd) +
               ": pass an open descriptor (0 or more)";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      if (ranges_overflow(c.u.file.device_address, c.u.file.bytes) ||
          c.u.file.bytes > static_cast<uint64_t>(INT64_MAX) - c.u.file.file_offset) {
        *why = std::string("a ") + what + " of " + std::to_string(c.u.file.bytes) +
               " bytes runs past the end of the address space or of the largest file offset";
        return TRN_ERROR_INVALID_ARGUMENT;
      }
      if (trn_result_t r = resolve(instance, c.u.file.device_address, c.u.file.bytes, &span, why);
          r != TRN_SUCCESS) {
        *why = std::string(what) +
               (c.kind == TRN_HAL_COMMAND_FILE_READ ? " destination: " : " source: ") + *why;
        return r;
      }
      return TRN_SUCCESS;
    }
    case TRN_HAL_COMMAND_REDUCE: return check_reduce(instance, memo, c, why);
    default:
      *why = "unknown command kind " + std::to_string(c.kind) +
             " (hal.h lists TRN_HAL_COMMAND_COPY to TRN_HAL_COMMAND_REDUCE)";
      return TRN_ERROR_INVALID_ARGUMENT;
  }
}

}  // namespace

trn_result_t check_submission(trn_hal_instance_t &instance, DeviceRuntime &device,
                              trn_hal_queue_kind_t kind, const trn_hal_submission_t &submission,
                              std::string *why, HeldRangesMemo *memo) {
  if (submission.command_count != 0 && submission.commands == nullptr) {
    *why = "the buffer has " + std::to_string(submission.command_count) +
           " commands but no command array (NULL)";
    return TRN_ERROR_INVALID_ARGUMENT;
  }
  for (uint32_t i = 0; i < submission.command_count; ++i)
    if (trn_result_t r = check_command(instance, memo, device, kind, submission.commands[i], why);
        r != TRN_SUCCESS) {
      *why = "command " + std::to_string(i) + " of buffer #" + std::to_string(submission.tag) +
             ": " + *why;
      return r;
    }
  return TRN_SUCCESS;
}

}  // namespace trn::sim
