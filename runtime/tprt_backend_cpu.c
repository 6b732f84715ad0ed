// The CPU backend (tprt_backend.h): host memory, the exact CPU kernels, the thread-world
// collectives.
#include <string.h>

#include "tprt_allocator.h"
#include "tprt_backend.h"
#include "tprt_cpu_kernels.h"

static tprt_status_t tprt__cpu_alloc(size_t bytes, void** out) {
  return tprt_allocator_malloc(tprt_allocator_system(), bytes > 0 ? bytes : 1, 256, out);
}

static void tprt__cpu_free(void* ptr) { tprt_allocator_free(tprt_allocator_system(), ptr); }

static tprt_status_t tprt__cpu_copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes) memcpy(dst, src, bytes);
  return NULL;
}

static tprt_status_t tprt__cpu_synchronize(void) { return NULL; }

static const tprt_backend_t tprt__cpu_backend = {
    .name = "cpu",
    .alloc = tprt__cpu_alloc,
    .free = tprt__cpu_free,
    .to_device = tprt__cpu_copy_bytes,
    .to_host = tprt__cpu_copy_bytes,
    .synchronize = tprt__cpu_synchronize,
#define TPRT__CPU_KERNEL(name, params, args) .name = tprt_cpu_##name,
#define TPRT__CPU_COLLECTIVE(name, params, args) .name = tprt_##name,
    TPRT_BACKEND_KERNELS(TPRT__CPU_KERNEL) TPRT_BACKEND_COLLECTIVES(TPRT__CPU_COLLECTIVE)
#undef TPRT__CPU_KERNEL
#undef TPRT__CPU_COLLECTIVE
};

const tprt_backend_t* tprt_backend_cpu(void) { return &tprt__cpu_backend; }
