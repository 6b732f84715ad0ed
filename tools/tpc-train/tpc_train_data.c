// tpc-train's token files and checkpoints (see tpc_train.h).
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tprt_safetensors.h"
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

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

static bool tpc__per_step(const char* name) {
  size_t n = strlen(name);
  return !strcmp(name, "ids") || !strcmp(name, "targets") || !strcmp(name, "optimizer.hyper") ||
         (n > 5 && !strcmp(name + n - 5, "_grad"));
}

static void tpc__remove_dir(const char* dir) {
  char p[4200];
  const char* files[2] = {"model.safetensors", "trainer_state.json"};
  for (int i = 0; i < 2; ++i) {
    snprintf(p, sizeof p, "%s/%s", dir, files[i]);
    unlink(p);
  }
  rmdir(dir);
}

tprt_status_t tpc_checkpoint_save(const tpc_train_options_t* o, const tprt_module_function_t* fn,
                                  const tprt_world_t* world, void** const* rank_args, const tprt_tensor_t* logical,
                                  int nranks, int64_t step, int64_t position) {
  char final[4096], tmp[4096], file[4200], latest[4200], latest_tmp[4200];
  mkdir(o->save_dir, 0777);
  snprintf(final, sizeof final, "%s/step-%08lld", o->save_dir, (long long)step);
  snprintf(tmp, sizeof tmp, "%s/.step-%08lld.tmp-%d", o->save_dir, (long long)step, (int)getpid());
  tpc__remove_dir(tmp);
  tprt_tensor_t* tensors = calloc((size_t)fn->num_args + 1, sizeof *tensors);
  const char** names = calloc((size_t)fn->num_args + 1, sizeof *names);
  tprt_status_t s = tensors && names ? NULL : tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  if (!s && mkdir(tmp, 0777) != 0) s = tprt_make_status(TPRT_STATUS_INTERNAL, "cannot create %s: %s", tmp, strerror(errno));
  int n = 0;
  for (int a = 0; !s && a < fn->num_args; ++a) {
    const tprt_module_tensor_t* mt = &fn->args[a];
    if (tpc__per_step(mt->name)) continue;
    tprt_shard_t shard;
    if (logical && logical[a].data) {
      tensors[n] = logical[a];
      tensors[n].data = malloc(tprt_tensor_bytes(&logical[a]) + 1);
      if (tensors[n].data) memcpy(tensors[n].data, logical[a].data, tprt_tensor_bytes(&logical[a]));
      else s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory for %s", mt->name);
      names[n++] = mt->name;
      continue;
    }
    if ((s = tpc__logical(mt, world, &tensors[n], &shard))) break;
    tensors[n].data = malloc(tprt_tensor_bytes(&tensors[n]) + 1);
    if (!tensors[n].data) {
      s = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory for %s", mt->name);
      break;
    }
    for (int r = 0; !s && r < nranks; ++r) {
      tprt_tensor_t local = mt->layout;
      local.data = rank_args[r][a];
      if (mt->sharded)
        s = tprt_shard_insert(&shard, world, r, &local, &tensors[n]);
      else if (r == 0)
        memcpy(tensors[n].data, local.data, tprt_tensor_bytes(&local));
    }
    names[n++] = mt->name;
  }
  snprintf(file, sizeof file, "%s/model.safetensors", tmp);
  if (!s) s = tprt_safetensors_write(file, n, names, tensors, NULL);
  if (!s) {
    snprintf(file, sizeof file, "%s/trainer_state.json", tmp);
    FILE* f = fopen(file, "w");
    int ok = f && fprintf(f, "{\"step\": %lld, \"position\": %lld, \"seed\": %llu, \"steps\": %lld}\n",
                          (long long)step, (long long)position, (unsigned long long)o->seed, (long long)o->steps) > 0;
    ok = (f && fflush(f) == 0 && fsync(fileno(f)) == 0) && ok;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok) s = tprt_make_status(TPRT_STATUS_INTERNAL, "%s: %s", file, strerror(errno));
  }
  for (int i = 0; tensors && i < n; ++i) free(tensors[i].data);
  free(tensors);
  free(names);
  // The whole directory appears at once; then `latest` names it (also replaced atomically).
  if (!s) {
    tpc__remove_dir(final);
    if (rename(tmp, final) != 0)
      s = tprt_make_status(TPRT_STATUS_INTERNAL, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
  }
  if (!s) {
    snprintf(latest, sizeof latest, "%s/latest", o->save_dir);
    snprintf(latest_tmp, sizeof latest_tmp, "%s/.latest.tmp-%d", o->save_dir, (int)getpid());
    FILE* f = fopen(latest_tmp, "w");
    int ok = f && fprintf(f, "step-%08lld\n", (long long)step) > 0;
    ok = (f && fflush(f) == 0 && fsync(fileno(f)) == 0) && ok;
    if (f && fclose(f) != 0) ok = 0;
    if (!ok || rename(latest_tmp, latest) != 0) {
      s = tprt_make_status(TPRT_STATUS_INTERNAL, "%s: %s", latest, strerror(errno));
      unlink(latest_tmp);
    }
  }
  if (s) {
    tpc__remove_dir(tmp);
    tprt_status_t w = tprt_make_status(tprt_status_code(s),
                                       "checkpoint of step %lld not written (%s); the earlier checkpoints in %s are "
                                       "untouched",
                                       (long long)step, tprt_status_message(s), o->save_dir);
    tprt_status_free(s);
    return w;
  }
  fprintf(stderr, "tpc-train: checkpoint %s\n", final);
  return NULL;
}

tprt_status_t tpc_checkpoint_latest(const char* dir, char* file, size_t size, tpc_checkpoint_state_t* out) {
  char latest[4200], name[256] = "", state[4400];
  snprintf(latest, sizeof latest, "%s/latest", dir);
  FILE* f = fopen(latest, "r");
  if (!f) return tprt_make_status(TPRT_STATUS_NOT_FOUND, "--resume %s: no checkpoint (%s: %s)", dir, latest, strerror(errno));
  int got = fscanf(f, "%255s", name);
  fclose(f);
  if (got != 1) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: empty", latest);
  snprintf(state, sizeof state, "%s/%s/trainer_state.json", dir, name);
  f = fopen(state, "r");
  long long step = -1, position = -1;
  if (f) {
    got = fscanf(f, " {\"step\": %lld, \"position\": %lld", &step, &position);
    fclose(f);
  }
  if (!f || got != 2 || step < 0 || position < 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: missing or not a trainer state", state);
  snprintf(file, size, "%s/%s/model.safetensors", dir, name);
  out->step = step;
  out->position = position;
  return NULL;
}
