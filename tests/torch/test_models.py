"""Trains each model of models.py on the CPU and on trn from the same weights and checks that
the two agree step by step, that the model's core ops ran on trn (not the CPU fallback), and
that state_dicts move between trn and CPU models."""
import os
import sys

# The helpers beside this file, wherever it is run from.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trn_test_env  # noqa: E402,F401  (first: sets TRN_SIM_ROOT before torch_trn starts libtrn)

import copy
import io
import pickle
import unittest

import torch
import torch_trn

import models
from trn_test_env import DEVICE, fallback_keys_for

STEPS = 5
LOSS_RTOL = 1e-4
PARAM_ATOL = 1e-4

# The aten ops each model's forward, backward and optimizer step should run on trn; any of
# them in fallback_ops() (any overload) means the CPU did that part of the training. (sum:
# Linear's backward reduces the bias gradient with it.)
CORE_OPS = {
    "mlp": {"addmm", "mm", "relu", "threshold_backward", "_log_softmax",
            "_log_softmax_backward_data", "nll_loss_forward", "nll_loss_backward",
            "sum", "add", "mul"},
    "cnn": {"convolution_overrideable", "convolution_backward_overrideable",
            "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "relu",
            "threshold_backward", "addmm", "mm", "_log_softmax", "nll_loss_forward", "sum",
            "add", "mul", "addcmul", "addcdiv", "sqrt", "div"},
    # native_batch_norm: without a trn native_layer_norm, torch 1.13 decomposes layer_norm
    # into it (math_native_layer_norm), so layer_norm's fallback shows under that name.
    # The GPT's attention (scaled_dot_product_attention's math path), embeddings, GELU MLP,
    # AdamW's default (foreach) update and clip_grad_norm_'s vector norms.
    "gpt": {"embedding", "embedding_dense_backward", "native_layer_norm",
            "native_layer_norm_backward", "bmm", "mm", "addmm", "_softmax",
            "_softmax_backward_data", "gelu", "_log_softmax", "nll_loss_forward",
            "nll_loss_backward", "linalg_vector_norm", "lerp", "sum", "add", "mul", "addcmul",
            "addcdiv", "sqrt", "div", "tril", "isneginf", "all", "where"},
    "resnet": {"convolution_overrideable", "convolution_backward_overrideable", "relu",
               "threshold_backward", "addmm", "mm", "mean", "sum", "add", "mul",
               "native_batch_norm", "native_batch_norm_backward"},
    # The fused cells PyTorch hands every accelerator's LSTM and GRU steps to.
    "lstm": {"_thnn_fused_lstm_cell", "_thnn_fused_lstm_cell_backward_impl", "sigmoid", "tanh",
             "mm", "addmm", "lerp", "sum", "add", "mul", "addcmul", "addcdiv", "sqrt", "div"},
    "gru": {"_thnn_fused_gru_cell", "_thnn_fused_gru_cell_backward", "sigmoid", "tanh", "mm",
            "addmm", "lerp", "sum", "add", "mul", "addcmul", "addcdiv", "sqrt", "div"},
    "attention": {"native_layer_norm", "native_layer_norm_backward", "native_batch_norm",
                  "bmm", "_softmax",
                  "_softmax_backward_data", "mm", "addmm", "mean", "mse_loss",
                  "mse_loss_backward", "sum", "add", "mul", "addcmul", "addcdiv", "sqrt", "div"},
}

def cpu_params(model):
    return {name: p.detach().cpu() for name, p in model.named_parameters()}


class TrainOnTrn(unittest.TestCase):
    def train_both(self, name):
        cpu_model, cpu_opt, cpu_batch, loss_fn = models.BUILDERS[name]("cpu")
        # Same initial weights: a deepcopy of the CPU model, moved to trn before its optimizer
        # is made (the optimizer must hold the trn parameters).
        trn_model = copy.deepcopy(cpu_model).to(DEVICE)
        trn_opt = models.make_optimizer(name, trn_model)
        trn_batch = tuple(t.to(DEVICE) for t in cpu_batch)
        for p in trn_model.parameters():
            self.assertEqual(p.device.type, DEVICE)

        torch_trn.reset_fallback_ops()
        for step in range(STEPS):
            clip = models.CLIP.get(name)
            cpu_loss = models.train_step(cpu_model, cpu_opt, cpu_batch, loss_fn, clip)
            trn_loss = models.train_step(trn_model, trn_opt, trn_batch, loss_fn, clip)
            self.assertTrue(abs(trn_loss - cpu_loss) <= LOSS_RTOL * abs(cpu_loss),
                            f"{name} step {step}: trn loss {trn_loss!r}, cpu loss {cpu_loss!r}")
        torch_trn.synchronize()
        fallbacks = torch_trn.fallback_ops()
        print(f"\n{name} fallbacks: {fallbacks}", file=sys.stderr)

        expected = cpu_params(cpu_model)
        for pname, got in cpu_params(trn_model).items():
            with self.subTest(param=pname):
                self.assertEqual(got.dtype, expected[pname].dtype)
                diff = (got - expected[pname]).abs().max().item()
                self.assertLessEqual(diff, PARAM_ATOL, f"{name}.{pname}: max |trn - cpu| {diff}")
        return fallbacks

    def check_core_ops(self, name, fallbacks):
        on_cpu = fallback_keys_for(CORE_OPS[name], fallbacks)
        self.assertEqual(on_cpu, [], f"{name}: core ops ran on the CPU fallback: {on_cpu}")

    def check_nothing_off_the_device(self, name):
        # get_fallback_ops() is empty: not one op of the training ran on the CPU or on libtrn_ops'
        # host reference (the core ops are checked first, for a message that names them).
        fallbacks = self.train_both(name)
        self.check_core_ops(name, fallbacks)
        self.assertEqual(fallbacks, {}, f"{name}: ops off the device: {fallbacks}")

    def test_mlp(self):
        self.check_nothing_off_the_device("mlp")

    def test_cnn(self):
        self.check_nothing_off_the_device("cnn")

    def test_attention(self):
        self.check_nothing_off_the_device("attention")

    def test_gpt_with_tied_head_sdpa_adamw_and_clipping(self):
        # int64 positions (arange) and GELU's erf-form backward included.
        self.check_nothing_off_the_device("gpt")

    def test_resnet_with_batchnorm(self):
        # BatchNorm's int64 num_batches_tracked += 1 included.
        self.check_nothing_off_the_device("resnet")

    def test_lstm(self):
        self.check_nothing_off_the_device("lstm")

    def test_gru(self):
        self.check_nothing_off_the_device("gru")


class TiedLM(torch.nn.Module):
    """An embedding and an output head sharing one weight, as GPT-style models tie them."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(16, 8)
        self.head = torch.nn.Linear(8, 16, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(self.embed(tokens))


class ParameterIdentity(unittest.TestCase):
    """Module.to("trn") and .cpu() keep each Parameter object: ties hold, and an optimizer made
    before the move trains the moved parameters."""

    def test_to_keeps_parameters_and_ties(self):
        torch.manual_seed(0)
        model = TiedLM()
        weight = model.embed.weight
        model.to(DEVICE)
        self.assertIs(model.embed.weight, weight)
        self.assertIs(model.head.weight, model.embed.weight)
        self.assertEqual(weight.device.type, DEVICE)
        self.assertEqual(len(list(model.parameters())), 1)
        model.cpu()
        self.assertIs(model.head.weight, weight)
        self.assertEqual(weight.device.type, "cpu")

    def test_optimizer_made_before_to_trains_the_moved_model_as_on_the_cpu(self):
        torch.manual_seed(0)
        cpu_model = TiedLM()
        trn_model = copy.deepcopy(cpu_model)
        cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1)
        trn_opt = torch.optim.SGD(trn_model.parameters(), lr=0.1)  # before the move
        trn_model.to(DEVICE)
        tokens = torch.tensor([1, 5, 7, 2])
        for _ in range(3):
            for model, opt, batch in ((cpu_model, cpu_opt, tokens),
                                      (trn_model, trn_opt, tokens.to(DEVICE))):
                opt.zero_grad()
                model(batch).square().mean().backward()
                opt.step()
        diff = (trn_model.embed.weight.detach().cpu() - cpu_model.embed.weight.detach()).abs().max()
        self.assertLessEqual(diff.item(), PARAM_ATOL)
        self.assertIs(trn_opt.param_groups[0]["params"][0], trn_model.head.weight)


class StateDict(unittest.TestCase):
    def test_trn_state_dict_loads_into_cpu_model(self):
        trn_model, opt, batch, loss_fn = models.build_mlp(DEVICE)
        models.train_step(trn_model, opt, batch, loss_fn)  # weights no longer the seed's
        buffer = io.BytesIO()
        torch.save(trn_model.state_dict(), buffer)
        buffer.seek(0)
        # map_location: the saved tensors are trn tensors; load them as CPU ones.
        state = torch.load(buffer, map_location="cpu")
        for pname, t in state.items():
            self.assertEqual(t.device.type, "cpu", pname)
        cpu_model, _, _, _ = models.build_mlp("cpu", seed=1)
        cpu_model.load_state_dict(state)
        for (pname, p), q in zip(trn_model.state_dict().items(), cpu_model.state_dict().values()):
            self.assertEqual(q.device.type, "cpu")
            self.assertTrue(torch.equal(p.cpu(), q), pname)

    def test_trn_state_dict_loads_back_on_trn(self):
        # Saved without map_location: the tensors come back on trn.
        trn_model, _, _, _ = models.build_mlp(DEVICE)
        buffer = io.BytesIO()
        torch.save(trn_model.state_dict(), buffer)
        buffer.seek(0)
        state = torch.load(buffer)
        for pname, t in state.items():
            self.assertEqual(t.device.type, DEVICE, pname)
            self.assertTrue(torch.equal(t.cpu(), trn_model.state_dict()[pname].cpu()), pname)

    def test_map_location_moves_trn_tensors_as_it_moves_storages(self):
        t = torch.arange(3.0, device=DEVICE)
        def load(map_location):
            buffer = io.BytesIO()
            torch.save({"trn": t, "cpu": torch.ones(2)}, buffer)
            buffer.seek(0)
            return torch.load(buffer, map_location=map_location)
        for map_location, where in ((None, "trn:0"), ("cpu", "cpu"),
                                    (torch.device("cpu"), "cpu"),
                                    ({"trn:0": "cpu"}, "cpu"),
                                    (lambda storage, location: storage, "cpu"),
                                    (lambda storage, location: None, "trn:0")):
            with self.subTest(map_location=map_location):
                state = load(map_location)
                self.assertEqual(str(state["trn"].device), where)
                self.assertEqual(state["trn"].cpu().tolist(), [0.0, 1.0, 2.0])
                self.assertEqual(state["cpu"].device.type, "cpu")
        if torch_trn.device_count() > 1:
            self.assertEqual(str(load("trn:1")["trn"].device), "trn:1")
        # A pickle.loads after a load keeps the tensor's device: map_location was that load's.
        load("cpu")
        self.assertEqual(str(pickle.loads(pickle.dumps(t)).device), "trn:0")

    def test_deepcopy_of_trn_state_and_optimizer_state(self):
        # copy.deepcopy (the "keep the best weights" idiom, Optimizer.load_state_dict) clones trn
        # tensors on their device.
        trn_model, opt, batch, loss_fn = models.build_mlp(DEVICE)
        models.train_step(trn_model, opt, batch, loss_fn)
        best = copy.deepcopy(trn_model.state_dict())
        for pname, t in best.items():
            self.assertEqual(t.device.type, DEVICE, pname)
            self.assertTrue(torch.equal(t.cpu(), trn_model.state_dict()[pname].cpu()), pname)
        models.train_step(trn_model, opt, batch, loss_fn)  # the copy does not follow
        self.assertFalse(all(torch.equal(best[k].cpu(), v.cpu())
                             for k, v in trn_model.state_dict().items()))
        again = type(opt)(trn_model.parameters(), lr=0.5)
        again.load_state_dict(opt.state_dict())
        for state in again.state_dict()["state"].values():
            for value in state.values():
                if torch.is_tensor(value) and value.dim() > 0:
                    self.assertEqual(value.device.type, DEVICE)

    def test_cpu_state_dict_loads_into_trn_model(self):
        cpu_model, _, _, _ = models.build_attention("cpu", seed=2)
        trn_model, _, _, _ = models.build_attention(DEVICE, seed=3)
        trn_model.load_state_dict(cpu_model.state_dict())
        for pname, p in trn_model.state_dict().items():
            self.assertEqual(p.device.type, DEVICE, pname)  # copied into the trn tensors
            self.assertTrue(torch.equal(p.cpu(), cpu_model.state_dict()[pname]), pname)


if __name__ == "__main__":
    unittest.main()
