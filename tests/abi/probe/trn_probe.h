/* A two-function library whose variants (selected by macros) exercise scripts/abi-check's
   rules: see test_abi_policy.sh. */
#ifndef TRN_PROBE_H
#define TRN_PROBE_H
#include <stdint.h>

typedef struct trn_probe_info {
  uint32_t size;
#ifdef GROW_MIDDLE
  uint32_t inserted;
#endif
  uint32_t count;
#ifdef GROW_END
  uint64_t appended;
#endif
} trn_probe_info_t;

#ifdef CHANGE_SIGNATURE
int trn_probe_get(trn_probe_info_t *info, uint64_t flags);
#elif !defined(REMOVE_FUNCTION)
int trn_probe_get(trn_probe_info_t *info);
#endif
int trn_probe_version(void);
#if defined(ADD_IN_NEW_NODE) || defined(ADD_IN_OLD_NODE)
int trn_probe_added(void);
#endif
#endif
