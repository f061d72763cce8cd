/*
 * A driver that finds no devices, built several times to test how the runtime loads drivers:
 * FAKE_MAJOR / FAKE_MINOR set the interface version its table reports (FAKE_MINOR by default this
 * runtime's), FAKE_EXTRA_BYTES how much
 * larger (or, negative, smaller) than trn_hal_ops_t it says its table is, FAKE_DEVICES how many
 * devices it reports (its table has no operation for them: it must be refused), and FAKE_NO_ENTRY
 * leaves the entry point out (it then exports another symbol, so it is a valid library).
 */
#include <stdio.h>

#include "drivers/hal.h"

#ifndef FAKE_MINOR /* this runtime's own minor version */
#define FAKE_MINOR TRN_HAL_VERSION_MINOR(TRN_HAL_VERSION)
#endif

#ifdef FAKE_NO_ENTRY

TRN_HAL_EXPORT int trn_fake_not_a_driver(void) {
  return 0;
}

#else

struct fake_instance {
  int unused;
};
static struct fake_instance the_instance;

static trn_result_t fake_open(const trn_hal_process_identity_t *identity,
                              trn_hal_instance_t **instance, trn_hal_error_t *err) {
  (void)identity;
  (void)err;
  *instance = (trn_hal_instance_t *)&the_instance;
  return TRN_SUCCESS;
}
static void fake_close(trn_hal_instance_t *instance) {
  (void)instance;
}
#ifndef FAKE_DEVICES
#define FAKE_DEVICES 0
#endif
static uint32_t fake_device_count(const trn_hal_instance_t *instance) {
  (void)instance;
  return FAKE_DEVICES;
}
static trn_result_t fake_status(const trn_hal_instance_t *instance, char *detail,
                                uint32_t detail_size) {
  (void)instance;
  if (FAKE_DEVICES > 0) {
    snprintf(detail, detail_size, "the fake driver has %d devices", FAKE_DEVICES);
    return TRN_SUCCESS;
  }
  snprintf(detail, detail_size, "the fake driver has no devices");
  return TRN_ERROR_NO_DEVICE;
}

/* A table with room for operations of later minor versions when FAKE_EXTRA_BYTES > 0. */
static struct {
  trn_hal_ops_t ops;
  unsigned char later[FAKE_EXTRA_BYTES > 0 ? FAKE_EXTRA_BYTES : 1];
} table;

TRN_HAL_EXPORT const trn_hal_ops_t *trn_hal_get_ops(uint32_t runtime_version) {
  (void)runtime_version;
  table.ops.version = TRN_HAL_MAKE_VERSION(FAKE_MAJOR, FAKE_MINOR);
  table.ops.size = (uint32_t)((int)sizeof(trn_hal_ops_t) + FAKE_EXTRA_BYTES);
  table.ops.name = "fake";
  table.ops.open = fake_open;
  table.ops.close = fake_close;
  table.ops.device_count = fake_device_count;
  table.ops.status = fake_status;
  return &table.ops;
}

#endif
