// Which host a rank is on, for telling peers that share device memory from peers reached over
// the fabric. A host is a machine and its device set: the host name and, for the simulated
// driver, TRN_SIM_ROOT, so that several simulated hosts can run on one machine, each with its
// own root (docs/collectives.md).
#pragma once

#include <string>

namespace trn::comm {

// Equal for ranks whose devices this process can reach directly.
std::string host_key();
// The host as messages name it: "node-a", or "node-a (TRN_SIM_ROOT /srv/sim/host1)".
std::string host_label();
// The same label for another rank's host_key().
std::string host_label(const std::string &key);
// How long ago this process started, in nanoseconds (to the kernel's clock tick), or UINT64_MAX
// when /proc does not say: the rendezvous tells a job's late rank from another job's with it (an
// age, not a time, so that the clocks of two hosts need not agree).
uint64_t process_age_ns();

}  // namespace trn::comm
