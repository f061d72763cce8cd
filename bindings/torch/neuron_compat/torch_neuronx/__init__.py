"""TorchNeuron compatibility for trn: lets a script written for AWS's TorchNeuron run unchanged on
trn's simulated (or any trn) device.

This is a compatibility aid of the trn project, not AWS's torch_neuronx package: it offers only
what TorchNeuron scripts commonly use, on top of torch_trn. Put its folder (neuron-compat, beside
the torch_trn package in the build's python folder or the install prefix) first on PYTHONPATH and
``import torch_neuronx`` makes the trn device answer to the name ``neuron``::

    import torch, torch_neuronx
    model = model.to("neuron")
    x = torch.randn(8, 4, device="neuron")
    print(torch_neuronx.get_fallback_ops())

Import it before anything imports torch_trn: PyTorch names its PrivateUse1 device once per
process, so a process that already has ``trn`` cannot also have ``neuron``.
"""
import os as _os
import sys as _sys

if "torch_trn" in _sys.modules and _sys.modules["torch_trn"].DEVICE_NAME != "neuron":
    raise ImportError("torch_neuronx (trn's TorchNeuron compatibility) must be imported before "
                      "torch_trn: the device is already named "
                      f"{_sys.modules['torch_trn'].DEVICE_NAME!r} in this process")
_os.environ["TRN_TORCH_DEVICE_NAME"] = "neuron"

import torch_trn as _trn  # noqa: E402

from torch_trn import (  # noqa: E402,F401
    current_device, device_count, empty_cache, fallback_ops, get_fallback_ops, is_available,
    manual_seed, manual_seed_all, memory_allocated, memory_reserved, memory_stats,
    reset_fallback_ops, set_device, synchronize)

DEVICE_NAME = _trn.DEVICE_NAME
