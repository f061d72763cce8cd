#include "ops/host_path.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "common/log.hpp"
#include "isa/dtype.hpp"
#include "ops/error.hpp"
#include "ops/fallback_log.hpp"
#include "ops/host/integer.hpp"
#include "ops/submit.hpp"

namespace trn::ops {

namespace {

template <typename T>
T load_as(const std::byte *p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

int64_t read_integer(trn_dtype_t dtype, const std::byte *p) {
  switch (dtype) {
    case TRN_DTYPE_I64: return load_as<int64_t>(p);
    case TRN_DTYPE_I32: return load_as<int32_t>(p);
    case TRN_DTYPE_I16: return load_as<int16_t>(p);
    case TRN_DTYPE_I8: return load_as<int8_t>(p);
    case TRN_DTYPE_U8: return load_as<uint8_t>(p);
    default: throw std::logic_error("read_integer: not an integer dtype");
  }
}

double read_element(trn_dtype_t dtype, const std::byte *p) {
  if (!dtype_is_float(dtype)) return static_cast<double>(read_integer(dtype, p));
  if (dtype == TRN_DTYPE_F32) return load_as<float>(p);
  if (dtype == TRN_DTYPE_F64) return load_as<double>(p);
  float f;
  isa::load_f32(static_cast<isa::DType>(dtype), p, &f, 1);
  return f;
}

// float -> integer as PyTorch casts: toward zero; out of range saturates and NaN gives 0 (where
// PyTorch leaves them undefined).
template <typename T>
void store_integer(double v, std::byte *p) {
  T out = 0;
  if (!std::isnan(v)) {
    const double t = std::trunc(v);
    if (t <= static_cast<double>(std::numeric_limits<T>::min()))
      out = std::numeric_limits<T>::min();
    else if (t >= static_cast<double>(std::numeric_limits<T>::max()))
      out = std::numeric_limits<T>::max();
    else
      out = static_cast<T>(t);
  }
  std::memcpy(p, &out, sizeof out);
}

void write_element(trn_dtype_t dtype, double v, std::byte *p) {
  switch (dtype) {
    case TRN_DTYPE_I32: return store_integer<int32_t>(v, p);
    case TRN_DTYPE_I16: return store_integer<int16_t>(v, p);
    case TRN_DTYPE_I8: return store_integer<int8_t>(v, p);
    case TRN_DTYPE_U8: return store_integer<uint8_t>(v, p);
    default: break;
  }
  if (dtype == TRN_DTYPE_F64) {
    std::memcpy(p, &v, sizeof v);
    return;
  }
  if (dtype == TRN_DTYPE_I64) return store_integer<int64_t>(v, p);
  const float f = static_cast<float>(v);
  isa::store_f32(static_cast<isa::DType>(dtype), &f, p, 1);
}

// The value's low bits, as a two's-complement integer of T's width (C++20 conversions wrap).
template <typename T>
void store_wrapped(int64_t v, std::byte *p) {
  const T out = static_cast<T>(v);
  std::memcpy(p, &out, sizeof out);
}

void write_integer(trn_dtype_t dtype, int64_t v, std::byte *p) {
  switch (dtype) {
    case TRN_DTYPE_I64: return store_wrapped<int64_t>(v, p);
    case TRN_DTYPE_I32: return store_wrapped<int32_t>(v, p);
    case TRN_DTYPE_I16: return store_wrapped<int16_t>(v, p);
    case TRN_DTYPE_I8: return store_wrapped<int8_t>(v, p);
    case TRN_DTYPE_U8: return store_wrapped<uint8_t>(v, p);
    default: throw std::logic_error("write_integer: not an integer dtype");
  }
}

// Calls body(element index, byte offset in the span) for every element, row-major.
template <typename Body>
void for_each_element(const Tensor &t, Body &&body) {
  const int64_t n = t.numel();
  if (n == 0) return;
  const int64_t rank = t.rank();
  std::vector<int64_t> idx(rank, 0);
  const int64_t size = t.element_size();
  int64_t offset = 0;
  for (int64_t i = 0; i < n; ++i) {
    body(i, offset * size);
    for (int64_t d = rank - 1; d >= 0; --d) {
      offset += t.strides[d];
      if (++idx[d] < t.shape[d]) break;
      offset -= t.strides[d] * t.shape[d];
      idx[d] = 0;
    }
  }
}

struct HostJob {
  std::string op;
  std::vector<Tensor> inputs, outputs;
  std::vector<std::vector<std::byte>> input_bytes, output_bytes;
  HostCompute compute;
  // Instead of compute: reads input_bytes and writes output_bytes itself (copies bit for bit,
  // the integer ops).
  std::function<void(HostJob &)> direct;
};

// The tensor's values as int64, row-major.
std::vector<int64_t> integer_values(const Tensor &t, const std::byte *span) {
  std::vector<int64_t> values;
  values.reserve(static_cast<size_t>(t.numel()));
  for_each_element(
      t, [&](int64_t, int64_t at) { values.push_back(read_integer(t.dtype, span + at)); });
  return values;
}

void copy_elements(HostJob &job) {
  const Tensor &out = job.outputs[0];
  const Tensor in = expanded_to(job.inputs[0], out.shape);
  std::vector<int64_t> from;
  from.reserve(static_cast<size_t>(in.numel()));
  for_each_element(in, [&](int64_t, int64_t at) { from.push_back(at); });
  const size_t size = out.element_size();
  for_each_element(out, [&](int64_t i, int64_t at) {
    std::memcpy(job.output_bytes[0].data() + at, job.input_bytes[0].data() + from[i], size);
  });
}

void compute_job(void *user, trn_result_t status) {
  auto *job = static_cast<HostJob *>(user);
  if (status != TRN_SUCCESS) return;  // the queue failed before the op: nothing to compute
  try {
    if (job->direct) return job->direct(*job);
    Arrays in(job->inputs.size());
    for (size_t i = 0; i < job->inputs.size(); ++i)
      if (job->inputs[i].present()) in[i] = gather(job->inputs[i], job->input_bytes[i].data());
    Arrays out = job->compute(in);
    size_t k = 0;
    for (size_t i = 0; i < job->outputs.size(); ++i) {
      if (!job->outputs[i].present()) continue;
      if (k >= out.size()) throw std::logic_error("the host op returned too few outputs");
      scatter(out[k++], job->outputs[i], job->output_bytes[i].data());
    }
  } catch (const std::exception &e) {
    // Found only now, in the data (an index out of range): the outputs are NaN (or 0) so that the
    // failure shows, and the log says why.
    common::logger("ops")->error("{} failed on the host: {}; its outputs are set to NaN", job->op,
                                 e.what());
    for (size_t i = 0; i < job->outputs.size(); ++i) {
      if (!job->outputs[i].present()) continue;
      host::Array nan{job->outputs[i].shape, {}};
      nan.data.assign(static_cast<size_t>(job->outputs[i].numel()),
                      std::numeric_limits<double>::quiet_NaN());
      scatter(nan, job->outputs[i], job->output_bytes[i].data());
    }
  }
}

void free_job(void *user, trn_result_t) {
  delete static_cast<HostJob *>(user);
}

}  // namespace

host::Array gather(const Tensor &t, const std::byte *span) {
  host::Array a{t.shape, {}};
  a.data.resize(static_cast<size_t>(t.numel()));
  for_each_element(t, [&](int64_t i, int64_t at) { a.data[i] = read_element(t.dtype, span + at); });
  return a;
}

void scatter(const host::Array &a, const Tensor &t, std::byte *span) {
  if (static_cast<int64_t>(a.data.size()) != t.numel())
    throw std::logic_error("host op result of " + shape_text(a.shape) + " for an output of " +
                           shape_text(t.shape));
  for_each_element(t, [&](int64_t i, int64_t at) { write_element(t.dtype, a.data[i], span + at); });
}

namespace {

// Queues the job's reads, its compute and its writes; the job frees itself with its last
// command.
void queue_job(trn_queue_t queue, const trn_sync_t *sync, std::unique_ptr<HostJob> job) {
  Commands commands(queue, sync);
  job->input_bytes.resize(job->inputs.size());
  for (size_t i = 0; i < job->inputs.size(); ++i) {
    const Tensor &t = job->inputs[i];
    if (!t.present() || t.span_end == t.span_begin) continue;
    job->input_bytes[i].resize(t.span_end - t.span_begin);
    commands.read(job->input_bytes[i].data(), t.mem, t.span_begin, t.span_end - t.span_begin);
  }
  job->output_bytes.resize(job->outputs.size());
  for (size_t i = 0; i < job->outputs.size(); ++i) {
    const Tensor &t = job->outputs[i];
    if (!t.present() || t.span_end == t.span_begin) continue;
    job->output_bytes[i].resize(t.span_end - t.span_begin);
    // A strided output's span has other tensors' bytes between its elements: keep them.
    if (!t.contiguous())
      commands.read(job->output_bytes[i].data(), t.mem, t.span_begin, t.span_end - t.span_begin);
  }
  commands.host_call(compute_job, job.get());
  for (size_t i = 0; i < job->outputs.size(); ++i) {
    const Tensor &t = job->outputs[i];
    if (!t.present() || t.span_end == t.span_begin) continue;
    commands.write(t.mem, t.span_begin, job->output_bytes[i].data(), t.span_end - t.span_begin);
  }
  commands.host_call(free_job, job.get());
  try {
    commands.submit();
  } catch (...) {
    // Commands already queued write into the job's buffers, and its free never will be: it
    // must outlive them, so it is left allocated.
    if (commands.submitted() > 0) job.release();
    throw;
  }
  job.release();  // free_job owns it now
}

// Queues a job for `op` that runs `compute`, or else `direct`, and records the fallback.
void run_job(trn_queue_t queue, const trn_sync_t *sync, const std::string &op,
             const std::string &signature, const std::string &reason, std::vector<Tensor> inputs,
             std::vector<Tensor> outputs, HostCompute compute,
             std::function<void(HostJob &)> direct = nullptr) {
  auto job = std::make_unique<HostJob>();
  job->op = op;
  job->inputs = std::move(inputs);
  job->outputs = std::move(outputs);
  job->compute = std::move(compute);
  job->direct = std::move(direct);
  queue_job(queue, sync, std::move(job));
  if (!reason.empty()) record_fallback(op, signature, reason);
}

}  // namespace

void run_on_host(trn_queue_t queue, const trn_sync_t *sync, const std::string &op,
                 const std::string &signature, const std::string &reason,
                 std::vector<Tensor> inputs, std::vector<Tensor> outputs, HostCompute compute) {
  run_job(queue, sync, op, signature, reason, std::move(inputs), std::move(outputs),
          std::move(compute));
}

bool all_integer(const std::vector<Tensor> &inputs, const Tensor &out) {
  if (dtype_is_float(out.dtype)) return false;
  for (const Tensor &t : inputs)
    if (t.present() && dtype_is_float(t.dtype)) return false;
  return true;
}

void run_integer_elementwise(trn_queue_t queue, const trn_sync_t *sync, const std::string &op,
                             const std::string &signature, const std::string &reason,
                             std::vector<Tensor> inputs, const Tensor &out, IntegerElementwise f) {
  auto run = [f = std::move(f)](HostJob &j) {
    const Tensor &o = j.outputs[0];
    std::vector<std::vector<int64_t>> values;
    for (size_t k = 0; k < j.inputs.size(); ++k)
      values.push_back(integer_values(expanded_to(j.inputs[k], o.shape), j.input_bytes[k].data()));
    std::vector<int64_t> args(values.size());
    for_each_element(o, [&](int64_t i, int64_t at) {
      for (size_t k = 0; k < values.size(); ++k) args[k] = values[k][i];
      write_integer(o.dtype, f(args.data()), j.output_bytes[0].data() + at);
    });
  };
  run_job(queue, sync, op, signature, reason, std::move(inputs), {out}, nullptr, std::move(run));
}

void run_integer_reduce(trn_queue_t queue, const trn_sync_t *sync, const std::string &op,
                        const std::string &signature, const std::string &reason, const Tensor &x,
                        const Tensor &out, host::Reduce reduce, std::vector<int64_t> dims) {
  auto run = [reduce, dims = std::move(dims)](HostJob &j) {
    const Tensor &in = j.inputs[0], &o = j.outputs[0];
    const std::vector<int64_t> r =
        host::reduce_integer(reduce, in.shape, integer_values(in, j.input_bytes[0].data()), dims);
    if (static_cast<int64_t>(r.size()) != o.numel())
      throw std::logic_error("integer reduction of " + shape_text(in.shape) + " for an output of " +
                             shape_text(o.shape));
    for_each_element(o, [&](int64_t i, int64_t at) {
      write_integer(o.dtype, r[i], j.output_bytes[0].data() + at);
    });
  };
  run_job(queue, sync, op, signature, reason, {x}, {out}, nullptr, std::move(run));
}

void copy_on_host(trn_queue_t queue, const trn_sync_t *sync, const std::string &signature,
                  const std::string &reason, const Tensor &x, const Tensor &out) {
  run_job(queue, sync, "copy", signature, reason, {x}, {out}, nullptr, copy_elements);
}

}  // namespace trn::ops
