#include "sim/commit_map.hpp"

#include <algorithm>
#include <cstring>

#include "sim/device_state.hpp"

namespace trn::sim {

CommitMap::CommitMap(DeviceState &state)
    : state_(state), chunk_count_(state.header().hbm_bytes / kChunkBytes) {}

std::atomic<uint8_t> *CommitMap::flags() {
  std::call_once(made_, [&] { flags_ = std::make_unique<std::atomic<uint8_t>[]>(chunk_count_); });
  return flags_.get();
}

template <typename Each>
void CommitMap::for_chunks(uint64_t offset, uint64_t bytes, Each each) {
  if (bytes == 0) return;
  const uint64_t first = offset / kChunkBytes;
  const uint64_t last = std::min(chunk_count_ - 1, (offset + bytes - 1) / kChunkBytes);
  std::atomic<uint8_t> *f = flags();
  for (uint64_t c = first; c <= last; ++c) each(f[c]);
}

trn_result_t CommitMap::commit(uint64_t offset, uint64_t bytes, std::string *why) {
  if (bytes == 0) return TRN_SUCCESS;
  std::atomic<uint8_t> *f = flags();
  const uint64_t first = offset / kChunkBytes;
  const uint64_t last = (offset + bytes - 1) / kChunkBytes;
  auto committed = [&](uint64_t c) {
    return (f[c].load(std::memory_order_acquire) & kCommitted) != 0;
  };
  uint64_t c = first;
  while (c <= last && committed(c)) ++c;
  if (c > last) return TRN_SUCCESS;  // the common case: nothing new to back
  std::lock_guard lock(commit_mu_);
  while (c <= last) {
    if (committed(c)) {
      ++c;
      continue;
    }
    uint64_t end = c;
    while (end <= last && !committed(end)) ++end;
    if (trn_result_t r = state_.hbm_commit(c * kChunkBytes, (end - c) * kChunkBytes, why);
        r != TRN_SUCCESS)
      return r;
    for (; c < end; ++c) f[c].fetch_or(kCommitted, std::memory_order_release);
  }
  return TRN_SUCCESS;
}

trn_result_t CommitMap::read(const char *mapped, uint64_t offset, void *destination, uint64_t bytes,
                             std::string *why) {
  char *out = static_cast<char *>(destination);
  std::atomic<uint8_t> *f = flags();
  uint64_t done = 0;
  while (done < bytes) {
    const uint64_t position = offset + done;
    const uint64_t c = position / kChunkBytes;
    const uint64_t part = std::min(bytes - done, (c + 1) * kChunkBytes - position);
    uint8_t flag = f[c].load(std::memory_order_acquire);
    if (flag == kShared) {
      if (trn_result_t r = commit(position, part, why); r != TRN_SUCCESS) return r;
      flag |= kCommitted;
    }
    if (flag & kCommitted)
      std::memcpy(out + done, mapped + done, part);
    else
      std::memset(out + done, 0, part);
    done += part;
  }
  return TRN_SUCCESS;
}

void CommitMap::mark_shared(uint64_t offset, uint64_t bytes) {
  for_chunks(offset, bytes,
             [](std::atomic<uint8_t> &flag) { flag.fetch_or(kShared, std::memory_order_release); });
}

void CommitMap::forget(uint64_t offset, uint64_t bytes) {
  std::lock_guard lock(commit_mu_);  // not while another thread backs the same chunks
  for_chunks(offset, bytes,
             [](std::atomic<uint8_t> &flag) { flag.store(0, std::memory_order_release); });
}

}  // namespace trn::sim
