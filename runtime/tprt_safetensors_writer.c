// Writing safetensors files (see tprt_safetensors_write in tprt_safetensors.h and docs/io.md).
//
// The header is built with cJSON in the caller's tensor order, "__metadata__" first, exactly as
// upstream safetensors serializes it, and padded with spaces to a multiple of 8 bytes so that the
// data section starts 8-byte aligned. The bytes go to "<path>.tmp", which is fsync'ed and then
// renamed over |path|: rename is atomic, so a crash leaves either the old file or the new one.
#define _POSIX_C_SOURCE 200809L

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tprt_safetensors_impl.h"

static int tprt__st_strcmp_ptr(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

// Sets *out_dup to the first string that occurs twice among |strings|[i * stride], i < n, or NULL.
static tprt_status_t tprt__st_find_duplicate(const char* const* strings, int n, int stride, const char** out_dup) {
  *out_dup = NULL;
  if (n < 2) return NULL;
  const char** sorted = NULL;
  TPRT_RETURN_IF_ERROR(tprt_allocator_malloc(tprt_allocator_system(), (size_t)n * sizeof *sorted, 16, (void**)&sorted),
                       "checking names");
  for (int i = 0; i < n; ++i) sorted[i] = strings[(size_t)i * (size_t)stride];
  qsort(sorted, (size_t)n, sizeof *sorted, tprt__st_strcmp_ptr);
  for (int i = 1; i < n && !*out_dup; ++i)
    if (strcmp(sorted[i - 1], sorted[i]) == 0) *out_dup = sorted[i];
  tprt_allocator_free(tprt_allocator_system(), sorted);
  return NULL;
}

// Checks everything before a byte is written; returns the metadata pair count in |*out_pairs|.
static tprt_status_t tprt__st_check_inputs(const char* path, int count, const char* const* names,
                                           const tprt_tensor_t* tensors, const char* const* metadata_kv,
                                           int* out_pairs) {
  if (count < 0 || (count > 0 && (!names || !tensors)))
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: cannot write %d tensors from NULL arrays", path, count);
  for (int i = 0; i < count; ++i) {
    const char* name = names[i];
    const tprt_tensor_t* t = &tensors[i];
    if (!name) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: tensor %d has a NULL name", path, i);
    if (strcmp(name, "__metadata__") == 0)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: tensor name '__metadata__' is reserved", path);
    if (tprt__safetensors_utf8_error(name, strlen(name)) >= 0)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: tensor %d's name is not valid UTF-8", path, i);
    if (!tprt_dtype_safetensors_name(t->dtype))
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: tensor '%s' has invalid dtype code %d", path, name,
                              t->dtype);
    if (t->rank < 0 || t->rank > TPRT_MAX_RANK)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: tensor '%s' has rank %d, outside [0, %d]", path, name,
                              t->rank, TPRT_MAX_RANK);
    for (int d = 0; d < t->rank; ++d)
      if (t->dims[d] < 0)
        return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: tensor '%s' has negative dimension %d = %" PRId64,
                                path, name, d, t->dims[d]);
    // tprt_tensor_numel multiplies in int64_t: make sure that cannot overflow, with room for bits.
    bool empty = false;
    for (int d = 0; d < t->rank; ++d) empty |= t->dims[d] == 0;
    int64_t numel = 1;
    for (int d = 0; d < t->rank && !empty; ++d) {
      if (numel > INT64_MAX / 64 / t->dims[d]) {
        char shape[160];
        return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: tensor '%s' shape %s has too many elements", path,
                                name, tprt__safetensors_format_shape(t->rank, t->dims, shape, sizeof shape));
      }
      numel *= t->dims[d];
    }
    if (!t->data && tprt_tensor_bytes(t) > 0)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: tensor '%s' has NULL data", path, name);
  }
  const char* dup;
  TPRT_RETURN_IF_ERROR(tprt__st_find_duplicate(names, count, 1, &dup), "%s", path);
  if (dup) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: duplicate tensor name '%s'", path, dup);

  int pairs = 0;
  for (; metadata_kv && metadata_kv[2 * pairs]; ++pairs) {
    const char* key = metadata_kv[2 * pairs];
    const char* value = metadata_kv[2 * pairs + 1];
    if (!value) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: metadata key '%s' has no value", path, key);
    if (tprt__safetensors_utf8_error(key, strlen(key)) >= 0 || tprt__safetensors_utf8_error(value, strlen(value)) >= 0)
      return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: metadata '%s' is not valid UTF-8", path, key);
  }
  TPRT_RETURN_IF_ERROR(tprt__st_find_duplicate(metadata_kv, pairs, 2, &dup), "%s", path);
  if (dup) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: duplicate metadata key '%s'", path, dup);
  *out_pairs = pairs;
  return NULL;
}

// Adds an integer array to |obj|. Integers are raw JSON text so that 64-bit values print exactly
// (cJSON numbers are doubles and would print 2^53+ in exponent form).
static bool tprt__st_add_ints(cJSON* obj, const char* key, int n, const int64_t* values) {
  cJSON* array = cJSON_AddArrayToObject(obj, key);
  if (!array) return false;
  for (int i = 0; i < n; ++i) {
    char text[24];
    snprintf(text, sizeof text, "%" PRId64, values[i]);
    cJSON* item = cJSON_CreateRaw(text);
    if (!item || !cJSON_AddItemToArray(array, item)) {
      cJSON_Delete(item);
      return false;
    }
  }
  return true;
}

// Builds the header JSON; returns NULL when cJSON runs out of memory.
static char* tprt__st_build_header(int count, const char* const* names, const tprt_tensor_t* tensors,
                                   const char* const* metadata_kv, int pairs) {
  cJSON* root = cJSON_CreateObject();
  bool ok = root != NULL;
  if (ok && pairs > 0) {
    cJSON* metadata = cJSON_AddObjectToObject(root, "__metadata__");
    ok = metadata != NULL;
    for (int i = 0; ok && i < pairs; ++i)
      ok = cJSON_AddStringToObject(metadata, metadata_kv[2 * i], metadata_kv[2 * i + 1]) != NULL;
  }
  int64_t offset = 0;
  for (int i = 0; ok && i < count; ++i) {
    const tprt_tensor_t* t = &tensors[i];
    int64_t span[2] = {offset, offset + (int64_t)tprt_tensor_bytes(t)};
    offset = span[1];
    cJSON* entry = cJSON_AddObjectToObject(root, names[i]);
    ok = entry && cJSON_AddStringToObject(entry, "dtype", tprt_dtype_safetensors_name(t->dtype)) &&
         tprt__st_add_ints(entry, "shape", t->rank, t->dims) && tprt__st_add_ints(entry, "data_offsets", 2, span);
  }
  char* text = ok ? cJSON_PrintUnformatted(root) : NULL;
  cJSON_Delete(root);
  return text;
}

// Writes all |n| bytes of |buf| to |fd|, retrying short writes and EINTR; returns 0 or an errno.
static int tprt__st_write_all(int fd, const void* buf, size_t n) {
  const uint8_t* p = buf;
  while (n > 0) {
    // Linux moves at most ~2 GiB per write; ask for less so one call never fails on size alone.
    size_t chunk = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
    ssize_t w = write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

// Writes the file's bytes to |fd|; on failure returns the errno and names the step in |*out_step|.
// Fault injection for the tests of interrupted writes (test/e2e/interrupted-write.test):
// TPRT_TEST_KILL_AFTER_TENSORS=N kills this process (SIGKILL) once N tensors have been written,
// counting across files, as a crash or `kill -9` would.
static void tprt__st_maybe_die(void) {
  static long written = 0;
  const char* e = getenv("TPRT_TEST_KILL_AFTER_TENSORS");
  if (e && *e && ++written >= atol(e)) raise(SIGKILL);
}

static int tprt__st_write_body(int fd, const char* header, size_t header_size, int count, const tprt_tensor_t* tensors,
                               const char** out_step) {
  size_t json_size = strlen(header);
  uint8_t prefix[8];
  for (int i = 0; i < 8; ++i) prefix[i] = (uint8_t)((uint64_t)header_size >> (8 * i));
  static const char spaces[8] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};
  int err;
  *out_step = "write the header";
  if ((err = tprt__st_write_all(fd, prefix, 8)) || (err = tprt__st_write_all(fd, header, json_size)) ||
      (err = tprt__st_write_all(fd, spaces, header_size - json_size)))
    return err;
  *out_step = "write tensor data";
  for (int i = 0; i < count; ++i) {
    const tprt_tensor_t* t = &tensors[i];
    size_t bytes = tprt_tensor_bytes(t);
    if (bytes == 0) continue;
    // Odd-count F4 ends in a half-used byte: write its padding nibble as zero, whatever the
    // caller's memory holds, so equal tensors give equal files.
    bool pad = t->dtype == TPRT_DTYPE_F4E2M1FN && tprt_tensor_numel(t) % 2 == 1;
    if ((err = tprt__st_write_all(fd, t->data, pad ? bytes - 1 : bytes))) return err;
    if (pad) {
      uint8_t last = ((const uint8_t*)t->data)[bytes - 1] & 0x0F;
      if ((err = tprt__st_write_all(fd, &last, 1))) return err;
    }
    tprt__st_maybe_die();
  }
  *out_step = "flush";
  if (fsync(fd) != 0) return errno;
  return 0;
}

tprt_status_t tprt_safetensors_write(const char* path, int count, const char* const* names,
                                     const tprt_tensor_t* tensors, const char* const* metadata_kv) {
  if (!path) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "tprt_safetensors_write: path is NULL");
  int pairs = 0;
  TPRT__ST_RETURN_IF_ERROR(tprt__st_check_inputs(path, count, names, tensors, metadata_kv, &pairs));

  tprt_allocator_t a = tprt_allocator_system();
  tprt_status_t status = NULL;
  char* tmp = NULL;
  int fd = -1;
  char* header = tprt__st_build_header(count, names, tensors, metadata_kv, pairs);
  if (!header) return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of memory building the header", path);
  size_t header_size = (strlen(header) + 7) / 8 * 8;
  if (header_size > TPRT__SAFETENSORS_MAX_HEADER) {
    status = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT,
                              "%s: the header would take %zu bytes, more than the %u that readers accept", path,
                              header_size, TPRT__SAFETENSORS_MAX_HEADER);
    goto done;
  }
  size_t path_len = strlen(path);
  status = tprt_allocator_malloc(a, path_len + 5, 16, (void**)&tmp);
  if (status) {
    status = tprt_status_annotate(status, "%s", path);
    goto done;
  }
  memcpy(tmp, path, path_len);
  memcpy(tmp + path_len, ".tmp", 5);

  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    status = tprt_make_status(tprt__safetensors_errno_code(err), "%s: cannot create %s: %s", path, tmp, strerror(err));
    goto done;
  }
  const char* step = "";
  int err = tprt__st_write_body(fd, header, header_size, count, tensors, &step);
  if (close(fd) != 0 && !err) err = errno, step = "close";
  fd = -1;
  if (!err && rename(tmp, path) != 0) err = errno, step = "rename the temporary file over it";
  if (err) {
    status =
        tprt_make_status(tprt__safetensors_errno_code(err), "%s: cannot %s (%s): %s", path, step, tmp, strerror(err));
    unlink(tmp);
  }

done:
  if (fd >= 0) close(fd);
  tprt_allocator_free(a, tmp);
  cJSON_free(header);
  return status;
}
