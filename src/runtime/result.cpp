// Names and descriptions of results, generations, data types, engines and reduction ops, and the
// library version.
#include "isa/dtype.hpp"
#include "isa/opcodes.hpp"
#include "isa/target.hpp"
#include "trn/trn.h"

namespace {

struct ResultText {
  trn_result_t result;
  const char *name;
  const char *text;
};

constexpr ResultText kResults[] = {
    {TRN_SUCCESS, "TRN_SUCCESS", "success"},
    {TRN_NOT_READY, "TRN_NOT_READY", "the operation has not completed yet"},
    {TRN_TIMEOUT, "TRN_TIMEOUT", "the deadline passed before the operation completed"},
    {TRN_ERROR_INVALID_ARGUMENT, "TRN_ERROR_INVALID_ARGUMENT", "an argument value is not allowed"},
    {TRN_ERROR_INVALID_HANDLE, "TRN_ERROR_INVALID_HANDLE",
     "the handle is NULL, stale, of the wrong kind or not a handle"},
    {TRN_ERROR_NULL_POINTER, "TRN_ERROR_NULL_POINTER", "a required pointer argument is NULL"},
    {TRN_ERROR_INVALID_ENUM, "TRN_ERROR_INVALID_ENUM", "an enum argument is out of its range"},
    {TRN_ERROR_OUT_OF_RANGE, "TRN_ERROR_OUT_OF_RANGE", "an index or count is out of range"},
    {TRN_ERROR_INVALID_STRUCT, "TRN_ERROR_INVALID_STRUCT",
     "a struct was not initialised with its *_INIT macro (type tag or size wrong)"},
    {TRN_ERROR_INVALID_CONFIG, "TRN_ERROR_INVALID_CONFIG",
     "an environment variable or configuration value is malformed or contradictory"},
    {TRN_ERROR_UNSUPPORTED, "TRN_ERROR_UNSUPPORTED", "the driver or device cannot do this"},
    {TRN_ERROR_INVALID_KERNEL_ARG, "TRN_ERROR_INVALID_KERNEL_ARG",
     "a kernel argument does not match the kernel's argument table"},
    {TRN_ERROR_NOT_FOUND, "TRN_ERROR_NOT_FOUND", "nothing matches what was looked up"},
    {TRN_ERROR_OUT_OF_HOST_MEMORY, "TRN_ERROR_OUT_OF_HOST_MEMORY", "out of host memory"},
    {TRN_ERROR_OUT_OF_DEVICE_MEMORY, "TRN_ERROR_OUT_OF_DEVICE_MEMORY", "out of device memory"},
    {TRN_ERROR_CORE_BUSY, "TRN_ERROR_CORE_BUSY", "the NeuronCore is owned by another process"},
    {TRN_ERROR_NOT_OWNER, "TRN_ERROR_NOT_OWNER", "this process does not own the NeuronCore"},
    {TRN_ERROR_QUEUE_FULL, "TRN_ERROR_QUEUE_FULL",
     "the queue is full: wait for completions, then submit again"},
    {TRN_ERROR_TOO_MANY_PROCESSES, "TRN_ERROR_TOO_MANY_PROCESSES",
     "every process slot of the device is taken"},
    {TRN_ERROR_HANDLE_IN_USE, "TRN_ERROR_HANDLE_IN_USE", "the object is still in use"},
    {TRN_ERROR_FILE, "TRN_ERROR_FILE", "a file cannot be created, read or written"},
    {TRN_ERROR_NO_DEVICE, "TRN_ERROR_NO_DEVICE", "no such device"},
    {TRN_ERROR_PERMISSION_DENIED, "TRN_ERROR_PERMISSION_DENIED",
     "the device state is not accessible to this user"},
    {TRN_ERROR_STATE_VERSION_MISMATCH, "TRN_ERROR_STATE_VERSION_MISMATCH",
     "the device state was written by an incompatible trn release"},
    {TRN_ERROR_STATE_CORRUPT, "TRN_ERROR_STATE_CORRUPT", "the device state is damaged"},
    {TRN_ERROR_DRIVER, "TRN_ERROR_DRIVER", "the driver failed"},
    {TRN_ERROR_DEVICE_LOST, "TRN_ERROR_DEVICE_LOST", "the device stopped responding"},
    {TRN_ERROR_DEVICE_FAULTED, "TRN_ERROR_DEVICE_FAULTED", "the device reported a fault"},
    {TRN_ERROR_DRIVER_NOT_FOUND, "TRN_ERROR_DRIVER_NOT_FOUND",
     "no driver was found where TRN_DRIVER names or beside libtrn"},
    {TRN_ERROR_DRIVER_INCOMPATIBLE, "TRN_ERROR_DRIVER_INCOMPATIBLE",
     "the driver does not load, is not a trn driver or implements another driver interface"},
    {TRN_ERROR_INVALID_KERNEL, "TRN_ERROR_INVALID_KERNEL", "the kernel binary is malformed"},
    {TRN_ERROR_KERNEL_FAULT, "TRN_ERROR_KERNEL_FAULT", "a kernel faulted during execution"},
    {TRN_ERROR_KERNEL_DEADLOCK, "TRN_ERROR_KERNEL_DEADLOCK",
     "a kernel deadlocked: no engine could make progress"},
    {TRN_ERROR_CANCELLED, "TRN_ERROR_CANCELLED",
     "the command was cancelled because an earlier one failed"},
    {TRN_ERROR_INVALID_PROGRAM, "TRN_ERROR_INVALID_PROGRAM", "the program image is malformed"},
    {TRN_ERROR_COLLECTIVE, "TRN_ERROR_COLLECTIVE", "a collective operation failed"},
    {TRN_ERROR_INTERNAL, "TRN_ERROR_INTERNAL", "internal error in trn (please report it)"},
};

const ResultText *find(trn_result_t result) {
  for (const auto &entry : kResults)
    if (entry.result == result) return &entry;
  return nullptr;
}

}  // namespace

extern "C" {

TRN_API const char *trn_result_name(trn_result_t result) {
  const ResultText *entry = find(result);
  return entry ? entry->name : "TRN_RESULT_UNKNOWN";
}

TRN_API const char *trn_result_string(trn_result_t result) {
  const ResultText *entry = find(result);
  return entry ? entry->text : "unknown result value";
}

TRN_API uint32_t trn_get_version(void) {
  return TRN_API_VERSION;
}

TRN_API const char *trn_get_version_string(void) {
  return TRN_RELEASE_STRING;
}

TRN_API const char *trn_mem_category_name(trn_mem_category_t category) {
  switch (category) {
    case TRN_MEM_CATEGORY_TENSORS: return "tensors";
    case TRN_MEM_CATEGORY_CONSTANTS: return "constants";
    case TRN_MEM_CATEGORY_CODE: return "code";
    case TRN_MEM_CATEGORY_SCRATCH: return "scratch";
    case TRN_MEM_CATEGORY_DMA_RINGS: return "dma-rings";
    case TRN_MEM_CATEGORY_COLLECTIVES: return "collectives";
    default: return "unknown";
  }
}

TRN_API const char *trn_generation_name(trn_generation_t generation) {
  const char *name = trn::isa::generation_name(static_cast<trn::isa::Generation>(generation));
  return name ? name : "unknown";
}

// The ISA numbers generations as trn_generation_t does (its core table is keyed by them).
static_assert(TRN_GENERATION_TRN1 == static_cast<int>(trn::isa::Generation::kTrn1) &&
              TRN_GENERATION_TRN2 == static_cast<int>(trn::isa::Generation::kTrn2) &&
              TRN_GENERATION_TRN3 == static_cast<int>(trn::isa::Generation::kTrn3));

// The C enums are the ISA's values (a kernel's argument table stores them as they are).
static_assert(TRN_DTYPE_F32 == static_cast<int>(trn::isa::DType::kF32) &&
              TRN_DTYPE_BF16 == static_cast<int>(trn::isa::DType::kBf16) &&
              TRN_DTYPE_F16 == static_cast<int>(trn::isa::DType::kF16) &&
              TRN_DTYPE_FP8_E4M3 == static_cast<int>(trn::isa::DType::kFp8E4m3) &&
              TRN_DTYPE_FP8_E5M2 == static_cast<int>(trn::isa::DType::kFp8E5m2) &&
              TRN_DTYPE_I32 == static_cast<int>(trn::isa::DType::kI32) &&
              TRN_DTYPE_I16 == static_cast<int>(trn::isa::DType::kI16) &&
              TRN_DTYPE_I8 == static_cast<int>(trn::isa::DType::kI8) &&
              TRN_DTYPE_U8 == static_cast<int>(trn::isa::DType::kU8) &&
              trn::isa::kDTypeCount == 10);
static_assert(TRN_ENGINE_TENSOR == static_cast<int>(trn::isa::Engine::kTensor) &&
              TRN_ENGINE_VECTOR == static_cast<int>(trn::isa::Engine::kVector) &&
              TRN_ENGINE_SCALAR == static_cast<int>(trn::isa::Engine::kScalar) &&
              TRN_ENGINE_GPSIMD == static_cast<int>(trn::isa::Engine::kGpSimd) &&
              TRN_ENGINE_SYNC == static_cast<int>(trn::isa::Engine::kSync) &&
              TRN_ENGINE_COUNT == trn::isa::kEngineCount);

TRN_API const char *trn_dtype_name(trn_dtype_t dtype) {
  if (dtype == TRN_DTYPE_F64) return "f64";
  if (dtype == TRN_DTYPE_I64) return "i64";
  const auto value = static_cast<uint32_t>(dtype);
  return value > 0 && value < trn::isa::kDTypeCount
             ? trn::isa::dtype_name(static_cast<trn::isa::DType>(value))
             : "unknown";
}

TRN_API uint32_t trn_dtype_size(trn_dtype_t dtype) {
  if (dtype == TRN_DTYPE_F64 || dtype == TRN_DTYPE_I64) return 8;
  const auto value = static_cast<uint32_t>(dtype);
  return value > 0 && value < trn::isa::kDTypeCount
             ? trn::isa::dtype_size(static_cast<trn::isa::DType>(value))
             : 0;
}

// One table for every layer: libtrn_comm's and libtrn_ops' name functions forward here.
TRN_API const char *trn_reduce_op_name(trn_reduce_op_t op) {
  switch (op) {
    case TRN_REDUCE_SUM: return "sum";
    case TRN_REDUCE_PROD: return "prod";
    case TRN_REDUCE_MAX: return "max";
    case TRN_REDUCE_MIN: return "min";
    case TRN_REDUCE_AVG: return "avg";
    case TRN_REDUCE_ARGMAX: return "argmax";
    case TRN_REDUCE_ARGMIN: return "argmin";
    default: return "unknown";
  }
}

TRN_API const char *trn_engine_name(trn_engine_t engine) {
  const auto value = static_cast<uint32_t>(engine);
  return value < trn::isa::kEngineCount
             ? trn::isa::engine_name(static_cast<trn::isa::Engine>(value))
             : "unknown";
}

}  // extern "C"
