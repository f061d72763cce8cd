#include "trn-monitor/textfile.hpp"

#include <cstddef>
#include <span>

#include "common/write_file.hpp"

namespace trn::tools {

std::optional<std::string> write_textfile(const std::string &path, const std::string &text) {
  // One trn-monitor writes a textfile: a fixed temporary name, as node_exporter's docs show.
  return common::write_file_replacing(path, path + ".tmp", std::as_bytes(std::span(text)));
}

}  // namespace trn::tools
