// trn-bench load: file -> device memory through trn_queue_read_file, against what the host gets
// from the same file: with a cold page cache, an O_DIRECT read into aligned host memory
// ("direct" cases); with the file in the page cache, memcpy from a mapping of the cached pages
// ("warm" cases). The file lies in TMPDIR (else /var/tmp): a real file system, as the cold case
// needs; /dev/shm would always be warm.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench.hpp"
#include "trn/trn.h"

namespace trn::bench {

namespace {

constexpr uint64_t kAlign = 4096;
constexpr uint64_t kBlock = 64ull << 20;  // the baseline's reads and the file's writes

[[noreturn]] void fail_errno(const std::string &what) {
  std::fprintf(stderr, "trn-bench load: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

std::string bench_dir() {
  const char *tmp = std::getenv("TMPDIR");
  return tmp && *tmp ? tmp : "/var/tmp";
}

// Host memory aligned for O_DIRECT, every page touched.
struct AlignedBuffer {
  explicit AlignedBuffer(uint64_t bytes) : size(bytes) {
    data = static_cast<char *>(std::aligned_alloc(kAlign, bytes));
    if (!data) fail_errno("aligned_alloc");
    std::memset(data, 1, bytes);
  }
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer &) = delete;
  AlignedBuffer &operator=(const AlignedBuffer &) = delete;
  char *data;
  uint64_t size;
};

// A file of `bytes` in `dir`, written, synced (so that its pages are clean and can be dropped)
// and unlinked at once: it goes when the descriptor closes.
int make_file(const std::string &dir, uint64_t bytes, const AlignedBuffer &block) {
  std::string path = dir + "/trn-bench-load-XXXXXX";
  const int fd = ::mkstemp(path.data());
  if (fd < 0) fail_errno("creating a file in " + dir);
  ::unlink(path.c_str());
  for (uint64_t at = 0; at < bytes; at += kBlock) {
    const uint64_t n = std::min(kBlock, bytes - at);
    if (::pwrite(fd, block.data, n, static_cast<off_t>(at)) != static_cast<ssize_t>(n))
      fail_errno("writing the file");
  }
  if (::fsync(fd) != 0) fail_errno("fsync");
  return fd;
}

void drop_cache(int fd) {
  if (::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) != 0) fail_errno("posix_fadvise");
}

void warm_cache(int fd, uint64_t bytes, AlignedBuffer &scratch) {
  for (uint64_t at = 0; at < bytes; at += kBlock)
    if (::pread(fd, scratch.data, std::min(kBlock, bytes - at), static_cast<off_t>(at)) < 0)
      fail_errno("reading the file");
}

// The host's O_DIRECT read of the whole file into aligned memory, in large reads (the kernel
// splits each into many requests in flight).
void direct_read(int fd, AlignedBuffer &into) {
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const int direct = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (direct < 0) fail_errno("opening the file with O_DIRECT");
  for (uint64_t at = 0; at < into.size;) {
    const ssize_t n = ::pread(direct, into.data + at, std::min(kBlock * 4, into.size - at),
                              static_cast<off_t>(at));
    if (n <= 0) fail_errno("the O_DIRECT read");
    at += static_cast<uint64_t>(n);
  }
  ::close(direct);
}

std::string label(uint64_t bytes) {
  return bytes >= (1ull << 30) ? std::to_string(bytes >> 30) + " GiB"
                               : std::to_string(bytes >> 20) + " MiB";
}

}  // namespace

int bench_load(int argc, char **argv) {
  const bool q = has_flag(argc, argv, "--quick");
  // Storage throughput drifts from run to run (a virtual disk shares its host): seven pairs keep
  // one slow stretch from deciding a median.
  const int runs = q ? 3 : 7;
  std::vector<uint64_t> sizes = {256ull << 20, 1ull << 30};
  if (!q) sizes.push_back(2ull << 30);
  const std::string dir = bench_dir();
  Context c = open_device();
  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  trn_pool_t pool;
  check(trn_pool_create(c.device, &pool_desc, &pool), "trn_pool_create");
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = c.core;
  trn_queue_t queue;
  check(trn_queue_create(&desc, &queue), "trn_queue_create");
  for (uint64_t size : sizes) {
    struct statvfs fs {};
    if (::statvfs(dir.c_str(), &fs) != 0) fail_errno("statvfs " + dir);
    const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (free_bytes < size + (1ull << 30)) {
      std::fprintf(stderr,
                   "trn-bench load: skipping %s: %s has %llu MiB free, the file needs %llu MiB "
                   "and 1 GiB to spare (set TMPDIR to a roomier file system)\n",
                   label(size).c_str(), dir.c_str(),
                   static_cast<unsigned long long>(free_bytes >> 20),
                   static_cast<unsigned long long>(size >> 20));
      continue;
    }
    AlignedBuffer host(size);
    const int fd = make_file(dir, size, host);
    trn_mem_t mem;
    check(trn_mem_alloc(pool, size, kAlign, TRN_MEM_CATEGORY_TENSORS, 0, &mem), "trn_mem_alloc");
    void *mapped;
    check(trn_mem_map(mem, &mapped), "trn_mem_map");
    std::memset(mapped, 2, size);  // backed before it is timed
    auto load = [&] {
      check(trn_queue_read_file(queue, mem, 0, fd, 0, size, nullptr, nullptr),
            "trn_queue_read_file");
      check(trn_queue_finish(queue, UINT64_MAX), "trn_queue_finish");
    };
    const auto gbps = [&](double ns) { return static_cast<double>(size) / ns; };
    // Cold: each run starts with the file's pages dropped (timed without the drop).
    const PairedMedians cold = paired_medians_ns(
        runs, [&] { drop_cache(fd); }, load, [&] { direct_read(fd, host); });
    print({"load", "direct " + label(size), "GB/s", gbps(cold.trn_ns), gbps(cold.baseline_ns),
           "O_DIRECT read into host memory", true});
    // Warm: the file in the page cache.
    warm_cache(fd, size, host);
    void *file = ::mmap(nullptr, size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (file == MAP_FAILED) fail_errno("mmap");
    const PairedMedians warm =
        paired_medians_ns(runs, {}, load, [&] { std::memcpy(host.data, file, size); });
    print({"load", "warm " + label(size), "GB/s", gbps(warm.trn_ns), gbps(warm.baseline_ns),
           "memcpy from the cached pages (mmap)", true});
    ::munmap(file, size);
    trn_mem_free(mem);
    ::close(fd);
  }
  check(trn_queue_destroy(queue), "trn_queue_destroy");
  check(trn_pool_destroy(pool), "trn_pool_destroy");
  return 0;
}

}  // namespace trn::bench
