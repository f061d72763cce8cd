// Names the library's threads as ps, top, perf and gdb show them.
#pragma once

#include <pthread.h>

#include <string>
#include <thread>

namespace trn::common {

// Named by the thread that made it, so the name is there as soon as the constructor returns.
// Linux keeps 15 characters of a thread's name; longer names are cut to fit.
inline void name_thread(std::thread &thread, const std::string &name) {
  (void)pthread_setname_np(thread.native_handle(), name.substr(0, 15).c_str());
}

}  // namespace trn::common
