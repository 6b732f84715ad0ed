// tpc-run's compilation of a .mlir module (see tpc_run_compile.h).
#define _POSIX_C_SOURCE 200809L
#include "tpc_run_compile.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// Compiles a .mlir with the tpc-compile that sits next to this executable.
int tpc__compile(const tpc_run_options_t* o, const char* mlir, char* out_so, size_t size, char* tmpdir) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    fprintf(stderr, "tpc-run: error: cannot locate tpc-compile\n");
    return 0;
  }
  self[n] = '\0';
  char* slash = strrchr(self, '/');
  if (slash) slash[1] = '\0';
  char compiler[PATH_MAX + 16];
  snprintf(compiler, sizeof compiler, "%stpc-compile", self);
  if (!mkdtemp(tmpdir)) {
    fprintf(stderr, "tpc-run: error: cannot create a temporary directory: %s\n", strerror(errno));
    return 0;
  }
  snprintf(out_so, size, "%s/module.so", tmpdir);
  pid_t pid = fork();
  if (pid == 0) {
    char pipeline[128], mesh[128], numerics[64], strategy[64], prefetch[64], wgrad[64], algorithm[64];
    // The five fixed arguments, one per optional flag below, and the terminating NULL.
    char* argv[15] = {compiler, (char*)mlir, "-o", out_so, pipeline};
    int argc = 5;
    snprintf(pipeline, sizeof pipeline, "--pipeline=%s", o->pipeline ? o->pipeline : "lower-cpu");
    snprintf(mesh, sizeof mesh, "--mesh=%s", o->mesh ? o->mesh : "");
    snprintf(numerics, sizeof numerics, "--numerics=%s", o->numerics ? o->numerics : "");
    snprintf(strategy, sizeof strategy, "--strategy=%s", o->strategy ? o->strategy : "");
    if (o->mesh) argv[argc++] = mesh;
    if (o->numerics) argv[argc++] = numerics;
    if (o->strategy) argv[argc++] = strategy;
    if (o->sequence_parallel) argv[argc++] = "--sequence-parallel";
    if (o->zero1) argv[argc++] = "--zero1";
    snprintf(prefetch, sizeof prefetch, "--gtp-prefetch=%s", o->gtp_prefetch ? o->gtp_prefetch : "");
    if (o->gtp_prefetch) argv[argc++] = prefetch;
    if (o->gtp_keep) argv[argc++] = "--gtp-keep";
    snprintf(wgrad, sizeof wgrad, "--gtp-wgrad=%s", o->gtp_wgrad ? o->gtp_wgrad : "");
    if (o->gtp_wgrad) argv[argc++] = wgrad;
    snprintf(algorithm, sizeof algorithm, "--fused-norm-algorithm=%s",
             o->fused_norm_algorithm ? o->fused_norm_algorithm : "");
    if (o->fused_norm_algorithm) argv[argc++] = algorithm;
    argv[argc] = NULL;
    execv(compiler, argv);
    fprintf(stderr, "tpc-run: error: cannot run %s: %s\n", compiler, strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (pid > 0 && waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}
