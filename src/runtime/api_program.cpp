// C entry points for programs and tensor sets (executions and captures are queue calls, in
// api_queue.cpp).
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/read_file.hpp"
#include "common/write_file.hpp"
#include "runtime/api_support.hpp"
#include "runtime/program.hpp"
#include "runtime/session.hpp"

using namespace trn::rt;

namespace {

// Programs carry their weights: far larger than any kernel.
constexpr uint64_t kMaxProgramFileBytes = uint64_t{64} << 30;

trn_result_t insert_program(Session &session, Device &device, std::span<const std::byte> bytes,
                            const std::string &directory, trn_program_t *out) {
  trn::isa::ProgramImage image;
  if (auto why = trn::isa::read_program(bytes, image))
    return fail(TRN_ERROR_INVALID_PROGRAM, "the program image is malformed: " + *why);
  std::shared_ptr<Program> program;
  if (trn_result_t r = Program::create(device, std::move(image), {}, directory, &program);
      r != TRN_SUCCESS)
    return r;
  *out = to_handle<trn_program_t>(session.programs.insert(std::move(program)));
  return TRN_SUCCESS;
}

}  // namespace

extern "C" {

TRN_API trn_result_t trn_program_load(trn_device_t device_handle, const void *image, size_t size,
                                      trn_program_t *program) {
  return TRN_API_CALL({
    if (!image) return fail(TRN_ERROR_NULL_POINTER, "image is NULL");
    if (!program) return fail(TRN_ERROR_NULL_POINTER, "program is NULL");
    TRN_GET_SESSION(session);
    Device *device = lookup_device(*session, device_handle, &result);
    if (!device) return result;
    return insert_program(*session, *device, {static_cast<const std::byte *>(image), size}, "",
                          program);
  });
}

TRN_API trn_result_t trn_program_load_file(trn_device_t device_handle, const char *path,
                                           trn_program_t *program) {
  return TRN_API_CALL({
    if (!path) return fail(TRN_ERROR_NULL_POINTER, "path is NULL");
    if (!program) return fail(TRN_ERROR_NULL_POINTER, "program is NULL");
    TRN_GET_SESSION(session);
    Device *device = lookup_device(*session, device_handle, &result);
    if (!device) return result;
    std::vector<std::byte> bytes;
    if (auto err = trn::common::read_regular_file(path, kMaxProgramFileBytes, bytes)) {
      if (err->error_number == ENOENT)
        return fail(TRN_ERROR_FILE, std::string("program file ") + path + " does not exist");
      return fail(err->too_large ? TRN_ERROR_INVALID_PROGRAM : TRN_ERROR_FILE,
                  std::string("cannot read program file ") + path + ": " + err->reason);
    }
    // Files a program names relative to itself are beside it.
    const std::string p = path;
    const size_t slash = p.rfind('/');
    const std::string directory = slash == std::string::npos ? "" : p.substr(0, slash + 1);
    if (trn_result_t r = insert_program(*session, *device, bytes, directory, program);
        r != TRN_SUCCESS)
      return fail(r, std::string(path) + ": " + last_detail());
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_program_destroy(trn_program_t program) {
  return TRN_API_CALL({
    if (!program) return TRN_SUCCESS;
    TRN_GET_SESSION(session);
    if (!session->programs.remove(from_handle(program)))
      return invalid_handle(HandleKind::program, from_handle(program));
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_program_get_properties(trn_program_t handle,
                                                trn_program_properties_t *properties) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto program = session->programs.find(handle, &result);
    if (!program) return result;
    if (trn_result_t r = check_struct(properties, TRN_STRUCT_PROGRAM_PROPERTIES, "properties",
                                      "TRN_PROGRAM_PROPERTIES_INIT");
        r != TRN_SUCCESS)
      return r;
    trn_program_properties_t p = TRN_PROGRAM_PROPERTIES_INIT;
    std::snprintf(p.name, sizeof p.name, "%s", program->image.name.c_str());
    p.kernel_count = static_cast<uint32_t>(program->kernels.size());
    p.tensor_count = static_cast<uint32_t>(program->external.size());
    p.step_count = static_cast<uint32_t>(program->image.steps.size());
    p.constant_bytes = program->constant_bytes;
    p.internal_bytes = program->internal_bytes;
    copy_struct(p, properties);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_program_get_tensors(trn_program_t handle, uint32_t *count,
                                             trn_program_tensor_t *tensors) {
  return TRN_API_CALL({
    TRN_GET_SESSION(session);
    auto program = session->programs.find(handle, &result);
    if (!program) return result;
    if (trn_result_t r = check_count(count); r != TRN_SUCCESS) return r;
    if (!tensors) {
      *count = static_cast<uint32_t>(program->external.size());
      return TRN_SUCCESS;
    }
    const uint32_t n = std::min<uint32_t>(*count, static_cast<uint32_t>(program->external.size()));
    std::vector<trn_program_tensor_t *> elements;
    if (trn_result_t r = caller_elements(tensors, n, TRN_STRUCT_PROGRAM_TENSOR, "tensors",
                                         "TRN_PROGRAM_TENSOR_INIT", &elements);
        r != TRN_SUCCESS)
      return r;
    for (uint32_t i = 0; i < n; ++i) {
      const trn::isa::ProgramTensor &t = program->image.tensors[program->external[i]];
      trn_program_tensor_t out = TRN_PROGRAM_TENSOR_INIT;
      std::snprintf(out.name, sizeof out.name, "%s", t.name.c_str());
      out.direction = t.role == trn::isa::TensorRole::kInput    ? TRN_ARG_IN
                      : t.role == trn::isa::TensorRole::kOutput ? TRN_ARG_OUT
                                                                : TRN_ARG_INOUT;
      out.dtype = static_cast<trn_dtype_t>(t.dtype);
      out.rank = static_cast<uint32_t>(t.shape.size());
      std::copy(t.shape.begin(), t.shape.end(), out.shape);
      out.bytes = t.bytes();
      copy_struct(out, elements[i]);
    }
    *count = n;
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_program_save(trn_program_t handle, const char *path) {
  return TRN_API_CALL({
    if (!path) return fail(TRN_ERROR_NULL_POINTER, "path is NULL");
    TRN_GET_SESSION(session);
    auto program = session->programs.find(handle, &result);
    if (!program) return result;
    trn::isa::ProgramImage image;
    if (trn_result_t r = program->image_with_constants(&image); r != TRN_SUCCESS) return r;
    const auto bytes = trn::isa::write_program(image);
    // A name of its own: saves of one path from several threads never share a temporary file.
    if (auto why = trn::common::write_file_replacing(path, trn::common::unique_temp_path(path),
                                                     bytes, true))
      return fail(TRN_ERROR_FILE, std::string("cannot save the program to ") + path + ": " + *why);
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_tensor_set_create(trn_tensor_set_t *set) {
  return TRN_API_CALL({
    if (!set) return fail(TRN_ERROR_NULL_POINTER, "set is NULL");
    TRN_GET_SESSION(session);
    *set = to_handle<trn_tensor_set_t>(session->tensor_sets.insert(std::make_shared<TensorSet>()));
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_tensor_set_add(trn_tensor_set_t handle, const char *name, trn_mem_t mem,
                                        uint64_t offset) {
  return TRN_API_CALL({
    if (!name) return fail(TRN_ERROR_NULL_POINTER, "name is NULL");
    TRN_GET_SESSION(session);
    auto set = session->tensor_sets.find(handle, &result);
    if (!set) return result;
    if (!*name) return fail(TRN_ERROR_INVALID_ARGUMENT, "name is empty");
    if (!session->mems.lookup(from_handle(mem))) {
      invalid_handle(HandleKind::mem, from_handle(mem));
      return fail(TRN_ERROR_INVALID_HANDLE, std::string("mem: ") + last_detail());
    }
    for (const auto &b : set->bindings)
      if (b.name == name)
        return fail(TRN_ERROR_INVALID_ARGUMENT,
                    std::string("the set binds '") + name + "' already: each tensor is bound once");
    set->bindings.push_back({name, mem, offset});
    return TRN_SUCCESS;
  });
}

TRN_API trn_result_t trn_tensor_set_destroy(trn_tensor_set_t set) {
  return TRN_API_CALL({
    if (!set) return TRN_SUCCESS;
    TRN_GET_SESSION(session);
    if (!session->tensor_sets.remove(from_handle(set)))
      return invalid_handle(HandleKind::tensor_set, from_handle(set));
    return TRN_SUCCESS;
  });
}

}  // extern "C"
