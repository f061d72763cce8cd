// Random ops on trn tensors, drawn from the device's generator (generator.hpp): uniform_,
// normal_, random_, bernoulli_ and dropout (so rand, randn, randint, Dropout and
// scaled_dot_product_attention's dropout draw from torch.trn's seed, not the CPU's). The values
// are made on the host from the Philox stream at the generator's offset and copied to the tensor:
// exact and reproducible per (seed, offset), each op taking the blocks it used.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "generator.hpp"

namespace torch_trn {
namespace {

constexpr double kTwoPi = 6.283185307179586;
constexpr double kWordUnit = 1.0 / 16777216.0;  // a word's top 24 bits as a fraction of 1

// [0, 1) from a word, as the float32 uniform of CUDA's Philox (24 random bits).
double unit(uint32_t word) {
  return (word >> 8) * kWordUnit;
}

// Fills `self` with values made on the host, `per_block` (4 or 2) from each Philox block:
// `make(words, out)` writes the block's values (of type T) to out[0..per_block).
template <typename T, typename Make>
at::Tensor &fill_from_stream(at::Tensor &self, const std::optional<at::Generator> &generator,
                             at::ScalarType host_type, Make make, uint64_t per_block = 4) {
  const int64_t n = self.numel();
  if (n == 0) return self;
  TrnGenerator *gen = generator_or_default(generator, self.device().index());
  const uint64_t blocks = (static_cast<uint64_t>(n) + per_block - 1) / per_block;
  uint64_t seed = 0, start = 0;
  {
    std::lock_guard lock(gen->mutex_);
    seed = gen->current_seed();
    start = gen->take(blocks);
  }
  at::Tensor values =
      at::empty({static_cast<int64_t>(blocks * per_block)}, at::TensorOptions(host_type));
  T *out = values.data_ptr<T>();
  for (uint64_t b = 0; b < blocks; ++b) make(philox(seed, start + b), out + per_block * b);
  self.copy_(values.narrow(0, 0, n).view(self.sizes()));
  return self;
}

void check_floating(const at::Tensor &self, const char *op) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "trn: ", op, " fills floating tensors, not ",
              self.scalar_type());
}

at::Tensor &uniform(at::Tensor &self, double from, double to,
                    std::optional<at::Generator> generator) {
  check_floating(self, "uniform_");
  TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from,
              " > to=", to);
  const double range = to - from;
  return fill_from_stream<double>(self, generator, at::kDouble,
                                  [&](const std::array<uint32_t, 4> &w, double *out) {
                                    for (int i = 0; i < 4; ++i) out[i] = from + unit(w[i]) * range;
                                  });
}

at::Tensor &normal(at::Tensor &self, double mean, double std,
                   std::optional<at::Generator> generator) {
  check_floating(self, "normal_");
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  // Box-Muller on the block's two pairs of words: four normal values.
  return fill_from_stream<double>(
      self, generator, at::kDouble, [&](const std::array<uint32_t, 4> &w, double *out) {
        for (int pair = 0; pair < 2; ++pair) {
          const double u1 = ((w[2 * pair] >> 8) + 1) * kWordUnit;  // (0, 1]: log is finite
          const double u2 = unit(w[2 * pair + 1]);
          const double r = std::sqrt(-2.0 * std::log(u1));
          out[2 * pair] = mean + std * r * std::cos(kTwoPi * u2);
          out[2 * pair + 1] = mean + std * r * std::sin(kTwoPi * u2);
        }
      });
}

// The exclusive top random_() draws below when no `to` is given: every value the dtype holds
// exactly (floats: up to 2^digits, as PyTorch's CPU).
int64_t default_top(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return (int64_t{1} << std::numeric_limits<float>::digits) + 1;
    case at::kDouble: return (int64_t{1} << std::numeric_limits<double>::digits) + 1;
    case at::kHalf: return (int64_t{1} << 11) + 1;
    case at::kBFloat16: return (int64_t{1} << 8) + 1;
    case at::kBool: return 2;
    case at::kByte: return 256;
    case at::kChar: return 128;
    case at::kShort: return 32768;
    case at::kInt: return int64_t{1} << 31;
    default: return std::numeric_limits<int64_t>::max();
  }
}

at::Tensor &random_range(at::Tensor &self, int64_t from, std::optional<int64_t> to,
                         std::optional<at::Generator> generator) {
  const int64_t top = to.value_or(default_top(self.scalar_type()));
  TORCH_CHECK(from < top, "random_ expects 'from' to be less than 'to', but got from=", from,
              " >= to=", top);
  const uint64_t range = static_cast<uint64_t>(top) - static_cast<uint64_t>(from);
  // Two words a value where the range needs more than 32 bits.
  const bool wide = range > (uint64_t{1} << 32);
  return fill_from_stream<int64_t>(
      self, generator, at::kLong,
      [&](const std::array<uint32_t, 4> &w, int64_t *out) {
        for (int i = 0; i < (wide ? 2 : 4); ++i) {
          const uint64_t word = wide ? (uint64_t{w[2 * i]} << 32) | w[2 * i + 1] : w[i];
          out[i] = static_cast<int64_t>(static_cast<uint64_t>(from) + word % range);
        }
      },
      wide ? 2 : 4);
}
at::Tensor &random_from(at::Tensor &self, int64_t from, std::optional<int64_t> to,
                        std::optional<at::Generator> generator) {
  return random_range(self, from, to, std::move(generator));
}
at::Tensor &random_to(at::Tensor &self, int64_t to, std::optional<at::Generator> generator) {
  return random_range(self, 0, to, std::move(generator));
}
at::Tensor &random_all(at::Tensor &self, std::optional<at::Generator> generator) {
  return random_range(self, 0, std::nullopt, std::move(generator));
}

at::Tensor &bernoulli_scalar(at::Tensor &self, double p, std::optional<at::Generator> generator) {
  TORCH_CHECK(p >= 0.0 && p <= 1.0, "bernoulli_ expects p to be in [0, 1], but got p=", p);
  return fill_from_stream<float>(self, generator, at::kFloat,
                                 [&](const std::array<uint32_t, 4> &w, float *out) {
                                   for (int i = 0; i < 4; ++i) out[i] = unit(w[i]) < p ? 1.f : 0.f;
                                 });
}

at::Tensor &bernoulli_tensor(at::Tensor &self, const at::Tensor &p,
                             std::optional<at::Generator> generator) {
  const at::Tensor probs = p.to(at::kCPU, at::kDouble).expand(self.sizes()).contiguous();
  TORCH_CHECK(probs.ge(0).all().item<bool>() && probs.le(1).all().item<bool>(),
              "bernoulli_ expects all elements of p to be in [0, 1]");
  const double *pr = probs.data_ptr<double>();
  const int64_t n = self.numel();
  int64_t at_element = 0;
  return fill_from_stream<float>(self, generator, at::kFloat,
                                 [&](const std::array<uint32_t, 4> &w, float *out) {
                                   for (int i = 0; i < 4; ++i, ++at_element)
                                     out[i] = at_element < n && unit(w[i]) < pr[at_element];
                                 });
}

// Dropout: a kept element is scaled by 1 / (1 - p); the mask (bool) is what backward multiplies.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor &input, double p,
                                                  std::optional<bool> train) {
  TORCH_CHECK(p >= 0.0 && p <= 1.0, "dropout probability has to be between 0 and 1, but got ", p);
  if (train.has_value() && !*train)
    return {input.clone(), at::ones(input.sizes(), input.options().dtype(at::kBool))};
  at::Tensor mask = at::empty(input.sizes(), input.options().dtype(at::kBool));
  bernoulli_scalar(mask, 1.0 - p, std::nullopt);
  const double scale = p < 1.0 ? 1.0 / (1.0 - p) : 0.0;
  return {input * mask.to(input.scalar_type()) * scale, mask};
}

at::Tensor native_dropout_backward(const at::Tensor &grad, const at::Tensor &mask, double scale) {
  return grad * mask.to(grad.scalar_type()) * scale;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", TORCH_FN(uniform));
  m.impl("normal_", TORCH_FN(normal));
  m.impl("random_.from", TORCH_FN(random_from));
  m.impl("random_.to", TORCH_FN(random_to));
  m.impl("random_", TORCH_FN(random_all));
  m.impl("bernoulli_.float", TORCH_FN(bernoulli_scalar));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulli_tensor));
  m.impl("native_dropout", TORCH_FN(native_dropout));
  m.impl("native_dropout_backward", TORCH_FN(native_dropout_backward));
}

}  // namespace torch_trn
