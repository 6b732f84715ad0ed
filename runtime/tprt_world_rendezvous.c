// The rendezvous every CPU collective is built on (see tprt_world_impl.h): matching the k-th
// call of each group member, holding their staged inputs, waiting with abort and timeout,
// releasing.
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tprt_procs.h"
#include "tprt_world_impl.h"

//===----------------------------------------------------------------------===//
// Rendezvous
//===----------------------------------------------------------------------===//

tprt_status_t tprt__rendezvous_check_mask(const tprt_rank_t* rank, uint32_t mask, const char* name) {
  const tprt_world_t* world = rank->world;
  if (tprt__mask_valid(world, mask)) return NULL;
  // Report the lowest axis the mesh lacks.
  int axis = world->num_axes;
  while (!(mask & (1u << axis))) ++axis;
  char axes[160];
  return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: axes mask 0x%x names axis %d, but the mesh's axes are %s",
                          name, mask, axis,
                          tprt__world_format_axes(world, (1u << world->num_axes) - 1, axes, sizeof axes));
}

// The mismatch message of two members' signatures, in group-rank order so that it does not
// depend on timing.
static char* tprt__mismatch(tprt_world_t* world, const int* members, int a, const char* sig_a, int b,
                            const char* sig_b) {
  if (a > b) return tprt__mismatch(world, members, b, sig_b, a, sig_a);
  return tprt__world_printf(world,
                            "group members called different collectives: group rank %d (world rank %d) called %s; "
                            "group rank %d (world rank %d) called %s",
                            a, members[a], sig_a, b, members[b], sig_b);
}

// The post of a process world: the members exchange signature and input at once over the
// processes' connections; the collective lives in this process only.
static tprt_status_t tprt__rendezvous_post_procs(tprt_rank_t* rank, tprt__rendezvous_t* rv, const char* signature,
                                                 void* owned_input, size_t input_bytes) {
  tprt_world_t* world = rank->world;
  const int* members = &world->members[rv->mask][rank->group_id[rv->mask] * rv->group_size];
  size_t sig = strlen(signature) + 1;
  tprt__collective_t* c = NULL;
  char* blob = malloc(sig + input_bytes);
  void* got[TPRT_MAX_WORLD_SIZE] = {NULL};
  size_t got_bytes[TPRT_MAX_WORLD_SIZE];
  tprt_status_t status = blob ? tprt_allocator_malloc(world->allocator, sizeof *c, 64, (void**)&c)
                              : tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  if (!status) {
    memcpy(blob, signature, sig);
    if (input_bytes) memcpy(blob + sig, owned_input, input_bytes);
    c->seq = rank->seq[rv->mask]++;
    c->signature_index = rv->group_index;
    c->signature = tprt__world_printf(world, "%s", signature);
    status = tprt_procs_allgather(world->procs, members, rv->group_size, rv->group_index, blob, sig + input_bytes, got,
                                  got_bytes);
  }
  for (int i = 0; !status && i < rv->group_size; ++i) {
    const char* theirs = got[i];
    size_t len = strnlen(theirs, got_bytes[i]);
    if (len == got_bytes[i]) {
      status = tprt_make_status(TPRT_STATUS_INTERNAL, "world rank %d sent a malformed collective", members[i]);
      break;
    }
    if (!c->mismatch && strcmp(theirs, signature) != 0)
      c->mismatch = tprt__mismatch(world, members, rv->group_index, signature, i, theirs);
    c->arrived[i] = true;
    ++c->num_arrived;
    if (i == rv->group_index) {
      c->inputs[i] = owned_input;
      owned_input = NULL;
    } else if (got_bytes[i] > len + 1) {
      status = tprt_allocator_malloc_uninitialized(world->allocator, got_bytes[i] - len - 1, 64, &c->inputs[i]);
      if (!status) memcpy(c->inputs[i], theirs + len + 1, got_bytes[i] - len - 1);
    }
  }
  for (int i = 0; i < rv->group_size; ++i) free(got[i]);
  free(blob);
  tprt_allocator_free(world->allocator, owned_input);
  if (status) {
    if (c) tprt__collective_free(world, c);
    if (!atomic_load(&world->aborted) && tprt_status_code(status) == TPRT_STATUS_ABORTED) {
      // A peer failed: this process's world is aborted too.
      pthread_mutex_lock(&world->abort_mutex);
      if (!atomic_load(&world->aborted)) {
        snprintf(world->abort_message, sizeof world->abort_message, "%s", tprt_status_message(status));
        atomic_store(&world->aborted, true);
      }
      pthread_mutex_unlock(&world->abort_mutex);
      // Forward the failure at once: a peer waiting on this process may not hear of it otherwise.
      tprt_procs_abort(world->procs, tprt_status_message(status));
    }
    char axes[160];
    return tprt_status_annotate(status, "%s over %s", rv->name,
                                tprt__world_format_axes(world, rv->mask, axes, sizeof axes));
  }
  rv->collective = c;
  return NULL;
}

tprt_status_t tprt__rendezvous_post(tprt_rank_t* rank, uint32_t mask, const char* name, const char* signature,
                                    void* owned_input, size_t input_bytes, tprt__rendezvous_t* out_rendezvous) {
  tprt_world_t* world = rank->world;
  tprt__rendezvous_t* rv = out_rendezvous;
  memset(rv, 0, sizeof *rv);
  rv->rank = rank;
  rv->mask = mask;
  rv->name = name;
  rv->group = &world->groups[mask][rank->group_id[mask]];
  rv->group_size = world->group_size[mask];
  rv->group_index = rank->group_index[mask];
  char axes[160];
  if (atomic_load(&world->aborted)) {
    tprt_allocator_free(world->allocator, owned_input);
    return tprt_make_status(TPRT_STATUS_ABORTED, "%s over %s: %s", name,
                            tprt__world_format_axes(world, mask, axes, sizeof axes), world->abort_message);
  }
  if (world->procs) return tprt__rendezvous_post_procs(rank, rv, signature, owned_input, input_bytes);
  uint64_t seq = rank->seq[mask]++;
  tprt__group_t* group = rv->group;
  tprt_status_t status = NULL;
  pthread_mutex_lock(&group->mutex);
  tprt__collective_t* c = group->pending;
  while (c && c->seq != seq) c = c->next;
  if (!c) {
    status = tprt_allocator_malloc(world->allocator, sizeof *c, 64, (void**)&c);
    if (!status) {
      c->seq = seq;
      c->signature = tprt__world_printf(world, "%s", signature);
      c->signature_index = rv->group_index;
      c->next = group->pending;
      group->pending = c;
      if (!c->signature) status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    }
  } else if (c->signature && !c->mismatch && strcmp(c->signature, signature) != 0) {
    const int* members = &world->members[mask][rank->group_id[mask] * rv->group_size];
    c->mismatch = tprt__mismatch(world, members, rv->group_index, signature, c->signature_index, c->signature);
    if (!c->mismatch) status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of memory");
    pthread_cond_broadcast(&group->cond);
  }
  if (!status) {
    c->inputs[rv->group_index] = owned_input;
    owned_input = NULL;
    c->arrived[rv->group_index] = true;
    if (++c->num_arrived == rv->group_size) pthread_cond_broadcast(&group->cond);
    rv->collective = c;
  }
  pthread_mutex_unlock(&group->mutex);
  tprt_allocator_free(world->allocator, owned_input);
  if (status)
    return tprt_status_annotate(status, "%s over %s", name, tprt__world_format_axes(world, mask, axes, sizeof axes));
  return NULL;
}

// Formats the members of |c| that have not arrived: "group ranks 1, 3 (world ranks 5, 7)".
static void tprt__format_missing(const tprt__rendezvous_t* rv, const tprt__collective_t* c, char* buf, size_t size) {
  const tprt_world_t* world = rv->rank->world;
  const int* members = &world->members[rv->mask][rv->rank->group_id[rv->mask] * rv->group_size];
  int missing = rv->group_size - c->num_arrived;
  size_t n = (size_t)snprintf(buf, size, "group rank%s", missing == 1 ? "" : "s");
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1 && n < size) n += (size_t)snprintf(buf + n, size - n, " (world rank%s", missing == 1 ? "" : "s");
    bool first = true;
    for (int i = 0; i < rv->group_size && n < size; ++i) {
      if (c->arrived[i]) continue;
      n += (size_t)snprintf(buf + n, size - n, "%s%d", first ? " " : ", ", pass == 0 ? i : members[i]);
      first = false;
    }
  }
  if (n < size) snprintf(buf + n, size - n, ")");
}

tprt_status_t tprt__rendezvous_wait(tprt__rendezvous_t* rv, void* const** out_inputs) {
  tprt_world_t* world = rv->rank->world;
  tprt__collective_t* c = rv->collective;
  tprt__group_t* group = rv->group;
  *out_inputs = NULL;
  if (world->procs) {  // the post already exchanged everything
    char axes[160];
    if (c->mismatch)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s over %s: %s", rv->name,
                              tprt__world_format_axes(world, rv->mask, axes, sizeof axes), c->mismatch);
    *out_inputs = c->inputs;
    return NULL;
  }
  struct timespec deadline = {0, 0};
  // Beyond ~30 years the deadline would overflow time_t arithmetic; that is forever anyway.
  bool forever = world->timeout_s < 0 || world->timeout_s > 1e9;
  if (!forever) {
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    double whole = floor(world->timeout_s);
    deadline.tv_sec += (time_t)whole;
    deadline.tv_nsec += (long)((world->timeout_s - whole) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec += 1;
      deadline.tv_nsec -= 1000000000L;
    }
  }
  char axes[160];
  tprt__world_format_axes(world, rv->mask, axes, sizeof axes);
  tprt_status_t status = NULL;
  bool timed_out = false;
  pthread_mutex_lock(&group->mutex);
  for (;;) {
    if (c->mismatch) {
      status = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s over %s: %s", rv->name, axes, c->mismatch);
      break;
    }
    if (c->num_arrived == rv->group_size) break;
    if (atomic_load(&world->aborted)) {
      status = tprt_make_status(TPRT_STATUS_ABORTED, "%s over %s: %s", rv->name, axes, world->abort_message);
      break;
    }
    if (timed_out) {
      char missing[768];
      tprt__format_missing(rv, c, missing, sizeof missing);
      status = tprt_make_status(TPRT_STATUS_DEADLINE_EXCEEDED,
                                "%s over %s timed out after %g s: %s never arrived (%d of %d did)", rv->name, axes,
                                world->timeout_s, missing, c->num_arrived, rv->group_size);
      break;
    }
    if (forever)
      pthread_cond_wait(&group->cond, &group->mutex);
    else if (pthread_cond_timedwait(&group->cond, &group->mutex, &deadline) == ETIMEDOUT)
      timed_out = true;
  }
  pthread_mutex_unlock(&group->mutex);
  if (!status) *out_inputs = c->inputs;
  return status;
}

void tprt__rendezvous_release(tprt__rendezvous_t* rv) {
  tprt__collective_t* c = rv->collective;
  if (!c) return;
  rv->collective = NULL;
  if (rv->rank->world->procs) {  // this process's own copy
    tprt__collective_free(rv->rank->world, c);
    return;
  }
  tprt__group_t* group = rv->group;
  bool last = false;
  pthread_mutex_lock(&group->mutex);
  if (++c->num_released == rv->group_size) {
    last = true;
    tprt__collective_t** link = &group->pending;
    while (*link != c) link = &(*link)->next;
    *link = c->next;
  }
  pthread_mutex_unlock(&group->mutex);
  if (last) tprt__collective_free(rv->rank->world, c);
}
