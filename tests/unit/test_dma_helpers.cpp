// The simulated device's DMA helper threads: a large transfer split into pieces that the caller
// and the helpers take in turn.
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sim/dma_helpers.hpp"

namespace {

using trn::sim::DmaHelpers;

// What one run did: every piece's range and the threads that ran them.
struct Record {
  std::mutex mu;
  std::vector<std::pair<uint64_t, uint64_t>> pieces;
  std::set<std::thread::id> threads;

  void add(uint64_t at, uint64_t bytes) {
    std::lock_guard lock(mu);
    pieces.emplace_back(at, bytes);
    threads.insert(std::this_thread::get_id());
  }
  // Whether the pieces cover [0, bytes) once each, every one starting on a page.
  bool covers_once(uint64_t bytes) {
    std::lock_guard lock(mu);
    std::sort(pieces.begin(), pieces.end());
    uint64_t next = 0;
    for (const auto &[at, n] : pieces) {
      if (at != next || at % DmaHelpers::kPieceAlign != 0 || n == 0) return false;
      next = at + n;
    }
    return next == bytes;
  }
};

trn_result_t record_piece(Record &record, uint64_t at, uint64_t bytes) {
  record.add(at, bytes);
  return TRN_SUCCESS;
}

// A transfer of `bytes` whose pieces do nothing but note themselves in `record`.
trn_result_t run_recorded(DmaHelpers &helpers, uint64_t bytes, Record &record) {
  std::string why;
  return helpers.run(
      bytes, [&](uint64_t at, uint64_t n, std::string *) { return record_piece(record, at, n); },
      &why);
}

}  // namespace

TEST_CASE("a transfer's pieces cover it once, whole pages each", "[dma]") {
  constexpr uint64_t MiB = uint64_t{1} << 20;
  for (unsigned threads : {2u, 3u, 4u}) {
    DmaHelpers helpers(threads);
    // Sizes a page multiple per piece plus a few bytes: the tail must still be covered (the
    // threads started per transfer before these helpers left 1-3 such bytes unwritten).
    for (uint64_t bytes : {64 * MiB, 8 * MiB + 1, 8 * MiB + 3, 8 * MiB + 12345, 48 * MiB + 2,
                           uint64_t{4096} * 17, uint64_t{4096} * 16 * 200 + 1}) {
      INFO(threads << " threads, " << bytes << " bytes");
      Record record;
      REQUIRE(run_recorded(helpers, bytes, record) == TRN_SUCCESS);
      CHECK(record.covers_once(bytes));
      CHECK(record.pieces.size() <= helpers.threads() * DmaHelpers::kPiecesPerThread);
    }
  }
}

TEST_CASE("the helpers take pieces beside the caller", "[dma]") {
  DmaHelpers helpers(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> helped{false};
  Record record;
  std::string why;
  REQUIRE(helpers.run(
              uint64_t{16} << 20,
              [&](uint64_t at, uint64_t n, std::string *) {
                if (std::this_thread::get_id() != caller) helped.store(true);
                // Every piece waits (2 s at most) until a helper has run one, so the run cannot
                // end on the caller alone however late the helper wakes.
                for (int i = 0; i < 2000 && !helped.load(); ++i)
                  std::this_thread::sleep_for(std::chrono::milliseconds(1));
                return record_piece(record, at, n);
              },
              &why) == TRN_SUCCESS);
  // The caller may find every piece taken (a helper that woke at once ran them while the caller
  // was not scheduled): only the helper's part is certain.
  CHECK(helped.load());
  CHECK(record.covers_once(uint64_t{16} << 20));
}

TEST_CASE("one thread, or a transfer of one piece, runs whole on the caller", "[dma]") {
  for (unsigned threads : {0u, 1u, 4u}) {
    DmaHelpers helpers(threads);
    const uint64_t bytes = threads > 1 ? DmaHelpers::kPieceAlign : uint64_t{32} << 20;
    Record record;
    REQUIRE(run_recorded(helpers, bytes, record) == TRN_SUCCESS);
    REQUIRE(record.pieces.size() == 1);
    CHECK(record.pieces[0] == std::make_pair(uint64_t{0}, bytes));
    CHECK(*record.threads.begin() == std::this_thread::get_id());
  }
}

TEST_CASE("a failed piece is the transfer's result with its reason, after every piece ran",
          "[dma]") {
  DmaHelpers helpers(3);
  const uint64_t bytes = uint64_t{24} << 20;
  Record record;
  std::string why;
  const trn_result_t r = helpers.run(
      bytes,
      [&](uint64_t at, uint64_t n, std::string *piece_why) {
        record_piece(record, at, n);
        if (at == 0) return TRN_SUCCESS;
        *piece_why = "piece at " + std::to_string(at) + " failed";
        return TRN_ERROR_DEVICE_FAULTED;
      },
      &why);
  CHECK(r == TRN_ERROR_DEVICE_FAULTED);
  CHECK(why.rfind("piece at ", 0) == 0);
  CHECK(why.find(" failed") != std::string::npos);
  CHECK(record.covers_once(bytes));
}

TEST_CASE("a piece that throws fails the transfer instead of leaving it", "[dma]") {
  DmaHelpers helpers(2);
  const uint64_t bytes = uint64_t{16} << 20;
  for (bool out_of_memory : {true, false}) {
    Record record;
    std::string why;
    const trn_result_t r = helpers.run(
        bytes,
        [&](uint64_t at, uint64_t n, std::string *) -> trn_result_t {
          record_piece(record, at, n);
          if (at != 0) return TRN_SUCCESS;
          if (out_of_memory) throw std::bad_alloc();
          throw std::runtime_error("scribbled descriptor");
        },
        &why);
    CHECK(r == (out_of_memory ? TRN_ERROR_OUT_OF_HOST_MEMORY : TRN_ERROR_INTERNAL));
    CHECK(why == (out_of_memory ? "out of memory" : "moving bytes failed: scribbled descriptor"));
    CHECK(record.covers_once(bytes));
  }
}

TEST_CASE("transfers from several threads at once share the helpers", "[dma]") {
  DmaHelpers helpers(3);
  constexpr int kCallers = 4, kRuns = 20;
  std::vector<std::thread> callers;
  std::atomic<int> good{0};
  for (int c = 0; c < kCallers; ++c)
    callers.emplace_back([&, c] {
      for (int i = 0; i < kRuns; ++i) {
        const uint64_t bytes =
            (uint64_t{8} << 20) + static_cast<uint64_t>(c * kRuns + i) * 4096 + 1;
        Record record;
        if (run_recorded(helpers, bytes, record) == TRN_SUCCESS && record.covers_once(bytes))
          good.fetch_add(1);
      }
    });
  for (auto &t : callers) t.join();
  CHECK(good.load() == kCallers * kRuns);
}
