// Shared by the CUDA emulator's files (cuda_emulator.c: streams, events, memory, devices;
// cuda_emulator_kernels.c: the kernels the collectives launch). See cuda_emulator.c.
#ifndef TPC_CUDA_EMULATOR_H_
#define TPC_CUDA_EMULATOR_H_

#include <stddef.h>

#include "backend_cuda_impl.h"

/// Reports what an emulated GPU would have got wrong or faulted on, and ends the process.
void emu__fail(const char* what, const void* p);
/// Fails unless [p, p + bytes) lies in memory allocated on |device| now.
void emu__check(const void* p, size_t bytes, int device, const char* what);
/// Queues fn(arg) on |stream| after the work queued so far; |arg| is freed after the call.
void emu__call(cudaStream_t stream, void (*fn)(void*), void* arg);
/// The device |stream| belongs to.
int emu__stream_device(cudaStream_t stream);
/// How many times tprt_cuda_fused_allreduce_add_rmsnorm was launched, on every rank together.
int emu__fused_launches(void);

#endif  // TPC_CUDA_EMULATOR_H_
