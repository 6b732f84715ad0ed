// Host allocators, passed explicitly by value (IREE style): every object that allocates takes
// one, stores it, and frees through it.
// Thread safety: the system allocator is thread-safe; custom ones must say.
#ifndef TPRT_ALLOCATOR_H_
#define TPRT_ALLOCATOR_H_

#include <stddef.h>

#include "tprt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Allocates |size| bytes aligned to |alignment| (a power of two) into |*out_ptr|, or frees
/// |ptr| when |size| is 0. Returns NULL status on success.
typedef tprt_status_t (*tprt_allocator_fn_t)(void* self, size_t size, size_t alignment, void* ptr, void** out_ptr);

typedef struct tprt_allocator_t {
  void* self;
  tprt_allocator_fn_t fn;
} tprt_allocator_t;

/// The process allocator (aligned_alloc/free).
tprt_allocator_t tprt_allocator_system(void);

/// Allocates |size| zeroed bytes aligned to |alignment| (>= 16, a power of two); the caller
/// owns the memory and frees it with tprt_allocator_free on the same allocator.
tprt_status_t tprt_allocator_malloc(tprt_allocator_t a, size_t size, size_t alignment, void** out_ptr)
    TPRT_MUST_USE_RESULT;

/// Like tprt_allocator_malloc without zeroing.
tprt_status_t tprt_allocator_malloc_uninitialized(tprt_allocator_t a, size_t size, size_t alignment, void** out_ptr)
    TPRT_MUST_USE_RESULT;

/// Frees memory from tprt_allocator_malloc (NULL-safe).
void tprt_allocator_free(tprt_allocator_t a, void* ptr);

#ifdef __cplusplus
}
#endif

#endif  // TPRT_ALLOCATOR_H_
