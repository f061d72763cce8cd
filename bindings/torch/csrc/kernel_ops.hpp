// Custom kernels launched from PyTorch (torch_trn.kernel): a loaded trn kernel binary, its
// argument table checked against the tensors and scalars given, launched on the current stream.
#pragma once

#include <string>

namespace torch_trn {

// Whether `name` is a kernel the user launched through torch_trn.kernel (a fault in it is the
// user's kernel's, not trn's).
bool is_user_kernel(const std::string &name);

}  // namespace torch_trn
