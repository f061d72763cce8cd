// The rendezvous of a communicator, like NCCL's bootstrap: one process serves it (a thread,
// RootService) and every rank connects (BootstrapClient). The service gathers each rank's blob
// (its staging buffer and semaphores) and hands the table to all; it then stays for the
// communicator's life to gather again (trn_comm_split), to pass on a rank's abort, and to tell
// every rank when another one's connection drops (its process died).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "comm/socket.hpp"
#include "trn/trn_comm.h"

namespace trn::comm {

enum MessageType : uint32_t {
  kHello = 1,     // rank -> service: token, size, pid, timeout, host, blob
  kTable = 2,     // service -> rank: every rank's blob
  kGather = 3,    // rank -> service: one round's payload
  kGathered = 4,  // service -> rank: the round's payloads of every rank
  kAbort = 5,     // rank -> service: the communicator failed here (operation number, reason)
  kFailed = 6,    // service -> rank: the communicator failed (the reason)
  kBye = 7,       // rank -> service: this rank leaves cleanly
  kStatus = 8,    // service -> rank: how many operations did you start? rank -> service: n
};

// What a unique id holds.
struct RendezvousId {
  Endpoint endpoint;
  uint64_t token = 0;  // tells this communicator's ranks from strays
};

trn_comm_unique_id_t encode_id(const RendezvousId &id);
// Throws TRN_ERROR_INVALID_ARGUMENT for bytes that are not an id.
RendezvousId decode_id(const trn_comm_unique_id_t &id);

// Starts the service on `where` (port 0: any) for `size` ranks on a detached thread and returns
// the id ranks connect with. The service ends when every rank said goodbye or disconnected, or
// when the rendezvous did not complete by the timeout.
RendezvousId start_root_service(const Endpoint &where, uint64_t token, uint64_t timeout_ns);

// A rank's hello to the service: who it is (its process: pid, start time, host) and its blob.
Message make_hello(uint64_t token, uint32_t rank, uint32_t size, uint64_t timeout_ns,
                   const std::string &host, const std::vector<uint8_t> &blob);

// For a rank 0 that cannot listen on the rendezvous address: asks whoever holds it, as rank 0 of
// `size`, and returns its answer ("" when nothing answers like a rendezvous within 3 s). A trn
// rendezvous refuses and says whose it is; one that may have taken another job's ranks fails.
std::string ask_rendezvous(const RendezvousId &id, uint32_t size);

// Concatenated blobs: a count, then (size, bytes) each.
std::vector<uint8_t> pack_blobs(const std::vector<std::vector<uint8_t>> &blobs);
std::vector<std::vector<uint8_t>> unpack_blobs(const std::vector<uint8_t> &packed);

// A rank's connection to the service.
class BootstrapClient {
 public:
  // Connects and exchanges blobs; returns every rank's blob by rank. Throws
  // TRN_ERROR_COLLECTIVE naming what went wrong (ranks that never arrived, disagreements).
  // `host` names the rank's host in the service's messages.
  std::vector<std::vector<uint8_t>> join(const RendezvousId &id, uint32_t rank, uint32_t size,
                                         const std::string &host, const std::vector<uint8_t> &blob,
                                         uint64_t timeout_ns);
  int fd() const { return fd_.get(); }
  // Sends one message (thread-safe).
  void send(uint32_t type, const std::vector<uint8_t> &payload, uint64_t deadline_ns);
  // Closes the connection (after kBye, if `clean`).
  void close(bool clean);

 private:
  Fd fd_;
  uint32_t rank_ = 0;
  std::mutex send_mutex_;
};

}  // namespace trn::comm
