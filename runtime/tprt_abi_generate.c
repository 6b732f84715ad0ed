// The runtime ABI of the generation ops, tp.kvcache_write and tp.sample (see tprt_abi.h);
// descriptor decoding is shared with tprt_abi.c through tprt_abi_impl.h.
#include "tprt_abi_impl.h"

int32_t tprt_abi_kvcache_write(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_KVCACHE_WRITE_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, kvcache_write,
                     (&c.slot[TPRT_KVCACHE_WRITE_SLOT_CACHE], &c.slot[TPRT_KVCACHE_WRITE_SLOT_NEW],
                      &c.slot[TPRT_KVCACHE_WRITE_SLOT_CACHE_LEN], &c.slot[TPRT_KVCACHE_WRITE_SLOT_OUT],
                      tprt__attr(&c, TPRT_KVCACHE_WRITE_ATTR_SEQ_LEN)));
  return tprt_exec_record(exec, s, TPRT_KVCACHE_WRITE_NAME);
}

int32_t tprt_abi_sample(tprt_exec_t* exec, void* const* buffers, const int64_t* desc) {
  tprt_call_t c;
  tprt_status_t s = tprt__decode(desc, buffers, TPRT_SAMPLE_NUM_SLOTS, &c);
  if (!s)
    s = TPRT__KERNEL(exec, sample,
                     (&c.slot[TPRT_SAMPLE_SLOT_LOGITS], &c.slot[TPRT_SAMPLE_SLOT_SEED], &c.slot[TPRT_SAMPLE_SLOT_REQUEST],
                      &c.slot[TPRT_SAMPLE_SLOT_POSITION], &c.slot[TPRT_SAMPLE_SLOT_TEMPERATURE],
                      &c.slot[TPRT_SAMPLE_SLOT_TOP_K], &c.slot[TPRT_SAMPLE_SLOT_TOP_P], &c.slot[TPRT_SAMPLE_SLOT_TOKEN]));
  return tprt_exec_record(exec, s, TPRT_SAMPLE_NAME);
}
