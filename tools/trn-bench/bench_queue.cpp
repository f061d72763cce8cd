// trn-bench sem | submit | copy: semaphore wake-ups, command submission round trips and DMA
// copy bandwidth, each against a raw baseline measured in the same run.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench.hpp"
#include "trn/trn.h"

namespace trn::bench {

namespace {

trn_sem_t make_sem(const Context &c) {
  trn_sem_desc_t desc = TRN_SEM_DESC_INIT;
  trn_sem_t sem;
  check(trn_sem_create(c.device, &desc, &sem), "trn_sem_create");
  return sem;
}

// Where a raw hand-off's two flags lie. In one cache line, a single line moves between the
// cores (the machine's floor for any cross-thread signal); in lines of their own, as any two
// semaphores (or a queue's ring and its timeline) are, each hand-off moves two lines, which here
// costs about twice as much.
enum class FlagLayout { one_line, own_lines };

// Two threads hand a counter back and forth `rounds` times through two spinning atomics.
void raw_ping_pong(uint64_t rounds, FlagLayout layout) {
  constexpr size_t kPerLine = 64 / sizeof(std::atomic<uint64_t>);
  struct alignas(64) {
    std::atomic<uint64_t> words[2 * kPerLine] = {};
  } flags;
  std::atomic<uint64_t> &ping = flags.words[0];
  std::atomic<uint64_t> &pong = flags.words[layout == FlagLayout::own_lines ? kPerLine : 1];
  std::thread other([&] {
    for (uint64_t i = 1; i <= rounds; ++i) {
      while (ping.load(std::memory_order_acquire) < i) __builtin_ia32_pause();
      pong.store(i, std::memory_order_release);
    }
  });
  for (uint64_t i = 1; i <= rounds; ++i) {
    ping.store(i, std::memory_order_release);
    while (pong.load(std::memory_order_acquire) < i) __builtin_ia32_pause();
  }
  other.join();
}

long futex(std::atomic<uint32_t> *word, int op, uint32_t value) {
  return syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), op, value, nullptr, nullptr, 0);
}

// The same hand-off where each side sleeps on a futex: the cost of waking a parked thread.
void raw_futex_ping_pong(uint64_t rounds) {
  std::atomic<uint32_t> ping{0}, pong{0};
  std::thread other([&] {
    for (uint32_t i = 1; i <= rounds; ++i) {
      while (ping.load(std::memory_order_acquire) < i) futex(&ping, FUTEX_WAIT_PRIVATE, i - 1);
      pong.store(i, std::memory_order_release);
      futex(&pong, FUTEX_WAKE_PRIVATE, 1);
    }
  });
  for (uint32_t i = 1; i <= rounds; ++i) {
    ping.store(i, std::memory_order_release);
    futex(&ping, FUTEX_WAKE_PRIVATE, 1);
    while (pong.load(std::memory_order_acquire) < i) futex(&pong, FUTEX_WAIT_PRIVATE, i - 1);
  }
  other.join();
}

void sem_ping_pong(const Context &c, uint64_t rounds) {
  trn_sem_t ping = make_sem(c), pong = make_sem(c);
  std::thread other([&] {
    for (uint64_t i = 1; i <= rounds; ++i) {
      check(trn_sem_wait(ping, i, UINT64_MAX), "trn_sem_wait");
      check(trn_sem_signal(pong, i), "trn_sem_signal");
    }
  });
  for (uint64_t i = 1; i <= rounds; ++i) {
    check(trn_sem_signal(ping, i), "trn_sem_signal");
    check(trn_sem_wait(pong, i, UINT64_MAX), "trn_sem_wait");
  }
  other.join();
  trn_sem_destroy(ping);
  trn_sem_destroy(pong);
}

// A round trip of `rounds` hand-offs (`trn`), timed in turns with both raw layouts: the one-line
// hand-off and the same with each flag in its own line.
void print_round_trip(const char *bench, const std::string &what, int runs, uint64_t rounds,
                      const std::function<void()> &trn) {
  const std::vector<double> ns =
      interleaved_medians_ns(runs, {},
                             {trn, [&] { raw_ping_pong(rounds, FlagLayout::one_line); },
                              [&] { raw_ping_pong(rounds, FlagLayout::own_lines); }});
  const double per = static_cast<double>(rounds);
  print({bench, what, "ns/round trip", ns[0] / per, ns[1] / per,
         "raw atomic ping-pong of two threads", false});
  print({bench, what + ", against flags in separate lines", "ns/round trip", ns[0] / per,
         ns[2] / per, "raw atomic ping-pong of two threads, each flag in its own cache line",
         false});
}

bool quick(int argc, char **argv) {
  return has_flag(argc, argv, "--quick");
}

}  // namespace

int bench_sem(int argc, char **argv) {
  const bool q = quick(argc, argv);
  const int runs = q ? 3 : 7;
  Context c = open_device();
  if (has_flag(argc, argv, "--parked")) {
    // Run by the spinning variant below with TRN_SPIN_NS=0 in its environment.
    const uint64_t rounds = q ? 500 : 3000;
    const PairedMedians ns = paired_medians_ns(
        runs, {}, [&] { sem_ping_pong(c, rounds); }, [&] { raw_futex_ping_pong(rounds); });
    print({"sem", "signal->wake round trip, parked waiters (TRN_SPIN_NS=0)", "ns/round trip",
           ns.trn_ns / static_cast<double>(rounds), ns.baseline_ns / static_cast<double>(rounds),
           "raw futex ping-pong of two threads", false});
    return 0;
  }
  const uint64_t rounds = q ? 20000 : 200000;
  print_round_trip("sem", "signal->wake round trip, spinning waiters", runs, rounds,
                   [&] { sem_ping_pong(c, rounds); });
  // The parked variant needs the spin budget set before the runtime reads it: run it anew.
  trn_runtime_shutdown();
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    setenv("TRN_SPIN_NS", "0", 1);
    execl("/proc/self/exe", "trn-bench", "sem", "--parked", q ? "--quick" : nullptr, nullptr);
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int bench_submit(int argc, char **argv) {
  const bool q = quick(argc, argv);
  const int runs = q ? 3 : 7;
  const uint64_t rounds = q ? 20000 : 200000;
  Context c = open_device();
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = c.core;
  desc.kind = TRN_QUEUE_KIND_COMPUTE;
  trn_queue_t queue;
  check(trn_queue_create(&desc, &queue), "trn_queue_create");
  trn_sem_t timeline;
  check(trn_queue_get_semaphore(queue, &timeline), "trn_queue_get_semaphore");
  print_round_trip("submit", "empty command submit->completion round trip", runs, rounds, [&] {
    for (uint64_t i = 0; i < rounds; ++i) {
      uint64_t sequence;
      check(trn_queue_barrier(queue, nullptr, &sequence), "trn_queue_barrier");
      check(trn_sem_wait(timeline, sequence, UINT64_MAX), "trn_sem_wait");
    }
  });
  constexpr uint64_t kBatch = 64;
  const uint64_t batches = rounds / kBatch;
  const PairedMedians ns = paired_medians_ns(
      runs, {},
      [&] {
        for (uint64_t b = 0; b < batches; ++b) {
          uint64_t sequence = 0;
          for (uint64_t i = 0; i < kBatch; ++i)
            check(trn_queue_barrier(queue, nullptr, &sequence), "trn_queue_barrier");
          check(trn_sem_wait(timeline, sequence, UINT64_MAX), "trn_sem_wait");
        }
      },
      [&] { raw_ping_pong(rounds, FlagLayout::one_line); });
  print({"submit", "empty commands in batches of 64", "commands/s",
         1e9 * static_cast<double>(batches * kBatch) / ns.trn_ns,
         1e9 * static_cast<double>(rounds) / ns.baseline_ns, "raw atomic ping-pong hand-offs/s",
         true});
  check(trn_queue_destroy(queue), "trn_queue_destroy");
  return 0;
}

namespace {

// Plain host memory (registered nowhere) to and from the device through a queue
// (trn_queue_write / trn_queue_read), against one thread's memcpy of the same size.
void bench_host_pointer_copies(trn_pool_t device_pool, trn_queue_t queue, int runs) {
  constexpr uint64_t kSize = 64ull << 20;
  constexpr uint64_t kRepeat = 4;
  trn_mem_t device;
  check(trn_mem_alloc(device_pool, kSize, 0, TRN_MEM_CATEGORY_TENSORS, 0, &device),
        "trn_mem_alloc");
  void *pointer;
  check(trn_mem_map(device, &pointer), "trn_mem_map");  // commit and touch every page first
  std::memset(pointer, 1, kSize);
  std::vector<char> host(kSize, 2), other(kSize, 3);
  auto repeated = [&](auto copy_once) {
    return [copy_once] {
      for (uint64_t i = 0; i < kRepeat; ++i) copy_once();
    };
  };
  const std::vector<double> ns = interleaved_medians_ns(
      runs, {},
      {repeated([&] { std::memcpy(other.data(), host.data(), kSize); }), repeated([&] {
         check(trn_queue_write(queue, device, 0, host.data(), kSize, nullptr, nullptr),
               "trn_queue_write");
         check(trn_queue_finish(queue, UINT64_MAX), "trn_queue_finish");
       }),
       repeated([&] {
         check(trn_queue_read(queue, host.data(), device, 0, kSize, nullptr, nullptr),
               "trn_queue_read");
         check(trn_queue_finish(queue, UINT64_MAX), "trn_queue_finish");
       })});
  const auto gbps = [](double t) { return static_cast<double>(kSize * kRepeat) / t; };
  const double memcpy_one = gbps(ns[0]), write = gbps(ns[1]), read = gbps(ns[2]);
  print({"copy", "write 64 MiB", "GB/s", write, memcpy_one, "memcpy 1 thread", true});
  print({"copy", "read 64 MiB", "GB/s", read, memcpy_one, "memcpy 1 thread", true});
  trn_mem_free(device);
}

}  // namespace

int bench_copy(int argc, char **argv) {
  const bool q = quick(argc, argv);
  const int runs = q ? 3 : 5;
  Context c = open_device();
  trn_pool_desc_t pool_desc = TRN_POOL_DESC_INIT;
  trn_pool_t device_pool, host_pool;
  check(trn_pool_create(c.device, &pool_desc, &device_pool), "trn_pool_create");
  pool_desc.kind = TRN_POOL_KIND_HOST;
  check(trn_pool_create(c.device, &pool_desc, &host_pool), "trn_pool_create");
  trn_queue_desc_t desc = TRN_QUEUE_DESC_INIT;
  desc.core = c.core;
  trn_queue_t queue;
  check(trn_queue_create(&desc, &queue), "trn_queue_create");
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<uint64_t> sizes = {64ull << 10, 1ull << 20, 16ull << 20, 256ull << 20};
  if (!q) sizes.push_back(1ull << 30);
  for (uint64_t size : sizes) {
    trn_mem_t host, device_a, device_b;
    check(trn_mem_alloc(host_pool, size, 0, TRN_MEM_CATEGORY_TENSORS, 0, &host), "trn_mem_alloc");
    check(trn_mem_alloc(device_pool, size, 0, TRN_MEM_CATEGORY_TENSORS, 0, &device_a),
          "trn_mem_alloc");
    check(trn_mem_alloc(device_pool, size, 0, TRN_MEM_CATEGORY_TENSORS, 0, &device_b),
          "trn_mem_alloc");
    void *pointer;
    for (trn_mem_t m : {host, device_a, device_b}) {  // commit and touch every page first
      check(trn_mem_map(m, &pointer), "trn_mem_map");
      std::memset(pointer, 1, size);
    }
    const uint64_t repeat = std::max<uint64_t>(1, (256ull << 20) / size);
    auto copies = [&](trn_mem_t to, trn_mem_t from) {
      return [&, to, from] {
        for (uint64_t i = 0; i < repeat; ++i) {
          check(trn_queue_copy(queue, to, 0, from, 0, size, nullptr, nullptr), "trn_queue_copy");
          if (i % 512 == 511) check(trn_queue_finish(queue, UINT64_MAX), "trn_queue_finish");
        }
        check(trn_queue_finish(queue, UINT64_MAX), "trn_queue_finish");
      };
    };
    std::vector<char> a(size, 1), b(size, 2);
    auto memcpy_one = [&] {
      for (uint64_t i = 0; i < repeat; ++i) std::memcpy(a.data(), b.data(), size);
    };
    auto memcpy_all = [&] {
      for (uint64_t i = 0; i < repeat; ++i) {
        std::vector<std::thread> helpers;
        const uint64_t step = size / threads;
        for (unsigned t = 1; t < threads; ++t)
          helpers.emplace_back([&, t] {
            std::memcpy(a.data() + t * step, b.data() + t * step,
                        t + 1 == threads ? size - t * step : step);
          });
        std::memcpy(a.data(), b.data(), threads == 1 ? size : step);
        for (auto &h : helpers) h.join();
      }
    };
    // The baselines take turns with the copies, so that a slow stretch of the machine (its
    // memory bandwidth drifts from second to second) falls on both sides of every ratio.
    const std::vector<double> ns =
        interleaved_medians_ns(runs, {},
                               {memcpy_one, memcpy_all, copies(device_a, host),
                                copies(host, device_a), copies(device_b, device_a)});
    const auto gbps = [&](double t) { return static_cast<double>(size * repeat) / t; };
    const std::string label = size >= (1ull << 20) ? std::to_string(size >> 20) + " MiB"
                                                   : std::to_string(size >> 10) + " KiB";
    const std::pair<const char *, double> cases[] = {
        {"h2d", gbps(ns[2])},
        {"d2h", gbps(ns[3])},
        {"d2d", gbps(ns[4])},
    };
    for (const auto &[name, trn_gbps] : cases) {
      print({"copy", std::string(name) + " " + label, "GB/s", trn_gbps, gbps(ns[0]),
             "memcpy 1 thread", true});
      print({"copy", std::string(name) + " " + label, "GB/s", trn_gbps, gbps(ns[1]),
             "memcpy " + std::to_string(threads) + " threads", true});
    }
    for (trn_mem_t m : {host, device_a, device_b}) trn_mem_free(m);
  }
  bench_host_pointer_copies(device_pool, queue, runs);
  check(trn_queue_destroy(queue), "trn_queue_destroy");
  return 0;
}

}  // namespace trn::bench
