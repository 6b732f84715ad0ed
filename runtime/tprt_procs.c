// Process worlds (see tprt_procs.h): launcher detection, the TCP mesh (met through
// MASTER_ADDR:MASTER_PORT or an MPI all-gather of addresses), framed messages with failure
// notices, and the all-gather every host-side exchange of a process world is built on.
#define _GNU_SOURCE  // MSG_NOSIGNAL, MSG_DONTWAIT

#include "tprt_procs.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "tprt_params.h"
#include "tprt_world.h"

enum { TPRT__MSG_DATA = 0, TPRT__MSG_ABORT = 1 };

// Every message on the mesh: this header, then |bytes| of payload.
typedef struct {
  uint64_t bytes;
  uint32_t kind;
  uint32_t from;
} tprt__msg_header_t;

struct tprt_procs_t {
  int rank, size, local_rank, local_size;
  const char* launcher;
  double timeout_s;
  int fd[TPRT_MAX_WORLD_SIZE];    // the connection to each peer; -1 for this process
  char failure[768];              // set once a peer failed: every later call reports it
  bool failure_closed;            // |failure| is a closed connection, which a notice replaces
  int failure_from;               // the rank whose notice |failure| is (-1: none), and its message,
  char failure_note[512];         // which this process forwards when it ends (tprt_procs_abort)
  bool cut[TPRT_MAX_WORLD_SIZE];  // a message to this peer is half sent: no notice may follow it
  void* mpi;                      // libmpi, when MPI met the processes
  // Only the thread that joined the world (the owner; it runs the rank) writes to the sockets, so
  // that no message is cut by another. tprt_procs_abort from another thread (tprt_world_cancel's
  // signal watcher) leaves its message here; the owner sends it at its next exchange or check.
  pthread_t owner;
  atomic_int cancel;         // 0; 1 while cancel_message is written; 2 once it is
  char cancel_message[512];  // written once, before cancel becomes 2
  bool notified;             // the owner has sent (or forwarded) its failure notice
};

static double tprt__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

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

//===----------------------------------------------------------------------===//
// Sockets
//===----------------------------------------------------------------------===//

static tprt_status_t tprt__sys(const char* what) {
  return tprt_make_status(TPRT_STATUS_UNAVAILABLE, "process world: %s: %s", what, strerror(errno));
}

// A listening socket on |port| (0: any free one) of every interface; its port in |*out_port|.
static tprt_status_t tprt__listen(int port, int* out_fd, int* out_port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return tprt__sys("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = INADDR_ANY};
  socklen_t len = sizeof a;
  if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0 || listen(fd, TPRT_MAX_WORLD_SIZE) != 0 ||
      getsockname(fd, (struct sockaddr*)&a, &len) != 0) {
    char what[64];
    snprintf(what, sizeof what, "listening on port %d", port);
    tprt_status_t s = tprt__sys(what);
    close(fd);
    return s;
  }
  *out_fd = fd;
  *out_port = ntohs(a.sin_port);
  return NULL;
}

// Waits until |fd| is ready for |events| or |deadline| passes (DEADLINE_EXCEEDED naming |what|).
static tprt_status_t tprt__poll_one(int fd, short events, double deadline, const char* what) {
  for (;;) {
    double left = deadline - tprt__now();
    if (left <= 0)
      return tprt_make_status(TPRT_STATUS_DEADLINE_EXCEEDED, "process world: %s timed out (TPRT_COLLECTIVE_TIMEOUT_S)",
                              what);
    struct pollfd pf = {.fd = fd, .events = events};
    int r = poll(&pf, 1, left > 1.0 ? 1000 : (int)(left * 1000) + 1);
    if (r > 0) return NULL;
    if (r < 0 && errno != EINTR) return tprt__sys("poll");
  }
}

// Reads or writes all |n| bytes of |buf| on the (blocking) socket |fd| before |deadline|.
static tprt_status_t tprt__io(int fd, void* buf, size_t n, bool write, double deadline, const char* what) {
  char* p = buf;
  while (n) {
    tprt_status_t s = tprt__poll_one(fd, write ? POLLOUT : POLLIN, deadline, what);
    if (s) return s;
    ssize_t k = write ? send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) : recv(fd, p, n, MSG_DONTWAIT);
    if (k == 0) return tprt_make_status(TPRT_STATUS_ABORTED, "process world: %s: the peer closed the connection", what);
    if (k < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return tprt__sys(what);
    }
    p += k;
    n -= (size_t)k;
  }
  return NULL;
}

static tprt_status_t tprt__accept(int listen_fd, double deadline, int* out_fd) {
  tprt_status_t s = tprt__poll_one(listen_fd, POLLIN, deadline, "waiting for the other processes to connect");
  if (s) return s;
  int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0) return tprt__sys("accept");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  *out_fd = fd;
  return NULL;
}

// Connects to |ip|:|port| (network order), retrying until |deadline| while the peer is not
// listening yet.
static tprt_status_t tprt__connect(uint32_t ip, int port, double deadline, int* out_fd) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = ip};
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return tprt__sys("socket");
    if (connect(fd, (struct sockaddr*)&a, sizeof a) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      *out_fd = fd;
      return NULL;
    }
    int err = errno;
    close(fd);
    if ((err != ECONNREFUSED && err != ETIMEDOUT && err != ENETUNREACH && err != EHOSTUNREACH) ||
        tprt__now() > deadline) {
      char host[INET_ADDRSTRLEN] = "?";
      inet_ntop(AF_INET, &a.sin_addr, host, sizeof host);
      errno = err;
      char what[96];
      snprintf(what, sizeof what, "connecting to %s:%d", host, port);
      return tprt__sys(what);
    }
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
}

static tprt_status_t tprt__resolve(const char* host, uint32_t* out_ip) {
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
  int rc = getaddrinfo(host, NULL, &hints, &res);
  if (rc != 0 || !res)
    return tprt_make_status(TPRT_STATUS_UNAVAILABLE, "process world: cannot resolve '%s': %s", host, gai_strerror(rc));
  *out_ip = ((struct sockaddr_in*)res->ai_addr)->sin_addr.s_addr;
  freeaddrinfo(res);
  return NULL;
}

// An address of this host that peers can reach: the first non-loopback IPv4 address of its
// name, else loopback (all processes on one node).
static uint32_t tprt__own_ip(void) {
  char name[256];
  uint32_t ip = htonl(INADDR_LOOPBACK);
  if (gethostname(name, sizeof name) != 0) return ip;
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
  if (getaddrinfo(name, NULL, &hints, &res) != 0) return ip;
  for (struct addrinfo* r = res; r; r = r->ai_next) {
    uint32_t x = ((struct sockaddr_in*)r->ai_addr)->sin_addr.s_addr;
    if ((ntohl(x) >> 24) != 127) {
      ip = x;
      break;
    }
  }
  freeaddrinfo(res);
  return ip;
}

//===----------------------------------------------------------------------===//
// Meeting: every process learns every other's address, then the mesh connects
//===----------------------------------------------------------------------===//

typedef struct {
  uint32_t ip;  // network order
  uint32_t port;
} tprt__addr_t;

// Process r connects to every lower rank's listener (announcing itself) and accepts every higher
// rank's connection; fd[] entries already set (rank 0's meeting connections) are kept.
static tprt_status_t tprt__connect_mesh(tprt_procs_t* p, const tprt__addr_t* addrs, int listen_fd, double deadline) {
  for (int q = 0; q < p->rank; ++q) {
    if (p->fd[q] >= 0) continue;
    tprt_status_t s = tprt__connect(addrs[q].ip, (int)addrs[q].port, deadline, &p->fd[q]);
    uint32_t me = (uint32_t)p->rank;
    if (!s) s = tprt__io(p->fd[q], &me, sizeof me, true, deadline, "announcing this process to a lower rank");
    if (s) return tprt_status_annotate(s, "rank %d reaching rank %d", p->rank, q);
  }
  int higher = 0;  // connections to accept, in whatever order they come
  for (int q = p->rank + 1; q < p->size; ++q) higher += p->fd[q] < 0;
  for (int k = 0; k < higher; ++k) {
    int fd = -1;
    uint32_t who = 0;
    tprt_status_t s = tprt__accept(listen_fd, deadline, &fd);
    if (!s) s = tprt__io(fd, &who, sizeof who, false, deadline, "reading a higher rank's announcement");
    if (!s && ((int)who <= p->rank || (int)who >= p->size || p->fd[who] >= 0))
      s = tprt_make_status(TPRT_STATUS_INTERNAL, "process world: unexpected announcement from rank %u", who);
    if (s) {
      if (fd >= 0) close(fd);
      return tprt_status_annotate(s, "rank %d", p->rank);
    }
    p->fd[who] = fd;
  }
  return NULL;
}

// torchrun's way: rank 0 listens on MASTER_ADDR:MASTER_PORT; every other rank connects there
// (that connection is its link to rank 0), tells rank 0 its own listener's port, and receives
// every rank's address.
static tprt_status_t tprt__meet_master(tprt_procs_t* p, const char* host, int port, double deadline) {
  tprt__addr_t addrs[TPRT_MAX_WORLD_SIZE];
  memset(addrs, 0, sizeof addrs);
  int listen_fd = -1, my_port = 0;
  tprt_status_t s = NULL;
  if (p->rank == 0) {
    s = tprt__listen(port, &listen_fd, &my_port);
    if (s)
      return tprt_status_annotate(s, "rank 0 meeting the other processes on port %d (MASTER_PORT, or TPRT_MASTER_PORT "
                                     "to choose another)", port);
    for (int i = 1; i < p->size && !s; ++i) {
      int fd = -1;
      uint32_t hello[2];
      s = tprt__accept(listen_fd, deadline, &fd);
      if (!s) s = tprt__io(fd, hello, sizeof hello, false, deadline, "reading a rank's address");
      if (!s && (hello[0] == 0 || hello[0] >= (uint32_t)p->size || p->fd[hello[0]] >= 0))
        s = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                             "process world: a process announced rank %u, which is out of range or taken (WORLD_SIZE=%d)",
                             hello[0], p->size);
      if (s) {
        if (fd >= 0) close(fd);
        break;
      }
      struct sockaddr_in peer;
      socklen_t len = sizeof peer;
      getpeername(fd, (struct sockaddr*)&peer, &len);
      addrs[hello[0]] = (tprt__addr_t){peer.sin_addr.s_addr, hello[1]};
      p->fd[hello[0]] = fd;
    }
    for (int i = 1; i < p->size && !s; ++i)
      s = tprt__io(p->fd[i], addrs, sizeof addrs, true, deadline, "sending the address table");
    close(listen_fd);
    return s;
  }
  uint32_t ip = 0;
  s = tprt__resolve(host, &ip);
  if (!s) s = tprt__listen(0, &listen_fd, &my_port);
  if (!s) s = tprt__connect(ip, port, deadline, &p->fd[0]);
  uint32_t hello[2] = {(uint32_t)p->rank, (uint32_t)my_port};
  if (!s) s = tprt__io(p->fd[0], hello, sizeof hello, true, deadline, "sending this rank's address to rank 0");
  if (!s) s = tprt__io(p->fd[0], addrs, sizeof addrs, false, deadline, "receiving the address table from rank 0");
  if (!s) s = tprt__connect_mesh(p, addrs, listen_fd, deadline);
  if (listen_fd >= 0) close(listen_fd);
  return s ? tprt_status_annotate(s, "meeting rank 0 at %s:%d (MASTER_ADDR, MASTER_PORT)", host, port) : NULL;
}

// mpirun's way without MASTER_ADDR: MPI all-gathers the listeners' addresses. libmpi is loaded at
// run time; OpenMPI's handles are the addresses of ompi_mpi_comm_world / ompi_mpi_byte, MPICH's
// are the integer constants of its mpi.h (both are passed in integer registers).
static tprt_status_t tprt__meet_mpi(tprt_procs_t* p, double deadline) {
  const char* names[] = {"libmpi.so.40", "libmpi.so.12", "libmpi.so"};
  for (size_t i = 0; i < sizeof names / sizeof *names && !p->mpi; ++i) p->mpi = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
  if (!p->mpi)
    return tprt_make_status(TPRT_STATUS_UNAVAILABLE,
                            "process world: launched by mpirun without MASTER_ADDR/MASTER_PORT, and no libmpi "
                            "(libmpi.so.40 or .12) can be loaded to exchange addresses: set MASTER_ADDR and "
                            "MASTER_PORT, or install the MPI library");
  typedef int (*init_fn)(int*, char***);
  typedef int (*allgather_fn)(const void*, int, void*, void*, int, void*, void*);
  init_fn init = (init_fn)dlsym(p->mpi, "MPI_Init");
  allgather_fn allgather = (allgather_fn)dlsym(p->mpi, "MPI_Allgather");
  void* comm_world = dlsym(p->mpi, "ompi_mpi_comm_world");
  void* byte = dlsym(p->mpi, "ompi_mpi_byte");
  if (!comm_world) {  // MPICH ABI: MPI_COMM_WORLD = 0x44000000, MPI_BYTE = 0x4c00010d
    comm_world = (void*)(intptr_t)0x44000000;
    byte = (void*)(intptr_t)0x4c00010d;
  }
  if (!init || !allgather)
    return tprt_make_status(TPRT_STATUS_UNAVAILABLE, "process world: the loaded libmpi lacks MPI_Init/MPI_Allgather");
  int rc = init(NULL, NULL);
  if (rc != 0) return tprt_make_status(TPRT_STATUS_UNAVAILABLE, "process world: MPI_Init failed with code %d", rc);
  int listen_fd = -1, port = 0;
  tprt_status_t s = tprt__listen(0, &listen_fd, &port);
  if (s) return s;
  tprt__addr_t addrs[TPRT_MAX_WORLD_SIZE], mine = {tprt__own_ip(), (uint32_t)port};
  rc = allgather(&mine, (int)sizeof mine, byte, addrs, (int)sizeof mine, byte, comm_world);
  if (rc != 0) s = tprt_make_status(TPRT_STATUS_UNAVAILABLE, "process world: MPI_Allgather failed with code %d", rc);
  if (!s) s = tprt__connect_mesh(p, addrs, listen_fd, deadline);
  close(listen_fd);
  return s;
}

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

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

static tprt_status_t tprt__failed(tprt_procs_t* p) {
  return tprt_make_status(TPRT_STATUS_ABORTED, "%s", p->failure);
}

// Reads the failure notice whose header |h| came from rank |from| (best effort) and records it.
static void tprt__take_abort(tprt_procs_t* p, int from, const tprt__msg_header_t* h, double deadline) {
  char msg[512] = "";
  size_t n = h->bytes < sizeof msg - 1 ? (size_t)h->bytes : sizeof msg - 1;
  tprt_status_t s = tprt__io(p->fd[from], msg, n, false, deadline, "reading a failure notice");
  tprt_status_free(s);
  msg[n] = '\0';
  if (p->failure[0] && !p->failure_closed) return;  // the first notice wins
  // A forwarded notice names the rank that failed first, not the one that forwarded it.
  int origin = h->from < (uint32_t)p->size ? (int)h->from : from;
  snprintf(p->failure, sizeof p->failure, "rank %d failed: %s", origin, msg);
  snprintf(p->failure_note, sizeof p->failure_note, "%s", msg);
  p->failure_from = origin;
  p->failure_closed = false;
}

// Sends the notice that rank |origin| failed with |message| to every peer but those to whom a
// message is half sent (a notice would be read as its payload). Best effort, does not block: a
// peer that cannot take it is failing too. The owner thread only; once.
static void tprt__notify(tprt_procs_t* p, int origin, const char* message) {
  if (p->notified) return;
  size_t n = strlen(message);
  if (n > 500) n = 500;
  char buf[sizeof(tprt__msg_header_t) + 512];
  tprt__msg_header_t h = {n, TPRT__MSG_ABORT, (uint32_t)origin};
  memcpy(buf, &h, sizeof h);
  memcpy(buf + sizeof h, message, n);
  for (int q = 0; q < p->size; ++q)
    if (p->fd[q] >= 0 && !p->cut[q]) (void)send(p->fd[q], buf, sizeof h + n, MSG_NOSIGNAL | MSG_DONTWAIT);
  p->notified = true;
}

// The owner thread takes a cancel that another thread's tprt_procs_abort left: it becomes this
// process's failure, and the peers are told. True when there was one.
static bool tprt__take_cancel(tprt_procs_t* p) {
  if (atomic_load_explicit(&p->cancel, memory_order_acquire) != 2) return false;
  if (!p->failure[0]) snprintf(p->failure, sizeof p->failure, "%s", p->cancel_message);
  tprt__notify(p, p->rank, p->cancel_message);
  return true;
}

// A peer closed its connection. A notice, read before or after, says more (the peer that closed
// may only be ending because of another's failure), so it replaces this message.
static void tprt__closed(tprt_procs_t* p, int from) {
  if (p->failure[0]) return;
  snprintf(p->failure, sizeof p->failure,
           "rank %d's process closed its connection before the end (it failed or exited)", from);
  p->failure_closed = true;
}

// Reads what peer |q| sent, outside an exchange with it, if that is a failure notice (taken) or
// the end of its connection (recorded); anything else is data of a later exchange, left unread
// (|*out_data| then becomes true). Does not block.
static void tprt__peek_peer(tprt_procs_t* p, int q, bool* out_data) {
  tprt__msg_header_t h;
  ssize_t k = recv(p->fd[q], &h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
  if (k == 0) {
    tprt__closed(p, q);
  } else if (k == (ssize_t)sizeof h && h.kind == TPRT__MSG_ABORT) {
    char skip[sizeof h];
    if (recv(p->fd[q], skip, sizeof h, MSG_DONTWAIT) == (ssize_t)sizeof h)
      tprt__take_abort(p, q, &h, tprt__now() + 1.0);
  } else if (k > 0 && out_data) {
    *out_data = true;
  }
}

typedef struct {
  int peer;
  size_t sent;  // of header + payload
  size_t got;   // of header + payload
  tprt__msg_header_t in;
  char* buf;
} tprt__xfer_t;

tprt_status_t tprt_procs_allgather(tprt_procs_t* p, const int* members, int n, int self, const void* data,
                                   size_t bytes, void** out, size_t* out_bytes) {
  for (int i = 0; i < n; ++i) out[i] = NULL;
  tprt__take_cancel(p);
  if (p->failure[0]) return tprt__failed(p);
  tprt__xfer_t x[TPRT_MAX_WORLD_SIZE];
  tprt__msg_header_t h = {bytes, TPRT__MSG_DATA, (uint32_t)p->rank};
  const size_t hs = sizeof h;
  tprt_status_t s = NULL;
  out[self] = malloc(bytes ? bytes : 1);
  if (!out[self]) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of memory");
  if (bytes) memcpy(out[self], data, bytes);
  out_bytes[self] = bytes;
  // The other processes are watched too, for a failure notice: a member may be waiting for one of
  // them, which failed; without this, its notice would be read only at a later exchange with it.
  bool watched[TPRT_MAX_WORLD_SIZE];  // non-members whose next message is not yet known to be data
  for (int q = 0; q < p->size; ++q) watched[q] = q != p->rank && p->fd[q] >= 0;
  for (int i = 0; i < n; ++i) {
    x[i] = (tprt__xfer_t){.peer = members[i]};
    watched[members[i]] = false;
  }
  double deadline = tprt__now() + p->timeout_s, cancel_by = 0;
  for (;;) {
    struct pollfd pf[TPRT_MAX_WORLD_SIZE];
    int idx[TPRT_MAX_WORLD_SIZE], np = 0;
    for (int i = 0; i < n; ++i) {
      if (i == self) continue;
      bool send_more = x[i].sent < hs + bytes, recv_more = x[i].got < hs || x[i].got < hs + x[i].in.bytes;
      if (!send_more && !recv_more) continue;
      pf[np] = (struct pollfd){.fd = p->fd[x[i].peer], .events = (short)((send_more ? POLLOUT : 0) | (recv_more ? POLLIN : 0))};
      idx[np++] = i;
    }
    if (np == 0) break;
    int members_polled = np;
    for (int q = 0; q < p->size; ++q) {
      if (!watched[q]) continue;
      pf[np] = (struct pollfd){.fd = p->fd[q], .events = POLLIN};
      idx[np++] = -1 - q;  // a non-member
    }
    double left = deadline - tprt__now();
    if (left <= 0) {
      char missing[256] = "";
      size_t m = 0;
      for (int k = 0; k < members_polled && m < sizeof missing; ++k)
        m += (size_t)snprintf(missing + m, sizeof missing - m, "%s%d", k ? ", " : "", x[idx[k]].peer);
      s = tprt_make_status(TPRT_STATUS_DEADLINE_EXCEEDED,
                           "process world: an exchange timed out after %g s (TPRT_COLLECTIVE_TIMEOUT_S): rank(s) %s "
                           "never answered",
                           p->timeout_s, missing);
      break;
    }
    int r = poll(pf, (nfds_t)np, left > 1.0 ? 1000 : (int)(left * 1000) + 1);
    if (r < 0 && errno != EINTR) {
      s = tprt__sys("poll");
      break;
    }
    // A cancel from another thread (a signal) ends the exchange within a poll interval, once no
    // message of it is half sent (the notice must not cut one), or 2 s after it came.
    if (atomic_load_explicit(&p->cancel, memory_order_acquire) == 2) {
      bool cut = false;
      for (int i = 0; i < n; ++i) cut |= i != self && p->cut[x[i].peer];
      if (cancel_by == 0) cancel_by = tprt__now() + 2.0;
      if ((!cut || tprt__now() > cancel_by) && tprt__take_cancel(p)) {
        s = tprt__failed(p);
        break;
      }
    }
    for (int k = 0; k < np && !s; ++k) {
      if (idx[k] < 0) {
        bool has_data = false;
        if (pf[k].revents) tprt__peek_peer(p, -1 - idx[k], &has_data);
        if (has_data) watched[-1 - idx[k]] = false;
        continue;
      }
      tprt__xfer_t* t = &x[idx[k]];
      int fd = pf[k].fd;
      if ((pf[k].revents & POLLOUT) && t->sent < hs + bytes) {
        // Header and payload in one call, so that a small message is never left half sent.
        struct iovec iov[2];
        int niov = 0;
        size_t off = t->sent < hs ? 0 : t->sent - hs;
        if (t->sent < hs) iov[niov++] = (struct iovec){(char*)&h + t->sent, hs - t->sent};
        if (bytes > off) iov[niov++] = (struct iovec){(char*)data + off, bytes - off};
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)niov};
        ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) t->sent += (size_t)w;
        else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) tprt__closed(p, t->peer);
        p->cut[t->peer] = t->sent > 0 && t->sent < hs + bytes;
      }
      if (pf[k].revents & (POLLIN | POLLHUP | POLLERR)) {
        char* dst = t->got < hs ? (char*)&t->in + t->got : t->buf + (t->got - hs);
        size_t len = t->got < hs ? hs - t->got : hs + t->in.bytes - t->got;
        ssize_t got = len ? recv(fd, dst, len, MSG_DONTWAIT) : 0;
        if (len && got == 0) tprt__closed(p, t->peer);
        else if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) tprt__closed(p, t->peer);
        else if (got > 0) {
          t->got += (size_t)got;
          if (t->got == hs) {
            if (t->in.kind == TPRT__MSG_ABORT) {
              tprt__take_abort(p, t->peer, &t->in, deadline);
            } else if (!(t->buf = malloc(t->in.bytes ? t->in.bytes : 1))) {
              s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of memory");
            }
          }
        }
      }
    }
    // A closed connection is often a peer ending because of another's failure: look for the notice
    // of that failure (or the closing peer's forward of it) on every connection at a message
    // boundary. A notice outranks a closed connection.
    if (!s && p->failure_closed) {
      for (int i = 0; i < n; ++i)
        if (i != self && (x[i].got == 0 || (x[i].got >= hs && x[i].got == hs + x[i].in.bytes)))
          tprt__peek_peer(p, x[i].peer, NULL);
      for (int q = 0; q < p->size; ++q)
        if (watched[q]) tprt__peek_peer(p, q, NULL);
    }
    if (!s && p->failure[0]) s = tprt__failed(p);
    if (s) break;
  }
  for (int i = 0; i < n; ++i) {
    if (i == self) continue;
    if (s) {
      free(x[i].buf);
      continue;
    }
    out[i] = x[i].buf;
    out_bytes[i] = (size_t)x[i].in.bytes;
  }
  if (s) {
    free(out[self]);
    out[self] = NULL;
  }
  return s;
}

tprt_status_t tprt_procs_check_peers(tprt_procs_t* p) {
  if (!pthread_equal(pthread_self(), p->owner)) return NULL;  // the owner reads the sockets
  tprt__take_cancel(p);
  if (p->failure[0]) return tprt__failed(p);
  for (int q = 0; q < p->size; ++q)
    if (p->fd[q] >= 0) tprt__peek_peer(p, q, NULL);
  return p->failure[0] ? tprt__failed(p) : NULL;
}

void tprt_procs_abort(tprt_procs_t* p, const char* message) {
  if (!p) return;
  if (!pthread_equal(pthread_self(), p->owner)) {  // the owner sends it (see tprt_procs_t)
    int expected = 0;
    if (atomic_compare_exchange_strong(&p->cancel, &expected, 1)) {
      snprintf(p->cancel_message, sizeof p->cancel_message, "%s", message);
      atomic_store_explicit(&p->cancel, 2, memory_order_release);
    }
    return;
  }
  // A process ended by a peer's notice forwards that notice, unchanged (still naming the rank that
  // failed first), so that every process learns the cause even if the failed rank's own notice
  // reaches it after a closed connection of another; else it tells its own failure.
  if (p->failure_from >= 0 && !p->failure_closed)
    tprt__notify(p, p->failure_from, p->failure_note);
  else
    tprt__notify(p, p->rank, message);
}

tprt_status_t tprt_procs_finish(tprt_procs_t* p) {
  int members[TPRT_MAX_WORLD_SIZE];
  void* bufs[TPRT_MAX_WORLD_SIZE];
  size_t sizes[TPRT_MAX_WORLD_SIZE];
  for (int q = 0; q < p->size; ++q) members[q] = q;
  tprt_status_t s = tprt_procs_allgather(p, members, p->size, p->rank, "", 0, bufs, sizes);
  for (int q = 0; !s && q < p->size; ++q) free(bufs[q]);
  return s ? tprt_status_annotate(s, "the final barrier of the processes") : NULL;
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
