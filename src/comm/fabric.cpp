#include "comm/fabric.hpp"

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include <cstdlib>
#include <cstring>

#include "comm/error.hpp"
#include "comm/fabric_library.hpp"

namespace trn::comm {

static_assert(sizeof(fi_context2) <= Fabric::kContextBytes, "context room");

struct Fabric::Handles {
  fi_info *info = nullptr;
  fid_fabric *fabric = nullptr;
  fid_domain *domain = nullptr;
  fid_av *av = nullptr;
  fid_cq *cq = nullptr;
  fid_ep *ep = nullptr;
  std::vector<fid_mr *> regions;
  std::vector<std::pair<const std::byte *, size_t>> spans;  // registered memory, for desc()

  ~Handles() {
    // Endpoint first, then what it was bound to.
    if (ep) fi_close(&ep->fid);
    for (fid_mr *mr : regions) fi_close(&mr->fid);
    if (av) fi_close(&av->fid);
    if (cq) fi_close(&cq->fid);
    if (domain) fi_close(&domain->fid);
    if (fabric) fi_close(&fabric->fid);
    if (info) fabric_library().freeinfo(info);
  }

  void *desc(const void *buffer) const {
    const auto *p = static_cast<const std::byte *>(buffer);
    for (size_t i = 0; i < spans.size(); ++i)
      if (p >= spans[i].first && p < spans[i].first + spans[i].second)
        return fi_mr_desc(regions[i]);
    return nullptr;
  }
};

namespace {

[[noreturn]] void fabric_fail(const std::string &doing, int code) {
  fail(TRN_ERROR_DRIVER, "libfabric: " + doing + ": " + fabric_library().strerror(-code) +
                             " (FI_PROVIDER picks a provider; FI_LOG_LEVEL=warn says more)");
}

void checked(int code, const std::string &doing) {
  if (code != 0) fabric_fail(doing, code);
}

std::string name_of(const fi_info *info) {
  return info->fabric_attr->prov_name ? info->fabric_attr->prov_name : "";
}

// libfabric 1.17 lists rxm layered over its tcp provider first, and also `net`: the tcp
// provider's development line, which carries reliable datagrams over TCP itself (later releases
// made that the tcp provider's own). Without rxm's layer each message is one provider's work
// rather than two, and its receives land straight in the posted buffer: over loopback here an
// all-reduce of 4-64 MiB between two hosts took 6-15% less time. Taken on the same interface
// when libfabric's first choice is rxm over tcp and FI_PROVIDER names none; FI_PROVIDER=tcp
// still picks rxm.
fi_info *native_tcp_instead(fi_info *all, fi_info *first) {
  if (name_of(first) != "tcp;ofi_rxm") return first;
  const char *interface = first->domain_attr->name;
  for (fi_info *i = all; i; i = i->next)
    if (name_of(i) == "net" && i->addr_format == first->addr_format && interface &&
        i->domain_attr->name && std::strcmp(i->domain_attr->name, interface) == 0)
      return i;
  return first;
}

}  // namespace

Fabric::Fabric() : h_(std::make_unique<Handles>()) {
  const FabricLibrary &lib = fabric_library();
  // Providers load their own libraries as they are asked for (and those install handlers).
  const KeepSignalHandlers keep;
  fi_info *hints = lib.dupinfo(nullptr);  // fi_allocinfo
  if (!hints) fail(TRN_ERROR_OUT_OF_HOST_MEMORY, "libfabric: fi_allocinfo failed");
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_TAGGED | FI_MSG;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_VIRT_ADDR;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  fi_info *all = nullptr;
  const int r = lib.getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &all);
  lib.freeinfo(hints);
  if (r != 0) fabric_fail("no provider offers reliable tagged messages (fi_getinfo)", r);
  // shm cannot reach another host: taken only when FI_PROVIDER asks for it.
  const char *wanted = std::getenv("FI_PROVIDER");
  fi_info *pick = nullptr;
  for (fi_info *i = all; i && !pick; i = i->next) {
    const std::string name = name_of(i);
    if (name == "shm" && !(wanted && std::strstr(wanted, "shm"))) continue;
    pick = i;
  }
  if (pick && !wanted) pick = native_tcp_instead(all, pick);
  if (!pick) {
    lib.freeinfo(all);
    fail(TRN_ERROR_DRIVER,
         "libfabric: only the shm provider is available, which cannot reach other hosts (set "
         "FI_PROVIDER=tcp, or shm for simulated hosts on one machine)");
  }
  h_->info = lib.dupinfo(pick);
  lib.freeinfo(all);
  provider_ = name_of(h_->info);
  if (provider_.empty()) provider_ = "unknown";
  sends_unregistered_ = (h_->info->domain_attr->mr_mode & FI_MR_LOCAL) == 0;

  checked(lib.fabric(h_->info->fabric_attr, &h_->fabric, nullptr), "opening the fabric");
  checked(fi_domain(h_->fabric, h_->info, &h_->domain, nullptr), "opening a domain");
  fi_cq_attr cq{};
  cq.format = FI_CQ_FORMAT_TAGGED;
  cq.wait_obj = FI_WAIT_NONE;
  cq.size = 1024;
  checked(fi_cq_open(h_->domain, &cq, &h_->cq, nullptr), "opening a completion queue");
  fi_av_attr av{};
  av.type = FI_AV_TABLE;
  checked(fi_av_open(h_->domain, &av, &h_->av, nullptr), "opening an address vector");
  checked(fi_endpoint(h_->domain, h_->info, &h_->ep, nullptr), "opening an endpoint");
  checked(fi_ep_bind(h_->ep, &h_->cq->fid, FI_TRANSMIT | FI_RECV), "binding the completion queue");
  checked(fi_ep_bind(h_->ep, &h_->av->fid, 0), "binding the address vector");
  checked(fi_enable(h_->ep), "enabling the endpoint");
  size_t length = 0;
  fi_getname(&h_->ep->fid, nullptr, &length);
  name_.resize(length);
  checked(fi_getname(&h_->ep->fid, name_.data(), &length), "reading the endpoint's address");
  name_.resize(length);
}

Fabric::~Fabric() = default;

uint64_t Fabric::add_peer(const std::vector<uint8_t> &name) {
  fi_addr_t address = FI_ADDR_UNSPEC;
  const int n = fi_av_insert(h_->av, name.data(), 1, &address, 0, nullptr);
  if (n != 1) fabric_fail("adding a peer's address", n < 0 ? n : -FI_EINVAL);
  return address;
}

void Fabric::register_buffer(void *base, size_t bytes) {
  // Registered whether or not the provider requires it (FI_MR_LOCAL): with descriptors at hand
  // a provider's rendezvous protocol for large messages need not register each message itself.
  fid_mr *mr = nullptr;
  // A key of its own per region, for providers that do not pick keys themselves.
  const uint64_t key = h_->regions.size() + 1;
  checked(fi_mr_reg(h_->domain, base, bytes, FI_SEND | FI_RECV | FI_READ | FI_REMOTE_READ, 0, key,
                    0, &mr, nullptr),
          "registering " + std::to_string(bytes) + " bytes of host memory");
  h_->regions.push_back(mr);
  h_->spans.emplace_back(static_cast<const std::byte *>(base), bytes);
}

bool Fabric::send(uint64_t peer, uint64_t tag, const void *buffer, size_t bytes, void *context) {
  const ssize_t r = fi_tsend(h_->ep, buffer, bytes, h_->desc(buffer), peer, tag, context);
  if (r == -FI_EAGAIN) return false;
  if (r != 0) fabric_fail("sending " + std::to_string(bytes) + " bytes", static_cast<int>(r));
  return true;
}

bool Fabric::receive(uint64_t peer, uint64_t tag, uint64_t ignore, void *buffer, size_t bytes,
                     void *context) {
  const ssize_t r = fi_trecv(h_->ep, buffer, bytes, h_->desc(buffer), peer, tag, ignore, context);
  if (r == -FI_EAGAIN) return false;
  if (r != 0) fabric_fail("posting a receive", static_cast<int>(r));
  return true;
}

size_t Fabric::poll(Completion *out, size_t capacity) {
  fi_cq_tagged_entry entries[16];
  const ssize_t n = fi_cq_read(h_->cq, entries, std::min<size_t>(capacity, 16));
  if (n == -FI_EAGAIN) return 0;
  if (n == -FI_EAVAIL) {
    fi_cq_err_entry err{};
    fi_cq_readerr(h_->cq, &err, 0);
    const char *text = fi_cq_strerror(h_->cq, err.prov_errno, err.err_data, nullptr, 0);
    throw FabricTransferError(err.op_context,
                              std::string("libfabric (") + provider_ +
                                  "): a transfer failed: " + fabric_library().strerror(err.err) +
                                  (text ? std::string(" (") + text + ")" : std::string()));
  }
  if (n < 0) fabric_fail("reading completions", static_cast<int>(n));
  for (ssize_t i = 0; i < n; ++i) out[i] = {entries[i].op_context, entries[i].tag, entries[i].len};
  return static_cast<size_t>(n);
}

}  // namespace trn::comm
