#include "runtime/driver_loader.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include "common/parse.hpp"
#include "runtime/builtin_drivers.hpp"

namespace trn::rt {

namespace {

namespace fs = std::filesystem;

constexpr const char *kPrefix = "libtrn-driver-";
constexpr const char *kSuffix = ".so";

std::string version_text(uint32_t version) {
  return std::to_string(TRN_HAL_VERSION_MAJOR(version)) + "." +
         std::to_string(TRN_HAL_VERSION_MINOR(version));
}

std::string accepted_versions() {
  const uint32_t major = TRN_HAL_VERSION_MAJOR(TRN_HAL_VERSION);
  return std::to_string(major) + ".x (" + version_text(TRN_HAL_VERSION) + " or later)";
}

// Where libtrn lies (for the static archive: the program), found from one of its own symbols.
fs::path library_directory() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void *>(&load_drivers), &info) == 0 ||
      info.dli_fname == nullptr)
    return {};
  std::error_code ec;
  fs::path self = fs::canonical(info.dli_fname, ec);
  return (ec ? fs::path(info.dli_fname) : self).parent_path();
}

std::string file_name_of(const std::string &name) {
  return std::string(kPrefix) + name + kSuffix;
}

// "sim" for libtrn-driver-sim.so; nothing for a file of another name.
std::optional<std::string> driver_name_of(const std::string &file) {
  const size_t fixed = std::strlen(kPrefix) + std::strlen(kSuffix);
  if (file.size() <= fixed || !file.starts_with(kPrefix) || !file.ends_with(kSuffix)) return {};
  return file.substr(std::strlen(kPrefix), file.size() - fixed);
}

// The names of the libtrn-driver-<name>.so files in `dir`, sorted.
std::vector<std::string> drivers_in(const fs::path &dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    if (auto name = driver_name_of(it->path().filename().string())) names.push_back(*name);
  std::sort(names.begin(), names.end());
  return names;
}

std::string known_drivers(const fs::path &dir) {
  std::vector<std::string> names;
  for (const BuiltinDriver &d : builtin_drivers()) names.emplace_back(d.name);
  for (std::string &name : drivers_in(dir)) {
    std::error_code ec;  // a link whose target is gone is no driver that is there
    if (fs::exists(dir / file_name_of(name), ec)) names.push_back(std::move(name));
  }
  std::string text;
  for (const std::string &name : names) text += (text.empty() ? "" : ", ") + name;
  return text.empty() ? "none" : text;
}

// Checks the table a driver's entry point returned and copies the part this runtime knows.
void adopt_table(const trn_hal_ops_t *table, DriverTable *out) {
  const std::string where = "driver " + out->origin;
  if (table == nullptr) {
    out->result = TRN_ERROR_DRIVER_INCOMPATIBLE;
    out->why = where + " has no table for driver interface version " +
               version_text(TRN_HAL_VERSION) + " (its " + TRN_HAL_ENTRY_POINT + " returned NULL)";
    return;
  }
  out->ops.version = table->version;
  if (TRN_HAL_VERSION_MAJOR(table->version) != TRN_HAL_VERSION_MAJOR(TRN_HAL_VERSION)) {
    out->result = TRN_ERROR_DRIVER_INCOMPATIBLE;
    out->why = where + " implements driver interface version " + version_text(table->version) +
               ", but this runtime (trn " TRN_RELEASE_STRING ") accepts versions " +
               accepted_versions() + ": use a driver built for this release";
    return;
  }
  if (table->size < sizeof(trn_hal_ops_t)) {
    out->result = TRN_ERROR_DRIVER_INCOMPATIBLE;
    out->why = where + " (driver interface version " + version_text(table->version) +
               ") has a table of " + std::to_string(table->size) +
               " bytes, but this runtime (trn " TRN_RELEASE_STRING ", driver interface " +
               version_text(TRN_HAL_VERSION) + ") needs " + std::to_string(sizeof(trn_hal_ops_t)) +
               " bytes, and accepts versions " + accepted_versions() +
               ": use a driver built for this release";
    return;
  }
  // A table of this size from an older minor version still lacks what came since: its version
  // is what it promises, whatever its size says.
  if (TRN_HAL_VERSION_MINOR(table->version) < TRN_HAL_VERSION_MINOR(TRN_HAL_VERSION)) {
    out->result = TRN_ERROR_DRIVER_INCOMPATIBLE;
    out->why = where + " implements driver interface version " + version_text(table->version) +
               ", older than this runtime's (trn " TRN_RELEASE_STRING " accepts versions " +
               accepted_versions() + "): use a driver built for this release";
    return;
  }
  std::memcpy(&out->ops, table, sizeof out->ops);  // a larger table: the rest is newer
  if (out->ops.name == nullptr || out->ops.open == nullptr || out->ops.close == nullptr ||
      out->ops.device_count == nullptr || out->ops.status == nullptr) {
    out->ops = {};
    out->result = TRN_ERROR_DRIVER_INCOMPATIBLE;
    out->why = where + " has an incomplete table (no name, open, close, device_count or status)";
    return;
  }
  out->name = out->ops.name;
}

DriverTable load_builtin(const BuiltinDriver &builtin) {
  DriverTable table;
  table.name = builtin.name;
  table.origin = std::string("'") + builtin.name + "' (built in)";
  adopt_table(builtin.get_ops(TRN_HAL_VERSION), &table);
  return table;
}

// Loads a driver's shared object. Drivers are never unloaded: they may have started threads, and
// their tables are used until the process ends.
DriverTable load_shared_object(const std::string &name, const std::string &path) {
  DriverTable table;
  table.name = name;
  table.origin = path;
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char *error = dlerror();
    table.result = TRN_ERROR_DRIVER_INCOMPATIBLE;
    table.why = "driver " + path + " does not load: " + (error ? error : "unknown dlopen error");
    return table;
  }
  void *entry = dlsym(handle, TRN_HAL_ENTRY_POINT);
  if (entry == nullptr) {
    table.result = TRN_ERROR_DRIVER_INCOMPATIBLE;
    table.why = path + " is not a trn driver: it does not export " TRN_HAL_ENTRY_POINT;
    return table;
  }
  adopt_table(reinterpret_cast<trn_hal_get_ops_fn>(entry)(TRN_HAL_VERSION), &table);
  return table;
}

// TRN_DRIVER=<name> or <path>: that driver, or an error.
trn_result_t load_named(const std::string &wanted, std::vector<DriverTable> *out,
                        std::string *why) {
  DriverTable table;
  const bool is_path = wanted.find('/') != std::string::npos;
  const auto builtin =
      std::find_if(builtin_drivers().begin(), builtin_drivers().end(),
                   [&](const BuiltinDriver &d) { return !is_path && wanted == d.name; });
  if (builtin != builtin_drivers().end()) {
    table = load_builtin(*builtin);
  } else {
    const fs::path dir = library_directory();
    const fs::path path = is_path ? fs::path(wanted) : dir / file_name_of(wanted);
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      *why = "TRN_DRIVER='" + wanted + "' names no driver: there is no " + path.string() +
             (is_path ? ""
                      : " (the drivers beside libtrn in " + dir.string() + ": " +
                            known_drivers(dir) + ")") +
             "; set TRN_DRIVER to a driver's name or path, or unset it to use every driver";
      return TRN_ERROR_DRIVER_NOT_FOUND;
    }
    const std::string file = path.filename().string();
    table = load_shared_object(driver_name_of(file).value_or(file), path.string());
  }
  if (table.result != TRN_SUCCESS) {
    *why = "TRN_DRIVER='" + wanted + "': " + table.why;
    return table.result;
  }
  out->push_back(std::move(table));
  return TRN_SUCCESS;
}

// TRN_DRIVER unset: the built-in drivers if the program has any, else every driver beside libtrn.
void load_every_driver(std::vector<DriverTable> *out) {
  for (const BuiltinDriver &builtin : builtin_drivers()) out->push_back(load_builtin(builtin));
  if (!out->empty()) return;
  const fs::path dir = library_directory();
  for (const std::string &name : drivers_in(dir)) {
    const fs::path path = dir / file_name_of(name);
    std::error_code ec;
    if (!fs::exists(path, ec)) {  // a link whose target is gone: not found, as by name
      DriverTable missing;
      missing.name = name;
      missing.origin = path.string();
      missing.result = TRN_ERROR_DRIVER_NOT_FOUND;
      missing.why = "driver " + path.string() + " is a link to " +
                    fs::read_symlink(path, ec).string() +
                    ", which does not exist: reinstall the driver or remove the link";
      out->push_back(std::move(missing));
      continue;
    }
    out->push_back(load_shared_object(name, path.string()));
  }
  if (out->empty()) {
    DriverTable none;
    none.name = "none";
    none.result = TRN_ERROR_DRIVER_NOT_FOUND;
    none.why = "no driver beside libtrn: no " + std::string(kPrefix) + "*" + kSuffix + " in " +
               dir.string() + "; install one there or set TRN_DRIVER to a driver's path";
    out->push_back(std::move(none));
  }
}

}  // namespace

const char *missing_operation(const trn_hal_ops_t &ops) {
#define TRN_REQUIRED_OP(op) \
  { #op, ops.op != nullptr }
  const struct {
    const char *name;
    bool present;
  } required[] = {
      TRN_REQUIRED_OP(abandon),
      TRN_REQUIRED_OP(device_properties),
      TRN_REQUIRED_OP(device_neighbors),
      TRN_REQUIRED_OP(core_info),
      TRN_REQUIRED_OP(core_claim),
      TRN_REQUIRED_OP(core_unclaim),
      TRN_REQUIRED_OP(core_owner),
      TRN_REQUIRED_OP(process_list),
      TRN_REQUIRED_OP(mem_reserve),
      TRN_REQUIRED_OP(mem_release),
      TRN_REQUIRED_OP(mem_map),
      TRN_REQUIRED_OP(mem_write),
      TRN_REQUIRED_OP(mem_read),
      TRN_REQUIRED_OP(mem_register_host),
      TRN_REQUIRED_OP(mem_unregister_host),
      TRN_REQUIRED_OP(mem_account),
      TRN_REQUIRED_OP(mem_export),
      TRN_REQUIRED_OP(mem_import),
      TRN_REQUIRED_OP(mem_unexport),
      TRN_REQUIRED_OP(mem_bank_usage),
      TRN_REQUIRED_OP(sem_create),
      TRN_REQUIRED_OP(sem_import),
      TRN_REQUIRED_OP(sem_destroy),
      TRN_REQUIRED_OP(sem_query),
      TRN_REQUIRED_OP(sem_value),
      TRN_REQUIRED_OP(sem_signal),
      TRN_REQUIRED_OP(sem_fail),
      TRN_REQUIRED_OP(sem_wait),
      TRN_REQUIRED_OP(sem_watch),
      TRN_REQUIRED_OP(sem_close_watches),
      TRN_REQUIRED_OP(kernel_load),
      TRN_REQUIRED_OP(kernel_unload),
      TRN_REQUIRED_OP(kernel_properties),
      TRN_REQUIRED_OP(kernel_arg),
      TRN_REQUIRED_OP(kernel_source_line),
      TRN_REQUIRED_OP(queue_create),
      TRN_REQUIRED_OP(queue_destroy),
      TRN_REQUIRED_OP(queue_submit),
      TRN_REQUIRED_OP(queue_status),
      TRN_REQUIRED_OP(queue_reset),
      TRN_REQUIRED_OP(device_time_ns),
      TRN_REQUIRED_OP(queue_set_priority),
      TRN_REQUIRED_OP(kernel_source_file),
      TRN_REQUIRED_OP(sem_raise),
  };
#undef TRN_REQUIRED_OP
  for (const auto &op : required)
    if (!op.present) return op.name;
  return nullptr;
}

trn_result_t load_drivers(std::vector<DriverTable> *out, std::string *why) {
  if (auto wanted = common::env("TRN_DRIVER")) return load_named(*wanted, out, why);
  load_every_driver(out);
  return TRN_SUCCESS;
}

}  // namespace trn::rt
