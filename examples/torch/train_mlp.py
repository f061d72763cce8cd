#!/usr/bin/env python3
"""Trains a small MLP on trn (PyTorch's "trn" device) and prints, per step, the loss,
the host time and the simulated device time, then the ops that ran on the CPU instead.

    .venv/bin/python examples/torch/train_mlp.py   (after make; or with PYTHONPATH=<build>/python)

It runs on your default simulated device (TRN_SIM_ROOT, as every trn program)."""
import time

import torch
from torch import nn

import torch_trn  # registers trn as the "trn" device

DEVICE = "trn"
STEPS = 5


def main():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10)).to(DEVICE)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    inputs = torch.randn(16, 32).to(DEVICE)
    targets = torch.randint(0, 10, (16,), dtype=torch.int64).to(DEVICE)

    print(f"training on {torch_trn.get_device_name()} ({torch_trn.device_count()} devices)")
    for step in range(STEPS):
        # Ops are queued on the device: synchronize around the step so that the host time
        # and the simulated clock's advance are this step's alone.
        torch_trn.synchronize()
        device_start = torch_trn.device_time_ns()
        host_start = time.perf_counter()
        opt.zero_grad()
        loss = loss_fn(model(inputs), targets)
        loss.backward()
        opt.step()
        torch_trn.synchronize()
        host_ms = (time.perf_counter() - host_start) * 1e3
        device_ms = (torch_trn.device_time_ns() - device_start) / 1e6
        print(f"step {step}: loss {loss.item():.4f}  host {host_ms:8.2f} ms  "
              f"simulated device {device_ms:8.3f} ms")

    fallbacks = torch_trn.fallback_ops()
    if fallbacks:
        print("ran on the CPU (no trn kernel yet), with call counts:")
        for name, count in sorted(fallbacks.items()):
            print(f"  {name}: {count}")
    else:
        print("every op ran on trn")


if __name__ == "__main__":
    main()
