// tpc-train's token files and the model's vocabulary (see tpc_train.h).
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tprt_shard.h"
#include "tpc_run_tensor.h"
#include "tpc_train.h"

#define TPC_DATA_MAGIC 20240520
#define TPC_DATA_HEADER 1024  // 256 int32

//===----------------------------------------------------------------------===//
// Token files
//===----------------------------------------------------------------------===//

tprt_status_t tpc_data_open(const char* path, tpc_data_t* d) {
  memset(d, 0, sizeof *d);
  d->fd = -1;
  d->path = path;
  d->fd = open(path, O_RDONLY);
  struct stat sb;
  if (d->fd < 0 || fstat(d->fd, &sb) != 0)
    return tprt_make_status(TPRT_STATUS_NOT_FOUND, "--data %s: %s", path, strerror(errno));
  d->size = (size_t)sb.st_size;
  if (d->size < TPC_DATA_HEADER)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: %zu bytes, shorter than the 1024-byte header of a token file",
                            path, d->size);
  d->map = mmap(NULL, d->size, PROT_READ, MAP_PRIVATE, d->fd, 0);
  if (d->map == MAP_FAILED) {
    d->map = NULL;
    return tprt_make_status(TPRT_STATUS_INTERNAL, "%s: cannot map: %s", path, strerror(errno));
  }
  const int32_t* h = d->map;
  if (h[0] != TPC_DATA_MAGIC || (h[1] != 1 && h[1] != 2) || h[2] < 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: not a token file (magic %d, version %d; expected %d and 1 for uint16 or 2 for uint32 "
                            "tokens: docs/training.md, \"Token files\")",
                            path, h[0], h[1], TPC_DATA_MAGIC);
  d->width = h[1] == 1 ? 2 : 4;
  d->count = h[2];
  if ((size_t)TPC_DATA_HEADER + (size_t)d->count * (size_t)d->width != d->size)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: the header says %lld tokens of %d bytes, but the file holds %zu bytes after the header "
                            "(truncated or not a token file)",
                            path, (long long)d->count, d->width, d->size - TPC_DATA_HEADER);
  d->tokens = (const unsigned char*)d->map + TPC_DATA_HEADER;
  return NULL;
}

static int64_t tpc__token(const tpc_data_t* d, int64_t i) {
  if (d->width == 2) {
    uint16_t v;
    memcpy(&v, d->tokens + 2 * i, 2);
    return v;
  }
  uint32_t v;
  memcpy(&v, d->tokens + 4 * i, 4);
  return v;
}

tprt_status_t tpc_data_configure(tpc_data_t* d, const char* path, int64_t seq, int64_t vocab) {
  d->seq = seq;
  (void)path;
  if (vocab > 0)
    for (int64_t i = 0; i < d->count; ++i) {
      int64_t v = tpc__token(d, i);
      if (v >= vocab)
        return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                                "%s: token %lld (byte offset %lld) is %lld, outside the model's vocabulary of %lld",
                                d->path, (long long)i, (long long)(TPC_DATA_HEADER + i * d->width), (long long)v,
                                (long long)vocab);
    }
  return NULL;
}

tprt_status_t tpc_data_batch(const tpc_data_t* d, int64_t position, int64_t tokens, int32_t* ids, int32_t* targets) {
  if (d->count < tokens + 1)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                            "%s: %lld tokens, fewer than one batch needs (%lld: the step's %lld and the last one's "
                            "target)",
                            d->path, (long long)d->count, (long long)(tokens + 1), (long long)tokens);
  for (int64_t i = 0; i < tokens; ++i) {
    ids[i] = (int32_t)tpc__token(d, position + i);
    targets[i] = (int32_t)tpc__token(d, position + i + 1);
  }
  return NULL;
}

int64_t tpc_data_advance(const tpc_data_t* d, int64_t position, int64_t tokens) {
  int64_t next = position + tokens;
  return next + tokens + 1 > d->count ? 0 : next;
}

void tpc_data_close(tpc_data_t* d) {
  if (d->map) munmap(d->map, d->size);
  if (d->fd >= 0) close(d->fd);
  d->map = NULL;
  d->fd = -1;
}

int64_t tpc_train_vocab(const tprt_module_function_t* fn, const tprt_world_t* world) {
  for (int a = 0; a < fn->num_args; ++a) {
    const char* n = fn->args[a].name;
    if (fn->args[a].layout.rank == 2 && (strstr(n, "embed") || !strcmp(n, "emb") || strstr(n, "wte")) &&
        !strstr(n, ".master") && !strstr(n, ".exp_avg")) {
      tprt_tensor_t l;
      tprt_shard_t s;
      tprt_status_t st = tpc__logical(&fn->args[a], world, &l, &s);
      if (!st) return l.dims[0];
      tprt_status_free(st);
    }
  }
  return 0;
}
