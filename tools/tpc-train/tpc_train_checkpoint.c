// tpc-train's checkpoints (see tpc_train.h): a directory per step written atomically, the
// `latest` file naming the last whole one, and the trainer state a resumed run starts from.
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tprt_safetensors.h"
#include "tprt_shard.h"
#include "tpc_run_tensor.h"
#include "tpc_train.h"

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
  unsigned long long seed = 0;
  bool has_seed = false;
  if (f) {
    got = fscanf(f, " {\"step\": %lld, \"position\": %lld", &step, &position);
    has_seed = got == 2 && fscanf(f, " , \"seed\": %llu", &seed) == 1;
    fclose(f);
  }
  if (!f || got != 2 || step < 0 || position < 0)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: missing or not a trainer state", state);
  snprintf(file, size, "%s/%s/model.safetensors", dir, name);
  out->step = step;
  out->position = position;
  out->seed = (uint64_t)seed;
  out->has_seed = has_seed;
  return NULL;
}
