"""torch.trn as a user of torch.cuda expects it: random number generators (seeds, states,
generators, dropout), device properties, memory summaries, torch.accelerator, autocast,
record_stream and pinned memory, and bad arguments refused with messages that say what to do."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trn_test_env  # noqa: E402,F401  (first: sets TRN_SIM_ROOT before torch_trn starts libtrn)

import unittest
import warnings

import torch
import torch_trn

import models
from test_errors import _Gate, _libtrn
from trn_test_env import DEVICE


class RandomNumbers(unittest.TestCase):
    def test_manual_seed_reproduces_draws_and_does_not_warn(self):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # torch.manual_seed seeds trn without a warning
            torch.manual_seed(7)
        first = [torch.rand(16, device=DEVICE).cpu(), torch.randn(16, device=DEVICE).cpu(),
                 torch.randint(0, 100, (16,), device=DEVICE).cpu()]
        torch.trn.manual_seed(7)
        second = [torch.rand(16, device=DEVICE).cpu(), torch.randn(16, device=DEVICE).cpu(),
                  torch.randint(0, 100, (16,), device=DEVICE).cpu()]
        for a, b in zip(first, second):
            self.assertTrue(torch.equal(a, b))
        self.assertEqual(torch.trn.initial_seed(), 7)
        self.assertFalse(torch.equal(first[0], torch.rand(16, device=DEVICE).cpu()))

    def test_state_round_trip_and_offset(self):
        torch.trn.manual_seed(1)
        state = torch.trn.get_rng_state()
        self.assertEqual((state.dtype, state.numel(), state.device.type), (torch.uint8, 16, "cpu"))
        a = torch.randn(1000, device=DEVICE).cpu()
        self.assertGreater(int.from_bytes(bytes(torch.trn.get_rng_state()[8:].tolist()), "little"),
                           0, "the offset moved past the blocks drawn")
        torch.trn.set_rng_state(state)
        self.assertTrue(torch.equal(a, torch.randn(1000, device=DEVICE).cpu()))
        states = torch.trn.get_rng_state_all()
        self.assertEqual(len(states), torch.trn.device_count())
        torch.trn.set_rng_state_all(states)

    def test_distributions(self):
        torch_trn.reset_fallback_ops()
        torch.trn.manual_seed(0)
        u = torch.empty(200000, device=DEVICE).uniform_(-2, 3).cpu()
        self.assertGreaterEqual(u.min().item(), -2)
        self.assertLess(u.max().item(), 3)
        self.assertAlmostEqual(u.mean().item(), 0.5, delta=0.02)
        n = torch.empty(200000, device=DEVICE).normal_(1.0, 2.0).cpu()
        self.assertAlmostEqual(n.mean().item(), 1.0, delta=0.03)
        self.assertAlmostEqual(n.std().item(), 2.0, delta=0.03)
        r = torch.randint(-3, 5, (100000,), device=DEVICE).cpu()
        self.assertEqual(sorted(r.unique().tolist()), list(range(-3, 5)))
        b = torch.empty(100000, device=DEVICE).bernoulli_(0.25).cpu()
        self.assertAlmostEqual(b.mean().item(), 0.25, delta=0.01)
        p = torch.tensor([0.0, 1.0]).repeat(1000).to(DEVICE)
        self.assertTrue(torch.equal(torch.bernoulli(p).cpu(), p.cpu()))
        self.assertEqual(torch_trn.get_fallback_ops(), {})

    def test_a_generator_of_its_own(self):
        g = torch.Generator(device=DEVICE)
        g.manual_seed(3)
        a = torch.rand(8, device=DEVICE, generator=g).cpu()
        g.manual_seed(3)
        self.assertTrue(torch.equal(a, torch.rand(8, device=DEVICE, generator=g).cpu()))

    def test_dropout_rate_scale_and_reproducibility(self):
        x = torch.ones(100000, device=DEVICE, requires_grad=True)
        torch.trn.manual_seed(5)
        y = torch.nn.functional.dropout(x, 0.1)
        kept = (y.detach().cpu() != 0)
        self.assertAlmostEqual(kept.float().mean().item(), 0.9, delta=0.01)
        self.assertAlmostEqual(y.detach().cpu()[kept].max().item(), 1 / 0.9, places=5)
        y.sum().backward()
        self.assertTrue(torch.equal(x.grad.cpu() != 0, kept))
        torch.trn.manual_seed(5)
        again = torch.nn.functional.dropout(torch.ones(100000, device=DEVICE), 0.1).cpu()
        self.assertTrue(torch.equal(again, y.detach().cpu()))
        self.assertTrue(torch.equal(torch.nn.functional.dropout(x, 0.1, training=False).cpu(),
                                    x.detach().cpu()))

    def test_bad_arguments(self):
        with self.assertRaisesRegex(RuntimeError, "16 bytes"):
            torch.trn.set_rng_state(torch.zeros(3, dtype=torch.uint8))
        with self.assertRaisesRegex(RuntimeError, "no device|does not exist|out of range"):
            torch.trn.manual_seed(1, device=99)
        with self.assertRaisesRegex(RuntimeError, "trn generator"):
            torch.rand(4, device=DEVICE, generator=torch.Generator())
        with self.assertRaisesRegex(RuntimeError, "from"):
            torch.empty(4, device=DEVICE).uniform_(3, 1)


class DeviceModuleParity(unittest.TestCase):
    def test_properties_and_summary(self):
        props = torch.trn.get_device_properties(0)
        self.assertIn("NeuronCore", props.name)
        self.assertGreater(props.total_memory, 0)
        self.assertGreater(props.peak_bf16_flops, props.peak_fp32_flops)
        x = torch.ones(1 << 20, device=DEVICE)
        summary = torch.trn.memory_summary()
        self.assertIn("Allocated memory", summary)
        self.assertIn("trn:0", summary)
        del x

    def test_mem_get_info_counts_what_tensors_reserve(self):
        self.assertTrue(torch.trn.is_initialized())
        free, total = torch.trn.mem_get_info()
        self.assertEqual(total, torch.trn.get_device_properties(0).total_memory)
        self.assertLessEqual(free, total)
        x = torch.empty(64 << 20, dtype=torch.uint8, device=DEVICE)  # 64 MiB
        free_after, _ = torch.trn.mem_get_info(0)
        self.assertLessEqual(free_after, free - (64 << 20))
        del x
        torch.trn.empty_cache()
        self.assertGreaterEqual(torch.trn.mem_get_info()[0], free_after + (64 << 20))
        with self.assertRaisesRegex(RuntimeError, "not a trn device"):
            torch.trn.mem_get_info(99)

    def test_accelerator(self):
        self.assertTrue(torch.accelerator.is_available())
        self.assertEqual(torch.accelerator.current_accelerator().type, DEVICE)
        self.assertEqual(torch.accelerator.device_count(), torch.trn.device_count())
        y = torch.ones(4, device=DEVICE) * 3
        torch.accelerator.synchronize()
        self.assertEqual(y.cpu().tolist(), [3.0] * 4)

    def test_fallback_ops_under_torchneurons_name(self):
        self.assertEqual(torch.trn.get_fallback_ops(), torch_trn.fallback_ops())


def _squeeze(text):
    return "".join(text.replace(",", " ").split())


class Printing(unittest.TestCase):
    def test_print_is_the_cpu_text_with_the_device_and_warns_about_nothing(self):
        cases = [torch.randn(3, 4), torch.tensor([1.0, 2.0, 3.0]), torch.randn(3000).half(),
                 torch.tensor([1e-8, 1e9, float("inf"), float("nan"), 0.0]),
                 torch.tensor([1, 2, 3]), torch.tensor(True), torch.zeros(0),
                 torch.tensor([[1.5, -2.0]], dtype=torch.float64)]
        for cpu in cases:
            t = cpu.to(DEVICE)
            torch_trn.reset_fallback_ops()
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                text = repr(t)
            self.assertEqual(torch_trn.fallback_ops(), {}, text)
            want = repr(cpu)
            suffix = f"device='{t.device}'"
            self.assertIn(suffix, text)
            # The values' text is the CPU's: the same characters once the suffix is taken out
            # (it may move the line breaks).
            self.assertEqual(_squeeze(text.replace(suffix, "")), _squeeze(want), text)
        x = torch.randn(2, 2, device=DEVICE, requires_grad=True) * 2
        self.assertIn("grad_fn=<MulBackward0>", repr(x))


class Profiler(unittest.TestCase):
    def test_torch_profiler_shows_each_ops_device_time(self):
        import json
        import tempfile
        from torch.profiler import ProfilerActivity, profile
        self.assertIn(ProfilerActivity.TRN, torch.profiler.supported_activities())
        x, w = torch.randn(128, 128).to(DEVICE), torch.randn(128, 128).to(DEVICE)
        want = torch.relu(x.cpu() @ w.cpu()).sum()
        torch.trn.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.TRN]) as prof:
            got = torch.relu(x @ w).sum().cpu()
        self.assertTrue(torch.allclose(got, want, rtol=1e-4))
        rows = {e.key: e for e in prof.key_averages()}
        for op in ("mm", "relu", "sum"):
            device = rows[f"trn:aten::{op}"]
            self.assertGreater(device.self_device_time_total, 0, op)  # simulated device time
            self.assertEqual(device.cpu_time_total, 0, op)
            # Linked to the CPU op that queued it: its device time counts under that op too.
            self.assertGreater(rows[f"aten::{op}"].device_time_total, 0, op)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "trace.json")
            prof.export_chrome_trace(path)
            with open(path) as f:
                events = json.load(f)["traceEvents"]
        kernels = [e for e in events if e.get("cat") == "kernel"]
        self.assertLessEqual({"trn:aten::mm", "trn:aten::relu", "trn:aten::sum"},
                             {e["name"] for e in kernels})
        self.assertTrue(all(e["dur"] > 0 for e in kernels))
        # Outside a profile nothing is recorded: a second profile sees only its own ops.
        x.add_(1)
        with profile(activities=[ProfilerActivity.TRN]) as again:
            torch.neg(x)
            torch.trn.synchronize()
        names = [e.key for e in again.key_averages()]
        self.assertIn("trn:aten::neg", names)
        self.assertNotIn("trn:aten::add_", names)


class Autocast(unittest.TestCase):
    def test_matmuls_in_bf16_reductions_in_f32(self):
        layer = torch.nn.Linear(8, 8).to(DEVICE)
        x = torch.randn(4, 8, device=DEVICE)
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            y = layer(x)
            self.assertEqual(y.dtype, torch.bfloat16)
            self.assertEqual(torch.softmax(y, -1).dtype, torch.float32)
        self.assertEqual(layer(x).dtype, torch.float32)

    def test_gpt_trains_under_autocast(self):
        model, opt, batch, loss_fn = models.build_gpt(DEVICE)
        reference, ref_opt, _, _ = models.build_gpt(DEVICE)
        losses = []
        torch_trn.reset_fallback_ops()
        for _ in range(4):
            with torch.autocast(DEVICE, dtype=torch.bfloat16):
                losses.append(models.train_step(model, opt, batch, loss_fn, models.CLIP["gpt"]))
            full = models.train_step(reference, ref_opt, batch, loss_fn, models.CLIP["gpt"])
            self.assertLess(abs(losses[-1] - full), 0.03 * abs(full))
        self.assertLess(losses[-1], losses[0])
        self.assertEqual(torch_trn.get_fallback_ops(), {})  # bf16 ops on the device as well


class StreamsAndMemory(unittest.TestCase):
    def test_record_stream_keeps_a_block_until_the_other_stream_used_it(self):
        source = torch.arange(1024.0)
        x = source.to(DEVICE)
        side = torch_trn.Stream()
        side.wait_stream(torch_trn.current_stream())
        with torch_trn.stream(side):
            gate = _Gate(_libtrn())  # the side stream waits here until opened
            y = x * 2
        x.record_stream(side)
        del x  # freed on the default stream, but only after the side stream's work so far
        reused = [torch.full((1024,), -1.0, device=DEVICE) for _ in range(4)]
        gate.open_after(0.0).join()
        side.synchronize()
        self.assertEqual(y.cpu().tolist(), (source * 2).tolist())
        gate.destroy()
        del reused

    def test_pinned_memory_and_non_blocking_copies(self):
        host = torch.arange(4096.0).pin_memory()
        self.assertTrue(host.is_pinned())
        self.assertFalse(torch.arange(4.0).is_pinned())
        on_trn = host.to(DEVICE, non_blocking=True)
        back = torch.empty_like(host).pin_memory()
        back.copy_(on_trn, non_blocking=True)
        torch.trn.synchronize()
        self.assertTrue(torch.equal(back, host))
        loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(8, 2)),
                                             batch_size=4, pin_memory=True,
                                             pin_memory_device=DEVICE)
        for (batch,) in loader:
            self.assertTrue(batch.is_pinned())


if __name__ == "__main__":
    unittest.main()
