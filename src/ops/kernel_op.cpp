#include "ops/kernel_op.hpp"

#include "ops/device.hpp"

namespace trn::ops {

void launch_kernels(trn_queue_t queue, const trn_sync_t *sync, uint32_t device_index,
                    const std::vector<KernelLaunch> &launches) {
  Commands commands(queue, sync);
  add_kernels(commands, device_index, launches);
  commands.submit();
}

void add_kernels(Commands &commands, uint32_t device_index,
                 const std::vector<KernelLaunch> &launches) {
  const Device dev = device(device_index);
  for (const KernelLaunch &l : launches)
    commands.launch(get_kernel(dev, l.signature, l.build), l.args);
}

}  // namespace trn::ops
