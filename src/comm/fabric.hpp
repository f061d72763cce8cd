// A libfabric endpoint for ranks on other hosts, as aws-ofi-nccl uses one: a reliable datagram
// endpoint (FI_EP_RDM) with tagged messages, an address vector of the peers' names and one
// completion queue, driven by one thread (the proxy). The provider is libfabric's choice among
// those that can cross hosts (FI_PROVIDER narrows it, as everywhere in libfabric; shm is taken
// only when FI_PROVIDER names it). The memory it sends from and receives into is registered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/error.hpp"

namespace trn::comm {

// A transfer that completed with an error: `context` is the one it was posted with.
class FabricTransferError : public CommError {
 public:
  FabricTransferError(void *context, const std::string &what)
      : CommError(TRN_ERROR_COLLECTIVE, what), context_(context) {}
  void *context() const { return context_; }

 private:
  void *context_;
};

class Fabric {
 public:
  // Opens an endpoint. Throws CommError (TRN_ERROR_DRIVER) saying why when none can be made.
  Fabric();
  ~Fabric();
  Fabric(const Fabric &) = delete;
  Fabric &operator=(const Fabric &) = delete;

  const std::string &provider() const { return provider_; }
  // This endpoint's address, for the peers.
  const std::vector<uint8_t> &name() const { return name_; }
  // Adds a peer's address; returns its handle for send/receive.
  uint64_t add_peer(const std::vector<uint8_t> &name);

  // Memory the endpoint sends from and receives into.
  void register_buffer(void *base, size_t bytes);
  // Whether a send may come from memory that was not registered (the provider does not require
  // FI_MR_LOCAL, as tcp does not): then the proxy sends large chunks from where they are.
  bool sends_unregistered() const { return sends_unregistered_; }

  // A tagged send or receive; `context` comes back with its completion. False: the provider
  // has no room now (try again after polling). Throws CommError on an error.
  bool send(uint64_t peer, uint64_t tag, const void *buffer, size_t bytes, void *context);
  bool receive(uint64_t peer, uint64_t tag, uint64_t ignore, void *buffer, size_t bytes,
               void *context);

  struct Completion {
    void *context;
    uint64_t tag;
    size_t bytes;
  };
  // Reads what completed (up to 16); an error completion throws FabricTransferError with the
  // provider's text.
  size_t poll(Completion *out, size_t capacity);

  // Per operation: the provider's context, which must stay in place until its completion.
  static constexpr size_t kContextBytes = 64;

 private:
  struct Handles;
  std::unique_ptr<Handles> h_;
  std::string provider_;
  std::vector<uint8_t> name_;
  bool sends_unregistered_ = false;
};

}  // namespace trn::comm
