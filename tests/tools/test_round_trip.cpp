// Every kernel of the tree survives trn-objdump | trn-as byte for byte: the assembly kernels of
// the examples and tests, and kernels built in C++ (the tiled matmul, a program using every
// opcode and flag).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "isa/builder.hpp"
#include "isa/container.hpp"
#include "kbuild/kernels/elementwise.hpp"
#include "kbuild/kernels/norms.hpp"
#include "kbuild/kernels/reduce.hpp"
#include "kbuild/kernels/softmax.hpp"
#include "kbuild/kernels/tiled_matmul.hpp"
#include "kbuild/kernels/transpose.hpp"
#include "support/subprocess.hpp"

using namespace trn;

namespace {

std::vector<char> read_file(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string scratch_dir() {
  const auto dir =
      std::filesystem::temp_directory_path() / ("trn-round-trip-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

void run_ok(const std::vector<std::string> &argv) {
  int status = -1;
  const std::string out = test::run_command(argv, 60'000, &status);
  INFO(argv[0] << " said: " << out);
  REQUIRE(status == 0);
}

// binary -> trn-objdump -> trn-as -> binary: the same bytes.
void check_round_trip(const std::string &binary, const std::string &dir, const std::string &name) {
  const std::string listing = dir + "/" + name + ".objdump.s";
  const std::string again = dir + "/" + name + ".again.trnk";
  int status = -1;
  const std::string text = test::run_command({TRN_OBJDUMP_PATH, binary}, 60'000, &status);
  INFO(text.substr(0, 2000));
  REQUIRE(status == 0);
  {
    std::ofstream out(listing);
    out << text;
  }
  run_ok({TRN_AS_PATH, listing, "-o", again});
  CHECK(read_file(binary) == read_file(again));
}

void write_kernel_file(const isa::Program &program, const std::string &path) {
  const auto bytes = isa::write_kernel(program);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::vector<std::string> sources() {
  std::vector<std::string> list;
  std::stringstream all(TRN_ROUND_TRIP_SOURCES);
  for (std::string path; std::getline(all, path, '|');)
    if (!path.empty()) list.push_back(path);
  return list;
}

}  // namespace

TEST_CASE(
    "round trip: every assembly kernel of the tree objdumps and re-assembles to the same bytes",
    "[tools]") {
  const std::string dir = scratch_dir();
  const auto list = sources();
  REQUIRE(list.size() >= 4);
  for (const std::string &source : list) {
    const std::string name = std::filesystem::path(source).stem().string();
    SECTION(name) {
      const std::string binary = dir + "/" + name + ".trnk";
      run_ok({TRN_AS_PATH, source, "-o", binary});
      check_round_trip(binary, dir, name);
    }
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("round trip: kernels built in C++ objdump and re-assemble to the same bytes", "[tools]") {
  const std::string dir = scratch_dir();
  SECTION("tiled matmul") {
    kbuild::MatmulConfig cfg{256, 1024, 512, isa::DType::kBf16, isa::DType::kF32, 180224};
    auto built = kbuild::build_tiled_matmul(cfg);
    REQUIRE(std::holds_alternative<isa::Program>(built));
    write_kernel_file(std::get<isa::Program>(built), dir + "/matmul.trnk");
    check_round_trip(dir + "/matmul.trnk", dir, "matmul");
  }
  SECTION("the kernel builder's kernels") {
    const kbuild::BuildTarget target{};
    const std::pair<const char *, kbuild::Built> kernels[] = {
        {"softmax",
         kbuild::build_softmax({300, 1000, isa::DType::kBf16, isa::DType::kF32, target})},
        {"layernorm", kbuild::build_layernorm(
                          {200, 768, isa::DType::kF32, isa::DType::kBf16, 1e-5f, true, target})},
        {"rmsnorm", kbuild::build_rmsnorm(
                        {130, 512, isa::DType::kBf16, isa::DType::kBf16, 1e-6f, true, target})},
        {"binary", kbuild::build_binary({256, 640, 1, 640, 256, 1, isa::DType::kF32,
                                         isa::DType::kF32, isa::AluOp::kSubtract, target})},
        {"reduce", kbuild::build_reduce({300, 300, 0, isa::DType::kF32, isa::DType::kF32,
                                         isa::AluOp::kMax, target})},
        {"transpose", kbuild::build_transpose({200, 300, isa::DType::kBf16, target})},
    };
    for (const auto &[name, built] : kernels) {
      INFO(name);
      REQUIRE(std::holds_alternative<isa::Program>(built));
      const std::string path = dir + "/" + name + ".trnk";
      write_kernel_file(std::get<isa::Program>(built), path);
      check_round_trip(path, dir, name);
    }
  }
  SECTION("every opcode, flag and operand") {
    isa::ProgramBuilder b("everything");
    const auto x = b.arg("x", isa::DType::kBf16, {128, 64}, isa::ArgDirection::kInOut);
    using isa::DType;
    using isa::Engine;
    b.dma_copy(Engine::kScalar, 15, isa::sbuf(DType::kF32, 32, 32, 128, {{-2, 8}, {1, 8}}),
               isa::hbm(x, DType::kBf16, 128, 64, 32, {{1, 64}}))
        .signal_set(3, 7)
        .line(11);
    b.matmul(isa::psum_tile(DType::kF32, 0, 64, 2048 * 3, 256),
             isa::sbuf_tile(DType::kFp8E4m3, 0, 128, 0, 64),
             isa::sbuf_tile(DType::kFp8E5m2, 0, 128, 512, 256), true)
        .wait_eq(3, 7);
    b.transpose(Engine::kVector, isa::sbuf_tile(DType::kF32, 0, 32, 0, 16),
                isa::psum_tile(DType::kF32, 0, 16, 0, 32));
    auto act = b.activation(isa::sbuf_tile(DType::kBf16, 0, 128, 0, 64),
                            isa::psum_tile(DType::kF32, 0, 128, 0, 64), isa::ActFunc::kGeluTanh,
                            -0.0f, 1e-30f);
    act.get().flags |= isa::kFlagAccumulate;
    act.get().dst2 = isa::sbuf_tile(DType::kF32, 0, 128, 4096, 1);
    b.tensor_scalar(Engine::kVector, isa::sbuf_tile(DType::kI32, 0, 128, 0, 64),
                    isa::sbuf_tile(DType::kI32, 0, 128, 256, 64), isa::AluOp::kShiftLeft, 3.0f,
                    isa::AluOp::kBitwiseXor, 255.0f);
    b.tensor_reduce(isa::sbuf_tile(DType::kF32, 0, 128, 0, 4),
                    isa::sbuf(DType::kF32, 0, 128, 64, {{32, 4}, {1, 32}}), isa::AluOp::kMax, 1,
                    true);
    b.iota(isa::sbuf_tile(DType::kI32, 0, 128, 0, 64), isa::pattern({{-1, 8}, {8, 8}}), -5, 3);
    b.affine_select(isa::sbuf_tile(DType::kF32, 0, 128, 0, 64), isa::pattern({{1, 64}}), 0, -1,
                    isa::AluOp::kGreaterEqual, isa::sbuf_tile(DType::kF32, 0, 128, 256, 64),
                    -3.4e38f);
    b.barrier();
    auto p = b.finish();
    p.constants = {std::byte{1}, std::byte{2}, std::byte{0xff}};
    p.source_file = "everything.py";
    write_kernel_file(p, dir + "/everything.trnk");
    check_round_trip(dir + "/everything.trnk", dir, "everything");
  }
  SECTION("scalar arguments in every slot that takes one") {
    using isa::DType;
    using isa::Engine;
    using isa::ImmSlot;
    isa::ProgramBuilder b("scalars");
    const auto alpha = b.scalar_arg("alpha", DType::kF32);
    const auto n = b.scalar_arg("n", DType::kI32);
    const auto odd = b.scalar_arg("sbuf", DType::kF32);  // a reserved word: printed as arg(2)
    const auto tile = isa::sbuf_tile(DType::kF32, 0, 128, 0, 64);
    b.activation(tile, tile, isa::ActFunc::kExp)
        .read_scalar(ImmSlot::kImm0, alpha)
        .read_scalar(ImmSlot::kImm1, odd);
    b.tensor_scalar(Engine::kVector, tile, tile, isa::AluOp::kMultiply, 0.0f, isa::AluOp::kAdd)
        .read_scalar(ImmSlot::kImm0, odd)
        .read_scalar(ImmSlot::kImm1, alpha);
    b.memset(Engine::kGpSimd, tile, 0.0f).read_scalar(ImmSlot::kImm0, alpha);
    b.iota(tile, isa::pattern({{1, 64}}), 0, 0)
        .read_scalar(ImmSlot::kIimm0, n)
        .read_scalar(ImmSlot::kIimm1, n);
    b.affine_select(tile, isa::pattern({{-1, 64}}), 0, 1, isa::AluOp::kGreaterEqual, tile, 0.0f)
        .read_scalar(ImmSlot::kIimm0, n)
        .read_scalar(ImmSlot::kImm0, alpha);
    write_kernel_file(b.finish(), dir + "/scalars.trnk");
    check_round_trip(dir + "/scalars.trnk", dir, "scalars");
    // The summary lists them as scalars of 4 bytes.
    int status = -1;
    const std::string summary =
        test::run_command({TRN_OBJDUMP_PATH, "-h", dir + "/scalars.trnk"}, 60'000, &status);
    INFO(summary);
    CHECK(status == 0);
    CHECK_THAT(summary, Catch::Matches(R"([\s\S]*1 +n +in +i32 +scalar +4\n[\s\S]*)"));
  }
  SECTION("instructions from several source files, with a scalar argument (format version 3)") {
    using isa::DType;
    using isa::Engine;
    isa::ProgramBuilder b("several_files");
    const auto alpha = b.scalar_arg("alpha", DType::kF32);
    const auto tile = isa::sbuf_tile(DType::kF32, 0, 128, 0, 64);
    b.memset(Engine::kVector, tile, 0.0f).at("kernels/softmax.cpp", 57);
    b.activation(tile, tile, isa::ActFunc::kExp)
        .read_scalar(isa::ImmSlot::kImm0, alpha)
        .at("kernels/softmax_helpers.hpp", 12);
    b.memset(Engine::kGpSimd, tile, 1.0f).at();  // this file
    b.memset(Engine::kGpSimd, tile, 2.0f).at("kernels/softmax.cpp", 0);
    b.memset(Engine::kGpSimd, tile, 3.0f);
    b.memset(Engine::kVector, tile, 4.0f).at("kernels/softmax_helpers.hpp", 13);
    const auto p = b.finish();
    REQUIRE(p.source_files.size() == 2);
    write_kernel_file(p, dir + "/several_files.trnk");
    check_round_trip(dir + "/several_files.trnk", dir, "several_files");
    int status = -1;
    const std::string text =
        test::run_command({TRN_OBJDUMP_PATH, dir + "/several_files.trnk"}, 60'000, &status);
    CHECK(status == 0);
    CHECK_THAT(text, Catch::Contains(".file 1 \"kernels/softmax_helpers.hpp\"\n"));
    CHECK_THAT(text, Catch::Contains(".loc 1 12\n"));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("round trip: trn-objdump piped into trn-as - gives the same bytes", "[tools]") {
  const std::string dir = scratch_dir();
  const std::string source = sources().front();
  const std::string binary = dir + "/piped.trnk", again = dir + "/piped.again.trnk";
  run_ok({TRN_AS_PATH, source, "-o", binary});
  // The pipeline the docs show, through a shell.
  run_ok({"/bin/sh", "-c",
          std::string("'") + TRN_OBJDUMP_PATH + "' '" + binary + "' | '" + TRN_AS_PATH +
              "' - -o '" + again + "'"});
  CHECK(read_file(binary) == read_file(again));
  int status = -1;
  // Standard input needs -o; a binary is not assembly; the output may not be the source.
  std::string out = test::run_command(
      {"/bin/sh", "-c", std::string("'") + TRN_AS_PATH + "' - < '" + source + "'"}, 60'000,
      &status);
  CHECK(status != 0);
  CHECK(out.find("needs -o FILE") != std::string::npos);
  out = test::run_command({TRN_AS_PATH, binary, "-o", dir + "/x.trnk"}, 60'000, &status);
  CHECK(status != 0);
  CHECK(out.find("is a binary (ELF), not assembly text") != std::string::npos);
  const std::string named_like_output = dir + "/kernel.trnk";
  std::filesystem::copy_file(source, named_like_output);
  out = test::run_command({TRN_AS_PATH, named_like_output}, 60'000, &status);
  CHECK(status != 0);
  CHECK(out.find("would overwrite the source") != std::string::npos);
  CHECK(read_file(named_like_output) == read_file(source));
  std::filesystem::remove_all(dir);
}
