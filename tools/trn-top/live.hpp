// trn-top's live screen (ncurses): samples every period, redraws after each sample or key, and
// waits for keys without spinning, also when its standard input is at end of file.
#pragma once

#include <atomic>
#include <cstdint>

#include "trn-top/screen.hpp"

namespace trn::tools {

// Runs until 'q' or until `stop` is set. `baseline` is the sampler's first frame (shown at once,
// its figures "-"); `view` is the starting device and table.
int run_live(Sampler &sampler, Frame baseline, View view, uint32_t delay_ms,
             const std::atomic<bool> &stop);

}  // namespace trn::tools
