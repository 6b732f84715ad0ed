// Process worlds (see tprt_procs.h): launcher detection and joining the world
// (tprt_procs_from_env), the accessors and destroy. The rest lives beside it (tprt_procs_impl.h):
// the TCP sockets (tprt_procs_socket.c), the meeting through MASTER_ADDR:MASTER_PORT or an MPI
// all-gather of addresses (tprt_procs_meet.c), and framed messages with failure notices and the
// all-gather every host-side exchange of a process world is built on (tprt_procs_message.c).
#define _GNU_SOURCE

#include "tprt_procs.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tprt_params.h"
#include "tprt_procs_impl.h"

static bool tprt__env_int(const char* name, int* out) {
  const char* v = getenv(name);
  if (!v || !*v) return false;
  char* end = NULL;
  long x = strtol(v, &end, 10);
  if (*end || x < 0 || x > 1 << 20) return false;
  *out = (int)x;
  return true;
}

int tprt_procs_rank(const tprt_procs_t* p) { return p->rank; }
int tprt_procs_size(const tprt_procs_t* p) { return p->size; }
int tprt_procs_local_rank(const tprt_procs_t* p) { return p->local_rank; }
int tprt_procs_local_size(const tprt_procs_t* p) { return p->local_size; }
const char* tprt_procs_launcher(const tprt_procs_t* p) { return p->launcher; }

// The port the processes meet at: TPRT_MASTER_PORT when set; under torchrun, whose agent serves
// its own store on MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True), the port after it; else
// MASTER_PORT.
static int tprt__meeting_port(int master_port) {
  int port = 0;
  if (tprt__env_int("TPRT_MASTER_PORT", &port) && port > 0 && port < 65536) return port;
  const char* agent = getenv("TORCHELASTIC_USE_AGENT_STORE");
  if (agent && (!strcmp(agent, "True") || !strcmp(agent, "true") || !strcmp(agent, "1")))
    return master_port < 65535 ? master_port + 1 : master_port - 1;
  return master_port;
}

tprt_status_t tprt_procs_from_env(int expected_size, double timeout_s, tprt_procs_t** out) {
  *out = NULL;
  const char* mode = getenv("TPRT_RANKS");
  if (mode && !strcmp(mode, "threads")) return NULL;
  int rank = -1, size = -1, local_rank = -1, local_size = -1;
  const char *launcher = NULL, *size_var = NULL;
  if (tprt__env_int("RANK", &rank) && tprt__env_int("WORLD_SIZE", &size)) {
    launcher = "torchrun";
    size_var = "WORLD_SIZE";
    tprt__env_int("LOCAL_RANK", &local_rank);
    tprt__env_int("LOCAL_WORLD_SIZE", &local_size);
  } else if (tprt__env_int("OMPI_COMM_WORLD_RANK", &rank) && tprt__env_int("OMPI_COMM_WORLD_SIZE", &size)) {
    launcher = "mpirun";
    size_var = "OMPI_COMM_WORLD_SIZE";
    tprt__env_int("OMPI_COMM_WORLD_LOCAL_RANK", &local_rank);
    tprt__env_int("OMPI_COMM_WORLD_LOCAL_SIZE", &local_size);
  } else if (tprt__env_int("PMI_RANK", &rank) && tprt__env_int("PMI_SIZE", &size)) {
    launcher = "mpirun";
    size_var = "PMI_SIZE";
    tprt__env_int("MPI_LOCALRANKID", &local_rank);
    tprt__env_int("MPI_LOCALNRANKS", &local_size);
  } else {
    return NULL;
  }
  if (size < 1 || size > TPRT_MAX_WORLD_SIZE || rank >= size)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "process world (%s): rank %d of %d processes; expected 1 to %d processes and a rank below "
                            "their number",
                            launcher, rank, size, TPRT_MAX_WORLD_SIZE);
  if (expected_size > 0 && size != expected_size)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s started %d processes (%s=%d) but the module's mesh has %d ranks: launch one process "
                            "per rank",
                            launcher, size, size_var, size, expected_size);
  if (local_rank < 0 || local_size < 1 || local_rank >= local_size) {
    local_rank = rank;  // one node
    local_size = size;
  }
  tprt_procs_t* p = calloc(1, sizeof *p);
  if (!p) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  *p = (tprt_procs_t){.rank = rank, .size = size, .local_rank = local_rank, .local_size = local_size,
                      .launcher = launcher,
                      .timeout_s = timeout_s > 0 ? timeout_s : (double)tprt_param_collective_timeout_s()};
  for (int i = 0; i < TPRT_MAX_WORLD_SIZE; ++i) p->fd[i] = -1;
  p->owner = pthread_self();
  p->failure_from = -1;
  atomic_init(&p->cancel, 0);
  double deadline = tprt__now() + p->timeout_s;
  const char *host = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
  int port_number = 0;
  tprt_status_t s = NULL;
  if (size == 1)
    s = NULL;
  else if (host && *host && port && tprt__env_int("MASTER_PORT", &port_number) && port_number > 0 && port_number < 65536)
    s = tprt__meet_master(p, host, tprt__meeting_port(port_number), deadline);
  else if (host || port)
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                         "process world: MASTER_ADDR='%s' and MASTER_PORT='%s' must both be set, the port a number "
                         "from 1 to 65535",
                         host ? host : "", port ? port : "");
  else if (!strcmp(launcher, "mpirun"))
    s = tprt__meet_mpi(p, deadline);
  else
    s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                         "process world: RANK=%d and WORLD_SIZE=%d are set but MASTER_ADDR and MASTER_PORT are not; set "
                         "them (rank 0 listens there), or TPRT_RANKS=threads to run every rank as a thread",
                         rank, size);
  if (s) {
    tprt_procs_destroy(p);
    return tprt_status_annotate(s, "rank %d of %d (%s)", rank, size, launcher);
  }
  for (int q = 0; q < size; ++q)
    if (p->fd[q] >= 0) fcntl(p->fd[q], F_SETFL, fcntl(p->fd[q], F_GETFL) | O_NONBLOCK);
  *out = p;
  return NULL;
}

void tprt_procs_destroy(tprt_procs_t* p) {
  if (!p) return;
  for (int q = 0; q < TPRT_MAX_WORLD_SIZE; ++q)
    if (p->fd[q] >= 0) close(p->fd[q]);
  if (p->mpi) {
    int (*finalize)(void) = (int (*)(void))dlsym(p->mpi, "MPI_Finalize");
    if (finalize) finalize();
    // libmpi stays loaded: its atexit handlers may still run.
  }
  free(p);
}
