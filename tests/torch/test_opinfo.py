"""PyTorch's own OpInfo database (torch.testing._internal.common_methods_invocations.op_db, which
ships in the wheel) run on trn through common_device_type's PrivateUse1TestBase: every sample
input of an op, forward and backward, on trn and on the CPU, compared. An op that gives another
result fails; one that ran (in part) on the CPU fallback passes but is listed with its fallbacks.

TRN_OPINFO_OPS picks the ops: "ci" (the default: a fixed set, a few minutes), "all", or names
separated by commas. TRN_OPINFO_REPORT names a file that gets one JSON line per op (status,
samples compared, fallbacks, the first mismatch or error), from which opinfo_table.py makes the
table in docs/torch-ops.md."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trn_test_env  # noqa: E402,F401  (first: sets TRN_SIM_ROOT before torch_trn starts libtrn)

import warnings

import torch
# Before common_device_type, which names its PrivateUse1 test base after the device when imported.
import torch_trn  # noqa: F401
from torch.testing._internal.common_device_type import instantiate_device_type_tests, ops
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase, run_tests
from torch.utils._pytree import tree_flatten, tree_map

from sweep_support import BACKWARD, CI_OPS, FORWARD, MAX_SAMPLES, host, report, run_recorded

def skipped_by_pytorch(op):
    """Whether PyTorch's own OpInfo entry turns off its CPU comparison (TestCommon's
    test_compare_cpu) for every device, or expects it to fail on CUDA: ops whose results are not
    the CPU's by design (random draws from a device's own generator, uninitialized memory,
    storage-layout-dependent views)."""
    def turns_off(d):
        if (getattr(d, "cls_name", None), getattr(d, "test_name", None)) != (
                "TestCommon", "test_compare_cpu"):
            return False
        if d.device_type is None:
            return True
        return d.device_type == "cuda" and any(
            getattr(x, "__name__", "") == "expectedFailure" for x in d.decorators)
    return any(turns_off(d) for d in op.decorators)


def selected():
    which = os.environ.get("TRN_OPINFO_OPS", "ci")
    if which == "all":
        return list(op_db)
    names = CI_OPS if which == "ci" else set(which.split(","))
    return [op for op in op_db if op.name in names]


def to_cpu(tree):
    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        c = t.detach().to("cpu")
        return c.requires_grad_(t.requires_grad) if t.is_floating_point() else c
    return tree_map(move, tree)


def float_outputs(out):
    return [t for t in tree_flatten(out)[0]
            if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]


def grad_inputs(sample):
    return [t for t in tree_flatten((sample.input, sample.args, sample.kwargs))[0]
            if isinstance(t, torch.Tensor) and t.requires_grad]


def run(op, sample):
    return op(sample.input, *sample.args, **sample.kwargs)


def gradients(out, inputs):
    outs = float_outputs(out)
    if not outs or not inputs:
        return None
    total = sum(o.sum() for o in outs)
    return torch.autograd.grad(total, inputs, allow_unused=True)


class TestTrnOpInfo(TestCase):
    @ops(selected(), allowed_dtypes=(torch.float32,))
    def test_matches_cpu(self, device, dtype, op):
        record = {"op": op.name, "variant": op.variant_test_name, "compared": 0,
                  "random": 0, "status": "pass"}
        if skipped_by_pytorch(op):
            record["status"] = "not compared"
            report(record)
            self.skipTest("PyTorch's OpInfo does not compare this op with the CPU")

        def compare():
            samples = op.sample_inputs(device, dtype, requires_grad=op.supports_autograd)
            for i, sample in enumerate(samples):
                if i == MAX_SAMPLES:
                    break
                cpu_sample = sample.transform(to_cpu)
                try:
                    torch.manual_seed(0)
                    expected = run(op, cpu_sample)
                    torch.manual_seed(1)  # another seed: does the result depend on it?
                    again = run(op, cpu_sample)
                except Exception:
                    continue  # the CPU refuses this sample: nothing to compare with
                try:
                    torch.testing.assert_close(host(again), host(expected), equal_nan=True)
                except AssertionError:
                    # The result depends on the generator, and trn's is not the CPU's.
                    record["random"] += 1
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    got = run(op, sample)
                torch.testing.assert_close(host(got), host(expected), equal_nan=True,
                                           check_device=False, check_stride=False,
                                           msg=lambda m: f"sample {i} forward: {m}", **FORWARD)
                expected_grads = gradients(expected, grad_inputs(cpu_sample))
                if expected_grads is not None:
                    got_grads = gradients(got, grad_inputs(sample))
                    torch.testing.assert_close(
                        host(got_grads), host(expected_grads), equal_nan=True,
                        check_device=False, check_stride=False,
                        msg=lambda m: f"sample {i} backward: {m}", **BACKWARD)
                record["compared"] += 1

        run_recorded(record, compare)


instantiate_device_type_tests(TestTrnOpInfo, globals(), only_for="trn")
if "TestTrnOpInfoPRIVATEUSE1" not in globals():  # no trn tests made: fail, never pass with none run
    raise RuntimeError("common_device_type made no trn tests: is torch_trn imported first?")

if __name__ == "__main__":
    run_tests()
