"""trn's errors as Python exceptions: a device fault reported at the next synchronizing call
with the failed command and its reason (and the device usable afterwards), bad arguments refused
with a message that says what was wrong. The fault is made through the C API with ctypes, as C
code working beside torch on its stream would (Stream.trn_queue, trn_mem_lookup of data_ptr())."""
import ctypes
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trn_test_env  # noqa: E402,F401  (first: sets TRN_SIM_ROOT before torch_trn starts libtrn)

import unittest

import torch
import torch_trn

from trn_test_env import DEVICE

TRN_STRUCT_POOL_DESC = 5
TRN_STRUCT_SEM_DESC = 8
TRN_POOL_KIND_DEVICE = 1


class _Header(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32)]


class _PoolDesc(ctypes.Structure):
    _fields_ = [("header", _Header), ("kind", ctypes.c_uint32), ("hbm_bank", ctypes.c_uint32),
                ("byte_limit", ctypes.c_uint64)]


class _SemDesc(ctypes.Structure):
    _fields_ = [("header", _Header), ("initial_value", ctypes.c_uint64),
                ("flags", ctypes.c_uint32)]


class _SemPoint(ctypes.Structure):
    _fields_ = [("sem", ctypes.c_void_p), ("value", ctypes.c_uint64)]


class _Sync(ctypes.Structure):
    _fields_ = [("waits", ctypes.POINTER(_SemPoint)), ("wait_count", ctypes.c_uint32),
                ("signals", ctypes.POINTER(_SemPoint)), ("signal_count", ctypes.c_uint32)]


def _libtrn():
    lib = ctypes.CDLL("libtrn.so.0.1")  # the one torch_trn loaded
    for name in ("trn_pool_create", "trn_mem_alloc", "trn_mem_free", "trn_mem_lookup",
                 "trn_sem_create", "trn_sem_signal", "trn_sem_destroy", "trn_queue_barrier",
                 "trn_queue_copy", "trn_pool_destroy"):
        getattr(lib, name).restype = ctypes.c_int
    lib.trn_mem_lookup.argtypes = [ctypes.c_void_p, ctypes.c_uint64,
                                   ctypes.POINTER(ctypes.c_void_p),
                                   ctypes.POINTER(ctypes.c_uint64)]
    lib.trn_queue_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64,
                                   ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64,
                                   ctypes.c_void_p, ctypes.c_void_p]
    lib.trn_mem_alloc.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64,
                                  ctypes.c_uint32, ctypes.c_uint32,
                                  ctypes.POINTER(ctypes.c_void_p)]
    lib.trn_sem_signal.argtypes = [ctypes.c_void_p, ctypes.c_uint64]
    lib.trn_queue_barrier.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Sync), ctypes.c_void_p]
    for name in ("trn_mem_free", "trn_sem_destroy", "trn_pool_destroy"):
        getattr(lib, name).argtypes = [ctypes.c_void_p]
    return lib


class DeviceFault(unittest.TestCase):
    def test_fault_raises_and_the_device_stays_unusable_until_reset(self):
        lib = _libtrn()
        device = ctypes.c_void_p(torch_trn.trn_device_handle(0))
        queue = ctypes.c_void_p(torch_trn.current_stream(0).trn_queue)
        target = torch.zeros(256, device=DEVICE)
        mem, offset = ctypes.c_void_p(), ctypes.c_uint64()
        self.assertEqual(lib.trn_mem_lookup(device, target.data_ptr(), ctypes.byref(mem),
                                            ctypes.byref(offset)), 0)

        pool, gate, source = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        desc = _PoolDesc(_Header(TRN_STRUCT_POOL_DESC, ctypes.sizeof(_PoolDesc)),
                         TRN_POOL_KIND_DEVICE, 0, 0)
        self.assertEqual(lib.trn_pool_create(device, ctypes.byref(desc), ctypes.byref(pool)), 0)
        self.assertEqual(lib.trn_mem_alloc(pool, 1024, 64, 0, 0, ctypes.byref(source)), 0)
        sem_desc = _SemDesc(_Header(TRN_STRUCT_SEM_DESC, ctypes.sizeof(_SemDesc)), 0, 0)
        self.assertEqual(lib.trn_sem_create(device, ctypes.byref(sem_desc), ctypes.byref(gate)), 0)

        # The stream waits at a gate; behind it, a copy from memory freed before the gate opens:
        # the copy faults when it runs (a use after free, caught by the device, not a crash).
        wait = _SemPoint(gate, 1)
        sync = _Sync(ctypes.pointer(wait), 1, None, 0)
        self.assertEqual(lib.trn_queue_barrier(queue, ctypes.byref(sync), None), 0)
        self.assertEqual(lib.trn_queue_copy(queue, mem, offset, source, 0, 1024, None, None), 0)
        self.assertEqual(lib.trn_mem_free(source), 0)
        self.assertEqual(lib.trn_sem_signal(gate, 1), 0)

        with self.assertRaises(RuntimeError) as caught:
            torch_trn.synchronize()
        message = str(caught.exception)
        print(message, file=sys.stderr)
        self.assertIn("faulted in copy", message)
        self.assertIn("TRN_ERROR_INVALID_HANDLE", message)
        self.assertIn("reset_device(0)", message)
        lib.trn_sem_destroy(gate)
        lib.trn_pool_destroy(pool)

        # Sticky, as CUDA's asynchronous errors: every later use of the device raises, naming
        # the fault and what to do, and nothing computes on undefined values.
        later_uses = {
            "an op": lambda: target + 1,
            "a copy to the host": lambda: target.cpu(),
            "a new tensor": lambda: torch.ones(2, device=DEVICE),
            "a copy to the device": lambda: torch.arange(8.0).to(DEVICE),
            "synchronize": torch_trn.synchronize,
        }
        for use, later in later_uses.items():
            with self.assertRaises(RuntimeError, msg=use) as caught:
                later()
            self.assertIn("unusable after a device fault", str(caught.exception))
            self.assertIn("faulted in copy", str(caught.exception))
            self.assertIn("torch.trn.reset_device(0)", str(caught.exception))

        # After reset_device, work on the same stream runs again.
        torch.trn.reset_device(0)
        x = torch.arange(8.0).to(DEVICE)
        self.assertEqual((x * 2).cpu().tolist(), [2.0 * i for i in range(8)])
        torch_trn.synchronize()

    def test_reset_device_of_a_healthy_device_changes_nothing(self):
        x = torch.arange(4.0).to(DEVICE)
        torch_trn.reset_device()
        self.assertEqual((x + 1).cpu().tolist(), [1.0, 2.0, 3.0, 4.0])
        with self.assertRaises(RuntimeError):
            torch_trn.reset_device(99)
        with self.assertRaises(ValueError):
            torch_trn.reset_device("cpu")


class _Gate:
    """A semaphore the current stream waits at (a barrier through the C API): nothing queued on
    the stream after it runs until open(), so the queue fills up."""

    def __init__(self, lib):
        self.lib = lib
        device = ctypes.c_void_p(torch_trn.trn_device_handle(0))
        self.sem = ctypes.c_void_p()
        desc = _SemDesc(_Header(TRN_STRUCT_SEM_DESC, ctypes.sizeof(_SemDesc)), 0, 0)
        assert lib.trn_sem_create(device, ctypes.byref(desc), ctypes.byref(self.sem)) == 0
        queue = ctypes.c_void_p(torch_trn.current_stream(0).trn_queue)
        wait = _SemPoint(self.sem, 1)
        sync = _Sync(ctypes.pointer(wait), 1, None, 0)
        assert lib.trn_queue_barrier(queue, ctypes.byref(sync), None) == 0

    def open_after(self, seconds):
        timer = threading.Timer(seconds, lambda: self.lib.trn_sem_signal(self.sem, 1))
        timer.start()
        return timer

    def destroy(self):
        self.lib.trn_sem_destroy(self.sem)


class FullQueue(unittest.TestCase):
    """More commands than a queue holds (1024) queued behind a closed gate: ops, copies and the
    stream-ordered frees of released tensors wait on the host for room (back-pressure) instead of
    failing or freeing early, and every result is right once the gate opens."""

    def test_a_long_chain_of_small_ops_behind_a_closed_gate(self):
        torch.manual_seed(0)
        torch_trn.reset_fallback_ops()
        a = torch.randn(8, 8) * 0.1
        x0 = torch.randn(8, 4)
        at, x = a.to(DEVICE), x0.to(DEVICE)
        ref = x0.clone()
        gate = _Gate(_libtrn())
        timer = gate.open_after(0.5)
        try:
            # Each step queues an op and frees the step before's temporaries: 3 commands or more.
            for _ in range(1500):  # tanh keeps the values bounded, and so the rounding differences
                x = torch.tanh(x + at @ x)
                ref = torch.tanh(ref + a @ ref)
            got = x.cpu()
        finally:
            timer.join()
            gate.destroy()
        self.assertTrue(torch.isfinite(ref).all())
        self.assertLessEqual((got - ref).abs().max().item(), 1e-4)
        self.assertEqual(torch_trn.fallback_ops(), {}, "the chain ran on the device")

    def test_twenty_thousand_small_ops_without_a_wait(self):
        torch_trn.reset_fallback_ops()
        x = torch.zeros(16, device=DEVICE)
        for i in range(20000):  # each op queues a kernel, and frees the tensor before
            x = x + 1.0
        self.assertEqual(x.cpu().tolist(), [20000.0] * 16)
        self.assertEqual(torch_trn.fallback_ops(), {})

    def test_copies_and_frees_behind_a_closed_gate(self):
        src = torch.arange(64, dtype=torch.float32)
        kept = []
        gate = _Gate(_libtrn())
        timer = gate.open_after(0.5)
        try:
            for i in range(1500):
                t = (src + i).to(DEVICE)  # a write, and a free of the one before (unless kept)
                if i % 300 == 0:
                    kept.append((i, t))
            results = [(i, t.cpu()) for i, t in kept]
        finally:
            timer.join()
            gate.destroy()
        for i, got in results:
            self.assertEqual(got.tolist(), (src + i).tolist())


class BadArguments(unittest.TestCase):
    def test_unsupported_dtype_is_refused_with_the_dtypes_trn_has(self):
        with self.assertRaises(RuntimeError) as caught:
            torch.zeros(4, dtype=torch.complex64, device=DEVICE)
        self.assertIn("cannot hold", str(caught.exception))
        self.assertIn("float32", str(caught.exception))

    def test_elapsed_time_needs_timed_events(self):
        a, b = torch_trn.Event(), torch_trn.Event()
        a.record()
        b.record()
        b.synchronize()
        with self.assertRaises(RuntimeError) as caught:
            a.elapsed_time(b)
        self.assertIn("enable_timing", str(caught.exception))

    def test_a_stream_that_does_not_exist_is_refused(self):
        with self.assertRaises(RuntimeError) as caught:
            torch.ops.torch_trn.set_stream(0, 12345)
        self.assertIn("does not exist", str(caught.exception))

    def test_a_device_copy_with_mismatched_sizes_is_refused(self):
        a = torch.zeros(4, device=DEVICE)
        with self.assertRaises(RuntimeError):
            a.copy_(torch.ones(5))


if __name__ == "__main__":
    unittest.main()
