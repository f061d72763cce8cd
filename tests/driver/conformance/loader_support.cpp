#include "loader_support.hpp"

#include <dlfcn.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace Catch {
std::string StringMaker<trn_result_t>::convert(trn_result_t result) {
  return std::string(conformance::result_name(result)) + " (" + std::to_string(result) + ")";
}
}  // namespace Catch

namespace conformance {

const char *result_name(trn_result_t result) {
  switch (result) {
#define NAME(r) \
  case r: return #r;
    NAME(TRN_SUCCESS)
    NAME(TRN_NOT_READY)
    NAME(TRN_TIMEOUT)
    NAME(TRN_ERROR_INVALID_ARGUMENT)
    NAME(TRN_ERROR_INVALID_HANDLE)
    NAME(TRN_ERROR_NULL_POINTER)
    NAME(TRN_ERROR_INVALID_ENUM)
    NAME(TRN_ERROR_OUT_OF_RANGE)
    NAME(TRN_ERROR_INVALID_STRUCT)
    NAME(TRN_ERROR_INVALID_CONFIG)
    NAME(TRN_ERROR_UNSUPPORTED)
    NAME(TRN_ERROR_INVALID_KERNEL_ARG)
    NAME(TRN_ERROR_NOT_FOUND)
    NAME(TRN_ERROR_OUT_OF_HOST_MEMORY)
    NAME(TRN_ERROR_OUT_OF_DEVICE_MEMORY)
    NAME(TRN_ERROR_CORE_BUSY)
    NAME(TRN_ERROR_NOT_OWNER)
    NAME(TRN_ERROR_QUEUE_FULL)
    NAME(TRN_ERROR_TOO_MANY_PROCESSES)
    NAME(TRN_ERROR_HANDLE_IN_USE)
    NAME(TRN_ERROR_FILE)
    NAME(TRN_ERROR_NO_DEVICE)
    NAME(TRN_ERROR_PERMISSION_DENIED)
    NAME(TRN_ERROR_STATE_VERSION_MISMATCH)
    NAME(TRN_ERROR_STATE_CORRUPT)
    NAME(TRN_ERROR_DRIVER)
    NAME(TRN_ERROR_DEVICE_LOST)
    NAME(TRN_ERROR_DEVICE_FAULTED)
    NAME(TRN_ERROR_DRIVER_NOT_FOUND)
    NAME(TRN_ERROR_DRIVER_INCOMPATIBLE)
    NAME(TRN_ERROR_INVALID_KERNEL)
    NAME(TRN_ERROR_KERNEL_FAULT)
    NAME(TRN_ERROR_KERNEL_DEADLOCK)
    NAME(TRN_ERROR_CANCELLED)
    NAME(TRN_ERROR_COLLECTIVE)
    NAME(TRN_ERROR_INTERNAL)
#undef NAME
    default: return "unknown result";
  }
}

const std::string &driver_path() {
  static const std::string path = [] {
    const char *chosen = std::getenv("TRN_CONFORMANCE_DRIVER");
    return std::string(chosen && *chosen ? chosen : TRN_CONFORMANCE_DEFAULT_DRIVER);
  }();
  return path;
}

namespace {

struct Loaded {
  void *handle = nullptr;
  const trn_hal_ops_t *ops = nullptr;
  std::string why;
};

const Loaded &loaded() {
  static const Loaded l = [] {
    Loaded r;
    r.handle = dlopen(driver_path().c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!r.handle) {
      const char *e = dlerror();
      r.why = "dlopen(" + driver_path() + ") failed: " + (e ? e : "?");
      return r;
    }
    auto entry = reinterpret_cast<trn_hal_get_ops_fn>(dlsym(r.handle, TRN_HAL_ENTRY_POINT));
    if (!entry) {
      r.why = driver_path() + " does not export " TRN_HAL_ENTRY_POINT;
      return r;
    }
    r.ops = entry(TRN_HAL_VERSION);
    if (!r.ops) r.why = driver_path() + ": " TRN_HAL_ENTRY_POINT " returned NULL";
    return r;
  }();
  return l;
}

}  // namespace

const trn_hal_ops_t &table() {
  const Loaded &l = loaded();
  INFO(l.why);
  REQUIRE(l.ops != nullptr);
  return *l.ops;
}

const trn_hal_ops_t &ops() {
  const trn_hal_ops_t &t = table();
  static bool usable = false;  // checked once per process
  if (usable) return t;
  INFO(driver_path() << ": table version 0x" << std::hex << t.version << ", " << std::dec << t.size
                     << " bytes");
  // What this release's runtime accepts: its major, its minor or later, a table that large.
  REQUIRE(TRN_HAL_VERSION_MAJOR(t.version) == TRN_HAL_VERSION_MAJOR(TRN_HAL_VERSION));
  REQUIRE(TRN_HAL_VERSION_MINOR(t.version) >= TRN_HAL_VERSION_MINOR(TRN_HAL_VERSION));
  REQUIRE(t.size >= sizeof(trn_hal_ops_t));
  for (const auto &[name, fn] : operations(t)) {
    INFO("operation " << name << " is NULL");
    REQUIRE(fn != nullptr);
  }
  usable = true;
  return t;
}

std::vector<std::pair<const char *, const void *>> operations(const trn_hal_ops_t &t) {
  std::vector<std::pair<const char *, const void *>> v;
#define OP(name) v.emplace_back(#name, reinterpret_cast<const void *>(t.name))
  OP(open);
  OP(close);
  OP(abandon);
  OP(device_count);
  OP(status);
  OP(device_properties);
  OP(device_neighbors);
  OP(core_info);
  OP(core_claim);
  OP(core_unclaim);
  OP(core_owner);
  OP(process_list);
  OP(mem_reserve);
  OP(mem_release);
  OP(mem_map);
  OP(mem_write);
  OP(mem_read);
  OP(mem_register_host);
  OP(mem_unregister_host);
  OP(mem_account);
  OP(mem_export);
  OP(mem_import);
  OP(mem_unexport);
  OP(mem_bank_usage);
  OP(sem_create);
  OP(sem_import);
  OP(sem_destroy);
  OP(sem_query);
  OP(sem_value);
  OP(sem_signal);
  OP(sem_fail);
  OP(sem_wait);
  OP(sem_watch);
  OP(sem_close_watches);
  OP(kernel_load);
  OP(kernel_unload);
  OP(kernel_properties);
  OP(kernel_arg);
  OP(kernel_source_line);
  OP(queue_create);
  OP(queue_destroy);
  OP(queue_submit);
  OP(queue_status);
  OP(queue_reset);
  OP(device_time_ns);
  OP(queue_set_priority);
  OP(kernel_source_file);
  OP(sem_raise);
#undef OP
  return v;
}

uint64_t monotonic_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * kSecond + static_cast<uint64_t>(ts.tv_nsec);
}

PrivateRoot::PrivateRoot() {
  char pattern[] = "/dev/shm/trn-conformance-XXXXXX";
  REQUIRE(mkdtemp(pattern) != nullptr);
  path_ = pattern;
  setenv("TRN_SIM_ROOT", path_.c_str(), 1);
}

PrivateRoot::~PrivateRoot() {
  unsetenv("TRN_SIM_ROOT");
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

Instance::Instance() {
  const trn_hal_process_identity_t identity{"trn-driver-conformance", "0.2.0"};
  Err err;
  const trn_result_t r = ops().open(&identity, &instance_, &err);
  INFO("open: " << err.message);
  REQUIRE(r == TRN_SUCCESS);
  REQUIRE(instance_ != nullptr);
}

Instance::~Instance() {
  ops().close(instance_);
}

uint32_t Instance::device_count() const {
  return ops().device_count(instance_);
}

Claim::Claim(trn_hal_instance_t *instance, uint32_t device, uint32_t first, uint32_t count)
    : instance_(instance), device_(device), first_(first), count_(count) {
  Err err;
  uint32_t busy = UINT32_MAX;
  HAL_REQUIRE_OK(ops().core_claim(instance, device, first, count, &busy, &err), err);
}

Claim::~Claim() {
  Err err;
  ops().core_unclaim(instance_, device_, first_, count_, &err);
}

Range::Range(trn_hal_instance_t *instance, uint32_t device, uint64_t bytes, uint32_t bank)
    : instance_(instance), device_(device) {
  bytes_ = round_up(bytes, device_info(instance, device).chunk_bytes);
  Err err;
  HAL_REQUIRE_OK(ops().mem_reserve(instance, device, bank, bytes_, &address_, &err), err);
}

Range::~Range() {
  release();
}

void Range::release() {
  if (bytes_ == 0) return;
  Err err;
  ops().mem_release(instance_, device_, address_, bytes_, &err);
  bytes_ = 0;
}

HostBuffer::HostBuffer(trn_hal_instance_t *instance, uint32_t device, uint64_t bytes)
    : instance_(instance), device_(device), bytes_(round_up(bytes, 4096)) {
  data_ = static_cast<uint8_t *>(std::aligned_alloc(4096, bytes_));
  REQUIRE(data_ != nullptr);
  std::memset(data_, 0, bytes_);
  Err err;
  HAL_REQUIRE_OK(ops().mem_register_host(instance, device, data_, bytes_, &address_, &err), err);
}

HostBuffer::~HostBuffer() {
  Err err;
  ops().mem_unregister_host(instance_, device_, address_, &err);
  std::free(data_);
}

Sem::Sem(trn_hal_instance_t *instance, uint32_t device, uint64_t initial, uint32_t flags)
    : instance_(instance) {
  Err err;
  HAL_REQUIRE_OK(ops().sem_create(instance, device, initial, flags, &sem_, &record_, &id_, &err),
                 err);
  REQUIRE(sem_ != nullptr);
}

Sem::~Sem() {
  ops().sem_destroy(instance_, sem_);
}

trn_hal_sem_state_t Sem::state() const {
  trn_hal_sem_state_t s;
  std::memset(&s, 0, sizeof s);
  ops().sem_query(sem_, &s);
  return s;
}

Queue::Queue(trn_hal_instance_t *instance, uint32_t device, trn_hal_queue_kind_t kind,
             uint32_t capacity, uint32_t first, uint32_t count, uint32_t dma_engines)
    : instance_(instance), device_(device) {
  Err err;
  HAL_REQUIRE_OK(ops().queue_create(instance, device, first, count, kind, capacity, dma_engines,
                                    &queue_, &err),
                 err);
  REQUIRE(queue_ != nullptr);
}

Queue::~Queue() {
  destroy();
}

void Queue::destroy() {
  if (!queue_) return;
  ops().queue_destroy(instance_, queue_);
  queue_ = nullptr;
}

trn_hal_queue_status_t Queue::status() const {
  trn_hal_queue_status_t s;
  std::memset(&s, 0, sizeof s);
  ops().queue_status(queue_, &s);
  return s;
}

trn_result_t Queue::try_submit(const std::vector<trn_hal_command_t> &commands, Err &err,
                               const char *label, uint64_t tag) {
  trn_hal_submission_t s;
  std::memset(&s, 0, sizeof s);
  s.commands = commands.data();
  s.command_count = static_cast<uint32_t>(commands.size());
  s.label = label;
  s.tag = tag;
  err.clear();
  return ops().queue_submit(queue_, &s, &err);
}

void Queue::submit(const std::vector<trn_hal_command_t> &commands, const char *label,
                   uint64_t tag) {
  Err err;
  HAL_REQUIRE_OK(try_submit(commands, err, label, tag), err);
}

bool Queue::wait_retired(uint64_t retired, uint64_t timeout_ns) const {
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  for (;;) {
    if (status().retired >= retired) return true;
    if (monotonic_ns() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

void Queue::run(std::vector<trn_hal_command_t> commands, const char *label) {
  Sem done(instance_, device_, 0);
  commands.push_back(signal_command(done, 1));
  submit(commands, label);
  const trn_result_t r = ops().sem_wait(done, 1, kLong);
  const auto st = status();
  INFO("queue fault: " << st.fault.reason);
  REQUIRE(r == TRN_SUCCESS);
  CHECK(st.fault.result == TRN_SUCCESS);
  REQUIRE(wait_retired(st.submitted));  // before `done` goes
}

trn_hal_command_t HostCalls::command(uint32_t index, trn_result_t result, const char *message) {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_.push_back(std::make_unique<Slot>(Slot{this, index, result, message}));
  trn_hal_command_t c;
  std::memset(&c, 0, sizeof c);
  c.kind = TRN_HAL_COMMAND_HOST_CALL;
  c.u.host_call.fn = &HostCalls::trampoline;
  c.u.host_call.user = slots_.back().get();
  return c;
}

trn_result_t HostCalls::trampoline(void *user, trn_result_t status, trn_hal_error_t *err) {
  auto *slot = static_cast<Slot *>(user);
  {
    std::lock_guard<std::mutex> lock(slot->owner->mutex_);
    slot->owner->calls_.push_back(Call{slot->index, status});
  }
  if (status == TRN_SUCCESS && slot->result != TRN_SUCCESS && err) {
    std::snprintf(err->message, sizeof err->message, "%s", slot->message.c_str());
  }
  return slot->result;
}

std::vector<HostCalls::Call> HostCalls::calls() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return calls_;
}

size_t HostCalls::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return calls_.size();
}

bool HostCalls::wait_count(size_t n, uint64_t timeout_ns) const {
  const uint64_t deadline = monotonic_ns() + timeout_ns;
  for (;;) {
    if (count() >= n) return true;
    if (monotonic_ns() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

ChildProcess::ChildProcess(const std::function<char()> &body) {
  int up[2], down[2];
  REQUIRE(pipe(up) == 0);
  REQUIRE(pipe(down) == 0);
  pid_ = fork();
  REQUIRE(pid_ >= 0);
  if (pid_ == 0) {
    close(up[0]);
    close(down[1]);
    char status = 'E';
    try {
      status = body();
    } catch (...) {
      status = 'X';
    }
    if (write(up[1], &status, 1) != 1) _exit(2);
    char go = 0;
    if (read(down[0], &go, 1) < 0) _exit(3);
    _exit(0);
  }
  close(up[1]);
  close(down[0]);
  up_ = up[0];
  down_ = down[1];
}

ChildProcess::~ChildProcess() {
  release();
  if (up_ >= 0) close(up_);
}

char ChildProcess::status() {
  if (have_status_) return status_;
  have_status_ = true;
  pollfd p{up_, POLLIN, 0};
  if (poll(&p, 1, 10000) == 1 && read(up_, &status_, 1) == 1) return status_;
  status_ = 0;
  return status_;
}

bool ChildProcess::release() {
  if (pid_ <= 0) return false;
  if (down_ >= 0) close(down_);
  down_ = -1;
  int wstatus = 0;
  const pid_t got = waitpid(pid_, &wstatus, 0);
  pid_ = -1;
  return got > 0 && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
}

namespace {
trn_hal_command_t blank(uint32_t kind) {
  trn_hal_command_t c;
  std::memset(&c, 0, sizeof c);
  c.kind = kind;
  return c;
}
}  // namespace

trn_hal_command_t copy_command(uint64_t destination, uint64_t source, uint64_t bytes) {
  auto c = blank(TRN_HAL_COMMAND_COPY);
  c.u.copy.destination = destination;
  c.u.copy.source = source;
  c.u.copy.bytes = bytes;
  return c;
}

trn_hal_command_t file_command(uint32_t kind, int fd, uint64_t file_offset, uint64_t device_address,
                               uint64_t bytes) {
  auto c = blank(kind);
  c.u.file.fd = fd;
  c.u.file.file_offset = file_offset;
  c.u.file.device_address = device_address;
  c.u.file.bytes = bytes;
  return c;
}

trn_hal_command_t memset_command(uint64_t destination, uint64_t bytes, uint32_t value) {
  auto c = blank(TRN_HAL_COMMAND_MEMSET);
  c.u.memset.destination = destination;
  c.u.memset.bytes = bytes;
  c.u.memset.value = value;
  return c;
}

trn_hal_command_t wait_command(trn_hal_sem_t *sem, uint64_t value) {
  auto c = blank(TRN_HAL_COMMAND_SEM_WAIT);
  c.u.sem.sem = sem;
  c.u.sem.value = value;
  return c;
}

trn_hal_command_t signal_command(trn_hal_sem_t *sem, uint64_t value) {
  auto c = blank(TRN_HAL_COMMAND_SEM_SIGNAL);
  c.u.sem.sem = sem;
  c.u.sem.value = value;
  return c;
}

trn_hal_command_t reduce_command(uint64_t destination, uint64_t a, uint64_t b, uint32_t count,
                                 uint32_t dtype, uint32_t op) {
  auto c = blank(TRN_HAL_COMMAND_REDUCE);
  c.u.reduce.destination = destination;
  c.u.reduce.a = a;
  c.u.reduce.b = b;
  c.u.reduce.count = count;
  c.u.reduce.dtype = static_cast<uint16_t>(dtype);
  c.u.reduce.op = static_cast<uint16_t>(op);
  return c;
}

trn_hal_command_t timestamp_command(uint64_t destination) {
  auto c = blank(TRN_HAL_COMMAND_TIMESTAMP);
  c.u.timestamp.destination = destination;
  return c;
}

trn_hal_command_t launch_command(trn_hal_kernel_t *kernel, const trn_hal_binding_t *args,
                                 uint32_t arg_count, trn_hal_run_result_t *result) {
  auto c = blank(TRN_HAL_COMMAND_LAUNCH);
  c.u.launch.kernel = kernel;
  c.u.launch.args = args;
  c.u.launch.arg_count = arg_count;
  c.u.launch.result = result;
  return c;
}

trn_hal_core_info_t first_core(trn_hal_instance_t *instance, uint32_t device) {
  trn_hal_core_info_t info;
  std::memset(&info, 0, sizeof info);
  Err err;
  HAL_REQUIRE_OK(ops().core_info(instance, device, 1, 0, &info, &err), err);
  return info;
}

trn_hal_device_info_t device_info(trn_hal_instance_t *instance, uint32_t device) {
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  trn_hal_device_info_t info;
  std::memset(&info, 0, sizeof info);
  Err err;
  HAL_REQUIRE_OK(ops().device_properties(instance, device, &p, &info, &err), err);
  REQUIRE(info.chunk_bytes > 0);
  return info;
}

trn_device_properties_t device_properties(trn_hal_instance_t *instance, uint32_t device) {
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  trn_hal_device_info_t info;
  std::memset(&info, 0, sizeof info);
  Err err;
  HAL_REQUIRE_OK(ops().device_properties(instance, device, &p, &info, &err), err);
  return p;
}

uint64_t round_up(uint64_t bytes, uint64_t granule) {
  if (granule == 0) return bytes;
  return (bytes + granule - 1) / granule * granule;
}

std::vector<uint8_t> pattern(size_t bytes, uint32_t seed) {
  std::vector<uint8_t> v(bytes);
  uint32_t x = seed * 2654435761u + 1;
  for (auto &b : v) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    b = static_cast<uint8_t>(x);
  }
  return v;
}

std::vector<uint8_t> read_device(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                                 uint64_t bytes) {
  std::vector<uint8_t> v(bytes, 0xEE);
  Err err;
  HAL_REQUIRE_OK(ops().mem_read(instance, device, address, v.data(), bytes, &err), err);
  return v;
}

void write_device(trn_hal_instance_t *instance, uint32_t device, uint64_t address,
                  const std::vector<uint8_t> &bytes) {
  Err err;
  HAL_REQUIRE_OK(ops().mem_write(instance, device, address, bytes.data(), bytes.size(), &err), err);
}

int64_t first_difference(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return static_cast<int64_t>(i);
  if (a.size() != b.size()) return static_cast<int64_t>(n);
  return -1;
}

}  // namespace conformance
