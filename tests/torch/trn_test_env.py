"""Gives this test process a private simulated device. Import it before torch_trn: libtrn reads
TRN_SIM_ROOT and TRN_CACHE_DIR when it starts, and tests that share a device (or the user's
default one) would see each other's allocations and state."""
import atexit
import os
import shutil
import sys
import tempfile

# /dev/shm: the device's HBM file is large and written often; a tmpfs keeps that fast.
_sim_root = tempfile.mkdtemp(prefix="trn-torch-", dir="/dev/shm")  # mode 0700, as libtrn asks
_cache_dir = tempfile.mkdtemp(prefix="trn-torch-cache-")
os.environ["TRN_SIM_ROOT"] = _sim_root
os.environ["TRN_CACHE_DIR"] = _cache_dir

if "torch_trn" in sys.modules:
    raise RuntimeError("trn_test_env must be imported before torch_trn (it sets TRN_SIM_ROOT)")


@atexit.register
def _cleanup():
    shutil.rmtree(_sim_root, ignore_errors=True)
    shutil.rmtree(_cache_dir, ignore_errors=True)


DEVICE = "trn"


def fallback_keys_for(ops, fallbacks):
    """The keys of `fallbacks` (torch_trn.fallback_ops()) that are one of the aten ops `ops`,
    whatever their overload: 'add' matches 'aten::add.out' and 'aten::add.Tensor', not
    'aten::addmm'."""
    hits = []
    for key in fallbacks:
        if not key.startswith("aten::"):
            continue
        name = key[len("aten::"):].split(".", 1)[0]
        if name in ops:
            hits.append(key)
    return sorted(hits)
