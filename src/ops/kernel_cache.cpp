#include "ops/kernel_cache.hpp"

#include <fmt/format.h>

#include <chrono>
#include <list>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "common/log.hpp"
#include "isa/container.hpp"
#include "ops/config.hpp"
#include "ops/disk_cache.hpp"
#include "ops/error.hpp"
#include "ops/kernels_fingerprint.hpp"

namespace trn::ops {

namespace {

struct Entry {
  std::string key;  // device index + full key
  KernelPtr kernel;
};

struct Cache {
  std::mutex mutex;
  std::list<Entry> lru;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index;
  trn_ops_cache_stats_t stats = TRN_OPS_CACHE_STATS_INIT;
};

Cache &cache() {
  static Cache *c = new Cache;  // never destroyed: kernels outlive static destruction order
  return *c;
}

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Evicts least recently used kernels until the cache fits `bytes`. Holds the lock.
void trim_locked(Cache &c, uint64_t bytes) {
  while (!c.lru.empty() && c.stats.memory_bytes > bytes) {
    Entry &e = c.lru.back();
    c.stats.memory_bytes -= e.kernel->image.size();
    --c.stats.memory_entries;
    ++c.stats.evictions;
    c.index.erase(e.key);
    c.lru.pop_back();
  }
}

KernelPtr load(const Device &device, std::vector<std::byte> image) {
  auto k = std::make_shared<LoadedKernel>();
  k->device_index = device.index;
  const trn_result_t r = trn_kernel_load(device.handle, image.data(), image.size(), &k->kernel);
  if (r == TRN_ERROR_INVALID_HANDLE) {
    forget_device(device.index);
    throw StaleHandle{};
  }
  check(r, "loading the op's kernel");
  k->image = std::move(image);
  return k;
}

// Whether the disk cache's directory may be used, looked at on every miss in memory (it may
// change under a running process); one warning per directory and process when it may not.
bool directory_trusted(const std::string &dir) {
  const std::optional<std::string> why = untrusted_directory(dir);
  if (!why) return true;
  static std::mutex mutex;
  static auto *warned = new std::unordered_set<std::string>;  // never destroyed, as cache()
  std::lock_guard lock(mutex);
  if (warned->insert(dir).second)
    common::logger("ops")->warn(
        "the kernel cache directory {} {}: not used, kernels are built in memory (whoever can "
        "write it chooses the code the device runs; point TRN_CACHE_DIR at a directory of your "
        "own, mode 0700)",
        dir, *why);
  return false;
}

}  // namespace

KernelPtr get_kernel(const Device &device, const std::string &signature, const BuildFn &build) {
  Config conf = config();
  // In memory, kernels are per device (whose target is fixed): the signature and the device
  // index name one. The full key, for the disk, is made only on a miss.
  std::string memory_key = signature;
  memory_key += '|';
  memory_key += std::to_string(device.index);
  Cache &c = cache();
  if (conf.memory_cache) {
    std::lock_guard lock(c.mutex);
    auto it = c.index.find(memory_key);
    if (it != c.index.end()) {
      c.lru.splice(c.lru.begin(), c.lru, it->second);
      ++c.stats.memory_hits;
      return it->second->kernel;
    }
  }

  const std::string key = fmt::format("{}|{}|isa{}|kernels{}", signature, device.target_key,
                                      isa::kKernelFormatVersionFiles, TRN_KERNELS_FINGERPRINT);
  KernelPtr kernel;
  if (conf.disk_cache && !directory_trusted(conf.cache_dir)) conf.disk_cache = false;
  if (conf.disk_cache) {
    const uint64_t start = now_ns();
    DiskEntry e = read_entry(conf.cache_dir, key);
    if (e.state == DiskEntry::State::kFound) {
      try {
        kernel = load(device, std::move(e.image));
      } catch (const OpError &err) {
        if (err.result != TRN_ERROR_INVALID_KERNEL) throw;
        e.state = DiskEntry::State::kCorrupt;
        e.problem = fmt::format("{}: {}", entry_path(conf.cache_dir, key), err.what());
      }
    }
    if (kernel) {
      std::lock_guard lock(c.mutex);
      ++c.stats.disk_hits;
      c.stats.disk_load_ns += now_ns() - start;
    } else if (e.state == DiskEntry::State::kCorrupt) {
      common::logger("ops")->warn("kernel cache entry is corrupt, rebuilding it: {}", e.problem);
      std::lock_guard lock(c.mutex);
      ++c.stats.corrupt_entries;
    }
  }

  if (!kernel) {
    const uint64_t start = now_ns();
    auto built = build(device.target);
    if (auto *err = std::get_if<std::string>(&built)) throw DeviceRefused{*err};
    std::vector<std::byte> image = isa::write_kernel(std::get<isa::Program>(built));
    const uint64_t built_ns = now_ns() - start;
    kernel = load(device, std::move(image));
    bool written = false;
    if (conf.disk_cache) {
      if (auto err = write_entry(conf.cache_dir, key, kernel->image))
        common::logger("ops")->warn("cannot write the kernel cache entry: {}", *err);
      else
        written = true;
    }
    std::lock_guard lock(c.mutex);
    ++c.stats.builds;
    c.stats.build_ns += built_ns;
    if (written) ++c.stats.disk_writes;
  }

  if (conf.memory_cache) {
    std::lock_guard lock(c.mutex);
    auto it = c.index.find(memory_key);
    if (it != c.index.end()) return it->second->kernel;  // another thread got there first
    c.lru.push_front({memory_key, kernel});
    c.index.emplace(memory_key, c.lru.begin());
    c.stats.memory_bytes += kernel->image.size();
    ++c.stats.memory_entries;
    trim_locked(c, conf.memory_cache_bytes);
  }
  return kernel;
}

void forget_kernel(const KernelPtr &kernel) {
  Cache &c = cache();
  std::lock_guard lock(c.mutex);
  for (auto it = c.lru.begin(); it != c.lru.end(); ++it) {
    if (it->kernel != kernel) continue;
    c.stats.memory_bytes -= kernel->image.size();
    --c.stats.memory_entries;
    c.index.erase(it->key);
    c.lru.erase(it);
    return;
  }
}

trn_ops_cache_stats_t cache_stats() {
  Cache &c = cache();
  std::lock_guard lock(c.mutex);
  return c.stats;
}

void cache_clear() {
  Cache &c = cache();
  std::lock_guard lock(c.mutex);
  c.lru.clear();
  c.index.clear();
  c.stats = TRN_OPS_CACHE_STATS_INIT;
}

void cache_trim() {
  const Config conf = config();
  Cache &c = cache();
  std::lock_guard lock(c.mutex);
  trim_locked(c, conf.memory_cache ? conf.memory_cache_bytes : 0);
}

}  // namespace trn::ops
