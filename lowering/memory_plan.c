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

// Strategy 1, first fit in definition order: the placed buffers still live, sorted by offset.
static int64_t tpc__plan_by_def(tpc_plan_buffer_t* buffers, int count, int64_t alignment) {
  if (count == 0) return 0;
  tpc_plan_buffer_t** order = malloc(sizeof *order * (size_t)count);
  // The placed buffers still live, sorted by offset: they never overlap one another (each pair
  // is live at the later one's definition), so their extents are disjoint and sorted too.
  tpc_plan_buffer_t** live = malloc(sizeof *live * (size_t)count);
  if (!order || !live) {
    free(order);
    free(live);
    return -1;
  }
  for (int i = 0; i < count; ++i) {
    if (buffers[i].bytes < 0) {
      free(order);
      free(live);
      return -1;
    }
    order[i] = &buffers[i];
  }
  qsort(order, (size_t)count, sizeof *order, tpc__by_def);
  int64_t arena = 0;
  int nlive = 0;
  for (int i = 0; i < count; ++i) {
    tpc_plan_buffer_t* b = order[i];
    int64_t size = tpc__extent(b, alignment);
    int n = 0;  // drop the buffers dead before |b| is written
    for (int k = 0; k < nlive; ++k)
      if (live[k]->last_use >= b->def) live[n++] = live[k];
    nlive = n;
    // Candidate offsets are 0 and the (aligned) ends of the live buffers, in increasing order;
    // take the first whose range overlaps no live buffer. |j|: the first live buffer whose extent
    // ends after the candidate (the ones before it cannot overlap it).
    int64_t best = -1;
    int j = 0;
    for (int c = -1; c < nlive && best < 0; ++c) {
      int64_t off = c < 0 ? 0 : live[c]->offset + tpc__extent(live[c], alignment);
      while (j < nlive && live[j]->offset + tpc__extent(live[j], alignment) <= off) ++j;
      if (j == nlive || live[j]->offset >= off + size) best = off;
    }
    b->offset = best;
    if (best + size > arena) arena = best + size;
    // Insert |b| into the live list by offset.
    int at = nlive;
    while (at > 0 && live[at - 1]->offset > best) {
      live[at] = live[at - 1];
      --at;
    }
    live[at] = b;
    ++nlive;
  }
  free(order);
  free(live);
  return arena;
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

static int64_t tpc__plan_by_size(tpc_plan_buffer_t* buffers, int count, int64_t alignment, int64_t* offsets) {
  tpc_plan_buffer_t** order = malloc(sizeof *order * (size_t)count);
  tpc_plan_buffer_t** placed = malloc(sizeof *placed * (size_t)count);  // sorted by offset
  if (!order || !placed) {
    free(order);
    free(placed);
    return -1;
  }
  for (int i = 0; i < count; ++i) order[i] = &buffers[i];
  qsort(order, (size_t)count, sizeof *order, tpc__by_size);
  int64_t arena = 0;
  int nplaced = 0;
  for (int i = 0; i < count; ++i) {
    tpc_plan_buffer_t* b = order[i];
    int64_t size = tpc__extent(b, alignment), off = 0;
    for (int k = 0; k < nplaced; ++k) {
      const tpc_plan_buffer_t* p = placed[k];
      if (p->last_use < b->def || b->last_use < p->def) continue;  // never live together
      int64_t p_off = offsets[p - buffers];
      if (p_off >= off + size) break;  // the gap below |p| fits
      int64_t end = p_off + tpc__extent(p, alignment);
      if (end > off) off = end;
    }
    offsets[b - buffers] = off;
    if (off + size > arena) arena = off + size;
    int at = nplaced;
    while (at > 0 && offsets[placed[at - 1] - buffers] > off) {
      placed[at] = placed[at - 1];
      --at;
    }
    placed[at] = b;
    ++nplaced;
  }
  free(order);
  free(placed);
  return arena;
}

int64_t tpc_memory_plan(tpc_plan_buffer_t* buffers, int count, int64_t alignment) {
  if (count < 0 || alignment < 1) return -1;
  if (count == 0) return 0;
  for (int i = 0; i < count; ++i)
    if (buffers[i].bytes < 0) return -1;
  int64_t first = tpc__plan_by_def(buffers, count, alignment);
  if (first < 0) return -1;
  // The second strategy writes its offsets aside and is kept only when its arena is smaller.
  int64_t* offsets = malloc(sizeof *offsets * (size_t)count);
  if (!offsets) return first;
  int64_t second = tpc__plan_by_size(buffers, count, alignment, offsets);
  if (second >= 0 && second < first) {
    for (int i = 0; i < count; ++i) buffers[i].offset = offsets[i];
    first = second;
  }
  free(offsets);
  return first;
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
