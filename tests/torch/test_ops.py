"""Each kernel torch_trn registers against PyTorch's CPU result, forward and backward, in float32
and bfloat16: elementwise ops (scalars on either side, broadcasting, in-place forms), matrix
products (transposed operands read as they lie), sum and mean, softmax, layer_norm, the losses,
conv2d and max_pool2d. Where docs/torch.md says a case runs on the device, its ops are absent from
torch_trn.fallback_ops(); where it says the case runs on libtrn_ops' host reference or on the
CPU, the result is still right and the fallback is recorded."""
import os
import sys

# The helpers beside this file, wherever it is run from.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trn_test_env  # noqa: E402,F401  (first: sets TRN_SIM_ROOT before torch_trn starts libtrn)

import unittest
import warnings

import torch
import torch.nn.functional as F
import torch_trn

from trn_test_env import DEVICE

DTYPES = (torch.float32, torch.bfloat16)
# Error allowed, relative to the reference's largest magnitude (absolute below 1).
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2}


def dtype_name(dtype):
    return str(dtype).split(".")[1]


def randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def positive(*shape, seed=0, low=0.5, high=3.0):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=g) * (high - low) + low


def max_error(want, got):
    """max |want - got| over max(1, max |want|), NaN where both are NaN ignored."""
    if want.numel() == 0:
        return 0.0
    w, g = want.float(), got.float()
    scale = max(1.0, w.abs().nan_to_num(0.0, 0.0, 0.0).max().item())
    return (w - g).abs().nan_to_num(0.0).max().item() / scale


def fallback_hits(ops, fallbacks):
    """The keys of `fallbacks` that are one of `ops`: 'aten::<op>.<any overload>' or
    'trn_ops::<op>'."""
    hits = []
    for key in fallbacks:
        for prefix in ("aten::", "trn_ops::"):
            if key.startswith(prefix) and key[len(prefix):].split(".", 1)[0] in ops:
                hits.append(key)
    return sorted(hits)


class OpCase(unittest.TestCase):
    def check(self, fn, inputs, dtype, *, grad=True, nondiff=(), atol=None, grad_atol=None,
              on_device=(), recorded=(), ref_f32=False):
        """fn(*inputs) on trn against fn on the CPU, and the gradients of its (first) output's
        inputs for a random upstream gradient. Floating inputs are cast to `dtype` first.
        on_device: op names with no fallback entry (aten:: or trn_ops::) in the whole case;
        recorded: fallback_ops() keys that must be there (the only trn_ops:: keys allowed when
        on_device is given). ref_f32: the reference is the CPU's
        float32 result rounded to `dtype` (for CPU kernels bfloat16 lacks or rounds poorly)."""
        atol = atol if atol is not None else TOLERANCE[dtype]
        grad_atol = grad_atol if grad_atol is not None else atol
        inputs = [t.to(dtype) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                  for t in inputs]
        wants = [grad and isinstance(t, torch.Tensor) and t.is_floating_point() and i not in nondiff
                 for i, t in enumerate(inputs)]

        def leaves(device, as_f32):
            out = []
            for t, w in zip(inputs, wants):
                if isinstance(t, torch.Tensor):
                    t = t.detach().clone()
                    if as_f32 and t.is_floating_point():
                        t = t.float()
                    t = t.to(device).requires_grad_(w)
                out.append(t)
            return out

        try:
            cpu_in = leaves("cpu", ref_f32)
            out_c = fn(*cpu_in)
        except RuntimeError as e:  # a CPU kernel PyTorch 1.13 has no bfloat16 form of
            if dtype == torch.float32 or ref_f32 or "not implemented" not in str(e):
                raise
            ref_f32 = True
            cpu_in = leaves("cpu", True)
            out_c = fn(*cpu_in)
        dev_in = leaves(DEVICE, False)
        outs_c = out_c if isinstance(out_c, tuple) else (out_c,)

        torch_trn.reset_fallback_ops()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # fallbacks' warnings: what they are is checked below
            out_d = fn(*dev_in)
            outs_d = out_d if isinstance(out_d, tuple) else (out_d,)
            self.assertEqual(len(outs_c), len(outs_d))
            for i, (c, d) in enumerate(zip(outs_c, outs_d)):
                self.assertEqual(d.device.type, DEVICE, f"output {i}")
                want_dtype = dtype if ref_f32 and c.dtype == torch.float32 else c.dtype
                self.assertEqual(d.dtype, want_dtype, f"output {i}")
                self.assertEqual(d.shape, c.shape, f"output {i}")
                got = d.detach().cpu()
                if c.is_floating_point():
                    want = c.detach().to(want_dtype)
                    self.assertTrue(torch.equal(want.isnan(), got.isnan()), f"output {i}: NaNs")
                    self.assertLessEqual(max_error(want, got), atol, f"output {i}")
                else:
                    self.assertTrue(torch.equal(c, got), f"output {i}: {c} != {got}")
            if any(wants):
                g = randn(*outs_c[0].shape, seed=7)
                outs_c[0].backward(g.to(outs_c[0].dtype))
                outs_d[0].backward(g.to(dtype).to(DEVICE))
                torch_trn.synchronize()
                for i, (c, d, w) in enumerate(zip(cpu_in, dev_in, wants)):
                    if not w:
                        continue
                    self.assertIsNotNone(d.grad, f"grad of input {i}")
                    self.assertEqual(d.grad.device.type, DEVICE, f"grad of input {i}")
                    self.assertEqual(d.grad.dtype, dtype, f"grad of input {i}")
                    self.assertEqual(d.grad.shape, c.grad.shape, f"grad of input {i}")
                    self.assertLessEqual(max_error(c.grad.to(dtype), d.grad.cpu()), grad_atol,
                                         f"grad of input {i}")
        fallbacks = torch_trn.fallback_ops()
        if on_device:
            # The named ops did not fall back to the CPU, and nothing ran on libtrn_ops' host
            # reference (its keys name libtrn_ops' ops, 'trn_ops::unary_backward', not aten's).
            host_runs = sorted(k for k in fallbacks if k.startswith("trn_ops::") and k not in recorded)
            self.assertEqual(sorted(set(fallback_hits(on_device, fallbacks)) | set(host_runs)), [],
                             fallbacks)
        for key in recorded:
            self.assertIn(key, fallbacks)
        return fallbacks


# --- elementwise -----------------------------------------------------------------------------

class Elementwise(OpCase):
    def test_add_sub(self):
        cases = [
            ("x + y", lambda x, y: x + y, [(4, 5), (4, 5)]),
            ("x + y alpha=2", lambda x, y: torch.add(x, y, alpha=2), [(4, 5), (4, 5)]),
            ("x - y alpha=0.5", lambda x, y: torch.sub(x, y, alpha=0.5), [(4, 5), (4, 5)]),
            ("[4,5] + [5]", lambda x, y: x + y, [(4, 5), (5,)]),
            ("[4,5] - [4,1]", lambda x, y: x - y, [(4, 5), (4, 1)]),
            ("[1,5] - [4,5] alpha=3", lambda x, y: torch.sub(x, y, alpha=3), [(1, 5), (4, 5)]),
            ("[2,3,4] + [4]", lambda x, y: x + y, [(2, 3, 4), (4,)]),
            ("[2,3,4] + [] (0-dim trn)", lambda x, y: x + y, [(2, 3, 4), ()]),
            ("[2,3,4] + [3,1] (broadcast in the middle)", lambda x, y: x + y, [(2, 3, 4), (3, 1)]),
            ("x.t() + y (non-contiguous)", lambda x, y: x.t() + y, [(5, 4), (4, 5)]),
        ]
        for dtype in DTYPES:
            for name, fn, shapes in cases:
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, [randn(*s, seed=i) for i, s in enumerate(shapes)], dtype,
                               on_device=("add", "sub", "mul", "sum"))

    def test_scalar_operands(self):
        cases = [
            ("x + 1.5", lambda x: x + 1.5),
            ("1.5 + x", lambda x: 1.5 + x),
            ("2.0 - x", lambda x: 2.0 - x),
            ("x - 2.0", lambda x: x - 2.0),
            ("x * 2.5", lambda x: x * 2.5),
            ("3 * x", lambda x: 3 * x),
            ("x / 3", lambda x: x / 3),
            ("x * cpu 0-dim tensor", lambda x: x * torch.tensor(0.25)),
        ]
        for dtype in DTYPES:
            for name, fn in cases:
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, [randn(6, 7)], dtype, on_device=("add", "sub", "rsub", "mul", "div"))
            with self.subTest(case="2.0 / x", dtype=dtype_name(dtype)):
                x = positive(6, 7) * torch.where(randn(6, 7) > 0, 1.0, -1.0)
                self.check(lambda x: 2.0 / x, [x], dtype,
                           on_device=("div", "mul", "neg", "reciprocal"))

    def test_in_place(self):
        cases = [
            ("x.add_(y, alpha=2)", lambda x, y: x.clone().add_(y, alpha=2)),
            ("x.sub_(y)", lambda x, y: x.clone().sub_(y)),
            ("x.mul_(y)", lambda x, y: x.clone().mul_(y)),
            ("x.div_(y)", lambda x, y: x.clone().div_(y)),
            ("x.add_(1.0)", lambda x, y: x.clone().add_(1.0) * y),
            ("x.mul_(0.5)", lambda x, y: x.clone().mul_(0.5) + y),
            ("x += y[0] (broadcast)", lambda x, y: x.clone().add_(y[0])),
        ]
        for dtype in DTYPES:
            for name, fn in cases:
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    y = positive(4, 6, seed=1) if "div" in name else randn(4, 6, seed=1)
                    self.check(fn, [randn(4, 6), y], dtype, on_device=("add", "sub", "mul", "div"))
            with self.subTest(case="in place on a trn tensor, no autograd", dtype=dtype_name(dtype)):
                x, y = randn(3, 8).to(dtype), randn(3, 8, seed=1).to(dtype)
                torch_trn.reset_fallback_ops()
                xd = x.to(DEVICE)
                ptr = xd.data_ptr()
                xd.add_(y.to(DEVICE), alpha=2).mul_(3.0).sub_(1.0)
                self.assertEqual(xd.data_ptr(), ptr)
                want = x.float().add(y.float(), alpha=2).mul(3.0).sub(1.0).to(dtype)
                self.assertLessEqual(max_error(want, xd.cpu()), TOLERANCE[dtype])
                self.assertEqual(fallback_hits(("add", "sub", "mul"), torch_trn.fallback_ops()), [])

    def test_binary(self):
        cases = [
            ("mul", lambda x, y: x * y, randn(4, 5), randn(4, 5, seed=1)),
            ("mul broadcast [4,5]*[4,1]", lambda x, y: x * y, randn(4, 5), randn(4, 1, seed=1)),
            ("div", lambda x, y: x / y, randn(4, 5), positive(4, 5, seed=1)),
            ("div broadcast [4,5]/[5]", lambda x, y: x / y, randn(4, 5), positive(5, seed=1)),
            ("maximum", torch.maximum, randn(4, 5), randn(4, 5, seed=1)),
            ("minimum", torch.minimum, randn(4, 5), randn(4, 5, seed=1)),
            ("pow tensor", torch.pow, positive(4, 5), randn(4, 5, seed=1)),
        ]
        for dtype in DTYPES:
            for name, fn, x, y in cases:
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    op = name.split()[0]
                    self.check(fn, [x, y], dtype, on_device=(op, "mul", "div", "sum"))
            for name, fn, x in (("pow 2", lambda x: x.pow(2), randn(4, 5)),
                                ("x ** 2", lambda x: x ** 2, randn(4, 5)),
                                ("pow 3", lambda x: torch.pow(x, 3), randn(4, 5)),
                                ("pow 0.5", lambda x: x.pow(0.5), positive(4, 5)),
                                ("pow -1.5", lambda x: x.pow(-1.5), positive(4, 5))):
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, [x], dtype, on_device=("pow", "mul"))

    def test_comparisons(self):
        # Integers as floats, so that some elements compare equal.
        g = torch.Generator().manual_seed(3)
        x = torch.randint(-3, 4, (5, 6), generator=g).float()
        y = torch.randint(-3, 4, (5, 6), generator=g).float()
        row = torch.randint(-3, 4, (6,), generator=g).float()
        for dtype in DTYPES:
            for op in ("eq", "ne", "lt", "le", "gt", "ge"):
                for name, fn, args in (
                        (f"{op} tensor", lambda a, b, op=op: getattr(torch, op)(a, b), [x, y]),
                        (f"{op} broadcast [5,6] [6]", lambda a, b, op=op: getattr(torch, op)(a, b), [x, row]),
                        (f"{op} scalar", lambda a, op=op: getattr(torch, op)(a, 1.0), [x])):
                    with self.subTest(case=name, dtype=dtype_name(dtype)):
                        self.check(fn, args, dtype, grad=False, on_device=(op,))
            with self.subTest(case="operators x > y, x == 0, x <= 0.5", dtype=dtype_name(dtype)):
                self.check(lambda a, b: (a > b, a == 0, a <= 0.5, a != b), [x, y], dtype,
                           grad=False, on_device=("gt", "eq", "le", "ne"))

    def test_comparison_outputs_bool(self):
        for dtype in DTYPES:
            with self.subTest(dtype=dtype_name(dtype)):
                a = randn(3, 4).to(dtype).to(DEVICE)
                b = randn(3, 4, seed=1).to(dtype).to(DEVICE)
                for out in (a < b, a >= 0.0, torch.eq(a, b), a.ne(a)):
                    self.assertEqual(out.dtype, torch.bool)
                    self.assertEqual(out.device.type, DEVICE)
                self.assertTrue(torch.equal((a < b).cpu(), a.cpu() < b.cpu()))
                self.assertFalse(a.ne(a).cpu().any().item())

    def test_unary(self):
        away_from_zero = positive(5, 7, low=0.3) * torch.where(randn(5, 7, seed=5) > 0, 1.0, -1.0)
        cases = [
            ("neg", torch.neg, randn(5, 7), ()),
            ("abs", torch.abs, randn(5, 7), ()),
            ("exp", torch.exp, randn(5, 7), ("mul",)),
            ("log", torch.log, positive(5, 7), ("div",)),
            ("sqrt", torch.sqrt, positive(5, 7), ("div", "mul")),
            ("rsqrt", torch.rsqrt, positive(5, 7), ("mul", "pow")),
            ("tanh", torch.tanh, randn(5, 7), ()),
            ("sigmoid", torch.sigmoid, randn(5, 7), ()),
            ("reciprocal", torch.reciprocal, away_from_zero, ("mul", "neg")),
            ("relu", torch.relu, randn(5, 7), ("threshold_backward",)),
            ("relu (F.relu)", F.relu, randn(5, 7), ("threshold_backward",)),
            ("gelu tanh", lambda x: F.gelu(x, approximate="tanh"), randn(5, 7) * 2, ("gelu_backward",)),
            ("gelu (erf)", F.gelu, randn(5, 7) * 2, ("gelu_backward",)),
            ("silu", F.silu, randn(5, 7) * 2, ("silu_backward",)),
            ("sin", torch.sin, randn(5, 7) * 4, ("cos", "mul")),
            ("cos", torch.cos, randn(5, 7) * 4, ("sin", "mul", "neg")),
            ("exp non-contiguous", lambda x: x.t().exp(), randn(5, 7), ("mul",)),
        ]
        for dtype in DTYPES:
            for name, fn, x, backward_ops in cases:
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, [x], dtype, on_device=(name.split()[0],) + backward_ops)
            with self.subTest(case="relu_ in place", dtype=dtype_name(dtype)):
                x = randn(5, 7).to(dtype)
                torch_trn.reset_fallback_ops()
                xd = x.to(DEVICE)
                xd.relu_()
                self.assertTrue(torch.equal(xd.cpu(), x.relu()))
                self.assertEqual(fallback_hits(("relu", "relu_"), torch_trn.fallback_ops()), [])

    def test_addcmul_addcdiv(self):
        for dtype in DTYPES:
            for name, fn, args in (
                    ("addcmul", lambda s, a, b: torch.addcmul(s, a, b), [randn(4, 6), randn(4, 6, seed=1), randn(4, 6, seed=2)]),
                    ("addcmul value=0.5", lambda s, a, b: torch.addcmul(s, a, b, value=0.5), [randn(4, 6), randn(4, 6, seed=1), randn(4, 6, seed=2)]),
                    ("addcmul broadcast", lambda s, a, b: torch.addcmul(s, a, b, value=-2), [randn(4, 6), randn(4, 1, seed=1), randn(6, seed=2)]),
                    ("addcdiv value=0.1", lambda s, a, b: torch.addcdiv(s, a, b, value=0.1), [randn(4, 6), randn(4, 6, seed=1), positive(4, 6, seed=2)]),
                    ("addcdiv_ in place", lambda s, a, b: s.clone().addcdiv_(a, b, value=-0.3), [randn(4, 6), randn(4, 6, seed=1), positive(4, 6, seed=2)]),
                    ("addcmul_ in place", lambda s, a, b: s.clone().addcmul_(a, b, value=0.7), [randn(4, 6), randn(4, 6, seed=1), randn(4, 6, seed=2)])):
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, args, dtype, on_device=(name.split()[0].rstrip("_"),))


# --- matrix products ---------------------------------------------------------------------------

class Linalg(OpCase):
    def test_mm(self):
        a, b = randn(6, 8), randn(8, 5, seed=1)
        cases = [
            ("a @ b", lambda a, b: a @ b, [a, b]),
            ("torch.mm", torch.mm, [a, b]),
            ("a @ b.t()", lambda a, b: a @ b.t(), [a, randn(5, 8, seed=1)]),
            ("a.t() @ b", lambda a, b: a.t() @ b, [randn(8, 6), b]),
            ("a.t() @ b.t()", lambda a, b: a.t() @ b.t(), [randn(8, 6), randn(5, 8, seed=1)]),
            ("[1,8] @ [8,1]", lambda a, b: a @ b, [randn(1, 8), randn(8, 1, seed=1)]),
            ("[130,70] @ [70,33]", lambda a, b: a @ b, [randn(130, 70), randn(70, 33, seed=1)]),
        ]
        for dtype in DTYPES:
            for name, fn, args in cases:
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, args, dtype, on_device=("mm",))

    def test_addmm_and_linear(self):
        x, w = randn(6, 8), randn(5, 8, seed=1)
        cases = [
            ("addmm bias [N]", lambda c, a, b: torch.addmm(c, a, b), [randn(5, seed=2), x, randn(8, 5, seed=1)]),
            ("addmm bias [M,N] beta=0.5 alpha=2", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2), [randn(6, 5, seed=2), x, randn(8, 5, seed=1)]),
            ("addmm bias [1,N]", lambda c, a, b: torch.addmm(c, a, b), [randn(1, 5, seed=2), x, randn(8, 5, seed=1)]),
            ("addmm a @ b.t()", lambda c, a, b: torch.addmm(c, a, b.t()), [randn(5, seed=2), x, w]),
            ("F.linear 2-D", F.linear, [x, w, randn(5, seed=2)]),
            ("F.linear 2-D no bias", F.linear, [x, w]),
            ("F.linear 3-D", F.linear, [randn(2, 3, 8), w, randn(5, seed=2)]),
            ("F.linear 3-D no bias", F.linear, [randn(2, 3, 8), w]),
        ]
        for dtype in DTYPES:
            for name, fn, args in cases:
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, args, dtype, on_device=("mm", "addmm", "add", "sum"))

    def test_bmm(self):
        q, k = randn(3, 4, 8), randn(3, 5, 8, seed=1)
        cases = [
            ("torch.bmm", torch.bmm, [q, randn(3, 8, 5, seed=1)]),
            ("q @ k.transpose(-2, -1)", lambda q, k: q @ k.transpose(-2, -1), [q, k]),
            ("q.transpose(1, 2) @ v", lambda q, v: q.transpose(1, 2) @ v, [randn(3, 8, 4), randn(3, 8, 5, seed=1)]),
            ("attention scores and values", lambda q, k, v: torch.softmax(q @ k.transpose(-2, -1) / 8 ** 0.5, -1) @ v,
             [q, k, randn(3, 5, 6, seed=2)]),
            ("4-D [2,2,4,8] @ [2,2,8,5]", lambda a, b: a @ b, [randn(2, 2, 4, 8), randn(2, 2, 8, 5, seed=1)]),
        ]
        for dtype in DTYPES:
            for name, fn, args in cases:
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, args, dtype, on_device=("bmm", "mm", "_softmax", "_softmax_backward_data"))


# --- reductions --------------------------------------------------------------------------------

class Reductions(OpCase):
    def test_sum_mean(self):
        cases = [
            ("sum", lambda x: x.sum()),
            ("sum dim=-1", lambda x: x.sum(-1)),
            ("sum dim=0", lambda x: x.sum(0)),
            ("sum dim=1", lambda x: x.sum(1)),
            ("sum dim=-1 keepdim", lambda x: x.sum(-1, keepdim=True)),
            ("sum dims=(0,1) keepdim", lambda x: x.sum((0, 1), keepdim=True)),
            ("sum dims=(1,2)", lambda x: x.sum((1, 2))),
            ("mean", lambda x: x.mean()),
            ("mean dim=-1", lambda x: x.mean(-1)),
            ("mean dim=0 keepdim", lambda x: x.mean(0, keepdim=True)),
            ("mean dim=1", lambda x: x.mean(1)),
            ("mean dims=(1,2) keepdim", lambda x: x.mean((1, 2), keepdim=True)),
        ]
        for dtype in DTYPES:
            for name, fn in cases:
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, [randn(3, 4, 5)], dtype, on_device=(name.split()[0],))
            with self.subTest(case="sum of a 2-D non-contiguous view", dtype=dtype_name(dtype)):
                self.check(lambda x: x.t().sum(-1), [randn(6, 9)], dtype, on_device=("sum",))
            with self.subTest(case="mean of a 0-dim tensor", dtype=dtype_name(dtype)):
                self.check(lambda x: x.mean(), [randn()], dtype, on_device=("mean",))

    def test_cumsum(self):
        # On the device as products with a triangular matrix of ones (blocks of 128 carried one
        # level up); infinities and NaN propagate as IEEE addition does, not as 0 * inf.
        nan, inf = float("nan"), float("inf")
        special = torch.tensor([[1.0, inf, 2.0, -inf, 3.0], [1.0, 2.0, nan, 3.0, 4.0],
                                [-inf, 1.0, 2.0, 3.0, 4.0], [0.5, -0.25, 3.0, 4.0, -5.0]])
        for dtype in DTYPES:
            for name, fn, x in (("cumsum dim=-1", lambda t: t.cumsum(-1), randn(3, 4, 5)),
                                ("cumsum dim=1", lambda t: torch.cumsum(t, 1), randn(3, 4, 5)),
                                ("cumsum 300 columns", lambda t: t.cumsum(1), randn(3, 300)),
                                ("cumsum of a 0-dim tensor", lambda t: t.cumsum(0), randn())):
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, [x], dtype, on_device=("cumsum",))
            with self.subTest(case="cumsum with infinities and NaN", dtype=dtype_name(dtype)):
                torch_trn.reset_fallback_ops()
                got = special.to(dtype).to(DEVICE).cumsum(1).cpu()
                want = special.to(dtype).float().cumsum(1).to(dtype)
                self.assertTrue(torch.equal(got.isnan(), want.isnan()))
                self.assertTrue(torch.allclose(got.float(), want.float(), equal_nan=True))
                self.assertEqual(torch_trn.fallback_ops(), {})
        # Integers would round in fp32: the CPU computes them, recorded.
        torch_trn.reset_fallback_ops()
        big = torch.tensor([2 ** 40, 1, 2], dtype=torch.int64)
        self.assertTrue(torch.equal(big.to(DEVICE).cumsum(0).cpu(), big.cumsum(0)))
        self.assertIn("aten::cumsum.out", torch_trn.fallback_ops())

    def test_argmax_argmin_and_max_min_with_indices(self):
        # On the device along any dim (moved last) and over every element: the first index of
        # the extreme, the first NaN's where there is one, as the CPU picks them.
        nan, inf = float("nan"), float("inf")
        special = torch.tensor([[1.0, 3.0, 3.0, 2.0], [nan, 1.0, nan, 5.0],
                                [-inf, -inf, -inf, -inf], [0.0, -0.0, 0.0, 1.0]])
        long_rows = randn(2, 9000, seed=4)  # three column chunks of the kernel
        long_rows[0, 8500] = nan
        long_rows[1, 100] = long_rows[1, 5000] = 50.0
        for dtype in DTYPES:
            for x in (randn(3, 4, 5), special, long_rows):
                cases = [("argmax", lambda t: t.argmax()), ("argmin", lambda t: t.argmin())]
                for d in range(-1, x.dim()):
                    cases += [(f"argmax dim={d}", lambda t, d=d: t.argmax(d)),
                              (f"argmin dim={d} keepdim", lambda t, d=d: t.argmin(d, keepdim=True)),
                              (f"max dim={d}", lambda t, d=d: torch.max(t, d)),
                              (f"min dim={d} keepdim", lambda t, d=d: torch.min(t, d, keepdim=True))]
                for name, fn in cases:
                    with self.subTest(case=f"{name} {list(x.shape)}", dtype=dtype_name(dtype)):
                        xx = x.to(dtype)
                        torch_trn.reset_fallback_ops()
                        got, want = fn(xx.to(DEVICE)), fn(xx)
                        for g, w in zip(got if isinstance(got, tuple) else (got,),
                                        want if isinstance(want, tuple) else (want,)):
                            self.assertTrue(torch.equal(g.cpu(), w) or
                                            torch.allclose(g.cpu(), w, equal_nan=True), name)
                            self.assertEqual(g.dtype, w.dtype)
                        self.assertEqual(torch_trn.fallback_ops(), {})


# --- nn kernels ------------------------------------------------------------------------------

class SelectionsAndFactories(OpCase):
    """where, clamp, masked_fill, amax/amin, max()/min(), arange and cat: all on the device."""

    def test_where_and_clamp(self):
        for dtype in DTYPES:
            cases = [
                ("where", lambda x, y: torch.where(x > 0, x, y), [randn(4, 6), randn(4, 6, seed=1)]),
                ("where broadcast", lambda x, y: torch.where(x > 0, x, y), [randn(4, 6), randn(6, seed=1)]),
                ("where scalar", lambda x: torch.where(x > 0, x, 0.0), [randn(4, 6)]),
                ("clamp", lambda x: x.clamp(-0.5, 0.5), [randn(4, 6)]),
                ("clamp min", lambda x: x.clamp(min=-0.25), [randn(4, 6)]),
                ("clamp max", lambda x: torch.clamp(x, max=0.1), [randn(4, 6)]),
                ("masked_fill", lambda x: x.masked_fill(x > 0.3, float("-inf")), [randn(4, 6)]),
                ("masked_fill broadcast mask", lambda x, y: x.masked_fill(y > 0, -2.5),
                 [randn(4, 6), randn(6, seed=1)]),
                ("masked_fill tensor value", lambda x: x.masked_fill(x < 0, torch.tensor(7.0)),
                 [randn(4, 6)]),
            ]
            for name, fn, args in cases:
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, args, dtype, grad=False,
                               on_device=("where", "clamp", "clamp_min", "clamp_max", "masked_fill_"))
        x = torch.zeros(3, device=DEVICE)
        with self.assertRaisesRegex(RuntimeError, "does not broadcast"):
            x.masked_fill_(torch.ones(3, 3, dtype=torch.bool, device=DEVICE), 1.0)
        with self.assertRaisesRegex(RuntimeError, "boolean masks"):
            x.masked_fill_(torch.ones(3, device=DEVICE), 1.0)
        with self.assertRaisesRegex(RuntimeError, "0-dimensional value"):
            x.masked_fill_(torch.ones(3, dtype=torch.bool, device=DEVICE), torch.ones(2))

    def test_extremes(self):
        for dtype in DTYPES:
            for name, fn in (("amax dim=1", lambda x: x.amax(1)), ("amin dims=(0,2) keepdim", lambda x: x.amin((0, 2), keepdim=True)),
                             ("max()", lambda x: x.max()), ("min()", lambda x: x.min())):
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, [randn(3, 4, 5)], dtype, grad=False, on_device=("amax", "amin", "max", "min"))
        with self.assertRaises(RuntimeError):
            torch.empty(0, device=DEVICE).max()

    def test_arange_and_cat(self):
        torch_trn.reset_fallback_ops()
        for args in ((10,), (2, 11, 3), (1.5, -2.0, -0.25)):
            with self.subTest(arange=args):
                self.assertTrue(torch.equal(torch.arange(*args, dtype=torch.float32, device=DEVICE).cpu(),
                                            torch.arange(*args, dtype=torch.float32)))
        for dtype in DTYPES:
            with self.subTest(case="cat", dtype=dtype_name(dtype)):
                self.check(lambda a, b: torch.cat([a, b], 0), [randn(2, 5), randn(3, 5, seed=1)], dtype,
                           on_device=("cat", "arange"))
        # Along dim 1 the slices are strided: one strided DMA copy into each, on the device too.
        for dtype in DTYPES:
            with self.subTest(case="cat dim=1", dtype=dtype_name(dtype)):
                self.check(lambda a, b: torch.cat([a, b], 1), [randn(2, 5), randn(2, 3, seed=1)],
                           dtype, grad=False, on_device=("cat", "copy"))


class Embedding(OpCase):
    """Embedding as a one-hot product on the device, forward exact, its gradient summed."""

    def test_embedding(self):
        indices = torch.tensor([[1, 3, 3, 19], [0, 5, 3, 1]])
        for dtype in DTYPES:
            for pad in (None, 3):
                with self.subTest(dtype=dtype_name(dtype), padding_idx=pad):
                    self.check(lambda w, i, p=pad: F.embedding(i, w, padding_idx=p),
                               [randn(20, 8), indices], dtype,
                               on_device=("embedding", "embedding_dense_backward", "index_select"))
        with self.subTest(case="scale_grad_by_freq (the CPU's kernel, recorded)"):
            self.check(lambda w, i: F.embedding(i, w, scale_grad_by_freq=True),
                       [randn(20, 8), indices], torch.float32, on_device=("embedding",),
                       recorded=("aten::embedding_dense_backward",))


class Indexing(OpCase):
    """Gathers, scatters, indexing, flip, topk and sort on the device (one-hot matches of the
    indices, gather.hpp): forward exact, backward against the CPU, with no fallback."""

    INDEX_OPS = ("gather", "scatter", "scatter_add", "index_select", "index_add", "index",
                 "_index_put_impl_", "flip", "topk", "sort", "copy", "argmax")

    def test_gathers_and_their_gradients(self):
        g = torch.tensor([[0, 1, 4], [2, 2, 0], [1, 3, 3], [4, 4, 4]])
        i = torch.tensor([3, 0, 0, 2])
        cases = {
            "gather dim 1": (lambda x, g: torch.gather(x, 1, g), [randn(4, 5), g]),
            "gather dim 0": (lambda x, g: torch.gather(x, 0, g[:2] % 4), [randn(4, 5), g]),
            "index_select dim 0": (lambda x, i: x.index_select(0, i), [randn(4, 5), i]),
            "index_select dim 1, int32": (lambda x, i: x.index_select(1, i), [randn(3, 5), i.int()]),
            "x[i]": (lambda x, i: x[i], [randn(4, 5), i.view(2, 2)]),
            "x[:, -i]": (lambda x, i: x[:, i], [randn(3, 5), torch.tensor([-1, 0, -5])]),
            "flip": (lambda x: x.flip(0, 1), [randn(3, 5)]),
        }
        for dtype in DTYPES:
            for name, (fn, inputs) in cases.items():
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, inputs, dtype, on_device=self.INDEX_OPS)

    def test_scatters(self):
        g = torch.tensor([[0, 1, 4], [2, 2, 0], [1, 3, 3], [4, 4, 4]])  # repeats: sums, last wins
        i = torch.tensor([3, 0, 0, 2])
        cases = {
            "scatter_add": (lambda x, g, s: torch.scatter_add(x, 1, g, s),
                            [randn(4, 5), g, randn(4, 3, seed=1)]),
            "scatter_add_ of a narrower index": (lambda x, g, s: x.clone().scatter_add_(0, g[:2] % 4, s),
                                                 [randn(4, 5), g, randn(2, 3, seed=1)]),
            "scatter (last wins)": (lambda x, g, s: torch.scatter(x, 1, g, s),
                                    [randn(4, 5), g, randn(4, 3, seed=1)]),
            "scatter of a value": (lambda x, g: torch.scatter(x, 1, g, 2.5), [randn(4, 5), g]),
            "index_add alpha 2": (lambda x, i, s: torch.index_add(x, 1, i, s, alpha=2),
                                  [randn(3, 5), i, randn(3, 4, seed=1)]),
            "index_put accumulate": (lambda x, i, v: x.index_put((i,), v, accumulate=True),
                                     [randn(4, 5), i, randn(4, 5, seed=1)]),
            "x[i] = v (last wins)": (lambda x, i, v: x.index_put((i,), v),
                                     [randn(4, 5), i, randn(4, 5, seed=1)]),
        }
        for dtype in DTYPES:
            for name, (fn, inputs) in cases.items():
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, inputs, dtype, on_device=self.INDEX_OPS)

    def test_roll_of_every_dtype(self):
        x = torch.arange(24).view(2, 3, 4)
        torch_trn.reset_fallback_ops()
        for shifts, dims in (((1,), ()), ((-2,), ()), ((1, 2), (0, 2)), ((5,), (1,)),
                             ((0,), (2,)), ((-7, 3), (-1, 1))):
            for t in (x, x.float(), x.bool(), x.to(torch.int8)):
                with self.subTest(shifts=shifts, dims=dims, dtype=t.dtype):
                    got = torch.roll(t.to(DEVICE), shifts, dims).cpu()
                    self.assertTrue(torch.equal(got, torch.roll(t, shifts, dims)), got)
        self.assertEqual(torch_trn.fallback_ops(), {})
        self.check(lambda t: torch.roll(t, 2, 1), [randn(3, 4)], torch.float32,
                   on_device=("roll", "cat"))
        with self.assertRaisesRegex(RuntimeError, "must align"):
            torch.roll(x.to(DEVICE), (1, 2), (0,))

    def test_topk_and_sort_order_nan_first_and_ties_by_index(self):
        x = torch.tensor([[0.5, float("nan"), -1.0, 0.5, float("inf"), -float("inf"), 2.0]])
        for dim_x in (x, x.t().contiguous()):
            dim = 1 if dim_x.shape[1] > 1 else 0
            for flag in (True, False):
                with self.subTest(dim=dim, flag=flag):
                    torch_trn.reset_fallback_ops()
                    for name, fn in (("topk", lambda t: t.topk(4, dim, largest=flag)),
                                     ("sort", lambda t: t.sort(dim=dim, descending=flag, stable=True))):
                        want, got = fn(dim_x), fn(dim_x.to(DEVICE))
                        self.assertTrue(torch.equal(want.values.nan_to_num(7.0),
                                                    got.values.cpu().nan_to_num(7.0)), name)
                        self.assertEqual(got.indices.dtype, torch.int64)
                        if name == "sort":  # stable: ties by index
                            self.assertTrue(torch.equal(want.indices, got.indices.cpu()), name)
                        else:  # topk leaves ties' order open: the indices point at the values
                            at = dim_x.gather(dim, got.indices.cpu())
                            self.assertTrue(torch.equal(at.nan_to_num(7.0),
                                                        want.values.nan_to_num(7.0)), name)
                    self.assertEqual(fallback_hits(self.INDEX_OPS, torch_trn.fallback_ops()), [])
        for dtype in DTYPES:
            with self.subTest(case="topk's gradient", dtype=dtype_name(dtype)):
                self.check(lambda t: t.topk(2, 1).values, [randn(3, 6)], dtype,
                           on_device=self.INDEX_OPS)
        with self.assertRaisesRegex(RuntimeError, "out of range"):
            x.to(DEVICE).topk(8)

    def test_logical_ops(self):
        a = torch.tensor([0.0, 1.5, float("nan"), -2.0])
        b = torch.tensor([3.0, 0.0, 0.0, -1.0])
        torch_trn.reset_fallback_ops()
        for fn in (torch.logical_and, torch.logical_or, torch.logical_xor):
            self.assertTrue(torch.equal(fn(a.to(DEVICE), b.to(DEVICE)).cpu(), fn(a, b)), fn)
        self.assertTrue(torch.equal(torch.logical_not(a.to(DEVICE)).cpu(), torch.logical_not(a)))
        out = torch.empty(4, device=DEVICE)
        torch.logical_and(a.to(DEVICE), b.to(DEVICE), out=out)
        self.assertTrue(torch.equal(out.cpu(), torch.logical_and(a, b).float()))
        self.assertEqual(fallback_hits(("logical_and", "logical_or", "logical_xor", "logical_not"),
                                       torch_trn.fallback_ops()), [])

    def test_infinities_nan_and_signed_zeros_pass_exactly(self):
        x = torch.tensor([[float("inf"), -float("inf"), float("nan"), -0.0, 1e-40]])
        i = torch.tensor([4, 3, 2, 1, 0])
        got = x.to(DEVICE).index_select(1, i.to(DEVICE)).cpu()
        want = x.index_select(1, i)
        self.assertTrue(torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0)), got)
        self.assertEqual(torch.signbit(got[0, 1]).item(), True)  # -0.0 stays negative

    def test_an_index_out_of_range_gives_nan_never_a_plausible_value(self):
        # The CPU raises IndexError; the device does not read the indices back (that would cost
        # a synchronisation per op): the places they reach are NaN instead.
        x = randn(3, 4)
        bad = {"past the end": 4, "negative": -1, "2^32 (whose low word is 0)": 2 ** 32}
        for name, value in bad.items():
            with self.subTest(index=name):
                i = torch.tensor([value, 1]).to(DEVICE)
                got = x.to(DEVICE).index_select(1, i).cpu()
                self.assertTrue(got[:, 0].isnan().all() and torch.equal(got[:, 1], x[:, 1]), got)
                g = torch.gather(x.to(DEVICE), 1, i.view(1, 2)).cpu()
                self.assertTrue(g[0, 0].isnan() and g[0, 1] == x[0, 1], g)
                s = torch.scatter_add(x.to(DEVICE), 1, i.view(1, 2), torch.ones(1, 2, device=DEVICE))
                self.assertTrue(s.cpu()[0].isnan().any(), s)
        # x[i] = v with i past the end writes nothing anywhere: the rows it spans turn NaN.
        y = x.to(DEVICE)
        y[torch.tensor([7]).to(DEVICE)] = torch.ones(4, device=DEVICE)
        self.assertTrue(y.cpu().isnan().all(), y)
        big = torch.tensor([2 ** 32 + 1, 1]).to(DEVICE)
        self.assertTrue(F.embedding(big, x.to(DEVICE)).cpu()[0].isnan().all())
        loss = F.cross_entropy(randn(2, 4).to(DEVICE), torch.tensor([2 ** 32, 1]).to(DEVICE))
        self.assertTrue(loss.isnan().item())


class Composites(OpCase):
    """Activations, tests, vector products and factories composed of device ops."""

    def test_activations_and_their_gradients(self):
        x = randn(4, 6) * 3
        cases = {
            "elu": lambda t: F.elu(t, 0.7), "selu": F.selu, "celu": lambda t: F.celu(t, 1.3),
            "softplus": lambda t: F.softplus(t, 2.0, 5.0), "logsigmoid": F.logsigmoid,
            "tanh": torch.tanh,
        }
        for dtype in DTYPES:
            for name, fn in cases.items():
                with self.subTest(op=name, dtype=dtype_name(dtype)):
                    self.check(fn, [x], dtype, on_device=("elu", "elu_backward", "softplus",
                               "softplus_backward", "log_sigmoid_forward",
                               "log_sigmoid_backward", "tanh_backward"))

    def test_vector_products(self):
        x = randn(4, 6)
        for dtype in DTYPES:
            with self.subTest(dtype=dtype_name(dtype)):
                self.check(torch.dot, [x[0], x[1]], dtype, on_device=("dot", "mm"))
                self.check(lambda s, m, v: torch.addmv(s, m, v, beta=0.5, alpha=2),
                           [x[:, 0], x, x[0]], dtype, on_device=("addmv", "addmm"))
                self.check(lambda m, v: m @ v, [x, x[0]], dtype, on_device=("addmv", "mv", "mm"))
        with self.assertRaisesRegex(RuntimeError, "same number of elements"):
            torch.dot(torch.ones(3, device=DEVICE), torch.ones(4, device=DEVICE))

    def test_tests_and_bool_bitwise_ops(self):
        x = torch.tensor([float("nan"), -0.0, 0.0, -2.5, float("inf"), 3.0])
        y = torch.tensor([1.0, -1.0, 0.0, 2.0, -3.0, 0.0])
        torch_trn.reset_fallback_ops()
        cases = {
            "isnan": lambda a, b: torch.isnan(a), "sign": lambda a, b: torch.sign(a),
            "sgn": lambda a, b: torch.sgn(a), "&": lambda a, b: (a > 0) & (b > 0),
            "|": lambda a, b: (a > 0) | (b > 0), "^": lambda a, b: (a > 0) ^ (b > 0),
            "~": lambda a, b: ~(a > 0),
        }
        for name, fn in cases.items():
            want, got = fn(x, y), fn(x.to(DEVICE), y.to(DEVICE)).cpu()
            self.assertEqual(got.dtype, want.dtype, name)
            self.assertTrue(torch.equal(got, want), f"{name}: {got} != {want}")
        self.assertEqual(torch_trn.fallback_ops(), {})
        # Integer bitwise ops are exact on the CPU, recorded.
        i = torch.tensor([6, -3, 255])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.assertTrue(torch.equal((i.to(DEVICE) & 5).cpu(), i & 5))
        self.assertIn("aten::bitwise_and.Tensor_out", torch_trn.fallback_ops())

    def test_rounding_is_exact_ties_to_even_and_keeps_the_sign_of_zero(self):
        vals = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.3, 0.3, -0.0, 0.0, 2.999, -2.999, 8388607.5,
                -8388607.5, 8388608.0, 1e10, -1e10, float("inf"), -float("inf"), float("nan"),
                1e-40, -1e-40, 123.456, -123.456]
        x = torch.tensor(vals)
        torch_trn.reset_fallback_ops()
        for fn in (torch.floor, torch.ceil, torch.trunc, torch.round, torch.frac):
            for dtype in (torch.float32, torch.bfloat16, torch.float16):
                with self.subTest(op=fn.__name__, dtype=dtype_name(dtype)):
                    want, got = fn(x.to(dtype)), fn(x.to(dtype).to(DEVICE)).cpu()
                    self.assertTrue(torch.equal(want.nan_to_num(7.0), got.nan_to_num(7.0)), got)
                    self.assertTrue(torch.equal(want.nan_to_num(7.0).signbit(),
                                                got.nan_to_num(7.0).signbit()), got)
        self.assertEqual(torch_trn.fallback_ops(), {})
        # Integer tensors are their own floor: the CPU's kernel, recorded.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            i = torch.tensor([3, -4])
            self.assertTrue(torch.equal(torch.floor(i.to(DEVICE)).cpu(), torch.floor(i)))

    def test_bounds_nan_ignoring_extremes_and_truncating_division(self):
        x, y = randn(4, 6), randn(4, 6, seed=1)
        x[0, 0], y[1, 1] = float("nan"), float("nan")
        lo, hi = randn(4, 6, seed=2) - 1, randn(4, 6, seed=3) + 1
        for dtype in DTYPES:
            with self.subTest(dtype=dtype_name(dtype)):
                self.check(lambda a, l, h: torch.clamp(a, l, h), [x, lo, hi], dtype,
                           on_device=("clamp", "maximum", "minimum"))
                self.check(torch.fmax, [x, y], dtype, on_device=("fmax", "maximum"))
                self.check(torch.fmin, [x, y], dtype, on_device=("fmin", "minimum"))
                self.check(lambda a, b: torch.div(a, b * 0.1, rounding_mode="trunc"), [x, y],
                           dtype, grad=False, on_device=("div", "trunc"))
        # A bfloat16 quotient is truncated before it is rounded: 386 / 3 = 128.67 gives 128, where
        # the bfloat16 quotient (129) would give 129. (The CPU's own bfloat16 kernel gives 128 for
        # one element and 129 through its vectorized loop: the float32 quotient is the reference.)
        a, b = torch.tensor([386.0, -386.0]).bfloat16(), torch.tensor([3.0, 3.0]).bfloat16()
        got = torch.div(a.to(DEVICE), b.to(DEVICE), rounding_mode="trunc").cpu()
        want = torch.div(a.float(), b.float(), rounding_mode="trunc").bfloat16()
        self.assertTrue(torch.equal(got, want), got)
        # Python's floor division goes through fmod on the CPU (floor(a / b) can be one off).
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            a, b = torch.tensor([1.0, -7.5]), torch.tensor([0.1, 2.0])
            got = torch.div(a.to(DEVICE), b.to(DEVICE), rounding_mode="floor").cpu()
        self.assertTrue(torch.equal(got, torch.div(a, b, rounding_mode="floor")), got)

    def test_variance_and_standard_deviation(self):
        z = randn(3, 5, 7)
        cases = {
            "var": lambda t: t.var(), "var(1)": lambda t: t.var(1),
            "var((0, 2), correction=0, keepdim)": lambda t: torch.var(t, (0, 2), correction=0,
                                                                       keepdim=True),
            "std(-1)": lambda t: t.std(-1), "var_mean(1)": lambda t: torch.var_mean(t, 1),
            "std_mean((0, 1), keepdim)": lambda t: torch.std_mean(t, (0, 1), keepdim=True),
            "var of one element per row": lambda t: t[:, :1].var(1),
        }
        for dtype in DTYPES:
            for name, fn in cases.items():
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, [z], dtype, on_device=("var", "std", "var_mean", "std_mean"))

    def test_cross_entropy_over_an_image(self):
        scores, target = randn(2, 4, 3, 5), torch.randint(0, 4, (2, 3, 5))
        target[0, 0, 0] = -100  # ignored
        for reduction in ("mean", "sum"):
            for dtype in DTYPES:
                with self.subTest(reduction=reduction, dtype=dtype_name(dtype)):
                    self.check(lambda s, t: F.cross_entropy(s, t, reduction=reduction),
                               [scores, target], dtype,
                               on_device=("nll_loss2d_forward", "nll_loss2d_backward", "nll_loss"))

    def test_vector_norms_of_any_order(self):
        w = randn(3, 5)
        w[0, 1] = 0.0
        for dtype in DTYPES:
            for p in (0, 3, 0.5, -1.5, -float("inf")):
                with self.subTest(ord=p, dtype=dtype_name(dtype)):
                    self.check(lambda t: torch.linalg.vector_norm(t, p, dim=1), [w], dtype,
                               grad=p not in (0, -float("inf")), on_device=("linalg_vector_norm",))
                    self.check(lambda t: torch.linalg.vector_norm(t, p), [w], dtype,
                               grad=False, on_device=("linalg_vector_norm",))

    def test_eye_and_linspace(self):
        torch_trn.reset_fallback_ops()
        for dtype in (torch.float32, torch.bfloat16):
            self.assertTrue(torch.equal(torch.eye(3, 5, device=DEVICE, dtype=dtype).cpu(),
                                        torch.eye(3, 5, dtype=dtype)))
            self.assertTrue(torch.equal(torch.eye(4, device=DEVICE, dtype=dtype).cpu(),
                                        torch.eye(4, dtype=dtype)))
        for start, end, steps in ((0, 1, 11), (-3.3, 7.1, 100), (5, -5, 7), (1, 2, 1), (0, 1, 0)):
            with self.subTest(start=start, end=end, steps=steps):
                got = torch.linspace(start, end, steps, device=DEVICE).cpu()
                want = torch.linspace(start, end, steps)
                self.assertEqual(got.shape, want.shape)
                if steps:  # the CPU's own formula: within a rounding of it
                    self.assertLessEqual((got - want).abs().max().item(),
                                         2 * torch.finfo(torch.float32).eps * max(abs(start), abs(end)))
                    self.assertEqual(got[0].item(), want[0].item())
                    self.assertEqual(got[-1].item(), want[-1].item())
        self.assertEqual(torch_trn.fallback_ops(), {})
        with self.assertRaisesRegex(RuntimeError, "non-negative"):
            torch.linspace(0, 1, -1, device=DEVICE)


class AveragePooling(OpCase):
    """avg_pool2d and adaptive_avg_pool2d composed of device ops, forward and backward."""

    ON_DEVICE = ("avg_pool2d", "avg_pool2d_backward", "_adaptive_avg_pool2d",
                 "_adaptive_avg_pool2d_backward")

    def test_pools_on_the_device(self):
        x = randn(2, 3, 9, 8)
        cases = {
            "2x2": lambda t: F.avg_pool2d(t, 2),
            "3x3 stride 2 padding 1": lambda t: F.avg_pool2d(t, 3, 2, 1),
            "padding left out of the count": lambda t: F.avg_pool2d(t, 3, 2, 1,
                                                                    count_include_pad=False),
            "3x2 stride 1 divisor 5": lambda t: F.avg_pool2d(t, (3, 2), 1, divisor_override=5),
            "unbatched": lambda t: F.avg_pool2d(t[0], 2),
            "adaptive to 1": lambda t: F.adaptive_avg_pool2d(t, 1),
            "adaptive to 3x4": lambda t: F.adaptive_avg_pool2d(t, (3, 4)),
        }
        for dtype in DTYPES:
            for name, fn in cases.items():
                with self.subTest(case=name, dtype=dtype_name(dtype)):
                    self.check(fn, [x], dtype, on_device=self.ON_DEVICE)

    def test_partial_windows_run_on_the_cpu_recorded(self):
        x = randn(1, 2, 9, 8)
        self.check(lambda t: F.avg_pool2d(t, 2, ceil_mode=True), [x], torch.float32,
                   recorded=("aten::avg_pool2d.out", "aten::avg_pool2d_backward.grad_input"))
        self.check(lambda t: F.adaptive_avg_pool2d(t, (2, 3)), [x], torch.float32,
                   recorded=("aten::_adaptive_avg_pool2d",
                             "aten::_adaptive_avg_pool2d_backward"))
        with self.assertRaisesRegex(RuntimeError, "pad should be"):
            F.avg_pool2d(x.to(DEVICE), 2, 2, 2)


class EdgeCases(unittest.TestCase):
    """What PyTorch users rely on at the edges: each against the CPU's answer."""

    def same(self, fn):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = fn(DEVICE)
        want = fn("cpu")
        self.assertEqual(got.device.type, DEVICE)
        self.assertEqual(got.dtype, want.dtype)
        self.assertTrue(torch.equal(got.cpu(), want), f"{got.cpu()} != {want}")

    def test_reductions_of_a_scalar(self):
        for fn in (lambda d: torch.tensor(3.0, device=d).sum(0),
                   lambda d: torch.tensor(3.0, device=d).mean(-1),
                   lambda d: torch.amax(torch.tensor(-2.0, device=d), 0, keepdim=True)):
            self.same(fn)
        with self.assertRaises(IndexError):
            torch.tensor(3.0, device=DEVICE).sum(1)

    def test_conversions_to_bool_are_truth_values(self):
        self.same(lambda d: torch.tensor([0.5, -1.0, 2.0, 0.0, float("nan")], device=d).bool())
        self.same(lambda d: torch.tensor([-3, 0, 2], dtype=torch.int32, device=d).bool())
        self.same(lambda d: torch.tensor([True, False, True], device=d) +
                  torch.tensor([True, False, False], device=d))
        self.same(lambda d: torch.cat([torch.tensor([0.25, 0.0], device=d)] * 2).bool())

    def test_floats_to_small_integers_wrap_as_on_the_cpu(self):
        # Truncated to an int, then its low bits (the device's own conversion saturates).
        x = torch.tensor([1.5, -1.0, -0.5, 255.9, 300.0, -300.0, 40000.0, -129.0])
        for dtype in (torch.uint8, torch.int8, torch.int16):
            for source in (torch.float32, torch.bfloat16, torch.float16):
                self.same(lambda d: x.to(source).to(d).to(dtype))

    def test_integer_scalars_with_a_fractional_alpha(self):
        self.same(lambda d: torch.add(torch.zeros(3, device=d), 3, alpha=0.5))
        self.same(lambda d: torch.zeros(3, device=d).sub(1, alpha=0.25))

    def test_copy_broadcasts_its_source(self):
        self.same(lambda d: torch.empty(2, 3, device=d).copy_(torch.arange(3.0)))
        self.same(lambda d: torch.empty(2, 3, device=d).copy_(torch.arange(3.0, device=d)))
        self.same(lambda d: torch.empty(4, 2, device=d).copy_(torch.tensor([[1.0], [2.0], [3.0], [4.0]]).to(d)))
        with self.assertRaises(RuntimeError):
            torch.empty(2, 3, device=DEVICE).copy_(torch.ones(4))

    def test_tensors_of_more_than_8_dims(self):
        # Copies and elementwise ops merge the dims their operands share a layout in; ten dims
        # of a contiguous tensor are one.
        shape = [2, 1, 3, 2, 1, 2, 2, 3, 2, 2]
        x = torch.arange(576, dtype=torch.float32).reshape(shape)
        self.same(lambda d: x.to(d))
        self.same(lambda d: x.to(d) + x.to(d) * 2)
        self.same(lambda d: x.to(d) - torch.arange(2.0).to(d))  # broadcast over the last dim
        self.same(lambda d: torch.relu(x.to(d) - 100))
        self.same(lambda d: x.to(d)[:, :, 1:].contiguous())  # a strided slice that merges
        self.same(lambda d: torch.where(x.to(d) > 50, x.to(d), -x.to(d)))
        # Dims of size 1 go: reversed, these are 8.
        self.same(lambda d: x.to(d).permute(*reversed(range(10))).contiguous())
        # What does not merge to 8 dims is refused, saying so.
        y = torch.arange(1024, dtype=torch.float32).reshape([2] * 10)
        with self.assertRaises(RuntimeError) as caught:
            y.to(DEVICE).permute(*reversed(range(10))).contiguous()
        self.assertIn("at most 8 dims", str(caught.exception))
        with self.assertRaises(RuntimeError) as caught:
            y.to(DEVICE).sum(dim=3)
        self.assertIn("at most 8 dims", str(caught.exception))

    def test_threshold_backward_selects(self):
        # An infinite gradient where the input is at or below the threshold gives 0, not NaN.
        self.same(lambda d: torch.ops.aten.threshold_backward(
            torch.tensor([float("inf"), 1.0, -2.0], device=d), torch.tensor([0.0, 1.0, 3.0], device=d), 0.5))

    def test_arange_refuses_an_infinite_range(self):
        with self.assertRaises(RuntimeError):
            torch.arange(0, float("inf"), device=DEVICE)

    def test_timed_events_dropped_while_queued(self):
        # Each event's timestamp is written by the queue later; dropping the event must wait.
        for _ in range(200):
            e = torch_trn.Event(enable_timing=True)
            e.record()
        torch_trn.synchronize()

    def test_in_place_cpu_fallbacks_on_views_write_through_the_view(self):
        # The CPU fallback copies results back through resize_, which must keep a view's strides.
        views = {"step": lambda x: x[:, ::2], "t": lambda x: x.t(), "col": lambda x: x[:, 1:2]}
        ops = {"masked_fill_": lambda v: v.masked_fill_(v > 5, -1.0), "sin_": lambda v: v.sin_(),
               "cumsum_": lambda v: v.cumsum_(1)}
        for vname, view in views.items():
            for oname, op in ops.items():
                with self.subTest(view=vname, op=oname):
                    def run(d):
                        x = torch.arange(16.0).view(4, 4).to(d)
                        v = view(x)
                        op(v)
                        self.assertEqual(v.stride(), view(torch.empty(4, 4)).stride())
                        return x
                    self.same(run)
        self.same(lambda d: torch.sin(torch.tensor([[0.0, 1.0], [2.0, 3.0]], device=d),
                                      out=torch.zeros(2, 2, device=d).t()))
        y = torch.zeros(3, 2, device=DEVICE).t()
        y.resize_(2, 3)
        self.assertEqual(y.stride(), (1, 2))

    def test_repeat_tile_and_unfold_are_views_of_the_data(self):
        self.same(lambda d: torch.arange(6.0).view(2, 3).to(d).repeat(2, 2))
        self.same(lambda d: torch.arange(6.0).view(2, 3).to(d).repeat(3, 1, 2))
        self.same(lambda d: torch.arange(3).to(d).tile((2,)))
        def write_through(d):
            x = torch.arange(16.0).view(4, 4).to(d)
            x.unfold(1, 2, 2).mul_(10)
            return x
        self.same(write_through)

    def test_indexing_with_device_indices_and_masks(self):
        x = torch.arange(12.0).view(3, 4)
        i, m = torch.tensor([2, 0]), x > 5
        self.same(lambda d: x.to(d)[i.to(d)])
        self.same(lambda d: x.to(d)[m.to(d)])
        self.same(lambda d: x.to(d)[i.to(d), i.to(d)])
        a = torch.arange(12.0, device=DEVICE).view(3, 4).requires_grad_()
        a[torch.tensor([0, 2], device=DEVICE)].sum().backward()
        self.assertEqual(a.grad.cpu().sum(1).tolist(), [4.0, 0.0, 4.0])

    def test_out_arguments_are_sized_and_type_checked(self):
        a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
        def into(fn, shape=(0,), dtype=torch.float32):
            def run(d):
                out = torch.zeros(shape, device=d, dtype=dtype)
                fn(a.to(d), out)
                return out
            return run
        self.same(into(lambda x, o: torch.add(x, 1, out=o)))
        self.same(into(lambda x, o: torch.mul(x, x, out=o)))
        self.same(into(lambda x, o: torch.gt(x, 2, out=o), dtype=torch.bool))
        self.same(into(lambda x, o: torch.addcmul(x, x, x, value=2, out=o)))
        self.same(into(lambda x, o: torch.sum(x, 1, out=o)))
        self.same(into(lambda x, o: torch.amax(x, 1, keepdim=True, out=o)))
        self.same(into(lambda x, o: torch.cat([x, x], 1, out=o), shape=(1,)))
        self.same(lambda d: torch.logsumexp(a.to(d), 1))
        # A float sum into an int64 out= adds the truncated elements, as PyTorch's does.
        self.same(lambda d: torch.sum(torch.tensor([0.6, 0.6], device=d), 0,
                                      out=torch.zeros((), dtype=torch.int64, device=d)))
        for bad in ([torch.zeros(3), torch.zeros(3, 4)], [torch.zeros(2, 3), torch.zeros(2, 1)]):
            with self.assertRaises(RuntimeError):
                torch.cat([t.to(DEVICE) for t in bad], 0, out=torch.zeros(1, device=DEVICE))
        with self.assertRaises(RuntimeError):
            torch.amax(a.to(DEVICE), 1, out=torch.zeros(2, dtype=torch.float64, device=DEVICE))
        with self.assertRaises(RuntimeError):
            torch.add(a.to(DEVICE), 0.5, out=torch.zeros(2, 2, dtype=torch.int64, device=DEVICE))
        # dtype= casts before it sums: 0.6 + 0.6 is 0 + 0 in int64.
        self.same(lambda d: torch.tensor([[0.6, 0.6], [1.7, -1.7]], device=d).sum(0, dtype=torch.int64))

    def test_relu_backward_selects(self):
        for g in (float("inf"), float("nan")):
            def grad(d):
                x = torch.tensor([-1.0, 0.0, 1.0], device=d, requires_grad=True)
                return torch.autograd.grad(F.relu(x), x, torch.full((3,), g, device=d))[0]
            got, want = grad(DEVICE).cpu(), grad("cpu")
            self.assertTrue(torch.equal(got.nan_to_num(7.0), want.nan_to_num(7.0)), f"{got} != {want}")

    def test_cross_entropy_with_masked_classes_and_bad_targets(self):
        inf = float("inf")
        x, t = torch.tensor([[-inf, 1.0, 2.0], [0.0, -inf, 1.0]]), torch.tensor([1, 2])
        for reduction in ("mean", "sum"):
            want = F.cross_entropy(x, t, reduction=reduction)
            got = F.cross_entropy(x.to(DEVICE), t.to(DEVICE), reduction=reduction)
            self.assertAlmostEqual(got.item(), want.item(), places=5)
        # A target that is no class: the CPU raises; the device gives NaN, never a plausible loss.
        for bad in ([1, 3], [1, -5]):
            loss = F.cross_entropy(torch.randn(2, 3).to(DEVICE), torch.tensor(bad).to(DEVICE))
            self.assertTrue(loss.isnan().item(), bad)

    def test_float16_ops_that_fall_back_run_widened(self):
        # An op with no float16 CPU kernel runs in float32 and comes back as float16, in place
        # and out= included; float16 ops on the device (sin, cumsum, topk) compute alike.
        x = torch.tensor([[0.5, -1.25, 2.0], [3.5, 0.25, -0.75]])
        cases = {
            "sin": lambda t: t.sin(), "cumsum": lambda t: t.cumsum(1),
            "topk": lambda t: t.topk(2, 1).values, "prod": lambda t: t.prod(1),
            "atan": lambda t: t.atan(), "cumprod": lambda t: t.cumprod(1),
            "atan_ on a view": lambda t: (lambda c: (c[:, ::2].atan_(), c)[1])(t.clone()),
            "out=": lambda t: torch.floor(t, out=torch.empty(2, 3, dtype=t.dtype, device=t.device)),
        }
        for name, f in cases.items():
            with self.subTest(op=name):
                got = f(x.half().to(DEVICE))
                self.assertEqual(got.dtype, torch.float16)
                self.assertLessEqual(max_error(f(x).half().float(), got.cpu().float()), 2e-3)

    def test_fill_converts_as_pytorch_does(self):
        # A value the dtype cannot hold raises; an integer is stored as its conversion.
        self.same(lambda d: torch.full((2,), -1, dtype=torch.uint8, device=d))
        self.same(lambda d: torch.full((2,), -7.9, dtype=torch.int32, device=d))
        for value, dtype in ((300, torch.uint8), (2 ** 40, torch.int32), (1e39, torch.float32)):
            with self.subTest(value=value, dtype=dtype):
                with self.assertRaisesRegex(RuntimeError, "without overflow"):
                    torch.full((2,), value, dtype=dtype, device=DEVICE)

    def test_factories_that_fall_back_land_on_the_device_asked_for(self):
        self.same(lambda d: torch.tril_indices(3, 3, device=d))
        self.same(lambda d: torch.triu_indices(4, 3, 1, device=d))

    def test_embedding_of_an_index_that_is_no_row_is_nan(self):
        # The CPU raises; the device gives NaN for that row, never zeros that look like a row.
        w = randn(3, 2)
        out = F.embedding(torch.tensor([[1, 5], [-1, 0]]).to(DEVICE), w.to(DEVICE)).cpu()
        self.assertTrue(out[0, 1].isnan().all() and out[1, 0].isnan().all())
        self.assertTrue(torch.equal(out[0, 0], w[1]) and torch.equal(out[1, 1], w[0]))

    def test_batch_norm_updates_its_running_statistics(self):
        x = randn(6, 3, 4, 4)
        cpu, dev = torch.nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3).to(DEVICE)
        for _ in range(2):
            y_c, y_d = cpu(x), dev(x.to(DEVICE))
            self.assertLessEqual(max_error(y_c.detach(), y_d.detach().cpu()), 1e-4)
        self.assertLessEqual(max_error(cpu.running_mean, dev.running_mean.cpu()), 1e-5)
        self.assertLessEqual(max_error(cpu.running_var, dev.running_var.cpu()), 1e-5)
        cpu.eval()
        dev.eval()
        self.assertLessEqual(max_error(cpu(x).detach(), dev(x.to(DEVICE)).detach().cpu()), 1e-4)

    def test_resize_on_another_stream_keeps_the_values(self):
        t = torch.arange(4.0, device=DEVICE)
        with torch_trn.stream(torch_trn.Stream()):
            t.resize_(1000)
            head = t[:4].cpu()
        self.assertEqual(head.tolist(), [0.0, 1.0, 2.0, 3.0])


class Softmax(OpCase):
    def test_softmax_log_softmax(self):
        for dtype in DTYPES:
            for shape, dim in (((4, 10), 1), ((3, 5, 7), -1), ((3, 5, 7), 1), ((6, 4), 0), ((), 0)):
                for name, fn in (("softmax", torch.softmax), ("log_softmax", torch.log_softmax)):
                    with self.subTest(case=f"{name} {shape} dim={dim}", dtype=dtype_name(dtype)):
                        self.check(lambda x, d=dim, fn=fn: fn(x, d), [randn(*shape)], dtype,
                                   on_device=("_softmax", "_log_softmax", "_softmax_backward_data",
                                              "_log_softmax_backward_data", "softmax", "log_softmax"))
            with self.subTest(case="softmax of a transposed view", dtype=dtype_name(dtype)):
                self.check(lambda x: torch.softmax(x.t(), -1), [randn(8, 6)], dtype,
                           on_device=("_softmax", "_softmax_backward_data", "softmax"))


class LayerNorm(OpCase):
    ON_DEVICE = ("native_layer_norm", "native_layer_norm_backward", "layer_norm",
                 "layer_norm_backward")

    def test_layer_norm(self):
        for dtype in DTYPES:
            for shape, ns, affine in (((4, 16), (16,), True), ((2, 3, 8), (3, 8), True),
                                      ((5, 32), (32,), False), ((2, 3, 8), (8,), True)):
                x = randn(*shape)
                args = [x, randn(*ns, seed=1) + 1, randn(*ns, seed=2)] if affine else [x]
                with self.subTest(case=f"layer_norm {shape} {ns} affine={affine}", dtype=dtype_name(dtype)):
                    self.check(lambda x, w=None, b=None, ns=ns: F.layer_norm(x, ns, w, b), args,
                               dtype, on_device=self.ON_DEVICE)
                with self.subTest(case=f"native_layer_norm stats {shape} {ns} affine={affine}",
                                  dtype=dtype_name(dtype)):
                    self.check(lambda x, w=None, b=None, ns=ns: torch.native_layer_norm(x, ns, w, b, 1e-5),
                               args, dtype, on_device=self.ON_DEVICE)
            x = randn(4, 16)
            with self.subTest(case="layer_norm weight only", dtype=dtype_name(dtype)):
                self.check(lambda x, w: F.layer_norm(x, (16,), w, None), [x, randn(16, seed=1)], dtype,
                           on_device=self.ON_DEVICE)
            with self.subTest(case="layer_norm bias only", dtype=dtype_name(dtype)):
                self.check(lambda x, b: F.layer_norm(x, (16,), None, b), [x, randn(16, seed=1)], dtype,
                           on_device=self.ON_DEVICE)


class Losses(OpCase):
    NLL = ("nll_loss_forward", "nll_loss_backward", "nll_loss", "_log_softmax",
           "_log_softmax_backward_data")
    HOST_NLL = ("trn_ops::nll_loss", "trn_ops::nll_loss_backward")

    def test_nll_cross_entropy(self):
        for dtype in DTYPES:
            for n, c in ((8, 5), (33, 10), (1, 3)):
                x = randn(n, c)
                t = torch.randint(0, c, (n,), generator=torch.Generator().manual_seed(n))
                if n > 2:
                    t[1] = -100
                for red in ("mean", "sum", "none"):
                    # mean and sum on the device; reduction='none' on libtrn_ops' host reference.
                    where = dict(recorded=self.HOST_NLL) if red == "none" else dict(on_device=self.NLL)
                    for name, fn in (("cross_entropy", F.cross_entropy), ("nll_loss", F.nll_loss)):
                        with self.subTest(case=f"{name} [{n},{c}] {red}", dtype=dtype_name(dtype)):
                            self.check(lambda x, t, r=red, fn=fn: fn(x, t, reduction=r), [x, t], dtype, **where)
                with self.subTest(case=f"nll_loss class weights [{n},{c}] (host)", dtype=dtype_name(dtype)):
                    self.check(lambda x, t, w: F.nll_loss(x, t, weight=w), [x, t, positive(c, seed=3)],
                               dtype, nondiff=(2,), recorded=self.HOST_NLL)
                with self.subTest(case=f"nll_loss ignore_index=2 [{n},{c}]", dtype=dtype_name(dtype)):
                    self.check(lambda x, t: F.nll_loss(x, t, ignore_index=2), [x, t.clamp(min=0)], dtype,
                               on_device=self.NLL)
                with self.subTest(case=f"nll_loss_forward total_weight [{n},{c}]", dtype=dtype_name(dtype)):
                    self.check(lambda x, t: torch.ops.aten.nll_loss_forward(x, t, None, 1, -100), [x, t],
                               dtype, on_device=self.NLL)
            with self.subTest(case="nll_loss 1-D input", dtype=dtype_name(dtype)):
                self.check(lambda x, t: F.nll_loss(x, t), [randn(5), torch.tensor(3)], dtype)
            with self.subTest(case="nll_loss every target ignored (NaN)", dtype=dtype_name(dtype)):
                self.check(lambda x, t: F.nll_loss(x, t), [randn(4, 5), torch.full((4,), -100)], dtype,
                           grad=False, on_device=self.NLL)

    def test_mse(self):
        for dtype in DTYPES:
            for shape in ((4, 7), (3, 2, 5), ()):
                for red in ("mean", "sum", "none"):
                    with self.subTest(case=f"mse_loss {shape} {red}", dtype=dtype_name(dtype)):
                        # The CPU's bfloat16 mse_loss rounds its intermediates: float32, rounded.
                        self.check(lambda x, y, r=red: F.mse_loss(x, y, reduction=r),
                                   [randn(*shape), randn(*shape, seed=1)], dtype,
                                   ref_f32=dtype != torch.float32,
                                   on_device=("mse_loss", "mse_loss_backward"))


class Convolution(OpCase):
    CONV = ("convolution_overrideable", "convolution_backward_overrideable", "conv2d",
            "conv2d_backward")

    @staticmethod
    def tolerances(dtype):
        # Weight gradients sum over batch and positions: 1e-3 in float32.
        return dict(grad_atol=1e-3) if dtype == torch.float32 else {}

    def test_conv2d(self):
        for dtype in DTYPES:
            for (n, c, h, w, o, k, s, p, d, bias) in ((2, 3, 8, 8, 4, 3, 1, 1, 1, True),
                                                      (1, 4, 9, 7, 6, 3, 2, 0, 1, False),
                                                      (2, 2, 10, 10, 3, 3, 1, 2, 2, True),
                                                      (2, 3, 5, 5, 2, 1, 1, 0, 1, True),
                                                      (1, 3, 6, 8, 2, (2, 3), (1, 2), (1, 0), 1, True)):
                kh, kw = k if isinstance(k, tuple) else (k, k)
                args = [randn(n, c, h, w), randn(o, c, kh, kw, seed=1) * 0.3]
                if bias:
                    args.append(randn(o, seed=2))
                with self.subTest(case=f"conv2d x[{n},{c},{h},{w}] w[{o},{c},{kh},{kw}] s{s} p{p} d{d} "
                                       f"bias={bias}", dtype=dtype_name(dtype)):
                    self.check(lambda x, w, b=None, s=s, p=p, d=d: F.conv2d(x, w, b, s, p, d), args,
                               dtype, on_device=self.CONV, **self.tolerances(dtype))
            x = randn(2, 4, 6, 6)
            with self.subTest(case="conv2d input grad only", dtype=dtype_name(dtype)):
                self.check(lambda x, w: F.conv2d(x, w), [x, randn(4, 4, 3, 3, seed=1)], dtype,
                           nondiff=(1,), on_device=self.CONV, **self.tolerances(dtype))
            with self.subTest(case="conv2d weight grad only", dtype=dtype_name(dtype)):
                self.check(lambda x, w: F.conv2d(x, w), [x, randn(4, 4, 3, 3, seed=1)], dtype,
                           nondiff=(0,), on_device=self.CONV, **self.tolerances(dtype))
            with self.subTest(case="nn.Conv2d module", dtype=dtype_name(dtype)):
                conv = torch.nn.Conv2d(4, 3, 3, padding=1)
                self.check(lambda x, w, b: F.conv2d(x, w, b, padding=1),
                           [x, conv.weight.detach(), conv.bias.detach()], dtype,
                           on_device=self.CONV, **self.tolerances(dtype))
            # groups > 1: libtrn_ops' host reference.
            with self.subTest(case="conv2d groups=2 (host)", dtype=dtype_name(dtype)):
                self.check(lambda x, w: F.conv2d(x, w, groups=2), [x, randn(4, 2, 3, 3, seed=1)], dtype,
                           on_device=("convolution_overrideable", "convolution_backward_overrideable"),
                           recorded=("trn_ops::conv2d", "trn_ops::conv2d_backward"),
                           **self.tolerances(dtype))
            # 1-D: PyTorch views it as a 2-D convolution before the backend sees it.
            with self.subTest(case="conv1d", dtype=dtype_name(dtype)):
                self.check(lambda x, w: F.conv1d(x, w, padding=1),
                           [randn(2, 3, 10), randn(4, 3, 3, seed=1)], dtype, **self.tolerances(dtype))

    def test_conv_on_the_cpu(self):
        # Transposed and 3-D convolutions run on the CPU, recorded. Float32 only: PyTorch 1.13's
        # CPU has no bfloat16 transposed convolution (slow_conv_transpose2d: "not implemented for
        # 'BFloat16'"; mkldnn's path mistakes the weight's layout), so neither has the fallback.
        dtype = torch.float32
        recorded = ("aten::convolution_overrideable", "aten::convolution_backward_overrideable")
        with self.subTest(case="conv_transpose2d (cpu)"):
            self.check(lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1),
                       [randn(2, 3, 5, 5), randn(3, 4, 3, 3, seed=1)], dtype, recorded=recorded,
                       **self.tolerances(dtype))
        with self.subTest(case="conv_transpose2d bias (cpu)"):
            self.check(lambda x, w, b: F.conv_transpose2d(x, w, b),
                       [randn(2, 3, 5, 5), randn(3, 4, 3, 3, seed=1), randn(4, seed=2)], dtype,
                       recorded=recorded, **self.tolerances(dtype))
        with self.subTest(case="conv3d (cpu)"):
            self.check(lambda x, w: F.conv3d(x, w), [randn(1, 2, 5, 5, 5), randn(3, 2, 3, 3, 3, seed=1)],
                       dtype, recorded=recorded, **self.tolerances(dtype))


class Pooling(OpCase):
    FWD = ("max_pool2d_with_indices", "max_pool2d")
    BWD = ("max_pool2d_with_indices_backward", "max_pool2d_backward")

    def test_max_pool2d(self):
        # (shape, kernel, stride, padding, dilation, ceil_mode, forward on the device,
        #  backward on the device)
        cases = (((2, 3, 8, 8), 2, None, 0, 1, False, True, True),       # MaxPool2d(2), even: tiles
                 ((2, 3, 6, 6), 3, 3, 0, 1, False, True, True),           # 3x3 windows tiling
                 ((2, 3, 7, 7), 2, None, 0, 1, False, True, False),       # odd: a row left out
                 ((3, 10, 10), 2, 2, 0, 2, False, True, False),           # dilated, unbatched
                 ((2, 3, 8, 8), (2, 3), (1, 2), 0, 1, False, True, False),  # overlapping windows
                 ((1, 2, 9, 7), 3, 2, 1, 1, False, False, False),         # padding: host
                 ((2, 2, 9, 9), 3, 2, 1, 1, True, False, False),          # padding, ceil: host
                 ((1, 2, 7, 7), 2, 2, 0, 1, True, False, False))          # a window sticks out: host
        for dtype in DTYPES:
            for (shape, k, s, p, d, ceil, fwd_dev, bwd_dev) in cases:
                where = dict(on_device=(self.FWD if fwd_dev else ()) + (self.BWD if bwd_dev else ()),
                             recorded=(() if fwd_dev else ("trn_ops::max_pool2d",)) +
                             (() if bwd_dev else ("trn_ops::max_pool2d_backward",)))
                for indices in (False, True):
                    with self.subTest(case=f"max_pool2d {shape} k{k} s{s} p{p} d{d} ceil={ceil} "
                                           f"indices={indices}", dtype=dtype_name(dtype)):
                        self.check(lambda x, k=k, s=s, p=p, d=d, c=ceil, i=indices:
                                   F.max_pool2d(x, k, s, p, d, ceil_mode=c, return_indices=i),
                                   [randn(*shape)], dtype, **where)

    def test_ties_and_nan(self):
        x = torch.tensor([[[[1.0, 1.0, 2.0, 0.0], [1.0, 0.0, 2.0, 2.0],
                            [float("nan"), 3.0, -1.0, -1.0], [0.0, 3.0, -1.0, -1.0]]]])
        for dtype in DTYPES:
            with self.subTest(dtype=dtype_name(dtype)):
                self.check(lambda x: F.max_pool2d(x, 2, return_indices=True), [x], dtype, grad=False,
                           on_device=self.FWD)


# --- dtypes ----------------------------------------------------------------------------------

class Dtypes(unittest.TestCase):
    """A small network's forward and backward keeps its dtype on trn: bfloat16 stays bfloat16
    (values within bfloat16's tolerance of the CPU's bfloat16 result), float32 stays float32."""

    @staticmethod
    def block(x, w1, b1, w2, g, b):
        h = F.gelu(F.linear(x, w1, b1))
        h = F.layer_norm(h, (h.shape[-1],), g, b)
        scores = torch.softmax(h @ h.transpose(-2, -1) / 4.0, -1)
        y = F.linear(scores @ h, w2).relu() * 0.5 + 1.0
        return y, y.mean()

    def run_block(self, dtype):
        params = [randn(2, 5, 8), randn(16, 8, seed=1) * 0.3, randn(16, seed=2),
                  randn(4, 16, seed=3) * 0.3, randn(16, seed=4) + 1, randn(16, seed=5)]
        cpu = [t.to(dtype).detach().clone().requires_grad_() for t in params]
        dev = [t.to(dtype).to(DEVICE).detach().requires_grad_() for t in params]
        y_c, loss_c = self.block(*cpu)
        y_d, loss_d = self.block(*dev)
        loss_c.backward()
        loss_d.backward()
        for name, c, d in (("y", y_c, y_d), ("loss", loss_c, loss_d)):
            self.assertEqual(d.dtype, dtype, name)
            self.assertEqual(d.device.type, DEVICE, name)
            self.assertLessEqual(max_error(c.detach(), d.detach().cpu()), TOLERANCE[dtype], name)
        for i, (c, d) in enumerate(zip(cpu, dev)):
            self.assertEqual(d.grad.dtype, dtype, f"grad {i}")
            self.assertLessEqual(max_error(c.grad, d.grad.cpu()), TOLERANCE[dtype], f"grad {i}")

    def test_bfloat16_stays_bfloat16(self):
        self.run_block(torch.bfloat16)
        x = randn(3, 4).to(torch.bfloat16).to(DEVICE)
        for name, out in (("x * 2.0", x * 2.0), ("x + cpu f32 0-dim", x + torch.tensor(1.5)),
                          ("x / 3", x / 3), ("exp", x.exp()), ("sum", x.sum()),
                          ("mean dim", x.mean(0)), ("mm", x @ x.t())):
            with self.subTest(case=name):
                self.assertEqual(out.dtype, torch.bfloat16)

    def test_float32_stays_float32(self):
        self.run_block(torch.float32)
        x = randn(3, 4).to(DEVICE)
        for name, out in (("x * 2", x * 2), ("x + cpu int 0-dim", x + torch.tensor(1)),
                          ("sum", x.sum()), ("mm", x @ x.t())):
            with self.subTest(case=name):
                self.assertEqual(out.dtype, torch.float32)


class Integers(unittest.TestCase):
    """int64 tensors compute exactly, beyond 2^53 where float64 would round, and wrap on overflow
    as PyTorch's CPU kernels do (docs/torch.md)."""

    def test_int64_beyond_2_53_matches_the_cpu_bit_for_bit(self):
        big = 2 ** 60 + 1
        a = torch.tensor([big, -big, 2 ** 63 - 1, -2 ** 63, 7], dtype=torch.int64)
        b = torch.tensor([3, big - 1, 1, -1, big], dtype=torch.int64)
        cases = {
            "add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul": lambda x, y: x * y,
            "scalar": lambda x, y: 3 - x * 5 + 1, "neg": lambda x, y: -x,
            "abs": lambda x, y: x.abs(), "maximum": lambda x, y: torch.maximum(x, y),
            "eq": lambda x, y: x == (y - 3 + 3), "lt": lambda x, y: x < y,
            "where": lambda x, y: torch.where(x > y, x, y), "sum": lambda x, y: x.sum(),
            "sum dim": lambda x, y: torch.stack([x, y]).sum(0),
            "max": lambda x, y: x.max(), "argmax": lambda x, y: torch.stack([x, y]).argmax(1),
            "to int32": lambda x, y: x.to(torch.int32), "to uint8": lambda x, y: x.to(torch.uint8),
            "pow": lambda x, y: x ** 3, "pow tensor": lambda x, y: torch.pow(x, y.abs() % 5),
        }
        for name, f in cases.items():
            with self.subTest(op=name):
                want = f(a, b)
                got = f(a.to(DEVICE), b.to(DEVICE))
                self.assertEqual(got.dtype, want.dtype)
                self.assertTrue(torch.equal(got.cpu(), want), f"{got.cpu()} != {want}")


    def test_int_add_sub_arange_and_counters_stay_on_the_device(self):
        # int32 and int64 add and sub run on the device in 16-bit limbs with a carry, exact and
        # wrapping; int64 arange and small fills write (low, high) words: none is a fallback.
        for dtype in (torch.int32, torch.int64):
            info = torch.iinfo(dtype)
            g = torch.Generator().manual_seed(3)
            a = torch.randint(info.min, info.max, (300,), dtype=dtype, generator=g)
            b = torch.randint(info.min, info.max, (300,), dtype=dtype, generator=g)
            a[:3] = torch.tensor([info.max, info.min, -1], dtype=dtype)
            b[:3] = torch.tensor([1, -1, -1], dtype=dtype)
            cases = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y,
                     "add scalar": lambda x, y: x + 5, "sub scalar": lambda x, y: x - 70000,
                     "add_ in place": lambda x, y: x.clone().add_(1)}
            for name, f in cases.items():
                with self.subTest(op=name, dtype=str(dtype)):
                    torch_trn.reset_fallback_ops()
                    got = f(a.to(DEVICE), b.to(DEVICE))
                    self.assertTrue(torch.equal(got.cpu(), f(a, b)))
                    self.assertEqual(torch_trn.fallback_ops(), {})
        torch_trn.reset_fallback_ops()
        positions = torch.arange(-5, 300, 7, device=DEVICE)
        counter = torch.zeros((), dtype=torch.int64, device=DEVICE)
        for _ in range(3):
            counter.add_(1)  # BatchNorm's num_batches_tracked
        self.assertTrue(torch.equal(positions.cpu(), torch.arange(-5, 300, 7)))
        self.assertEqual(counter.item(), 3)
        self.assertEqual(torch_trn.fallback_ops(), {})

    def test_python_ints_beyond_2_53_stay_exact(self):
        big = 2 ** 53 + 1  # a double would round it to 2^53
        cases = {
            "add": lambda d: torch.tensor([0, 1], device=d) + big,
            "rsub": lambda d: big - torch.tensor([0, 1], device=d),
            "eq": lambda d: torch.tensor([big - 1, big], device=d) == big,
            "ge": lambda d: torch.tensor([big - 1, big], device=d) >= big,
            "full": lambda d: torch.full((2,), big, device=d),
            "fill_": lambda d: torch.zeros(3, dtype=torch.int64, device=d).fill_(big),
        }
        for name, f in cases.items():
            with self.subTest(op=name):
                want, got = f("cpu"), f(DEVICE).cpu()
                self.assertTrue(torch.equal(got, want), f"{got} != {want}")

if __name__ == "__main__":
    unittest.main()
