// The system allocator and the allocation helpers (see tprt_allocator.h).
#include "tprt_allocator.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// "cannot allocate X GiB (N bytes) of host memory; the machine has A GiB available of T GiB".
static tprt_status_t tprt__no_room(size_t size) {
  const double gib = 1024.0 * 1024.0 * 1024.0;
  long page = sysconf(_SC_PAGESIZE), avail = sysconf(_SC_AVPHYS_PAGES), total = sysconf(_SC_PHYS_PAGES);
  if (page <= 0 || avail < 0 || total <= 0)
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "cannot allocate %.2f GiB (%zu bytes) of host memory",
                            size / gib, size);
  return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED,
                          "cannot allocate %.2f GiB (%zu bytes) of host memory; the machine has %.2f GiB available "
                          "of %.2f GiB",
                          size / gib, size, (double)avail * (double)page / gib, (double)total * (double)page / gib);
}

static tprt_status_t tprt__system_fn(void* self, size_t size, size_t alignment, void* ptr, void** out_ptr) {
  (void)self;
  if (size == 0) {
    free(ptr);
    return NULL;
  }
  if (alignment < sizeof(void*) || (alignment & (alignment - 1)) != 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "alignment %zu is not a power of two >= %zu", alignment,
                            sizeof(void*));
  // aligned_alloc needs a size that is a multiple of the alignment.
  if (size > SIZE_MAX - alignment) return tprt__no_room(size);
  size_t rounded = (size + alignment - 1) / alignment * alignment;
  void* p = aligned_alloc(alignment, rounded);
  if (!p) return tprt__no_room(size);
  *out_ptr = p;
  return NULL;
}

tprt_allocator_t tprt_allocator_system(void) {
  tprt_allocator_t a = {NULL, tprt__system_fn};
  return a;
}

tprt_status_t tprt_allocator_malloc_uninitialized(tprt_allocator_t a, size_t size, size_t alignment, void** out_ptr) {
  *out_ptr = NULL;
  if (alignment < 16) alignment = 16;
  return a.fn(a.self, size ? size : 1, alignment, NULL, out_ptr);
}

tprt_status_t tprt_allocator_malloc(tprt_allocator_t a, size_t size, size_t alignment, void** out_ptr) {
  TPRT_RETURN_IF_ERROR(tprt_allocator_malloc_uninitialized(a, size, alignment, out_ptr), "allocating %zu bytes", size);
  memset(*out_ptr, 0, size);
  return NULL;
}

void tprt_allocator_free(tprt_allocator_t a, void* ptr) {
  if (ptr) tprt_status_ignore(a.fn(a.self, 0, 0, ptr, NULL));
}
