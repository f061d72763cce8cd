// C entry points for kernels, launches and profiles.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/read_file.hpp"
#include "runtime/api_support.hpp"
#include "runtime/kernel.hpp"
#include "runtime/session.hpp"

using namespace trn::rt;

namespace {

trn_result_t insert_kernel(Session &session, Device &device, const void *image, size_t size,
                           trn_kernel_t *out) {
  std::shared_ptr<Kernel> kernel;
  if (trn_result_t r = load_kernel(device, image, size, &kernel); r != TRN_SUCCESS) return r;
  *out = to_handle<trn_kernel_t>(session.kernels.insert(std::move(kernel)));
  return TRN_SUCCESS;
}

}  // namespace

extern "C" {

TRN_API trn_result_t trn_kernel_load(trn_device_t device_handle, const void *image, size_t size,
                                     trn_kernel_t *kernel) {
  return TRN_API_CALL({
    if (!image) return fail(TRN_ERROR_NULL_POINTER, "image is NULL");
    if (!kernel) return fail(TRN_ERROR_NULL_POINTER, "kernel is NULL");
    TRN_GET_SESSION(session);
    Device *device = lookup_device(*session, device_handle, &result);
    if (!device) return result;
    return insert_kernel(*session, *device, image, size, kernel);
  });
}

TRN_API trn_result_t trn_kernel_load_file(trn_device_t device_handle, const char *path,
                                          trn_kernel_t *kernel) {
  return TRN_API_CALL({
    if (!path) return fail(TRN_ERROR_NULL_POINTER, "path is NULL");
    if (!kernel) return fail(TRN_ERROR_NULL_POINTER, "kernel is NULL");
    TRN_GET_SESSION(session);
    Device *device = lookup_device(*session, device_handle, &result);
    if (!device) return result;
    // Only a regular file of at most 1 GiB (the largest instruction streams are tens of MiB):
    // a directory, a FIFO or /dev/zero is refused before anything is read.
    std::vector<std::byte> image;
    if (auto err = trn::common::read_regular_file(path, trn::common::kMaxKernelFileBytes, image)) {
      if (err->error_number == ENOENT)
        return fail(TRN_ERROR_INVALID_ARGUMENT,
                    std::string("kernel file ") + path + " does not exist");
      return fail(err->too_large ? TRN_ERROR_INVALID_KERNEL : TRN_ERROR_INVALID_ARGUMENT,
                  std::string("cannot read kernel file ") + path + ": " + err->reason);
    }
    return insert_kernel(*session, *device, image.data(), image.size(), kernel);
  });
}

TRN_API trn_result_t trn_kernel_destroy(trn_kernel_t kernel) {
  return TRN_API_CALL({
    if (!kernel) return TRN_SUCCESS;
    TRN_GET_SESSION(session);
    if (!session->kernels.remove(from_handle(kernel)))
      return invalid_handle(HandleKind::kernel, from_handle(kernel));
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_kernel_get_properties(trn_kernel_t handle,
                                               trn_kernel_properties_t *properties) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto kernel = session->kernels.find(handle, &result);
    if (!kernel) return result;
    if (trn_result_t r = check_struct(properties, TRN_STRUCT_KERNEL_PROPERTIES, "properties",
                                      "TRN_KERNEL_PROPERTIES_INIT");
        r != TRN_SUCCESS)
      return r;
    trn_kernel_properties_t p = kernel->properties;
    copy_struct(p, properties);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_kernel_get_args(trn_kernel_t handle, uint32_t *count,
                                         trn_kernel_arg_t *args) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto kernel = session->kernels.find(handle, &result);
    if (!kernel) return result;
    const auto &list = kernel->args;
    if (trn_result_t r = check_count(count); r != TRN_SUCCESS) return r;
    if (!args) {
      *count = static_cast<uint32_t>(list.size());
      return TRN_SUCCESS;
    }
    const uint32_t n = std::min<uint32_t>(*count, static_cast<uint32_t>(list.size()));
    std::vector<trn_kernel_arg_t *> out;
    if (trn_result_t r =
            caller_elements(args, n, TRN_STRUCT_KERNEL_ARG, "args", "TRN_KERNEL_ARG_INIT", &out);
        r != TRN_SUCCESS)
      return r;
    for (uint32_t i = 0; i < n; ++i) copy_struct(list[i], out[i]);
    *count = n;
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_profile_create(uint32_t flags, trn_profile_t *profile) {
  return TRN_API_CALL({
    if (!profile) return fail(TRN_ERROR_NULL_POINTER, "profile is NULL");
    if (flags & ~TRN_PROFILE_FLAG_TRACE)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  "unknown profile flags " + std::to_string(flags & ~TRN_PROFILE_FLAG_TRACE));
    TRN_GET_SESSION(session);
    *profile = to_handle<trn_profile_t>(session->profiles.insert(std::make_shared<Profile>(flags)));
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_profile_destroy(trn_profile_t profile) {
  return TRN_API_CALL({
    if (!profile) return TRN_SUCCESS;
    TRN_GET_SESSION(session);
    if (!session->profiles.remove(from_handle(profile)))
      return invalid_handle(HandleKind::profile, from_handle(profile));
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_profile_get_summary(trn_profile_t handle, trn_profile_summary_t *summary) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto profile = session->profiles.find(handle, &result);
    if (!profile) return result;
    if (trn_result_t r = check_struct(summary, TRN_STRUCT_PROFILE_SUMMARY, "summary",
                                      "TRN_PROFILE_SUMMARY_INIT");
        r != TRN_SUCCESS)
      return r;
    trn_profile_summary_t s = TRN_PROFILE_SUMMARY_INIT;
    profile->summary(&s);
    copy_struct(s, summary);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_profile_write_trace(trn_profile_t handle, const char *path) {
  return TRN_API_CALL({
    if (!path) return fail(TRN_ERROR_NULL_POINTER, "path is NULL");
    TRN_GET_SESSION(session);
    auto profile = session->profiles.find(handle, &result);
    if (!profile) return result;
    return profile->write_trace(path);
  });
}

}  // extern "C"
