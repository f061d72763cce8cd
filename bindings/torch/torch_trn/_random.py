"""The devices' random number generators, as torch.cuda's functions offer them. Each trn device
has a default generator (Philox4x32-10, counter-based: its state is a seed and an offset) that
rand, randn, randint, normal_, uniform_, bernoulli_ and dropout draw from on trn tensors.
torch.manual_seed(s) seeds them too (through manual_seed_all)."""
import os as _os

import torch

_ops = torch.ops.torch_trn
_MASK = (1 << 64) - 1
_pid = _os.getpid()


def _index(device):
    from . import _index as index
    return index(device)


def _signed(seed):
    seed = int(seed) & _MASK
    return seed - (1 << 64) if seed >= 1 << 63 else seed


def _is_in_bad_fork():
    """True in a child forked after torch_trn was imported: the device is the parent's."""
    return _os.getpid() != _pid


def manual_seed(seed, device=None):
    """Seeds the device's generator (the current device's by default); its offset goes to 0."""
    _ops.rng_manual_seed(_index(device), _signed(seed))


def manual_seed_all(seed):
    """Seeds every trn device's generator."""
    for i in range(_ops.device_count()):
        _ops.rng_manual_seed(i, _signed(seed))


def seed(device=None):
    """Seeds the device's generator with a nondeterministic number, returned."""
    return _ops.rng_seed(_index(device)) & _MASK


def seed_all():
    for i in range(_ops.device_count()):
        _ops.rng_seed(i)


def initial_seed(device=None):
    """The seed the device's generator was last seeded with."""
    return _ops.rng_initial_seed(_index(device)) & _MASK


def get_rng_state(device=None):
    """The device's generator state: a CPU uint8 tensor of 16 bytes (seed, offset)."""
    return _ops.rng_get_state(_index(device))


def set_rng_state(new_state, device=None):
    _ops.rng_set_state(_index(device), new_state)


def get_rng_state_all():
    return [_ops.rng_get_state(i) for i in range(_ops.device_count())]


def set_rng_state_all(new_states):
    for i, state in enumerate(new_states):
        _ops.rng_set_state(i, state)
