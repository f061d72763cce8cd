"""trn as a PyTorch device.

``import torch_trn`` registers trn with PyTorch as the device ``trn`` (PyTorch's PrivateUse1
backend, renamed): every NeuronCore the process sees is one device, ``trn:0`` the first.
Tensors moved there run their ops on the simulated device through libtrn_ops; an op with no
trn kernel runs on the CPU, recorded in :func:`fallback_ops`. The functions here are also
``torch.trn.<name>``, as ``torch.cuda`` offers them::

    import torch, torch_trn
    model = torch.nn.Linear(4, 2).to("trn")
    y = model(torch.randn(8, 4).to("trn"))
    torch.trn.synchronize()
"""
import os as _os
import sys as _sys
import types as _types

import torch

# The device's name: "trn", or what TRN_TORCH_DEVICE_NAME says (the neuron-compat folder sets it
# to "neuron" for TorchNeuron scripts). The name first: the registrations then use it.
DEVICE_NAME = _os.environ.get("TRN_TORCH_DEVICE_NAME", "trn")
if not DEVICE_NAME.isidentifier() or DEVICE_NAME in ("cpu", "cuda", "meta"):
    raise ImportError(f"torch_trn: TRN_TORCH_DEVICE_NAME={DEVICE_NAME!r} is not a device name "
                      "torch_trn can take (a lowercase identifier that is not a built-in device; "
                      "unset it for 'trn')")
if torch._C._get_privateuse1_backend_name() not in ("privateuseone", DEVICE_NAME):
    raise ImportError(f"torch_trn: PyTorch's PrivateUse1 device is already named "
                      f"{torch._C._get_privateuse1_backend_name()!r} by another backend in this "
                      "process; torch_trn cannot register beside it")
torch.utils.rename_privateuse1_backend(DEVICE_NAME)
torch.ops.load_library(_os.path.join(_os.path.dirname(__file__), "_native.so"))
_ops = torch.ops.torch_trn

from ._streams import Event, Stream, current_stream, default_stream, stream  # noqa: E402
from ._kernels import Kernel, KernelArg, kernel  # noqa: E402
from . import _printing  # noqa: E402
from ._random import (  # noqa: E402
    _is_in_bad_fork, get_rng_state, get_rng_state_all, initial_seed, manual_seed,
    manual_seed_all, seed, seed_all, set_rng_state, set_rng_state_all)

__all__ = [
    "DeviceProperties", "Event", "Kernel", "KernelArg", "Stream", "current_device", "current_stream", "default_stream",
    "device", "device_count", "device_time_ns", "empty_cache", "fallback_ops",
    "get_amp_supported_dtype", "get_device_name", "get_device_properties", "get_fallback_ops",
    "get_rng_state", "get_rng_state_all", "initial_seed", "is_available", "is_initialized", "kernel",
    "manual_seed", "mem_get_info",
    "manual_seed_all", "max_memory_allocated", "max_memory_reserved", "memory_allocated",
    "memory_reserved", "memory_stats", "memory_summary", "reset_device", "reset_fallback_ops",
    "reset_peak_memory_stats", "seed", "seed_all", "set_device", "set_rng_state",
    "set_rng_state_all", "stream", "synchronize", "trn_device_handle", "_is_in_bad_fork",
]


def _index(device=None):
    """The device index of None (current), an int, a string or a torch.device."""
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != DEVICE_NAME:
        raise ValueError(f"not a trn device: {device} (trn devices are '{DEVICE_NAME}:N')")
    return -1 if device.index is None else device.index


def is_available():
    """True when the process sees at least one NeuronCore."""
    return _ops.device_count() > 0


def is_initialized():
    """True: the runtime starts when torch_trn is imported (torch.cuda's lazy initialisation has
    no counterpart here)."""
    return True


def device_count():
    """The NeuronCores this process sees (TRN_VISIBLE_CORES chooses them)."""
    return _ops.device_count()


def current_device():
    return _ops.current_device()


def set_device(device):
    _ops.set_device(_index(device) if device is not None else 0)


def get_device_name(device=None):
    return _ops.device_name(_index(device))


class DeviceProperties:
    """What get_device_properties returns, with torch.cuda's names where they apply."""

    def __init__(self, fields):
        (self.type, self.chip, self.total_memory, self.dma_engines, self.peak_bf16_flops,
         self.peak_fp32_flops, self.trn_device, self.core, self.global_core_id) = fields
        self.name = f"{self.type} NeuronCore {self.core} of trn device {self.trn_device}"

    def __repr__(self):
        return (f"DeviceProperties(name='{self.name}', chip='{self.chip}', "
                f"total_memory={self.total_memory // (1 << 20)}MB, "
                f"dma_engines={self.dma_engines}, peak_bf16_flops={self.peak_bf16_flops:.3g})")


def get_device_properties(device=None):
    """The device's core: its generation (``type``, "trn2"), ``total_memory`` (bytes of the HBM
    bank its tensors live in), DMA engines and peak flop/s, and where it is."""
    return DeviceProperties(_ops.device_properties(_index(device)))


def get_amp_supported_dtype():
    """The dtypes torch.autocast("trn", dtype=...) takes."""
    return [torch.bfloat16, torch.float16]


class device:
    """Context manager that makes a device current, as torch.cuda.device does."""

    def __init__(self, device):
        self.index = _index(device)
        self.previous = None

    def __enter__(self):
        self.previous = _ops.current_device()
        if self.index >= 0:
            _ops.set_device(self.index)

    def __exit__(self, *exc):
        _ops.set_device(self.previous)
        return False


def synchronize(device=None):
    """Waits for every queued op of the device (the current one by default)."""
    _ops.synchronize(_index(device))


def reset_device(device=None):
    """Makes a device usable again after a device fault (the current one by default).

    A fault (a kernel that faulted, a copy of freed memory) raises at the next call that waits,
    and from then on every use of the device raises, as a CUDA device does after an asynchronous
    error: what was written on it from the fault on is undefined. This drains and resets the
    device's streams; reload what the device held (parameters, optimizer state) before going on.
    """
    _ops.reset_device(_index(device))


def memory_stats(device=None):
    allocated, peak, reserved, peak_reserved = _ops.memory_stats(_index(device))
    return {
        "allocated_bytes.all.current": allocated,
        "allocated_bytes.all.peak": peak,
        "reserved_bytes.all.current": reserved,
        "reserved_bytes.all.peak": peak_reserved,
    }


def memory_allocated(device=None):
    """Bytes held by live tensors of the device."""
    return _ops.memory_stats(_index(device))[0]


def max_memory_allocated(device=None):
    return _ops.memory_stats(_index(device))[1]


def mem_get_info(device=None):
    """(free, total) bytes of the device's HBM bank, as torch.cuda.mem_get_info: what every
    process using the bank has reserved is taken (trn-ls shows who)."""
    return tuple(_ops.mem_get_info(_index(device)))


def memory_reserved(device=None):
    """Bytes the device's pool holds from the device: allocated plus cached."""
    return _ops.memory_stats(_index(device))[2]


def max_memory_reserved(device=None):
    return _ops.memory_stats(_index(device))[3]


def reset_peak_memory_stats(device=None):
    _ops.reset_peak_memory_stats(_index(device))


def empty_cache(device=None):
    """Returns the pool's cached free memory to the device (after its queued work)."""
    _ops.empty_cache(_index(device))


def trn_device_handle(device=None):
    """The device's trn_device_t as an integer (for trn_mem_lookup and other C API calls)."""
    return _ops.device_handle(_index(device))


def device_time_ns(device=None):
    """The simulated clock of the trn device the torch device (a core) is on: how far in
    simulated time its queues have run. The cores of one trn device share it."""
    return _ops.device_time_ns(_index(device))


def fallback_ops():
    """Ops that ran on the CPU instead of the device, with how many times: ``aten::<op>`` for
    ops with no trn kernel (PyTorch's CPU kernel ran), ``trn_ops::<op>`` for those libtrn_ops
    ran on its host reference (a dtype or case its device kernels do not take)."""
    names, counts = _ops.fallback_ops()
    return dict(zip(names, counts))


def get_fallback_ops():
    """TorchNeuron's name for :func:`fallback_ops`."""
    return fallback_ops()


def reset_fallback_ops():
    _ops.reset_fallback_ops()


def memory_summary(device=None, abbreviated=False):
    """A table of the device's memory statistics, as torch.cuda.memory_summary prints."""
    stats = memory_stats(device)

    def size(n):
        for unit in ("B", "KiB", "MiB", "GiB"):
            if abs(n) < 1024 or unit == "GiB":
                return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
            n /= 1024

    index = _ops.current_device() if _index(device) < 0 else _index(device)
    rows = [("Allocated memory", "allocated_bytes"), ("Reserved memory", "reserved_bytes")]
    lines = [f"{DEVICE_NAME}:{index} memory summary ({get_device_name(index)})",
             f"{'':22}{'current':>14}{'peak':>14}"]
    for label, key in rows:
        lines.append(f"{label:22}{size(stats[key + '.all.current']):>14}"
                     f"{size(stats[key + '.all.peak']):>14}")
    return "\n".join(lines) + "\n"


# torch.trn.<name>, as torch.cuda.<name>: what torch's own code and users look up.
_module = _types.ModuleType(f"torch.{DEVICE_NAME}")
for _name in __all__:
    setattr(_module, _name, globals()[_name])
torch._register_device_module(DEVICE_NAME, _module)
_sys.modules[f"torch.{DEVICE_NAME}"] = _module
# Tensor.trn(), Tensor.is_trn, Module.trn(), and storages' counterparts, as for CUDA.
torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True,
                                                     for_packed_sequence=True, for_storage=True)
# print(tensor) formats a CPU copy, as PyTorch does for XLA: no device op per element.
_printing.install(DEVICE_NAME)
