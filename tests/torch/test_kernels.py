"""Custom kernels from PyTorch (torch_trn.kernel): kernels trn-as assembled at build time
(TRN_TEST_KERNELS, tests/tools/data) launched on trn tensors and scalars, their argument tables
checked, and a faulting kernel that raises, names itself as the user's, and leaves the device
unusable until reset_device."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trn_test_env  # noqa: E402,F401  (first: sets TRN_SIM_ROOT before torch_trn starts libtrn)

import unittest

import torch
import torch_trn

from trn_test_env import DEVICE

KERNELS = os.environ.get("TRN_TEST_KERNELS", "")


def kernel_path(name):
    return os.path.join(KERNELS, f"{name}.trnk")


@unittest.skipUnless(os.path.isdir(KERNELS), "TRN_TEST_KERNELS names no folder of test kernels")
class CustomKernels(unittest.TestCase):
    def test_launch_with_scalars_and_an_allocated_output(self):
        k = torch_trn.kernel(kernel_path("scale_bias"))
        self.assertEqual([a.name for a in k.args], ["x", "alpha", "beta", "y"])
        self.assertEqual(k.args[0].shape, (128, 64))
        x = torch.randn(128, 64)
        y = k(x.to(DEVICE), 2.5, -1.0)
        self.assertEqual(y.device.type, DEVICE)
        self.assertTrue(torch.allclose(y.cpu(), 2.5 * x - 1.0))

    def test_loaded_from_bytes_called_by_name_into_a_given_output(self):
        with open(kernel_path("vector_add"), "rb") as f:
            k = torch_trn.kernel(f.read())
        a, b = torch.randn(128, 64), torch.randn(128, 64)
        out = torch.empty(128, 64, device=DEVICE)
        self.assertIs(k(b=b.to(DEVICE), a=a.to(DEVICE), out=out), out)
        self.assertTrue(torch.equal(out.cpu(), a + b))

    def test_bad_arguments_say_what_to_do(self):
        k = torch_trn.kernel(kernel_path("scale_bias"))
        x = torch.randn(128, 64, device=DEVICE)
        cases = [
            (lambda: k(x.cpu(), 1.0, 1.0), RuntimeError, "move it with"),
            (lambda: k(x.to(torch.bfloat16), 1.0, 1.0), RuntimeError, "is f32, not"),
            (lambda: k(x[:64], 1.0, 1.0), RuntimeError, "8192 elements"),
            (lambda: k(x.t(), 1.0, 1.0), RuntimeError, "contiguous"),
            (lambda: k(x, "2", 1.0), TypeError, "takes a number"),
            (lambda: k(x, 1.0, 1.0, zz=x), TypeError, "has no argument 'zz'"),
            (lambda: k(x, 1.0), TypeError, "scalar argument 'beta'"),
            (lambda: k(alpha=1.0, beta=1.0), TypeError, "argument 'x' is missing"),
            (lambda: torch_trn.kernel(12), TypeError, "path or its bytes"),
            (lambda: torch_trn.kernel(b"not a kernel"), RuntimeError, "trn_kernel_load"),
            (lambda: torch_trn.kernel(kernel_path("no_such_kernel")), RuntimeError,
             "no_such_kernel"),
        ]
        for call, error, text in cases:
            with self.subTest(text=text), self.assertRaisesRegex(error, text):
                call()
        # Nothing was launched with the refused arguments: the device is fine.
        self.assertTrue(torch.equal(k(x, 1.0, 0.0).cpu(), x.cpu()))

    def test_a_faulting_kernel_raises_and_the_device_stays_unusable_until_reset(self):
        k = torch_trn.kernel(kernel_path("overread"))
        k(torch.ones(128, 64, device=DEVICE))
        with self.assertRaises(RuntimeError) as caught:
            torch_trn.synchronize()
        message = str(caught.exception)
        self.assertIn("your kernel 'overread' (torch_trn.kernel)", message)
        self.assertIn("TRN_ERROR_KERNEL_FAULT", message)
        self.assertIn("overread.s:12", message)
        with self.assertRaisesRegex(RuntimeError, "unusable after a device fault"):
            torch.ones(4, device=DEVICE) + 1
        torch.trn.reset_device()
        self.assertEqual((torch.ones(4, device=DEVICE) + 1).cpu().tolist(), [2.0] * 4)


if __name__ == "__main__":
    unittest.main()
