#include "generator.hpp"

#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <deque>
#include <mutex>

#include "devices.hpp"

namespace torch_trn {

namespace {

constexpr uint32_t kMulA = 0xD2511F53, kMulB = 0xCD9E8D57;  // Philox4x32's multipliers
constexpr uint32_t kKeyA = 0x9E3779B9, kKeyB = 0xBB67AE85;  // and its key increments
constexpr uint64_t kStateBytes = 16;

uint32_t mul_hi_lo(uint32_t a, uint32_t b, uint32_t *low) {
  const uint64_t product = static_cast<uint64_t>(a) * b;
  *low = static_cast<uint32_t>(product);
  return static_cast<uint32_t>(product >> 32);
}

}  // namespace

std::array<uint32_t, 4> philox(uint64_t seed, uint64_t counter) {
  std::array<uint32_t, 4> c{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0,
                            0};
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    uint32_t lo0 = 0, lo1 = 0;
    const uint32_t hi0 = mul_hi_lo(kMulA, c[0], &lo0), hi1 = mul_hi_lo(kMulB, c[2], &lo1);
    c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
    k0 += kKeyA;
    k1 += kKeyB;
  }
  return c;
}

TrnGenerator::TrnGenerator(c10::DeviceIndex index)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(c10::default_rng_seed_val) {}

void TrnGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}
void TrnGenerator::set_offset(uint64_t offset) {
  offset_ = offset;
}
uint64_t TrnGenerator::get_offset() const {
  return offset_;
}
uint64_t TrnGenerator::current_seed() const {
  return seed_;
}
uint64_t TrnGenerator::seed() {
  set_current_seed(c10::detail::getNonDeterministicRandom(true));
  return seed_;
}

void TrnGenerator::set_state(const c10::TensorImpl &state) {
  TORCH_CHECK(state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && state.numel() == kStateBytes &&
                  state.is_contiguous() && state.device().is_cpu(),
              "trn: a generator state is a contiguous CPU uint8 tensor of ", kStateBytes,
              " bytes (the seed and the offset, as get_rng_state returns it), not one of ",
              state.numel(), " ", state.dtype().name());
  const auto *bytes = static_cast<const uint8_t *>(state.data());
  std::memcpy(&seed_, bytes, 8);
  std::memcpy(&offset_, bytes + 8, 8);
}

c10::intrusive_ptr<c10::TensorImpl> TrnGenerator::get_state() const {
  at::Tensor state = at::empty({static_cast<int64_t>(kStateBytes)}, at::kByte);
  auto *bytes = state.data_ptr<uint8_t>();
  std::memcpy(bytes, &seed_, 8);
  std::memcpy(bytes + 8, &offset_, 8);
  return state.getIntrusivePtr();
}

uint64_t TrnGenerator::take(uint64_t blocks) {
  const uint64_t start = offset_;
  offset_ += blocks;
  return start;
}

TrnGenerator *TrnGenerator::clone_impl() const {
  auto *copy = new TrnGenerator(device().index());
  copy->seed_ = seed_;
  copy->offset_ = offset_;
  return copy;
}

const at::Generator &default_generator(int index) {
  static std::mutex mutex;
  static std::deque<at::Generator> generators;  // by device index; stable addresses
  if (index < 0) index = current_device();
  TORCH_CHECK(index < device_count(), "trn: no device ", index, " (the process sees ",
              device_count(), ")");
  std::lock_guard lock(mutex);
  while (generators.size() <= static_cast<size_t>(index))
    generators.push_back(
        at::make_generator<TrnGenerator>(static_cast<c10::DeviceIndex>(generators.size())));
  return generators[static_cast<size_t>(index)];
}

TrnGenerator *generator_or_default(const std::optional<at::Generator> &generator,
                                   int device_index) {
  if (generator.has_value() && generator->defined()) {
    TORCH_CHECK(generator->device().type() == c10::DeviceType::PrivateUse1,
                "trn: a random op on a trn tensor takes a trn generator "
                "(torch.Generator(device=\"trn\")), not a ",
                generator->device().str(), " one");
    return at::check_generator<TrnGenerator>(*generator);
  }
  return at::check_generator<TrnGenerator>(default_generator(device_index));
}

}  // namespace torch_trn
