// What trn-top shows, as lines of text that fit a width: used by the ncurses screen and by the
// batch mode (-b) alike.
#pragma once

#include <string>
#include <vector>

#include "tool_common/sampler.hpp"

namespace trn::tools {

struct View {
  size_t device = 0;     // index into frame.devices
  int32_t process = 0;   // pid to focus on; 0 = all processes
  bool engines = false;  // the per-engine table instead of the per-core one
  size_t width = 80;
};

// One device of the frame (view.device, clamped to the devices there are): title, cores or
// engines, memory, processes. A frame without devices gives the one line saying why.
std::vector<std::string> render_top(const Frame &frame, const View &view);

}  // namespace trn::tools
