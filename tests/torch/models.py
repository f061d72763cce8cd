"""Small models for the torch_trn tests and bench: an MLP, a CNN, an attention block, a GPT-style
LM with a tied head, a ResNet-style CNN with BatchNorm, and 2-layer LSTM and GRU models.
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
    # foreach=False: the per-tensor update (the newer models below take the default).
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


class CausalBlock(nn.Module):
    """A GPT block: pre-norm causal multi-head attention through scaled_dot_product_attention,
    then a GELU MLP, each with a residual connection."""

    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        # No qkv bias, as GPT-2 style models often leave it: the key bias's gradient is zero up
        # to rounding (softmax cancels it), and AdamW would train it on rounding noise alone.
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim)
        self.fc, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.heads, self.dropout = heads, dropout

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(c, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc(self.ln2(x))))


class TinyGPT(nn.Module):
    """A GPT-style language model: token and position embeddings, causal blocks, a final norm
    and an output head tied to the token embedding."""

    def __init__(self, vocab=64, dim=32, heads=4, layers=2, context=16, dropout=0.0):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, dim), nn.Embedding(context, dim)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(CausalBlock(dim, heads, dropout) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.tok.weight

    def forward(self, idx):
        x = self.drop(self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device)))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def _lm_loss(logits, target):
    return F.cross_entropy(logits.flatten(0, 1), target.flatten())


def build_gpt(device="cpu", seed=0):
    """TinyGPT on 4 sequences of 16 tokens (next-token cross-entropy), AdamW, gradients
    clipped to norm 1 (CLIP), dropout 0 (the device's dropout masks are not the CPU's)."""
    torch.manual_seed(seed)
    model = TinyGPT()
    batch = (torch.randint(0, 64, (4, 16)), torch.randint(0, 64, (4, 16)))
    model, batch = _to(model, batch, device)
    return model, make_optimizer("gpt", model), batch, _lm_loss


class ResBlockNet(nn.Module):
    """A ResNet-style CNN: conv-BN-ReLU, a residual conv-BN block, global average pooling."""

    def __init__(self):
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.c2, self.b2 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 10)

    def forward(self, x):
        x = F.relu(self.b1(self.c1(x)))
        x = F.relu(x + self.b2(self.c2(x)))
        return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))


def build_resnet(device="cpu", seed=0):
    """ResBlockNet on [8,3,8,8] images, cross-entropy, SGD + momentum."""
    torch.manual_seed(seed)
    model = ResBlockNet()
    batch = (torch.randn(8, 3, 8, 8), torch.randint(0, 10, (8,)))
    model, batch = _to(model, batch, device)
    return model, make_optimizer("resnet", model), batch, nn.CrossEntropyLoss()


class Recurrent(nn.Module):
    """A 2-layer nn.LSTM or nn.GRU over a sequence, a linear head on the last step."""

    def __init__(self, kind):
        super().__init__()
        self.rnn = getattr(nn, kind)(8, 16, num_layers=2, batch_first=True)
        self.fc = nn.Linear(16, 4)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.fc(out[:, -1])


def _build_recurrent(kind, device, seed):
    torch.manual_seed(seed)
    model = Recurrent(kind)
    batch = (torch.randn(4, 6, 8), torch.randint(0, 4, (4,)))
    model, batch = _to(model, batch, device)
    return model, make_optimizer(kind.lower(), model), batch, nn.CrossEntropyLoss()


def build_lstm(device="cpu", seed=0):
    """A 2-layer LSTM (8 -> 16) over 6 steps, cross-entropy, Adam."""
    return _build_recurrent("LSTM", device, seed)


def build_gru(device="cpu", seed=0):
    """A 2-layer GRU (8 -> 16) over 6 steps, cross-entropy, Adam."""
    return _build_recurrent("GRU", device, seed)


BUILDERS = {"mlp": build_mlp, "cnn": build_cnn, "attention": build_attention, "gpt": build_gpt,
            "resnet": build_resnet, "lstm": build_lstm, "gru": build_gru}
# Gradient clipping (clip_grad_norm_'s max norm) in a model's train step.
CLIP = {"gpt": 1.0}


def make_optimizer(name, model):
    """The optimizer build_<name> makes, for a model moved elsewhere (e.g. a deepcopy)."""
    if name == "mlp":
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)
    if name == "cnn":
        return torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
    # The models below use the optimizers' default (foreach) path.
    if name == "gpt":
        return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    if name == "resnet":
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    if name in ("lstm", "gru"):
        return torch.optim.Adam(model.parameters(), lr=1e-2)
    return torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, foreach=False)


def train_step(model, opt, batch, loss_fn, clip=None):
    """One step: zero_grad, forward, loss, backward, gradient clipping (when `clip` is a max
    norm), step. Returns the loss as a float (which waits for the device)."""
    inputs, target = batch
    opt.zero_grad()
    loss = loss_fn(model(inputs), target)
    loss.backward()
    if clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    opt.step()
    return loss.item()
