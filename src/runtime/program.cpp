#include "runtime/program.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "common/read_file.hpp"
#include "runtime/error.hpp"
#include "runtime/kernel.hpp"
#include "runtime/memory.hpp"
#include "runtime/session.hpp"
#include "trn/safetensors.hpp"

namespace trn::rt {

namespace {

// Tensors inside the program's allocations start on this boundary, as separate allocations
// would (DMA descriptors and kernels see the same alignment either way).
constexpr uint64_t kTensorAlignment = 64;

uint64_t align_up(uint64_t n) {
  return (n + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
}

trn_result_t load_kernels(Device &device, const isa::ProgramImage &image,
                          std::vector<std::shared_ptr<Kernel>> *out) {
  for (size_t i = 0; i < image.kernels.size(); ++i) {
    std::shared_ptr<Kernel> kernel;
    const auto &bytes = image.kernels[i];
    if (trn_result_t r = load_kernel(device, bytes.data(), bytes.size(), &kernel); r != TRN_SUCCESS)
      return fail(r, "kernel " + std::to_string(i) + " of the program: " + last_detail());
    out->push_back(std::move(kernel));
  }
  return TRN_SUCCESS;
}

// A constant's bytes from its safetensors file, straight into the device memory's backing.
class SourceFiles {
 public:
  explicit SourceFiles(std::string directory) : directory_(std::move(directory)) {}
  ~SourceFiles() {
    for (auto &[path, file] : files_) ::close(file.fd);
  }
  SourceFiles(const SourceFiles &) = delete;
  SourceFiles &operator=(const SourceFiles &) = delete;

  trn_result_t read(const isa::ProgramTensor &t, Mem &mem, uint64_t offset) {
    const std::string path =
        t.source_file.front() == '/' ? t.source_file : directory_ + t.source_file;
    const std::string what =
        "constant '" + t.name + "' (tensor '" + t.source_tensor + "' of " + path + ")";
    File *file = open(path, what);
    if (!file) return TRN_ERROR_FILE;
    const safetensors::TensorInfo *info = file->header.find(t.source_tensor);
    if (!info)
      return fail(TRN_ERROR_INVALID_PROGRAM, what + ": the file has no tensor of that name");
    const std::vector<uint64_t> shape(t.shape.begin(), t.shape.end());
    if (static_cast<uint32_t>(info->dtype) != static_cast<uint32_t>(t.dtype) ||
        info->shape != shape)
      return fail(TRN_ERROR_INVALID_PROGRAM,
                  what + ": the file has it as " + info->dtype_name + " of shape " +
                      safetensors::shape_text(info->shape) + " (" + std::to_string(info->bytes()) +
                      " bytes); the program needs " + isa::dtype_name(t.dtype) + " of shape " +
                      safetensors::shape_text(shape) + " (" + std::to_string(t.bytes()) +
                      " bytes)");
    if (trn_result_t r = map_for_write(mem, offset, t.bytes()); r != TRN_SUCCESS)
      return fail(r, what + ": " + last_detail());
    char *to = mem.host + offset;
    uint64_t done = 0, at = file->header.data_offset + info->begin;
    while (done < t.bytes()) {
      const ssize_t n =
          ::pread(file->fd, to + done, t.bytes() - done, static_cast<off_t>(at + done));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0)
        return fail(TRN_ERROR_FILE, what + ": " +
                                        (n == 0 ? std::string("the file ends at offset ") +
                                                      std::to_string(at + done)
                                                : std::string(std::strerror(errno))));
      done += static_cast<uint64_t>(n);
    }
    return TRN_SUCCESS;
  }

 private:
  struct File {
    int fd = -1;
    safetensors::Header header;
  };
  File *open(const std::string &path, const std::string &what) {
    if (auto it = files_.find(path); it != files_.end()) return &it->second;
    // Only a regular file: a FIFO named here would block the load in open() for ever.
    int fd = -1;
    if (auto err = common::open_regular_file(path, &fd)) {
      fail(TRN_ERROR_FILE,
           what + ": cannot open the file: " +
               (err->error_number ? std::strerror(err->error_number) : err->reason));
      return nullptr;
    }
    File file{fd, {}};
    try {
      file.header = safetensors::read_header(fd);
    } catch (const safetensors::Error &e) {
      ::close(fd);
      fail(TRN_ERROR_FILE, what + ": not a valid safetensors file: " + e.what());
      return nullptr;
    }
    return &files_.emplace(path, std::move(file)).first->second;
  }

  const std::string directory_;
  std::map<std::string, File> files_;
};

}  // namespace

Program::~Program() {
  if (abandoned_) return;
  if (constants) release_memory(*constants);
  for (auto &set : free_sets_) release_memory(*set);
  // A pool gives its segments back only when told: nobody else knows this one.
  if (pool) pool->release_all();
}

trn_result_t Program::create(Device &device, isa::ProgramImage image,
                             std::vector<std::shared_ptr<Kernel>> kernels,
                             const std::string &directory, std::shared_ptr<Program> *out) {
  auto p = std::make_shared<Program>();
  p->device = &device;
  if (kernels.empty()) {
    if (trn_result_t r = load_kernels(device, image, &kernels); r != TRN_SUCCESS) return r;
  }
  p->kernels = std::move(kernels);
  for (const isa::ProgramStep &s : image.steps) p->launch_args += s.args.size();
  p->placement.resize(image.tensors.size(), 0);
  for (uint32_t i = 0; i < image.tensors.size(); ++i) {
    const isa::ProgramTensor &t = image.tensors[i];
    if (isa::is_external(t.role)) p->external.push_back(i);
    uint64_t *end = t.role == isa::TensorRole::kConstant   ? &p->constant_bytes
                    : t.role == isa::TensorRole::kInternal ? &p->internal_bytes
                                                           : nullptr;
    if (!end) continue;
    p->placement[i] = *end;
    *end = align_up(*end + t.bytes());
  }
  // Bank 0 holds what no core owns; a pool of its own lets trn-ls account the program's memory.
  p->pool = std::make_shared<Pool>(device, TRN_POOL_KIND_DEVICE, 0, UINT64_MAX);
  {
    std::lock_guard lock(device.memory_mu);
    std::erase_if(device.pools, [](const auto &weak) { return weak.expired(); });
    device.pools.push_back(p->pool);
  }
  if (p->constant_bytes) {
    if (trn_result_t r = p->pool->allocate(p->constant_bytes, kTensorAlignment,
                                           TRN_MEM_CATEGORY_CONSTANTS, 0, p->pool, &p->constants);
        r != TRN_SUCCESS)
      return fail(r, "the program's " + std::to_string(p->constant_bytes) +
                         " bytes of constants: " + last_detail());
    SourceFiles files(directory);
    for (uint32_t i = 0; i < image.tensors.size(); ++i) {
      isa::ProgramTensor &t = image.tensors[i];
      if (t.role != isa::TensorRole::kConstant) continue;
      if (t.from_file()) {
        if (trn_result_t r = files.read(t, *p->constants, p->placement[i]); r != TRN_SUCCESS)
          return r;
        continue;
      }
      if (trn_result_t r = write_range(*p->constants, p->placement[i], t.data.data(), t.bytes());
          r != TRN_SUCCESS)
        return fail(r, "writing constant '" + t.name + "': " + last_detail());
      // The weights live on the device from here; a save reads them back.
      std::vector<std::byte>().swap(t.data);
    }
  }
  p->image = std::move(image);
  *out = std::move(p);
  return TRN_SUCCESS;
}

trn_result_t Program::image_with_constants(isa::ProgramImage *out) const {
  *out = image;
  for (uint32_t i = 0; i < out->tensors.size(); ++i) {
    isa::ProgramTensor &t = out->tensors[i];
    if (t.role != isa::TensorRole::kConstant || t.from_file()) continue;
    t.data.resize(t.bytes());
    if (trn_result_t r = read_range(*constants, placement[i], t.data.data(), t.bytes());
        r != TRN_SUCCESS)
      return fail(r, "reading constant '" + t.name + "' back from the device: " + last_detail());
  }
  return TRN_SUCCESS;
}

trn_result_t Program::take_internal_set(uint64_t queue_key, std::unique_ptr<InternalSet> *out) {
  if (internal_bytes == 0) return TRN_SUCCESS;
  auto hold = std::make_unique<InternalSet>();
  hold->program = this;
  hold->queue_key = queue_key;
  std::lock_guard lock(mu_);
  SetInFlight &set = in_flight_[queue_key];
  if (!set.mem) {
    if (!free_sets_.empty()) {
      set.mem = std::move(free_sets_.back());
      free_sets_.pop_back();
    } else if (trn_result_t r = pool->allocate(internal_bytes, kTensorAlignment,
                                               TRN_MEM_CATEGORY_SCRATCH, 0, pool, &set.mem);
               r != TRN_SUCCESS) {
      in_flight_.erase(queue_key);
      return fail(r, "the program's internal buffers (" + std::to_string(internal_bytes) +
                         " bytes for each queue executing it at once): " + last_detail());
    }
  }
  ++set.holds;
  hold->mem = set.mem;
  *out = std::move(hold);
  return TRN_SUCCESS;
}

void Program::release_internal_set(uint64_t queue_key) {
  // Enough free sets for the queues that execute the program by turns; more go back to the pool.
  constexpr size_t kFreeSetsKept = 2;
  std::shared_ptr<Mem> surplus;
  {
    std::lock_guard lock(mu_);
    auto it = in_flight_.find(queue_key);
    if (it == in_flight_.end() || --it->second.holds > 0) return;
    if (free_sets_.size() < kFreeSetsKept)
      free_sets_.push_back(std::move(it->second.mem));
    else
      surplus = std::move(it->second.mem);
    in_flight_.erase(it);
  }
  if (surplus) release_memory(*surplus);
}

InternalSet::~InternalSet() {
  mem.reset();  // the program's entry holds the buffers until the last hold ends
  if (program) program->release_internal_set(queue_key);
}

ProgramRun::~ProgramRun() {
  internal.reset();  // before `program`, which it points into
}

std::string ProgramRun::describe_mem(size_t index) const {
  const int64_t t = mem_tensors[index];
  if (t == kConstants) return "the program's constants";
  if (t == kInternal) return "the program's internal buffers";
  return isa::describe_tensor(program->image.tensors[static_cast<size_t>(t)]);
}

uint32_t ProgramRun::command_count() const {
  return static_cast<uint32_t>(program->image.steps.size());
}

void ProgramRun::write_commands(trn_hal_command_t *out) {
  const isa::ProgramImage &image = program->image;
  const trn_hal_binding_t *args = bindings.data();
  for (size_t i = 0; i < image.steps.size(); ++i) {
    const isa::ProgramStep &s = image.steps[i];
    trn_hal_command_t &c = out[i];
    c = trn_hal_command_t{};
    switch (s.kind) {
      case isa::StepKind::kLaunch:
        c.kind = TRN_HAL_COMMAND_LAUNCH;
        c.u.launch.kernel = program->kernels[s.kernel]->hal;
        c.u.launch.args = args;
        c.u.launch.arg_count = static_cast<uint32_t>(s.args.size());
        c.u.launch.result = nullptr;  // executions keep no launch counters
        args += s.args.size();
        break;
      case isa::StepKind::kCopy:
        c.kind = TRN_HAL_COMMAND_COPY;
        c.u.copy.destination = address[s.dst.tensor] + s.dst.offset;
        c.u.copy.source = address[s.src.tensor] + s.src.offset;
        c.u.copy.bytes = s.bytes;
        break;
      case isa::StepKind::kMemset:
        c.kind = TRN_HAL_COMMAND_MEMSET;
        c.u.memset.destination = address[s.dst.tensor] + s.dst.offset;
        c.u.memset.bytes = s.bytes;
        c.u.memset.value = s.value;
        break;
    }
  }
}

namespace {

// Where the caller bound an external tensor: the set and the binding, or null.
const TensorSet::Binding *find_binding(const TensorSet *set, const std::string &name) {
  if (!set) return nullptr;
  for (const auto &b : set->bindings)
    if (b.name == name) return &b;
  return nullptr;
}

}  // namespace

trn_result_t bind_program(Session &session, const std::shared_ptr<Program> &program,
                          uint64_t queue_key, const TensorSet *inputs, const TensorSet *outputs,
                          std::shared_ptr<ProgramRun> *out) {
  const isa::ProgramImage &image = program->image;
  // One set passed as both binds every tensor, whatever its direction.
  const bool one_set = inputs && inputs == outputs;
  if (one_set) outputs = nullptr;
  auto run = std::make_shared<ProgramRun>();
  run->program = program;
  run->address.resize(image.tensors.size(), 0);
  // Names the sets bind that the program lacks are errors too: a typo must not go unnoticed.
  for (const TensorSet *set : {inputs, outputs}) {
    if (!set) continue;
    for (const auto &b : set->bindings) {
      const bool known = std::any_of(program->external.begin(), program->external.end(),
                                     [&](uint32_t t) { return image.tensors[t].name == b.name; });
      if (!known)
        return fail(TRN_ERROR_INVALID_ARGUMENT,
                    std::string(set == inputs ? "inputs" : "outputs") + " binds '" + b.name +
                        "', which is not an external tensor of program '" + image.name +
                        "' (trn_program_get_tensors lists them)");
    }
  }
  for (uint32_t t : program->external) {
    const isa::ProgramTensor &tensor = image.tensors[t];
    const auto *in = find_binding(inputs, tensor.name);
    const auto *outb = find_binding(outputs, tensor.name);
    // Only when a message needs it: executions are a hot path.
    auto what_of = [&] { return isa::describe_tensor(tensor); };
    if (in && outb)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  what_of() + " is bound in both inputs and outputs: bind it once");
    if (!one_set && tensor.role == isa::TensorRole::kOutput && in)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  what_of() + " is bound in inputs: bind it in outputs");
    if (tensor.role == isa::TensorRole::kInput && outb)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  what_of() + " is bound in outputs: bind it in inputs");
    const TensorSet::Binding *b = in ? in : outb;
    if (!b)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  what_of() + " of program '" + image.name + "' is not bound: add it to " +
                      (tensor.role == isa::TensorRole::kOutput ? "outputs" : "inputs") +
                      " (trn_tensor_set_add)");
    auto mem = session.mems.lookup(from_handle(b->mem));
    if (!mem) {
      invalid_handle(HandleKind::mem, from_handle(b->mem));
      return fail(TRN_ERROR_INVALID_ARGUMENT, what_of() + ": " + last_detail());
    }
    if (mem->kind != TRN_POOL_KIND_DEVICE || mem->device != program->device)
      return fail(
          TRN_ERROR_INVALID_ARGUMENT,
          what_of() + " is bound to memory that is not device memory of the program's device");
    const uint64_t need = tensor.bytes();
    if (b->offset > mem->size || mem->size - b->offset < need)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  what_of() + " needs " + std::to_string(need) + " bytes, but its allocation has " +
                      std::to_string(b->offset > mem->size ? 0 : mem->size - b->offset) +
                      " bytes from offset " + std::to_string(b->offset));
    run->address[t] = mem->address + b->offset;
    if (std::none_of(run->mems.begin(), run->mems.end(),
                     [&](const std::weak_ptr<Mem> &m) { return m.lock() == mem; })) {
      run->mems.push_back(mem);
      run->mem_tensors.push_back(t);
    }
  }
  if (trn_result_t r = program->take_internal_set(queue_key, &run->internal); r != TRN_SUCCESS)
    return r;
  if (program->constants) {
    run->mems.push_back(program->constants);
    run->mem_tensors.push_back(ProgramRun::kConstants);
  }
  if (run->internal) {
    run->mems.push_back(run->internal->mem);
    run->mem_tensors.push_back(ProgramRun::kInternal);
  }
  for (uint32_t t = 0; t < image.tensors.size(); ++t) {
    const auto role = image.tensors[t].role;
    if (role == isa::TensorRole::kConstant)
      run->address[t] = program->constants->address + program->placement[t];
    else if (role == isa::TensorRole::kInternal)
      run->address[t] = run->internal->mem->address + program->placement[t];
  }
  run->bindings.reserve(program->launch_args);
  for (const isa::ProgramStep &s : image.steps) {
    if (s.kind != isa::StepKind::kLaunch) continue;
    for (const isa::StepArg &a : s.args) {
      trn_hal_binding_t hal{};
      if (a.scalar) {
        hal.scalar_bits = a.scalar_bits;
      } else {
        // A kernel sees its tensor's bytes from the offset, no more: a program's tensors are
        // as separate as the allocations a caller would bind.
        hal.device_address = run->address[a.ref.tensor] + a.ref.offset;
        hal.bytes = image.tensors[a.ref.tensor].bytes() - a.ref.offset;
      }
      run->bindings.push_back(hal);
    }
  }
  *out = std::move(run);
  return TRN_SUCCESS;
}

std::string kernel_name_of(const Program &program, const trn_hal_kernel_t *hal) {
  for (const auto &k : program.kernels)
    if (k->hal == hal) return k->name();
  return {};
}

}  // namespace trn::rt
