#include "ops/fallback_log.hpp"

#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "common/log.hpp"

namespace trn::ops {

namespace {

struct Log {
  std::mutex mutex;
  std::vector<Fallback> entries;                                // in the order first seen
  std::map<std::pair<std::string, std::string>, size_t> index;  // (op, signature) -> entry
  std::set<std::string> warned;                                 // ops warned about
};

Log &log() {
  static Log *l = new Log;  // never destroyed: host calls may record during exit
  return *l;
}

}  // namespace

void record_fallback(const std::string &op, const std::string &signature,
                     const std::string &reason) {
  Log &l = log();
  bool warn = false;
  {
    std::lock_guard lock(l.mutex);
    auto [it, added] = l.index.try_emplace({op, signature}, l.entries.size());
    if (added) l.entries.push_back({op, signature, reason, 0});
    ++l.entries[it->second].count;
    warn = l.warned.insert(op).second;
  }
  if (warn)
    common::logger("ops")->warn(
        "{} runs on the host, not the device ({}: {}); further fallbacks of {} are only "
        "recorded (trn_ops_get_fallbacks)",
        op, signature, reason, op);
}

std::vector<Fallback> fallbacks() {
  Log &l = log();
  std::lock_guard lock(l.mutex);
  return l.entries;
}

void reset_fallbacks() {
  Log &l = log();
  std::lock_guard lock(l.mutex);
  l.entries.clear();
  l.index.clear();
  l.warned.clear();
}

}  // namespace trn::ops
