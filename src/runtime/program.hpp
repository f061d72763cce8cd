// Programs as the runtime keeps them: a checked program image (isa/program_container.hpp) with
// its kernels loaded, its constants on the device and a pool for the internal buffers of its
// executions; tensor sets (named bindings); and what one execution binds (ProgramRun), which
// the queue turns into a single command buffer.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "drivers/hal.h"
#include "isa/program_container.hpp"
#include "trn/trn.h"

namespace trn::rt {

struct Device;
class Session;
struct Kernel;
struct Mem;
class Pool;

struct Program;

// One execution's hold on its internal buffers, which the executions of one queue that are in
// flight together share (a queue runs them one after another); the buffers go back to the
// program when the last hold on them ends.
struct InternalSet {
  Program *program = nullptr;  // outlives the set: each execution holds both
  uint64_t queue_key = 0;
  std::shared_ptr<Mem> mem;
  ~InternalSet();
};

struct Program {
  Device *device = nullptr;
  isa::ProgramImage image;  // as loaded or captured: what trn_program_save writes
  std::vector<std::shared_ptr<Kernel>> kernels;
  std::vector<uint32_t> external;   // indices of the external tensors, in the program's order
  std::shared_ptr<Pool> pool;       // the program's own: constants and internal sets
  std::shared_ptr<Mem> constants;   // every constant tensor, at placement[tensor]
  std::vector<uint64_t> placement;  // constants: offset in `constants`; internal: in a set
  uint64_t constant_bytes = 0, internal_bytes = 0;
  size_t launch_args = 0;  // all launches' arguments together

  // Returns its memory to the driver (its pool's segments too); executions hold the program
  // until they retire.
  ~Program();
  // For a session that ends without returning memory (the driver's closing frees it).
  void abandon() { abandoned_ = true; }

  // Loads a checked image for `device`: `kernels` already loaded (a capture's), or loaded here
  // from the image when empty. Constants from safetensors files with relative paths are read
  // from `directory` ("dir/", with its slash; "" for the current directory).
  static trn_result_t create(Device &device, isa::ProgramImage image,
                             std::vector<std::shared_ptr<Kernel>> kernels,
                             const std::string &directory, std::shared_ptr<Program> *out);

  // The image with every inline constant's bytes, read back from the device (the program keeps
  // them only there).
  trn_result_t image_with_constants(isa::ProgramImage *out) const;

  // The internal set for an execution on the queue `queue_key` names: the one its executions in
  // flight use, else a free one, else a new one.
  trn_result_t take_internal_set(uint64_t queue_key, std::unique_ptr<InternalSet> *out);
  // Ends one hold on the queue's set; the last one puts the set on the free list (or back in
  // the pool when the list is full).
  void release_internal_set(uint64_t queue_key);

 private:
  // Counted under mu_, not by a weak pointer: a weak pointer expires before the set's destructor
  // gives the buffers back, and an execution taking a set in between would allocate another.
  struct SetInFlight {
    std::shared_ptr<Mem> mem;
    size_t holds = 0;
  };
  std::mutex mu_;
  std::vector<std::shared_ptr<Mem>> free_sets_;  // guarded by mu_
  std::map<uint64_t, SetInFlight> in_flight_;    // by queue; guarded by mu_
  bool abandoned_ = false;
};

// Named bindings for trn_queue_execute, by handle (checked when an execution uses them).
struct TensorSet {
  struct Binding {
    std::string name;
    trn_mem_t mem = nullptr;
    uint64_t offset = 0;
  };
  std::vector<Binding> bindings;
};

// One execution: the program, where each tensor is, and everything the command buffer points at
// while it is queued.
struct ProgramRun {
  std::shared_ptr<Program> program;
  std::unique_ptr<InternalSet> internal;  // this execution's internal buffers
  // Every allocation a step uses (the bound ones, the constants, the internal set), each once,
  // and the tensor it was bound for (kConstants, kInternal for the program's own): messages are
  // made only when one is needed.
  static constexpr int64_t kConstants = -1, kInternal = -2;
  std::vector<std::weak_ptr<Mem>> mems;
  std::vector<int64_t> mem_tensors;
  std::string describe_mem(size_t index) const;  // "input tensor 'x'"
  std::vector<uint64_t> address;                 // per tensor: its device address
  // Every launch's arguments, one launch after another (launch_args[step] is where a step's
  // start); one allocation per execution, not one per launch.
  std::vector<trn_hal_binding_t> bindings;

  ~ProgramRun();
  uint32_t command_count() const;
  // Writes the steps' driver commands (command_count() of them) into `out`.
  void write_commands(trn_hal_command_t *out);
};

// Resolves the tensor sets against the program into an execution, or fails naming the tensor.
trn_result_t bind_program(Session &session, const std::shared_ptr<Program> &program,
                          uint64_t queue_key, const TensorSet *inputs, const TensorSet *outputs,
                          std::shared_ptr<ProgramRun> *out);

// The name of the program's kernel whose driver object is `hal` ("" if none is).
std::string kernel_name_of(const Program &program, const trn_hal_kernel_t *hal);

}  // namespace trn::rt
