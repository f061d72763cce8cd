#include "fallback.hpp"

#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <map>
#include <mutex>

#include "check.hpp"
#include "trn/trn_ops.h"

namespace torch_trn {
namespace {

class FallbackLog {
 public:
  // Returns true the first time an op is seen (then it is warned about).
  bool record(const std::string &op) {
    std::lock_guard lock(mutex_);
    return ++counts_[op] == 1;
  }
  std::map<std::string, uint64_t> snapshot() {
    std::lock_guard lock(mutex_);
    return counts_;
  }
  void reset() {
    std::lock_guard lock(mutex_);
    counts_.clear();
  }

 private:
  std::mutex mutex_;
  std::map<std::string, uint64_t> counts_;
};

FallbackLog &log() {
  static FallbackLog instance;
  return instance;
}

std::string name_of(const c10::OperatorHandle &op) {
  const auto &name = op.schema().operator_name();
  return name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
}

}  // namespace

void record_cpu_run(const std::string &name) {
  if (log().record(name))
    TORCH_WARN("torch_trn: ", name,
               " has no trn kernel: it runs on the CPU, its tensors copied there and back "
               "(torch_trn.fallback_ops() lists such ops)");
}

namespace {

void cpu_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  const std::string name = name_of(op);
  // The generic fallback copies tensor-list outputs to the CPU and never back: a _foreach_ op
  // through it would silently leave the trn tensors unchanged.
  TORCH_CHECK(name.rfind("aten::_foreach_", 0) != 0, name,
              " has no trn kernel and cannot fall back to the CPU (its in-place tensor lists "
              "would not be written back): use the optimizer with foreach=False");
  record_cpu_run(name);
  // A factory with a device argument (tril_indices(..., device=trn)) runs on the CPU as any op:
  // its results must still land on the device asked for.
  const auto &schema = op.schema();
  const size_t args = schema.arguments().size();
  c10::Device asked(c10::DeviceType::CPU);
  for (size_t i = 0; i < args; ++i) {
    const c10::IValue &v = (*stack)[stack->size() - args + i];
    if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) asked = v.toDevice();
  }
  at::native::cpu_fallback(op, stack);
  if (asked.is_cpu()) return;
  const size_t results = schema.returns().size();
  for (size_t i = stack->size() - results; i < stack->size(); ++i) {
    c10::IValue &v = (*stack)[i];
    if (v.isTensor() && v.toTensor().defined() && v.toTensor().device().is_cpu())
      v = c10::IValue(v.toTensor().to(asked));
  }
}

}  // namespace

std::vector<std::pair<std::string, uint64_t>> fallback_ops() {
  std::vector<std::pair<std::string, uint64_t>> ops;
  for (const auto &[name, count] : log().snapshot()) ops.emplace_back(name, count);
  uint32_t count = 0;
  check_ops(trn_ops_get_fallbacks(&count, nullptr), "get_fallbacks");
  std::vector<trn_ops_fallback_t> entries(count, TRN_OPS_FALLBACK_INIT);
  check_ops(trn_ops_get_fallbacks(&count, entries.data()), "get_fallbacks");
  std::map<std::string, uint64_t> by_op;  // one entry per op, over its signatures
  for (uint32_t i = 0; i < count; ++i)
    by_op[std::string("trn_ops::") + entries[i].op] += entries[i].count;
  for (const auto &[name, n] : by_op) ops.emplace_back(name, n);
  return ops;
}

void reset_fallback_ops() {
  log().reset();
  check_ops(trn_ops_reset_fallbacks(), "reset_fallbacks");
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&cpu_fallback>());
}

}  // namespace torch_trn
