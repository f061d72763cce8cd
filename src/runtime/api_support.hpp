// Checks and copies shared by the C entry points: versioned output structs and two-call
// enumeration are done one way everywhere.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/error.hpp"
#include "runtime/session.hpp"
#include "trn/trn.h"

namespace trn::rt {

// In an entry point: declares `result` and `name` (the current session), or returns why there is
// no session.
#define TRN_GET_SESSION(name)                          \
  trn_result_t result;                                 \
  ::trn::rt::Session *name = current_session(&result); \
  if (!name) return result

// Accepts a struct whose header was set by its *_INIT macro (or by an older or newer header:
// any size at least as big as the header).
template <typename T>
trn_result_t check_struct(const T *value, trn_struct_type_t type, const char *name,
                          const char *init_macro) {
  if (value == nullptr) return fail(TRN_ERROR_NULL_POINTER, std::string(name) + " is NULL");
  if (value->header.type != type || value->header.size < sizeof(trn_struct_header_t))
    return fail(TRN_ERROR_INVALID_STRUCT, std::string(name) + " has type tag " +
                                              std::to_string(value->header.type) + " and size " +
                                              std::to_string(value->header.size) +
                                              ": initialise it with " + init_macro);
  return TRN_SUCCESS;
}

// The first `n` elements of a caller's array of structs, checked before any is written. The
// elements are as big as the caller's header says (a program built against an older trn.h has
// smaller ones): the array steps by element 0's size, and every element must have that size.
template <typename T>
trn_result_t caller_elements(T *array, uint32_t n, trn_struct_type_t type, const char *name,
                             const char *init_macro, std::vector<T *> *out) {
  out->clear();
  if (n == 0) return TRN_SUCCESS;
  const std::string first = std::string(name) + "[0]";
  if (trn_result_t r = check_struct(array, type, first.c_str(), init_macro); r != TRN_SUCCESS)
    return r;
  const uint32_t stride = array->header.size;
  if (stride % alignof(T) != 0)
    return fail(TRN_ERROR_INVALID_STRUCT, first + " has size " + std::to_string(stride) +
                                              ", not a whole number of its fields: initialise it "
                                              "with " +
                                              init_macro);
  for (uint32_t i = 0; i < n; ++i) {
    T *at = reinterpret_cast<T *>(reinterpret_cast<char *>(array) + size_t{stride} * i);
    const std::string element = std::string(name) + "[" + std::to_string(i) + "]";
    if (trn_result_t r = check_struct(at, type, element.c_str(), init_macro); r != TRN_SUCCESS)
      return r;
    if (at->header.size != stride)
      return fail(TRN_ERROR_INVALID_STRUCT, element + " has size " +
                                                std::to_string(at->header.size) + " but " + first +
                                                " has " + std::to_string(stride) +
                                                ": initialise every element with " + init_macro);
    out->push_back(at);
  }
  return TRN_SUCCESS;
}

// Writes `full` into `*out`, at most out->header.size bytes, keeping the caller's header.
template <typename T>
void copy_struct(const T &full, T *out) {
  const uint32_t size = std::min<uint32_t>(out->header.size, sizeof(T));
  const trn_struct_header_t header = out->header;
  std::memcpy(reinterpret_cast<char *>(out) + sizeof header,
              reinterpret_cast<const char *>(&full) + sizeof header, size - sizeof header);
  out->header = header;
}

// A caller's enum field as the integer it holds: a C caller may store any value there, which
// C++ must not load through the enum type.
template <typename Enum>
uint32_t enum_bits(const Enum &field) {
  uint32_t bits;
  static_assert(sizeof field == sizeof bits, "enums are 32 bits");
  std::memcpy(&bits, &field, sizeof bits);
  return bits;
}

inline trn_result_t check_count(const uint32_t *count) {
  return count ? TRN_SUCCESS : fail(TRN_ERROR_NULL_POINTER, "count is NULL");
}

// Two-call enumeration: without an array, reports how many; with one, fills min(*count, n).
template <typename T, typename Make>
void enumerate(uint32_t *count, T *out, size_t available, Make make) {
  if (out == nullptr) {
    *count = static_cast<uint32_t>(available);
    return;
  }
  const uint32_t n = std::min<uint32_t>(*count, static_cast<uint32_t>(available));
  for (uint32_t i = 0; i < n; ++i) out[i] = make(i);
  *count = n;
}

// A caller's descriptor: checked (see check_struct), then copied over `out` (which holds the
// defaults, from the *_INIT macro) up to the size the caller's header knows.
template <typename T>
trn_result_t read_desc(const T *desc, trn_struct_type_t type, const char *init_macro, T *out) {
  if (trn_result_t r = check_struct(desc, type, "desc", init_macro); r != TRN_SUCCESS) return r;
  std::memcpy(out, desc, std::min<size_t>(desc->header.size, sizeof *out));
  return TRN_SUCCESS;
}

}  // namespace trn::rt
