// SIGINT and SIGTERM in tpc-run (see tpc_run_signal.h).
#define _POSIX_C_SOURCE 200809L

#include "tpc_run_signal.h"

#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static sem_t tpc__signal_posted;       // posted by the handler, once per process
static atomic_int tpc__signal_count;   // signals received (the handler's only state)
static atomic_int tpc__signal_caught;  // the first signal, set by the handler
static atomic_llong tpc__signal_ms;    // when it came (CLOCK_MONOTONIC, ms; 0 until stored)
static pthread_mutex_t tpc__signal_mutex = PTHREAD_MUTEX_INITIALIZER;
static tprt_world_t* tpc__signal_world;  // guarded by tpc__signal_mutex

static const char* tpc__signal_message(int sig) {
  return sig == SIGINT ? "interrupted (SIGINT)" : "terminated (SIGTERM)";
}

static long long tpc__signal_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + 1;
}

// Async-signal-safe: atomics, clock_gettime, sem_post, write and _exit only. Only a Ctrl-C pressed
// again ends the process at once: a launcher's SIGTERM right after the terminal's SIGINT to the
// whole process group (torchrun, mpirun) is part of the same stop.
static void tpc__signal_handler(int sig) {
  if (atomic_fetch_add(&tpc__signal_count, 1) == 0) {
    atomic_store(&tpc__signal_caught, sig);
    atomic_store(&tpc__signal_ms, tpc__signal_now_ms());
    sem_post(&tpc__signal_posted);
    return;
  }
  long long first = atomic_load(&tpc__signal_ms);
  if (sig != SIGINT || first == 0 || tpc__signal_now_ms() - first < 500) return;
  static const char again[] = "tpc-run: signalled again; exiting now\n";
  ssize_t ignored = write(STDERR_FILENO, again, sizeof again - 1);
  (void)ignored;
  _exit(128 + sig);
}

static void* tpc__signal_watcher(void* arg) {
  (void)arg;
  while (sem_wait(&tpc__signal_posted) != 0) {
  }
  int sig = atomic_load(&tpc__signal_caught);
  pthread_mutex_lock(&tpc__signal_mutex);
  if (tpc__signal_world) tprt_world_cancel(tpc__signal_world, tpc__signal_message(sig));
  pthread_mutex_unlock(&tpc__signal_mutex);
  return NULL;
}

void tpc_signals_install(void) {
  if (sem_init(&tpc__signal_posted, 0, 0) != 0) return;
  pthread_t watcher;
  if (pthread_create(&watcher, NULL, tpc__signal_watcher, NULL) != 0) return;
  pthread_detach(watcher);
  const int signals[] = {SIGINT, SIGTERM};
  for (size_t i = 0; i < sizeof signals / sizeof *signals; ++i) {
    struct sigaction old, sa = {.sa_handler = tpc__signal_handler, .sa_flags = SA_RESTART};
    sigemptyset(&sa.sa_mask);
    if (sigaction(signals[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    sigaction(signals[i], &sa, NULL);
  }
}

void tpc_signals_watch(tprt_world_t* world) {
  pthread_mutex_lock(&tpc__signal_mutex);
  tpc__signal_world = world;
  int sig = atomic_load(&tpc__signal_caught);
  if (world && sig) tprt_world_cancel(world, tpc__signal_message(sig));
  pthread_mutex_unlock(&tpc__signal_mutex);
}

int tpc_signals_caught(void) { return atomic_load(&tpc__signal_caught); }

const char* tpc_signals_message(void) {
  int sig = tpc_signals_caught();
  return sig ? tpc__signal_message(sig) : NULL;
}

void tpc_signals_await_after_peer(const char* message, int ms) {
  if (!message || (!strstr(message, tpc__signal_message(SIGINT)) && !strstr(message, tpc__signal_message(SIGTERM))))
    return;
  for (int waited = 0; waited < ms && !tpc_signals_caught(); ++waited) {
    struct timespec d = {0, 1000000};
    nanosleep(&d, NULL);
  }
}
