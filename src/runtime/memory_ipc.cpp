// Exporting an allocation to other processes and importing theirs (trn_ipc_handle_t).
#include <unistd.h>

#include <cstring>

#include "runtime/driver_error.hpp"
#include "runtime/error.hpp"
#include "runtime/memory.hpp"
#include "runtime/segment_source.hpp"

namespace trn::rt {

namespace {

constexpr char kIpcMagic[8] = {'T', 'R', 'N', 'I', 'P', 'C', '1', '\0'};

struct IpcHandle {
  char magic[8];
  uint32_t device_index;
  uint32_t record;
  uint64_t id;
  uint64_t address;
  uint64_t size;
  uint32_t category;
  uint32_t exporter_pid;
  uint8_t reserved[16];
};
static_assert(sizeof(IpcHandle) == sizeof(trn_ipc_handle_t), "handle layout");

}  // namespace

trn_result_t export_memory(Mem &mem, trn_ipc_handle_t *handle) {
  Device &device = *mem.device;
  {
    // Not while another thread frees it (release_memory closes `use` and waits for its users).
    UseGate::Hold in_use(mem.use);
    if (!in_use.entered())
      return fail(TRN_ERROR_INVALID_HANDLE,
                  "the memory handle is stale: the memory was freed while this call ran");
    if (!mem.dedicated || mem.imported)
      return fail(TRN_ERROR_INVALID_ARGUMENT,
                  mem.imported ? "imported memory cannot be exported again: export the original"
                               : "the allocation was not made with TRN_MEM_FLAG_EXPORTABLE");
    std::lock_guard lock(device.memory_mu);
    if (!mem.exported) {
      DriverError err;
      trn_result_t r = ops(device).mem_export(instance(device), device.driver_index, mem.address,
                                              mem.dedicated->segment.size, &mem.export_record,
                                              &mem.export_id, &err);
      if (r != TRN_SUCCESS) return fail(r, err.message);
      mem.exported = true;
      ++device.export_holds[{mem.export_record, mem.export_id}];
    }
  }
  IpcHandle out{};
  std::memcpy(out.magic, kIpcMagic, sizeof kIpcMagic);
  out.device_index = device.index;
  out.record = mem.export_record;
  out.id = mem.export_id;
  out.address = mem.address;
  out.size = mem.size;
  out.category = static_cast<uint32_t>(mem.category);
  out.exporter_pid = static_cast<uint32_t>(getpid());
  std::memcpy(handle->bytes, &out, sizeof out);
  return TRN_SUCCESS;
}

trn_result_t import_memory(Device &device, const trn_ipc_handle_t &handle,
                           std::shared_ptr<Mem> *out) {
  IpcHandle in;
  std::memcpy(&in, handle.bytes, sizeof in);
  if (std::memcmp(in.magic, kIpcMagic, sizeof kIpcMagic) != 0 ||
      in.category >= TRN_MEM_CATEGORY_COUNT)
    return fail(TRN_ERROR_INVALID_ARGUMENT,
                "the bytes are not a trn IPC handle (made by trn_mem_export)");
  if (in.device_index != device.index)
    return fail(TRN_ERROR_INVALID_ARGUMENT, "the handle is memory of device " +
                                                std::to_string(in.device_index) +
                                                ", not of device " + std::to_string(device.index));
  auto mem = std::make_shared<Mem>();
  mem->device = &device;
  mem->dedicated = std::make_unique<SegmentStore>();
  DriverError err;
  uint64_t bytes = 0;
  // The driver keeps one hold per process and export, which export_holds counts: both change
  // together, so that a free of another holder cannot let go of the hold this import relies on.
  std::lock_guard lock(device.memory_mu);
  trn_result_t r = ops(device).mem_import(instance(device), device.driver_index, in.record, in.id,
                                          &mem->address, &bytes, &mem->bank, &err);
  if (r != TRN_SUCCESS)
    return fail(
        r, std::string(err.message) + " (exported by pid " + std::to_string(in.exporter_pid) + ")");
  auto let_go = [&] {
    // Only if no allocation of this process already holds the export.
    if (!device.export_holds.count({in.record, in.id}))
      ops(device).mem_unexport(instance(device), device.driver_index, in.record, in.id, nullptr);
  };
  if (mem->address != in.address || in.size > bytes) {
    let_go();
    return fail(TRN_ERROR_INVALID_ARGUMENT, "the handle does not match the exported memory");
  }
  Segment &segment = mem->dedicated->segment;
  segment.address = mem->address;
  segment.size = bytes;
  r = ops(device).mem_map(instance(device), device.driver_index, mem->address, bytes,
                          TRN_HAL_MAP_READ, &segment.host, &err);
  if (r != TRN_SUCCESS) {
    let_go();
    return fail(r, err.message);
  }
  mem->host = static_cast<char *>(segment.host);
  mem->size = in.size;
  mem->charged = bytes;
  mem->category = static_cast<trn_mem_category_t>(in.category);
  mem->imported = true;
  mem->exported = true;
  mem->export_record = in.record;
  mem->export_id = in.id;
  ++device.export_holds[{in.record, in.id}];
  *out = std::move(mem);
  return TRN_SUCCESS;
}

}  // namespace trn::rt
