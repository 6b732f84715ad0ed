// Shared helpers of the tprt_safetensors unit tests (test_safetensors*.c): a fresh temporary
// directory per test, raw file I/O, an allocator that counts live allocations, and the upstream
// golden file. Each test file defines _POSIX_C_SOURCE before including this header.
#ifndef TEST_SAFETENSORS_UTIL_H_
#define TEST_SAFETENSORS_UTIL_H_

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tprt_safetensors.h"
#include "tprt_test.h"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

typedef struct tprt__tmpdir_t {
  char path[256];
} tprt__tmpdir_t;

static inline void tprt__tmpdir_create(tprt__tmpdir_t* dir) {
  const char* base = getenv("TMPDIR");
  snprintf(dir->path, sizeof dir->path, "%s/tprt_safetensors_XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(dir->path)) {
    fprintf(stderr, "mkdtemp(%s): %s\n", dir->path, strerror(errno));
    exit(2);
  }
}

// Removes the directory and the plain files and empty directories directly inside it.
static inline void tprt__tmpdir_remove(tprt__tmpdir_t* dir) {
  DIR* d = opendir(dir->path);
  if (d) {
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL) {
      if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) continue;
      char p[512];
      snprintf(p, sizeof p, "%s/%s", dir->path, ent->d_name);
      if (unlink(p) != 0) rmdir(p);
    }
    closedir(d);
  }
  rmdir(dir->path);
}

static const char* tprt__join(const tprt__tmpdir_t* dir, const char* name, char* buf, size_t size) {
  snprintf(buf, size, "%s/%s", dir->path, name);
  return buf;
}

static inline bool tprt__exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static inline void tprt__write_bytes(const char* path, const void* bytes, size_t n) {
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(bytes, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(2);
  }
}

// Returns the file's contents (caller frees) and its size.
static inline uint8_t* tprt__read_bytes(const char* path, size_t* out_size) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t* buf = malloc((size_t)n + 1);
  *out_size = fread(buf, 1, (size_t)n, f);
  fclose(f);
  return buf;
}

// Writes a file with header |json|, declared header size |declared| (the JSON's length when 0),
// and |data_size| data bytes counting 0, 1, 2, ...
static inline void tprt__write_raw(const char* path, const char* json, uint64_t declared, size_t data_size) {
  size_t json_size = strlen(json);
  if (declared == 0) declared = json_size;
  size_t n = 8 + json_size + data_size;
  uint8_t* buf = malloc(n);
  for (int i = 0; i < 8; ++i) buf[i] = (uint8_t)(declared >> (8 * i));
  memcpy(buf + 8, json, json_size);
  for (size_t i = 0; i < data_size; ++i) buf[8 + json_size + i] = (uint8_t)i;
  tprt__write_bytes(path, buf, n);
  free(buf);
}

// An allocator that counts live allocations, to prove that every path of open frees everything.
static int tprt__live_allocations;

static inline tprt_status_t tprt__counting_fn(void* self, size_t size, size_t alignment, void* ptr, void** out_ptr) {
  tprt_allocator_t system = tprt_allocator_system();
  tprt__live_allocations += size == 0 ? -1 : 1;
  (void)self;
  tprt_status_t s = system.fn(system.self, size, alignment, ptr, out_ptr);
  if (s) --tprt__live_allocations;
  return s;
}

static inline tprt_allocator_t tprt__counting_allocator(void) {
  tprt_allocator_t a = {NULL, tprt__counting_fn};
  return a;
}

//===----------------------------------------------------------------------===//
// The upstream golden file
//===----------------------------------------------------------------------===//

// What upstream safetensors writes for save_file({"w": f32 [[1, 2], [-0.5, 3.25]], "bias": bf16
// [1, -2, 0.5]}, metadata={"format": "pt"}): the header lists "__metadata__" first, then the tensors
// in data order (larger dtypes first), compact, padded with 5 spaces from 147 to 152 bytes (a
// multiple of 8) so that the data starts 8-byte aligned.
static const char tprt__golden_header[] =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]},"
    "\"bias\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[16,22]}}"
    "     ";
static const uint8_t tprt__golden_data[22] = {
    0x00, 0x00, 0x80, 0x3F, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00, 0xBF, 0x00, 0x00, 0x50, 0x40,  // w
    0x80, 0x3F, 0x00, 0xC0, 0x00, 0x3F,                                                              // bias
};

static inline size_t tprt__golden_bytes(uint8_t* out) {
  size_t h = sizeof tprt__golden_header - 1;
  for (int i = 0; i < 8; ++i) out[i] = (uint8_t)((uint64_t)h >> (8 * i));
  memcpy(out + 8, tprt__golden_header, h);
  memcpy(out + 8 + h, tprt__golden_data, sizeof tprt__golden_data);
  return 8 + h + sizeof tprt__golden_data;
}

#endif  // TEST_SAFETENSORS_UTIL_H_
