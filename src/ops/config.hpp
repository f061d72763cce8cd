// What libtrn_ops is configured to do: where the disk cache is, how much the memory cache keeps,
// whether ops may run on the device at all. From the environment at first use
// (TRN_CACHE_DIR, TRN_OPS_CACHE, TRN_OPS_CACHE_BYTES, TRN_OPS_HOST_ONLY), replaced by
// trn_ops_configure. Read on every op, so it is a snapshot taken under a lock.
#pragma once

#include <cstdint>
#include <string>

#include "trn/trn_ops.h"

namespace trn::ops {

struct Config {
  std::string cache_dir;  // empty: no disk cache
  bool disk_cache = true;
  bool memory_cache = true;
  bool host_only = false;
  uint64_t memory_cache_bytes = uint64_t{256} << 20;
};

Config config();
// nullptr: back to the environment's configuration.
void configure(const trn_ops_config_t *config);

}  // namespace trn::ops
