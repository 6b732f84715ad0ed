// Environment knobs (see tprt_params.h): the one list of TPRT_* variables and their defaults.
#include "tprt_params.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

// The states of a cached knob: not read yet, or read and stored in the cache.
enum { TPRT__PARAM_UNREAD = 0, TPRT__PARAM_READ = 1 };

int64_t tprt__param_load(const char* name, int64_t default_value, _Atomic int64_t* cache, atomic_int* state) {
  if (atomic_load_explicit(state, memory_order_acquire) == TPRT__PARAM_READ)
    return atomic_load_explicit(cache, memory_order_relaxed);
  // Two threads may both get here; both compute the same value, so the race is benign.
  int64_t value = default_value;
  const char* text = getenv(name);
  if (text && text[0] != '\0') {
    char* end = NULL;
    errno = 0;
    long long parsed = strtoll(text, &end, 10);
    if (errno != 0 || *end != '\0')
      fprintf(stderr, "tprt: warning: ignoring %s='%s' (not an integer); using %lld\n", name, text,
              (long long)default_value);
    else
      value = (int64_t)parsed;
  }
  atomic_store_explicit(cache, value, memory_order_relaxed);
  atomic_store_explicit(state, TPRT__PARAM_READ, memory_order_release);
  return value;
}

TPRT_PARAM(collective_timeout_s, "COLLECTIVE_TIMEOUT_S", 600)
TPRT_PARAM(cuda_share_devices, "CUDA_SHARE_DEVICES", 0)
TPRT_PARAM(cuda_comm_sms, "CUDA_COMM_SMS", 16)
TPRT_PARAM(cuda_timeline, "CUDA_TIMELINE", 0)
TPRT_PARAM(cuda_copy_engine, "CUDA_COPY_ENGINE", 1)
TPRT_PARAM(cuda_ce_own_from_peer, "CUDA_CE_OWN_FROM_PEER", 0)
TPRT_PARAM(cuda_fused_norm, "CUDA_FUSED_NORM", -1)
TPRT_PARAM(cuda_fused_norm_max_bytes, "CUDA_FUSED_NORM_MAX_BYTES", -1)
