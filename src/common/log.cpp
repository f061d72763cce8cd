#include "common/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "common/parse.hpp"

namespace trn::common {

namespace {

struct Loggers {
  std::mutex mu;  // guards the map: components create their loggers lazily from any thread
  std::shared_ptr<spdlog::sinks::stderr_color_sink_mt> sink;
  spdlog::level::level_enum level = spdlog::level::warn;
  std::map<std::string, std::shared_ptr<spdlog::logger>> by_component;

  Loggers() : sink(std::make_shared<spdlog::sinks::stderr_color_sink_mt>()) {
    sink->set_pattern("%Y-%m-%d %H:%M:%S.%e %z %P:%t %^%l%$ %n: %v");
    if (auto text = env("TRN_LOG_LEVEL")) {
      const auto parsed = spdlog::level::from_str(*text);
      // from_str maps unknown names to "off"; only accept "off" when asked for.
      if (parsed == spdlog::level::off && *text != "off") {
        std::fprintf(stderr,
                     "trn: TRN_LOG_LEVEL='%s' is not a level: use error, warn, info, debug, "
                     "trace or off; using warn\n",
                     text->c_str());
      } else {
        level = parsed;
      }
    }
  }
};

Loggers &loggers() {
  static Loggers instance;
  return instance;
}

}  // namespace

std::shared_ptr<spdlog::logger> logger(const char *component) {
  Loggers &all = loggers();
  std::lock_guard lock(all.mu);
  auto &slot = all.by_component[component];
  if (!slot) {
    slot = std::make_shared<spdlog::logger>(std::string("trn.") + component, all.sink);
    slot->set_level(all.level);
  }
  return slot;
}

}  // namespace trn::common
