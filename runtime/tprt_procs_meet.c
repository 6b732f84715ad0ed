// How the processes of a world meet (see tprt_procs_impl.h): every process learns every other's
// address, through rank 0's listener at MASTER_ADDR:MASTER_PORT or an MPI all-gather, then the
// full mesh of TCP connections is made.
#define _GNU_SOURCE

#include <dlfcn.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tprt_procs_impl.h"

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
tprt_status_t tprt__meet_master(tprt_procs_t* p, const char* host, int port, double deadline) {
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
tprt_status_t tprt__meet_mpi(tprt_procs_t* p, double deadline) {
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
