// libfabric, loaded the first time a communicator needs it (ranks on another host) instead of
// at program start. Loading it costs about 0.2 s, and the PSM libraries it links against install
// process-wide handlers for SIGINT, SIGTERM and the crash signals whose exit() can deadlock a
// crashing program: a program that never leaves the host should pay neither, and one that does
// keeps its own handlers (see KeepSignalHandlers).
#pragma once

#include <rdma/fabric.h>
#include <signal.h>

#include <array>
#include <string>

namespace trn::comm {

// The entry points libfabric exports (everything else in its headers calls through the
// objects' operation tables).
struct FabricLibrary {
  decltype(&fi_getinfo) getinfo;
  decltype(&fi_freeinfo) freeinfo;
  decltype(&fi_dupinfo) dupinfo;
  decltype(&fi_fabric) fabric;
  decltype(&fi_strerror) strerror;
};

// Loads libfabric once (thread-safe) and returns its entry points; throws CommError
// (TRN_ERROR_DRIVER) saying what to install when it cannot be loaded. Before loading it sets
// provider variables the user left unset to trn's defaults (fabric_library.cpp).
const FabricLibrary &fabric_library();

// rxm's eager limit: messages up to it go at once, larger ones by rendezvous. Ranks whose
// limits differ stall (a message sent eagerly is never matched), so a communicator compares
// them across its ranks.
constexpr const char *kEagerLimitVariable = "FI_OFI_RXM_EAGER_LIMIT";
// Its value when libfabric loaded (trn's default unless the user set one); after
// fabric_library().
const std::string &rxm_eager_limit();

// While alive, keeps the program's handlers for the signals libraries like to take (SIGINT,
// SIGTERM, SIGQUIT and the crash signals): whatever a library installs meanwhile is put back.
class KeepSignalHandlers {
 public:
  KeepSignalHandlers();
  ~KeepSignalHandlers();
  KeepSignalHandlers(const KeepSignalHandlers &) = delete;
  KeepSignalHandlers &operator=(const KeepSignalHandlers &) = delete;

  static constexpr std::array kSignals{SIGINT,  SIGTERM, SIGQUIT, SIGILL,
                                       SIGABRT, SIGBUS,  SIGFPE,  SIGSEGV};

 private:
  std::array<struct sigaction, kSignals.size()> saved_{};
};

}  // namespace trn::comm
