#include "comm/fabric_library.hpp"

#include <dlfcn.h>

#include <string>

#include "comm/error.hpp"

namespace trn::comm {

namespace {

// libfabric 1.x's soname; the same library the headers were built against.
constexpr const char *kLibrary = "libfabric.so.1";

struct Loaded {
  FabricLibrary entries{};
  std::string error;  // why it could not be loaded; empty when it was
};

template <typename Fn>
void find(void *handle, const char *name, Fn *out, std::string *error) {
  // The symbol's default version: the one linking against the library would have bound.
  *out = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*out == nullptr && error->empty())
    *error = std::string(kLibrary) + " has no " + name + " (not libfabric 1.x?)";
}

Loaded load() {
  Loaded l;
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

}  // namespace

const FabricLibrary &fabric_library() {
  static const Loaded loaded = load();  // once, thread-safe
  if (!loaded.error.empty()) fail(TRN_ERROR_DRIVER, "libfabric: " + loaded.error);
  return loaded.entries;
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
