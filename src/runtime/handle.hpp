// Handles are never pointers: a handle's value packs a generation, a kind and a slot, and every
// use decodes and checks all three before touching anything. A stale handle (its runtime was
// shut down, or its object destroyed), a handle of another kind, or garbage is rejected with
// TRN_ERROR_INVALID_HANDLE and never dereferenced.
//
//   bits 63..32  generation (never 0, never reused)
//   bits 31..24  kind
//   bits 23..0   slot
#pragma once

#include <atomic>
#include <cstdint>

#include "trn/trn.h"

namespace trn::rt {

enum class HandleKind : uint8_t {
  driver = 1,
  device = 2,
  core = 3,
  pool = 4,
  mem = 5,
  sem = 6,
  queue = 7,
  kernel = 8,
  profile = 9,
  program = 10,
  tensor_set = 11
};

constexpr uint32_t kMaxHandleSlot = (1u << 24) - 1;

inline uint64_t encode_handle(uint32_t generation, HandleKind kind, uint32_t slot) {
  return (uint64_t{generation} << 32) | (uint64_t{static_cast<uint8_t>(kind)} << 24) |
         (slot & kMaxHandleSlot);
}

struct DecodedHandle {
  uint32_t generation;
  HandleKind kind;
  uint32_t slot;
};

inline DecodedHandle decode_handle(uint64_t value) {
  return {static_cast<uint32_t>(value >> 32), static_cast<HandleKind>((value >> 24) & 0xffu),
          static_cast<uint32_t>(value & kMaxHandleSlot)};
}

// A fresh generation for a runtime session or a created object; process-wide, never reused.
inline uint32_t next_handle_generation() {
  static std::atomic<uint32_t> counter{0x5a17};  // not 0 or 1, so small integers never match
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

template <typename Handle>
Handle to_handle(uint64_t value) {
  return reinterpret_cast<Handle>(static_cast<uintptr_t>(value));
}

template <typename Handle>
uint64_t from_handle(Handle handle) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(handle));
}

const char *handle_kind_name(HandleKind kind);

// Records and returns the error for a value that is not a live handle of `expected` kind
// (NULL, another kind, stale or garbage), saying which.
trn_result_t invalid_handle(HandleKind expected, uint64_t value);

}  // namespace trn::rt
