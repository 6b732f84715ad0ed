// Internals of the world shared by tprt_world.c and the collectives: the layout of worlds, ranks
// and groups, and the rendezvous every CPU collective is built on. Not part of the API.
//
// Rendezvous: the k-th collective a rank calls on its group over mask m is matched with the
// k-th call of every other member (per-rank, per-mask sequence numbers). Each member posts a
// private copy of its input together with a signature string (the collective, its dtypes,
// shapes and attributes); it then waits until every member has posted, reads the copies it
// needs and releases. The copies make in-place and overlapping buffers safe and let an
// asynchronous start return at once: only a wait blocks, and a wait needs the other members to
// have posted, never to be waiting, so ranks may interleave starts and waits freely. The last
// member to release frees the collective; a world run that failed leaves collectives that some
// members never reached, and the next run (or tprt_world_destroy) frees them.
#ifndef TPRT_WORLD_IMPL_H_
#define TPRT_WORLD_IMPL_H_

#include <pthread.h>
#include <stdatomic.h>

#include "tprt_world.h"

#ifdef __cplusplus
extern "C" {
#endif

// Masks over at most TPRT_MAX_MESH_AXES axes.
#define TPRT__NUM_MASKS (1u << TPRT_MAX_MESH_AXES)

struct tprt_future_t;

// One collective call of one group, matched across its members by sequence number. Guarded by
// its group's mutex, except inputs[i], which member i writes before posting and nobody writes
// after.
typedef struct tprt__collective_t {
  struct tprt__collective_t* next;
  uint64_t seq;
  int num_arrived;
  int num_released;
  int signature_index;  // the group rank whose signature is stored
  char* signature;      // the first poster's signature
  char* mismatch;       // set when two members' signatures differ
  bool arrived[TPRT_MAX_WORLD_SIZE];
  void* inputs[TPRT_MAX_WORLD_SIZE];  // each member's copy of its input, owned here
} tprt__collective_t;

// One group over one mask and the collectives in flight on it.
typedef struct tprt__group_t {
  pthread_mutex_t mutex;
  pthread_cond_t cond;  // broadcast on arrival, mismatch and abort
  tprt__collective_t* pending;
} tprt__group_t;

struct tprt_rank_t {
  tprt_world_t* world;
  int index;
  int coords[TPRT_MAX_MESH_AXES];
  int group_id[TPRT__NUM_MASKS];     // which group of each mask the rank is in
  int group_index[TPRT__NUM_MASKS];  // its index in that group
  uint64_t seq[TPRT__NUM_MASKS];     // sequence number of its next collective per mask
  void* scratch;
  size_t scratch_size;
  struct tprt_future_t* futures;  // started and not yet waited; freed when the function returns
  pthread_t thread;
  tprt_status_t result;       // what the rank's function returned
  tprt_status_t fail_status;  // what tprt_rank_fail recorded (guarded by abort_mutex)
};

struct tprt_world_t {
  tprt_allocator_t allocator;
  struct tprt_procs_t* procs;  // a process world (tprt_procs.h), or NULL for threads
  int num_axes;
  int axis_sizes[TPRT_MAX_MESH_AXES];
  char axis_names[TPRT_MAX_MESH_AXES][TPRT_MAX_AXIS_NAME + 1];
  int size;
  double timeout_s;                 // < 0: wait forever
  int group_size[TPRT__NUM_MASKS];  // 0 for masks naming missing axes
  int num_groups[TPRT__NUM_MASKS];
  tprt__group_t* groups[TPRT__NUM_MASKS];
  int* members[TPRT__NUM_MASKS];  // members[m][group_id * group_size + group_index] = world rank
  tprt_rank_t* ranks;
  tprt_rank_fn_t fn;
  void* user;
  atomic_bool running;
  pthread_mutex_t abort_mutex;
  atomic_bool aborted;  // set (release) after failed_rank and abort_message
  int failed_rank;           // -1 when no rank failed (or tprt_world_cancel aborted the run)
  char abort_message[1024];  // "rank R failed: <message>", or the cancel message (truncated)
  bool cancelled;            // tprt_world_cancel was called (guarded by abort_mutex)
  char cancel_message[512];
};

// A rank's handle on one posted collective.
typedef struct tprt__rendezvous_t {
  tprt_rank_t* rank;
  uint32_t mask;
  const char* name;  // the collective, a static string
  tprt__group_t* group;
  tprt__collective_t* collective;  // NULL until posted and after release
  int group_size;
  int group_index;
} tprt__rendezvous_t;

// Returns INVALID_ARGUMENT "<name>: axes mask ..." when |mask| names an axis the mesh lacks.
tprt_status_t tprt__rendezvous_check_mask(const tprt_rank_t* rank, uint32_t mask, const char* name);

// Posts |rank|'s next collective on its group over |mask| (valid): |owned_input| (consumed; may
// be NULL) of |input_bytes| and |signature| (copied). In a process world the post exchanges
// the signatures and inputs with the other members at once (blocking). Fails with ABORTED when the world is aborted (or
// RESOURCE_EXHAUSTED); a signature that differs from another member's is reported by the wait.
// On success |out_rendezvous| must be released with tprt__rendezvous_release.
tprt_status_t tprt__rendezvous_post(tprt_rank_t* rank, uint32_t mask, const char* name, const char* signature,
                                    void* owned_input, size_t input_bytes, tprt__rendezvous_t* out_rendezvous);

// Waits until every member has posted and stores their inputs, indexed by group rank, in
// |*out_inputs| (valid until release). Fails with INVALID_ARGUMENT on a signature mismatch,
// ABORTED when the world aborts first and DEADLINE_EXCEEDED after the world's timeout.
tprt_status_t tprt__rendezvous_wait(tprt__rendezvous_t* rendezvous, void* const** out_inputs);

// Gives up |rendezvous|'s hold on its collective (no-op when not posted).
void tprt__rendezvous_release(tprt__rendezvous_t* rendezvous);

// True when |mask| names only axes of |world|'s mesh.
static inline bool tprt__mask_valid(const tprt_world_t* world, uint32_t mask) { return (mask >> world->num_axes) == 0; }

// Returns a copy of the printf-style string, allocated with |world|'s allocator, or NULL.
char* tprt__world_printf(tprt_world_t* world, const char* fmt, ...) TPRT_PRINTF(2, 3);

// Frees |collective|, its signature, mismatch message and staged inputs.
void tprt__collective_free(tprt_world_t* world, tprt__collective_t* collective);

// Formats |mask|'s axes as "{dp,tp}" into |buf|.
const char* tprt__world_format_axes(const tprt_world_t* world, uint32_t mask, char* buf, size_t size);

// Releases and frees the futures |rank| started and never waited (tprt_collectives_async.c).
void tprt__rank_drop_futures(tprt_rank_t* rank);

#ifdef __cplusplus
}
#endif

#endif  // TPRT_WORLD_IMPL_H_
