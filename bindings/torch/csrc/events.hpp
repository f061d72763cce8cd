// Events: a point on a stream's queue (its timeline semaphore and the sequence number reached
// there) plus an optional timestamp, as CUDA events are. What torch's guard (record, block,
// query) and torch_trn.Event (elapsed_time, synchronize) share.
#pragma once

#include <cstdint>
#include <utility>

#include "trn/trn.h"

namespace torch_trn {

struct Event {
  trn_sem_t sem = nullptr;      // the recording queue's timeline (owned by the queue)
  uint64_t value = 0;           // reached when every command before the record completed
  trn_queue_t queue = nullptr;  // the recording stream's queue (where a fault is read)
  trn_timestamp_t stamp{};      // written by the queue when timing is on
  bool timed = false;
};

// A full queue is back-pressure, never a reason to skip or reorder work: waits until the queue
// completes one more command (deadline TRN_TORCH_TIMEOUT from the first wait). True when there may
// be room now; false when the deadline passed or the queue failed (its semaphore did).
bool wait_for_room(trn_queue_t queue, uint64_t deadline_ns);
uint64_t room_deadline_ns();
// Calls `submit` (which submits one command to `queue` and returns its result) until it is not
// TRN_ERROR_QUEUE_FULL, waiting for room between tries; the last result.
template <typename Submit>
trn_result_t submit_when_room(trn_queue_t queue, Submit &&submit) {
  trn_result_t r = std::forward<Submit>(submit)();
  if (r != TRN_ERROR_QUEUE_FULL) return r;
  const uint64_t deadline = room_deadline_ns();
  while (r == TRN_ERROR_QUEUE_FULL && wait_for_room(queue, deadline)) r = submit();
  return r;
}

// The event of a queue's command `sequence`: reached once it and every command before it
// completed.
Event queue_event(trn_queue_t queue, uint64_t sequence);
// An event after everything submitted to the queue so far (a barrier marks it).
Event queue_mark(trn_queue_t queue);
// Makes `queue` wait on the device until the event is reached (no host wait); an event never
// recorded is no wait, as with CUDA.
void queue_wait(trn_queue_t queue, const Event &event);
// Waits for everything submitted to the queue (deadline TRN_TORCH_TIMEOUT); a fault raises and
// resets the queue (check_queue).
void queue_finish(trn_queue_t queue);

// Records on the current work of the stream's queue (replacing an earlier record).
void event_record(Event &event, int device_index, int64_t stream_id, bool timing);
// Before a timed event is destroyed or recorded again: waits (bounded by TRN_TORCH_TIMEOUT) until
// the queue has written its pending timestamp, which lives in the event. Never raises.
void event_retire(Event &event) noexcept;
// Makes the stream wait for the event on the device (no host wait).
void event_block(const Event &event, int device_index, int64_t stream_id);
bool event_query(const Event &event);
// Waits on the host (deadline: TRN_TORCH_TIMEOUT).
void event_synchronize(const Event &event);
// Whether all work queued on the stream so far has completed (nothing is waited for).
bool stream_query(int device_index, int64_t stream_id);
void stream_synchronize(int device_index, int64_t stream_id);
// Device milliseconds between two timed, completed events.
double event_elapsed_ms(const Event &start, const Event &end);

}  // namespace torch_trn
