#include "events.hpp"

#include <c10/util/Exception.h>

#include <chrono>

#include "check.hpp"
#include "devices.hpp"

namespace torch_trn {

namespace {

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

uint64_t room_deadline_ns() {
  return now_ns() + wait_timeout_ns();
}

bool wait_for_room(trn_queue_t queue, uint64_t deadline_ns) {
  trn_sem_t timeline = nullptr;
  uint64_t completed = 0;
  if (trn_queue_get_semaphore(queue, &timeline) != TRN_SUCCESS ||
      trn_sem_query(timeline, &completed) != TRN_SUCCESS)
    return false;
  const uint64_t now = now_ns();
  if (now >= deadline_ns) return false;
  // The queue is full, so its next command is in flight: its completion makes room (or it already
  // came between the refusal and the query, and this returns at once).
  return trn_sem_wait(timeline, completed + 1, deadline_ns - now) == TRN_SUCCESS;
}

Event queue_event(trn_queue_t queue, uint64_t sequence) {
  Event event;
  check(trn_queue_get_semaphore(queue, &event.sem), "trn_queue_get_semaphore");
  event.value = sequence;
  event.queue = queue;
  return event;
}

Event queue_mark(trn_queue_t queue) {
  uint64_t sequence = 0;
  check(submit_when_room(queue, [&] { return trn_queue_barrier(queue, nullptr, &sequence); }),
        "trn_queue_barrier");
  return queue_event(queue, sequence);
}

void queue_wait(trn_queue_t queue, const Event &event) {
  if (!event.sem || event.queue == queue) return;  // a queue is in order with itself
  const trn_sem_point_t wait{event.sem, event.value};
  const trn_sync_t sync{&wait, 1, nullptr, 0};
  check(submit_when_room(queue, [&] { return trn_queue_barrier(queue, &sync, nullptr); }),
        "trn_queue_barrier");
}

void queue_finish(trn_queue_t queue) {
  check_queue(queue, trn_queue_finish(queue, wait_timeout_ns()), "trn_queue_finish");
}

void event_retire(Event &event) noexcept {
  if (event.timed && event.sem) trn_sem_wait(event.sem, event.value, wait_timeout_ns());
}

void event_record(Event &event, int device_index, int64_t stream_id, bool timing) {
  event_retire(event);
  trn_queue_t queue = device_at(device_index).queue(stream_id);
  uint64_t sequence = 0;
  if (timing)
    check(submit_when_room(
              queue,
              [&] { return trn_queue_write_timestamp(queue, &event.stamp, nullptr, &sequence); }),
          "trn_queue_write_timestamp");
  else
    check(submit_when_room(queue, [&] { return trn_queue_barrier(queue, nullptr, &sequence); }),
          "trn_queue_barrier");
  const Event point = queue_event(queue, sequence);
  event.sem = point.sem;
  event.value = point.value;
  event.queue = queue;
  event.timed = timing;
}

void event_block(const Event &event, int device_index, int64_t stream_id) {
  queue_wait(device_at(device_index).queue(stream_id), event);
}

bool event_query(const Event &event) {
  if (!event.sem) return true;
  uint64_t value = 0;
  check(trn_sem_query(event.sem, &value), "trn_sem_query");
  return value >= event.value;
}

void event_synchronize(const Event &event) {
  if (!event.sem) return;
  check_queue(event.queue, trn_sem_wait(event.sem, event.value, wait_timeout_ns()), "trn_sem_wait");
}

bool stream_query(int device_index, int64_t stream_id) {
  // A queue's timeline counts its commands one by one: a barrier of sequence S is behind exactly
  // the S - 1 commands before it, which are all done once the timeline reads S - 1.
  const Event probe = queue_mark(device_at(device_index).queue(stream_id));
  uint64_t value = 0;
  check(trn_sem_query(probe.sem, &value), "trn_sem_query");
  return value + 1 >= probe.value;
}

void stream_synchronize(int device_index, int64_t stream_id) {
  queue_finish(device_at(device_index).queue(stream_id));
}

double event_elapsed_ms(const Event &start, const Event &end) {
  TORCH_CHECK(start.timed && end.timed && start.sem && end.sem,
              "elapsed_time needs two events made with enable_timing=True and recorded (",
              !start.timed || !end.timed ? "one was made without timing" : "one was never recorded",
              ")");
  TORCH_CHECK(event_query(start) && event_query(end),
              "elapsed_time: an event has not completed yet (synchronize it first)");
  return (static_cast<double>(end.stamp.device_ns) - static_cast<double>(start.stamp.device_ns)) /
         1e6;
}

}  // namespace torch_trn
