// The infrastructure kernels every PrivateUse1 backend needs: allocation (empty, empty_strided),
// copies between the host and the device and between devices (_copy_from, which copy_ and .to()
// reach), resize_, views, reading one element (.item()), fill_ and zero_.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/set_native.h>
#include <c10/core/CPUAllocator.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <mutex>

#include "allocator.hpp"
#include "check.hpp"
#include "devices.hpp"
#include "events.hpp"
#include "fallback.hpp"
#include "op_support.hpp"
#include "tensor_view.hpp"
#include "trn/trn_ops.h"

namespace torch_trn {
namespace {

constexpr auto kKeys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1);

// What a new trn tensor's options ask for, checked: its dtype and its device (which the caller
// makes current: the allocator takes the current device).
struct NewTensor {
  c10::ScalarType type;
  c10::Device device;
};

NewTensor new_tensor(c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                     c10::optional<at::Device> device) {
  TORCH_CHECK(!layout || *layout == at::kStrided, "trn tensors are strided, not ", *layout);
  const auto type = dtype.value_or(c10::get_default_dtype_as_scalartype());
  TORCH_CHECK(
      is_trn_dtype(type), "trn tensors cannot hold ", type,
      ": use float32, bfloat16, float16, float64, int64, int32, int16, int8, uint8 or bool");
  const int index = device && device->has_index() ? device->index() : current_device();
  return {type, c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index))};
}

at::Tensor empty_memory_format(c10::SymIntArrayRef size, c10::optional<at::ScalarType> dtype,
                               c10::optional<at::Layout> layout, c10::optional<at::Device> device,
                               c10::optional<bool> pin_memory,
                               c10::optional<at::MemoryFormat> memory_format) {
  (void)pin_memory;
  const NewTensor t = new_tensor(dtype, layout, device);
  c10::DeviceGuard guard(t.device);
  return at::detail::empty_generic(C10_AS_INTARRAYREF_SLOW(size), allocator(), kKeys, t.type,
                                   memory_format);
}

at::Tensor empty_strided(c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                         c10::optional<at::ScalarType> dtype, c10::optional<at::Layout> layout,
                         c10::optional<at::Device> device, c10::optional<bool> pin_memory) {
  (void)pin_memory;
  const NewTensor t = new_tensor(dtype, layout, device);
  c10::DeviceGuard guard(t.device);
  return at::detail::empty_strided_generic(
      C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride), allocator(), kKeys, t.type);
}

// Host memory a queued copy still reads or writes: kept alive until its queue passes the command.
class PendingHostBuffers {
 public:
  void add(const Event &until, at::Tensor buffer) {
    std::lock_guard lock(mutex_);
    prune_locked();
    pending_.push_back({until, std::move(buffer)});
  }
  // Lets go of the buffers the queues are done with.
  void prune() {
    std::lock_guard lock(mutex_);
    prune_locked();
  }

 private:
  struct Entry {
    Event until;
    at::Tensor buffer;
  };
  void prune_locked() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      uint64_t reached = 0;
      // A failed queue will never get there: its memory is no longer used either.
      const trn_result_t r = trn_sem_query(it->until.sem, &reached);
      if (r != TRN_SUCCESS || reached >= it->until.value)
        it = pending_.erase(it);
      else
        ++it;
    }
  }
  std::mutex mutex_;
  std::deque<Entry> pending_;
};

PendingHostBuffers &pending_host_buffers() {
  static PendingHostBuffers buffers;
  return buffers;
}

uint64_t nbytes_of(const at::Tensor &t) {
  return static_cast<uint64_t>(t.numel()) * t.element_size();
}

// A contiguous trn tensor holding `src` (itself when it is contiguous already).
at::Tensor contiguous_on_device(const at::Tensor &src) {
  if (src.is_contiguous()) return src;
  at::Tensor out = at::empty(src.sizes(), src.options());
  t_copy(queue_of(out), out, src);
  return out;
}

void host_to_device(const at::Tensor &src, const at::Tensor &dst, bool non_blocking) {
  at::Tensor host = src.to(dst.scalar_type()).contiguous();
  if (!host.is_same(src)) non_blocking = true;  // `host` is a copy of ours: no one else waits
  const OutTarget target(dst, queue_of(dst));
  const auto t = location_of(target.get());
  trn_queue_t queue = queue_of(target.get());
  const DeviceRange profiled(queue, dst.device().index());
  uint64_t sequence = 0;
  check(submit_when_room(queue,
                         [&] {
                           return trn_queue_write(queue, t.mem, t.offset, host.data_ptr(),
                                                  nbytes_of(host), nullptr, &sequence);
                         }),
        "trn_queue_write");
  // Held from here on, whatever fails below: the queue reads it when it gets there.
  const Event written = queue_event(queue, sequence);
  pending_host_buffers().add(written, host);
  target.finish();
  if (!non_blocking) {
    event_synchronize(written);
    pending_host_buffers().prune();
  }
}

void device_to_host(const at::Tensor &src, const at::Tensor &dst) {
  const at::Tensor source = contiguous_on_device(src);
  const bool direct = dst.is_contiguous() && dst.scalar_type() == src.scalar_type();
  at::Tensor host = direct ? dst : at::empty(src.sizes(), src.options().device(at::kCPU));
  const auto s = location_of(source);
  trn_queue_t queue = queue_of(source);
  const DeviceRange profiled(queue, src.device().index());
  uint64_t sequence = 0;
  check(submit_when_room(queue,
                         [&] {
                           return trn_queue_read(queue, host.data_ptr(), s.mem, s.offset,
                                                 nbytes_of(source), nullptr, &sequence);
                         }),
        "trn_queue_read");
  const Event read = queue_event(queue, sequence);
  try {
    event_synchronize(read);
  } catch (...) {
    // Not written yet (a deadline, a fault still draining): the memory stays alive until it is.
    pending_host_buffers().add(read, host);
    throw;
  }
  if (!direct) dst.copy_(host);
}

// dst = src on one device, casts included. To bool it is `src != 0`, as PyTorch converts (a cast
// would truncate 0.5 to 0 and keep 2 as 2). Floats to 8- and 16-bit integers go through int32,
// as the CPU converts them (truncated to an int, then its low bits: -1.0 is 255 as a uint8,
// 300.0 is 44), where the device's own conversion saturates.
void copy_on_device(const at::Tensor &dst, const at::Tensor &src) {
  if (dst.numel() == 0) return;  // an empty slice (a cat or stack with a dim of size 0)
  const bool narrow = dst.scalar_type() == at::kByte || dst.scalar_type() == at::kChar ||
                      dst.scalar_type() == at::kShort;
  if (dst.scalar_type() == at::kBool && src.scalar_type() != at::kBool) {
    t_binary_scalar(queue_of(dst), TRN_OPS_NE, dst, src, 0.0);
  } else if (narrow && at::isFloatingType(src.scalar_type())) {
    at::Tensor wide = at::empty(src.sizes(), src.options().dtype(at::kInt));
    t_copy(queue_of(dst), wide, src);
    t_copy(queue_of(dst), dst, wide);
  } else {
    t_copy(queue_of(dst), dst, src);
  }
}

void device_to_device(const at::Tensor &src, const at::Tensor &dst) {
  if (src.device() == dst.device()) {
    c10::DeviceGuard guard(dst.device());
    const DeviceRange profiled(queue_of(dst), dst.device().index());
    copy_on_device(dst, src);
    return;
  }
  // Across cores: the source made contiguous in the target dtype on its own core, one DMA copy
  // on the source's queue (after the target's queue is done with the target memory), then the
  // target's queue waits for it.
  at::Tensor staged;
  {
    c10::DeviceGuard guard(src.device());
    staged = contiguous_on_device(
        src.scalar_type() == dst.scalar_type() ? src : src.to(dst.scalar_type()));
  }
  const OutTarget target(dst, queue_of(dst));
  trn_queue_t src_queue = queue_of(staged), dst_queue = queue_of(target.get());
  queue_wait(src_queue, queue_mark(dst_queue));
  const auto s = location_of(staged), t = location_of(target.get());
  check(submit_when_room(src_queue,
                         [&] {
                           return trn_queue_copy(src_queue, t.mem, t.offset, s.mem, s.offset,
                                                 nbytes_of(staged), nullptr, nullptr);
                         }),
        "trn_queue_copy");
  queue_wait(dst_queue, queue_mark(src_queue));
  c10::DeviceGuard guard(dst.device());
  target.finish();
}

at::Tensor copy_from(const at::Tensor &source, const at::Tensor &dst, bool non_blocking) {
  // copy_ broadcasts its source (PyTorch hands other devices' copies here unexpanded).
  TORCH_CHECK(source.sizes() == dst.sizes() || at::is_expandable_to(source.sizes(), dst.sizes()),
              "copy_: a source of sizes ", source.sizes(), " does not broadcast to ", dst.sizes());
  const at::Tensor self = source.sizes() == dst.sizes() ? source : source.expand(dst.sizes());
  if (self.numel() == 0) return dst;
  const bool src_trn = self.device().type() == c10::DeviceType::PrivateUse1;
  const bool dst_trn = dst.device().type() == c10::DeviceType::PrivateUse1;
  TORCH_CHECK((src_trn || self.device().is_cpu()) && (dst_trn || dst.device().is_cpu()),
              "trn copies go between trn and CPU tensors, not ", self.device().str(), " to ",
              dst.device().str());
  if (src_trn && dst_trn) {
    device_to_device(self, dst);
  } else if (dst_trn) {
    c10::DeviceGuard guard(dst.device());
    host_to_device(self, dst, non_blocking);
  } else {
    c10::DeviceGuard guard(self.device());
    device_to_host(self, dst);
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor &self, const at::Tensor &dst) {
  dst.resize_(self.sizes());
  return copy_from(self, dst, false);
}

const at::Tensor &resize(const at::Tensor &self, c10::SymIntArrayRef size_sym,
                         c10::optional<at::MemoryFormat> memory_format) {
  const auto size = C10_AS_INTARRAYREF_SLOW(size_sym);
  c10::DeviceGuard guard(self.device());
  auto *impl = self.unsafeGetTensorImpl();
  TORCH_CHECK(memory_format != at::MemoryFormat::Preserve, "resize_ does not take preserve_format");
  // As the CPU's: the same sizes keep the strides (a view resized by an out= or in-place op's
  // CPU fallback stays that view); a memory format restrides.
  if (self.sizes() != size) impl->set_sizes_contiguous(size);
  if (memory_format) impl->empty_tensor_restride(*memory_format);
  const uint64_t needed =
      (static_cast<uint64_t>(impl->storage_offset()) + static_cast<uint64_t>(self.numel())) *
      self.element_size();
  c10::Storage storage = self.storage();
  if (needed > storage.nbytes()) {
    at::DataPtr fresh = allocator()->allocate(needed);
    trn_queue_t queue = queue_of(self);
    // The old block may have been written on the stream it belongs to: the copy follows that
    // stream's work, and the block's free on that stream (when it is replaced) follows the copy.
    trn_queue_t old_queue = allocation_queue(storage.data_ptr());
    if (old_queue) queue_wait(queue, queue_mark(old_queue));
    if (storage.nbytes() > 0 && storage.data() != nullptr) {
      const Device &dev = device_at(self.device());
      trn_mem_t from = nullptr, to = nullptr;
      uint64_t from_offset = 0, to_offset = 0;
      check(trn_mem_lookup(dev.trn_device(), reinterpret_cast<uintptr_t>(storage.data()), &from,
                           &from_offset),
            "trn_mem_lookup");
      check(trn_mem_lookup(dev.trn_device(), reinterpret_cast<uintptr_t>(fresh.get()), &to,
                           &to_offset),
            "trn_mem_lookup");
      check(submit_when_room(queue,
                             [&] {
                               return trn_queue_copy(queue, to, to_offset, from, from_offset,
                                                     storage.nbytes(), nullptr, nullptr);
                             }),
            "trn_queue_copy");
    }
    if (old_queue) queue_wait(old_queue, queue_mark(queue));
    storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(fresh));
    storage.unsafeGetStorageImpl()->set_nbytes(needed);
  }
  return self;
}

// A tensor made to view a trn storage (Storage.cpu() and torch.save make one; so do views of
// storages from Python): the storage must be trn's, as at::native's checks require.
at::Tensor &set_storage(at::Tensor &self, at::Storage source, c10::SymInt storage_offset,
                        c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::set_storage_cpu_(
      self, std::move(source), storage_offset.guard_int(__FILE__, __LINE__),
      C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

at::Tensor &set_whole_storage(at::Tensor &self, at::Storage source) {
  return at::native::set_(self, std::move(source));
}

// An empty tensor of its own (a fresh empty trn storage).
at::Tensor &set_empty(at::Tensor &self) {
  c10::Storage storage(c10::Storage::use_byte_size_t(), 0, allocator(), /*resizable=*/true);
  return set_storage(self, std::move(storage), 0, {0}, {});
}

at::Tensor view(const at::Tensor &self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor as_strided(const at::Tensor &self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      c10::optional<c10::SymInt> storage_offset) {
  c10::optional<int64_t> offset;
  if (storage_offset) offset = storage_offset->expect_int();
  return at::native::as_strided_tensorimpl(self, C10_AS_INTARRAYREF_SLOW(size),
                                           C10_AS_INTARRAYREF_SLOW(stride), offset);
}

// Windows of a dim as a view (Tensor.unfold, which repeat and tile use): the CPU fallback would
// return a copy, so writes through it would be lost and repeat would read what it never wrote.
at::Tensor unfold(const at::Tensor &self, int64_t dimension, int64_t size, int64_t step) {
  return at::native::unfold(self, dimension, size, step);
}

at::Tensor reshape_alias(const at::Tensor &self, c10::SymIntArrayRef size,
                         c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                    C10_AS_INTARRAYREF_SLOW(stride));
}

at::Scalar local_scalar_dense(const at::Tensor &self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  at::Tensor host = at::empty({}, self.options().device(at::kCPU));
  device_to_host(self.reshape({}), host);
  return host.item();
}

// As PyTorch's fill_: a value the dtype cannot hold raises ("value cannot be converted to type
// uint8_t without overflow"), and the value stored is its conversion (-1 into uint8 is 255).
double converted_fill_value(const at::Tensor &self, const at::Scalar &value) {
  double converted = 0;
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, self.scalar_type(), "fill_",
                             [&] { converted = static_cast<double>(value.to<scalar_t>()); });
  return converted;
}

at::Tensor &fill_scalar(at::Tensor &self, const at::Scalar &value) {
  const double converted = converted_fill_value(self, value);
  if (self.numel() == 0) return self;
  // An integer beyond 2^53 is copied from an int64 on the host, exact, not passed as a double.
  if (!exact_as_double(value)) return self.copy_(at::scalar_tensor(value, at::kLong));
  OpScope scope(self);
  const auto v = view_of(self);
  check_ops(trn_ops_fill(scope.queue(), &v, converted, nullptr), "fill");
  return self;
}

at::Tensor &fill_tensor(at::Tensor &self, const at::Tensor &value) {
  TORCH_CHECK(value.dim() == 0, "fill_ takes a 0-dim value tensor, got ", value.dim(), " dims");
  return fill_scalar(self, value.item());
}

at::Tensor &zero(at::Tensor &self) {
  return fill_scalar(self, 0);
}

// arange into a 1-D output torch has sized: start + i * step on the device.
at::Tensor &arange_out(const at::Scalar &start, const at::Scalar &end, const at::Scalar &step,
                       at::Tensor &out) {
  const double s = start.toDouble(), e = end.toDouble(), d = step.toDouble();
  TORCH_CHECK(std::isfinite(s) && std::isfinite(e), "arange: unsupported range: ", s, " -> ", e);
  TORCH_CHECK(d != 0, "arange: step must be nonzero");
  TORCH_CHECK((d > 0 && e >= s) || (d < 0 && e <= s),
              "arange: upper bound and larger bound inconsistent with step sign");
  const auto n = static_cast<int64_t>(std::ceil((e - s) / d));
  resize_out(out, {n});
  if (n == 0) return out;
  OpScope scope(out);
  const auto o = view_of(out);
  check_ops(trn_ops_arange(scope.queue(), &o, s, d, nullptr), "arange");
  return out;
}

// eye: compares of two device aranges (exact below 2^24), converted to out's dtype.
at::Tensor &eye_m_out(c10::SymInt n_sym, c10::SymInt m_sym, at::Tensor &out) {
  const int64_t n = n_sym.guard_int(__FILE__, __LINE__), m = m_sym.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  resize_out(out, {n, m});
  if (out.numel() == 0) return out;
  OpScope scope(out);
  const auto index = out.options().dtype(at::kFloat);
  return out.copy_(at::arange(n, index).unsqueeze(1) == at::arange(m, index).unsqueeze(0));
}
at::Tensor &eye_out(c10::SymInt n, at::Tensor &out) {
  return eye_m_out(n, n, out);
}

// linspace as PyTorch's CPU kernel computes it, in float32 for float32, bfloat16 and float16
// outputs: step = (end - start) / (steps - 1) in float32, start + step * i for the first half and
// end - step * (steps - 1 - i) for the rest. Other dtypes on the CPU, recorded.
at::Tensor &linspace_out(const at::Scalar &start, const at::Scalar &end, int64_t steps,
                         at::Tensor &out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  resize_out(out, {steps});
  if (steps == 0) return out;
  if (!is_float_type(out.scalar_type()) || steps >= (int64_t{1} << 24)) {
    const at::Tensor result = at::linspace(start, end, steps, out.options().device(at::kCPU));
    record_cpu_run("aten::linspace.out");
    return out.copy_(result);
  }
  if (steps == 1) return out.fill_(start);
  OpScope scope(out);
  const float s = start.to<float>(), e = end.to<float>();
  const float step = (e - s) / static_cast<float>(steps - 1);
  const at::Tensor i = at::arange(steps, out.options().dtype(at::kFloat));
  const at::Tensor low = i * static_cast<double>(step) + static_cast<double>(s);
  const at::Tensor high =
      static_cast<double>(e) - (static_cast<double>(steps - 1) - i) * static_cast<double>(step);
  return out.copy_(at::where(i < static_cast<double>(steps / 2), low, high));
}

// cat: each input copied into its slice of the output (one DMA copy each when the slices are
// contiguous, as they are along dim 0).
at::Tensor &cat_out(const at::ITensorListRef &tensors, int64_t dim, at::Tensor &out) {
  const auto list = tensors.materialize();
  for (const at::Tensor &t : list) check_same_device("cat", {t, out});
  // A user's out= (no meta function shaped it) takes the inputs' shape, `dim` summed; legacy
  // empty 1-D tensors take no part in it either.
  at::DimVector shape{0};
  bool first = true;
  for (const at::Tensor &t : list) {
    if (t.dim() == 1 && t.numel() == 0) continue;
    const int64_t d = c10::maybe_wrap_dim(dim, t.dim());
    if (first) {
      shape = at::DimVector(t.sizes().begin(), t.sizes().end());
      first = false;
      continue;
    }
    // As PyTorch's check: one rank, equal sizes but along `dim`.
    TORCH_CHECK(t.dim() == static_cast<int64_t>(shape.size()),
                "Tensors must have same number of dimensions: got ", shape.size(), " and ",
                t.dim());
    for (int64_t k = 0; k < t.dim(); ++k)
      TORCH_CHECK(k == d || t.size(k) == shape[static_cast<size_t>(k)],
                  "Sizes of tensors must match except in dimension ", d, ". Expected size ",
                  shape[static_cast<size_t>(k)], " but got size ", t.size(k),
                  " for a tensor in the list.");
    shape[static_cast<size_t>(d)] += t.size(d);
  }
  resize_out(out, shape);
  int64_t offset = 0;
  OpScope scope(out);
  for (const at::Tensor &t : list) {
    // Legacy empty 1-D tensors take no part, as torch's cat skips them.
    if (t.dim() == 1 && t.numel() == 0 && out.dim() != 1) continue;
    const int64_t size = t.size(dim);
    if (size > 0) {
      const at::Tensor slice = out.narrow(dim, offset, size);
      const at::Tensor source = t.to(out.device());  // held until the copy is queued
      copy_on_device(slice, source);
    }
    offset += size;
  }
  return out;
}

// Module.to("trn"), .cpu() and .trn() keep each Parameter object (and so tied weights, and the
// optimizers made before the move) by swapping its contents in place (param.data = moved), which
// PyTorch does only when it deems the two tensors compatible. It knows only its built-in devices
// and leaves PrivateUse1 to say: dense CPU and trn tensors are.
bool has_compatible_shallow_copy_type(const at::Tensor &self, const at::Tensor &from) {
  auto dense = [](const at::Tensor &t) {
    return t.layout() == at::kStrided && !t.is_quantized() &&
           (t.device().is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1);
  };
  if (dense(self) && dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

// Tensor.record_stream: the storage's block is freed only after `stream`'s work queued so far.
void record_stream_op(at::Tensor &self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == c10::DeviceType::PrivateUse1,
              "record_stream: a trn tensor is recorded on a trn stream, not on ", stream.device());
  record_stream(self.storage().data_ptr(), device_at(stream.device_index()).queue(stream.id()));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", TORCH_FN(record_stream_op));
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(has_compatible_shallow_copy_type));
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("_copy_from", TORCH_FN(copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(copy_from_and_resize));
  m.impl("resize_", TORCH_FN(resize));
  m.impl("view", TORCH_FN(view));
  m.impl("set_.source_Storage", TORCH_FN(set_whole_storage));
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("as_strided", TORCH_FN(as_strided));
  m.impl("_reshape_alias", TORCH_FN(reshape_alias));
  m.impl("unfold", TORCH_FN(unfold));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor));
  m.impl("zero_", TORCH_FN(zero));
  m.impl("arange.start_out", TORCH_FN(arange_out));
  m.impl("cat.out", TORCH_FN(cat_out));
  m.impl("eye.out", TORCH_FN(eye_out));
  m.impl("eye.m_out", TORCH_FN(eye_m_out));
  m.impl("linspace.out", TORCH_FN(linspace_out));
}

}  // namespace torch_trn
