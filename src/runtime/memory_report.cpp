// The texts memory failures carry: a range outside an allocation, and the out-of-memory report
// with who holds the bank.
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "common/parse.hpp"
#include "runtime/driver_error.hpp"
#include "runtime/memory.hpp"
#include "runtime/process_info.hpp"
#include "runtime/segment_source.hpp"

namespace trn::rt {

std::string outside_allocation(uint64_t offset, uint64_t size, uint64_t allocation_size) {
  const std::string end = size > UINT64_MAX - offset
                              ? std::to_string(offset) + " + " + std::to_string(size)
                              : std::to_string(offset + size);
  return "bytes " + std::to_string(offset) + ".." + end + " are outside the allocation of " +
         std::to_string(allocation_size) + " bytes";
}

std::string describe_oom(Device &device, uint32_t bank, uint64_t size, uint64_t alignment,
                         trn_mem_category_t category, const std::string &cause) {
  // The physical cores nearest the bank, as the driver lays them out.
  uint32_t first_core = UINT32_MAX, last_core = 0;
  for (const Core *core : device.cores)
    if (core->layout.hbm_bank == bank) {
      first_core = std::min(first_core, core->layout.first_physical_core);
      last_core = std::max(last_core,
                           core->layout.first_physical_core + core->layout.physical_core_count - 1);
    }
  const std::string near = first_core == UINT32_MAX
                               ? ""
                               : " (physical cores " + std::to_string(first_core) + "-" +
                                     std::to_string(last_core) + ")";
  std::string text = "cannot allocate " + common::format_bytes(size) + " (alignment " +
                     common::format_bytes(alignment) + ", category " +
                     trn_mem_category_name(category) + ") in HBM bank " + std::to_string(bank) +
                     " of device " + std::to_string(device.index) + near + ": " + cause;
  uint64_t bank_bytes = 0, held = 0, largest = 0;
  DriverError err;
  if (ops(device).mem_bank_usage(instance(device), device.driver_index, bank, &bank_bytes, &held,
                                 &largest, &err) == TRN_SUCCESS)
    text += ". The bank has " + common::format_bytes(bank_bytes) + ", " +
            common::format_bytes(held) + " held, largest free range " +
            common::format_bytes(largest) + ".";
  std::vector<trn_hal_process_t> processes;
  if (list_processes(device, &processes) != TRN_SUCCESS) return text;
  text += " Who holds the bank:\n";
  char line[512];
  std::snprintf(line, sizeof line, "  %-8s %-28s %10s %10s", "PID", "COMMAND", "RESERVED",
                "ALLOCATED");
  text += line;
  for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c) {
    std::snprintf(line, sizeof line, " %11s",
                  trn_mem_category_name(static_cast<trn_mem_category_t>(c)));
    text += line;
  }
  text += "\n";
  for (const auto &process : processes) {
    uint64_t allocated = 0;
    for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c)
      allocated += process.hbm_allocated_bytes[bank][c];
    if (process.hbm_reserved_bytes[bank] == 0 && allocated == 0) continue;
    std::string command = process.command;
    if (command.size() > 28) command = command.substr(0, 25) + "...";
    std::snprintf(line, sizeof line, "  %-8d %-28s %10s %10s", process.pid, command.c_str(),
                  common::format_bytes(process.hbm_reserved_bytes[bank]).c_str(),
                  common::format_bytes(allocated).c_str());
    text += line;
    for (uint32_t c = 0; c < TRN_MEM_CATEGORY_COUNT; ++c) {
      std::snprintf(line, sizeof line, " %11s",
                    common::format_bytes(process.hbm_allocated_bytes[bank][c]).c_str());
      text += line;
    }
    text += process.pid == getpid() ? "  (this process)\n" : "\n";
  }
  text +=
      "Free memory in those processes, use another bank (trn_pool_desc_t.hbm_bank), or "
      "lower the request.";
  return text;
}

}  // namespace trn::rt
