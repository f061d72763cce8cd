// Errors inside libtrn_comm: a CommError carries a trn_result_t and the message that
// trn_comm_last_error() returns; the C entry points turn it into their result.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "trn/trn.h"

namespace trn::comm {

class CommError : public std::runtime_error {
 public:
  CommError(trn_result_t result, const std::string &what)
      : std::runtime_error(what), result_(result) {}
  trn_result_t result() const { return result_; }

 private:
  trn_result_t result_;
};

[[noreturn]] void fail(trn_result_t result, const std::string &what);
// Throws with the runtime's (or libtrn_ops') message when `result` is not TRN_SUCCESS.
void check(trn_result_t result, const std::string &doing);
void check_ops(trn_result_t result, const std::string &doing);

// The exception being handled (call inside a catch block): its result, found without allocating
// (a CommError gives its own; std::bad_alloc is TRN_ERROR_OUT_OF_HOST_MEMORY, as is a thread that
// could not start for want of resources; anything else TRN_ERROR_INTERNAL), and its reason,
// which allocates and may itself throw std::bad_alloc.
trn_result_t current_result() noexcept;
std::string current_reason();

// A timeout as the messages give it: "3000 ms", "100 us", "1 ns"; UINT64_MAX is no limit.
std::string duration_text(uint64_t ns);

void set_last_error(std::string message);
const char *last_error();

}  // namespace trn::comm
