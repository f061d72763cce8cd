#include "comm/fabric_library.hpp"

#include <dirent.h>
#include <dlfcn.h>
#include <stdlib.h>

#include <cstring>
#include <string>

#include "comm/config.hpp"
#include "comm/error.hpp"

namespace trn::comm {

namespace {

// libfabric 1.x's soname; the same library the headers were built against.
constexpr const char *kLibrary = "libfabric.so.1";

struct Loaded {
  FabricLibrary entries{};
  std::string error;                       // why it could not be loaded; empty when it was
  trn_result_t result = TRN_ERROR_DRIVER;  // with `error`
  std::string eager_limit;                 // FI_OFI_RXM_EAGER_LIMIT as the providers read it
};

template <typename Fn>
void find(void *handle, const char *name, Fn *out, std::string *error) {
  // The symbol's default version: the one linking against the library would have bound.
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*out == nullptr && error->empty())
    *error = std::string(kLibrary) + " has no " + name + " (not libfabric 1.x?)";
}

// Whether rxm will run over TCP: FI_PROVIDER names tcp, or, unset, the machine has no RDMA
// device (libfabric would rank verbs first, over which rxm needs its eager limit to equal its
// buffer size).
bool rxm_over_tcp() {
  if (const char *wanted = getenv("FI_PROVIDER"); wanted && *wanted)
    return std::strstr(wanted, "tcp") != nullptr;
  DIR *dir = opendir("/sys/class/infiniband");
  if (!dir) return true;
  bool devices = false;
  while (const dirent *e = readdir(dir))
    if (e->d_name[0] != '.') devices = true;
  closedir(dir);
  return !devices;
}

// Provider settings tuned for trn's transfers, where the user has not set them. Providers read
// them from the environment when first asked for (fi_getinfo), so they are set before libfabric
// is loaded (as NCCL's libfabric plugins set theirs), and left for it to read.
//
// rxm sends a message up to its eager limit (16 KiB by default) at once, a larger one by
// rendezvous (a request, then the receiver reads it: two more round trips per chunk). Every
// chunk lands in a receive posted before its sender may send it (the credits), so chunks of the
// default size go eagerly straight into place, over TCP without a bounce buffer: about a fifth
// less time from 1 MiB across two simulated hosts, and no more memory (the bounce buffers keep
// their size, FI_OFI_RXM_BUFFER_SIZE). Ranks must agree on it (Comm checks). Not when this
// process loaded libfabric before (its providers have read their settings).
void default_provider_settings() {
  if (getenv(kEagerLimitVariable) || !rxm_over_tcp()) return;
  if (void *already = dlopen(kLibrary, RTLD_NOW | RTLD_NOLOAD)) {
    dlclose(already);
    return;
  }
  const std::string chunk = std::to_string(larger_default_chunk_bytes());
  setenv(kEagerLimitVariable, chunk.c_str(), 0);
}

// Early, when the library loads: setenv races any other thread's getenv, and a program has
// fewest threads then. Done again before libfabric loads, for a variable unset since.
__attribute__((constructor)) void default_provider_settings_at_load() {
  default_provider_settings();
}

// rxm reads any text as a number ("-5" as a huge limit, which stalls every transfer).
bool whole_bytes(const std::string &text) {
  return !text.empty() && text.size() <= 10 &&
         text.find_first_not_of("0123456789") == std::string::npos;
}

Loaded load() {
  Loaded l;
  default_provider_settings();
  const char *eager = getenv(kEagerLimitVariable);
  l.eager_limit = eager ? eager : "";
  if (eager && !whole_bytes(l.eager_limit)) {
    l.error = std::string(kEagerLimitVariable) + "='" + l.eager_limit + "' is " +
              (l.eager_limit.empty() ? "set but empty" : "not a size in bytes") +
              ": give a whole number of bytes, alike on every host, or unset it (trn then sets "
              "it to its larger default chunk, " +
              std::to_string(larger_default_chunk_bytes()) + " bytes, where rxm runs over TCP)";
    l.result = TRN_ERROR_INVALID_CONFIG;
    return l;
  }
  KeepSignalHandlers keep;
  // Never closed: providers may keep threads and handlers into it.
  void *handle = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char *why = dlerror();
    l.error = std::string("cannot load ") + kLibrary + " (" + (why ? why : "unknown") +
              "), which ranks on other hosts need: install libfabric (Debian: libfabric1)";
    return l;
  }
  find(handle, "fi_getinfo", &l.entries.getinfo, &l.error);
  find(handle, "fi_freeinfo", &l.entries.freeinfo, &l.error);
  find(handle, "fi_dupinfo", &l.entries.dupinfo, &l.error);
  find(handle, "fi_fabric", &l.entries.fabric, &l.error);
  find(handle, "fi_strerror", &l.entries.strerror, &l.error);
  return l;
}

const Loaded &loaded() {
  static const Loaded once = load();  // thread-safe
  return once;
}

}  // namespace

const FabricLibrary &fabric_library() {
  if (!loaded().error.empty()) fail(loaded().result, "libfabric: " + loaded().error);
  return loaded().entries;
}

const std::string &rxm_eager_limit() {
  return loaded().eager_limit;
}

KeepSignalHandlers::KeepSignalHandlers() {
  for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], nullptr, &saved_[i]);
}

KeepSignalHandlers::~KeepSignalHandlers() {
  for (size_t i = 0; i < kSignals.size(); ++i) {
    struct sigaction now {};
    sigaction(kSignals[i], nullptr, &now);
    if (now.sa_handler != saved_[i].sa_handler || now.sa_flags != saved_[i].sa_flags)
      sigaction(kSignals[i], &saved_[i], nullptr);
  }
}

}  // namespace trn::comm
