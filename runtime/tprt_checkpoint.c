// Checkpoints of one or many safetensors files (tprt_checkpoint.h): opening and validating an
// index, lookups by name, and writing the index layout.
#define _POSIX_C_SOURCE 200809L

#include "tprt_checkpoint.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tprt_safetensors_impl.h"

/// One tensor of the checkpoint: its name and the file that holds it.
typedef struct {
  const char* name;
  int file;
} tprt__ck_entry_t;

struct tprt_checkpoint_t {
  char* path;
  int num_files;
  tprt_safetensors_t** files;
  char** file_names;  // as the index names them (the path for a single file)
  int64_t num_tensors;
  tprt__ck_entry_t* by_name;  // sorted by strcmp
  char* strings;              // the tensor names of an index
};

static int tprt__ck_entry_cmp(const void* a, const void* b) {
  return strcmp(((const tprt__ck_entry_t*)a)->name, ((const tprt__ck_entry_t*)b)->name);
}
static int tprt__ck_str_cmp(const void* a, const void* b) { return strcmp(*(char* const*)a, *(char* const*)b); }

static const tprt__ck_entry_t* tprt__ck_lookup(const tprt_checkpoint_t* ck, const char* name) {
  tprt__ck_entry_t key = {name, 0};
  return bsearch(&key, ck->by_name, (size_t)ck->num_tensors, sizeof key, tprt__ck_entry_cmp);
}

void tprt_checkpoint_close(tprt_checkpoint_t* ck) {
  if (!ck) return;
  for (int f = 0; f < ck->num_files; ++f) {
    tprt_safetensors_close(ck->files ? ck->files[f] : NULL);
    free(ck->file_names ? ck->file_names[f] : NULL);
  }
  free(ck->files);
  free(ck->file_names);
  free(ck->by_name);
  free(ck->strings);
  free(ck->path);
  free(ck);
}

const char* tprt_checkpoint_path(const tprt_checkpoint_t* ck) { return ck->path; }
int tprt_checkpoint_num_files(const tprt_checkpoint_t* ck) { return ck->num_files; }
int64_t tprt_checkpoint_num_tensors(const tprt_checkpoint_t* ck) { return ck->num_tensors; }

tprt_safetensors_t* tprt_checkpoint_find(const tprt_checkpoint_t* ck, const char* name) {
  const tprt__ck_entry_t* e = tprt__ck_lookup(ck, name);
  return e ? ck->files[e->file] : NULL;
}

static bool tprt__ck_ends_with(const char* s, const char* suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

// Whether file name |f| is absolute or has a ".." component (it would leave the index's directory).
static bool tprt__ck_escapes(const char* f) {
  if (f[0] == '/') return true;
  for (const char* p = f; (p = strstr(p, "..")) != NULL; p += 2)
    if ((p == f || p[-1] == '/') && (p[2] == '\0' || p[2] == '/')) return true;
  return false;
}

// Fills |ck|'s file and tensor tables from the parsed index |root| of the file at |ck->path|.
static tprt_status_t tprt__ck_from_index(tprt_checkpoint_t* ck, const cJSON* root, tprt_allocator_t allocator) {
  const char* path = ck->path;
  const cJSON* map = cJSON_IsObject(root) ? cJSON_GetObjectItemCaseSensitive(root, "weight_map") : NULL;
  if (!cJSON_IsObject(map))
    return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                            "%s: no \"weight_map\" object (an index is {\"metadata\": {...}, \"weight_map\": "
                            "{\"<tensor>\": \"<file>\"}})",
                            path);
  int64_t n = 0;
  size_t bytes = 0;
  for (const cJSON* it = map->child; it; it = it->next, ++n) {
    if (!cJSON_IsString(it) || !it->valuestring[0])
      return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: weight_map entry '%s' is not a file name", path, it->string);
    if (tprt__ck_escapes(it->valuestring))
      return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                              "%s: weight_map entry '%s' names '%s'; files are named relative to the index's "
                              "directory, without '..'",
                              path, it->string, it->valuestring);
    bytes += strlen(it->string) + 1;
  }
  if (n == 0) return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: the weight_map lists no tensors", path);
  // The file names, sorted and made unique.
  char** names = calloc((size_t)n, sizeof *names);
  ck->by_name = calloc((size_t)n, sizeof *ck->by_name);
  ck->strings = malloc(bytes);
  if (!names || !ck->by_name || !ck->strings) {
    free(names);
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory for %" PRId64 " tensors", path, n);
  }
  int64_t i = 0;
  char* s = ck->strings;
  for (const cJSON* it = map->child; it; it = it->next, ++i) {
    size_t len = strlen(it->string) + 1;
    memcpy(s, it->string, len);
    ck->by_name[i].name = s;
    s += len;
    names[i] = it->valuestring;
  }
  ck->num_tensors = n;
  qsort(names, (size_t)n, sizeof *names, tprt__ck_str_cmp);
  int files = 0;
  for (int64_t k = 0; k < n; ++k)
    if (k == 0 || strcmp(names[k], names[k - 1]) != 0) names[files++] = names[k];
  ck->files = calloc((size_t)files, sizeof *ck->files);
  ck->file_names = calloc((size_t)files, sizeof *ck->file_names);
  tprt_status_t status = NULL;
  if (!ck->files || !ck->file_names)
    status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", path);
  // Every tensor's file index, then duplicate names.
  i = 0;
  for (const cJSON* it = map->child; it && !status; it = it->next, ++i) {
    char** at = bsearch(&it->valuestring, names, (size_t)files, sizeof *names, tprt__ck_str_cmp);
    ck->by_name[i].file = (int)(at - names);
  }
  if (!status) qsort(ck->by_name, (size_t)n, sizeof *ck->by_name, tprt__ck_entry_cmp);
  for (int64_t k = 1; k < n && !status; ++k)
    if (strcmp(ck->by_name[k].name, ck->by_name[k - 1].name) == 0)
      status = tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: tensor '%s' is listed twice in the weight_map", path,
                                ck->by_name[k].name);
  // The files, in the index's directory.
  const char* slash = strrchr(path, '/');
  int dir_len = slash ? (int)(slash - path) + 1 : 0;
  for (int f = 0; f < files && !status; ++f) {
    ck->file_names[f] = strdup(names[f]);
    size_t plen = (size_t)dir_len + strlen(names[f]) + 1;
    char* fpath = malloc(plen);
    if (!ck->file_names[f] || !fpath) {
      free(fpath);
      status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", path);
      break;
    }
    snprintf(fpath, plen, "%.*s%s", dir_len, path, names[f]);
    ck->num_files = f + 1;
    tprt_status_t inner = tprt_safetensors_open(fpath, allocator, &ck->files[f]);
    if (inner) {
      status = tprt_make_status(tprt_status_code(inner), "%s: file '%s': %s", path, names[f],
                                tprt_status_message(inner));
      tprt_status_free(inner);
    }
    free(fpath);
  }
  free(names);
  if (status) return status;
  // Every listed tensor is in its file, and every file's tensor is listed, with that file.
  uint64_t total = 0;
  for (int64_t k = 0; k < n; ++k) {
    const tprt__ck_entry_t* e = &ck->by_name[k];
    int at = tprt_safetensors_find(ck->files[e->file], e->name);
    if (at < 0)
      return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: tensor '%s' is mapped to '%s', which does not hold it", path,
                              e->name, ck->file_names[e->file]);
    tprt_safetensors_info_t info;
    TPRT_RETURN_IF_ERROR(tprt_safetensors_info(ck->files[e->file], at, &info), "%s", path);
    total += info.byte_size;
  }
  for (int f = 0; f < ck->num_files; ++f) {
    for (int t = 0; t < tprt_safetensors_count(ck->files[f]); ++t) {
      tprt_safetensors_info_t info;
      TPRT_RETURN_IF_ERROR(tprt_safetensors_info(ck->files[f], t, &info), "%s", path);
      const tprt__ck_entry_t* e = tprt__ck_lookup(ck, info.name);
      if (!e)
        return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: file '%s' holds tensor '%s', which the weight_map does not list",
                                path, ck->file_names[f], info.name);
      if (e->file != f)
        return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                                "%s: tensor '%s' is held by both '%s' and '%s' (the weight_map names '%s')", path,
                                info.name, ck->file_names[f], ck->file_names[e->file], ck->file_names[e->file]);
    }
  }
  const cJSON* meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
  const cJSON* size = cJSON_IsObject(meta) ? cJSON_GetObjectItemCaseSensitive(meta, "total_size") : NULL;
  if (size && (!cJSON_IsNumber(size) || size->valuedouble != (double)total))
    return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                            "%s: metadata.total_size is %.0f but the files hold %" PRIu64 " bytes of the listed tensors",
                            path, cJSON_IsNumber(size) ? size->valuedouble : -1.0, total);
  return NULL;
}

tprt_status_t tprt_checkpoint_open(const char* path, tprt_allocator_t allocator, tprt_checkpoint_t** out) {
  if (!path || !out) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "tprt_checkpoint_open: NULL argument");
  *out = NULL;
  tprt_checkpoint_t* ck = calloc(1, sizeof *ck);
  if (!ck || !(ck->path = strdup(path))) {
    free(ck);
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", path);
  }
  tprt_status_t status = NULL;
  if (tprt__ck_ends_with(path, ".json")) {
    char* text = NULL;
    size_t size = 0;
    status = tprt__read_file(path, &text, &size);
    if (!status) {
      cJSON* root = cJSON_ParseWithLength(text, size);
      if (!root) {
        const char* at = cJSON_GetErrorPtr();
        long long offset = at && at >= text && at <= text + size ? (long long)(at - text) : -1;
        status = tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: not valid JSON (at byte %lld of %zu; truncated?)", path,
                                  offset, size);
      } else {
        status = tprt__ck_from_index(ck, root, allocator);
        cJSON_Delete(root);
      }
      free(text);
    }
  } else {
    ck->files = calloc(1, sizeof *ck->files);
    ck->file_names = calloc(1, sizeof *ck->file_names);
    if (!ck->files || !ck->file_names || !(ck->file_names[0] = strdup(path)))
      status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", path);
    ck->num_files = ck->file_names && ck->file_names[0] ? 1 : 0;
    if (!status) status = tprt_safetensors_open(path, allocator, &ck->files[0]);
    if (!status) {
      ck->num_tensors = tprt_safetensors_count(ck->files[0]);
      ck->by_name = calloc((size_t)ck->num_tensors + 1, sizeof *ck->by_name);
      if (!ck->by_name) status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", path);
      for (int t = 0; !status && t < ck->num_tensors; ++t) {
        tprt_safetensors_info_t info;
        status = tprt_safetensors_info(ck->files[0], t, &info);
        if (!status) ck->by_name[t] = (tprt__ck_entry_t){info.name, 0};
      }
      if (!status) qsort(ck->by_name, (size_t)ck->num_tensors, sizeof *ck->by_name, tprt__ck_entry_cmp);
    }
  }
  if (status) {
    tprt_checkpoint_close(ck);
    return status;
  }
  *out = ck;
  return NULL;
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

typedef struct {
  const char* name;
  int64_t index;
} tprt__ck_named_t;

static int tprt__ck_named_cmp(const void* a, const void* b) {
  return strcmp(((const tprt__ck_named_t*)a)->name, ((const tprt__ck_named_t*)b)->name);
}

// Writes |text| to |path| through "<path>.tmp", flushed, then renamed.
static tprt_status_t tprt__ck_write_text(const char* path, const char* text) {
  size_t plen = strlen(path) + 5;
  char* tmp = malloc(plen);
  if (!tmp) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", path);
  snprintf(tmp, plen, "%s.tmp", path);
  FILE* f = fopen(tmp, "wb");
  tprt_status_t status = NULL;
  if (!f) {
    status = tprt_make_status(tprt__safetensors_errno_code(errno), "%s: cannot create: %s", tmp, strerror(errno));
  } else {
    size_t n = strlen(text);
    int err = 0;  // the first failing call's errno
    if (fwrite(text, 1, n, f) != n || fflush(f) != 0 || fsync(fileno(f)) != 0) err = errno ? errno : EIO;
    if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) {
      status = tprt_make_status(tprt__safetensors_errno_code(err), "%s: cannot write: %s", path, strerror(err));
      remove(tmp);
    }
  }
  free(tmp);
  return status;
}

tprt_status_t tprt_checkpoint_write(const char* index_path, int64_t count, const char* const* names,
                                    const tprt_tensor_t* tensors, uint64_t max_file_bytes) {
  if (!index_path || count < 0 || (count > 0 && (!names || !tensors)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "tprt_checkpoint_write: NULL argument");
  if (!tprt__ck_ends_with(index_path, ".json"))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: an index's name ends in .json", index_path);
  if (count == 0)  // an index lists at least one tensor (tprt_checkpoint_open refuses an empty one)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: no tensors to write", index_path);
  if (max_file_bytes == 0) max_file_bytes = 1;
  // Duplicate names, found by sorting (the index lists names sorted, as Hugging Face writes it).
  tprt__ck_named_t* sorted = calloc((size_t)count + 1, sizeof *sorted);
  int* file_of = calloc((size_t)count + 1, sizeof *file_of);
  if (!sorted || !file_of) {
    free(sorted);
    free(file_of);
    return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", index_path);
  }
  for (int64_t i = 0; i < count; ++i) sorted[i] = (tprt__ck_named_t){names[i], i};
  qsort(sorted, (size_t)count, sizeof *sorted, tprt__ck_named_cmp);
  tprt_status_t status = NULL;
  for (int64_t i = 1; i < count && !status; ++i)
    if (strcmp(sorted[i].name, sorted[i - 1].name) == 0)
      status = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: tensor name '%s' given twice", index_path,
                                sorted[i].name);
  // Files in the given order, each up to max_file_bytes of data (a larger tensor alone).
  int files = 0;
  uint64_t in_file = 0, total = 0;
  for (int64_t i = 0; i < count; ++i) {
    uint64_t b = tprt_tensor_bytes(&tensors[i]);
    if (i == 0 || (in_file > 0 && in_file + b > max_file_bytes)) ++files, in_file = 0;
    file_of[i] = files - 1;
    in_file += b;
    total += b;
  }
  // "<dir>/<prefix>-00001-of-00003.safetensors"
  size_t plen = strlen(index_path);
  const char* base = tprt__ck_ends_with(index_path, ".safetensors.index.json") ? ".safetensors.index.json"
                     : tprt__ck_ends_with(index_path, ".index.json")             ? ".index.json"
                                                                                 : ".json";
  int prefix_len = (int)(plen - strlen(base));
  const char* slash = strrchr(index_path, '/');
  int dir_len = slash ? (int)(slash - index_path) + 1 : 0;
  size_t name_cap = plen + 64;  // room for "-KKKKK-of-NNNNN.safetensors.partial"
  char* paths = calloc((size_t)files + 1, name_cap);
  char* partial = malloc(name_cap);
  if ((!paths || !partial) && !status) status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", index_path);
  int written = 0;
  for (int f = 0; f < files && !status; ++f) {
    char* final = paths + (size_t)f * name_cap;
    snprintf(final, name_cap, "%.*s-%05d-of-%05d.safetensors", prefix_len, index_path, f + 1, files);
    snprintf(partial, name_cap, "%s.partial", final);
    int64_t first = 0;
    while (file_of[first] != f) ++first;
    int64_t n = 0;
    while (first + n < count && file_of[first + n] == f) ++n;
    static const char* const kMeta[] = {"format", "pt", NULL};
    status = tprt_safetensors_write(partial, (int)n, names + first, tensors + first, kMeta);
    if (!status) written = f + 1;
  }
  // Every file is complete: rename them into place, then write the index.
  for (int f = 0; f < written && !status; ++f) {
    const char* final = paths + (size_t)f * name_cap;
    snprintf(partial, name_cap, "%s.partial", final);
    if (rename(partial, final) != 0)
      status = tprt_make_status(tprt__safetensors_errno_code(errno), "%s: cannot rename into place: %s", final,
                                strerror(errno));
  }
  cJSON* root = NULL;
  if (!status) {
    root = cJSON_CreateObject();
    cJSON* meta = cJSON_AddObjectToObject(root, "metadata");
    cJSON_AddNumberToObject(meta, "total_size", (double)total);
    cJSON* map = cJSON_AddObjectToObject(root, "weight_map");
    for (int64_t i = 0; i < count && map; ++i)
      cJSON_AddStringToObject(map, sorted[i].name, paths + (size_t)file_of[sorted[i].index] * name_cap + dir_len);
    char* text = cJSON_Print(root);
    status = text ? tprt__ck_write_text(index_path, text)
                  : tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory", index_path);
    cJSON_free(text);
    cJSON_Delete(root);
  }
  if (status) {  // leave no partial file behind
    for (int f = 0; f < written; ++f) {
      snprintf(partial, name_cap, "%s.partial", paths + (size_t)f * name_cap);
      remove(partial);
    }
  }
  free(paths);
  free(partial);
  free(sorted);
  free(file_of);
  return status;
}
