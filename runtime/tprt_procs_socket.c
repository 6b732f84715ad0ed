// The TCP sockets of a process world (see tprt_procs_impl.h): listening, accepting and
// connecting with deadlines, blocking reads and writes of whole buffers, and the addresses of
// this host and of the meeting host.
#define _GNU_SOURCE  // MSG_NOSIGNAL, MSG_DONTWAIT, accept4

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tprt_procs_impl.h"

double tprt__now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

tprt_status_t tprt__sys(const char* what) {
  return tprt_make_status(TPRT_STATUS_UNAVAILABLE, "process world: %s: %s", what, strerror(errno));
}

// A listening socket on |port| (0: any free one) of every interface; its port in |*out_port|.
tprt_status_t tprt__listen(int port, int* out_fd, int* out_port) {
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
tprt_status_t tprt__io(int fd, void* buf, size_t n, bool write, double deadline, const char* what) {
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

tprt_status_t tprt__accept(int listen_fd, double deadline, int* out_fd) {
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
tprt_status_t tprt__connect(uint32_t ip, int port, double deadline, int* out_fd) {
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

tprt_status_t tprt__resolve(const char* host, uint32_t* out_ip) {
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
uint32_t tprt__own_ip(void) {
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
