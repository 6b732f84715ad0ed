// Opening safetensors files and reading whole tensors (see tprt_safetensors.h and docs/io.md).
//
// The file is mapped read-only in one piece: the header is parsed straight from the mapping, and
// reads and slices copy from it, so a multi-gigabyte checkpoint costs page-cache pages, not heap.
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tprt_safetensors_impl.h"

//===----------------------------------------------------------------------===//
// Helpers shared with the header parser, the slicer and the writer
//===----------------------------------------------------------------------===//

int64_t tprt__safetensors_utf8_error(const char* text, size_t n) {
  const unsigned char* s = (const unsigned char*)text;
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned cp;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3, cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4, cp = c & 0x07;
    } else {
      return (int64_t)i;  // a continuation byte, or a lead byte of an overlong or too-large form
    }
    if (n - i < len) return (int64_t)i;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return (int64_t)i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return (int64_t)i;
    i += len;
  }
  return -1;
}

int tprt__safetensors_errno_code(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return TPRT_STATUS_NOT_FOUND;
    case ENOSPC:
    case EDQUOT:
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EFBIG:
      return TPRT_STATUS_RESOURCE_EXHAUSTED;
    case EIO:
      return TPRT_STATUS_DATA_LOSS;
    default:
      return TPRT_STATUS_FAILED_PRECONDITION;
  }
}

const char* tprt__safetensors_format_shape(int rank, const int64_t* dims, char* buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "[");
  for (int d = 0; d < rank && used < size; ++d)
    used += (size_t)snprintf(buf + used, size - used, "%s%" PRId64, d ? "," : "", dims[d]);
  if (used < size) snprintf(buf + used, size - used, "]");
  return buf;
}

const tprt__safetensors_entry_t* tprt__safetensors_lookup(const tprt_safetensors_t* file, const char* name) {
  int i = tprt_safetensors_find(file, name);
  return i < 0 ? NULL : &file->entries[i];
}

tprt_status_t tprt__safetensors_not_found(const tprt_safetensors_t* file, const char* name) {
  // The first few names in header order are usually enough to spot a prefix or spelling mistake.
  enum { kListed = 8 };
  char list[512];
  size_t used = 0;
  list[0] = '\0';
  int shown = 0;
  for (; shown < file->count && shown < kListed && used < sizeof list; ++shown)
    used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", shown ? ", " : "", file->entries[shown].name);
  if (shown < file->count && used < sizeof list)
    snprintf(list + used, sizeof list - used, ", ... (%d more)", file->count - shown);
  if (file->count == 0)
    return tprt_make_status(TPRT_STATUS_NOT_FOUND, "%s: tensor '%s' not found (the file has no tensors)", file->path,
                            name);
  return tprt_make_status(TPRT_STATUS_NOT_FOUND, "%s: tensor '%s' not found (the file has: %s)", file->path, name,
                          list);
}

tprt_status_t tprt__safetensors_check_supported(const tprt_safetensors_t* file,
                                                const tprt__safetensors_entry_t* entry) {
  if (entry->dtype >= 0) return NULL;
  return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED,
                          "%s: tensor '%s' has dtype %s, which tpc does not support (it reads BF16, F16, F32, "
                          "F8_E4M3, F8_E5M2, F8_E8M0, F4, I32 and I64)",
                          file->path, entry->name, entry->dtype_name);
}

//===----------------------------------------------------------------------===//
// Opening and closing
//===----------------------------------------------------------------------===//

// Maps |path| into |file| and returns its header text and size through the out parameters.
static tprt_status_t tprt__st_map(tprt_safetensors_t* file, const char** out_header, uint64_t* out_header_size) {
  const char* path = file->path;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return tprt_make_status(tprt__safetensors_errno_code(err), "%s: cannot open: %s", path, strerror(err));
  }
  struct stat st;
  tprt_status_t status = NULL;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    status = tprt_make_status(tprt__safetensors_errno_code(err), "%s: cannot stat: %s", path, strerror(err));
  } else if (!S_ISREG(st.st_mode)) {
    status = tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: not a regular file", path);
  } else if (st.st_size < 8) {
    status = tprt_make_status(TPRT_STATUS_DATA_LOSS,
                              "%s: truncated header: file has %lld bytes, fewer than the 8 that hold the header size",
                              path, (long long)st.st_size);
  } else {
    file->map_size = (size_t)st.st_size;
    void* map = mmap(NULL, file->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int err = errno;
      status = tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: cannot map %zu bytes: %s", path, file->map_size,
                                strerror(err));
    } else {
      file->map = map;
    }
  }
  close(fd);  // the mapping keeps the file alive
  if (status) return status;

  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file->map[i];
  if (n == 0) return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: header size is 0", path);
  if (n > TPRT__SAFETENSORS_MAX_HEADER)
    return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                            "%s: corrupt header: header size %" PRIu64 " is absurdly large (the limit is %u bytes)",
                            path, n, TPRT__SAFETENSORS_MAX_HEADER);
  if (n > file->map_size - 8)
    return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                            "%s: truncated header: file has %zu bytes but the header claims %" PRIu64, path,
                            file->map_size, n);
  *out_header = (const char*)file->map + 8;
  *out_header_size = n;
  file->data = file->map + 8 + n;
  file->data_size = file->map_size - 8 - n;
  return NULL;
}

tprt_status_t tprt_safetensors_open(const char* path, tprt_allocator_t allocator, tprt_safetensors_t** out_file) {
  if (!out_file) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "tprt_safetensors_open: out_file is NULL");
  *out_file = NULL;
  if (!path) return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "tprt_safetensors_open: path is NULL");
  tprt_safetensors_t* file = NULL;
  TPRT_RETURN_IF_ERROR(tprt_allocator_malloc(allocator, sizeof *file, 16, (void**)&file), "%s: opening", path);
  file->allocator = allocator;
  tprt_status_t status = tprt_allocator_malloc_uninitialized(allocator, strlen(path) + 1, 16, (void**)&file->path);
  if (status) {
    tprt_safetensors_close(file);
    return tprt_status_annotate(status, "%s: opening", path);
  }
  memcpy(file->path, path, strlen(path) + 1);

  const char* header = NULL;
  uint64_t header_size = 0;
  status = tprt__st_map(file, &header, &header_size);
  if (!status) status = tprt__safetensors_parse_header(file, header, (size_t)header_size);
  if (status) {
    tprt_safetensors_close(file);
    return status;
  }
  *out_file = file;
  return NULL;
}

void tprt_safetensors_close(tprt_safetensors_t* file) {
  if (!file) return;
  tprt_allocator_t a = file->allocator;
  if (file->map) munmap((void*)file->map, file->map_size);
  tprt_allocator_free(a, file->entries);
  tprt_allocator_free(a, file->by_name);
  tprt_allocator_free(a, file->metadata);
  tprt_allocator_free(a, file->strings);
  tprt_allocator_free(a, file->path);
  tprt_allocator_free(a, file);
}

//===----------------------------------------------------------------------===//
// Queries
//===----------------------------------------------------------------------===//

const char* tprt_safetensors_path(const tprt_safetensors_t* file) { return file->path; }

int tprt_safetensors_count(const tprt_safetensors_t* file) { return file->count; }

tprt_status_t tprt_safetensors_info(const tprt_safetensors_t* file, int index, tprt_safetensors_info_t* out_info) {
  if (index < 0 || index >= file->count)
    return tprt_make_status(TPRT_STATUS_OUT_OF_RANGE, "%s: tensor index %d is outside [0, %d)", file->path, index,
                            file->count);
  const tprt__safetensors_entry_t* e = &file->entries[index];
  out_info->name = e->name;
  out_info->dtype = e->dtype;
  out_info->dtype_name = e->dtype_name;
  out_info->rank = e->rank;
  for (int d = 0; d < TPRT_MAX_RANK; ++d) out_info->dims[d] = e->dims[d];
  out_info->file_offset = (uint64_t)(file->data - file->map) + e->begin;
  out_info->byte_size = e->end - e->begin;
  return NULL;
}

int tprt_safetensors_find(const tprt_safetensors_t* file, const char* name) {
  int lo = 0, hi = file->count;
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    int c = strcmp(file->by_name[mid]->name, name);
    if (c == 0) return (int)(file->by_name[mid] - file->entries);
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

const char* tprt_safetensors_metadata(const tprt_safetensors_t* file, const char* key) {
  for (int i = 0; i < file->metadata_count; ++i)
    if (strcmp(file->metadata[2 * i], key) == 0) return file->metadata[2 * i + 1];
  return NULL;
}

//===----------------------------------------------------------------------===//
// Whole-tensor reads
//===----------------------------------------------------------------------===//

tprt_status_t tprt_safetensors_read(const tprt_safetensors_t* file, const char* name, const tprt_tensor_t* expect) {
  const tprt__safetensors_entry_t* e = tprt__safetensors_lookup(file, name);
  if (!e) return tprt__safetensors_not_found(file, name);
  TPRT__ST_RETURN_IF_ERROR(tprt__safetensors_check_supported(file, e));
  tprt_tensor_t have = tprt_tensor_make(NULL, e->dtype, e->rank, e->dims);
  if (!tprt_tensor_same_layout(&have, expect)) {
    char have_shape[160], want_shape[160];
    const char* want_dtype = tprt_dtype_safetensors_name(expect->dtype);
    int want_rank = expect->rank < 0 || expect->rank > TPRT_MAX_RANK ? 0 : expect->rank;
    return tprt_make_status(
        TPRT_STATUS_INVALID_ARGUMENT, "%s: tensor '%s' has shape %s and dtype %s, expected %s %s", file->path, name,
        tprt__safetensors_format_shape(e->rank, e->dims, have_shape, sizeof have_shape), e->dtype_name,
        tprt__safetensors_format_shape(want_rank, expect->dims, want_shape, sizeof want_shape),
        want_dtype ? want_dtype : "(invalid dtype)");
  }
  size_t bytes = (size_t)(e->end - e->begin);
  if (bytes > 0 && !expect->data)
    return tprt_make_status(TPRT_STATUS_INVALID_ARGUMENT, "%s: tensor '%s': the destination data pointer is NULL",
                            file->path, name);
  if (bytes > 0) memcpy(expect->data, file->data + e->begin, bytes);
  return NULL;
}

// Reads the whole of |path| into a NUL-terminated buffer.
tprt_status_t tprt__read_file(const char* path, char** out, size_t* out_size) {
  FILE* f = fopen(path, "rb");
  if (!f)
    return tprt_make_status(tprt__safetensors_errno_code(errno), "%s: cannot open: %s", path, strerror(errno));
  char* buf = NULL;
  size_t size = 0, cap = 0, n;
  do {
    if (size + 65536 > cap) {
      cap = cap ? 2 * cap : 65536 * 2;
      char* grown = realloc(buf, cap + 1);
      if (!grown) {
        free(buf);
        fclose(f);
        return tprt_make_status(TPRT_STATUS_RESOURCE_EXHAUSTED, "%s: out of host memory reading the file", path);
      }
      buf = grown;
    }
    n = fread(buf + size, 1, cap - size, f);
    size += n;
  } while (n > 0);
  bool failed = ferror(f);
  fclose(f);
  if (failed) {
    free(buf);
    return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: read error", path);
  }
  buf[size] = '\0';
  *out = buf;
  *out_size = size;
  return NULL;
}
