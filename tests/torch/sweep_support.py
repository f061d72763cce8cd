"""What the OpInfo and module-database sweeps (test_opinfo.py, test_module_db.py) share: their
settings (which ops and modules CI runs, how many samples), the tolerances, results brought to
the host, and running one op's (or module's) comparisons with its outcome classified, its
fallbacks listed and a JSON line written to TRN_OPINFO_REPORT."""
import json
import os

import torch
import torch_trn
from torch.utils._pytree import tree_map

FORWARD = dict(rtol=1e-4, atol=1e-5)
BACKWARD = dict(rtol=1e-3, atol=1e-4)

MAX_SAMPLES = 8

# The fixed set CI runs: elementwise, reductions, linear algebra, shape ops, nn functionals.
CI_OPS = {
    "abs", "add", "addcdiv", "addcmul", "addmm", "amax", "amin", "bmm", "cat", "clamp", "div",
    "exp", "expand", "flatten", "gather", "log", "log_softmax", "lerp", "masked_fill", "matmul",
    "maximum", "mean", "minimum", "mm", "mul", "neg", "nn.functional.gelu",
    "nn.functional.layer_norm", "nn.functional.linear", "nn.functional.mse_loss",
    "nn.functional.relu", "nn.functional.silu", "permute", "pow", "reciprocal", "rsqrt",
    "sigmoid", "softmax", "sqrt", "squeeze", "stack", "sub", "sum", "tanh", "transpose",
    "unsqueeze", "view", "where",
}

MAX_INPUTS = 6
CI_MODULES = {
    "nn.Linear", "nn.Conv2d", "nn.LayerNorm", "nn.BatchNorm2d", "nn.Embedding", "nn.LSTM",
    "nn.GRU", "nn.MultiheadAttention", "nn.ReLU", "nn.GELU", "nn.Softmax", "nn.MaxPool2d",
    "nn.AvgPool2d", "nn.CrossEntropyLoss", "nn.MSELoss", "nn.TransformerEncoderLayer",
}


def host(tree):
    return tree_map(lambda t: t.detach().cpu() if isinstance(t, torch.Tensor) else t, tree)


def report(record):
    path = os.environ.get("TRN_OPINFO_REPORT")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(record) + "\n")


def run_recorded(record, compare):
    """Runs compare() (which counts what it compared in `record`), then sets record["status"]:
    "pass", "wrong" (an assertion: another result than the CPU's), "refused" (a dtype trn
    tensors cannot hold) or "error"; reports it and raises what failed. A device fault is reset
    so that the next op runs."""
    torch_trn.reset_fallback_ops()
    failure = None
    try:
        compare()
        torch_trn.synchronize()
    except AssertionError as e:
        failure = e
        record["status"] = "wrong"
        record["detail"] = str(e).splitlines()[0][:300]
    except Exception as e:  # noqa: BLE001 (every error is a result to report)
        failure = e
        record["status"] = "refused" if "trn tensors cannot hold" in str(e) else "error"
        record["detail"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        if "unusable after a device fault" in str(e) or "faulted" in str(e):
            torch_trn.reset_device()
    record["fallbacks"] = sorted(torch_trn.fallback_ops())
    report(record)
    if failure is not None:
        raise failure
