#include "comm/fabric_library.hpp"

#include <dlfcn.h>
#include <stdlib.h>

#include <string>

#include "comm/config.hpp"
#include "comm/error.hpp"

namespace trn::comm {

namespace {

// libfabric 1.x's soname; the same library the headers were built against.
constexpr const char *kLibrary = "libfabric.so.1";

struct Loaded {
  FabricLibrary entries{};
  std::string error;        // why it could not be loaded; empty when it was
  std::string eager_limit;  // FI_OFI_RXM_EAGER_LIMIT as the providers will read it
};

template <typename Fn>
void find(void *handle, const char *name, Fn *out, std::string *error) {
  // The symbol's default version: the one linking against the library would have bound.
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*out == nullptr && error->empty())
    *error = std::string(kLibrary) + " has no " + name + " (not libfabric 1.x?)";
}

// Provider settings tuned for trn's transfers, where the user has not set them: providers read
// them from the environment when they are first asked for (fi_getinfo), so they are set before
// the library loads (once, as NCCL's libfabric plugins set theirs).
void default_provider_settings() {
  // rxm sends a message up to its eager limit (16 KiB by default) at once, a larger one by
  // rendezvous (a request, then the receiver reads it: two more round trips per chunk). Every
  // chunk lands in a receive posted before its sender may send it (the credits), so chunks of
  // the default size go eagerly straight into place, over TCP without a bounce buffer: about a
  // fifth less time from 1 MiB across two simulated hosts, and no more memory (the bounce
  // buffers keep their size, FI_OFI_RXM_BUFFER_SIZE). Ranks must agree on it (Comm checks).
  const std::string chunk = std::to_string(default_chunk_bytes(false));
  setenv(kEagerLimitVariable, chunk.c_str(), 0);
}

Loaded load() {
  Loaded l;
  default_provider_settings();
  const char *eager = getenv(kEagerLimitVariable);
  l.eager_limit = eager ? eager : "";
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
  if (!loaded().error.empty()) fail(TRN_ERROR_DRIVER, "libfabric: " + loaded().error);
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
