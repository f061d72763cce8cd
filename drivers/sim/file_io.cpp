#include "sim/file_io.hpp"

#include <fcntl.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "sim/dma_engine.hpp"

namespace trn::sim {

namespace {

constexpr uint64_t kAlign = 4096;        // what O_DIRECT needs of offsets, sizes and memory
constexpr uint64_t kChunk = 2ull << 20;  // bytes per read or write
constexpr unsigned kDepth = 16;          // in flight at once
constexpr int kWroteNothing = -1;        // a write that returned 0
constexpr int kEndOfFile = 0;

// A descriptor this code opened.
class OwnedFd {
 public:
  OwnedFd() = default;
  OwnedFd(const OwnedFd &) = delete;
  OwnedFd &operator=(const OwnedFd &) = delete;
  ~OwnedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  void reset(int fd) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// The calling thread's ring (a queue's worker keeps one for its life), made on first use; none
// when the kernel refuses io_uring.
class ThreadRing {
 public:
  ~ThreadRing() {
    if (ok_) io_uring_queue_exit(&ring_);
  }
  io_uring *get() {
    if (!tried_) {
      tried_ = true;
      ok_ = io_uring_queue_init(kDepth, &ring_, 0) == 0;
    }
    return ok_ ? &ring_ : nullptr;
  }
  // After a submission error nobody can say what the kernel took: drop the ring.
  void discard() {
    if (ok_) io_uring_queue_exit(&ring_);
    ok_ = false;
    tried_ = false;
  }

 private:
  io_uring ring_{};
  bool tried_ = false;
  bool ok_ = false;
};

thread_local ThreadRing t_ring;

// One chunk of the transfer: [at, at+bytes) of the memory, at file_offset + at in the file.
struct Piece {
  uint64_t at = 0, bytes = 0, done = 0;
  bool direct = false;
  bool cached = false;  // all its pages were in the page cache just before it was submitted
  bool looked = false;  // whether the page cache was looked at for it
};

// A mapping of part of a file that is never touched: mincore on it says which pages the page
// cache holds without reading anything.
class CacheView {
 public:
  CacheView() = default;
  CacheView(const CacheView &) = delete;
  CacheView &operator=(const CacheView &) = delete;
  ~CacheView() {
    if (map_ != nullptr) ::munmap(map_, bytes_);
  }
  void open(int fd, uint64_t file_offset, uint64_t bytes) {
    void *map = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(file_offset));
    if (map == MAP_FAILED) return;  // nothing is known to be cached: reads go direct
    map_ = static_cast<unsigned char *>(map);
    bytes_ = bytes;
  }
  // Whether every page of [at, at+bytes) of the view is in the page cache (`at` page aligned).
  bool resident(uint64_t at, uint64_t bytes) {
    if (map_ == nullptr || at + bytes > bytes_) return false;
    pages_.resize((bytes + kAlign - 1) / kAlign);
    if (::mincore(map_ + at, bytes, pages_.data()) != 0) return false;
    return std::all_of(pages_.begin(), pages_.end(),
                       [](unsigned char page) { return (page & 1) != 0; });
  }

 private:
  unsigned char *map_ = nullptr;
  uint64_t bytes_ = 0;
  std::vector<unsigned char> pages_;
};

class Transfer {
 public:
  Transfer(FileDirection direction, char *memory, uint64_t bytes, int fd, uint64_t file_offset)
      : direction_(direction), memory_(memory), bytes_(bytes), fd_(fd), offset_(file_offset) {}

  trn_result_t run(std::string *why) {
    const int flags = ::fcntl(fd_, F_GETFL);
    if (flags < 0) return fail_now(errno, why);
    const int access = flags & O_ACCMODE;
    // What the kernel says of a read on a write-only descriptor, or of either on an O_PATH one
    // (its access mode reads as O_RDONLY, but it reads nothing; the O_DIRECT reopening would).
    if ((flags & O_PATH) != 0 || (access != O_RDWR && access != (reading() ? O_RDONLY : O_WRONLY)))
      return fail_now(EBADF, why);
    // Checked when submitted too; the number may name another file by now (closed and reused):
    // anything but a regular file or a block device (a pipe, a socket, an eventfd, a terminal)
    // would block this queue's thread for as long as nothing comes.
    if (struct stat st{}; ::fstat(fd_, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
      return fail_now(ESPIPE, why);
    // O_APPEND would put the bytes at the end, not at the offset asked for (refused when
    // submitted too).
    if (!reading() && (flags & O_APPEND) != 0) return fail_now(EINVAL, why);
    if (bytes_ == 0) return TRN_SUCCESS;
    open_descriptors(flags);
    plan();
    if (io_uring *ring = t_ring.get(); ring != nullptr)
      run_ring(ring);
    else
      run_blocking();
    return failed_ ? fail_now(error_, why) : TRN_SUCCESS;
  }

 private:
  bool reading() const { return direction_ == FileDirection::read; }

  trn_result_t fail_now(int error, std::string *why) {
    if (!failed_) fail_at_ = offset_;
    std::string what = error == kEndOfFile      ? std::string("end of file")
                       : error == kWroteNothing ? std::string("the file took no bytes")
                                                : std::string(std::strerror(error)) + " (errno " +
                                                      std::to_string(error) + ")";
    *why = std::string(reading() ? "file read: " : "file write: ") + what + " at offset " +
           std::to_string(fail_at_) + " after " + std::to_string(fail_at_ - offset_) + " of " +
           std::to_string(bytes_) + " bytes (fd " + std::to_string(fd_) + ")";
    return TRN_ERROR_FILE;
  }

  void fail(uint64_t file_offset, int error) {
    if (failed_ && file_offset >= fail_at_) return;
    failed_ = true;
    fail_at_ = file_offset;
    error_ = error;
  }

  // The caller's descriptor for the page cache (or a reopening without O_DIRECT if it has it),
  // and a reopening with O_DIRECT for the aligned part where the file system allows it.
  void open_descriptors(int flags) {
    const std::string path = "/proc/self/fd/" + std::to_string(fd_);
    const int mode = reading() ? O_RDONLY : O_WRONLY;
    buffered_ = fd_;
    if ((flags & O_DIRECT) != 0) {
      reopened_buffered_.reset(::open(path.c_str(), mode | O_CLOEXEC));
      if (reopened_buffered_.get() >= 0) buffered_ = reopened_buffered_.get();
    }
    if ((flags & O_APPEND) != 0) return;  // appends keep the caller's semantics
    const auto address = reinterpret_cast<uintptr_t>(memory_);
    if (address % kAlign != offset_ % kAlign || bytes_ < kAlign) return;
    direct_fd_.reset(::open(path.c_str(), mode | O_DIRECT | O_CLOEXEC));
  }

  // Chunks: the unaligned head and tail through the page cache, the aligned middle direct.
  void plan() {
    uint64_t head = bytes_, tail = bytes_;
    if (direct_fd_.get() >= 0) {
      head = std::min(bytes_, (kAlign - offset_ % kAlign) % kAlign);
      tail = head + (bytes_ - head) / kAlign * kAlign;
    }
    auto add = [&](uint64_t begin, uint64_t end, bool direct) {
      for (uint64_t at = begin; at < end; at += kChunk)
        pieces_.push_back({at, std::min(kChunk, end - at), 0, direct});
    };
    add(0, head, false);
    add(head, tail, true);
    add(tail, bytes_, false);
    if (reading() && tail > head) cache_view_.open(buffered_, offset_ + head, tail - head);
    direct_begin_ = head;
  }

  // Direct reads of what the page cache holds already would read storage again: a chunk whose
  // pages are all cached is copied from the cache instead (a warm file loads at memory speed).
  // Each chunk is looked at just before it is submitted, so that the look (a page cache lookup
  // per page) overlaps the chunks already being copied rather than delaying the first.
  void use_page_cache(Piece &p) {
    if (!p.direct || p.looked) return;
    p.looked = true;
    p.cached = cache_view_.resident(p.at - direct_begin_, p.bytes);
    p.direct = !p.cached;
  }

  uint64_t file_position(const Piece &p) const { return offset_ + p.at + p.done; }

  // A piece's operation returned `result`: true when the rest of it must be submitted again.
  bool complete(Piece &p, long result) {
    if (result == -EINTR || result == -EAGAIN) return true;
    if (result == -EINVAL && p.direct) {  // the file system refused O_DIRECT: go buffered
      p.direct = false;
      return true;
    }
    if (result <= 0) {
      fail(file_position(p),
           result < 0 ? static_cast<int>(-result) : (reading() ? kEndOfFile : kWroteNothing));
      return false;
    }
    p.done += static_cast<uint64_t>(result);
    if (p.done == p.bytes) return false;
    // A short transfer: the rest may no longer be aligned (it may be the end of the file).
    if ((file_position(p) | (p.bytes - p.done)) % kAlign != 0) p.direct = false;
    // Pieces before a failure are finished, so that the bytes before it are all there.
    return !failed_ || file_position(p) < fail_at_;
  }

  int descriptor(const Piece &p) const { return p.direct ? direct_fd_.get() : buffered_; }
  char *memory(const Piece &p) const { return memory_ + p.at + p.done; }
  unsigned remaining(const Piece &p) const { return static_cast<unsigned>(p.bytes - p.done); }

  void prepare(io_uring *ring, size_t index) {
    Piece &p = pieces_[index];
    use_page_cache(p);
    io_uring_sqe *sqe = io_uring_get_sqe(ring);  // never NULL: no more in flight than entries
    if (reading())
      io_uring_prep_read(sqe, descriptor(p), memory(p), remaining(p), file_position(p));
    else
      io_uring_prep_write(sqe, descriptor(p), memory(p), remaining(p), file_position(p));
    // A read of cached pages is a copy the kernel would make inline, one after the other, on
    // this thread: handed to io_uring's workers, several run at once.
    if (p.cached) sqe->flags |= IOSQE_ASYNC;
    io_uring_sqe_set_data(sqe, reinterpret_cast<void *>(static_cast<uintptr_t>(index)));
    ++prepared_;
  }

  void run_ring(io_uring *ring) {
    size_t next = 0;
    unsigned in_kernel = 0;
    bool broken = false;  // a submission failed: nothing more goes in, what is in comes out
    for (;;) {
      while (!failed_ && next < pieces_.size() && in_kernel + prepared_ < kDepth)
        prepare(ring, next++);
      if (!broken && prepared_ > 0) {
        const int n = io_uring_submit(ring);
        if (n >= 0) {
          prepared_ -= static_cast<unsigned>(n);
          in_kernel += static_cast<unsigned>(n);
        } else if (n != -EINTR && n != -EAGAIN && n != -EBUSY) {
          broken = true;
          fail(offset_ + pieces_[next - 1].at, -n);
        }
      }
      if (in_kernel == 0) {
        if (broken || prepared_ == 0) break;
        continue;
      }
      io_uring_cqe *cqe = nullptr;
      if (io_uring_wait_cqe(ring, &cqe) != 0) continue;  // interrupted
      unsigned head, seen = 0;
      io_uring_for_each_cqe(ring, head, cqe) {
        ++seen;
        const auto index = reinterpret_cast<uintptr_t>(io_uring_cqe_get_data(cqe));
        if (complete(pieces_[index], cqe->res) && !broken) prepare(ring, index);
      }
      io_uring_cq_advance(ring, seen);
      in_kernel -= seen;
    }
    if (broken) t_ring.discard();  // its unsubmitted entries go with it
  }

  void run_blocking() {
    for (Piece &p : pieces_) {
      if (failed_) break;
      use_page_cache(p);
      for (;;) {
        const auto at = static_cast<off_t>(file_position(p));
        const ssize_t n = reading() ? ::pread(descriptor(p), memory(p), remaining(p), at)
                                    : ::pwrite(descriptor(p), memory(p), remaining(p), at);
        if (!complete(p, n < 0 ? -static_cast<long>(errno) : static_cast<long>(n))) break;
      }
    }
  }

  const FileDirection direction_;
  char *const memory_;
  const uint64_t bytes_;
  const int fd_;
  const uint64_t offset_;
  int buffered_ = -1;
  OwnedFd reopened_buffered_;
  OwnedFd direct_fd_;
  CacheView cache_view_;
  uint64_t direct_begin_ = 0;  // where the aligned middle (the view) starts in the memory
  std::vector<Piece> pieces_;
  unsigned prepared_ = 0;  // in the submission ring, not yet submitted
  bool failed_ = false;
  uint64_t fail_at_ = 0;
  int error_ = 0;
};

}  // namespace

trn_result_t file_transfer(FileDirection direction, const MemorySpan &memory, int fd,
                           uint64_t file_offset, std::string *why) {
  // Both ways the memory is backed first: a read stores into it, and a write reads memory never
  // written as the zeros it holds.
  if (trn_result_t r = dma_back(memory, why); r != TRN_SUCCESS) return r;
  return Transfer(direction, memory.host, memory.bytes, fd, file_offset).run(why);
}

}  // namespace trn::sim
