#include "fallback.hpp"

#include <ATen/native/CPUFallback.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
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

// PyTorch 1.13's CPU has no float16 kernel for many ops CUDA runs in float16 (sin, floor,
// cumsum, topk, prod...). Such an op runs again in float32: its float16 tensors widened on the
// device, its float32 results narrowed back, and the arguments it writes (in place, out=) copied
// into the float16 tensors they came from.
bool float16_refused(const c10::Error &e) {
  return std::string(e.what_without_backtrace()).find("not implemented for 'Half'") !=
         std::string::npos;
}

// Replaces each defined tensor among the op's results (the top of the stack) by what `f` makes
// of it.
template <typename F>
void map_results(const c10::OperatorHandle &op, torch::jit::Stack *stack, F &&f) {
  const size_t results = op.schema().returns().size();
  for (size_t i = stack->size() - results; i < stack->size(); ++i) {
    c10::IValue &v = (*stack)[i];
    if (v.isTensor() && v.toTensor().defined()) v = c10::IValue(f(v.toTensor()));
  }
}

void run_widened(const c10::OperatorHandle &op, torch::jit::Stack *stack,
                 std::vector<c10::IValue> arguments) {
  const auto &schema = op.schema();
  std::vector<std::pair<at::Tensor, at::Tensor>> written;  // (float16 tensor, its widened copy)
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (!arguments[i].isTensor()) continue;
    const at::Tensor t = arguments[i].toTensor();
    if (!t.defined() || t.scalar_type() != at::kHalf) continue;
    const at::Tensor wide = t.to(at::kFloat);
    const auto *alias = schema.arguments()[i].alias_info();
    if (alias && alias->isWrite()) written.emplace_back(t, wide);
    arguments[i] = wide;
  }
  for (c10::IValue &a : arguments) stack->push_back(std::move(a));
  at::native::cpu_fallback(op, stack);
  for (auto &[half, wide] : written) half.copy_(wide);
  map_results(op, stack, [&](const at::Tensor &r) {
    if (r.scalar_type() != at::kFloat) return r;
    const auto same = std::find_if(written.begin(), written.end(),
                                   [&](const auto &w) { return w.second.is_same(r); });
    return same != written.end() ? same->first : r.to(at::kHalf);
  });
}

void cpu_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
  const std::string name = name_of(op);
  // The generic fallback copies tensor-list outputs to the CPU and never back: a _foreach_ op
  // through it would silently leave the trn tensors unchanged.
  TORCH_CHECK(name.rfind("aten::_foreach_", 0) != 0, name,
              " has no trn kernel and cannot fall back to the CPU (its in-place tensor lists "
              "would not be written back): use the optimizer with foreach=False");
  record_cpu_run(name);
  // Kept for a float16 retry (the first run consumes the stack's).
  const size_t base = stack->size() - op.schema().arguments().size();
  std::vector<c10::IValue> arguments(stack->begin() + static_cast<std::ptrdiff_t>(base),
                                     stack->end());
  // A factory with a device argument (tril_indices(..., device=trn)) runs on the CPU as any op:
  // its results must still land on the device asked for.
  c10::Device asked(c10::DeviceType::CPU);
  for (const c10::IValue &v : arguments)
    if (v.isDevice() && v.toDevice().type() == c10::DeviceType::PrivateUse1) asked = v.toDevice();
  const bool has_float16 = std::any_of(arguments.begin(), arguments.end(), [](const auto &v) {
    return v.isTensor() && v.toTensor().defined() && v.toTensor().scalar_type() == at::kHalf;
  });
  try {
    at::native::cpu_fallback(op, stack);
  } catch (const c10::Error &e) {
    if (!has_float16 || !float16_refused(e) || stack->size() < base) throw;
    stack->erase(stack->begin() + static_cast<std::ptrdiff_t>(base), stack->end());
    run_widened(op, stack, std::move(arguments));
  }
  if (!asked.is_cpu())
    map_results(op, stack, [&](const at::Tensor &r) { return r.is_cpu() ? r.to(asked) : r; });
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
