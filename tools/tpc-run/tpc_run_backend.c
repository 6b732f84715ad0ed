// tpc-run's backends (see tpc_run_backend.h): the CUDA plugin is found next to tpc-run or
// through TPRT_BACKEND_CUDA.
#define _POSIX_C_SOURCE 200809L
#include "tpc_run_backend.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The directory of this executable, with a trailing slash.
static void tpc__self_dir(char* out, size_t size) {
  ssize_t n = readlink("/proc/self/exe", out, size - 1);
  out[n > 0 ? n : 0] = '\0';
  char* slash = strrchr(out, '/');
  if (slash) slash[1] = '\0';
}

// The backend named by --backend: the CPU one, or the CUDA plugin (dlopen), which is only built
// where nvcc and NCCL exist and only runs where GPUs do.
const tprt_backend_t* tpc__load_backend(const char* name) {
  if (!name || !strcmp(name, "cpu")) return tprt_backend_cpu();
  char dir[PATH_MAX], candidates[2][PATH_MAX + 64];
  tpc__self_dir(dir, sizeof dir);
  const char* env = getenv("TPRT_BACKEND_CUDA");
  snprintf(candidates[0], sizeof candidates[0], "%s../lib/libtprt_backend_cuda.so", dir);
  snprintf(candidates[1], sizeof candidates[1], "%slibtprt_backend_cuda.so", dir);
  void* handle = NULL;
  const char* tried = env ? env : candidates[0];
  char error[512] = "";
  if (env) {
    handle = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    if (!handle) snprintf(error, sizeof error, "%s", dlerror());
  }
  for (int i = 0; !env && !handle && i < 2; ++i) {
    handle = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
    if (!handle && i == 0) snprintf(error, sizeof error, "%s", dlerror());
  }
  if (!handle) {
    fprintf(stderr,
            "tpc-run: error: --backend cuda: cannot load %s (%s); it is built where nvcc and NCCL exist "
            "(build/lib), or set TPRT_BACKEND_CUDA to its path\n",
            tried, error);
    return NULL;
  }
  const tprt_backend_t* (*entry)(void) = (const tprt_backend_t* (*)(void))dlsym(handle, "tprt_backend_cuda");
  if (!entry) {
    fprintf(stderr, "tpc-run: error: --backend cuda: %s has no tprt_backend_cuda\n", tried);
    return NULL;
  }
  return entry();
}
