// trn results as PyTorch errors: a failed call raises c10::Error (RuntimeError in Python) carrying
// trn's own message, and out-of-memory raises c10::OutOfMemoryError (torch's OutOfMemoryError)
// with trn's table of who holds the bank.
#pragma once

#include "trn/trn.h"

namespace torch_trn {

// Raises unless `result` is TRN_SUCCESS; `what` names the call ("trn_mem_alloc").
void check(trn_result_t result, const char *what);
// For a call on a queue (a submission, a wait): when the queue has faulted (a kernel fault, a
// copy of freed memory), the error names the failed command and why, and the queue is reset so
// that later work runs — as CUDA reports an asynchronous error at the next synchronizing call,
// but without poisoning the device for good.
void check_queue(trn_queue_t queue, trn_result_t result, const char *what);
// The same for libtrn_ops calls, whose message lives in trn_ops_last_error.
void check_ops(trn_result_t result, const char *op);

// How long a blocking call (synchronize, a read back) waits before it raises: TRN_TORCH_TIMEOUT
// seconds, default 300.
uint64_t wait_timeout_ns();

}  // namespace torch_trn
