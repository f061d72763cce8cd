// Logging for every part of trn, through spdlog. TRN_LOG_LEVEL (error, warn, info, debug, trace,
// off; default warn) sets the level. One line format everywhere:
//   2026-11-29 12:03:11.042 4121:4121 warning trn.sim: message
#pragma once

#include <spdlog/spdlog.h>

#include <memory>

namespace trn::common {

// The logger of a component ("runtime", "sim"), created on first use. Thread-safe.
std::shared_ptr<spdlog::logger> logger(const char *component);

}  // namespace trn::common
