"""trn as a PyTorch device.

``import torch_trn`` registers trn with PyTorch as the ``privateuseone`` device (PyTorch 1.13
cannot rename it): every NeuronCore the process sees is one device, ``privateuseone:0`` the
first. Tensors moved there run their ops on the simulated device through libtrn_ops; an op
with no trn kernel runs on the CPU, recorded in :func:`fallback_ops`. The functions here are
also ``torch.privateuseone.<name>``, as ``torch.cuda`` offers them::

    import torch, torch_trn
    model = torch.nn.Linear(4, 2).to("privateuseone")
    y = model(torch.randn(8, 4).to("privateuseone"))
    torch_trn.synchronize()
"""
import copy as _copy
import os as _os
import sys as _sys
import threading as _threading
import types as _types

import torch
import torch.serialization as _serialization

torch.ops.load_library(_os.path.join(_os.path.dirname(__file__), "_native.so"))
_ops = torch.ops.torch_trn

from ._streams import Event, Stream, current_stream, default_stream, stream  # noqa: E402

__all__ = [
    "Event", "Stream", "current_device", "current_stream", "default_stream", "device",
    "device_count", "device_time_ns", "empty_cache", "fallback_ops", "get_device_name",
    "is_available", "max_memory_allocated", "max_memory_reserved", "memory_allocated",
    "memory_reserved", "memory_stats", "reset_fallback_ops", "reset_peak_memory_stats",
    "set_device", "stream", "synchronize", "trn_device_handle",
]


def _index(device=None):
    """The device index of None (current), an int, a string or a torch.device."""
    if device is None:
        return -1
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != "privateuseone":
        raise ValueError(f"not a trn device: {device} (trn devices are 'privateuseone:N')")
    return -1 if device.index is None else device.index


def is_available():
    """True when the process sees at least one NeuronCore."""
    return _ops.device_count() > 0


def device_count():
    """The NeuronCores this process sees (TRN_VISIBLE_CORES chooses them)."""
    return _ops.device_count()


def current_device():
    return _ops.current_device()


def set_device(device):
    _ops.set_device(_index(device) if device is not None else 0)


def get_device_name(device=None):
    return _ops.device_name(_index(device))


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


def reset_fallback_ops():
    _ops.reset_fallback_ops()


# The map_location of the torch.load running on this thread: torch.load asks for its restore
# function before it unpickles anything, and a trn tensor is unpickled by _rebuild_tensor below,
# not through a storage that map_location would be applied to.
_load_state = _threading.local()
_get_restore_location = _serialization._get_restore_location


def _remember_map_location(map_location):
    _load_state.map_location = map_location
    return _get_restore_location(map_location)


_serialization._get_restore_location = _remember_map_location


def _forgetting_map_location(load):
    # The map_location applies to the load that gave it, not to a pickle.loads after it.
    def run(*args, **kwargs):
        try:
            return load(*args, **kwargs)
        finally:
            _load_state.map_location = None
    return run


_serialization._load = _forgetting_map_location(_serialization._load)
_serialization._legacy_load = _forgetting_map_location(_serialization._legacy_load)


def _restore_trn_location(storage, location):
    # map_location naming a trn device reaches every storage of the checkpoint, and 1.13's
    # storages cannot live on privateuseone: they stay on the CPU; a trn tensor's copy then moves
    # in _rebuild_tensor, a CPU tensor stays where it was saved.
    return storage if location.startswith("privateuseone") else None


_serialization.register_package(30, lambda storage: None, _restore_trn_location)


def _mapped_location(cpu_tensor, device):
    """Where map_location sends a tensor saved from `device`, as torch.load maps a storage's
    location: None keeps it, a dict maps it, a string or device replaces it, a function is asked
    (None from it keeps the location; a storage from it is the CPU's)."""
    map_location = getattr(_load_state, "map_location", None)
    if map_location is None:
        return device
    if isinstance(map_location, dict):
        return str(map_location.get(device, device))
    if isinstance(map_location, (str, torch.device)):
        return str(map_location)
    return device if map_location(cpu_tensor.storage(), device) is None else "cpu"


def _rebuild_tensor(cpu_tensor, device, requires_grad):
    """Unpickles a trn tensor saved by torch.save: where torch.load's map_location sends it, else
    onto its device when this process has it, else (a checkpoint opened where there is no such trn
    device) onto the CPU."""
    target = _mapped_location(cpu_tensor, device)
    if target.startswith("privateuseone"):
        if _index(target) < _ops.device_count():
            cpu_tensor = cpu_tensor.to(target)
    elif target != "cpu":
        cpu_tensor = cpu_tensor.to(target)
    return cpu_tensor.requires_grad_(requires_grad)


_reduce_ex_internal = torch.Tensor._reduce_ex_internal


def _reduce_ex(self, proto):
    # PyTorch 1.13 pickles a tensor through its storage, and its storage Python bindings do not
    # know privateuseone: a trn tensor is saved as its CPU copy and the device it was on.
    if self.device.type == "privateuseone":
        return (_rebuild_tensor, (self.detach().cpu(), str(self.device), self.requires_grad))
    return _reduce_ex_internal(self, proto)


torch.Tensor._reduce_ex_internal = _reduce_ex

_tensor_deepcopy = torch.Tensor.__deepcopy__


def _deepcopy(self, memo):
    # PyTorch 1.13 deep-copies a tensor through its storage, whose Python bindings do not know
    # privateuseone (copy.deepcopy of a state_dict, Optimizer.load_state_dict): a trn tensor is
    # cloned on its device instead, as PyTorch does for XLA's.
    if (self.device.type != "privateuseone" or type(self) is not torch.Tensor
            or torch.overrides.has_torch_function_unary(self)):
        return _tensor_deepcopy(self, memo)
    if not self.is_leaf:
        raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) support "
                           "the deepcopy protocol at the moment")
    if id(self) in memo:
        return memo[id(self)]
    with torch.no_grad():
        new = self.clone()
        new.requires_grad_(self.requires_grad)
        if self.grad is not None:
            new.grad = _copy.deepcopy(self.grad, memo)
    new.__dict__ = _copy.deepcopy(self.__dict__, memo)
    memo[id(self)] = new
    return new


torch.Tensor.__deepcopy__ = _deepcopy

# torch.privateuseone.<name>, as torch.cuda.<name>: what torch's own code and users look up.
_module = _types.ModuleType("torch.privateuseone")
for _name in __all__:
    setattr(_module, _name, globals()[_name])
torch._register_device_module("privateuseone", _module)
_sys.modules["torch.privateuseone"] = _module
