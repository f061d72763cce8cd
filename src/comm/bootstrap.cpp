#include "comm/bootstrap.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

#include "comm/bytes.hpp"
#include "comm/error.hpp"
#include "comm/host.hpp"
#include "common/clock.hpp"
#include "common/thread_name.hpp"

namespace trn::comm {

namespace {

constexpr char kIdMagic[8] = {'T', 'R', 'N', 'C', 'O', 'M', 'M', '1'};
constexpr size_t kHostBytes = 96;

struct IdBytes {
  char magic[8];
  uint64_t token;
  uint16_t port;
  char host[kHostBytes];
};
static_assert(sizeof(IdBytes) <= sizeof(trn_comm_unique_id_t), "id layout");

std::string rank_list(const std::vector<uint32_t> &ranks) {
  std::string text;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == 6 && ranks.size() > 8) {
      text += ", ... (" + std::to_string(ranks.size()) + " in all)";
      break;
    }
    text += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  return text;
}

std::vector<uint8_t> text_payload(const std::string &text) {
  return {text.begin(), text.end()};
}

// A rank's hello: who it is, and (after `blob_at`) its blob.
struct Hello {
  uint32_t rank = 0;
  uint64_t token = 0;
  uint32_t size = 0, pid = 0;
  uint64_t timeout_ns = 0;
  uint64_t started_ns = 0;  // when its process started, on this service's clock (now_ns)
  std::string host;
  size_t blob_at = 0;
};

// False for anything that is not a well-formed hello (a stray connection).
bool parse_hello(const Message &message, Hello *hello) {
  if (message.type != kHello) return false;
  size_t at = 0;
  try {
    hello->rank = message.rank;
    hello->token = take<uint64_t>(message.payload, &at, "a hello");
    hello->size = take<uint32_t>(message.payload, &at, "a hello");
    hello->pid = take<uint32_t>(message.payload, &at, "a hello");
    hello->timeout_ns = take<uint64_t>(message.payload, &at, "a hello");
    // Its process's age when it sent the hello: unknown (UINT64_MAX) counts as old.
    const auto age = take<uint64_t>(message.payload, &at, "a hello");
    const uint64_t now = now_ns();
    hello->started_ns = age >= now ? 0 : now - age;
    const auto host_bytes = take<uint32_t>(message.payload, &at, "a hello");
    if (host_bytes > message.payload.size() - at) return false;
    hello->host.assign(message.payload.begin() + static_cast<long>(at),
                       message.payload.begin() + static_cast<long>(at + host_bytes));
    hello->blob_at = at + host_bytes;
  } catch (const CommError &) {
    return false;
  }
  return true;
}

// Reads the hello of a connection that polled readable (a short wait for the rest of it).
bool read_hello(const Fd &fd, Message *message, Hello *hello) {
  try {
    if (!receive_message(fd.get(), message, now_ns() + 2'000'000'000ull)) return false;
  } catch (const CommError &) {
    return false;
  }
  return parse_hello(*message, hello);
}

// Processes that started this soon after a rendezvous completed may still have been meant for it
// (/proc counts in ticks, and the hello took a while to come).
constexpr uint64_t kStartSlackNs = 200'000'000;

// The service's side of one communicator.
class RootService {
 public:
  RootService(Fd listener, uint64_t token, uint64_t timeout_ns)
      : listener_(std::move(listener)), token_(token), timeout_ns_(timeout_ns) {}

  void run() {
    try {
      if (rendezvous()) serve();
    } catch (const std::exception &) {
      // The service has nobody left to tell; the ranks see their connection close.
    }
  }

 private:
  struct Rank {
    Fd fd;
    uint32_t pid = 0;
    std::string host;
    std::vector<uint8_t> blob;
    std::optional<std::vector<uint8_t>> gathered;
    bool gone = false;
  };

  uint64_t deadline() const { return now_ns() + 10'000'000'000ull; }

  // Tells every live rank but `except`. A rank that cannot be told (its connection reset, or
  // blocked past the deadline) is lost, and the others hear so.
  void broadcast(uint32_t type, const std::vector<uint8_t> &payload, uint32_t except) {
    std::vector<uint32_t> unreachable;
    for (uint32_t r = 0; r < ranks_.size(); ++r) {
      if (r == except || ranks_[r].gone || !ranks_[r].fd) continue;
      try {
        send_message(ranks_[r].fd.get(), {type, r, payload}, deadline());
      } catch (const CommError &) {
        unreachable.push_back(r);
      }
    }
    for (uint32_t r : unreachable) lost(r);
  }

  // Refuses `fd` and the connections not read yet, and ends the rendezvous for every rank that
  // arrived, with the same reason. (A rank that connects later finds no rendezvous and fails at
  // its own timeout.)
  bool give_up(Fd &fd, std::vector<Fd> &pending, const std::string &why) {
    refuse(fd, why);
    for (Fd &other : pending) refuse(other, why);
    broadcast(kFailed, text_payload(why), UINT32_MAX);
    return false;
  }

  void refuse(Fd &fd, const std::string &why) {
    try {
      send_message(fd.get(), {kFailed, 0, text_payload(why)}, now_ns() + 1'000'000'000ull);
    } catch (const CommError &) {
    }
  }

  // Accepts until every rank said hello; false if it did not happen by the deadline.
  bool rendezvous() {
    // The service's own limit, or the shortest of the ranks' that arrived (named when it passes).
    uint64_t limit_ns = timeout_ns_;
    uint64_t end = common::deadline_after(limit_ns, now_ns());
    bool rank_bound = false;  // end is a rank's deadline
    std::vector<Fd> pending;  // connected, hello not read yet
    uint32_t arrived = 0;
    while (size_ == 0 || arrived < size_) {
      std::vector<pollfd> polls{{listener_.get(), POLLIN, 0}};
      for (const Fd &fd : pending) polls.push_back({fd.get(), POLLIN, 0});
      const uint64_t now = now_ns();
      if (now >= end) {
        std::vector<uint32_t> missing;
        for (uint32_t r = 0; r < size_; ++r)
          if (!ranks_[r].fd) missing.push_back(r);
        const std::string why =
            size_ == 0 ? "no rank arrived at the rendezvous within " + duration_text(limit_ns)
                       : "ranks " + rank_list(missing) + " of " + std::to_string(size_) +
                             " never arrived at the rendezvous within " + duration_text(limit_ns);
        // Connections whose hello was not read yet hear it too, rather than a closed socket.
        for (Fd &fd : pending) refuse(fd, why);
        broadcast(kFailed, text_payload(why), UINT32_MAX);
        return false;
      }
      const int ms = static_cast<int>(std::min<uint64_t>((end - now) / 1'000'000 + 1, 100));
      if (poll(polls.data(), polls.size(), ms) <= 0) continue;
      if (polls[0].revents & POLLIN) {
        Fd fd = accept_connection(listener_.get());
        if (fd) pending.push_back(std::move(fd));
      }
      for (size_t i = polls.size() - 1; i >= 1; --i) {
        if (!polls[i].revents) continue;
        Fd fd = std::move(pending[i - 1]);
        pending.erase(pending.begin() + static_cast<long>(i - 1));
        Message message;
        Hello hello;
        if (!read_hello(fd, &message, &hello)) continue;
        if (hello.token != token_) {
          refuse(fd, kAnotherCommunicator);
          continue;
        }
        const uint32_t size = hello.size;
        const uint64_t rank_timeout = hello.timeout_ns;
        if (size_ == 0) {
          size_ = size;
          size_from_ = hello.rank;
          ranks_.resize(size);
        }
        // Ranks that disagree fail the whole rendezvous at once: the ranks that came first would
        // otherwise wait out their timeout and blame ranks that did arrive.
        if (size != size_) {
          return give_up(fd, pending,
                         "rank " + std::to_string(hello.rank) + " says the communicator has " +
                             std::to_string(size) + " ranks, rank " + std::to_string(size_from_) +
                             " said " + std::to_string(size_) +
                             ": give every rank the same size (WORLD_SIZE, or the size in "
                             "trn_comm_desc_t), or two jobs share one rendezvous address");
        }
        if (hello.rank >= size_ || ranks_[hello.rank].fd) {
          return give_up(fd, pending,
                         "rank " + std::to_string(hello.rank) +
                             (hello.rank >= size_ ? " is out of range: the communicator has " +
                                                        std::to_string(size_) + " ranks"
                                                  : " joined twice (two processes with one RANK, "
                                                    "or two jobs on one MASTER_PORT)"));
        }
        Rank &rank = ranks_[hello.rank];
        rank.fd = std::move(fd);
        rank.pid = hello.pid;
        rank.host = hello.host;
        rank.blob.assign(message.payload.begin() + static_cast<long>(hello.blob_at),
                         message.payload.end());
        ++arrived;
        // Once a rank arrived, the shortest timeout of the ranks bounds the rendezvous (not the
        // service's own, which may be shorter or longer than theirs, or than no limit), so that
        // the service names the missing ranks before that rank gives up on its own.
        if (const uint64_t bound = common::deadline_after(rank_timeout, now_ns());
            rank_timeout && (!rank_bound || bound < end)) {
          end = bound;
          limit_ns = rank_timeout;
          rank_bound = true;
        }
      }
    }
    // The listener stays: no one else may join, and whoever comes later hears why (late()).
    completed_ns_ = now_ns();
    std::vector<std::vector<uint8_t>> blobs;
    for (Rank &rank : ranks_) blobs.push_back(std::move(rank.blob));
    broadcast(kTable, pack_blobs(blobs), UINT32_MAX);
    return true;
  }

  void lost(uint32_t r) {
    ranks_[r].gone = true;
    ranks_[r].fd.reset();
    if (failed_) return;
    failed_ = true;
    broadcast(kFailed,
              text_payload("rank " + std::to_string(r) + " (pid " + std::to_string(ranks_[r].pid) +
                           " on " + ranks_[r].host +
                           ") left without ending the communicator: its process or host died, "
                           "or it closed the connection"),
              r);
  }

  // Someone who came after the rendezvous completed: told why it cannot join. Another job's
  // process that started before the rendezvous completed may have been meant for it while one of
  // that job's ranks took its place here (two jobs started together on one MASTER_PORT, one's
  // rank 0 unable to listen): this communicator's ranks may then be of two jobs, and it fails.
  void late(Fd &fd) {
    Message message;
    Hello hello;
    if (!read_hello(fd, &message, &hello)) return;
    if (hello.token != token_) return refuse(fd, kAnotherCommunicator);
    const Rank &root = ranks_[0];
    const std::string holder = "the rendezvous at this address belongs to a communicator of " +
                               std::to_string(size_) + " ranks whose rank 0 is pid " +
                               std::to_string(root.pid) + " on " + root.host;
    const std::string who = "pid " + std::to_string(hello.pid) + " on " + hello.host + " (rank " +
                            std::to_string(hello.rank) + " of " + std::to_string(hello.size) + ")";
    for (const Rank &member : ranks_)
      if (member.pid == hello.pid && member.host == hello.host)
        return refuse(fd, who + " came to a rendezvous its process already joined: " + holder +
                              ", which holds the port until it is destroyed (destroy it first, "
                              "use trn_comm_split, or give the new communicator its own "
                              "TRN_COMM_PORT)");
    if (hello.started_ns == 0 || hello.started_ns <= completed_ns_ + kStartSlackNs) {
      const std::string why =
          "two jobs share one rendezvous address (MASTER_ADDR:MASTER_PORT): " + who +
          ", which started before this communicator's rendezvous completed, came after it: " +
          "its ranks may belong to two jobs; give each job its own MASTER_PORT";
      refuse(fd, why);
      if (!failed_) {
        failed_ = true;
        broadcast(kFailed, text_payload(why), UINT32_MAX);
      }
      return;
    }
    refuse(fd, who + " came after the rendezvous completed: " + holder +
                   " (another job is using this MASTER_PORT: give each job its own)");
  }

  // Until every rank left: gathers, aborts, departures, and late comers refused.
  void serve() {
    std::vector<Fd> pending;  // late comers, hello not read yet
    for (;;) {
      std::vector<pollfd> polls;
      std::vector<uint32_t> who;
      for (uint32_t r = 0; r < ranks_.size(); ++r)
        if (!ranks_[r].gone) {
          polls.push_back({ranks_[r].fd.get(), POLLIN, 0});
          who.push_back(r);
        }
      if (polls.empty()) return;
      const size_t members = polls.size();
      polls.push_back({listener_.get(), POLLIN, 0});
      for (const Fd &fd : pending) polls.push_back({fd.get(), POLLIN, 0});
      if (poll(polls.data(), polls.size(), 1000) <= 0) continue;
      if (polls[members].revents & POLLIN) {
        Fd fd = accept_connection(listener_.get());
        if (fd) pending.push_back(std::move(fd));
      }
      for (size_t i = polls.size() - 1; i > members; --i) {
        if (!polls[i].revents) continue;
        Fd fd = std::move(pending[i - members - 1]);
        pending.erase(pending.begin() + static_cast<long>(i - members - 1));
        late(fd);
      }
      for (size_t i = 0; i < members; ++i) {
        if (!polls[i].revents) continue;
        const uint32_t r = who[i];
        Message message;
        bool open = false;
        try {
          open = receive_message(ranks_[r].fd.get(), &message, deadline());
        } catch (const CommError &) {
          open = false;
        }
        if (!open) {
          lost(r);
          continue;
        }
        switch (message.type) {
          case kBye:
            ranks_[r].gone = true;
            ranks_[r].fd.reset();
            break;
          case kAbort:
            if (!failed_) {
              failed_ = true;
              broadcast(kFailed, text_payload(explain_abort(message.payload)), UINT32_MAX);
            }
            break;
          case kGather:
            ranks_[r].gathered = std::move(message.payload);
            complete_gather();
            break;
          default: lost(r);
        }
      }
    }
  }

  // An abort names the operation (its number on the aborting rank) where it timed out: the
  // ranks that never started that operation are the ones to look at. Every live rank is asked
  // how many operations it started (a second at most), and the reason says who lags.
  std::string explain_abort(const std::vector<uint8_t> &payload) {
    size_t at = 0;
    uint64_t operation = 0;
    try {
      operation = take<uint64_t>(payload, &at, "an abort");
    } catch (const CommError &) {
      return "a rank aborted the communicator";
    }
    std::string text(payload.begin() + static_cast<long>(at), payload.end());
    if (operation == 0) return text;
    std::vector<std::optional<uint64_t>> started(ranks_.size());
    broadcast(kStatus, {}, UINT32_MAX);
    const uint64_t end = now_ns() + 1'000'000'000ull;
    for (;;) {
      std::vector<pollfd> polls;
      std::vector<uint32_t> who;
      for (uint32_t r = 0; r < ranks_.size(); ++r)
        if (!ranks_[r].gone && !started[r]) {
          polls.push_back({ranks_[r].fd.get(), POLLIN, 0});
          who.push_back(r);
        }
      const uint64_t now = now_ns();
      if (polls.empty() || now >= end) break;
      if (poll(polls.data(), polls.size(), static_cast<int>((end - now) / 1'000'000 + 1)) <= 0)
        continue;
      for (size_t i = 0; i < polls.size(); ++i) {
        if (!polls[i].revents) continue;
        Message reply;
        bool open = false;
        try {
          open = receive_message(polls[i].fd, &reply, end);
        } catch (const CommError &) {
        }
        if (!open) {
          ranks_[who[i]].gone = true;
          continue;
        }
        size_t p = 0;
        if (reply.type == kStatus) {
          try {
            started[who[i]] = take<uint64_t>(reply.payload, &p, "a status");
          } catch (const CommError &) {
          }
        }
      }
    }
    std::vector<uint32_t> behind;
    for (uint32_t r = 0; r < ranks_.size(); ++r)
      if (!started[r] || *started[r] < operation) behind.push_back(r);
    if (behind.empty()) return text;
    std::string names;
    for (uint32_t r : behind)
      names += (names.empty() ? "" : ", ") + std::to_string(r) + " (pid " +
               std::to_string(ranks_[r].pid) + " on " + ranks_[r].host +
               (ranks_[r].gone ? ", gone" : "") + ")";
    return text + "; ranks that never called operation #" + std::to_string(operation) + ": " +
           names;
  }

  void complete_gather() {
    for (const Rank &rank : ranks_)
      if (!rank.gathered) return;
    std::vector<std::vector<uint8_t>> all;
    for (Rank &rank : ranks_) {
      all.push_back(std::move(*rank.gathered));
      rank.gathered.reset();
    }
    broadcast(kGathered, pack_blobs(all), UINT32_MAX);
  }

  static constexpr const char *kAnotherCommunicator =
      "this rendezvous serves another communicator (a stale unique id, or two jobs on one "
      "MASTER_PORT)";

  Fd listener_;
  uint64_t completed_ns_ = 0;  // when the rendezvous completed (now_ns)
  uint64_t token_;
  uint64_t timeout_ns_;
  uint32_t size_ = 0;
  uint32_t size_from_ = 0;  // the rank whose hello set size_
  std::vector<Rank> ranks_;
  bool failed_ = false;
};

}  // namespace

Message make_hello(uint64_t token, uint32_t rank, uint32_t size, uint64_t timeout_ns,
                   const std::string &host, const std::vector<uint8_t> &blob) {
  Message hello{kHello, rank, {}};
  put(&hello.payload, token);
  put(&hello.payload, size);
  put(&hello.payload, static_cast<uint32_t>(getpid()));
  put(&hello.payload, timeout_ns);
  put(&hello.payload, process_age_ns());
  put(&hello.payload, static_cast<uint32_t>(host.size()));
  hello.payload.insert(hello.payload.end(), host.begin(), host.end());
  hello.payload.insert(hello.payload.end(), blob.begin(), blob.end());
  return hello;
}

std::string ask_rendezvous(const RendezvousId &id, uint32_t size) {
  const uint64_t deadline = now_ns() + 3'000'000'000ull;
  try {
    Fd fd = connect_to(id.endpoint, deadline);
    send_message(fd.get(), make_hello(id.token, 0, size, 0, host_label(), {}), deadline);
    Message reply;
    if (receive_message(fd.get(), &reply, deadline) && reply.type == kFailed)
      return std::string(reply.payload.begin(), reply.payload.end());
  } catch (const CommError &) {
    // Not a rendezvous, or none that answers in time.
  }
  return "";
}

trn_comm_unique_id_t encode_id(const RendezvousId &id) {
  if (id.endpoint.host.size() >= kHostBytes)
    fail(TRN_ERROR_INVALID_CONFIG,
         "the rendezvous address '" + id.endpoint.host + "' is longer than a unique id holds");
  IdBytes bytes{};
  std::memcpy(bytes.magic, kIdMagic, sizeof kIdMagic);
  bytes.token = id.token;
  bytes.port = id.endpoint.port;
  std::memcpy(bytes.host, id.endpoint.host.data(), id.endpoint.host.size());
  trn_comm_unique_id_t out{};
  std::memcpy(out.internal, &bytes, sizeof bytes);
  return out;
}

RendezvousId decode_id(const trn_comm_unique_id_t &id) {
  IdBytes bytes{};
  std::memcpy(&bytes, id.internal, sizeof bytes);
  if (std::memcmp(bytes.magic, kIdMagic, sizeof kIdMagic) != 0 || bytes.port == 0 ||
      std::memchr(bytes.host, '\0', kHostBytes) == nullptr || bytes.host[0] == '\0')
    fail(TRN_ERROR_INVALID_ARGUMENT,
         "the unique id is not one trn_comm_get_unique_id made (pass its 128 bytes unchanged)");
  return {{bytes.host, bytes.port}, bytes.token};
}

RendezvousId start_root_service(const Endpoint &where, uint64_t token, uint64_t timeout_ns) {
  uint16_t port = 0;
  Fd listener = listen_on(where, &port);
  auto service = std::make_shared<RootService>(std::move(listener), token, timeout_ns);
  std::thread thread([service] { service->run(); });
  common::name_thread(thread, "trn-rendezvous");
  thread.detach();
  return {{where.host, port}, token};
}

std::vector<uint8_t> pack_blobs(const std::vector<std::vector<uint8_t>> &blobs) {
  std::vector<uint8_t> out;
  put(&out, static_cast<uint32_t>(blobs.size()));
  for (const auto &blob : blobs) {
    put(&out, static_cast<uint64_t>(blob.size()));
    out.insert(out.end(), blob.begin(), blob.end());
  }
  return out;
}

std::vector<std::vector<uint8_t>> unpack_blobs(const std::vector<uint8_t> &packed) {
  size_t at = 0;
  const auto count = take<uint32_t>(packed, &at, "the table");
  std::vector<std::vector<uint8_t>> blobs;
  for (uint32_t i = 0; i < count; ++i) {
    const auto bytes = take<uint64_t>(packed, &at, "the table");
    if (bytes > packed.size() - at)
      fail(TRN_ERROR_COLLECTIVE, "rendezvous: a truncated table (not a trn communicator's peer)");
    blobs.emplace_back(packed.begin() + static_cast<long>(at),
                       packed.begin() + static_cast<long>(at + bytes));
    at += bytes;
  }
  return blobs;
}

std::vector<std::vector<uint8_t>> BootstrapClient::join(const RendezvousId &id, uint32_t rank,
                                                        uint32_t size, const std::string &host,
                                                        const std::vector<uint8_t> &blob,
                                                        uint64_t timeout_ns) {
  rank_ = rank;
  const uint64_t deadline = common::deadline_after(timeout_ns, now_ns());
  try {
    fd_ = connect_to(id.endpoint, deadline);
  } catch (const CommError &e) {
    fail(TRN_ERROR_COLLECTIVE, std::string("rank ") + std::to_string(rank) + ": " + e.what() +
                                   " within the communicator's timeout of " +
                                   duration_text(timeout_ns) +
                                   " (is rank 0, or the process that made the unique id, "
                                   "running? its address must be reachable from here)");
  }
  const Message hello = make_hello(id.token, rank, size, timeout_ns, host, blob);
  Message reply;
  bool answered = false;
  std::string failure;
  try {
    send_message(fd_.get(), hello, deadline);
    // The service answers by its own deadline; allow a little more for the message to travel.
    answered =
        receive_message(fd_.get(), &reply, common::deadline_after(2'000'000'000ull, deadline));
  } catch (const CommError &e) {
    failure = e.what();  // a reset or a timeout
  }
  if (!answered) {
    // The service may have given up (its timeout, the shortest of the ranks', passed) between
    // this rank's connect and its hello: say so rather than blame a dead process.
    const bool late = now_ns() >= deadline;
    fail(TRN_ERROR_COLLECTIVE,
         "rendezvous at " + id.endpoint.text() + ": " +
             (failure.empty() ? "the rendezvous host closed the connection without an answer"
                              : failure) +
             (late ? "; the rendezvous ended before it took this rank: its timeout of " +
                         duration_text(timeout_ns) + " passed"
                   : ": its process died, or the rendezvous ended before this rank arrived (the "
                     "timeout is " +
                         duration_text(timeout_ns) + ")"));
  }
  if (reply.type == kFailed)
    fail(TRN_ERROR_COLLECTIVE, std::string(reply.payload.begin(), reply.payload.end()));
  if (reply.type != kTable)
    fail(TRN_ERROR_COLLECTIVE, "rendezvous: an unexpected answer (not a trn communicator)");
  auto blobs = unpack_blobs(reply.payload);
  if (blobs.size() != size)
    fail(TRN_ERROR_COLLECTIVE, "rendezvous: the table has " + std::to_string(blobs.size()) +
                                   " ranks, not " + std::to_string(size));
  return blobs;
}

void BootstrapClient::send(uint32_t type, const std::vector<uint8_t> &payload,
                           uint64_t deadline_ns) {
  std::lock_guard lock(send_mutex_);
  if (!fd_) fail(TRN_ERROR_COLLECTIVE, "the connection to the rendezvous host is closed");
  send_message(fd_.get(), {type, rank_, payload}, deadline_ns);
}

void BootstrapClient::close(bool clean) {
  std::lock_guard lock(send_mutex_);
  if (!fd_) return;
  if (clean) {
    try {
      send_message(fd_.get(), {kBye, rank_, {}}, now_ns() + 1'000'000'000ull);
    } catch (const CommError &) {
    }
  }
  fd_.reset();
}

}  // namespace trn::comm
