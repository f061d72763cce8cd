#include "collective.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace trn::comm_test {

namespace {

struct OpInfo {
  Op op;
  const char *name;
};
constexpr OpInfo kOps[] = {{Op::all_reduce, "allr"},       {Op::all_gather, "allg"},
                           {Op::reduce_scatter, "redsct"}, {Op::broadcast, "bcast"},
                           {Op::all_to_all, "alltoall"},   {Op::send_recv, "sendrecv"}};

double reduce(trn_comm_red_op_t redop, uint32_t ranks, uint64_t i) {
  double acc = input_value(0, i);
  for (uint32_t r = 1; r < ranks; ++r) {
    const double v = input_value(r, i);
    acc = redop == TRN_COMM_MAX   ? std::max(acc, v)
          : redop == TRN_COMM_MIN ? std::min(acc, v)
                                  : acc + v;
  }
  return acc;
}

uint16_t f16_bits(double value) {
  // Exact for the integers input_value and its sums make (|v| < 2048).
  if (value == 0) return std::signbit(value) ? 0x8000 : 0;
  const uint16_t sign = value < 0 ? 0x8000 : 0;
  int exponent = 0;
  const double fraction = std::frexp(std::fabs(value), &exponent);  // [0.5, 1)
  const auto mantissa = static_cast<uint16_t>(std::ldexp(fraction, 11)) & 0x3ff;
  return static_cast<uint16_t>(sign | ((exponent - 1 + 15) << 10) | mantissa);
}

double f16_value(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  double v;
  if (exponent == 0x1f)
    v = mantissa ? NAN : INFINITY;
  else if (exponent == 0)
    v = std::ldexp(mantissa, -24);
  else
    v = std::ldexp(mantissa + 1024, exponent - 25);
  return (bits & 0x8000) ? -v : v;
}

}  // namespace

std::optional<Op> parse_op(const std::string &name) {
  for (const OpInfo &o : kOps)
    if (name == o.name) return o.op;
  return std::nullopt;
}

const char *op_name(Op op) {
  for (const OpInfo &o : kOps)
    if (o.op == op) return o.name;
  return "?";
}

std::string op_names() {
  std::string out;
  for (const OpInfo &o : kOps) out += std::string(out.empty() ? "" : ", ") + o.name;
  return out;
}

Shape shape_of(Op op, uint64_t size_bytes, trn_dtype_t dtype, uint32_t ranks) {
  const uint64_t es = trn_dtype_size(dtype);
  Shape s;
  const uint64_t count = std::max<uint64_t>(size_bytes / es, 1);
  switch (op) {
    case Op::all_gather:
    case Op::reduce_scatter:
    case Op::all_to_all:
      // The size is the whole buffer: ranks blocks of equal whole elements.
      s.block = std::max<uint64_t>(count / ranks, 1);
      s.count = s.block * ranks;
      s.send_count = op == Op::all_gather ? s.block : s.count;
      s.recv_count = op == Op::reduce_scatter ? s.block : s.count;
      break;
    default: s.count = s.block = s.send_count = s.recv_count = count; break;
  }
  s.size_bytes = s.count * es;
  return s;
}

double bus_factor(Op op, uint32_t ranks) {
  const double n = ranks;
  switch (op) {
    case Op::all_reduce: return 2 * (n - 1) / n;
    case Op::all_gather:
    case Op::reduce_scatter:
    case Op::all_to_all: return (n - 1) / n;
    default: return 1;
  }
}

trn_result_t enqueue(Op op, trn_comm_t comm, trn_queue_t queue, trn_comm_buffer_t send,
                     trn_comm_buffer_t recv, const Shape &shape, trn_dtype_t dtype,
                     trn_comm_red_op_t redop, uint32_t rank, uint32_t ranks) {
  switch (op) {
    case Op::all_reduce:
      return trn_comm_all_reduce(comm, queue, send, recv, shape.count, dtype, redop, nullptr,
                                 nullptr);
    case Op::all_gather:
      return trn_comm_all_gather(comm, queue, send, recv, shape.block, dtype, nullptr, nullptr);
    case Op::reduce_scatter:
      return trn_comm_reduce_scatter(comm, queue, send, recv, shape.block, dtype, redop, nullptr,
                                     nullptr);
    case Op::broadcast:
      return trn_comm_broadcast(comm, queue, send, recv, shape.count, dtype, 0, nullptr, nullptr);
    case Op::all_to_all:
      return trn_comm_all_to_all(comm, queue, send, recv, shape.block, dtype, nullptr, nullptr);
    case Op::send_recv:
      if (rank % 2 == 0 && rank + 1 < ranks)
        return trn_comm_send(comm, queue, send, shape.count, dtype, rank + 1, nullptr, nullptr);
      if (rank % 2 == 1)
        return trn_comm_recv(comm, queue, recv, shape.count, dtype, rank - 1, nullptr, nullptr);
      return TRN_SUCCESS;
  }
  return TRN_ERROR_INVALID_ARGUMENT;
}

double input_value(uint32_t rank, uint64_t i) {
  return static_cast<double>(static_cast<int64_t>((i * 7 + uint64_t{rank} * 3) % 5) - 2);
}

bool writes_output(Op op, uint32_t rank, uint32_t ranks) {
  (void)ranks;
  return op != Op::send_recv || rank % 2 == 1;
}

std::optional<double> expected_value(Op op, trn_comm_red_op_t redop, const Shape &shape,
                                     uint32_t rank, uint32_t ranks, uint64_t i) {
  if (!writes_output(op, rank, ranks)) return std::nullopt;
  const uint64_t b = shape.block;
  switch (op) {
    case Op::all_reduce: return reduce(redop, ranks, i);
    case Op::all_gather: return input_value(static_cast<uint32_t>(i / b), i % b);
    case Op::reduce_scatter: return reduce(redop, ranks, rank * b + i);
    case Op::broadcast: return input_value(0, i);
    case Op::all_to_all: return input_value(static_cast<uint32_t>(i / b), rank * b + i % b);
    case Op::send_recv: return input_value(rank - 1, i);
  }
  return std::nullopt;
}

void encode(trn_dtype_t dtype, double value, void *out) {
  const auto f = static_cast<float>(value);
  uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  switch (dtype) {
    case TRN_DTYPE_BF16: {
      const auto b = static_cast<uint16_t>(bits >> 16);  // exact: small integers
      std::memcpy(out, &b, 2);
      break;
    }
    case TRN_DTYPE_F16: {
      const uint16_t h = f16_bits(value);
      std::memcpy(out, &h, 2);
      break;
    }
    case TRN_DTYPE_I32: {
      const auto i = static_cast<int32_t>(value);
      std::memcpy(out, &i, 4);
      break;
    }
    default: std::memcpy(out, &f, 4); break;
  }
}

double decode(trn_dtype_t dtype, const void *in) {
  switch (dtype) {
    case TRN_DTYPE_BF16: {
      uint16_t b = 0;
      std::memcpy(&b, in, 2);
      const uint32_t bits = uint32_t{b} << 16;
      float f = 0;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case TRN_DTYPE_F16: {
      uint16_t h = 0;
      std::memcpy(&h, in, 2);
      return f16_value(h);
    }
    case TRN_DTYPE_I32: {
      int32_t i = 0;
      std::memcpy(&i, in, 4);
      return i;
    }
    default: {
      float f = 0;
      std::memcpy(&f, in, 4);
      return f;
    }
  }
}

}  // namespace trn::comm_test
