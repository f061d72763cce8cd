#include "sim/mapping_guard.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace trn::sim {

namespace {

constexpr size_t kMessageBytes = 1024;

// A guarded mapping. The signal handler reads entries that are active; the messages are
// written in advance because a handler may only call async-signal-safe functions.
struct Entry {
  std::atomic<int> state{0};  // 0 free, 1 being filled, 2 active
  uintptr_t base = 0;
  size_t bytes = 0;
  int fd = -1;
  char shrank[kMessageBytes] = {};
  size_t shrank_length = 0;
  char full[kMessageBytes] = {};
  size_t full_length = 0;
};

Entry g_entries[128];
struct sigaction g_previous {};
std::once_flag g_installed;

void write_all(const char *text, size_t length) {
  while (length > 0) {
    const ssize_t n = write(STDERR_FILENO, text, length);
    if (n <= 0) return;
    text += n;
    length -= static_cast<size_t>(n);
  }
}

void on_sigbus(int signal, siginfo_t *info, void *context) {
  const auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Entry &entry : g_entries) {
    if (entry.state.load(std::memory_order_acquire) != 2) continue;
    if (address < entry.base || address - entry.base >= entry.bytes) continue;
    // Past the end of the file: it shrank. Within it: its storage ran out.
    struct stat st {};
    const bool shrank =
        fstat(entry.fd, &st) != 0 || static_cast<uintptr_t>(st.st_size) <= address - entry.base;
    if (shrank)
      write_all(entry.shrank, entry.shrank_length);
    else
      write_all(entry.full, entry.full_length);
    _exit(kMappingFaultExitStatus);
  }
  // Not a guarded mapping: whoever handled SIGBUS before handles it.
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) g_previous.sa_sigaction(signal, info, context);
    return;
  }
  if (g_previous.sa_handler == SIG_DFL || g_previous.sa_handler == SIG_IGN) {
    // Returning re-runs the faulting access under the default action.
    struct sigaction fallback {};
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(SIGBUS, &fallback, nullptr);
    return;
  }
  g_previous.sa_handler(signal);
}

void install() {
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  sigaction(SIGBUS, &action, &g_previous);
}

size_t copy_message(char *target, const std::string &text) {
  const size_t length = std::min(text.size(), kMessageBytes);
  std::memcpy(target, text.data(), length);
  return length;
}

}  // namespace

MappingGuard::MappingGuard(const void *base, size_t bytes, int fd, const std::string &path,
                           const std::string &advice) {
  std::call_once(g_installed, install);
  const std::string exits = "; this process cannot go on and exits with status " +
                            std::to_string(kMappingFaultExitStatus) + ": ";
  for (int i = 0; i < static_cast<int>(std::size(g_entries)); ++i) {
    Entry &entry = g_entries[i];
    int expected = 0;
    if (!entry.state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) continue;
    entry.base = reinterpret_cast<uintptr_t>(base);
    entry.bytes = bytes;
    entry.fd = fd;
    entry.shrank_length = copy_message(
        entry.shrank, "trn: " + path + " shrank below " + std::to_string(bytes) +
                          " bytes while this process used it (another process truncated or "
                          "replaced it)" +
                          exits + advice + "\n");
    entry.full_length = copy_message(
        entry.full, "trn: the storage of " + path +
                        " ran out while this process used it (the filesystem of TRN_SIM_ROOT "
                        "is full)" +
                        exits + "Free space there or set TRN_SIM_ROOT on a larger tmpfs.\n");
    entry.state.store(2, std::memory_order_release);
    entry_ = i;
    return;
  }
}

MappingGuard::~MappingGuard() {
  if (entry_ >= 0) g_entries[entry_].state.store(0, std::memory_order_release);
}

}  // namespace trn::sim
