#!/usr/bin/env python3
"""The PyTorch backend's benchmark: one JSON object per line, in trn-bench's format (bench,
case, unit, trn, baseline, baseline_name, ratio, better; see tools/trn-bench/bench.hpp).

For each model of tests/torch/models.py, two rows:
  <model>_train_step_host     median host ms per training step on trn, against the CPU;
                              its "fallbacks" field lists the ops that ran on the CPU instead,
                              "fallbacks_per_step" how many such runs a step makes;
  <model>_train_step_device   median simulated device ms per step, against the CPU's host ms
                              per step (what the step would cost on the device itself).

    .venv/bin/python bindings/torch/bench_torch.py [--quick]   (after make)

It runs on the default simulated device (TRN_SIM_ROOT)."""
import json
import os
import statistics
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
# Python puts this script's directory first on sys.path, and it holds the torch_trn sources
# (no _native.so): drop it, so that `import torch_trn` finds the built package on PYTHONPATH.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
# One copy of the models, in the tests; found from this script's place in the source tree.
_MODELS_DIR = os.path.join(_HERE, "..", "..", "tests", "torch")
sys.path.append(_MODELS_DIR)
try:
    import models
except ImportError as e:
    sys.exit(f"bench_torch: cannot import the models from {os.path.normpath(_MODELS_DIR)}: {e}")

import torch_trn  # noqa: E402

DEVICE = "trn"
WARMUP = 2


def emit(case, unit, trn, baseline, baseline_name, **extra):
    line = {"bench": "torch", "case": case, "unit": unit, "trn": trn, "baseline": baseline,
            "baseline_name": baseline_name,
            "ratio": trn / baseline if baseline != 0 else 0.0, "better": "lower"}
    line.update(extra)
    print(json.dumps(line), flush=True)


def time_steps(name, device, steps):
    """Median host ms and simulated device ms per training step of model `name` on `device`
    (device ms only on trn), after WARMUP untimed steps."""
    model, opt, batch, loss_fn = models.BUILDERS[name](device)
    clip = models.CLIP.get(name)
    on_trn = device != "cpu"
    for _ in range(WARMUP):  # first use: kernels built or loaded, pools filled
        models.train_step(model, opt, batch, loss_fn, clip)
    host_ms, device_ms = [], []
    for _ in range(steps):
        if on_trn:
            torch_trn.synchronize()
            device_start = torch_trn.device_time_ns()
        start = time.perf_counter()
        models.train_step(model, opt, batch, loss_fn, clip)  # .item() waits for the loss
        if on_trn:
            torch_trn.synchronize()  # and this for the optimizer's step
        host_ms.append((time.perf_counter() - start) * 1e3)
        if on_trn:
            device_ms.append((torch_trn.device_time_ns() - device_start) / 1e6)
    return statistics.median(host_ms), (statistics.median(device_ms) if on_trn else 0.0)


def main():
    quick = "--quick" in sys.argv[1:]
    unknown = [a for a in sys.argv[1:] if a != "--quick"]
    if unknown:
        sys.exit(f"bench_torch: unknown arguments {unknown} (takes --quick)")
    steps = 2 if quick else 5
    # The fallback warnings go to stderr once per op; the JSON lines on stdout are the result.
    failed = []
    for name in models.BUILDERS:
        cpu_host, _ = time_steps(name, "cpu", steps)
        torch_trn.reset_fallback_ops()
        try:
            trn_host, trn_device = time_steps(name, DEVICE, steps)
        except Exception as e:  # one model the backend cannot run yet must not hide the others
            print(f"bench_torch: {name} failed on trn: {type(e).__name__}: {e}", file=sys.stderr)
            failed.append(name)
            continue
        fallbacks = torch_trn.fallback_ops()
        emit(f"{name}_train_step_host", "ms", trn_host, cpu_host, "CPU (same model, libtorch)",
             fallbacks=fallbacks,
             fallbacks_per_step=round(sum(fallbacks.values()) / (WARMUP + steps), 2))
        # What the step costs the (simulated) device, against what it costs the host's CPU.
        emit(f"{name}_train_step_device", "ms", trn_device, cpu_host,
             "CPU host ms per step (same model, libtorch)")
    if failed:
        sys.exit(f"bench_torch: no figures for {', '.join(failed)}")


if __name__ == "__main__":
    main()
