"""An unchanged TorchNeuron-style script on trn through the neuron-compat folder (on PYTHONPATH):
import torch_neuronx, the device named "neuron", get_fallback_ops()."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trn_test_env  # noqa: E402,F401  (first: sets TRN_SIM_ROOT before torch_trn starts libtrn)

import unittest

import torch
import torch_neuronx


class TorchNeuronScript(unittest.TestCase):
    def test_a_model_trains_on_neuron(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                    torch.nn.Linear(16, 2)).to("neuron")
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(4, 8, device="neuron")
        y = torch.tensor([0, 1, 0, 1]).to("neuron")
        losses = []
        for _ in range(3):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        self.assertLess(losses[-1], losses[0])
        self.assertEqual(next(model.parameters()).device.type, "neuron")
        self.assertEqual(torch_neuronx.get_fallback_ops(), {})
        self.assertTrue(torch.neuron.is_available())
        self.assertEqual(torch_neuronx.DEVICE_NAME, "neuron")

    def test_the_trn_name_is_not_taken_too(self):
        with self.assertRaises(RuntimeError):
            torch.ones(2, device="trn")
        with self.assertRaisesRegex(ValueError, "neuron:N"):
            torch_neuronx.synchronize("cpu")

    def test_docstring_says_it_is_not_awss_package(self):
        self.assertIn("not AWS's torch_neuronx", torch_neuronx.__doc__)


if __name__ == "__main__":
    unittest.main()
