// Recording a queue's work into a program (trn_queue_begin_capture / _end_capture), as CUDA
// graphs record a stream: each launch, copy and memset becomes a step, each allocation they name
// an external tensor from its start to the last byte used, each kernel one of the program's
// kernels.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "isa/program_container.hpp"
#include "trn/trn.h"

namespace trn::rt {

struct Command;
struct Device;
struct Kernel;
struct Mem;
struct Program;

class Capture {
 public:
  // Takes a checked command (copy, memset or launch without sync); anything else is refused with
  // a message saying why.
  trn_result_t record(const Command &command);
  // The program of what was recorded, loaded for `device`.
  trn_result_t finish(Device &device, std::shared_ptr<Program> *out);

 private:
  struct Tensor {
    std::shared_ptr<Mem> mem;
    uint64_t hi = 0;  // the bytes used: from the allocation's start to the last one
    bool read = false, written = false;
    // The first kernel argument bound to it: its name, and dtype and shape if it covers lo..hi.
    std::string arg_name;
    uint64_t arg_offset = 0, arg_bytes = 0;
    trn_dtype_t arg_dtype = TRN_DTYPE_U8;
    std::vector<uint64_t> arg_shape;
  };
  // The tensor of `mem`, noting a use of [offset, offset + bytes).
  uint32_t use(const std::shared_ptr<Mem> &mem, uint64_t offset, uint64_t bytes, bool read,
               bool written);

  std::vector<Tensor> tensors_;
  std::unordered_map<const Mem *, uint32_t> tensor_of_;
  std::vector<std::shared_ptr<Kernel>> kernels_;
  std::unordered_map<const Kernel *, uint32_t> kernel_of_;
  std::vector<isa::ProgramStep> steps_;  // offsets are the allocations' (tensors start at 0)
};

}  // namespace trn::rt
