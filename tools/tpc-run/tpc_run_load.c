// tpc-run's argument sources (tpc_run_load.h).
#define _POSIX_C_SOURCE 200809L

#include "tpc_run_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tprt_dtype.h"

double tpc_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

tprt_status_t tpc_sources_open(const tpc_run_options_t* o, tprt_allocator_t alloc, tpc_sources_t* out) {
  memset(out, 0, sizeof *out);
  if (o->weight_names && !o->weights)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "--weight-names maps names into --weights; give --weights too");
  if (o->inputs) TPRT_RETURN_IF_ERROR(tprt_checkpoint_open(o->inputs, alloc, &out->inputs), "--inputs");
  if (o->weights) TPRT_RETURN_IF_ERROR(tprt_checkpoint_open(o->weights, alloc, &out->weights), "--weights");
  if (o->weight_names) TPRT_RETURN_IF_ERROR(tprt_name_rules_load(o->weight_names, &out->rules), "--weight-names");
  return NULL;
}

void tpc_sources_close(tpc_sources_t* s) {
  tprt_checkpoint_close(s->inputs);
  tprt_checkpoint_close(s->weights);
  tprt_name_rules_free(s->rules);
  memset(s, 0, sizeof *s);
}

void tpc_arg_src_free(tpc_arg_src_t* src) {
  tprt_name_rules_free_names(src->names);
  free(src->files);
  free(src->rows);
  memset(src, 0, sizeof *src);
}

// "bf16 [28672,4096]"
static const char* tpc__load_describe(int dtype, const char* dtype_name, int rank, const int64_t* dims, char* buf,
                                      size_t size) {
  size_t len = (size_t)snprintf(buf, size, "%s [", dtype >= 0 ? tprt_dtype_name(dtype) : dtype_name);
  for (int d = 0; d < rank && len < size; ++d)
    len += (size_t)snprintf(buf + len, size - len, "%s%lld", d ? "," : "", (long long)dims[d]);
  if (len < size) snprintf(buf + len, size - len, "]");
  return buf;
}

tprt_status_t tpc_arg_src_find(const tpc_sources_t* s, const char* name, const tprt_tensor_t* logical,
                               tpc_arg_src_t* out) {
  memset(out, 0, sizeof *out);
  const tprt_checkpoint_t* ck = NULL;
  if (s->inputs && tprt_checkpoint_find(s->inputs, name)) {
    ck = s->inputs;
    TPRT_RETURN_IF_ERROR(tprt_name_rules_apply(NULL, name, &out->count, &out->names), "argument '%s'", name);
  } else if (s->weights) {
    ck = s->weights;
    TPRT_RETURN_IF_ERROR(tprt_name_rules_apply(s->rules, name, &out->count, &out->names), "argument '%s'", name);
  } else {
    return NULL;  // no checkpoint
  }
  out->files = calloc((size_t)out->count + 1, sizeof *out->files);
  out->rows = calloc((size_t)out->count + 1, sizeof *out->rows);
  if (!out->files || !out->rows) {
    tpc_arg_src_free(out);
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "out of host memory");
  }
  int found = 0;
  for (int i = 0; i < out->count; ++i) found += (out->files[i] = tprt_checkpoint_find(ck, out->names[i])) != NULL;
  if (found == 0 && (out->count == 1 && strcmp(out->names[0], name) == 0)) {
    tpc_arg_src_free(out);
    return NULL;  // not in the checkpoint: the caller decides (Philox with --seed, else an error)
  }
  tprt_status_t status = NULL;
  char want[160], got[160];
  tpc__load_describe(logical->dtype, NULL, logical->rank, logical->dims, want, sizeof want);
  int64_t rows = 0;
  for (int i = 0; i < out->count && !status; ++i) {
    if (!out->files[i]) {
      status = tprt_make_status(TPRT_STATUS_NOT_FOUND, "argument '%s' (%s): tensor '%s'%s is not in %s", name, want,
                                out->names[i], out->count > 1 || strcmp(out->names[i], name) ? " (--weight-names)" : "",
                                tprt_checkpoint_path(ck));
      break;
    }
    tprt_safetensors_info_t info;
    status = tprt_safetensors_info(out->files[i], tprt_safetensors_find(out->files[i], out->names[i]), &info);
    if (status) break;
    bool fits = info.dtype == logical->dtype && info.rank == logical->rank && info.rank >= (out->count > 1);
    for (int d = 1; fits && d < info.rank; ++d) fits = info.dims[d] == logical->dims[d];
    if (fits && out->count == 1) fits = info.rank == 0 || info.dims[0] == logical->dims[0];
    out->rows[i] = info.rank ? info.dims[0] : 1;
    rows += out->rows[i];
    if (!fits)
      status = tprt_make_status(
          TPRT_STATUS_INVALID_ARGUMENT, "argument '%s' is %s; tensor '%s' in %s is %s%s", name, want, out->names[i],
          tprt_safetensors_path(out->files[i]),
          tpc__load_describe(info.dtype, info.dtype_name, info.rank, info.dims, got, sizeof got),
          out->count > 1 ? " (the tensors of a '+' rule share the dtype and every dimension but the first)" : "");
  }
  if (!status && out->count > 1 && rows != logical->dims[0])
    status = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                              "argument '%s' is %s; its %d tensors (--weight-names) have %lld rows in all, not %lld",
                              name, want, out->count, (long long)rows, (long long)logical->dims[0]);
  if (status) tpc_arg_src_free(out);
  return status;
}

// Bytes of |rows| rows of |t|'s shape (whole-byte dtypes).
static size_t tpc__load_row_bytes(const tprt_tensor_t* t) {
  size_t b = (size_t)tprt_dtype_bits(t->dtype) / 8;
  for (int d = 1; d < t->rank; ++d) b *= (size_t)t->dims[d];
  return b;
}

tprt_status_t tpc_arg_src_read(tpc_sources_t* s, const tpc_arg_src_t* src, const tprt_tensor_t* logical) {
  double t0 = tpc_now();
  if (src->count == 1) {
    TPRT_RETURN_IF_ERROR(tprt_safetensors_read(src->files[0], src->names[0], logical), "reading '%s'", src->names[0]);
  } else {  // row blocks, one per tensor
    size_t row = tpc__load_row_bytes(logical), at = 0;
    for (int i = 0; i < src->count; ++i) {
      tprt_tensor_t part = *logical;
      part.dims[0] = src->rows[i];
      part.data = (char*)logical->data + at;
      TPRT_RETURN_IF_ERROR(tprt_safetensors_read(src->files[i], src->names[i], &part), "reading '%s'", src->names[i]);
      at += (size_t)src->rows[i] * row;
    }
  }
  s->bytes_read += tprt_tensor_bytes(logical);
  s->seconds += tpc_now() - t0;
  return NULL;
}

bool tpc_arg_src_can_slice(const tprt_shard_t* shard, int dtype) {
  if (tprt_dtype_bits(dtype) % 8 != 0) return false;
  for (int d = 1; d < shard->rank; ++d)
    if (shard->blocks[d] != 1) return false;
  return shard->rank >= 1;
}

tprt_status_t tpc_arg_src_read_local(tpc_sources_t* s, const tpc_arg_src_t* src, const tprt_shard_t* shard,
                                     const tprt_world_t* world, int r, tprt_tensor_t* local) {
  double t0 = tpc_now();
  int64_t offsets[TPRT_MAX_RANK] = {0}, sizes[TPRT_MAX_RANK] = {0};
  for (int d = 1; d < shard->rank; ++d) tprt_shard_dim_piece(shard, world, r, d, &offsets[d], &sizes[d]);
  int64_t first, piece;
  tprt_shard_dim_piece(shard, world, r, 0, &first, &piece);
  const int64_t blocks = shard->blocks[0], block_rows = shard->logical[0] / blocks;
  const size_t row = tpc__load_row_bytes(local);
  // Block j of dim 0 holds logical rows [j * block_rows + first, + piece), local rows from
  // j * piece; the rows are cut where one tensor of the concatenation ends and the next begins.
  for (int64_t j = 0; j < blocks; ++j) {
    int64_t lo = j * block_rows + first, hi = lo + piece, local_row = j * piece, base = 0;
    for (int i = 0; i < src->count && lo < hi; base += src->rows[i], ++i) {
      int64_t end = base + src->rows[i];
      if (lo >= end) continue;
      int64_t take = (hi < end ? hi : end) - lo;
      tprt_tensor_t view = *local;
      view.dims[0] = take;
      view.data = (char*)local->data + (size_t)local_row * row;
      offsets[0] = lo - base, sizes[0] = take;
      TPRT_RETURN_IF_ERROR(
          tprt_safetensors_read_slice(src->files[i], src->names[i], &view, shard->rank, offsets, sizes, NULL),
          "reading rank %d's piece of '%s'", r, src->names[i]);
      lo += take, local_row += take;
    }
  }
  s->bytes_read += tprt_tensor_bytes(local);
  s->seconds += tpc_now() - t0;
  return NULL;
}
