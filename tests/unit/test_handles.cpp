#include <catch2/catch.hpp>

#include "runtime/handle.hpp"

using namespace trn::rt;

TEST_CASE("handles round-trip generation, kind and slot") {
  const uint32_t generation = next_handle_generation();
  const uint64_t value = encode_handle(generation, HandleKind::core, 1234);
  const DecodedHandle decoded = decode_handle(value);
  CHECK(decoded.generation == generation);
  CHECK(decoded.kind == HandleKind::core);
  CHECK(decoded.slot == 1234);
  CHECK(value != 0);
}

TEST_CASE("generations are never reused and never small") {
  const uint32_t a = next_handle_generation();
  const uint32_t b = next_handle_generation();
  CHECK(a != b);
  CHECK(a > 1);
  // A small integer or a typical heap pointer never decodes as a live generation.
  CHECK(decode_handle(0x1234).generation == 0);
}
