#include "ops/staging.hpp"

#include <fmt/format.h>

#include <map>
#include <mutex>

#include "ops/device.hpp"
#include "ops/error.hpp"
#include "ops/kernel_op.hpp"
#include "ops/kernels/strided_copy.hpp"
#include "ops/op_support.hpp"

namespace trn::ops {

namespace {

// One scratch pool per device and HBM bank, made on first use; a pool from before a runtime
// restart is made again.
std::mutex g_mutex;
std::map<std::pair<uint32_t, uint32_t>, trn_pool_t> g_pools;  // guarded by g_mutex

trn_mem_t scratch(const Tensor &like, uint64_t bytes) {
  trn_mem_info_t info = TRN_MEM_INFO_INIT;
  check(trn_mem_get_info(like.mem, &info), "reading the tensor's allocation");
  const auto key = std::make_pair(info.device_index, info.hbm_bank);
  for (int attempt = 0; attempt < 2; ++attempt) {
    trn_pool_t pool = nullptr;
    {
      std::lock_guard lock(g_mutex);
      auto it = g_pools.find(key);
      if (it == g_pools.end()) {
        trn_pool_desc_t desc = TRN_POOL_DESC_INIT;
        desc.hbm_bank = info.hbm_bank;
        check(trn_pool_create(device(info.device_index).handle, &desc, &pool),
              "creating the op library's scratch pool");
        it = g_pools.emplace(key, pool).first;
      }
      pool = it->second;
    }
    trn_mem_t mem = nullptr;
    const trn_result_t r =
        trn_mem_alloc(pool, std::max<uint64_t>(bytes, 1), 0, TRN_MEM_CATEGORY_SCRATCH, 0, &mem);
    if (r == TRN_SUCCESS) return mem;
    if (r != TRN_ERROR_INVALID_HANDLE || attempt) check(r, "allocating scratch memory");
    std::lock_guard lock(g_mutex);
    g_pools.erase(key);  // stale: the runtime was restarted
    forget_device(info.device_index);
  }
  return nullptr;
}

// An 8-byte element (int64, float64: no device dtype) as two int32 words, the last dim.
Tensor as_word_pairs(const Tensor &t) {
  Tensor words = t;
  words.dtype = TRN_DTYPE_I32;
  for (int64_t &stride : words.strides) stride *= 2;
  words.shape.push_back(2);
  words.strides.push_back(1);
  return words;
}

}  // namespace

std::optional<std::string> strided_copy_on_device(trn_queue_t queue, const trn_sync_t *sync,
                                                  const Tensor &out, const Tensor &x) {
  // A same-dtype copy moves bytes, which the DMA engines move exactly whatever they hold: an
  // int64 or float64 view (a transpose of indices) moves as its int32 word pairs.
  if (x.dtype == out.dtype && !dtype_on_device(x.dtype) && dtype_size(x.dtype) == 8 &&
      !config().host_only)
    return strided_copy_on_device(queue, sync, as_word_pairs(out),
                                  as_word_pairs(expanded_to(x, out.shape)));
  // The output may be a view (strided): the DMA pattern writes it as it lies.
  if (!dtype_on_device(out.dtype) || config().host_only)
    return host_reason({&out}).value_or("a host dtype");
  if (!dtype_on_device(x.dtype)) return host_reason({&x}).value_or("a host dtype");
  if (x.dtype != out.dtype && !dtype_is_float(out.dtype))
    return fmt::format("a cast to {} truncates as PyTorch does; the device rounds",
                       dtype_name(out.dtype));
  kernels::StridedCopyConfig c;
  const Tensor view = expanded_to(x, out.shape);
  for (size_t d = 0; d < view.shape.size(); ++d)
    c.dims.push_back({static_cast<uint64_t>(view.shape[d]), view.strides[d]});
  c.span = (x.span_end - x.span_begin) / x.element_size();
  c.dtype = static_cast<isa::DType>(x.dtype);
  c.out_dtype = static_cast<isa::DType>(out.dtype);
  std::string signature =
      fmt::format("strided_copy {}>{} span {}", dtype_name(x.dtype), dtype_name(out.dtype), c.span);
  if (!out.contiguous()) {
    c.out_strides = out.strides;
    c.out_span = (out.span_end - out.span_begin) / out.element_size();
    signature += fmt::format(" into span {}", c.out_span);
    for (size_t d = 0; d < c.dims.size(); ++d)
      signature += fmt::format(" {}:{}:{}", c.dims[d].first, c.dims[d].second, c.out_strides[d]);
  } else {
    for (const auto &d : kernels::merge_dims(c.dims))
      signature += fmt::format(" {}:{}", d.first, d.second);
  }
  return try_device([&] {
    launch_kernels(queue, sync, out.device_index,
                   {{signature,
                     [c](const kbuild::BuildTarget &t) mutable {
                       c.target = t;
                       return kernels::build_strided_copy(c);
                     },
                     {bind(x), bind(out)}}});
  });
}

Tensor Staging::contiguous(const Tensor &t) {
  if (!t.present() || t.contiguous_but_broadcast()) return t;
  return copy_to_scratch(t, t.shape);
}

Tensor Staging::expanded(const Tensor &t, const Shape &shape) {
  if (!t.present() || (t.shape == shape && t.contiguous())) return t;
  return copy_to_scratch(t, shape);
}

Tensor Staging::copy_to_scratch(const Tensor &t, const Shape &shape) {
  if (!dtype_on_device(t.dtype) || config().host_only || t.numel() == 0) return t;
  Tensor copy = t;
  copy.shape = shape;
  int64_t numel = 1;
  for (int64_t n : shape) numel *= n;
  copy.mem = scratch(t, static_cast<uint64_t>(numel) * t.element_size());
  copy.offset = 0;
  copy.strides.assign(shape.size(), 0);
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    copy.strides[d] = stride;
    stride *= shape[d];
  }
  copy.span_begin = 0;
  copy.span_end = static_cast<uint64_t>(numel) * t.element_size();
  // The first copy takes the op's waits; later ones and the op follow it in queue order.
  const trn_sync_t waits_only = {sync_ ? sync_->waits : nullptr, sync_ ? sync_->wait_count : 0,
                                 nullptr, 0};
  const trn_sync_t none{};
  if (strided_copy_on_device(queue_, staged_ ? &none : &waits_only, copy, t)) {
    check(trn_mem_free(copy.mem), "freeing unused scratch memory");
    return t;  // the device cannot copy it: the op reads it as it is (on the host)
  }
  scratch_.push_back(copy.mem);
  if (!staged_ && sync_) signals_only_ = {nullptr, 0, sync_->signals, sync_->signal_count};
  staged_ = true;
  return copy;
}

Staging::~Staging() {
  // In queue order, after the op: whatever happened to it, the memory goes back.
  for (trn_mem_t m : scratch_) trn_queue_free(queue_, m, nullptr, nullptr);
}

}  // namespace trn::ops
