// Liveness-based arena planning, two strategies (see memory_plan.h).
#include "memory_plan.h"

#include <stdlib.h>

static int64_t tpc__align(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// Sorting by definition keeps the result independent of the caller's order.
static int tpc__by_def(const void* a, const void* b) {
  const tpc_plan_buffer_t *x = *(tpc_plan_buffer_t* const*)a, *y = *(tpc_plan_buffer_t* const*)b;
  if (x->def != y->def) return x->def < y->def ? -1 : 1;
  return x < y ? -1 : x > y;
}

// The space a placed buffer occupies: its size rounded up, at least one alignment unit.
static int64_t tpc__extent(const tpc_plan_buffer_t* b, int64_t alignment) {
  return tpc__align(b->bytes > 0 ? b->bytes : 1, alignment);
}

// One placement: the buffers in the order |cmp| gives, each at the offset |place| picks among the
// buffers of |list| (sorted by offset; |place| may drop the ones it no longer needs), then
// inserted into |list| by offset. Writes every buffer's offset; returns the arena, or -1 out of
// host memory.
typedef int64_t (*tpc__place_fn)(tpc_plan_buffer_t** list, int* n, const tpc_plan_buffer_t* b, int64_t alignment);

static int64_t tpc__plan(tpc_plan_buffer_t* buffers, int count, int64_t alignment,
                         int (*cmp)(const void*, const void*), tpc__place_fn place) {
  tpc_plan_buffer_t** order = malloc(sizeof *order * (size_t)count);
  tpc_plan_buffer_t** list = malloc(sizeof *list * (size_t)count);
  if (!order || !list) {
    free(order);
    free(list);
    return -1;
  }
  for (int i = 0; i < count; ++i) order[i] = &buffers[i];
  qsort(order, (size_t)count, sizeof *order, cmp);
  int64_t arena = 0;
  int n = 0;
  for (int i = 0; i < count; ++i) {
    tpc_plan_buffer_t* b = order[i];
    b->offset = place(list, &n, b, alignment);
    if (b->offset + tpc__extent(b, alignment) > arena) arena = b->offset + tpc__extent(b, alignment);
    int at = n++;  // insert |b| by offset
    while (at > 0 && list[at - 1]->offset > b->offset) {
      list[at] = list[at - 1];
      --at;
    }
    list[at] = b;
  }
  free(order);
  free(list);
  return arena;
}

// Strategy 1, first fit in definition order. |live|: the placed buffers still live, sorted by
// offset; they never overlap one another (each pair is live at the later one's definition), so
// their extents are disjoint and sorted too.
static int64_t tpc__place_first_fit(tpc_plan_buffer_t** live, int* nlive, const tpc_plan_buffer_t* b,
                                    int64_t alignment) {
  int n = 0;  // drop the buffers dead before |b| is written
  for (int k = 0; k < *nlive; ++k)
    if (live[k]->last_use >= b->def) live[n++] = live[k];
  *nlive = n;
  // Candidate offsets are 0 and the (aligned) ends of the live buffers, in increasing order;
  // take the first whose range overlaps no live buffer. |j|: the first live buffer whose extent
  // ends after the candidate (the ones before it cannot overlap it).
  const int64_t size = tpc__extent(b, alignment);
  int j = 0;
  for (int c = -1; c < n; ++c) {
    int64_t off = c < 0 ? 0 : live[c]->offset + tpc__extent(live[c], alignment);
    while (j < n && live[j]->offset + tpc__extent(live[j], alignment) <= off) ++j;
    if (j == n || live[j]->offset >= off + size) return off;
  }
  return -1;  // not reached: the end of the last live buffer is always free
}

// Strategy 2, greedy by size (TFLite's "greedy by size"): the largest buffers first, each at the
// lowest offset clear of the placed buffers whose live ranges overlap its own. Placed buffers are
// kept sorted by offset, so the scan for a gap is one pass over them.
static int tpc__by_size(const void* a, const void* b) {
  const tpc_plan_buffer_t *x = *(tpc_plan_buffer_t* const*)a, *y = *(tpc_plan_buffer_t* const*)b;
  if (x->bytes != y->bytes) return x->bytes > y->bytes ? -1 : 1;
  if (x->def != y->def) return x->def < y->def ? -1 : 1;
  if (x->last_use != y->last_use) return x->last_use < y->last_use ? -1 : 1;
  return x < y ? -1 : x > y;
}

static int64_t tpc__place_largest_first(tpc_plan_buffer_t** placed, int* nplaced, const tpc_plan_buffer_t* b,
                                        int64_t alignment) {
  const int64_t size = tpc__extent(b, alignment);
  int64_t off = 0;
  for (int k = 0; k < *nplaced; ++k) {
    const tpc_plan_buffer_t* p = placed[k];
    if (p->last_use < b->def || b->last_use < p->def) continue;  // never live together
    if (p->offset >= off + size) break;                          // the gap below |p| fits
    int64_t end = p->offset + tpc__extent(p, alignment);
    if (end > off) off = end;
  }
  return off;
}

static int64_t tpc__plan_by_def(tpc_plan_buffer_t* buffers, int count, int64_t alignment) {
  return tpc__plan(buffers, count, alignment, tpc__by_def, tpc__place_first_fit);
}

static int64_t tpc__plan_by_size(tpc_plan_buffer_t* buffers, int count, int64_t alignment) {
  return tpc__plan(buffers, count, alignment, tpc__by_size, tpc__place_largest_first);
}

int64_t tpc_memory_plan(tpc_plan_buffer_t* buffers, int count, int64_t alignment) {
  if (count < 0 || alignment < 1) return -1;
  if (count == 0) return 0;
  for (int i = 0; i < count; ++i)
    if (buffers[i].bytes < 0) return -1;
  int64_t first = tpc__plan_by_def(buffers, count, alignment);
  if (first < 0) return -1;
  // The first plan's offsets are kept aside; the second replaces them only with a smaller arena.
  int64_t* kept = malloc(sizeof *kept * (size_t)count);
  if (!kept) return first;
  for (int i = 0; i < count; ++i) kept[i] = buffers[i].offset;
  int64_t second = tpc__plan_by_size(buffers, count, alignment);
  if (second < 0 || second >= first) {
    for (int i = 0; i < count; ++i) buffers[i].offset = kept[i];
    second = first;
  }
  free(kept);
  return second;
}

typedef struct {
  int at;         // op index where the change applies
  int64_t delta;  // + extent at the definition, - extent after the last use
} tpc__plan_event_t;

static int tpc__by_at(const void* a, const void* b) {
  const tpc__plan_event_t *x = a, *y = b;
  if (x->at != y->at) return x->at < y->at ? -1 : 1;
  return (x->delta > y->delta) - (x->delta < y->delta);  // frees before definitions at one op
}

int64_t tpc_memory_plan_peak(const tpc_plan_buffer_t* buffers, int count, int64_t alignment) {
  if (count < 0 || alignment < 1) return -1;
  if (count == 0) return 0;
  tpc__plan_event_t* ev = malloc(sizeof *ev * 2 * (size_t)count);
  if (!ev) return -1;
  for (int i = 0; i < count; ++i) {
    if (buffers[i].bytes < 0) {
      free(ev);
      return -1;
    }
    int64_t e = tpc__extent(&buffers[i], alignment);
    ev[2 * i] = (tpc__plan_event_t){buffers[i].def, e};
    ev[2 * i + 1] = (tpc__plan_event_t){buffers[i].last_use + 1, -e};
  }
  qsort(ev, 2 * (size_t)count, sizeof *ev, tpc__by_at);
  int64_t live = 0, peak = 0;
  for (int i = 0; i < 2 * count; ++i) {
    live += ev[i].delta;
    if (live > peak) peak = live;
  }
  free(ev);
  return peak;
}
