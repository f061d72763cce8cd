// libFuzzer target: the safetensors header reader on arbitrary bytes (the input is the whole
// file). It must refuse or accept without crashing, hanging or allocating without bound; what
// it accepts must keep the format's invariants: tensors by offset, tiling the data section.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "trn/safetensors.hpp"

namespace st = trn::safetensors;

namespace {

// The tensor's size computed apart from the reader: bits per element times elements in 128 bits,
// in whole bytes.
bool size_matches(const st::TensorInfo &t) {
  __extension__ typedef unsigned __int128 u128;
  u128 bits = st::dtype_bits(t.dtype_name);
  bool zero = false;
  for (uint64_t d : t.shape) zero = zero || d == 0;
  if (zero) return t.bytes() == 0;
  for (uint64_t d : t.shape) {
    if (bits > (u128{1} << 67) / d) return false;  // past any file
    bits *= d;
  }
  return bits % 8 == 0 && bits / 8 == t.bytes();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  st::Header h;
  try {
    h = st::parse_header(data, size, size);
  } catch (const st::Error &) {
    return 0;
  }
  uint64_t at = 0;
  for (const st::TensorInfo &t : h.tensors) {
    trn_dtype_t dtype = st::kNoDtype;
    st::dtype_from_name(t.dtype_name, &dtype);
    if (t.begin != at || t.end < t.begin || st::dtype_bits(t.dtype_name) == 0 || dtype != t.dtype ||
        !size_matches(t)) {
      std::fprintf(stderr, "accepted a header that breaks the format at tensor '%s'\n",
                   t.name.c_str());
      std::abort();
    }
    at = t.end;
  }
  if (h.data_offset != 8 + h.header_bytes || at != h.data_bytes || h.data_offset + at != size) {
    std::fprintf(stderr, "accepted a header whose data section is not tiled\n");
    std::abort();
  }
  return 0;
}
