"""The trn device as PyTorch sees it: the device module, copies to and from trn, memory
statistics, out-of-memory, streams and events, bad device indices and the CPU fallback."""
import os
import sys

# The helpers beside this file, wherever it is run from.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trn_test_env  # noqa: E402,F401  (first: sets TRN_SIM_ROOT before torch_trn starts libtrn)

import gc
import subprocess
import unittest
import warnings

import torch
import torch_trn

from trn_test_env import DEVICE


class DeviceModule(unittest.TestCase):
    def test_available_and_counted(self):
        self.assertTrue(torch.trn.is_available())
        self.assertGreaterEqual(torch.trn.device_count(), 1)
        self.assertIs(torch.trn.device_count, torch_trn.device_count)
        self.assertEqual(torch.trn.current_device(), 0)
        self.assertIsInstance(torch_trn.get_device_name(0), str)

    def test_set_device_and_context_manager(self):
        if torch_trn.device_count() < 2:
            self.skipTest("needs two trn devices")
        try:
            torch_trn.set_device(1)
            self.assertEqual(torch_trn.current_device(), 1)
            # A tensor made on "trn" (no index) goes to the current device.
            self.assertEqual(torch.ones(2, device=DEVICE).device.index, 1)
            with torch_trn.device("trn:0"):
                self.assertEqual(torch_trn.current_device(), 0)
                self.assertEqual(torch.ones(2, device=DEVICE).device.index, 0)
            self.assertEqual(torch_trn.current_device(), 1)
        finally:
            torch_trn.set_device(0)
        self.assertEqual(torch_trn.current_device(), 0)

    def test_synchronize(self):
        x = torch.ones(64, device=DEVICE)
        y = x + x
        torch_trn.synchronize()
        torch.trn.synchronize(0)
        torch_trn.synchronize("trn:0")
        self.assertEqual(y.cpu().sum().item(), 128.0)

    def test_not_a_trn_device(self):
        with self.assertRaises(ValueError):
            torch_trn.synchronize("cpu")


class Copies(unittest.TestCase):
    DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.bool]

    @staticmethod
    def sample(dtype, shape=(5, 7)):
        g = torch.Generator().manual_seed(1)
        if dtype == torch.bool:
            return torch.randint(0, 2, shape, generator=g).bool()
        if dtype.is_floating_point:
            return torch.randn(shape, generator=g).to(dtype)
        return torch.randint(-1000, 1000, shape, generator=g).to(dtype)

    def test_round_trip_each_dtype(self):
        for dtype in self.DTYPES:
            with self.subTest(dtype=dtype):
                host = self.sample(dtype)
                dev = host.to(DEVICE)
                self.assertEqual(dev.device.type, DEVICE)
                self.assertEqual(dev.dtype, dtype)
                self.assertEqual(dev.shape, host.shape)
                back = dev.cpu()
                self.assertEqual(back.device.type, "cpu")
                self.assertTrue(torch.equal(back, host))

    def test_non_contiguous_to_trn(self):
        host = self.sample(torch.float32, (6, 8))
        for view in (host.t(), host[1:5, ::2], host[:, 3], host.t()[::2]):
            with self.subTest(shape=tuple(view.shape), stride=view.stride()):
                self.assertTrue(torch.equal(view.to(DEVICE).cpu(), view))

    def test_non_contiguous_from_trn(self):
        host = self.sample(torch.float32, (6, 8))
        dev = host.to(DEVICE)
        for make in (lambda t: t.t(), lambda t: t[1:5, ::2], lambda t: t[:, 3],
                     lambda t: t.t()[::2]):
            view = make(dev)
            with self.subTest(shape=tuple(view.shape), stride=view.stride()):
                self.assertTrue(torch.equal(view.cpu(), make(host)))

    def test_copy_into_non_contiguous_trn_view(self):
        # copy_ into a trn view writes only the view's elements.
        dev = torch.zeros(4, 6, device=DEVICE)
        src = torch.arange(12, dtype=torch.float32).reshape(6, 2)
        dev.t()[:, ::3].copy_(src)
        expected = torch.zeros(4, 6)
        expected.t()[:, ::3].copy_(src)
        self.assertTrue(torch.equal(dev.cpu(), expected))

    def test_between_devices(self):
        if torch_trn.device_count() < 2:
            self.skipTest("needs two trn devices")
        host = self.sample(torch.float32)
        on0 = host.to("trn:0")
        on1 = on0.to("trn:1")
        self.assertEqual(on0.device, torch.device("trn", 0))
        self.assertEqual(on1.device, torch.device("trn", 1))
        self.assertTrue(torch.equal(on1.cpu(), host))
        back = on1.t().to("trn:0")  # and a non-contiguous view the other way
        self.assertEqual(back.device, torch.device("trn", 0))
        self.assertTrue(torch.equal(back.cpu(), host.t()))

    def test_non_blocking_copies(self):
        # A non-blocking host-to-device copy returns before the device has read the host memory;
        # torch_trn keeps that memory alive until it has, so dropping the source is safe.
        host = self.sample(torch.float32, (64, 33))
        dev = torch.empty(64, 33, device=DEVICE)
        dev.copy_(host.clone(), non_blocking=True)
        staged = host.t().to(DEVICE, non_blocking=True)  # a view: staged through a copy
        torch_trn.synchronize()
        self.assertTrue(torch.equal(dev.cpu(), host))
        self.assertTrue(torch.equal(staged.cpu(), host.t()))
        self.assertTrue(torch.equal(dev.to("cpu", non_blocking=True), host))

    def test_a_model_on_the_second_device(self):
        if torch_trn.device_count() < 2:
            self.skipTest("needs two trn devices")
        torch.manual_seed(0)
        cpu = torch.nn.Linear(8, 4)
        trn = torch.nn.Linear(8, 4).to("trn:1")
        trn.load_state_dict(cpu.state_dict())
        x = torch.randn(3, 8)
        with torch_trn.device(1):  # the work queues on device 1's own stream
            y = trn(x.to("trn:1"))
            y.sum().backward()
        cpu(x).sum().backward()
        self.assertEqual(y.device, torch.device("trn", 1))
        self.assertEqual(trn.weight.grad.device, torch.device("trn", 1))
        self.assertTrue(torch.allclose(y.cpu(), cpu(x), atol=1e-5))
        self.assertTrue(torch.allclose(trn.weight.grad.cpu(), cpu.weight.grad, atol=1e-5))
        self.assertGreater(torch_trn.memory_allocated(1), 0)

    def test_item(self):
        self.assertEqual(torch.tensor(3.5).to(DEVICE).item(), 3.5)
        self.assertEqual(torch.tensor(-7, dtype=torch.int64).to(DEVICE).item(), -7)
        self.assertIs(torch.tensor(True).to(DEVICE).item(), True)
        self.assertEqual(torch.tensor([1.0, 2.0, 4.0]).to(DEVICE)[2].item(), 4.0)


class Memory(unittest.TestCase):
    def setUp(self):
        gc.collect()
        torch_trn.synchronize()

    def test_allocation_counted_and_released(self):
        nbytes = 4 << 20
        before = torch_trn.memory_allocated()
        x = torch.empty(nbytes // 4, dtype=torch.float32, device=DEVICE)
        during = torch_trn.memory_allocated()
        self.assertGreaterEqual(during - before, nbytes)
        self.assertGreaterEqual(torch_trn.max_memory_allocated(), during)
        self.assertGreaterEqual(torch_trn.memory_reserved(), during)
        self.assertGreaterEqual(torch_trn.max_memory_reserved(), torch_trn.memory_reserved())
        stats = torch_trn.memory_stats()
        self.assertEqual(stats["allocated_bytes.all.current"], during)
        del x
        torch_trn.synchronize()
        self.assertLessEqual(torch_trn.memory_allocated(), during - nbytes)

    def test_reset_peak(self):
        x = torch.empty(1 << 20, device=DEVICE)
        del x
        torch_trn.synchronize()
        self.assertGreater(torch_trn.max_memory_allocated(), torch_trn.memory_allocated())
        torch_trn.reset_peak_memory_stats()
        self.assertEqual(torch_trn.max_memory_allocated(), torch_trn.memory_allocated())

    def test_reset_peak_reserved(self):
        # The reserved peak restarts from what the pool holds now, and follows it up again.
        x = torch.empty(16 << 20, dtype=torch.uint8, device=DEVICE)
        del x
        torch_trn.synchronize()
        torch_trn.empty_cache()
        self.assertGreater(torch_trn.max_memory_reserved(), torch_trn.memory_reserved())
        torch_trn.reset_peak_memory_stats()
        self.assertEqual(torch_trn.max_memory_reserved(), torch_trn.memory_reserved())
        self.assertEqual(torch_trn.memory_stats()["reserved_bytes.all.peak"],
                         torch_trn.memory_reserved())
        y = torch.empty(4 << 20, dtype=torch.uint8, device=DEVICE)
        grown = torch_trn.memory_reserved()
        del y
        torch_trn.synchronize()
        torch_trn.empty_cache()
        # Below the pool's lifetime peak, and gone again: still this reset's peak.
        self.assertGreaterEqual(torch_trn.max_memory_reserved(), grown)
        self.assertGreater(torch_trn.max_memory_reserved(), torch_trn.memory_reserved())

    def test_empty_cache(self):
        x = torch.empty(8 << 20, dtype=torch.uint8, device=DEVICE)
        del x
        reserved = torch_trn.memory_reserved()
        torch_trn.empty_cache()
        self.assertLessEqual(torch_trn.memory_reserved(), reserved)
        self.assertGreaterEqual(torch_trn.memory_reserved(), torch_trn.memory_allocated())
        # The device still allocates after its cache was emptied.
        self.assertEqual(torch.full((4,), 2.0).to(DEVICE).cpu().sum().item(), 8.0)

    def test_out_of_memory(self):
        with self.assertRaises(RuntimeError) as caught:
            torch.empty(2 ** 40, device=DEVICE)  # 4 TiB of float32
        self.assertIn("memory", str(caught.exception).lower())
        # The failed allocation left the device usable.
        x = torch.arange(10, dtype=torch.float32).to(DEVICE)
        self.assertTrue(torch.equal(x.cpu(), torch.arange(10, dtype=torch.float32)))


    def test_freed_blocks_are_reused_before_out_of_memory(self):
        # A block freed on a stream returns to the pool when the stream reaches the free: an
        # allocation that finds the bank full waits for that and asks again, as CUDA's caching
        # allocator would reuse the block. A 1 GiB device has 256 MiB banks; three 64 MiB tensors
        # live at a time fit, but not with the last iteration's still being freed.
        script = (
            "import sys; sys.path.insert(0, %r)\n"
            "import trn_test_env, torch, torch_trn\n"
            "x = torch.ones(16 * 2 ** 20, device='trn')\n"
            "for _ in range(20):\n"
            "    y = x * 2\n"
            "    z = y + 1\n"
            "print(z[0].item())\n" % os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, TRN_SIM_HBM_BYTES="1GiB")
        r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                           timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-2000:])
        self.assertEqual(r.stdout.strip(), "3.0")


class StreamsAndEvents(unittest.TestCase):
    def test_ops_on_a_stream(self):
        s = torch_trn.Stream()
        self.assertEqual(s.device, torch.device("trn", 0))
        self.assertNotEqual(s, torch_trn.default_stream())
        x = torch.ones(256, device=DEVICE)
        with torch_trn.stream(s):
            self.assertEqual(torch_trn.current_stream(), s)
            y = torch.ones(256, device=DEVICE)  # made and written on s
        self.assertEqual(torch_trn.current_stream(), torch_trn.default_stream())
        s.synchronize()
        self.assertTrue(s.query())
        self.assertEqual((x.cpu() + y.cpu()).sum().item(), 512.0)

    def test_timed_events(self):
        start = torch_trn.Event(enable_timing=True)
        end = torch_trn.Event(enable_timing=True)
        x = torch.randn(128, 128).to(DEVICE)
        start.record()
        for _ in range(4):
            x = x * 1.0001
        end.record()
        end.synchronize()
        self.assertTrue(start.query())
        self.assertTrue(end.query())
        torch_trn.synchronize()
        self.assertGreaterEqual(start.elapsed_time(end), 0.0)
        # An event never recorded has no time: refused, as on CUDA, not read as time 0.
        never = torch_trn.Event(enable_timing=True)
        with self.assertRaisesRegex(RuntimeError, "never recorded"):
            start.elapsed_time(never)

    def test_stream_waits_for_event(self):
        s = torch_trn.Stream()
        x = torch.full((64,), 3.0).to(DEVICE)
        done = torch_trn.Event()
        done.record()  # on the default stream, after x was written
        s.wait_event(done)
        with torch_trn.stream(s):
            x.mul_(2.0)
        s.synchronize()
        self.assertEqual(x.cpu().sum().item(), 64 * 6.0)


class Errors(unittest.TestCase):
    def test_ops_mixing_devices_raise_as_on_cuda(self):
        if torch_trn.device_count() < 2:
            self.skipTest("needs two trn devices")
        import torch.nn.functional as F
        a = torch.randn(3, 4, device="trn:0")
        b = torch.randn(3, 4).to("trn:1")
        on_1 = torch.tensor([0, 2]).to("trn:1")
        cases = {
            "mm": lambda: a @ b.t(), "linear": lambda: F.linear(a, b),
            "addmm": lambda: torch.addmm(a[:, :3], a, b.t()), "cat": lambda: torch.cat([a, b]),
            "where": lambda: torch.where(a > 0, a, b), "index": lambda: a[on_1],
            "layer_norm": lambda: F.layer_norm(a, (4,), b[0]),
            "cross_entropy": lambda: F.cross_entropy(a, torch.tensor([0, 1, 2]).to("trn:1")),
            "embedding": lambda: F.embedding(torch.tensor([0, 2], device="trn:0"), b),
            "mse_loss": lambda: F.mse_loss(a, b),
        }
        for name, op in cases.items():
            with self.subTest(op=name):
                with self.assertRaisesRegex(RuntimeError, "same device"):
                    op()
        # CPU indices and scalars are still taken, as on CUDA.
        self.assertEqual(a[torch.tensor([0, 2])].device, a.device)
        self.assertEqual(torch.where(a > 0, a, 0.0).device, a.device)

    def test_invalid_device_index(self):
        count = torch_trn.device_count()
        with self.assertRaises(RuntimeError) as caught:
            torch.ones(2).to("trn:99")
        message = str(caught.exception)
        # Clear: names the bad index and how many devices there are.
        self.assertIn("99", message)
        self.assertIn(str(count), message)
        with self.assertRaises(RuntimeError):
            torch_trn.set_device(99)
        self.assertEqual(torch_trn.current_device(), 0)

    def test_fallback_recorded_with_right_result(self):
        torch_trn.reset_fallback_ops()
        host = torch.randn(33)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the fallback's warning: expected here
            got = torch.cumprod(host.to(DEVICE), 0)  # no trn kernel: the CPU's, recorded
        self.assertEqual(got.device.type, DEVICE)
        self.assertTrue(torch.equal(got.cpu(), torch.cumprod(host, 0)))
        fallbacks = torch_trn.fallback_ops()
        self.assertTrue(any(k.startswith("aten::cumprod") for k in fallbacks), fallbacks)
        torch_trn.reset_fallback_ops()
        self.assertEqual(torch_trn.fallback_ops(), {})

    def test_foreach_ops_match_the_cpu(self):
        # PyTorch 2.13 runs the _foreach_ ops on trn as one op per tensor (its slow path, which
        # optimizers take for devices without fused kernels): the CPU's results, no fallback.
        torch_trn.reset_fallback_ops()
        host = [torch.zeros(4), torch.arange(3.0)]
        on_trn = [t.to(DEVICE) for t in host]
        torch._foreach_add_(host, 1.0)
        torch._foreach_add_(on_trn, 1.0)
        for got, want in zip(on_trn, host):
            self.assertTrue(torch.equal(got.cpu(), want))
        products = torch._foreach_mul(on_trn, on_trn)
        for got, want in zip(products, torch._foreach_mul(host, host)):
            self.assertEqual(got.device.type, DEVICE)
            self.assertTrue(torch.equal(got.cpu(), want))
        self.assertEqual(torch_trn.fallback_ops(), {})

if __name__ == "__main__":
    unittest.main()
