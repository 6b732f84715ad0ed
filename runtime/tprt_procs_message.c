// The messages of a process world (see tprt_procs.h): framed messages on the mesh, failure
// notices and their forwarding, cancels left by other threads, and the all-gather every
// host-side exchange of a process world is built on (tprt_procs_finish's barrier included).
#define _GNU_SOURCE  // MSG_NOSIGNAL, MSG_DONTWAIT

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "tprt_procs_impl.h"

enum { TPRT__MSG_DATA = 0, TPRT__MSG_ABORT = 1 };

// Every message on the mesh: this header, then |bytes| of payload.
typedef struct {
  uint64_t bytes;
  uint32_t kind;
  uint32_t from;
} tprt__msg_header_t;

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
