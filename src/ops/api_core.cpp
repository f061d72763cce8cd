// The library's own entry points: version, errors, dtypes, tensor views, configuration, the
// kernel cache's counters and the fallback record.
#include <fmt/format.h>

#include <cstring>

#include "ops/config.hpp"
#include "ops/error.hpp"
#include "ops/fallback_log.hpp"
#include "ops/kernel_cache.hpp"
#include "ops/tensor.hpp"

using namespace trn::ops;

namespace {

void copy_text(char *dst, size_t size, const std::string &src) {
  const size_t n = std::min(size - 1, src.size());
  std::memcpy(dst, src.data(), n);
  dst[n] = '\0';
}

template <typename T>
void check_struct(const T *s, trn_struct_type_t type, const char *name) {
  if (!s) fail(TRN_ERROR_NULL_POINTER, fmt::format("{} is NULL", name));
  if (s->header.type != type || s->header.size < sizeof(T))
    fail(TRN_ERROR_INVALID_STRUCT,
         fmt::format("{} was not made with its *_INIT macro (type {}, size {})", name,
                     static_cast<int>(s->header.type), s->header.size));
}

}  // namespace

extern "C" {

TRN_OPS_API uint32_t trn_ops_get_version(void) {
  return TRN_OPS_API_VERSION;
}

TRN_OPS_API const char *trn_ops_last_error(void) {
  return last_error();
}

TRN_OPS_API trn_result_t trn_ops_tensor_init(trn_ops_tensor_t *tensor, trn_mem_t mem,
                                             uint64_t offset, trn_dtype_t dtype, uint32_t rank,
                                             const int64_t *shape) {
  return api_call("trn_ops_tensor_init", [&] {
    if (!tensor) fail(TRN_ERROR_NULL_POINTER, "tensor is NULL");
    if (rank > 0 && !shape) fail(TRN_ERROR_NULL_POINTER, "shape is NULL for a rank above 0");
    if (rank > TRN_OPS_MAX_DIMS)
      invalid(fmt::format("rank {} is over TRN_OPS_MAX_DIMS ({})", rank, TRN_OPS_MAX_DIMS));
    trn_ops_tensor_t t{};
    t.mem = mem;
    t.offset = offset;
    t.dtype = dtype;
    t.rank = rank;
    int64_t stride = 1;
    for (int64_t d = static_cast<int64_t>(rank) - 1; d >= 0; --d) {
      t.shape[d] = shape[d];
      t.strides[d] = stride;
      if (shape[d] > 0 && stride > (int64_t{1} << 62) / shape[d])
        invalid(
            fmt::format("shape {} has too many elements", shape_text(Shape(shape, shape + rank))));
      stride *= std::max<int64_t>(shape[d], 1);
    }
    tensor_arg(&t, "the tensor");  // every check a use makes
    *tensor = t;
  });
}

TRN_OPS_API uint64_t trn_ops_tensor_numel(const trn_ops_tensor_t *tensor) {
  if (!tensor || tensor->rank > TRN_OPS_MAX_DIMS) return 0;
  uint64_t n = 1;
  for (uint32_t d = 0; d < tensor->rank; ++d)
    n *= tensor->shape[d] > 0 ? static_cast<uint64_t>(tensor->shape[d]) : 0;
  return n;
}

TRN_OPS_API int trn_ops_tensor_is_contiguous(const trn_ops_tensor_t *tensor) {
  if (!tensor || tensor->rank > TRN_OPS_MAX_DIMS) return 0;
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(tensor->rank) - 1; d >= 0; --d) {
    if (tensor->shape[d] != 1 && tensor->strides[d] != expected) return 0;
    expected *= tensor->shape[d];
  }
  return 1;
}

TRN_OPS_API trn_result_t trn_ops_configure(const trn_ops_config_t *config) {
  return api_call("trn_ops_configure", [&] {
    configure(config);
    cache_trim();
  });
}

TRN_OPS_API trn_result_t trn_ops_get_cache_stats(trn_ops_cache_stats_t *stats) {
  return api_call("trn_ops_get_cache_stats", [&] {
    check_struct(stats, TRN_STRUCT_OPS_CACHE_STATS, "stats");
    const uint32_t size = stats->header.size;
    trn_ops_cache_stats_t s = cache_stats();
    std::memcpy(stats, &s, std::min<size_t>(size, sizeof s));
    stats->header.size = size;
  });
}

TRN_OPS_API trn_result_t trn_ops_cache_clear(void) {
  return api_call("trn_ops_cache_clear", [] { cache_clear(); });
}

TRN_OPS_API trn_result_t trn_ops_get_fallbacks(uint32_t *count, trn_ops_fallback_t *fallbacks) {
  return api_call("trn_ops_get_fallbacks", [&] {
    if (!count) fail(TRN_ERROR_NULL_POINTER, "count is NULL");
    const std::vector<Fallback> all = trn::ops::fallbacks();
    if (!fallbacks) {
      *count = static_cast<uint32_t>(all.size());
      return;
    }
    const uint32_t room = *count;
    for (uint32_t i = 0; i < room && i < all.size(); ++i) {
      check_struct(&fallbacks[i], TRN_STRUCT_OPS_FALLBACK, "fallbacks[i]");
      copy_text(fallbacks[i].op, sizeof fallbacks[i].op, all[i].op);
      copy_text(fallbacks[i].signature, sizeof fallbacks[i].signature, all[i].signature);
      copy_text(fallbacks[i].reason, sizeof fallbacks[i].reason, all[i].reason);
      fallbacks[i].count = all[i].count;
    }
    *count = static_cast<uint32_t>(std::min<size_t>(room, all.size()));
  });
}

TRN_OPS_API trn_result_t trn_ops_reset_fallbacks(void) {
  return api_call("trn_ops_reset_fallbacks", [] { reset_fallbacks(); });
}

}  // extern "C"
