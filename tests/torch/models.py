"""Three small models for the torch_trn tests and bench: an MLP, a CNN and an attention block.
Each build_* function makes the model, its optimizer and one fixed data batch, with a fixed
seed, so that two calls give the same weights and data (a CPU run to compare a trn run with).
Only torch is imported here: bench_torch.py loads this file from the source tree too."""
import math

import torch
from torch import nn
from torch.nn import functional as F


def _to(model, batch, device):
    model = model.to(device)
    return model, tuple(t.to(device) for t in batch)


def build_mlp(device="cpu", seed=0):
    """Linear(32,64) → ReLU → Linear(64,10), cross-entropy on int64 targets, SGD + momentum."""
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))
    batch = (torch.randn(16, 32), torch.randint(0, 10, (16,), dtype=torch.int64))
    model, batch = _to(model, batch, device)
    # foreach=False: the per-tensor update, which trn runs (trn refuses the _foreach_ ops).
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)
    return model, opt, batch, nn.CrossEntropyLoss()


def build_cnn(device="cpu", seed=0):
    """Two conv/relu/maxpool stages and a linear head on [8,3,16,16] images, Adam."""
    torch.manual_seed(seed)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 4 * 4, 10))
    batch = (torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,), dtype=torch.int64))
    model, batch = _to(model, batch, device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    return model, opt, batch, nn.CrossEntropyLoss()


class AttentionBlock(nn.Module):
    """Pre-norm single-head self-attention with a residual connection."""

    def __init__(self, dim=32):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.q = nn.Linear(dim, dim)
        # No key bias: it adds q·b to every score of a row, which softmax cancels, so its
        # gradient is zero up to rounding and Adam would train it on rounding noise alone.
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim)
        self.proj = nn.Linear(dim, dim)
        self.scale = 1.0 / math.sqrt(dim)

    def forward(self, x):
        h = self.norm(x)
        q, k, v = self.q(h), self.k(h), self.v(h)
        attn = torch.softmax(q @ k.transpose(-2, -1) * self.scale, dim=-1)
        return self.proj(attn @ v) + x


def build_attention(device="cpu", seed=0):
    """AttentionBlock(32) on x [4, 8, 32], MSE against a fixed target, AdamW."""
    torch.manual_seed(seed)
    model = AttentionBlock(32)
    batch = (torch.randn(4, 8, 32), torch.randn(4, 8, 32))
    model, batch = _to(model, batch, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, foreach=False)
    return model, opt, batch, F.mse_loss


BUILDERS = {"mlp": build_mlp, "cnn": build_cnn, "attention": build_attention}


def make_optimizer(name, model):
    """The optimizer build_<name> makes, for a model moved elsewhere (e.g. a deepcopy)."""
    if name == "mlp":
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)
    if name == "cnn":
        return torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, foreach=False)


def train_step(model, opt, batch, loss_fn):
    """One step: zero_grad, forward, loss, backward, step. Returns the loss as a float (which
    waits for the device)."""
    inputs, target = batch
    opt.zero_grad()
    loss = loss_fn(model(inputs), target)
    loss.backward()
    opt.step()
    return loss.item()
