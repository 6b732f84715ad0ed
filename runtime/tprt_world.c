// Worlds, ranks, groups and failure propagation (see tprt_world.h); the rendezvous of the
// collectives is in tprt_world_rendezvous.c.
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "tprt_params.h"
#include "tprt_procs.h"
#include "tprt_world_impl.h"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

char* tprt__world_printf(tprt_world_t* world, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return NULL;
  void* p = NULL;
  tprt_status_t s = tprt_allocator_malloc_uninitialized(world->allocator, (size_t)n + 1, 16, &p);
  if (s) {
    tprt_status_free(s);
    return NULL;
  }
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

const char* tprt__world_format_axes(const tprt_world_t* world, uint32_t mask, char* buf, size_t size) {
  size_t n = 0;
  n += (size_t)snprintf(buf, size, "{");
  bool first = true;
  for (int a = 0; a < world->num_axes && n < size; ++a) {
    if (!(mask & (1u << a))) continue;
    n += (size_t)snprintf(buf + n, size - n, "%s%s", first ? "" : ",", world->axis_names[a]);
    first = false;
  }
  if (n < size) snprintf(buf + n, size - n, "}");
  return buf;
}

//===----------------------------------------------------------------------===//
// Creation and destruction
//===----------------------------------------------------------------------===//

static tprt_status_t tprt__world_check_options(const tprt_world_options_t* options) {
  if (!options) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "options is NULL");
  if (options->num_axes < 1 || options->num_axes > TPRT_MAX_MESH_AXES)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "mesh has %d axes; expected 1 to %d", options->num_axes,
                            TPRT_MAX_MESH_AXES);
  int64_t size = 1;
  for (int a = 0; a < options->num_axes; ++a) {
    const tprt_mesh_axis_t* axis = &options->axes[a];
    if (!axis->name || axis->name[0] == '\0')
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "mesh axis %d has no name", a);
    if (strlen(axis->name) > TPRT_MAX_AXIS_NAME)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "mesh axis %d name '%s' is longer than %d characters", a,
                              axis->name, TPRT_MAX_AXIS_NAME);
    for (int b = 0; b < a; ++b)
      if (strcmp(options->axes[b].name, axis->name) == 0)
        return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "mesh axes %d and %d are both named '%s'", b, a,
                                axis->name);
    if (axis->size < 1)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "mesh axis '%s' has size %d; expected >= 1", axis->name,
                              axis->size);
    size *= axis->size > TPRT_MAX_WORLD_SIZE ? TPRT_MAX_WORLD_SIZE + 1 : axis->size;
    if (size > TPRT_MAX_WORLD_SIZE) break;
  }
  if (size > TPRT_MAX_WORLD_SIZE) {
    char shape[128];
    size_t n = 0;
    for (int a = 0; a < options->num_axes && n < sizeof shape; ++a)
      n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%d", a ? "x" : "", options->axes[a].size);
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "mesh %s has more than %d ranks", shape, TPRT_MAX_WORLD_SIZE);
  }
  if (isnan(options->collective_timeout_s))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "collective_timeout_s is NaN");
  return NULL;
}

void tprt__collective_free(tprt_world_t* world, tprt__collective_t* c) {
  for (int i = 0; i < TPRT_MAX_WORLD_SIZE; ++i) tprt_allocator_free(world->allocator, c->inputs[i]);
  tprt_allocator_free(world->allocator, c->signature);
  tprt_allocator_free(world->allocator, c->mismatch);
  tprt_allocator_free(world->allocator, c);
}

// Frees every collective still pending on any group (only while no rank runs).
static void tprt__world_free_pending(tprt_world_t* world) {
  for (uint32_t m = 0; m < TPRT__NUM_MASKS; ++m)
    for (int g = 0; g < world->num_groups[m]; ++g) {
      tprt__group_t* group = &world->groups[m][g];
      while (group->pending) {
        tprt__collective_t* c = group->pending;
        group->pending = c->next;
        tprt__collective_free(world, c);
      }
    }
}

// Destroys the first |count| groups of mask |m| and frees the mask's arrays.
static void tprt__world_free_groups(tprt_world_t* world, uint32_t m, int count) {
  for (int g = 0; g < count; ++g) {
    pthread_cond_destroy(&world->groups[m][g].cond);
    pthread_mutex_destroy(&world->groups[m][g].mutex);
  }
  tprt_allocator_free(world->allocator, world->groups[m]);
  tprt_allocator_free(world->allocator, world->members[m]);
  world->groups[m] = NULL;
  world->members[m] = NULL;
  world->num_groups[m] = 0;
}

// Builds the groups of mask |m| (all of whose axes exist) and each rank's place in them.
static tprt_status_t tprt__world_init_groups(tprt_world_t* world, uint32_t m) {
  int group_size = 1;
  for (int a = 0; a < world->num_axes; ++a)
    if (m & (1u << a)) group_size *= world->axis_sizes[a];
  int num_groups = world->size / group_size;
  TPRT_RETURN_IF_ERROR(tprt_allocator_malloc(world->allocator, sizeof(tprt__group_t) * (size_t)num_groups, 64,
                                             (void**)&world->groups[m]),
                       "allocating groups");
  TPRT_RETURN_IF_ERROR(
      tprt_allocator_malloc(world->allocator, sizeof(int) * (size_t)world->size, 64, (void**)&world->members[m]),
      "allocating groups");
  for (int r = 0; r < world->size; ++r) {
    tprt_rank_t* rank = &world->ranks[r];
    int id = 0, index = 0;
    for (int a = 0; a < world->num_axes; ++a) {
      if (m & (1u << a))
        index = index * world->axis_sizes[a] + rank->coords[a];
      else
        id = id * world->axis_sizes[a] + rank->coords[a];
    }
    rank->group_id[m] = id;
    rank->group_index[m] = index;
    world->members[m][id * group_size + index] = r;
  }
  pthread_condattr_t attr;
  if (pthread_condattr_init(&attr) != 0) return tprt_make_status(TPRT_STATUS_INTERNAL, "pthread_condattr_init failed");
  // Deadlines are measured on the monotonic clock so that wall-clock changes cannot fire them.
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  tprt_status_t status = NULL;
  int g = 0;
  for (; g < num_groups; ++g) {
    if (pthread_mutex_init(&world->groups[m][g].mutex, NULL) != 0) {
      status = tprt_make_status(TPRT_STATUS_INTERNAL, "pthread_mutex_init failed");
      break;
    }
    if (pthread_cond_init(&world->groups[m][g].cond, &attr) != 0) {
      pthread_mutex_destroy(&world->groups[m][g].mutex);
      status = tprt_make_status(TPRT_STATUS_INTERNAL, "pthread_cond_init failed");
      break;
    }
  }
  pthread_condattr_destroy(&attr);
  world->num_groups[m] = g;
  if (!status) world->group_size[m] = group_size;
  return status;
}

tprt_status_t tprt_world_create(const tprt_world_options_t* options, tprt_allocator_t allocator,
                                tprt_world_t** out_world) {
  if (!out_world) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "out_world is NULL");
  *out_world = NULL;
  TPRT_RETURN_IF_ERROR(tprt__world_check_options(options), "creating a world");
  tprt_world_t* world = NULL;
  TPRT_RETURN_IF_ERROR(tprt_allocator_malloc(allocator, sizeof *world, 64, (void**)&world), "creating a world");
  world->allocator = allocator;
  world->procs = options->procs;
  world->num_axes = options->num_axes;
  world->size = 1;
  for (int a = 0; a < options->num_axes; ++a) {
    world->axis_sizes[a] = options->axes[a].size;
    snprintf(world->axis_names[a], sizeof world->axis_names[a], "%s", options->axes[a].name);
    world->size *= options->axes[a].size;
  }
  double timeout = options->collective_timeout_s;
  if (timeout == 0) timeout = (double)tprt_param_collective_timeout_s();
  world->timeout_s = timeout > 0 ? timeout : -1;
  world->failed_rank = -1;
  atomic_init(&world->running, false);
  atomic_init(&world->aborted, false);
  if (pthread_mutex_init(&world->abort_mutex, NULL) != 0) {
    tprt_allocator_free(allocator, world);
    return tprt_make_status(TPRT_STATUS_INTERNAL, "creating a world: pthread_mutex_init failed");
  }

  tprt_status_t status =
      tprt_allocator_malloc(allocator, sizeof(tprt_rank_t) * (size_t)world->size, 64, (void**)&world->ranks);
  if (!status) {
    for (int r = 0; r < world->size; ++r) {
      tprt_rank_t* rank = &world->ranks[r];
      rank->world = world;
      rank->index = r;
      // Row-major: the last axis varies fastest.
      for (int a = world->num_axes - 1, rest = r; a >= 0; --a) {
        rank->coords[a] = rest % world->axis_sizes[a];
        rest /= world->axis_sizes[a];
      }
    }
  }
  for (uint32_t m = 0; !status && m < (1u << world->num_axes); ++m) status = tprt__world_init_groups(world, m);
  if (!status && world->procs && tprt_procs_size(world->procs) != world->size)
    status = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "the mesh has %d ranks but %d processes were launched",
                              world->size, tprt_procs_size(world->procs));
  if (status) {
    tprt_world_destroy(world);
    return tprt_status_annotate(status, "creating a world");
  }
  *out_world = world;
  return NULL;
}

void tprt_world_destroy(tprt_world_t* world) {
  if (!world) return;
  tprt_allocator_t allocator = world->allocator;
  tprt__world_free_pending(world);
  for (uint32_t m = 0; m < TPRT__NUM_MASKS; ++m) tprt__world_free_groups(world, m, world->num_groups[m]);
  if (world->ranks) {
    for (int r = 0; r < world->size; ++r) {
      tprt_allocator_free(allocator, world->ranks[r].scratch);
      tprt_status_free(world->ranks[r].result);
      tprt_status_free(world->ranks[r].fail_status);
    }
    tprt_allocator_free(allocator, world->ranks);
  }
  pthread_mutex_destroy(&world->abort_mutex);
  tprt_allocator_free(allocator, world);
}

int tprt_world_size(const tprt_world_t* world) { return world->size; }

int tprt_world_num_axes(const tprt_world_t* world) { return world->num_axes; }

int tprt_world_axis_size(const tprt_world_t* world, int axis) {
  return axis >= 0 && axis < world->num_axes ? world->axis_sizes[axis] : 0;
}

const char* tprt_world_axis_name(const tprt_world_t* world, int axis) {
  return axis >= 0 && axis < world->num_axes ? world->axis_names[axis] : "";
}

int tprt_world_find_axis(const tprt_world_t* world, const char* name) {
  for (int a = 0; name && a < world->num_axes; ++a)
    if (strcmp(world->axis_names[a], name) == 0) return a;
  return -1;
}

//===----------------------------------------------------------------------===//
// Failure propagation
//===----------------------------------------------------------------------===//

// Aborts |world| on behalf of rank |rank_index| failing with |message| (the first abort wins)
// and wakes every rank blocked in a collective. |rank_index| -1: tprt_world_cancel's abort.
static void tprt__world_abort(tprt_world_t* world, int rank_index, const char* message) {
  pthread_mutex_lock(&world->abort_mutex);
  bool first = !atomic_load(&world->aborted);
  if (first) {
    world->failed_rank = rank_index;
    if (rank_index >= 0)
      snprintf(world->abort_message, sizeof world->abort_message, "rank %d failed: %s", rank_index, message);
    else
      snprintf(world->abort_message, sizeof world->abort_message, "%s", message);
    atomic_store(&world->aborted, true);
  }
  pthread_mutex_unlock(&world->abort_mutex);
  if (!first) return;
  if (world->procs) tprt_procs_abort(world->procs, message);  // tell the other processes
  // Waiters check |aborted| under their group's mutex before sleeping, so taking the mutex
  // here before broadcasting means none of them can miss the wakeup.
  for (uint32_t m = 0; m < TPRT__NUM_MASKS; ++m)
    for (int g = 0; g < world->num_groups[m]; ++g) {
      tprt__group_t* group = &world->groups[m][g];
      pthread_mutex_lock(&group->mutex);
      pthread_cond_broadcast(&group->cond);
      pthread_mutex_unlock(&group->mutex);
    }
}

void tprt_rank_fail(tprt_rank_t* rank, tprt_status_t status) {
  if (!status) return;
  tprt_world_t* world = rank->world;
  pthread_mutex_lock(&world->abort_mutex);
  bool stored = rank->fail_status == NULL;
  if (stored) rank->fail_status = status;
  pthread_mutex_unlock(&world->abort_mutex);
  // The stored status stays alive until tprt_world_run has joined every rank.
  tprt__world_abort(world, rank->index, tprt_status_message(stored ? status : rank->fail_status));
  if (!stored) tprt_status_free(status);
}

void tprt_world_cancel(tprt_world_t* world, const char* message) {
  pthread_mutex_lock(&world->abort_mutex);
  bool first = !world->cancelled;
  if (first) {
    world->cancelled = true;
    snprintf(world->cancel_message, sizeof world->cancel_message, "%s", message ? message : "cancelled");
  }
  pthread_mutex_unlock(&world->abort_mutex);
  // cancel_message no longer changes; a run starting meanwhile either saw |cancelled| (and does
  // not start) or has reset the abort state already, so this abort reaches its ranks.
  if (first) tprt__world_abort(world, -1, world->cancel_message);
}

tprt_status_t tprt_rank_check_abort(const tprt_rank_t* rank) {
  if (!atomic_load(&rank->world->aborted)) return rank->world->procs ? tprt_procs_check_peers(rank->world->procs) : NULL;
  return tprt_make_status(TPRT_STATUS_ABORTED, "%s", rank->world->abort_message);
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

// The rank whose failure aborted the run (-1: none), and whether tprt_world_cancel was called
// (cancel_message is then fixed). Read under abort_mutex: a cancel may come from another thread.
static int tprt__world_failed_rank(tprt_world_t* world, bool* out_cancelled) {
  pthread_mutex_lock(&world->abort_mutex);
  int failed = world->failed_rank;
  *out_cancelled = world->cancelled;
  pthread_mutex_unlock(&world->abort_mutex);
  return failed;
}

static void* tprt__rank_main(void* arg) {
  tprt_rank_t* rank = arg;
  tprt_world_t* world = rank->world;
  tprt_status_t status = world->fn(rank, world->user);
  // Abort before cleaning up so that peers blocked on this rank wake as early as possible.
  if (status) tprt__world_abort(world, rank->index, tprt_status_message(status));
  rank->result = status;
  tprt__rank_drop_futures(rank);
  return NULL;
}

tprt_status_t tprt_world_run(tprt_world_t* world, tprt_rank_fn_t fn, void* user) {
  if (!world || !fn) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s is NULL", world ? "fn" : "world");
  if (atomic_exchange(&world->running, true))
    return tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION, "tprt_world_run is already running on this world");
  // Start clean: nothing from a previous (possibly failed) run may match this run's calls.
  tprt__world_free_pending(world);
  for (int r = 0; r < world->size; ++r) memset(world->ranks[r].seq, 0, sizeof world->ranks[r].seq);
  // Under abort_mutex: tprt_world_cancel may be called from another thread at any time.
  pthread_mutex_lock(&world->abort_mutex);
  bool cancelled = world->cancelled;
  if (!cancelled) {
    atomic_store(&world->aborted, false);
    world->failed_rank = -1;
    world->abort_message[0] = '\0';
  }
  pthread_mutex_unlock(&world->abort_mutex);
  if (cancelled) {
    atomic_store(&world->running, false);
    return tprt_make_status(TPRT_STATUS_ABORTED, "%s", world->cancel_message);
  }
  world->fn = fn;
  world->user = user;

  tprt_status_t start_status = NULL;
  int started = 0;
  if (world->procs) {  // this process's rank only, on this thread
    int r = tprt_procs_rank(world->procs);
    tprt__rank_main(&world->ranks[r]);
    tprt_rank_t* rank = &world->ranks[r];
    tprt_status_t own = rank->fail_status ? rank->fail_status : rank->result;
    tprt_status_free(own == rank->fail_status ? rank->result : rank->fail_status);
    rank->result = rank->fail_status = NULL;
    atomic_store(&world->running, false);
    if (own && tprt__world_failed_rank(world, &cancelled) < 0 && cancelled) {  // the cancel came first
      tprt_status_free(own);
      return tprt_make_status(TPRT_STATUS_ABORTED, "%s", world->cancel_message);
    }
    return own ? tprt_status_annotate(own, "rank %d", r) : NULL;
  }
  for (; started < world->size; ++started) {
    int err = pthread_create(&world->ranks[started].thread, NULL, tprt__rank_main, &world->ranks[started]);
    if (err != 0) {
      start_status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "cannot start the thread of rank %d: %s", started,
                                      strerror(err));
      tprt__world_abort(world, started, tprt_status_message(start_status));
      break;
    }
  }
  for (int r = 0; r < started; ++r) pthread_join(world->ranks[r].thread, NULL);

  // Keep the first failure in time; free every other rank's status.
  int failed_rank = tprt__world_failed_rank(world, &cancelled);
  tprt_status_t result = start_status;
  bool any_failed = false;
  for (int r = 0; r < world->size; ++r) {
    tprt_rank_t* rank = &world->ranks[r];
    tprt_status_t own = rank->fail_status ? rank->fail_status : rank->result;
    any_failed |= own != NULL;
    if (own == rank->fail_status)
      tprt_status_free(rank->result);
    else
      tprt_status_free(rank->fail_status);
    rank->result = rank->fail_status = NULL;
    if (!start_status && r == failed_rank && own)
      result = tprt_status_annotate(own, "rank %d", r);
    else
      tprt_status_free(own);
  }
  if (!result && failed_rank >= 0 && !start_status)
    result = tprt_make_status(TPRT_STATUS_INTERNAL, "rank %d failed without a status", failed_rank);
  // Cancelled before any rank failed: the ranks' statuses (ABORTED) are the cancel's echo.
  if (!result && any_failed && failed_rank < 0 && cancelled)
    result = tprt_make_status(TPRT_STATUS_ABORTED, "%s", world->cancel_message);
  atomic_store(&world->running, false);
  return result;
}

//===----------------------------------------------------------------------===//
// Ranks
//===----------------------------------------------------------------------===//

tprt_world_t* tprt_rank_world(const tprt_rank_t* rank) { return rank->world; }

int tprt_rank_index(const tprt_rank_t* rank) { return rank->index; }

int tprt_rank_world_size(const tprt_rank_t* rank) { return rank->world->size; }

int tprt_rank_local_index(const tprt_rank_t* rank) {
  return rank->world->procs ? tprt_procs_local_rank(rank->world->procs) : rank->index;
}

int tprt_rank_local_size(const tprt_rank_t* rank) {
  return rank->world->procs ? tprt_procs_local_size(rank->world->procs) : rank->world->size;
}

bool tprt_rank_is_process(const tprt_rank_t* rank) { return rank->world->procs != NULL; }

int tprt_rank_coord(const tprt_rank_t* rank, int axis) {
  return axis >= 0 && axis < rank->world->num_axes ? rank->coords[axis] : -1;
}

int tprt_rank_group_size(const tprt_rank_t* rank, uint32_t axes_mask) {
  return tprt__mask_valid(rank->world, axes_mask) ? rank->world->group_size[axes_mask] : 0;
}

int tprt_rank_group_index(const tprt_rank_t* rank, uint32_t axes_mask) {
  return tprt__mask_valid(rank->world, axes_mask) ? rank->group_index[axes_mask] : -1;
}

int tprt_rank_group_member(const tprt_rank_t* rank, uint32_t axes_mask, int group_index) {
  const tprt_world_t* world = rank->world;
  if (!tprt__mask_valid(world, axes_mask)) return -1;
  int group_size = world->group_size[axes_mask];
  if (group_index < 0 || group_index >= group_size) return -1;
  return world->members[axes_mask][rank->group_id[axes_mask] * group_size + group_index];
}

tprt_allocator_t tprt_rank_allocator(const tprt_rank_t* rank) { return rank->world->allocator; }

tprt_status_t tprt_rank_scratch(tprt_rank_t* rank, size_t size, void** out_ptr) {
  *out_ptr = NULL;
  if (size == 0) size = 1;
  if (size > rank->scratch_size) {
    tprt_allocator_free(rank->world->allocator, rank->scratch);
    rank->scratch = NULL;
    rank->scratch_size = 0;
    TPRT_RETURN_IF_ERROR(tprt_allocator_malloc_uninitialized(rank->world->allocator, size, 256, &rank->scratch),
                         "rank %d scratch", rank->index);
    rank->scratch_size = size;
  }
  *out_ptr = rank->scratch;
  return NULL;
}
