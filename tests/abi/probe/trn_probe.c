#include "trn_probe.h"

#ifdef CHANGE_SIGNATURE
int trn_probe_get(trn_probe_info_t *info, uint64_t flags) {
  info->count = (uint32_t)flags;
  return 0;
}
#elif !defined(REMOVE_FUNCTION)
int trn_probe_get(trn_probe_info_t *info) {
  info->count = 1;
  return 0;
}
#endif
int trn_probe_version(void) {
  return 1;
}
#if defined(ADD_IN_NEW_NODE) || defined(ADD_IN_OLD_NODE)
int trn_probe_added(void) {
  return 2;
}
#endif
