// The fused LSTM and GRU cells. PyTorch's nn.LSTM / nn.GRU (and LSTMCell, GRUCell) hand every
// accelerator's steps to _thnn_fused_lstm_cell / _thnn_fused_gru_cell, which only CUDA
// implements, so without these a recurrent model on trn cannot run at all (the CPU has no such
// kernel to fall back to). Each cell is composed here of trn ops (matmuls are done by the caller:
// these take the gates' pre-activations), with the workspace layout CUDA uses, so PyTorch's own
// derivative formulas (through the _backward_impl ops below) apply unchanged.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <tuple>

namespace torch_trn {
namespace {

// The gates' pre-activations: the input's and the hidden state's, each with its bias if given.
std::pair<at::Tensor, at::Tensor> biased(const at::Tensor &input_gates,
                                         const at::Tensor &hidden_gates,
                                         const std::optional<at::Tensor> &input_bias,
                                         const std::optional<at::Tensor> &hidden_bias) {
  const bool has_bias = input_bias.has_value() && input_bias->defined();
  TORCH_CHECK(has_bias == (hidden_bias.has_value() && hidden_bias->defined()),
              "trn: a fused RNN cell takes both biases or neither");
  if (!has_bias) return {input_gates, hidden_gates};
  return {input_gates + *input_bias, hidden_gates + *hidden_bias};
}

// LSTM: gates i, f, g, o (in that order along dim 1). Workspace: the activated gates [B, 4H].
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell(
    const at::Tensor &input_gates, const at::Tensor &hidden_gates, const at::Tensor &cx,
    const std::optional<at::Tensor> &input_bias, const std::optional<at::Tensor> &hidden_bias) {
  const auto [ig, hg] = biased(input_gates, hidden_gates, input_bias, hidden_bias);
  const auto gates = (ig + hg).chunk(4, 1);
  const at::Tensor i = gates[0].sigmoid(), f = gates[1].sigmoid(), g = gates[2].tanh(),
                   o = gates[3].sigmoid();
  at::Tensor cy = f * cx + i * g;
  at::Tensor hy = o * cy.tanh();
  return {std::move(hy), std::move(cy), at::cat({i, f, g, o}, 1)};
}

// Returns (grad of the gates' pre-activations, grad of cx, grad of a bias).
std::tuple<at::Tensor, at::Tensor, at::Tensor> fused_lstm_cell_backward(
    const std::optional<at::Tensor> &grad_hy, const std::optional<at::Tensor> &grad_cy,
    const at::Tensor &cx, const at::Tensor &cy, const at::Tensor &workspace, bool has_bias) {
  const bool have_hy = grad_hy.has_value() && grad_hy->defined();
  const bool have_cy = grad_cy.has_value() && grad_cy->defined();
  if (!have_hy && !have_cy) return {};
  const auto gates = workspace.chunk(4, 1);
  const at::Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
  const at::Tensor tanh_cy = cy.tanh();
  // d cy: through hy = o * tanh(cy), plus cy's own gradient.
  at::Tensor d_cy = have_cy ? *grad_cy : at::zeros_like(cy);
  at::Tensor d_o = at::zeros_like(o);
  if (have_hy) {
    d_cy = d_cy + *grad_hy * o * (1 - tanh_cy * tanh_cy);
    d_o = *grad_hy * tanh_cy * o * (1 - o);
  }
  const at::Tensor d_i = d_cy * g * i * (1 - i);
  const at::Tensor d_f = d_cy * cx * f * (1 - f);
  const at::Tensor d_g = d_cy * i * (1 - g * g);
  at::Tensor d_gates = at::cat({d_i, d_f, d_g, d_o}, 1);
  at::Tensor d_cx = d_cy * f;
  at::Tensor d_bias = has_bias ? d_gates.sum(0) : at::Tensor();
  return {std::move(d_gates), std::move(d_cx), std::move(d_bias)};
}

// GRU: gates r, z, n. Workspace [B, 5H]: r, z, n, hx and the hidden state's n pre-activation.
std::tuple<at::Tensor, at::Tensor> fused_gru_cell(const at::Tensor &input_gates,
                                                  const at::Tensor &hidden_gates,
                                                  const at::Tensor &hx,
                                                  const std::optional<at::Tensor> &input_bias,
                                                  const std::optional<at::Tensor> &hidden_bias) {
  const auto [ig, hg] = biased(input_gates, hidden_gates, input_bias, hidden_bias);
  const auto in = ig.chunk(3, 1), hn = hg.chunk(3, 1);
  const at::Tensor r = (in[0] + hn[0]).sigmoid(), z = (in[1] + hn[1]).sigmoid();
  const at::Tensor n = (in[2] + r * hn[2]).tanh();
  at::Tensor hy = n + z * (hx - n);
  return {std::move(hy), at::cat({r, z, n, hx, hn[2]}, 1)};
}

// Returns the grads of (input gates, hidden gates, hx, input bias, hidden bias).
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_gru_cell_backward(
    const at::Tensor &grad_hy, const at::Tensor &workspace, bool has_bias) {
  const auto w = workspace.chunk(5, 1);
  const at::Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  const at::Tensor d_n = grad_hy * (1 - z) * (1 - n * n);
  const at::Tensor d_z = grad_hy * (hx - n) * z * (1 - z);
  const at::Tensor d_r = d_n * hn * r * (1 - r);
  at::Tensor d_input = at::cat({d_r, d_z, d_n}, 1);
  at::Tensor d_hidden = at::cat({d_r, d_z, d_n * r}, 1);
  at::Tensor d_hx = grad_hy * z;
  at::Tensor d_input_bias = has_bias ? d_input.sum(0) : at::Tensor();
  at::Tensor d_hidden_bias = has_bias ? d_hidden.sum(0) : at::Tensor();
  return {std::move(d_input), std::move(d_hidden), std::move(d_hx), std::move(d_input_bias),
          std::move(d_hidden_bias)};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}

}  // namespace torch_trn
