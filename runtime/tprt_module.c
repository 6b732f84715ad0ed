// Loading compiled modules (see tprt_module.h).
#define _POSIX_C_SOURCE 200809L
#include "tprt_module.h"

#include <cjson/cJSON.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tprt_module_impl.h"

// The largest integer that a JSON number (a double in cJSON) holds exactly.
#define TPRT__JSON_MAX_INT 9007199254740992LL

// Reads |item| as an integer in [lo, hi] (hi <= 2^53). Anything else (not a number, a fraction, out
// of range) is false, so that no conversion below is undefined.
static bool tprt__json_int(const cJSON* item, int64_t lo, int64_t hi, int64_t* out) {
  if (!cJSON_IsNumber(item)) return false;
  double v = item->valuedouble;
  if (!(v >= (double)lo && v <= (double)hi) || v != (double)(int64_t)v) return false;
  *out = (int64_t)v;
  return true;
}

// Reads the first |rank| items of |list| as integers in [lo, 2^53] into |dims|. False when one is
// not, or when their running product times 8 (bytes of the widest dtype) would overflow int64_t:
// every consumer computes tprt_tensor_numel and tprt_tensor_bytes of what the manifest says.
static bool tprt__json_dims(const cJSON* list, int rank, int64_t lo, int64_t* dims) {
  int64_t numel = 1;
  for (int k = 0; k < rank; ++k) {
    if (!tprt__json_int(cJSON_GetArrayItem(list, k), lo, TPRT__JSON_MAX_INT, &dims[k])) return false;
    if (dims[k] > 0 && numel > INT64_MAX / 8 / dims[k]) return false;
    numel *= dims[k];
  }
  return true;
}

// Reads the tensor list |list| into a new array *out_list (calloc; the module frees it).
static tprt_status_t tprt__read_tensors(const char* path, const cJSON* list, const char* what,
                                        tprt_module_tensor_t** out_list, int* out_count) {
  int n = cJSON_GetArraySize(list);
  if (!cJSON_IsArray(list))
    return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: module info: '%s' must be an array of tensors", path, what);
  tprt_module_tensor_t* out = calloc((size_t)n + 1, sizeof *out);
  if (!out)
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of memory for %d %s tensors", path, n, what);
  *out_list = out;
  for (int i = 0; i < n; ++i) {
    const cJSON* t = cJSON_GetArrayItem(list, i);
    const cJSON* name = cJSON_GetObjectItemCaseSensitive(t, "name");
    const cJSON* dtype = cJSON_GetObjectItemCaseSensitive(t, "dtype");
    const cJSON* shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
    int d = cJSON_IsString(dtype) ? tprt_dtype_parse(dtype->valuestring) : -1;
    if (!cJSON_IsString(name) || d < 0 || !cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > TPRT_MAX_RANK)
      return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: module info: %s %d is malformed", path, what, i);
    snprintf(out[i].name, sizeof out[i].name, "%s", name->valuestring);
    int64_t dims[TPRT_MAX_RANK];
    int rank = cJSON_GetArraySize(shape);
    if (!tprt__json_dims(shape, rank, 0, dims))
      return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: module info: %s '%s' has a malformed shape", path, what,
                              out[i].name);
    out[i].layout = tprt_tensor_make(NULL, d, rank, dims);
    out[i].sharded = false;
    const cJSON* shard = cJSON_GetObjectItemCaseSensitive(t, "shard");
    if (shard) {
      const cJSON* axes = cJSON_GetObjectItemCaseSensitive(shard, "axes");
      const cJSON* blocks = cJSON_GetObjectItemCaseSensitive(shard, "blocks");
      const cJSON* logical = cJSON_GetObjectItemCaseSensitive(shard, "logical");
      if (cJSON_GetArraySize(axes) != rank || cJSON_GetArraySize(blocks) != rank ||
          cJSON_GetArraySize(logical) != rank || !tprt__json_dims(blocks, rank, 1, out[i].blocks) ||
          !tprt__json_dims(logical, rank, 0, out[i].logical))
        return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: module info: %s '%s' has a malformed shard", path, what,
                                out[i].name);
      for (int k = 0; k < rank; ++k) {
        const cJSON* a = cJSON_GetArrayItem(axes, k);
        snprintf(out[i].axes[k], sizeof out[i].axes[k], "%s", cJSON_IsString(a) ? a->valuestring : "");
      }
      out[i].sharded = true;
    }
  }
  *out_count = n;
  return NULL;
}

tprt_status_t tprt__module_parse_info(tprt_module_t* m, const char* json, tprt__module_resolve_fn_t resolve,
                                      void* user) {
  cJSON* root = cJSON_Parse(json);
  tprt_status_t status = NULL;
  if (!root) return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: module info is not valid JSON", m->path);
  const cJSON* abi = cJSON_GetObjectItemCaseSensitive(root, "abi");
  if (!cJSON_IsNumber(abi) || abi->valueint != TPRT_ABI_VERSION) {
    status = tprt_make_status(TPRT_STATUS_FAILED_PRECONDITION,
                              "%s: compiled for runtime ABI %d but this libtprt has ABI %d; recompile it with tpc-compile",
                              m->path, cJSON_IsNumber(abi) ? abi->valueint : -1, TPRT_ABI_VERSION);
    goto done;
  }
  const cJSON* numerics = cJSON_GetObjectItemCaseSensitive(root, "numerics");
  snprintf(m->numerics, sizeof m->numerics, "%s", cJSON_IsString(numerics) ? numerics->valuestring : "fast");
  const cJSON* chunks = cJSON_GetObjectItemCaseSensitive(root, "chunks");
  m->chunks = cJSON_IsNumber(chunks) ? chunks->valueint : 8;
  const cJSON* meshes = cJSON_GetObjectItemCaseSensitive(root, "meshes");
  if (cJSON_IsArray(meshes) && cJSON_GetArraySize(meshes) > 0) {
    const cJSON* mesh = cJSON_GetArrayItem(meshes, 0);
    const cJSON* axes = cJSON_GetObjectItemCaseSensitive(mesh, "axes");
    const cJSON* shape = cJSON_GetObjectItemCaseSensitive(mesh, "shape");
    int n = cJSON_GetArraySize(axes);
    if (n > 4) {
      status = tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "%s: meshes with more than 4 axes are not supported", m->path);
      goto done;
    }
    // Axis names are strings, sizes positive and their product (the world size) an int.
    bool valid = cJSON_IsArray(axes) && cJSON_IsArray(shape) && n == cJSON_GetArraySize(shape);
    int64_t world = 1, size = 0;
    for (int i = 0; i < n && valid; ++i) {
      const cJSON* axis = cJSON_GetArrayItem(axes, i);
      valid = cJSON_IsString(axis) && tprt__json_int(cJSON_GetArrayItem(shape, i), 1, INT32_MAX / world, &size);
      if (!valid) break;
      world *= size;
      snprintf(m->mesh_axes[i], sizeof m->mesh_axes[i], "%s", axis->valuestring);
      m->mesh_shape[i] = (int)size;
    }
    if (!valid) {
      status = tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: module info: the first mesh is malformed", m->path);
      goto done;
    }
    m->num_mesh_axes = n;
  }
  const cJSON* funcs = cJSON_GetObjectItemCaseSensitive(root, "functions");
  int nf = cJSON_GetArraySize(funcs);
  if (!cJSON_IsArray(funcs) || nf == 0) {
    status = tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: module info lists no usable functions", m->path);
    goto done;
  }
  m->functions = calloc((size_t)nf, sizeof *m->functions);
  if (!m->functions) {
    status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of memory for %d functions", m->path, nf);
    goto done;
  }
  for (int i = 0; i < nf && !status; ++i) {
    const cJSON* f = cJSON_GetArrayItem(funcs, i);
    tprt_module_function_t* mf = &m->functions[i];
    const cJSON* name = cJSON_GetObjectItemCaseSensitive(f, "name");
    const cJSON* entry = cJSON_GetObjectItemCaseSensitive(f, "entry");
    const cJSON* arena = cJSON_GetObjectItemCaseSensitive(f, "arena_bytes");
    if (!cJSON_IsString(name) || !cJSON_IsString(entry) ||
        !tprt__json_int(arena, 0, TPRT__JSON_MAX_INT, &mf->arena_bytes)) {
      status = tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: module info: function %d is malformed", m->path, i);
      break;
    }
    snprintf(mf->name, sizeof mf->name, "%s", name->valuestring);
    const cJSON* peak = cJSON_GetObjectItemCaseSensitive(f, "arena_live_peak_bytes");
    if (!tprt__json_int(peak, 0, TPRT__JSON_MAX_INT, &mf->arena_live_peak_bytes)) mf->arena_live_peak_bytes = -1;
    const cJSON* prefetch = cJSON_GetObjectItemCaseSensitive(f, "gtp_prefetch");
    if (!tprt__json_int(prefetch, 0, TPRT__JSON_MAX_INT, &mf->gtp_prefetch)) mf->gtp_prefetch = -1;
    void* sym = resolve(user, entry->valuestring);
    if (!sym) {
      status = tprt_make_status(TPRT_STATUS_NOT_FOUND, "%s: entry point '%s' is missing", m->path, entry->valuestring);
      break;
    }
    memcpy(&mf->entry, &sym, sizeof sym);  // ISO C forbids casting object pointers to functions
    m->num_functions = i + 1;  // counted before reading, so that unload frees what was read
    status = tprt__read_tensors(m->path, cJSON_GetObjectItemCaseSensitive(f, "args"), "argument", &mf->args, &mf->num_args);
    if (!status)
      status = tprt__read_tensors(m->path, cJSON_GetObjectItemCaseSensitive(f, "results"), "result", &mf->results,
                                  &mf->num_results);
  }
done:
  cJSON_Delete(root);
  return status;
}

// Resolves entry points in the dlopen handle |user|.
static void* tprt__module_dlsym(void* user, const char* symbol) { return dlsym(user, symbol); }

tprt_status_t tprt_module_load(const char* path, tprt_allocator_t allocator, tprt_module_t** out_module) {
  *out_module = NULL;
  tprt_module_t* m = NULL;
  TPRT_RETURN_IF_ERROR(tprt_allocator_malloc(allocator, sizeof *m, 16, (void**)&m), "loading %s", path);
  memset(m, 0, sizeof *m);
  snprintf(m->path, sizeof m->path, "%s", path);
  // A path without a slash would make dlopen search the library path instead of the file.
  char resolved[1100];
  snprintf(resolved, sizeof resolved, "%s%s", strchr(path, '/') ? "" : "./", path);
  m->handle = dlopen(resolved, RTLD_NOW | RTLD_LOCAL);
  if (!m->handle) {
    const char* err = dlerror();
    tprt_allocator_free(allocator, m);
    return tprt_make_status(TPRT_STATUS_NOT_FOUND, "%s: cannot load the module: %s", path, err ? err : "unknown error");
  }
  const char* info = dlsym(m->handle, TPRT_ABI_MODULE_INFO_SYMBOL);
  tprt_status_t status = info ? tprt__module_parse_info(m, info, tprt__module_dlsym, m->handle)
                              : tprt_make_status(TPRT_STATUS_DATA_LOSS,
                                                 "%s: not a tpc module (no " TPRT_ABI_MODULE_INFO_SYMBOL " symbol)", path);
  if (status) {
    tprt_module_unload(m, allocator);
    return status;
  }
  *out_module = m;
  return NULL;
}

void tprt_module_unload(tprt_module_t* module, tprt_allocator_t allocator) {
  if (!module) return;
  for (int i = 0; module->functions && i < module->num_functions; ++i) {
    free(module->functions[i].args);
    free(module->functions[i].results);
  }
  free(module->functions);
  if (module->handle) dlclose(module->handle);
  tprt_allocator_free(allocator, module);
}

const tprt_module_function_t* tprt_module_function(const tprt_module_t* module, const char* name) {
  for (int i = 0; i < module->num_functions; ++i)
    if (!name || strcmp(module->functions[i].name, name) == 0) return &module->functions[i];
  return NULL;
}
