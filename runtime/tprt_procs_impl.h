// Internals of the process world (tprt_procs.h) shared by its files: the world's state, and
// what each file offers the others. Not part of the API (not installed).
//   tprt_procs.c          launcher detection, tprt_procs_from_env, the accessors, destroy
//   tprt_procs_socket.c   TCP sockets: listen, accept, connect, blocking I/O with a deadline
//   tprt_procs_meet.c     meeting: every process learns every other's address, the mesh connects
//   tprt_procs_message.c  framed messages with failure notices, the all-gather, finish
#ifndef TPRT_PROCS_IMPL_H_
#define TPRT_PROCS_IMPL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tprt_procs.h"
#include "tprt_world.h"

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

//===----------------------------------------------------------------------===//
// Sockets (tprt_procs_socket.c)
//===----------------------------------------------------------------------===//

/// Seconds on the monotonic clock (the deadlines of the process world).
double tprt__now(void);

/// UNAVAILABLE "process world: <what>: <strerror(errno)>".
tprt_status_t tprt__sys(const char* what);

/// A listening socket on |port| (0: any free one) of every interface; its port in |*out_port|.
tprt_status_t tprt__listen(int port, int* out_fd, int* out_port);

/// Reads (|write| false) or writes all |n| bytes of |buf| on the socket |fd| before |deadline|.
tprt_status_t tprt__io(int fd, void* buf, size_t n, bool write, double deadline, const char* what);

/// Accepts one connection on |listen_fd| before |deadline|.
tprt_status_t tprt__accept(int listen_fd, double deadline, int* out_fd);

/// Connects to |ip|:|port|, retrying until |deadline| while the peer is not listening yet.
tprt_status_t tprt__connect(uint32_t ip, int port, double deadline, int* out_fd);

/// The IPv4 address of |host| (network order).
tprt_status_t tprt__resolve(const char* host, uint32_t* out_ip);

/// An address of this host that peers can reach (network order).
uint32_t tprt__own_ip(void);

//===----------------------------------------------------------------------===//
// Meeting (tprt_procs_meet.c)
//===----------------------------------------------------------------------===//

/// torchrun's way: the processes meet at rank 0's listener on |host|:|port|, then connect the mesh.
tprt_status_t tprt__meet_master(tprt_procs_t* p, const char* host, int port, double deadline);

/// mpirun's way without MASTER_ADDR: libmpi all-gathers the listeners' addresses, then the mesh
/// connects.
tprt_status_t tprt__meet_mpi(tprt_procs_t* p, double deadline);

#endif  // TPRT_PROCS_IMPL_H_
