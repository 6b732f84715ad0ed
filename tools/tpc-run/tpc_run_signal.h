// tpc-run's handling of SIGINT (Ctrl-C) and SIGTERM (what torchrun and mpirun send their ranks):
// the first signal cancels the running world (tprt_world_cancel: ranks blocked in collectives
// return at once, a process world's peers are told) and tpc-run ends with one line and status
// 128 + the signal (130 for SIGINT, 143 for SIGTERM); Ctrl-C pressed again (a SIGINT half a
// second or more after the first signal) ends the process at once.
// The handler only posts a semaphore; a watcher thread does the rest, since tprt_world_cancel
// takes locks. A signal ignored when tpc-run starts (nohup, `cmd &` in a script) stays ignored.
#ifndef TPC_RUN_SIGNAL_H_
#define TPC_RUN_SIGNAL_H_

#include "tprt_world.h"

/// Installs the handlers and starts the watcher thread. Call once, first thing in main.
void tpc_signals_install(void);

/// Makes |world| (NULL: none) the world the watcher cancels; a signal caught earlier cancels it
/// at once, so that a run it starts returns without starting its ranks.
void tpc_signals_watch(tprt_world_t* world);

/// The signal caught (SIGINT or SIGTERM), or 0.
int tpc_signals_caught(void);

/// "interrupted (SIGINT)" or "terminated (SIGTERM)" once a signal was caught, else NULL.
const char* tpc_signals_message(void);

/// Whether |message| (a failure's) says that a peer stopped on a signal ("rank 1 failed:
/// interrupted (SIGINT)"); if so, waits up to |ms| milliseconds for this process's own signal. A
/// terminal's Ctrl-C and a launcher's SIGTERM reach every process of the job, but a peer's abort
/// may arrive first: waiting lets each process report the signal itself and end with 128 + it.
void tpc_signals_await_after_peer(const char* message, int ms);

#endif  // TPC_RUN_SIGNAL_H_
