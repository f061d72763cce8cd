// Enumerates the devices through an installed libtrn and names what it found.
#include <trn/trn.h>

#include <cstdio>
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
  return 0;
}
