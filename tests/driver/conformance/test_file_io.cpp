// File commands (FILE_READ, FILE_WRITE): exact bytes both ways at unaligned offsets, an end of
// file and a descriptor that is not open as faults naming the file offset. (Malformed file
// commands are among test_queues.cpp's refusals at submission.)
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "loader_support.hpp"
#include "tests/support/temp_files.hpp"

using namespace conformance;

namespace {

// A pattern file in a private directory, removed at the end.
class TempFile {
 public:
  explicit TempFile(const std::vector<uint8_t> &contents)
      : fd_(trn::test::create_file(dir_.file("data"), contents)) {}
  int fd() const { return fd_.get(); }
  std::vector<uint8_t> contents() const { return trn::test::file_contents(fd_.get()); }

 private:
  trn::test::TempDir dir_;
  trn::test::Fd fd_;
};

// Runs one buffer and waits until it retired; returns its fault.
trn_hal_queue_fault_t run_buffer(Queue &q, std::vector<trn_hal_command_t> commands) {
  q.submit(commands);
  REQUIRE(q.wait_retired(q.status().submitted));
  return q.status().fault;
}

}  // namespace

TEST_CASE("files: FILE_READ and FILE_WRITE move exact bytes at unaligned offsets", "[files]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  const uint64_t bytes = (5 << 20) + 4097;  // several chunks, not a multiple of a page
  const auto model = pattern(bytes + 8192, 3);
  TempFile file(model);
  Range r(inst, 0, 8 << 20);
  Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
  struct Case {
    uint64_t device, file, n;
  };
  for (const Case &c : {Case{0, 0, bytes}, Case{4096, 8192, bytes}, Case{3, 4101, bytes - 7},
                        Case{4096 + 5, 5, 100000}}) {
    INFO("device +" << c.device << ", file +" << c.file << ", " << c.n << " bytes");
    const auto fault = run_buffer(q, {file_command(TRN_HAL_COMMAND_FILE_READ, file.fd(), c.file,
                                                   r.address() + c.device, c.n)});
    INFO("fault: " << fault.reason);
    REQUIRE(fault.result == TRN_SUCCESS);
    const auto got = read_device(inst, 0, r.address() + c.device, c.n);
    CHECK(first_difference(got, std::vector<uint8_t>(model.begin() + c.file,
                                                     model.begin() + c.file + c.n)) == -1);
  }
  // Back out to another place of the file: the file now holds the device bytes there.
  const auto device = pattern(1 << 20, 9);
  write_device(inst, 0, r.address(), device);
  const auto fault = run_buffer(
      q, {file_command(TRN_HAL_COMMAND_FILE_WRITE, file.fd(), 777, r.address(), device.size())});
  INFO("fault: " << fault.reason);
  REQUIRE(fault.result == TRN_SUCCESS);
  const auto now = file.contents();
  CHECK(first_difference(std::vector<uint8_t>(now.begin() + 777, now.begin() + 777 + device.size()),
                         device) == -1);
  CHECK(first_difference(std::vector<uint8_t>(now.begin(), now.begin() + 777),
                         std::vector<uint8_t>(model.begin(), model.begin() + 777)) == -1);
}

TEST_CASE("files: an end of file or a closed descriptor fails the buffer, naming the offset",
          "[files]") {
  Instance inst;
  CONFORMANCE_NEED_DEVICES(inst, 1);
  TempFile file(pattern(1 << 20, 4));
  Range r(inst, 0, 4 << 20);
  {
    Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
    const auto fault = run_buffer(
        q, {file_command(TRN_HAL_COMMAND_FILE_READ, file.fd(), 0, r.address(), 2 << 20)});
    INFO("fault: " << fault.reason);
    CHECK(fault.result == TRN_ERROR_FILE);
    CHECK(fault.command_kind == TRN_HAL_COMMAND_FILE_READ);
    CHECK(std::string(fault.reason).find("end of file at offset 1048576") != std::string::npos);
    CHECK(fault.bytes == 2u << 20);
  }
  {
    Queue q(inst, 0, TRN_HAL_QUEUE_COPY);
    // A number far above what opens take next, so that nothing reuses it once closed.
    const int closed = ::fcntl(file.fd(), F_DUPFD_CLOEXEC, 900);
    REQUIRE(closed >= 900);
    ::close(closed);
    const auto fault =
        run_buffer(q, {file_command(TRN_HAL_COMMAND_FILE_WRITE, closed, 0, r.address(), 4096)});
    INFO("fault: " << fault.reason);
    CHECK(fault.result == TRN_ERROR_FILE);
    CHECK(std::string(fault.reason).find("errno 9") != std::string::npos);  // EBADF
  }
}
