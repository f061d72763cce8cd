"""print(tensor) for trn tensors: the values are formatted from one copy on the CPU.

PyTorch's formatter inspects the values it prints with tensor ops (masked_select, isfinite, abs,
min/max in float64, ceil, and one element at a time in Python), each a device op and a host
sync. PyTorch copies XLA, lazy, IPU and MTIA tensors to the CPU before formatting them for the
same reason; it has no hook for a PrivateUse1 device, so torch_trn wraps the function that
formats a tensor's contents (``torch._tensor_str._tensor_str``). The rest of the text (the
device, dtype, grad_fn and requires_grad suffixes) is PyTorch's own, from the trn tensor: the
output is exactly what the same values print as on the CPU, with ``device='trn:0'`` appended.
"""
import functools

import torch
import torch._tensor_str as _tensor_str_module


def install(device_name):
    """Wraps torch._tensor_str._tensor_str once (a second import of torch_trn keeps it)."""
    original = _tensor_str_module._tensor_str
    if getattr(original, "_trn_device", None) is not None:
        return

    @functools.wraps(original)
    def _tensor_str(self, indent):
        if self.device.type == device_name:
            with torch.no_grad():
                self = self.cpu()  # one device-to-host copy, which waits for the tensor's writers
        return original(self, indent)

    _tensor_str._trn_device = device_name
    _tensor_str_module._tensor_str = _tensor_str
