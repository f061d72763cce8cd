"""PyTorch's module database (torch.testing._internal.common_modules.module_db) run on trn through
common_device_type's PrivateUse1TestBase: each torch.nn module, made on the CPU from every
constructor input (up to MAX_INPUTS), moved to trn with .to(), run forward and backward there and
on the CPU, its outputs and its parameters' and inputs' gradients compared.

TRN_MODULE_DB picks the modules: "ci" (the default: a fixed set) or "all". TRN_OPINFO_REPORT names
a file that gets one JSON line per module (as test_opinfo.py's)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trn_test_env  # noqa: E402,F401  (first: sets TRN_SIM_ROOT before torch_trn starts libtrn)

import copy
import warnings

import torch
# Before common_device_type, which names its PrivateUse1 test base after the device when imported.
import torch_trn  # noqa: F401
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_modules import module_db, modules
from torch.testing._internal.common_utils import TestCase, run_tests
from torch.utils._pytree import tree_flatten, tree_map

from sweep_support import BACKWARD, CI_MODULES, FORWARD, MAX_INPUTS, host, run_recorded

def selected():
    if os.environ.get("TRN_MODULE_DB", "ci") == "all":
        return list(module_db)
    return [m for m in module_db if m.name in CI_MODULES]


def on(tree, device):
    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        moved = t.detach().to(device)
        return moved.requires_grad_(t.requires_grad) if t.is_floating_point() else moved
    return tree_map(move, tree)


def forward_and_grads(module, args, kwargs):
    out = module(*args, **kwargs)
    outs = [t for t in tree_flatten(out)[0]
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]
    wrt = [p for p in module.parameters() if p.requires_grad]
    wrt += [t for t in tree_flatten((args, kwargs))[0]
            if isinstance(t, torch.Tensor) and t.requires_grad]
    grads = None
    if outs and wrt:
        grads = torch.autograd.grad(sum(o.sum() for o in outs), wrt, allow_unused=True)
    return out, grads


def depends_on_seed(module_input, make):
    """Whether the module's CPU output differs between two seeds (dropout inside it)."""
    results = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        m = make()
        torch.manual_seed(seed + 10)
        results.append(host(m(*module_input.forward_input.args,
                              **module_input.forward_input.kwargs)))
    try:
        torch.testing.assert_close(results[0], results[1], equal_nan=True)
        return False
    except AssertionError:
        return True


class TestTrnModuleDb(TestCase):
    @modules(selected(), allowed_dtypes=(torch.float32,))
    def test_module_matches_cpu(self, device, dtype, module_info, training):
        record = {"op": module_info.name, "variant": "train" if training else "eval",
                  "compared": 0, "random": 0, "status": "pass"}

        def compare():
            inputs = module_info.module_inputs_func(module_info, device="cpu", dtype=dtype,
                                                    requires_grad=True, training=training)
            for i, module_input in enumerate(inputs[:MAX_INPUTS]):
                if module_input.forward_input is None:
                    continue
                c = module_input.constructor_input

                def make():
                    m = module_info.module_cls(*c.args, **c.kwargs).to(dtype)
                    return m.train(training)
                try:
                    if depends_on_seed(module_input, make):
                        record["random"] += 1
                        continue
                except Exception:
                    continue  # the CPU refuses this input
                torch.manual_seed(0)
                cpu_module = make()
                trn_module = copy.deepcopy(cpu_module).to(device)
                f = module_input.forward_input
                cpu_args, cpu_kwargs = on((f.args, f.kwargs), "cpu")
                trn_args, trn_kwargs = on((f.args, f.kwargs), device)
                expected, expected_grads = forward_and_grads(cpu_module, cpu_args, cpu_kwargs)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got, got_grads = forward_and_grads(trn_module, trn_args, trn_kwargs)
                torch.testing.assert_close(host(got), host(expected), equal_nan=True,
                                           check_device=False, check_stride=False,
                                           msg=lambda m: f"input {i} forward: {m}", **FORWARD)
                if expected_grads is not None:
                    torch.testing.assert_close(host(got_grads), host(expected_grads),
                                               equal_nan=True, check_device=False,
                                               check_stride=False,
                                               msg=lambda m: f"input {i} backward: {m}",
                                               **BACKWARD)
                # Buffers (BatchNorm's running statistics) as the CPU updated them.
                torch.testing.assert_close(host(dict(trn_module.named_buffers())),
                                           host(dict(cpu_module.named_buffers())),
                                           check_device=False, equal_nan=True, **FORWARD)
                record["compared"] += 1

        run_recorded(record, compare)


instantiate_device_type_tests(TestTrnModuleDb, globals(), only_for="trn")
if "TestTrnModuleDbPRIVATEUSE1" not in globals():  # no trn tests made: fail, never pass with none run
    raise RuntimeError("common_device_type made no trn tests: is torch_trn imported first?")

if __name__ == "__main__":
    run_tests()
