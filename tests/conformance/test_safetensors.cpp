// safetensors (trn/safetensors.hpp): every malformed-header class refused with its own message,
// a checkpoint saved from device memory and loaded back byte for byte, selected tensors, and a
// file that changed under the reader.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support/api_helpers.hpp"
#include "support/device_files.hpp"
#include "support/result_printing.hpp"
#include "support/sim_env.hpp"
#include "support/temp_files.hpp"
#include "trn/safetensors.hpp"
#include "trn/trn.h"

namespace st = trn::safetensors;

namespace {

using trn::test::alloc;
using trn::test::core_at;
using trn::test::create_file;
using trn::test::DeviceFiles;
using trn::test::Fd;
using trn::test::file_contents;
using trn::test::first_device;
using trn::test::make_pool;
using trn::test::make_queue;
using trn::test::SimEnv;
using trn::test::TempDir;

constexpr uint64_t kLong = 10'000'000'000;

// A file: the 8-byte length of `header` (or `length` when given), the header, then `data` bytes.
std::vector<uint8_t> file_of(const std::string &header, uint64_t data,
                             uint64_t length = UINT64_MAX) {
  const uint64_t n = length == UINT64_MAX ? header.size() : length;
  std::vector<uint8_t> out(8);
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(n >> (8 * i));
  out.insert(out.end(), header.begin(), header.end());
  for (uint64_t i = 0; i < data; ++i) out.push_back(static_cast<uint8_t>(i * 31 + 7));
  return out;
}

std::string refusal(const std::vector<uint8_t> &bytes) {
  try {
    st::parse_header(bytes.data(), bytes.size(), bytes.size());
  } catch (const st::Error &e) {
    return e.what();
  }
  return "(accepted)";
}

std::vector<uint8_t> pattern(size_t bytes, uint8_t seed) {
  std::vector<uint8_t> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(seed * 17 + i * 5 + (i >> 8));
  return data;
}

std::vector<uint8_t> device_bytes(trn_queue_t queue, trn_mem_t mem, uint64_t at, uint64_t n) {
  std::vector<uint8_t> out(n);
  if (n == 0) return out;
  REQUIRE(trn_queue_read(queue, out.data(), mem, at, n, nullptr, nullptr) == TRN_SUCCESS);
  REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
  return out;
}

}  // namespace

TEST_CASE("safetensors: a valid header is read with its tensors and metadata", "[safetensors]") {
  const auto file = file_of(
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2,3],"data_offsets":[16,28]},)"
      R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"e":{"dtype":"U8","shape":[0],"data_offsets":[28,28]}}   )",
      28);
  const st::Header h = st::parse_header(file.data(), file.size(), file.size());
  REQUIRE(h.tensors.size() == 3);
  CHECK(h.tensors[0].name == "a");  // by data offset
  CHECK(h.tensors[0].dtype == TRN_DTYPE_F32);
  CHECK(h.tensors[1].name == "b");
  CHECK(h.tensors[1].dtype == TRN_DTYPE_BF16);
  CHECK(h.tensors[1].shape == std::vector<uint64_t>{2, 3});
  CHECK(h.tensors[1].bytes() == 12);
  CHECK(h.tensors[2].bytes() == 0);
  CHECK(h.metadata.at("format") == "pt");
  CHECK(h.data_offset == 8 + file.size() - 8 - 28);
  CHECK(h.data_bytes == 28);
  CHECK(h.find("b") == &h.tensors[1]);
  CHECK(h.find("zz") == nullptr);
  // A null __metadata__ is no metadata, as the reference reader takes it.
  const auto null_metadata =
      file_of(R"({"__metadata__":null,"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 4);
  const st::Header n =
      st::parse_header(null_metadata.data(), null_metadata.size(), null_metadata.size());
  CHECK(n.metadata.empty());
  CHECK(n.tensors.size() == 1);
}

TEST_CASE("safetensors: a header of 100,000 tensors is read whole, in order", "[safetensors]") {
  // Checkpoints of many experts hold tens of thousands of tensors; the reader is linear in them
  // (one that was not took minutes here, past the test's limit).
  constexpr uint64_t kTensors = 100'000;
  std::string header = "{";
  for (uint64_t i = kTensors; i-- > 0;) {  // written last to first: read back by data offset
    header += "\"t" + std::to_string(i) + "\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[" +
              std::to_string(6 * i) + "," + std::to_string(6 * i + 6) + "]}";
    header += i ? "," : "}";
  }
  const auto file = file_of(header, 6 * kTensors);
  const st::Header h = st::parse_header(file.data(), file.size(), file.size());
  REQUIRE(h.tensors.size() == kTensors);
  CHECK(h.tensors.front().name == "t0");
  CHECK(h.tensors.back().name == "t99999");
  CHECK(h.tensors.back().begin == 6 * (kTensors - 1));
  CHECK(h.find("t51234") == &h.tensors[51234]);
  // A name given twice is still found, however far apart.
  const auto twice = file_of(header.substr(0, header.size() - 1) +
                                 R"(,"t0":{"dtype":"F16","shape":[3],"data_offsets":[0,6]}})",
                             6 * kTensors);
  CHECK_THAT(refusal(twice), Catch::Matchers::Contains("tensor 't0' appears twice"));
}

TEST_CASE("safetensors: every malformed header is refused with its own message", "[safetensors]") {
  const std::string a = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  struct Case {
    const char *what;
    std::vector<uint8_t> file;
    const char *message;
  };
  const Case cases[] = {
      {"a file shorter than the length",
       {1, 2, 3},
       "the file is 3 bytes: a safetensors file starts"},
      {"a huge length", file_of("{}", 0, 1ull << 40), "above the limit of 100000000 bytes"},
      {"a length past the end", file_of("{}", 0, 50),
       "header length 50 runs past the end of the file"},
      {"a length of 1", file_of("{", 0), "too small for a JSON object"},
      {"not an object", file_of("[1, 2]", 0), "does not start with '{'"},
      {"not JSON", file_of("{\"a\": ", 0), "not valid JSON"},
      {"deep nesting", file_of(R"({"a":{"shape":[[[[1]]]]}})", 0),
       "nests deeper than a header does"},
      {"a tensor that is not an object", file_of(R"({"a":[1]})", 0),
       "tensor 'a' is a JSON array, not an object"},
      {"an unknown field",
       file_of(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4],"x":1}})", 4),
       "tensor 'a': unknown field 'x'"},
      {"no dtype", file_of(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", 8),
       "tensor 'a': dtype is missing"},
      {"a dtype that is no string",
       file_of(R"({"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})", 8),
       "tensor 'a': dtype is not a string"},
      {"an unknown dtype", file_of(R"({"a":{"dtype":"Q9","shape":[2],"data_offsets":[0,8]}})", 8),
       "tensor 'a': dtype 'Q9' is not a safetensors dtype (F32, BF16"},
      {"a dtype in the wrong case",
       file_of(R"({"a":{"dtype":"bool","shape":[2],"data_offsets":[0,2]}})", 2),
       "tensor 'a': dtype 'bool' is not a safetensors dtype"},
      {"a name twice",
       file_of(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
               8),
       "tensor 'x' appears twice"},
      {"a name twice with one range",
       file_of(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
               4),
       "tensor 'x' appears twice"},
      {"a field twice",
       file_of(R"({"x":{"dtype":"F32","dtype":"F16","shape":[1],"data_offsets":[0,4]}})", 4),
       "'x': field 'dtype' appears twice"},
      {"metadata twice", file_of(R"({"__metadata__":{},"__metadata__":{}})", 0),
       "__metadata__ appears twice"},
      {"packed elements that end inside a byte",
       file_of(R"({"q":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2),
       "tensor 'q': shape [3] of F4 is 12 bits, not a whole number of bytes"},
      {"packed elements past 2^64 bits",
       file_of(R"({"q":{"dtype":"F6_E3M2","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
               8),
       "tensor 'q': shape [4294967296, 4294967296] of F6_E3M2 has more than 2^64 bits"},
      {"a size that does not match a dtype trn has no type for",
       file_of(R"({"u":{"dtype":"U16","shape":[3],"data_offsets":[0,8]}})", 8),
       "tensor 'u': shape [3] of U16 is 6 bytes but data_offsets [0, 8] hold 8"},
      {"no shape", file_of(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", 8),
       "tensor 'a': shape is missing"},
      {"a shape that is no array",
       file_of(R"({"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", 8),
       "tensor 'a': shape is not an array"},
      {"a negative dimension",
       file_of(R"({"a":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,8]}})", 8),
       "tensor 'a': shape[1] is not a non-negative integer"},
      {"a fractional dimension",
       file_of(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8),
       "tensor 'a': shape[0] is not a non-negative integer"},
      {"no data_offsets", file_of(R"({"a":{"dtype":"F32","shape":[2]}})", 8),
       "tensor 'a': data_offsets is missing"},
      {"one offset", file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8]}})", 8),
       "tensor 'a': data_offsets is not [begin, end]"},
      {"offsets backwards", file_of(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8),
       "tensor 'a': data_offsets [8, 0] end before they begin"},
      {"a shape past 2^64 bytes",
       file_of(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8),
       "tensor 'a': shape [4294967296, 4294967296] of F32 has more than 2^64 bytes"},
      {"a size that does not match",
       file_of(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "tensor 'a': shape [3] of F32 is 12 bytes but data_offsets [0, 8] hold 8"},
      {"a range past the data", file_of("{" + a + "}", 4),
       "tensor 'a': data_offsets [0, 8] run past the data section (4 bytes)"},
      {"overlapping tensors",
       file_of("{" + a + R"(,"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12),
       "tensors 'a' and 'b' overlap: [0, 8] and [4, 12]"},
      {"a hole",
       file_of("{" + a + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})", 16),
       "bytes 8 to 12 of the data section belong to no tensor (before 'b')"},
      {"trailing bytes", file_of("{" + a + "}", 10),
       "the data section has 10 bytes but the tensors end at 8"},
      {"metadata that is no object", file_of(R"({"__metadata__":[1]})", 0),
       "__metadata__ is a JSON array"},
      {"metadata that is no string", file_of(R"({"__metadata__":{"k":1}})", 0),
       "__metadata__ entry 'k' is a JSON number, not a string"},
      {"bytes after a NUL", file_of("{" + a + "}" + std::string("\0\xff\xfe", 3), 8),
       "the header has a NUL byte at offset"},
  };
  for (const Case &c : cases) {
    INFO(c.what);
    const std::string message = refusal(c.file);
    INFO(message);
    CHECK(message.find(c.message) != std::string::npos);
    CHECK(message.rfind("safetensors header: ", 0) == 0);
  }
}

TEST_CASE("safetensors: every dtype of the format is read, typed as trn holds it",
          "[safetensors]") {
  struct Expect {
    const char *name;
    uint64_t elements;
    trn_dtype_t dtype;  // st::kNoDtype: bytes only
    uint64_t bytes;
  };
  const Expect expect[] = {
      {"F32", 3, TRN_DTYPE_F32, 12},
      {"BF16", 3, TRN_DTYPE_BF16, 6},
      {"F16", 3, TRN_DTYPE_F16, 6},
      {"F8_E4M3", 3, TRN_DTYPE_FP8_E4M3, 3},
      {"F8_E5M2", 3, TRN_DTYPE_FP8_E5M2, 3},
      {"I32", 3, TRN_DTYPE_I32, 12},
      {"I16", 3, TRN_DTYPE_I16, 6},
      {"I8", 3, TRN_DTYPE_I8, 3},
      {"U8", 3, TRN_DTYPE_U8, 3},
      {"F64", 3, TRN_DTYPE_F64, 24},
      {"I64", 3, TRN_DTYPE_I64, 24},
      {"BOOL", 3, TRN_DTYPE_U8, 3},
      {"U16", 3, st::kNoDtype, 6},
      {"U32", 3, st::kNoDtype, 12},
      {"U64", 3, st::kNoDtype, 24},
      {"F8_E8M0", 3, st::kNoDtype, 3},
      {"C64", 3, st::kNoDtype, 24},
      {"F4", 6, st::kNoDtype, 3},
      {"F6_E2M3", 4, st::kNoDtype, 3},
      {"F6_E3M2", 8, st::kNoDtype, 6},
  };
  std::string header = "{";
  uint64_t at = 0;
  for (const Expect &e : expect) {
    header += std::string(at ? "," : "") + "\"t_" + e.name + "\":{\"dtype\":\"" + e.name +
              "\",\"shape\":[" + std::to_string(e.elements) + "],\"data_offsets\":[" +
              std::to_string(at) + "," + std::to_string(at + e.bytes) + "]}";
    at += e.bytes;
  }
  const auto file = file_of(header + "}", at);
  const st::Header h = st::parse_header(file.data(), file.size(), file.size());
  REQUIRE(h.tensors.size() == std::size(expect));
  for (const Expect &e : expect) {
    INFO(e.name);
    const st::TensorInfo *t = h.find(std::string("t_") + e.name);
    REQUIRE(t != nullptr);
    CHECK(t->dtype_name == e.name);
    CHECK(t->dtype == e.dtype);
    CHECK(t->bytes() == e.bytes);
    CHECK(st::dtype_bits(e.name) * e.elements == e.bytes * 8);
    CHECK(st::tensor_bytes(t->shape, e.name) == e.bytes);
    trn_dtype_t d = TRN_DTYPE_F32;
    CHECK(st::dtype_from_name(e.name, &d) == (e.dtype != st::kNoDtype));
    if (e.dtype != st::kNoDtype) CHECK(d == e.dtype);
  }
  // A trn dtype's name is its own: U8, not BOOL.
  CHECK(std::string(st::dtype_to_name(TRN_DTYPE_U8)) == "U8");
  CHECK(st::dtype_to_name(st::kNoDtype) == nullptr);
  CHECK(st::dtype_bits("Q9") == 0);
  CHECK_THROWS_WITH(st::tensor_bytes({2}, "Q9"),
                    Catch::Contains("'Q9' is not a safetensors dtype"));
  CHECK_THROWS_WITH(st::tensor_bytes({5}, "F4"),
                    Catch::Contains("shape [5] of F4 is 20 bits, not a whole number of bytes"));
  CHECK(st::tensor_bytes({0, 5}, "F4") == 0);
}

TEST_CASE("safetensors: read_header reads from a descriptor and refuses a bad file",
          "[safetensors]") {
  TempDir dir;
  Fd good(create_file(dir.file("good"),
                      file_of(R"({"a":{"dtype":"I8","shape":[3],"data_offsets":[0,3]}})", 3)));
  CHECK(st::read_header(good.get()).tensors.at(0).name == "a");
  Fd bad(create_file(dir.file("bad"), file_of("{}", 0, 1ull << 60)));
  CHECK_THROWS_WITH(st::read_header(bad.get()), Catch::Contains("above the limit"));
  Fd empty(create_file(dir.file("empty"), {}));
  CHECK_THROWS_WITH(st::read_header(empty.get()), Catch::Contains("the file is 0 bytes"));
}

TEST_CASE_METHOD(DeviceFiles,
                 "safetensors: a checkpoint saved from device memory loads back byte for byte",
                 "[safetensors]") {
  // Sizes that are no multiple of a page, and a tensor larger than one read.
  const std::vector<std::pair<trn_dtype_t, std::vector<uint64_t>>> specs = {
      {TRN_DTYPE_F32, {1000, 1100}},
      {TRN_DTYPE_BF16, {3, 5}},
      {TRN_DTYPE_U8, {0}},
      {TRN_DTYPE_FP8_E4M3, {77777}},
      {TRN_DTYPE_I32, {17, 4096}}};
  std::vector<st::SaveTensor> save;
  std::vector<std::vector<uint8_t>> contents;
  for (size_t i = 0; i < specs.size(); ++i) {
    uint64_t bytes = trn_dtype_size(specs[i].first);
    for (uint64_t d : specs[i].second) bytes *= d;
    contents.push_back(pattern(bytes, static_cast<uint8_t>(i)));
    trn_mem_t mem = alloc(pool, bytes + 100);
    if (bytes > 0)
      REQUIRE(trn_queue_write(queue, mem, 100, contents[i].data(), bytes, nullptr, nullptr) ==
              TRN_SUCCESS);
    save.push_back({"layer." + std::to_string(i), specs[i].first, specs[i].second, mem, 100});
  }
  const std::string path = dir.file("model.safetensors");
  st::save(path, save, {{"format", "trn"}}, queue);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd.get() >= 0);
  const st::Header h = st::read_header(fd.get());
  CHECK(h.data_offset % 8 == 0);
  CHECK(h.metadata.at("format") == "trn");
  REQUIRE(h.tensors.size() == specs.size());
  // The file itself: the data section is the tensors in order.
  const auto bytes = file_contents(fd.get());
  uint64_t at = h.data_offset;
  for (size_t i = 0; i < specs.size(); ++i) {
    const st::TensorInfo *t = h.find("layer." + std::to_string(i));
    REQUIRE(t != nullptr);
    CHECK(t->dtype == specs[i].first);
    CHECK(t->shape == specs[i].second);
    CHECK(std::vector<uint8_t>(bytes.begin() + at, bytes.begin() + at + t->bytes()) == contents[i]);
    at += t->bytes();
  }
  // Loaded back, all of them, with progress.
  uint64_t last = 0, calls = 0;
  st::LoadOptions options;
  options.progress = [&](uint64_t loaded, uint64_t total) {
    CHECK(loaded >= last);
    last = loaded;
    ++calls;
    CHECK(total == bytes.size() - h.data_offset);
  };
  st::Loaded loaded = st::load(fd.get(), h, pool, queue, options);
  CHECK(last == bytes.size() - h.data_offset);
  CHECK(calls >= 2);
  REQUIRE(loaded.tensors().size() == specs.size());
  CHECK(loaded.metadata().at("format") == "trn");
  for (size_t i = 0; i < specs.size(); ++i) {
    const st::LoadedTensor *t = loaded.find("layer." + std::to_string(i));
    REQUIRE(t != nullptr);
    CHECK((h.data_offset + t->info.begin) % 4096 == t->offset % 4096);
    CHECK(device_bytes(queue, loaded.arena(), t->offset, t->info.bytes()) == contents[i]);
  }
  // Selected ones only.
  options = {};
  options.names = {"layer.4", "layer.1"};
  st::Loaded some = st::load(fd.get(), h, pool, queue, options);
  REQUIRE(some.tensors().size() == 2);
  CHECK(some.tensors()[0].info.name == "layer.1");  // in file order
  for (const st::LoadedTensor &t : some.tensors())
    CHECK(device_bytes(queue, some.arena(), t.offset, t.info.bytes()) ==
          contents[t.info.name == "layer.1" ? 1 : 4]);
  options.names = {"layer.9"};
  CHECK_THROWS_WITH(st::load(fd.get(), h, pool, queue, options),
                    Catch::Contains("no tensor 'layer.9' in the file"));
  for (auto &t : save) REQUIRE(trn_mem_free(t.mem) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE_METHOD(DeviceFiles,
                 "safetensors: tensors of dtypes trn has no type for load and save as their bytes",
                 "[safetensors]") {
  // A checkpoint as PyTorch writes them: bool masks, unsigned and packed tensors beside floats.
  const std::vector<std::pair<std::string, std::vector<uint64_t>>> specs = {
      {"BOOL", {2, 7}}, {"U16", {5}}, {"U32", {3, 3}}, {"U64", {4}}, {"F4", {6}}, {"F32", {9}}};
  const auto mask = std::vector<uint8_t>{1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 1, 0, 1};
  std::string header = "{";
  std::vector<uint8_t> data;
  std::vector<std::vector<uint8_t>> contents;
  for (size_t i = 0; i < specs.size(); ++i) {
    const uint64_t bytes = st::tensor_bytes(specs[i].second, specs[i].first);
    contents.push_back(i == 0 ? mask : pattern(bytes, static_cast<uint8_t>(i + 3)));
    REQUIRE(contents.back().size() == bytes);
    std::string shape;
    for (uint64_t d : specs[i].second) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    header += std::string(i ? "," : "") + "\"" + specs[i].first + "\":{\"dtype\":\"" +
              specs[i].first + "\",\"shape\":[" + shape + "],\"data_offsets\":[" +
              std::to_string(data.size()) + "," + std::to_string(data.size() + bytes) + "]}";
    data.insert(data.end(), contents.back().begin(), contents.back().end());
  }
  auto file = file_of(header + "}", 0);
  file.insert(file.end(), data.begin(), data.end());
  Fd fd(create_file(dir.file("mixed.safetensors"), file));
  const st::Header h = st::read_header(fd.get());
  st::Loaded loaded = st::load(fd.get(), h, pool, queue);
  REQUIRE(loaded.tensors().size() == specs.size());
  std::vector<st::SaveTensor> save;
  for (size_t i = 0; i < specs.size(); ++i) {
    INFO(specs[i].first);
    const st::LoadedTensor *t = loaded.find(specs[i].first);
    REQUIRE(t != nullptr);
    CHECK(t->info.dtype == (specs[i].first == "BOOL"  ? TRN_DTYPE_U8
                            : specs[i].first == "F32" ? TRN_DTYPE_F32
                                                      : st::kNoDtype));
    CHECK(device_bytes(queue, loaded.arena(), t->offset, t->info.bytes()) == contents[i]);
    // Saved again from the loaded arena with the dtype and name it loaded with.
    save.push_back({t->info.name, t->info.dtype, t->info.shape, loaded.arena(), t->offset,
                    t->info.dtype_name});
  }
  const std::string again = dir.file("again.safetensors");
  st::save(again, save, {}, queue);
  Fd fd2(::open(again.c_str(), O_RDONLY | O_CLOEXEC));
  REQUIRE(fd2.get() >= 0);
  const st::Header h2 = st::read_header(fd2.get());
  const auto bytes2 = file_contents(fd2.get());
  for (size_t i = 0; i < specs.size(); ++i) {
    INFO(specs[i].first);
    const st::TensorInfo *t = h2.find(specs[i].first);
    REQUIRE(t != nullptr);
    CHECK(t->dtype_name == specs[i].first);
    CHECK(t->shape == specs[i].second);
    CHECK(std::vector<uint8_t>(bytes2.begin() + h2.data_offset + t->begin,
                               bytes2.begin() + h2.data_offset + t->end) == contents[i]);
  }
  // A U8 tensor saved as BOOL; the name must load as the dtype given, and be a dtype at all.
  st::SaveTensor as_bool{"m",   TRN_DTYPE_U8, {14}, loaded.arena(), loaded.find("BOOL")->offset,
                         "BOOL"};
  st::save(dir.file("bool.safetensors"), {as_bool}, {}, queue);
  Fd fd3(::open(dir.file("bool.safetensors").c_str(), O_RDONLY | O_CLOEXEC));
  CHECK(st::read_header(fd3.get()).tensors.at(0).dtype_name == "BOOL");
  st::SaveTensor wrong = as_bool;
  wrong.dtype = TRN_DTYPE_F32;
  CHECK_THROWS_WITH(st::save(dir.file("w.safetensors"), {wrong}, {}, queue),
                    Catch::Contains("dtype_name BOOL loads as u8, but the tensor's dtype is f32"));
  wrong.dtype_name = "UINT8";
  CHECK_THROWS_WITH(st::save(dir.file("w.safetensors"), {wrong}, {}, queue),
                    Catch::Contains("dtype_name 'UINT8' is not a safetensors dtype"));
  st::SaveTensor bytes_only{"u", st::kNoDtype, {5}, loaded.arena(), 0};
  CHECK_THROWS_WITH(st::save(dir.file("w.safetensors"), {bytes_only}, {}, queue),
                    Catch::Contains("give dtype_name"));
  bytes_only.dtype_name = "U32";
  bytes_only.shape = {5};
  st::SaveTensor odd{"q", st::kNoDtype, {5}, loaded.arena(), 0, "F4"};
  CHECK_THROWS_WITH(st::save(dir.file("w.safetensors"), {bytes_only, odd}, {}, queue),
                    Catch::Contains("tensor 'q': shape [5] of F4 is 20 bits"));
  CHECK(::access(dir.file("w.safetensors").c_str(), F_OK) != 0);
  REQUIRE(trn_queue_finish(queue, kLong) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}

TEST_CASE_METHOD(
    DeviceFiles,
    "safetensors: a file changed after its header was read, or read short, fails the load",
    "[safetensors]") {
  const std::string header = R"({"w":{"dtype":"F32","shape":[262144],"data_offsets":[0,1048576]}})";
  Fd fd(create_file(dir.file("w.safetensors"), file_of(header, 1 << 20)));
  const st::Header h = st::read_header(fd.get());
  trn_mem_stats_t stats = TRN_MEM_STATS_INIT;
  // Cut short, or grown, since the header was read: refused before anything is read or queued.
  for (const uint64_t size : {h.data_offset + 4096, h.data_offset + (2 << 20)}) {
    REQUIRE(::ftruncate(fd.get(), static_cast<off_t>(size)) == 0);
    try {
      st::load(fd.get(), h, pool, queue);
      FAIL("the load succeeded");
    } catch (const st::Error &e) {
      INFO(e.what());
      CHECK(e.result() == TRN_ERROR_FILE);
      CHECK_THAT(e.what(), Catch::Contains("the file is " + std::to_string(size) +
                                           " bytes, but its header was read from one of " +
                                           std::to_string(h.data_offset + (1 << 20))));
    }
    REQUIRE(trn_pool_get_stats(pool, &stats) == TRN_SUCCESS);
    CHECK(stats.allocation_count == 0);  // nothing stays allocated
  }
  // Another file's header, with the descriptor of this one: refused alike.
  Fd other(create_file(dir.file("other.safetensors"), file_of(header, 1 << 20)));
  const st::Header other_header = st::read_header(other.get());
  REQUIRE(::ftruncate(other.get(), 0) == 0);
  CHECK_THROWS_WITH(st::load(other.get(), other_header, pool, queue),
                    Catch::Contains("another file, or one changed since"));
  CHECK(trn_queue_finish(queue, kLong) == TRN_SUCCESS);  // nothing was queued
  // A read that meets the end of the file faults the queue, naming the file offset; the queue
  // keeps its fault until it is reset: a load of a good file says so, naming the earlier fault,
  // instead of failing with it as if it were this file's.
  trn_mem_t landing = nullptr;
  REQUIRE(trn_mem_alloc(pool, 1 << 20, 0, TRN_MEM_CATEGORY_TENSORS, 0, &landing) == TRN_SUCCESS);
  REQUIRE(trn_queue_read_file(queue, landing, 0, fd.get(), h.data_offset + (2 << 20) - 4096,
                              1 << 20, nullptr, nullptr) == TRN_SUCCESS);
  CHECK(trn_queue_finish(queue, kLong) == TRN_ERROR_FILE);
  REQUIRE(trn_mem_free(landing) == TRN_SUCCESS);
  Fd good(create_file(dir.file("good.safetensors"), file_of(header, 1 << 20)));
  const st::Header good_header = st::read_header(good.get());
  try {
    st::load(good.get(), good_header, pool, queue);
    FAIL("a load on a failed queue succeeded");
  } catch (const st::Error &e) {
    INFO(e.what());
    CHECK(e.result() == TRN_ERROR_FILE);
    CHECK_THAT(e.what(), Catch::Contains("the queue failed earlier") &&
                             Catch::Contains("end of file at offset " +
                                             std::to_string(h.data_offset + (2 << 20))) &&
                             Catch::Contains("then trn_queue_reset"));
  }
  REQUIRE(trn_queue_reset(queue) == TRN_SUCCESS);
  CHECK(st::load(good.get(), good_header, pool, queue).tensors().size() == 1);
  REQUIRE(trn_pool_get_stats(pool, &stats) == TRN_SUCCESS);
  CHECK(stats.allocation_count == 0);  // the loaded arena went with its Loaded
  st::SaveTensor bad{"x", TRN_DTYPE_F32, {1}, nullptr, 0};
  CHECK_THROWS_WITH(st::save(dir.file("x.safetensors"), {bad}, {}, queue),
                    Catch::Contains("names no memory"));
  // A tensor past its allocation is refused before anything is written or queued: the earlier
  // tensors' writes never run on a closed descriptor.
  trn_mem_t small = nullptr;
  REQUIRE(trn_mem_alloc(pool, 4096, 0, TRN_MEM_CATEGORY_TENSORS, 0, &small) == TRN_SUCCESS);
  const st::SaveTensor fits{"a", TRN_DTYPE_F32, {1024}, small, 0};
  const st::SaveTensor past{"b", TRN_DTYPE_F32, {1024}, small, 8};
  CHECK_THROWS_WITH(st::save(dir.file("y.safetensors"), {fits, past}, {}, queue),
                    Catch::Contains("runs past the allocation's end"));
  CHECK(trn_queue_finish(queue, kLong) == TRN_SUCCESS);  // nothing faulted
  CHECK(::access(dir.file("y.safetensors").c_str(), F_OK) != 0);
  // Names and metadata must be UTF-8: refused as an st::Error, like every other failure.
  const st::SaveTensor binary{"\xff", TRN_DTYPE_F32, {1024}, small, 0};
  CHECK_THROWS_AS(st::save(dir.file("z.safetensors"), {binary}, {}, queue), st::Error);
  REQUIRE(trn_mem_free(small) == TRN_SUCCESS);
  REQUIRE(trn_queue_destroy(queue) == TRN_SUCCESS);
}
