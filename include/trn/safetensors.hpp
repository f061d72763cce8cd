// safetensors checkpoints on trn (C++17 and later): a reader that validates a file's header and
// loads all or some of its tensors into device memory through trn_queue_read_file, and a writer
// that saves device memory as a checkpoint through trn_queue_write_file. A layer above the C API
// (library trn_safetensors): it uses trn/trn.h only.
//
// The format (https://github.com/huggingface/safetensors): an 8-byte little-endian length N, N
// bytes of JSON — an object mapping each tensor's name to {"dtype", "shape", "data_offsets":
// [begin, end]}, plus an optional "__metadata__" object of strings — then the data section,
// which the tensors' ranges cover exactly (no overlap, no hole, no name twice). The reader
// refuses anything else with a message naming the tensor and the field. Every dtype of the
// format loads: those trn has a type for as that type (F64 and I64 as trn's host dtypes, BOOL as
// U8 holding 0 or 1, as PyTorch stores it and trn's PyTorch backend holds it); the others (U16,
// U32, U64, F8_E8M0, C64 and the packed F4, F6_E2M3, F6_E3M2) as their bytes, exactly, with
// `kNoDtype` for their trn dtype and the file's name kept in `dtype_name`.
// Only a regular file is read (a pipe has no offsets to read tensors at).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "trn/trn.h"

namespace trn::safetensors {

// Every failure: a malformed file (what and where), or a trn call's error (its result and
// trn_last_error, or the queue's fault).
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string &what, trn_result_t result = TRN_ERROR_INVALID_ARGUMENT)
      : std::runtime_error(what), result_(result) {}
  trn_result_t result() const { return result_; }

 private:
  trn_result_t result_;
};

// The largest header the reader accepts (the reference implementation's limit).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// The trn dtype of a tensor whose safetensors dtype trn has no type for (U16, U32, U64,
// F8_E8M0, C64, F4, F6_E2M3, F6_E3M2): its bytes load as they are, typed by `dtype_name` alone.
constexpr trn_dtype_t kNoDtype = static_cast<trn_dtype_t>(0);

struct TensorInfo {
  std::string name;
  std::string dtype_name;             // as in the file: "F32", "BF16", "BOOL", "U32", ...
  trn_dtype_t dtype = TRN_DTYPE_F32;  // what holds it on trn: U8 for BOOL; kNoDtype (bytes only)
  std::vector<uint64_t> shape;
  uint64_t begin = 0, end = 0;  // data_offsets: bytes of the data section
  uint64_t bytes() const { return end - begin; }
};

struct Header {
  uint64_t header_bytes = 0;        // N
  uint64_t data_offset = 0;         // where the data section starts in the file: 8 + N
  uint64_t data_bytes = 0;          // the data section's size
  std::vector<TensorInfo> tensors;  // by data offset
  std::map<std::string, std::string> metadata;
  // The tensor called `name`, or nullptr.
  const TensorInfo *find(std::string_view name) const;
};

// The trn dtype a safetensors dtype name loads as (TRN_DTYPE_U8 for "BOOL"); false for names
// trn has no type for (their tensors load as bytes, dtype kNoDtype) and names that are no
// safetensors dtype.
bool dtype_from_name(std::string_view name, trn_dtype_t *dtype);
// The safetensors name of a trn dtype ("F8_E4M3" for TRN_DTYPE_FP8_E4M3, "U8" for TRN_DTYPE_U8);
// nullptr for kNoDtype and any value that is no trn dtype a safetensors file can hold.
const char *dtype_to_name(trn_dtype_t dtype);
// Bits per element of a safetensors dtype name (4 for "F4", 6 for "F6_E2M3", 32 for "U32"); 0
// for a name that is no safetensors dtype.
uint32_t dtype_bits(std::string_view name);
// The bytes a tensor of `shape` in safetensors dtype `dtype_name` takes (bits per element times
// elements). Throws Error when the name is no safetensors dtype, the size passes 2^64, or packed
// elements (F4, F6) do not fill whole bytes.
uint64_t tensor_bytes(const std::vector<uint64_t> &shape, std::string_view dtype_name);

// A shape as messages and listings write it: "[2, 3]" ("[]" for a scalar).
std::string shape_text(const std::vector<uint64_t> &shape);

// Validates a header from a file's first bytes. `bytes` holds at least the first 8 + N bytes of
// the file (fewer is an error only if the file is shorter too); `file_size` is the whole file's.
Header parse_header(const uint8_t *bytes, size_t size, uint64_t file_size);
// Reads and validates the header of an open file.
Header read_header(int fd);

struct LoadOptions {
  std::vector<std::string> names;  // the tensors to load; empty: all
  // Called on the calling thread as reads complete: bytes loaded so far of `total`.
  std::function<void(uint64_t loaded, uint64_t total)> progress;
};

struct LoadedTensor {
  TensorInfo info;
  uint64_t offset = 0;  // where it lies in the arena
};

// Tensors loaded into one allocation (the arena), freed with it. Each tensor keeps the phase its
// data has in the file modulo 4096 bytes, so that most of every read goes straight from storage
// with O_DIRECT; tensors next to each other in the file are read together.
class Loaded {
 public:
  Loaded() = default;
  ~Loaded();
  Loaded(Loaded &&other) noexcept;
  Loaded &operator=(Loaded &&other) noexcept;
  Loaded(const Loaded &) = delete;
  Loaded &operator=(const Loaded &) = delete;

  trn_mem_t arena() const { return arena_; }
  const std::vector<LoadedTensor> &tensors() const { return tensors_; }
  const std::map<std::string, std::string> &metadata() const { return metadata_; }
  const LoadedTensor *find(std::string_view name) const;
  // Gives the arena up to the caller (who frees it with trn_mem_free); the object forgets it.
  trn_mem_t release();

 private:
  friend Loaded load(int, const Header &, trn_pool_t, trn_queue_t, const LoadOptions &);
  trn_mem_t arena_ = nullptr;
  std::vector<LoadedTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Loads tensors of an open file whose header is `header` into one allocation from `pool`
// through `queue`, and waits for them. A name that is not in the file, a file whose size is not
// the one the header was read from (another file, or one changed since), a file cut short while
// it loads, or any trn failure throws Error (nothing stays allocated). A failed read leaves `queue`
// in its error state, as any failed command does: trn_queue_finish, then trn_queue_reset it before
// using it again (a queue still failed is refused, naming its fault, by load and save alike).
Loaded load(int fd, const Header &header, trn_pool_t pool, trn_queue_t queue,
            const LoadOptions &options = {});

// One tensor to save: its shape's bytes of `mem` at `offset`.
struct SaveTensor {
  std::string name;
  trn_dtype_t dtype = TRN_DTYPE_F32;
  std::vector<uint64_t> shape;
  trn_mem_t mem = nullptr;
  uint64_t offset = 0;
  // The dtype the file names, when not dtype's own name: "BOOL" for a U8 tensor of 0s and 1s
  // (the caller's to ensure: the bytes are written as they are), "U32" (with dtype kNoDtype) for
  // bytes loaded from such a tensor. It must be a safetensors dtype that loads as `dtype` (a
  // loaded TensorInfo's dtype and dtype_name pass as they are); it sets the tensor's size (bits
  // per element times elements, in whole bytes).
  std::string dtype_name = {};
};

// Saves tensors as a safetensors file at `path` through `queue`, in the order given (names must
// be unique and not "__metadata__"; each shape's bytes must lie inside its memory). The file
// appears only complete: it is written beside `path`, flushed to storage (fdatasync), renamed
// over it, and the directory flushed where the file system can, so that a crash leaves the old
// checkpoint or the new one. Storage that fails to flush the directory is an Error thrown with
// the new checkpoint already in place (the message says so).
void save(const std::string &path, const std::vector<SaveTensor> &tensors,
          const std::map<std::string, std::string> &metadata, trn_queue_t queue);

}  // namespace trn::safetensors
