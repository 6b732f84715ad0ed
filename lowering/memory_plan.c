// Liveness-based first-fit arena planning (see memory_plan.h).
#include "memory_plan.h"

#include <stdlib.h>

static int64_t tpc__align(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// Sorting by definition keeps the result independent of the caller's order.
static int tpc__by_def(const void* a, const void* b) {
  const tpc_plan_buffer_t *x = *(tpc_plan_buffer_t* const*)a, *y = *(tpc_plan_buffer_t* const*)b;
  if (x->def != y->def) return x->def < y->def ? -1 : 1;
  return x < y ? -1 : x > y;
}

int64_t tpc_memory_plan(tpc_plan_buffer_t* buffers, int count, int64_t alignment) {
  if (count < 0 || alignment < 1) return -1;
  if (count == 0) return 0;
  tpc_plan_buffer_t** order = malloc(sizeof *order * (size_t)count);
  if (!order) return -1;
  for (int i = 0; i < count; ++i) {
    if (buffers[i].bytes < 0) {
      free(order);
      return -1;
    }
    order[i] = &buffers[i];
  }
  qsort(order, (size_t)count, sizeof *order, tpc__by_def);
  int64_t arena = 0;
  for (int i = 0; i < count; ++i) {
    tpc_plan_buffer_t* b = order[i];
    int64_t size = tpc__align(b->bytes > 0 ? b->bytes : 1, alignment);
    // Candidate offsets are 0 and the ends of live placed buffers; take the lowest that does not
    // overlap any placed buffer still live when |b| is defined.
    int64_t best = -1;
    for (int c = -1; c < i; ++c) {
      int64_t off = c < 0 ? 0 : tpc__align(order[c]->offset + order[c]->bytes, alignment);
      if (c >= 0 && order[c]->last_use < b->def) continue;
      if (best >= 0 && off >= best) continue;
      int fits = 1;
      for (int o = 0; o < i && fits; ++o) {
        const tpc_plan_buffer_t* p = order[o];
        if (p->last_use < b->def) continue;  // dead before b is written
        int64_t pend = p->offset + tpc__align(p->bytes > 0 ? p->bytes : 1, alignment);
        fits = off + size <= p->offset || off >= pend;
      }
      if (fits) best = off;
    }
    b->offset = best;
    if (best + size > arena) arena = best + size;
  }
  free(order);
  return arena;
}
