#include "ops/config.hpp"

#include <fmt/format.h>

#include <mutex>
#include <optional>

#include "common/parse.hpp"
#include "ops/error.hpp"

namespace trn::ops {

namespace {

std::string env(const char *name) {
  return common::env(name).value_or("");
}

// $XDG_CACHE_HOME/trn, else ~/.cache/trn, as the XDG base directory rules say.
std::string default_cache_dir() {
  if (std::string dir = env("TRN_CACHE_DIR"); !dir.empty()) return dir;
  if (std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty() && xdg[0] == '/') return xdg + "/trn";
  if (std::string home = env("HOME"); !home.empty()) return home + "/.cache/trn";
  return "";
}

Config from_environment() {
  Config c;
  c.cache_dir = default_cache_dir();
  const std::string cache = env("TRN_OPS_CACHE");
  if (cache == "off" || cache == "0") {
    c.disk_cache = c.memory_cache = false;
  } else if (cache == "memory") {
    c.disk_cache = false;
  } else if (!cache.empty() && cache != "on" && cache != "1") {
    fail(TRN_ERROR_INVALID_CONFIG,
         fmt::format("TRN_OPS_CACHE is '{}'; use on, memory or off", cache));
  }
  if (std::string bytes = env("TRN_OPS_CACHE_BYTES"); !bytes.empty()) {
    const std::optional<uint64_t> n = common::parse_bytes(bytes);
    if (!n || *n == 0)
      fail(
          TRN_ERROR_INVALID_CONFIG,
          fmt::format("TRN_OPS_CACHE_BYTES is '{}'; give a size such as 268435456 or 256M", bytes));
    c.memory_cache_bytes = *n;
  }
  const std::string host = env("TRN_OPS_HOST_ONLY");
  if (!host.empty() && host != "1" && host != "on" && host != "0" && host != "off")
    fail(TRN_ERROR_INVALID_CONFIG,
         fmt::format("TRN_OPS_HOST_ONLY is '{}'; use 1 (every op on the host reference) or 0",
                     host));
  c.host_only = host == "1" || host == "on";
  if (c.cache_dir.empty()) c.disk_cache = false;
  return c;
}

std::mutex g_mutex;
std::optional<Config> g_config;  // guarded by g_mutex; set on first use

}  // namespace

Config config() {
  std::lock_guard lock(g_mutex);
  if (!g_config) g_config = from_environment();
  return *g_config;
}

void configure(const trn_ops_config_t *config) {
  Config c;
  if (!config) {
    c = from_environment();
  } else {
    if (config->header.type != TRN_STRUCT_OPS_CONFIG ||
        config->header.size < sizeof(trn_ops_config_t))
      fail(TRN_ERROR_INVALID_STRUCT, "config was not made with TRN_OPS_CONFIG_INIT");
    const uint32_t known =
        TRN_OPS_CONFIG_NO_DISK_CACHE | TRN_OPS_CONFIG_NO_MEMORY_CACHE | TRN_OPS_CONFIG_HOST_ONLY;
    if (config->flags & ~known)
      invalid(fmt::format("config->flags has unknown bits {:#x}", config->flags & ~known));
    c.cache_dir = config->cache_dir ? config->cache_dir : default_cache_dir();
    c.disk_cache = !(config->flags & TRN_OPS_CONFIG_NO_DISK_CACHE) && !c.cache_dir.empty();
    c.memory_cache = !(config->flags & TRN_OPS_CONFIG_NO_MEMORY_CACHE);
    c.host_only = config->flags & TRN_OPS_CONFIG_HOST_ONLY;
    c.memory_cache_bytes = config->memory_cache_bytes ? config->memory_cache_bytes
                                                      : from_environment().memory_cache_bytes;
  }
  std::lock_guard lock(g_mutex);
  g_config = c;
}

}  // namespace trn::ops
