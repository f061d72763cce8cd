// The trn devices' random number generators, as CUDA's: counter-based Philox4x32-10, whose state
// is a seed and an offset (how many 128-bit blocks of the stream were used), so a draw is
// reproducible from (seed, offset) alone, whatever ran before it. One default generator per
// device (torch.trn.manual_seed and friends), and torch.Generator(device="trn") makes more.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <array>
#include <cstdint>

namespace torch_trn {

class TrnGenerator final : public c10::GeneratorImpl {
 public:
  explicit TrnGenerator(c10::DeviceIndex index);
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  uint64_t current_seed() const override;
  uint64_t seed() override;  // a nondeterministic seed, set and returned
  // The state: 16 bytes (uint8), the seed then the offset, little-endian (CUDA's layout).
  void set_state(const c10::TensorImpl &new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // Takes `blocks` blocks of the stream; returns the offset they start at. Callers hold mutex_.
  uint64_t take(uint64_t blocks);

 private:
  TrnGenerator *clone_impl() const override;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

// Block `counter` of the Philox4x32-10 stream keyed by `seed`: four uniformly random words.
std::array<uint32_t, 4> philox(uint64_t seed, uint64_t counter);

// The device's default generator (-1: the current device's).
const at::Generator &default_generator(int index);
// `generator` if given (it must be a trn generator), else the default of `device_index`.
TrnGenerator *generator_or_default(const std::optional<at::Generator> &generator, int device_index);

}  // namespace torch_trn
