#include "kernel_ops.hpp"

#include <c10/util/Exception.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

#include "allocator.hpp"
#include "check.hpp"
#include "devices.hpp"
#include "events.hpp"
#include "tensor_view.hpp"

namespace torch_trn {
namespace {

struct LoadedKernel {
  trn_kernel_t kernel = nullptr;
  int device_index = 0;  // the torch device it was loaded for (its trn device runs it)
  std::string name;
  std::vector<trn_kernel_arg_t> args;
};

// Kernels by the handle Python holds. Guarded by `mutex`; a launch copies what it needs out.
struct Registry {
  std::mutex mutex;
  std::map<int64_t, LoadedKernel> kernels;
  std::set<std::string> user_names;
  int64_t next = 1;
};
Registry &registry() {
  static auto *r = new Registry;  // kernels in flight outlive the interpreter's teardown
  return *r;
}

LoadedKernel find(int64_t handle) {
  Registry &r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.kernels.find(handle);
  TORCH_CHECK(it != r.kernels.end(), "trn: kernel handle ", handle,
              " is not a loaded kernel (it was destroyed, or never loaded)");
  return it->second;
}

int64_t op_kernel_load(int64_t device, const std::string &path, const at::Tensor &image) {
  const int index = device < 0 ? current_device() : static_cast<int>(device);
  const trn_device_t trn_device = device_at(index).trn_device();
  LoadedKernel k;
  k.device_index = index;
  if (!path.empty()) {
    check(trn_kernel_load_file(trn_device, path.c_str(), &k.kernel),
          ("trn_kernel_load_file(" + path + ")").c_str());
  } else {
    TORCH_CHECK(image.device().is_cpu() && image.scalar_type() == at::kByte && image.dim() == 1,
                "trn: a kernel image is bytes (a 1-D uint8 CPU tensor)");
    const at::Tensor bytes = image.contiguous();
    check(trn_kernel_load(trn_device, bytes.data_ptr(), static_cast<size_t>(bytes.numel()),
                          &k.kernel),
          "trn_kernel_load");
  }
  trn_kernel_properties_t props = TRN_KERNEL_PROPERTIES_INIT;
  uint32_t count = 0;
  trn_result_t r = trn_kernel_get_properties(k.kernel, &props);
  if (r == TRN_SUCCESS) r = trn_kernel_get_args(k.kernel, &count, nullptr);
  if (r == TRN_SUCCESS) {
    k.args.assign(count, TRN_KERNEL_ARG_INIT);
    r = trn_kernel_get_args(k.kernel, &count, k.args.data());
  }
  if (r != TRN_SUCCESS) {
    trn_kernel_destroy(k.kernel);
    check(r, "trn_kernel_get_args");
  }
  k.name = props.name;
  Registry &reg = registry();
  std::lock_guard lock(reg.mutex);
  const int64_t handle = reg.next++;
  reg.user_names.insert(k.name);
  reg.kernels.emplace(handle, std::move(k));
  return handle;
}

void op_kernel_destroy(int64_t handle) {
  Registry &r = registry();
  std::lock_guard lock(r.mutex);
  auto it = r.kernels.find(handle);
  if (it == r.kernels.end()) return;
  trn_kernel_destroy(it->second.kernel);  // launches in flight keep it alive
  r.kernels.erase(it);
}

// (name, then per argument: names, dtypes (trn_dtype_name), directions (1 in, 2 out, 3 inout),
// kinds (1 tensor, 2 scalar), ranks, and the shapes' dims one after another).
std::tuple<std::string, std::vector<std::string>, std::vector<std::string>, std::vector<int64_t>,
           std::vector<int64_t>, std::vector<int64_t>, std::vector<int64_t>>
op_kernel_info(int64_t handle) {
  const LoadedKernel k = find(handle);
  std::vector<std::string> names, dtypes;
  std::vector<int64_t> directions, kinds, ranks, dims;
  for (const trn_kernel_arg_t &a : k.args) {
    names.emplace_back(a.name);
    dtypes.emplace_back(trn_dtype_name(a.dtype));
    directions.push_back(a.direction);
    kinds.push_back(a.kind);
    ranks.push_back(a.rank);
    for (uint32_t d = 0; d < a.rank; ++d) dims.push_back(static_cast<int64_t>(a.shape[d]));
  }
  return {k.name, names, dtypes, directions, kinds, ranks, dims};
}

trn_kernel_binding_t bind_tensor(const LoadedKernel &k, const trn_kernel_arg_t &a,
                                 const at::Tensor &t, int *device_index) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "kernel '", k.name,
              "': argument '", a.name, "' is a ", t.device().str(),
              " tensor; kernels take trn tensors (move it with .to(\"trn\"))");
  if (*device_index < 0) *device_index = t.device().index();
  TORCH_CHECK(t.device().index() == *device_index, "kernel '", k.name, "': argument '", a.name,
              "' is on trn:", t.device().index(),
              " and an argument before it on trn:", *device_index,
              "; one launch runs on one device");
  const auto dtype = to_trn_dtype(t.scalar_type());
  TORCH_CHECK(dtype && *dtype == a.dtype, "kernel '", k.name, "': argument '", a.name, "' is ",
              trn_dtype_name(a.dtype), ", not ", t.scalar_type());
  TORCH_CHECK(t.is_contiguous(), "kernel '", k.name, "': argument '", a.name,
              "' must be contiguous (the kernel reads its bytes in order): pass .contiguous()");
  int64_t elements = 1;
  for (uint32_t d = 0; d < a.rank; ++d) elements *= static_cast<int64_t>(a.shape[d]);
  TORCH_CHECK(t.numel() == elements, "kernel '", k.name, "': argument '", a.name, "' has ",
              elements, " elements (", a.rank, "-D table shape), the tensor ", t.numel(), " ",
              t.sizes());
  const trn_ops_tensor_t where = location_of(t);
  trn_kernel_binding_t b{};
  b.mem = where.mem;
  b.offset = where.offset;
  return b;
}

trn_kernel_binding_t bind_scalar(const LoadedKernel &k, const trn_kernel_arg_t &a, double value) {
  trn_kernel_binding_t b{};
  if (a.dtype == TRN_DTYPE_F32) {
    b.value.f32 = static_cast<float>(value);
    return b;
  }
  TORCH_CHECK(a.dtype == TRN_DTYPE_I32, "kernel '", k.name, "': scalar argument '", a.name,
              "' of dtype ", trn_dtype_name(a.dtype), " is not one torch_trn can pass");
  TORCH_CHECK(std::floor(value) == value && value >= std::numeric_limits<int32_t>::min() &&
                  value <= std::numeric_limits<int32_t>::max(),
              "kernel '", k.name, "': scalar argument '", a.name, "' is an i32; ", value,
              " is not one");
  b.value.i32 = static_cast<int32_t>(value);
  return b;
}

// `tensors` and `scalars` have one entry per argument, in launch order: a tensor for a tensor
// argument (None for a scalar), a value for a scalar argument.
void op_kernel_launch(int64_t handle, const c10::List<std::optional<at::Tensor>> &tensors,
                      std::vector<double> scalars) {
  const LoadedKernel k = find(handle);
  TORCH_CHECK(tensors.size() == k.args.size() && scalars.size() == k.args.size(), "kernel '",
              k.name, "' takes ", k.args.size(), " arguments, not ", tensors.size());
  std::vector<trn_kernel_binding_t> bindings(k.args.size());
  std::vector<at::Tensor> held;
  int device_index = -1;
  for (size_t i = 0; i < k.args.size(); ++i) {
    const trn_kernel_arg_t &a = k.args[i];
    const std::optional<at::Tensor> t = tensors.get(i);
    if (a.kind == TRN_ARG_KIND_SCALAR) {
      TORCH_CHECK(!t.has_value() || !t->defined(), "kernel '", k.name, "': argument '", a.name,
                  "' is a scalar, not a tensor");
      bindings[i] = bind_scalar(k, a, scalars[i]);
      continue;
    }
    TORCH_CHECK(t.has_value() && t->defined(), "kernel '", k.name, "': tensor argument '", a.name,
                "' is missing");
    bindings[i] = bind_tensor(k, a, *t, &device_index);
    held.push_back(*t);
  }
  if (device_index < 0) device_index = k.device_index;
  TORCH_CHECK(device_at(device_index).trn_device() == device_at(k.device_index).trn_device(),
              "kernel '", k.name, "' was loaded for trn:", k.device_index,
              "'s trn device; its tensors are on trn:", device_index,
              ", another: load it for that device (torch_trn.kernel(..., device=", device_index,
              "))");
  trn_queue_t queue = current_queue(device_index);
  // A tensor allocated on another stream is freed there: its free waits for this launch.
  for (const at::Tensor &t : held) record_stream(t.storage().data_ptr(), queue);
  trn_launch_desc_t desc = TRN_LAUNCH_DESC_INIT;
  desc.kernel = k.kernel;
  desc.args = bindings.data();
  desc.arg_count = static_cast<uint32_t>(bindings.size());
  check(submit_when_room(queue, [&] { return trn_queue_launch(queue, &desc, nullptr, nullptr); }),
        ("launching kernel '" + k.name + "'").c_str());
}

}  // namespace

bool is_user_kernel(const std::string &name) {
  Registry &r = registry();
  std::lock_guard lock(r.mutex);
  return r.user_names.count(name) > 0;
}

TORCH_LIBRARY_FRAGMENT(torch_trn, m) {
  m.def("kernel_load(int device, str path, Tensor image) -> int", &op_kernel_load);
  m.def("kernel_destroy(int kernel) -> ()", &op_kernel_destroy);
  m.def("kernel_info(int kernel) -> (str, str[], str[], int[], int[], int[], int[])",
        &op_kernel_info);
  m.def("kernel_launch(int kernel, Tensor?[] tensors, float[] scalars) -> ()", &op_kernel_launch);
}

}  // namespace torch_trn
