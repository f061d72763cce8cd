// Loading a safetensors file's tensors into device memory and saving device memory as one,
// through the queue-ordered file calls of the C API.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "trn/safetensors.hpp"

namespace trn::safetensors {

namespace {

// The rename itself on storage: the directory's entry is flushed like the file's bytes, where
// that can be done. A directory this process may write but not read (a drop box) cannot be
// opened, and some file systems cannot flush one (EINVAL, ENOTSUP, ENOSYS): they keep their
// entries by their own means. Only the storage failing to write is an error.
void sync_directory_of(const std::string &path) {
  std::string dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  const int r = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (r != 0 && (error == EIO || error == ENOSPC || error == EDQUOT))
    throw Error("safetensors: the checkpoint is at '" + path + "', but its directory '" + dir +
                    "' could not be flushed to storage (a crash could lose the new name): " +
                    std::strerror(error),
                TRN_ERROR_FILE);
}

constexpr uint64_t kPhase = 4096;  // what O_DIRECT needs to agree between file and memory
constexpr uint64_t kReadPiece = 64ull << 20;   // bytes per read command (progress granularity)
constexpr uint64_t kWaitNs = 600'000'000'000;  // a command that takes longer is stuck

[[noreturn]] void trn_failed(const std::string &call, trn_result_t result) {
  throw Error(
      "safetensors: " + call + " failed: " + trn_result_name(result) + ": " + trn_last_error(),
      result);
}

void check(trn_result_t result, const std::string &call) {
  if (result != TRN_SUCCESS) trn_failed(call, result);
}

// The queue's fault record, when it is in its error state.
std::optional<trn_queue_fault_t> fault_of(trn_queue_t queue) {
  trn_queue_fault_t fault = TRN_QUEUE_FAULT_INIT;
  if (trn_queue_get_fault(queue, &fault) == TRN_SUCCESS && fault.result != TRN_SUCCESS)
    return fault;
  return std::nullopt;
}

// "read file #46 failed: <reason>"
std::string fault_text(const trn_queue_fault_t &fault) {
  return std::string(fault.command) + " #" + std::to_string(fault.sequence) +
         " failed: " + fault.reason;
}

// The queue's fault as an error, if it has one; else the result of waiting.
[[noreturn]] void queue_failed(trn_queue_t queue, trn_result_t result) {
  if (const auto fault = fault_of(queue))
    throw Error("safetensors: " + fault_text(*fault), fault->result);
  trn_failed("waiting for the queue", result);
}

// A queue in its error state cancels every command until it is reset: its old fault would come
// back as this call's, naming another file.
void refuse_failed_queue(trn_queue_t queue) {
  if (const auto fault = fault_of(queue))
    throw Error("safetensors: the queue failed earlier (" + fault_text(*fault) +
                    ") and cancels every command until it is reset: trn_queue_finish it, then "
                    "trn_queue_reset",
                fault->result);
}

// Submits a queue-ordered call; a full queue first lets its oldest command complete.
template <typename Submit>
uint64_t submit(trn_queue_t queue, const std::string &call, Submit submit_call) {
  for (;;) {
    uint64_t sequence = 0;
    const trn_result_t r = submit_call(&sequence);
    if (r == TRN_SUCCESS) return sequence;
    if (r != TRN_ERROR_QUEUE_FULL) trn_failed(call, r);
    const trn_result_t waited = trn_queue_finish(queue, kWaitNs);
    if (waited != TRN_SUCCESS) queue_failed(queue, waited);
  }
}

void finish(trn_queue_t queue) {
  const trn_result_t r = trn_queue_finish(queue, kWaitNs);
  if (r != TRN_SUCCESS) queue_failed(queue, r);
}

// An allocation freed unless kept.
class Allocation {
 public:
  explicit Allocation(trn_mem_t mem) : mem_(mem) {}
  ~Allocation() {
    if (mem_) trn_mem_free(mem_);
  }
  Allocation(const Allocation &) = delete;
  Allocation &operator=(const Allocation &) = delete;
  trn_mem_t get() const { return mem_; }
  trn_mem_t keep() { return std::exchange(mem_, nullptr); }

 private:
  trn_mem_t mem_;
};

std::vector<const TensorInfo *> select(const Header &header,
                                       const std::vector<std::string> &names) {
  std::vector<const TensorInfo *> out;
  if (names.empty()) {
    for (const TensorInfo &t : header.tensors) out.push_back(&t);
    return out;
  }
  std::set<const TensorInfo *> chosen;
  for (const std::string &name : names) {
    const TensorInfo *t = header.find(name);
    if (!t)
      throw Error("safetensors: no tensor '" + name + "' in the file (it has " +
                  std::to_string(header.tensors.size()) + " tensors)");
    chosen.insert(t);
  }
  for (const TensorInfo &t : header.tensors)  // in file order
    if (chosen.count(&t)) out.push_back(&t);
  return out;
}

// The dtype name a tensor is saved under, checked against its trn dtype.
std::string saved_dtype_name(const SaveTensor &t) {
  if (t.dtype_name.empty()) {
    const char *name = dtype_to_name(t.dtype);
    if (!name)
      throw Error("safetensors: tensor '" + t.name + "' has dtype " + std::to_string(t.dtype) +
                  ", which is not a trn dtype (for bytes of a dtype trn has no type for, give "
                  "dtype_name)");
    return name;
  }
  if (dtype_bits(t.dtype_name) == 0)
    throw Error("safetensors: tensor '" + t.name + "': dtype_name '" + t.dtype_name +
                "' is not a safetensors dtype");
  trn_dtype_t loads_as = kNoDtype;
  dtype_from_name(t.dtype_name, &loads_as);
  auto named = [](trn_dtype_t d) {
    return d == kNoDtype ? std::string("kNoDtype (bytes only)") : trn_dtype_name(d);
  };
  if (loads_as != t.dtype)
    throw Error("safetensors: tensor '" + t.name + "': dtype_name " + t.dtype_name + " loads as " +
                named(loads_as) + ", but the tensor's dtype is " + named(t.dtype));
  return t.dtype_name;
}

}  // namespace

Loaded::~Loaded() {
  if (arena_) trn_mem_free(arena_);
}

Loaded::Loaded(Loaded &&other) noexcept
    : arena_(std::exchange(other.arena_, nullptr)),
      tensors_(std::move(other.tensors_)),
      metadata_(std::move(other.metadata_)) {}

Loaded &Loaded::operator=(Loaded &&other) noexcept {
  if (this != &other) {
    if (arena_) trn_mem_free(arena_);
    arena_ = std::exchange(other.arena_, nullptr);
    tensors_ = std::move(other.tensors_);
    metadata_ = std::move(other.metadata_);
  }
  return *this;
}

const LoadedTensor *Loaded::find(std::string_view name) const {
  for (const LoadedTensor &t : tensors_)
    if (t.info.name == name) return &t;
  return nullptr;
}

trn_mem_t Loaded::release() {
  return std::exchange(arena_, nullptr);
}

Loaded load(int fd, const Header &header, trn_pool_t pool, trn_queue_t queue,
            const LoadOptions &options) {
  const std::vector<const TensorInfo *> chosen = select(header, options.names);
  refuse_failed_queue(queue);
  // The header must be this file's as it is now: another file, or one that grew or shrank since
  // the header was read, would load bytes that are not the tensors (one cut short while the
  // reads run fails them instead).
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    throw Error(std::string("safetensors: cannot stat the file: ") + std::strerror(errno),
                TRN_ERROR_FILE);
  if (static_cast<uint64_t>(st.st_size) != header.data_offset + header.data_bytes)
    throw Error("safetensors: the file is " + std::to_string(st.st_size) +
                    " bytes, but its header was read from one of " +
                    std::to_string(header.data_offset + header.data_bytes) +
                    " bytes: another file, or one changed since (read the header again)",
                TRN_ERROR_FILE);
  // Places: each tensor at the next offset with its file offset's phase; neighbours in the file
  // stay neighbours.
  Loaded out;
  uint64_t end = 0, total = 0;
  for (const TensorInfo *t : chosen) {
    const uint64_t phase = (header.data_offset + t->begin) % kPhase;
    const uint64_t at = end + (phase + kPhase - end % kPhase) % kPhase;
    out.tensors_.push_back({*t, at});
    end = at + t->bytes();
    total += t->bytes();
  }
  trn_mem_t arena = nullptr;
  check(
      trn_mem_alloc(pool, std::max<uint64_t>(end, 1), kPhase, TRN_MEM_CATEGORY_TENSORS, 0, &arena),
      "trn_mem_alloc of " + std::to_string(end) + " bytes for the tensors");
  Allocation hold(arena);
  // Reads: runs of tensors next to each other in the file and in the arena, in pieces.
  struct Read {
    uint64_t arena, file, bytes, sequence = 0;
  };
  std::vector<Read> reads;
  for (const LoadedTensor &t : out.tensors_) {
    const uint64_t file = header.data_offset + t.info.begin;
    if (!reads.empty() && reads.back().arena + reads.back().bytes == t.offset &&
        reads.back().file + reads.back().bytes == file)
      reads.back().bytes += t.info.bytes();
    else
      reads.push_back({t.offset, file, t.info.bytes()});
  }
  std::vector<Read> pieces;
  for (const Read &r : reads)
    for (uint64_t at = 0; at < r.bytes; at += kReadPiece)
      pieces.push_back({r.arena + at, r.file + at, std::min(kReadPiece, r.bytes - at)});
  for (Read &p : pieces)
    p.sequence = submit(queue, "trn_queue_read_file", [&](uint64_t *sequence) {
      return trn_queue_read_file(queue, arena, p.arena, fd, p.file, p.bytes, nullptr, sequence);
    });
  if (options.progress) {
    trn_sem_t timeline = nullptr;
    check(trn_queue_get_semaphore(queue, &timeline), "trn_queue_get_semaphore");
    uint64_t loaded = 0;
    options.progress(0, total);
    for (const Read &p : pieces) {
      if (const trn_result_t r = trn_sem_wait(timeline, p.sequence, kWaitNs); r != TRN_SUCCESS)
        queue_failed(queue, r);
      loaded += p.bytes;
      options.progress(loaded, total);
    }
  }
  finish(queue);
  out.metadata_ = header.metadata;
  out.arena_ = hold.keep();
  return out;
}

void save(const std::string &path, const std::vector<SaveTensor> &tensors,
          const std::map<std::string, std::string> &metadata, trn_queue_t queue) {
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  if (!metadata.empty()) doc["__metadata__"] = metadata;
  std::set<std::string> names;
  std::vector<uint64_t> sizes;
  uint64_t at = 0;
  for (const SaveTensor &t : tensors) {
    if (t.name == "__metadata__" || !names.insert(t.name).second)
      throw Error("safetensors: tensor name '" + t.name + "' is " +
                  (t.name == "__metadata__" ? "reserved" : "given twice"));
    const std::string dtype = saved_dtype_name(t);
    if (!t.mem) throw Error("safetensors: tensor '" + t.name + "' names no memory (NULL)");
    uint64_t bytes = 0;
    try {
      bytes = tensor_bytes(t.shape, dtype);
    } catch (const Error &e) {
      throw Error("safetensors: tensor '" + t.name + "': " + e.what());
    }
    // Every tensor is checked before the file is made and anything is queued: a write refused
    // half-way would leave the earlier ones queued on a descriptor about to be closed.
    trn_mem_info_t info = TRN_MEM_INFO_INIT;
    check(trn_mem_get_info(t.mem, &info), "tensor '" + t.name + "': trn_mem_get_info");
    if (t.offset > info.size || bytes > info.size - t.offset)
      throw Error("safetensors: tensor '" + t.name + "' is " + std::to_string(bytes) +
                      " bytes at offset " + std::to_string(t.offset) + " of an allocation of " +
                      std::to_string(info.size) + " bytes: it runs past the allocation's end",
                  TRN_ERROR_OUT_OF_RANGE);
    doc[t.name] = {{"dtype", dtype}, {"shape", t.shape}, {"data_offsets", {at, at + bytes}}};
    sizes.push_back(bytes);
    at += bytes;
  }
  std::string text;
  try {
    text = doc.dump();
  } catch (const nlohmann::json::exception &e) {
    throw Error(std::string("safetensors: a tensor name or a metadata key or value is not UTF-8 "
                            "text, which the header's JSON must be: ") +
                e.what());
  }
  refuse_failed_queue(queue);  // before the file is made
  // The data section starts 8-byte aligned: the header is padded with spaces, as the format
  // allows.
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string partial = path + ".partial-XXXXXX";
  const int fd = ::mkstemp(partial.data());
  if (fd < 0)
    throw Error("safetensors: cannot create a file beside '" + path + "': " + std::strerror(errno),
                TRN_ERROR_FILE);
  auto fail = [&](const Error &e) {
    // The writes queued before the failure use the descriptor until they end: never closed
    // under them (its number could name another file by then).
    if (trn_queue_finish(queue, kWaitNs) != TRN_TIMEOUT) ::close(fd);
    ::unlink(partial.c_str());
    throw e;
  };
  try {
    uint8_t length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(text.size() >> (8 * i));
    std::string head(reinterpret_cast<const char *>(length), 8);
    head += text;
    if (::pwrite(fd, head.data(), head.size(), 0) != static_cast<ssize_t>(head.size()))
      throw Error(
          "safetensors: cannot write the header to '" + partial + "': " + std::strerror(errno),
          TRN_ERROR_FILE);
    uint64_t offset = head.size();
    for (size_t i = 0; i < tensors.size(); ++i) {
      if (sizes[i] > 0)
        submit(queue, "trn_queue_write_file of tensor '" + tensors[i].name + "'",
               [&](uint64_t *sequence) {
                 return trn_queue_write_file(queue, fd, offset, tensors[i].mem, tensors[i].offset,
                                             sizes[i], nullptr, sequence);
               });
      offset += sizes[i];
    }
    finish(queue);
    if (::fchmod(fd, 0644) != 0)
      throw Error("safetensors: cannot make '" + partial + "' readable: " + std::strerror(errno),
                  TRN_ERROR_FILE);
    // On storage before it takes the name: a crash after the rename must not leave a checkpoint
    // whose bytes never reached the disk under the name of a good one.
    if (::fdatasync(fd) != 0)
      throw Error("safetensors: cannot flush '" + partial + "' to storage: " + std::strerror(errno),
                  TRN_ERROR_FILE);
  } catch (const Error &e) {
    fail(e);
  }
  if (::close(fd) != 0 || ::rename(partial.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(partial.c_str());
    throw Error("safetensors: cannot put the checkpoint at '" + path + "': " + why, TRN_ERROR_FILE);
  }
  sync_directory_of(path);
}

}  // namespace trn::safetensors
