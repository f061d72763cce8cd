// Enumerates the devices through an installed libtrn and names what it found, and reads a
// safetensors header with the installed trn::safetensors.
#include <trn/trn.h>

#include <cstdio>
#include <string>
#include <trn/safetensors.hpp>
#include <vector>

int main() {
  if (trn_get_version() < TRN_API_VERSION) {
    std::fprintf(stderr, "library API %u.%u is older than the header's\n",
                 TRN_VERSION_MAJOR(trn_get_version()), TRN_VERSION_MINOR(trn_get_version()));
    return 1;
  }
  uint32_t count = 0;
  if (trn_device_get(&count, nullptr) != TRN_SUCCESS || count == 0) {
    std::fprintf(stderr, "no device: %s\n", trn_last_error());
    return 1;
  }
  std::vector<trn_device_t> devices(count);
  if (trn_device_get(&count, devices.data()) != TRN_SUCCESS) return 1;
  trn_device_properties_t p = TRN_DEVICE_PROPERTIES_INIT;
  if (trn_device_get_properties(devices[0], &p) != TRN_SUCCESS) return 1;
  std::printf("trn %s: %u device(s), device 0 is %s with %u cores; %s is %u bytes\n",
              trn_get_version_string(), count, trn_generation_name(p.generation), p.core_count,
              trn_dtype_name(TRN_DTYPE_BF16), trn_dtype_size(TRN_DTYPE_BF16));
  const std::string header = R"({"w":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}})";
  std::vector<uint8_t> file(8);
  file[0] = static_cast<uint8_t>(header.size());
  file.insert(file.end(), header.begin(), header.end());
  file.resize(file.size() + 4);
  try {
    const auto h = trn::safetensors::parse_header(file.data(), file.size(), file.size());
    std::printf("safetensors: %zu tensor, '%s' of %s\n", h.tensors.size(),
                h.tensors.at(0).name.c_str(), h.tensors.at(0).dtype_name.c_str());
  } catch (const trn::safetensors::Error &e) {
    std::fprintf(stderr, "safetensors: %s\n", e.what());
    return 1;
  }
  return 0;
}
