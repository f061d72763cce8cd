// Gathers and scatters by index on the device, with no indirect addressing: an index tensor
// becomes float32 positions, compared with an arange of the dim it indexes (a one-hot match
// [..., J, K]), and the selected element is the largest of where(match, values, -inf): that
// value, bit for bit, infinities, NaN and -0.0 included (a product with a one-hot matrix would
// make 0 * inf a NaN in every other row), so a gather is exact. A scatter that adds several
// values into one place sums them out of where(match, values, -0.0) in fp32, in another order
// than the CPU's loop. The match is numel(index) x K elements: gather_fits() bounds it, and
// larger cases run on the CPU (recorded).
//
// An index that is no position of the dim (out of range, or any int64 beyond (-2^31, 2^31))
// matches nothing: where the CPU raises IndexError, a gather gives NaN in that place and a
// scatter makes NaN of every place its index tensor spans (those it would write and those it
// leaves), never a plausible value (checking on the host would cost a synchronisation per op).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace torch_trn {

// Whether a gather or scatter over a dim of `size` elements, of values of `type`, with a match
// of `match_elements`, runs on the device: a float dtype the engines compute in, positions exact
// in float32, and a match of at most 2^24 elements.
bool gather_fits(c10::ScalarType type, const at::Tensor &index, int64_t size,
                 int64_t match_elements);

// `index` (int64 or int32, any shape; a CPU one is copied over) as float32 positions of the
// same shape on `like`'s device: each index's value where it lies in (-2^24, 2^24), a value no
// position equals otherwise. With `wrap`, negative indices count from the end of a dim of `size`
// (x[-1]).
at::Tensor index_positions(const at::Tensor &index, const at::Tensor &like, int64_t size,
                           bool wrap);

// The one-hot match [..., J, K] of positions [..., J] with the K positions of a dim.
at::Tensor match_positions(const at::Tensor &positions, int64_t k);

// Keeps, of each column k of a match [..., J, K], only its last true row (the value a loop of
// assignments leaves: x[i] = v with a repeated index keeps the last v).
at::Tensor last_matches(const at::Tensor &match);

// out[..., j] = values[..., k] where match[..., j, k] (values [..., K] broadcast over j), NaN
// where row j matches nothing.
at::Tensor pick(const at::Tensor &values, const at::Tensor &match);

// out[..., k] = the sum of values[..., j] over the j with match[..., j, k] (values [..., J]
// broadcast over k); -0.0 where none does.
at::Tensor spread(const at::Tensor &values, const at::Tensor &match);

// out[..., k] = values[..., j] for the one j with match[..., j, k] (a match with at most one true
// row per column, as last_matches makes), exactly; -inf where none does.
at::Tensor place(const at::Tensor &values, const at::Tensor &match);

// A 0-dim bool: some row of the match [..., J, K] matches nothing (an index out of range).
at::Tensor any_unmatched(const at::Tensor &match);

// x with every element NaN where the 0-dim bool `poisoned` holds.
at::Tensor poison_if(const at::Tensor &x, const at::Tensor &poisoned);

}  // namespace torch_trn
