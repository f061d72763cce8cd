#include <catch2/catch.hpp>

#include "sim/config.hpp"
#include "sim/generation.hpp"

using namespace trn::sim;

TEST_CASE("generation table follows the published figures") {
  const auto &trn1 = generation_spec(TRN_GENERATION_TRN1);
  CHECK(trn1.physical_cores == 2);
  CHECK(trn1.hbm_bytes == 32ull << 30);
  CHECK(trn1.core().sbuf_bytes_per_partition == 192 * 1024);
  const auto &trn2 = generation_spec(TRN_GENERATION_TRN2);
  CHECK(trn2.physical_cores == 8);
  CHECK(trn2.hbm_banks == 4);
  CHECK(trn2.hbm_bytes == 96ull << 30);
  CHECK(trn2.core().sbuf_bytes_per_partition == 224 * 1024);
  const auto &trn3 = generation_spec(TRN_GENERATION_TRN3);
  CHECK(trn3.hbm_bytes == 144ull << 30);
  CHECK(trn3.core().sbuf_bytes_per_partition == 256 * 1024);
  // Peak bf16 per core: 92 TFLOPS (NC-v2) and 79 (NC-v3/v4), within 1 %.
  CHECK(double(trn1.core().tensor_hz * trn::isa::kBf16FlopsPerTensorCycle) ==
        Approx(91.75e12).epsilon(0.01));
  CHECK(double(trn2.core().tensor_hz * trn::isa::kBf16FlopsPerTensorCycle) ==
        Approx(78.6e12).epsilon(0.01));
  CHECK(double(trn2.core().tensor_hz * trn::isa::kFp32FlopsPerTensorCycle) ==
        Approx(19.7e12).epsilon(0.01));
}

TEST_CASE("generation names parse both ways") {
  CHECK(parse_generation("trn1") == TRN_GENERATION_TRN1);
  CHECK(parse_generation("trn3") == TRN_GENERATION_TRN3);
  CHECK_FALSE(parse_generation("TRN2"));
  CHECK_FALSE(parse_generation(""));
  CHECK(is_known_generation(2));
  CHECK_FALSE(is_known_generation(0));
  CHECK_FALSE(is_known_generation(4));
}

TEST_CASE("HBM size rounds down to whole 2 MiB chunks per bank") {
  SimConfig config;
  config.generation = TRN_GENERATION_TRN2;
  CHECK(config.effective_hbm_bytes() == 96ull << 30);
  config.hbm_bytes = (8ull << 30) + 12345;
  CHECK(config.effective_hbm_bytes() == 8ull << 30);
}
