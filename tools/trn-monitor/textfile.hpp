// node_exporter textfile output: the Prometheus text replaces the file atomically (written to
// PATH.tmp, then renamed), so the collector never reads half a file.
#pragma once

#include <optional>
#include <string>

namespace trn::tools {

// nullopt on success, else one line saying what failed ("cannot write PATH: reason").
std::optional<std::string> write_textfile(const std::string &path, const std::string &text);

}  // namespace trn::tools
