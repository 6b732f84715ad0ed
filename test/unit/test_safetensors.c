// Unit tests of runtime/tprt_safetensors: the upstream byte format (a hand-written golden file),
// round trips of every dtype and rank, slices, and one exact message per malformed input.
// Files are written to a fresh directory under $TMPDIR (or /tmp) and removed at the end of each test.
#define _POSIX_C_SOURCE 200809L

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

static void tprt__tmpdir_create(tprt__tmpdir_t* dir) {
  const char* base = getenv("TMPDIR");
  snprintf(dir->path, sizeof dir->path, "%s/tprt_safetensors_XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(dir->path)) {
    fprintf(stderr, "mkdtemp(%s): %s\n", dir->path, strerror(errno));
    exit(2);
  }
}

// Removes the directory and the plain files and empty directories directly inside it.
static void tprt__tmpdir_remove(tprt__tmpdir_t* dir) {
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

static bool tprt__exists(const char* path) {
  struct stat st;
  return stat(path, &st) == 0;
}

static void tprt__write_bytes(const char* path, const void* bytes, size_t n) {
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(bytes, 1, n, f) != n || fclose(f) != 0) {
    fprintf(stderr, "cannot write %s\n", path);
    exit(2);
  }
}

// Returns the file's contents (caller frees) and its size.
static uint8_t* tprt__read_bytes(const char* path, size_t* out_size) {
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
static void tprt__write_raw(const char* path, const char* json, uint64_t declared, size_t data_size) {
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

static tprt_status_t tprt__counting_fn(void* self, size_t size, size_t alignment, void* ptr, void** out_ptr) {
  tprt_allocator_t system = tprt_allocator_system();
  tprt__live_allocations += size == 0 ? -1 : 1;
  (void)self;
  tprt_status_t s = system.fn(system.self, size, alignment, ptr, out_ptr);
  if (s) --tprt__live_allocations;
  return s;
}

static tprt_allocator_t tprt__counting_allocator(void) {
  tprt_allocator_t a = {NULL, tprt__counting_fn};
  return a;
}

// Reads element |i| of a packed buffer as an integer (all of a 1-8 byte element, or one nibble).
static uint64_t tprt__element(const uint8_t* base, int64_t i, int bits) {
  if (bits == 4) return (base[i / 2] >> (4 * (i % 2))) & 0xF;
  uint64_t v = 0;
  memcpy(&v, base + (size_t)i * (size_t)(bits / 8), (size_t)(bits / 8));
  return v;
}

//===----------------------------------------------------------------------===//
// The upstream format
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

static size_t tprt__golden_bytes(uint8_t* out) {
  size_t h = sizeof tprt__golden_header - 1;
  for (int i = 0; i < 8; ++i) out[i] = (uint8_t)((uint64_t)h >> (8 * i));
  memcpy(out + 8, tprt__golden_header, h);
  memcpy(out + 8 + h, tprt__golden_data, sizeof tprt__golden_data);
  return 8 + h + sizeof tprt__golden_data;
}

TPRT_TEST(safetensors_golden_header_is_what_upstream_writes) {
  TPRT_EXPECT_EQ_I64(sizeof tprt__golden_header - 1, 152);
  TPRT_EXPECT_EQ_I64((sizeof tprt__golden_header - 1) % 8, 0);
}

TPRT_TEST(safetensors_reads_upstream_golden_file) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512];
  tprt__join(&dir, "golden.safetensors", path, sizeof path);
  uint8_t bytes[256];
  tprt__write_bytes(path, bytes, tprt__golden_bytes(bytes));

  tprt_safetensors_t* file = NULL;
  TPRT_EXPECT_OK(tprt_safetensors_open(path, tprt_allocator_system(), &file));
  if (!file) return;
  TPRT_EXPECT_EQ_I64(tprt_safetensors_count(file), 2);
  TPRT_EXPECT_STREQ(tprt_safetensors_path(file), path);
  TPRT_EXPECT_STREQ(tprt_safetensors_metadata(file, "format"), "pt");
  TPRT_EXPECT(tprt_safetensors_metadata(file, "missing") == NULL);
  TPRT_EXPECT_EQ_I64(tprt_safetensors_find(file, "w"), 0);
  TPRT_EXPECT_EQ_I64(tprt_safetensors_find(file, "bias"), 1);
  TPRT_EXPECT_EQ_I64(tprt_safetensors_find(file, "c"), -1);

  tprt_safetensors_info_t info;
  TPRT_EXPECT_OK(tprt_safetensors_info(file, 1, &info));
  TPRT_EXPECT_STREQ(info.name, "bias");
  TPRT_EXPECT_EQ_I64(info.dtype, TPRT_DTYPE_BF16);
  TPRT_EXPECT_STREQ(info.dtype_name, "BF16");
  TPRT_EXPECT_EQ_I64(info.rank, 1);
  TPRT_EXPECT_EQ_I64(info.dims[0], 3);
  TPRT_EXPECT_EQ_I64(info.file_offset, 8 + 152 + 16);
  TPRT_EXPECT_EQ_I64(info.byte_size, 6);

  float w[4] = {0};
  int64_t w_dims[2] = {2, 2};
  tprt_tensor_t wt = tprt_tensor_make(w, TPRT_DTYPE_F32, 2, w_dims);
  TPRT_EXPECT_OK(tprt_safetensors_read(file, "w", &wt));
  TPRT_EXPECT_EQ_BITS(w[0] == 1.0f && w[1] == 2.0f && w[2] == -0.5f && w[3] == 3.25f, 1);
  uint16_t b[3] = {0};
  int64_t b_dims[1] = {3};
  tprt_tensor_t bt = tprt_tensor_make(b, TPRT_DTYPE_BF16, 1, b_dims);
  TPRT_EXPECT_OK(tprt_safetensors_read(file, "bias", &bt));
  TPRT_EXPECT_EQ_BITS(b[0], 0x3F80);
  TPRT_EXPECT_EQ_BITS(b[1], 0xC000);
  TPRT_EXPECT_EQ_BITS(b[2], 0x3F00);
  tprt_safetensors_close(file);
  tprt__tmpdir_remove(&dir);
}

TPRT_TEST(safetensors_writer_reproduces_upstream_bytes) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512];
  tprt__join(&dir, "mine.safetensors", path, sizeof path);
  float w[4] = {1.0f, 2.0f, -0.5f, 3.25f};
  uint16_t b[3] = {0x3F80, 0xC000, 0x3F00};
  int64_t w_dims[2] = {2, 2}, b_dims[1] = {3};
  tprt_tensor_t tensors[2] = {tprt_tensor_make(w, TPRT_DTYPE_F32, 2, w_dims),
                              tprt_tensor_make(b, TPRT_DTYPE_BF16, 1, b_dims)};
  const char* names[2] = {"w", "bias"};
  const char* metadata[] = {"format", "pt", NULL};
  TPRT_EXPECT_OK(tprt_safetensors_write(path, 2, names, tensors, metadata));

  uint8_t golden[256];
  size_t golden_size = tprt__golden_bytes(golden);
  size_t size = 0;
  uint8_t* bytes = tprt__read_bytes(path, &size);
  TPRT_EXPECT(bytes != NULL);
  TPRT_EXPECT_EQ_I64(size, golden_size);
  TPRT_EXPECT(bytes && size == golden_size && memcmp(bytes, golden, size) == 0);
  free(bytes);
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  TPRT_EXPECT(!tprt__exists(tmp));
  tprt__tmpdir_remove(&dir);
}

// Writes |count| tensors with |metadata| and expects the file to equal |json| (padded with spaces
// to a multiple of 8) followed by |data|. Returns the number of mismatching bytes, or -1.
static int64_t tprt__written_bytes_differ(const char* path, int count, const char* const* names,
                                          const tprt_tensor_t* tensors, const char* const* metadata, const char* json,
                                          const void* data, size_t data_size) {
  tprt_status_t s = tprt_safetensors_write(path, count, names, tensors, metadata);
  if (s) {
    tprt_status_free(s);
    return -1;
  }
  size_t json_size = strlen(json), header_size = (json_size + 7) / 8 * 8;
  size_t expect_size = 8 + header_size + data_size, size = 0;
  uint8_t* expect = malloc(expect_size);
  for (int i = 0; i < 8; ++i) expect[i] = (uint8_t)((uint64_t)header_size >> (8 * i));
  memcpy(expect + 8, json, json_size);
  memset(expect + 8 + json_size, ' ', header_size - json_size);
  if (data_size) memcpy(expect + 8 + header_size, data, data_size);
  uint8_t* bytes = tprt__read_bytes(path, &size);
  int64_t differ = size == expect_size ? 0 : -1;
  for (size_t i = 0; differ >= 0 && i < size; ++i) differ += bytes[i] != expect[i];
  free(bytes);
  free(expect);
  return differ;
}

/// The vectors of upstream's own serialization tests (safetensors/src/tensor.rs): no padding when
/// the header is 64 bytes, 7 spaces after a 65-byte header, 5 after metadata alone.
TPRT_TEST(safetensors_writer_matches_upstream_test_vectors) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512];
  tprt__join(&dir, "vectors.safetensors", path, sizeof path);
  float values[6] = {0, 1, 2, 3, 4, 5};
  int64_t dims3[3] = {1, 2, 3}, dims4[4] = {1, 1, 2, 3};
  tprt_tensor_t t3 = tprt_tensor_make(values, TPRT_DTYPE_F32, 3, dims3);
  tprt_tensor_t t4 = tprt_tensor_make(values, TPRT_DTYPE_F32, 4, dims4);
  const char* attn_0[1] = {"attn.0"};
  const char* attn0[1] = {"attn0"};
  TPRT_EXPECT_EQ_I64(tprt__written_bytes_differ(path, 1, attn_0, &t3, NULL,
                                                "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],"
                                                "\"data_offsets\":[0,24]}}",
                                                values, sizeof values),
                     0);
  TPRT_EXPECT_EQ_I64(tprt__written_bytes_differ(path, 1, attn0, &t4, NULL,
                                                "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],"
                                                "\"data_offsets\":[0,24]}}",
                                                values, sizeof values),
                     0);
  const char* framework[] = {"framework", "pt", NULL};
  TPRT_EXPECT_EQ_I64(
      tprt__written_bytes_differ(path, 0, NULL, NULL, framework, "{\"__metadata__\":{\"framework\":\"pt\"}}", NULL, 0),
      0);
  tprt__tmpdir_remove(&dir);
}

/// Older writers list tensors in name order, not data order, and may pretty-print the header.
TPRT_TEST(safetensors_reads_header_in_any_order_and_layout) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512];
  tprt__join(&dir, "reordered.safetensors", path, sizeof path);
  tprt__write_raw(path,
                  "{\n  \"a\": {\"dtype\": \"I32\", \"shape\": [2], \"data_offsets\": [8, 16], \"extra\": 1},\n"
                  "  \"b\": {\"data_offsets\": [0, 8], \"shape\": [1], \"dtype\": \"I64\"},\n"
                  "  \"e\": {\"dtype\": \"F16\", \"shape\": [0, 3], \"data_offsets\": [16, 16]}\n}\n",
                  0, 16);
  tprt_safetensors_t* file = NULL;
  TPRT_EXPECT_OK(tprt_safetensors_open(path, tprt_allocator_system(), &file));
  if (!file) return;
  TPRT_EXPECT_EQ_I64(tprt_safetensors_count(file), 3);
  int32_t a[2] = {0};
  int64_t dims[1] = {2};
  tprt_tensor_t at = tprt_tensor_make(a, TPRT_DTYPE_I32, 1, dims);
  TPRT_EXPECT_OK(tprt_safetensors_read(file, "a", &at));
  TPRT_EXPECT_EQ_BITS(a[0], 0x0B0A0908);
  TPRT_EXPECT_EQ_BITS(a[1], 0x0F0E0D0C);
  int64_t e_dims[2] = {0, 3};
  tprt_tensor_t et = tprt_tensor_make(NULL, TPRT_DTYPE_F16, 2, e_dims);
  TPRT_EXPECT_OK(tprt_safetensors_read(file, "e", &et));
  TPRT_EXPECT_STREQ(tprt_safetensors_metadata(file, "format") ? "set" : "unset", "unset");
  tprt_safetensors_close(file);
  tprt__tmpdir_remove(&dir);
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

// Shapes per rank with odd element counts (F4 then ends in half a byte), plus an empty tensor.
static const int64_t tprt__shapes[6][4] = {{0}, {5}, {3, 5}, {3, 3, 5}, {3, 1, 3, 5}, {4, 0}};
static const int tprt__ranks[6] = {0, 1, 2, 3, 4, 2};

TPRT_TEST(safetensors_round_trips_every_dtype_and_rank) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512];
  tprt__join(&dir, "all.safetensors", path, sizeof path);
  enum { kCount = TPRT_DTYPE_COUNT * 6 };
  tprt_tensor_t tensors[kCount];
  char name_store[kCount][32];
  const char* names[kCount];
  for (int d = 0; d < TPRT_DTYPE_COUNT; ++d) {
    for (int s = 0; s < 6; ++s) {
      int i = d * 6 + s;
      snprintf(name_store[i], sizeof name_store[i], "%s.rank%d.%d", tprt_dtype_name(d), tprt__ranks[s], s);
      names[i] = name_store[i];
      tensors[i] = tprt_tensor_make(NULL, d, tprt__ranks[s], tprt__shapes[s]);
      size_t bytes = tprt_tensor_bytes(&tensors[i]);
      uint8_t* data = malloc(bytes + 1);
      for (size_t k = 0; k < bytes; ++k) data[k] = (uint8_t)(k * 131 + (size_t)i * 7 + 1);
      // The writer zeroes the unused nibble of odd-count F4; do the same so the bytes compare.
      if (d == TPRT_DTYPE_F4E2M1FN && tprt_tensor_numel(&tensors[i]) % 2) data[bytes - 1] &= 0x0F;
      tensors[i].data = data;
    }
  }
  const char* metadata[] = {"format", "tpc", "note", "round \"trip\" \xc3\xa9", NULL};
  TPRT_EXPECT_OK(tprt_safetensors_write(path, kCount, names, tensors, metadata));

  tprt__live_allocations = 0;
  tprt_safetensors_t* file = NULL;
  TPRT_EXPECT_OK(tprt_safetensors_open(path, tprt__counting_allocator(), &file));
  if (file) {
    TPRT_EXPECT_EQ_I64(tprt_safetensors_count(file), kCount);
    TPRT_EXPECT_STREQ(tprt_safetensors_metadata(file, "note"), "round \"trip\" \xc3\xa9");
    for (int i = 0; i < kCount; ++i) {
      const tprt_tensor_t* t = &tensors[i];
      tprt_safetensors_info_t info;
      TPRT_EXPECT_OK(tprt_safetensors_info(file, i, &info));
      TPRT_EXPECT_STREQ(info.name, names[i]);
      TPRT_EXPECT_EQ_I64(info.dtype, t->dtype);
      TPRT_EXPECT_STREQ(info.dtype_name, tprt_dtype_safetensors_name(t->dtype));
      TPRT_EXPECT_EQ_I64(info.rank, t->rank);
      for (int d = 0; d < TPRT_MAX_RANK; ++d) TPRT_EXPECT_EQ_I64(info.dims[d], t->dims[d]);
      size_t bytes = tprt_tensor_bytes(t);
      TPRT_EXPECT_EQ_I64(info.byte_size, bytes);
      TPRT_EXPECT_EQ_I64(info.file_offset % 8 == 0 || i > 0, 1);  // the data section is 8-byte aligned
      uint8_t* back = malloc(bytes + 1);
      tprt_tensor_t view = *t;
      view.data = back;
      TPRT_EXPECT_OK(tprt_safetensors_read(file, names[i], &view));
      TPRT_EXPECT(memcmp(back, t->data, bytes) == 0);
      // A slice that covers everything equals the whole tensor.
      memset(back, 0xAA, bytes + 1);
      int64_t zeros[TPRT_MAX_RANK] = {0};
      TPRT_EXPECT_OK(tprt_safetensors_read_slice(file, names[i], &view, t->rank, zeros, t->dims, NULL));
      TPRT_EXPECT(memcmp(back, t->data, bytes) == 0);
      free(back);
    }
    tprt_safetensors_close(file);
  }
  TPRT_EXPECT_EQ_I64(tprt__live_allocations, 0);
  for (int i = 0; i < kCount; ++i) free(tensors[i].data);
  tprt__tmpdir_remove(&dir);
}

TPRT_TEST(safetensors_writes_zero_padding_nibble_for_odd_f4) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512];
  tprt__join(&dir, "f4.safetensors", path, sizeof path);
  uint8_t f4[2] = {0x21, 0xF3};  // elements 1, 2, 3 and a junk padding nibble 0xF
  int64_t dims[1] = {3};
  tprt_tensor_t t = tprt_tensor_make(f4, TPRT_DTYPE_F4E2M1FN, 1, dims);
  const char* name = "q";
  TPRT_EXPECT_OK(tprt_safetensors_write(path, 1, &name, &t, NULL));
  size_t size = 0;
  uint8_t* bytes = tprt__read_bytes(path, &size);
  TPRT_EXPECT(bytes && size >= 2);
  if (bytes && size >= 2) {
    TPRT_EXPECT_EQ_BITS(bytes[size - 2], 0x21);
    TPRT_EXPECT_EQ_BITS(bytes[size - 1], 0x03);
  }
  free(bytes);
  TPRT_EXPECT_EQ_BITS(f4[1], 0xF3);  // the caller's buffer is left alone
  tprt__tmpdir_remove(&dir);
}

TPRT_TEST(safetensors_writes_an_empty_file) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512];
  tprt__join(&dir, "empty.safetensors", path, sizeof path);
  TPRT_EXPECT_OK(tprt_safetensors_write(path, 0, NULL, NULL, NULL));
  size_t size = 0;
  uint8_t* bytes = tprt__read_bytes(path, &size);
  static const uint8_t expect[16] = {8, 0, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' ', ' ', ' ', ' ', ' '};
  TPRT_EXPECT(bytes && size == 16 && memcmp(bytes, expect, 16) == 0);
  free(bytes);
  tprt_safetensors_t* file = NULL;
  TPRT_EXPECT_OK(tprt_safetensors_open(path, tprt_allocator_system(), &file));
  if (file) {
    TPRT_EXPECT_EQ_I64(tprt_safetensors_count(file), 0);
    tprt_tensor_t t = tprt_tensor_make(NULL, TPRT_DTYPE_F32, 0, NULL);
    char want[600];
    snprintf(want, sizeof want, "%s: tensor 'x' not found (the file has no tensors)", path);
    TPRT_EXPECT_STATUS(tprt_safetensors_read(file, "x", &t), TPRT_STATUS_NOT_FOUND, want);
    tprt_safetensors_close(file);
  }
  tprt__tmpdir_remove(&dir);
}

//===----------------------------------------------------------------------===//
// Slices
//===----------------------------------------------------------------------===//

// Reads a slice of |name| (whose whole bytes are |src|, with |dims|) and returns how many elements
// differ from the source elements they must come from; -1 when the read fails. Checks too that an
// odd-count F4 result leaves the padding nibble zero.
static int64_t tprt__slice_mismatches(const tprt_safetensors_t* file, const char* name, const uint8_t* src, int dtype,
                                      int rank, const int64_t* dims, const int64_t* offsets, const int64_t* sizes,
                                      const int64_t* strides) {
  tprt_tensor_t view = tprt_tensor_make(NULL, dtype, rank, sizes);
  size_t bytes = tprt_tensor_bytes(&view);
  uint8_t* out = malloc(bytes + 1);
  memset(out, 0xAA, bytes + 1);  // junk, so that unwritten elements show
  view.data = out;
  tprt_status_t s = tprt_safetensors_read_slice(file, name, &view, rank, offsets, sizes, strides);
  if (s) {
    char buf[1024];
    fprintf(stderr, "read_slice: %s\n", tprt_status_format(s, buf, sizeof buf));
    tprt_status_free(s);
    free(out);
    return -1;
  }
  int bits = tprt_dtype_bits(dtype);
  int64_t total = tprt_tensor_numel(&view), mismatches = 0;
  int64_t index[TPRT_MAX_RANK] = {0};
  for (int64_t i = 0; i < total; ++i) {
    int64_t src_index = 0;
    for (int d = 0; d < rank; ++d) src_index = src_index * dims[d] + offsets[d] + index[d] * (strides ? strides[d] : 1);
    mismatches += tprt__element(out, i, bits) != tprt__element(src, src_index, bits);
    for (int d = rank - 1; d >= 0 && ++index[d] == sizes[d]; --d) index[d] = 0;
  }
  if (bits == 4 && total % 2) mismatches += (out[total / 2] >> 4) != 0;
  if (bytes + 1 > bytes && out[bytes] != 0xAA) ++mismatches;  // nothing written past the end
  free(out);
  return mismatches;
}

typedef struct tprt__slice_fixture_t {
  tprt__tmpdir_t dir;
  char path[512];
  tprt_tensor_t tensors[6];
  tprt_safetensors_t* file;
} tprt__slice_fixture_t;

// "m" f32 [8,6], "experts" bf16 [4,3,5], "q" f4 [3,5], "q8" f4 [6,8], "ids" i64 [5,4], "s" f32 [].
static const char* const tprt__slice_names[6] = {"m", "experts", "q", "q8", "ids", "s"};

static void tprt__slice_fixture_create(tprt__slice_fixture_t* fx) {
  static const int64_t shapes[6][3] = {{8, 6}, {4, 3, 5}, {3, 5}, {6, 8}, {5, 4}, {0}};
  static const int dtypes[6] = {TPRT_DTYPE_F32,      TPRT_DTYPE_BF16, TPRT_DTYPE_F4E2M1FN,
                                TPRT_DTYPE_F4E2M1FN, TPRT_DTYPE_I64,  TPRT_DTYPE_F32};
  static const int ranks[6] = {2, 3, 2, 2, 2, 0};
  tprt__tmpdir_create(&fx->dir);
  tprt__join(&fx->dir, "slices.safetensors", fx->path, sizeof fx->path);
  for (int i = 0; i < 6; ++i) {
    fx->tensors[i] = tprt_tensor_make(NULL, dtypes[i], ranks[i], shapes[i]);
    size_t bytes = tprt_tensor_bytes(&fx->tensors[i]);
    uint8_t* data = malloc(bytes);
    for (size_t k = 0; k < bytes; ++k) data[k] = (uint8_t)(k * 37 + (size_t)i * 11 + 5);
    fx->tensors[i].data = data;
  }
  fx->file = NULL;
  TPRT_EXPECT_OK(tprt_safetensors_write(fx->path, 6, tprt__slice_names, fx->tensors, NULL));
  TPRT_EXPECT_OK(tprt_safetensors_open(fx->path, tprt_allocator_system(), &fx->file));
}

static void tprt__slice_fixture_destroy(tprt__slice_fixture_t* fx) {
  tprt_safetensors_close(fx->file);
  for (int i = 0; i < 6; ++i) free(fx->tensors[i].data);
  tprt__tmpdir_remove(&fx->dir);
}

#define TPRT__SLICE(fx, i, rank, offsets, sizes, strides)                                                    \
  tprt__slice_mismatches((fx).file, tprt__slice_names[i], (fx).tensors[i].data, (fx).tensors[i].dtype, rank, \
                         (fx).tensors[i].dims, offsets, sizes, strides)

TPRT_TEST(safetensors_slices_row_blocks) {
  tprt__slice_fixture_t fx;
  tprt__slice_fixture_create(&fx);
  if (!fx.file) return;
  // Rank r of R holds rows [r*N/R, (r+1)*N/R): even for R = 4, uneven (2, 3, 3) for R = 3.
  for (int world = 3; world <= 4; ++world) {
    for (int r = 0; r < world; ++r) {
      int64_t begin = r * 8 / world, end = (r + 1) * 8 / world;
      int64_t offsets[2] = {begin, 0}, sizes[2] = {end - begin, 6};
      TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 0, 2, offsets, sizes, NULL), 0);
    }
  }
  int64_t i64_offsets[2] = {4, 3}, one[2] = {1, 1};
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 4, 2, i64_offsets, one, NULL), 0);
  tprt__slice_fixture_destroy(&fx);
}

TPRT_TEST(safetensors_slices_column_blocks) {
  tprt__slice_fixture_t fx;
  tprt__slice_fixture_create(&fx);
  if (!fx.file) return;
  for (int r = 0; r < 2; ++r) {
    int64_t offsets[2] = {0, 3 * r}, sizes[2] = {8, 3};
    TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 0, 2, offsets, sizes, NULL), 0);
  }
  int64_t inner_offsets[2] = {2, 1}, inner_sizes[2] = {5, 4};
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 0, 2, inner_offsets, inner_sizes, NULL), 0);
  tprt__slice_fixture_destroy(&fx);
}

TPRT_TEST(safetensors_slices_expert_blocks) {
  tprt__slice_fixture_t fx;
  tprt__slice_fixture_create(&fx);
  if (!fx.file) return;
  // Expert parallelism: rank r of 2 holds experts [2r, 2r+2) of a [E, N, K] weight.
  for (int r = 0; r < 2; ++r) {
    int64_t offsets[3] = {2 * r, 0, 0}, sizes[3] = {2, 3, 5};
    TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 1, 3, offsets, sizes, NULL), 0);
  }
  // Experts and tensor parallelism together: an inner block of every selected expert.
  int64_t offsets[3] = {1, 1, 2}, sizes[3] = {2, 2, 3};
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 1, 3, offsets, sizes, NULL), 0);
  tprt__slice_fixture_destroy(&fx);
}

/// Fused gate/up weights interleave rows; stride 2 deinterleaves them.
TPRT_TEST(safetensors_slices_with_strides) {
  tprt__slice_fixture_t fx;
  tprt__slice_fixture_create(&fx);
  if (!fx.file) return;
  int64_t odd_rows[2] = {1, 0}, rows_sizes[2] = {4, 6}, rows_strides[2] = {2, 1};
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 0, 2, odd_rows, rows_sizes, rows_strides), 0);
  int64_t cols[2] = {0, 0}, cols_sizes[2] = {8, 3}, cols_strides[2] = {1, 2};
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 0, 2, cols, cols_sizes, cols_strides), 0);
  int64_t e_offsets[3] = {0, 1, 1}, e_sizes[3] = {2, 1, 2}, e_strides[3] = {3, 1, 3};
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 1, 3, e_offsets, e_sizes, e_strides), 0);
  int64_t q_offsets[2] = {0, 1}, q_sizes[2] = {3, 2}, q_strides[2] = {1, 2};
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 2, 2, q_offsets, q_sizes, q_strides), 0);
  tprt__slice_fixture_destroy(&fx);
}

/// F4 packs two elements per byte: slices that start on an odd element move nibbles one by one.
TPRT_TEST(safetensors_slices_packed_f4) {
  tprt__slice_fixture_t fx;
  tprt__slice_fixture_create(&fx);
  if (!fx.file) return;
  int64_t cols[2] = {0, 1}, cols_sizes[2] = {3, 3};
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 2, 2, cols, cols_sizes, NULL), 0);
  int64_t rows[2] = {1, 0}, rows_sizes[2] = {2, 5};  // starts at element 5: odd
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 2, 2, rows, rows_sizes, NULL), 0);
  int64_t last[2] = {2, 4}, one[2] = {1, 1};
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 2, 2, last, one, NULL), 0);
  int64_t even_rows[2] = {2, 0}, even_sizes[2] = {2, 8};  // whole bytes: one memcpy
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 3, 2, even_rows, even_sizes, NULL), 0);
  int64_t odd_block[2] = {1, 3}, odd_sizes[2] = {3, 3};
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 3, 2, odd_block, odd_sizes, NULL), 0);
  tprt__slice_fixture_destroy(&fx);
}

TPRT_TEST(safetensors_slices_scalars_and_empty_blocks) {
  tprt__slice_fixture_t fx;
  tprt__slice_fixture_create(&fx);
  if (!fx.file) return;
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 5, 0, NULL, NULL, NULL), 0);
  int64_t offsets[2] = {8, 0}, sizes[2] = {0, 6};  // an empty block may start at the end
  TPRT_EXPECT_EQ_I64(TPRT__SLICE(fx, 0, 2, offsets, sizes, NULL), 0);
  tprt__slice_fixture_destroy(&fx);
}

TPRT_TEST(safetensors_slice_errors_name_the_file_and_problem) {
  tprt__slice_fixture_t fx;
  tprt__slice_fixture_create(&fx);
  if (!fx.file) return;
  float buf[64];
  char want[1024];
  const char* p = fx.path;
  int64_t sizes2[2] = {2, 6}, offsets2[2] = {0, 0};
  tprt_tensor_t view = tprt_tensor_make(buf, TPRT_DTYPE_F32, 2, sizes2);

  int64_t offsets3[3] = {0, 0, 0}, sizes3[3] = {1, 2, 6};
  tprt_tensor_t view3 = tprt_tensor_make(buf, TPRT_DTYPE_F32, 3, sizes3);
  snprintf(want, sizeof want, "%s: tensor 'm' has rank 2 (shape [8,6]), but the slice has rank 3", p);
  TPRT_EXPECT_STATUS(tprt_safetensors_read_slice(fx.file, "m", &view3, 3, offsets3, sizes3, NULL),
                     TPRT_STATUS_INVALID_ARGUMENT, want);

  int64_t past[2] = {6, 0}, past_sizes[2] = {4, 6};
  tprt_tensor_t past_view = tprt_tensor_make(buf, TPRT_DTYPE_F32, 2, past_sizes);
  snprintf(want, sizeof want,
           "%s: tensor 'm' slice dimension 0 (offset 6, size 4, stride 1) runs past its 8 elements (shape [8,6])", p);
  TPRT_EXPECT_STATUS(tprt_safetensors_read_slice(fx.file, "m", &past_view, 2, past, past_sizes, NULL),
                     TPRT_STATUS_OUT_OF_RANGE, want);

  // Rows 1, 3, 5, 7 fit in 8 rows; rows 1, 3, ..., 9 do not.
  int64_t every_other_row[2] = {2, 1};
  int64_t big[2] = {1, 0}, big_sizes[2] = {5, 6};
  tprt_tensor_t big_view = tprt_tensor_make(buf, TPRT_DTYPE_F32, 2, big_sizes);
  snprintf(want, sizeof want,
           "%s: tensor 'm' slice dimension 0 (offset 1, size 5, stride 2) runs past its 8 elements (shape [8,6])", p);
  TPRT_EXPECT_STATUS(tprt_safetensors_read_slice(fx.file, "m", &big_view, 2, big, big_sizes, every_other_row),
                     TPRT_STATUS_OUT_OF_RANGE, want);

  int64_t negative[2] = {-1, 0};
  snprintf(want, sizeof want,
           "%s: tensor 'm' slice dimension 0 has offset -1, size 2, stride 1; offsets and sizes must be >= 0 and "
           "strides >= 1",
           p);
  TPRT_EXPECT_STATUS(tprt_safetensors_read_slice(fx.file, "m", &view, 2, negative, sizes2, NULL),
                     TPRT_STATUS_INVALID_ARGUMENT, want);
  int64_t zero_stride[2] = {1, 0};
  snprintf(want, sizeof want, "%s: tensor 'm' slice dimension 1 has offset 0, size 6, stride 0;", p);
  TPRT_EXPECT_STATUS(tprt_safetensors_read_slice(fx.file, "m", &view, 2, offsets2, sizes2, zero_stride),
                     TPRT_STATUS_INVALID_ARGUMENT, want);

  int64_t narrow[2] = {2, 5};
  tprt_tensor_t narrow_view = tprt_tensor_make(buf, TPRT_DTYPE_F32, 2, narrow);
  snprintf(want, sizeof want, "%s: tensor 'm' slice is [2,6] F32, but the destination is [2,5] F32", p);
  TPRT_EXPECT_STATUS(tprt_safetensors_read_slice(fx.file, "m", &narrow_view, 2, offsets2, sizes2, NULL),
                     TPRT_STATUS_INVALID_ARGUMENT, want);
  tprt_tensor_t bf16_view = tprt_tensor_make(buf, TPRT_DTYPE_BF16, 2, sizes2);
  snprintf(want, sizeof want, "%s: tensor 'm' slice is [2,6] F32, but the destination is [2,6] BF16", p);
  TPRT_EXPECT_STATUS(tprt_safetensors_read_slice(fx.file, "m", &bf16_view, 2, offsets2, sizes2, NULL),
                     TPRT_STATUS_INVALID_ARGUMENT, want);

  snprintf(want, sizeof want, "%s: tensor 'M' not found (the file has: m, experts, q, q8, ids, s)", p);
  TPRT_EXPECT_STATUS(tprt_safetensors_read_slice(fx.file, "M", &view, 2, offsets2, sizes2, NULL), TPRT_STATUS_NOT_FOUND,
                     want);
  tprt__slice_fixture_destroy(&fx);
}

//===----------------------------------------------------------------------===//
// Read errors
//===----------------------------------------------------------------------===//

TPRT_TEST(safetensors_read_errors_name_the_file_and_problem) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512], want[1024];
  tprt__join(&dir, "model.safetensors", path, sizeof path);
  uint8_t bytes[256];
  tprt__write_bytes(path, bytes, tprt__golden_bytes(bytes));
  tprt_safetensors_t* file = NULL;
  TPRT_EXPECT_OK(tprt_safetensors_open(path, tprt_allocator_system(), &file));
  if (!file) return;
  uint16_t buf[16];
  int64_t dims[2] = {2, 3};
  tprt_tensor_t t = tprt_tensor_make(buf, TPRT_DTYPE_BF16, 2, dims);
  snprintf(want, sizeof want, "%s: tensor 'w' has shape [2,2] and dtype F32, expected [2,3] BF16", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_read(file, "w", &t), TPRT_STATUS_INVALID_ARGUMENT, want);
  snprintf(want, sizeof want, "%s: tensor 'w1' not found (the file has: w, bias)", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_read(file, "w1", &t), TPRT_STATUS_NOT_FOUND, want);
  int64_t w_dims[2] = {2, 2};
  tprt_tensor_t null_data = tprt_tensor_make(NULL, TPRT_DTYPE_F32, 2, w_dims);
  snprintf(want, sizeof want, "%s: tensor 'w': the destination data pointer is NULL", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_read(file, "w", &null_data), TPRT_STATUS_INVALID_ARGUMENT, want);
  tprt_safetensors_info_t info;
  snprintf(want, sizeof want, "%s: tensor index 2 is outside [0, 2)", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_info(file, 2, &info), TPRT_STATUS_OUT_OF_RANGE, want);
  TPRT_EXPECT_STATUS(tprt_safetensors_info(file, -1, &info), TPRT_STATUS_OUT_OF_RANGE, "index -1");
  tprt_safetensors_close(file);
  tprt__tmpdir_remove(&dir);
}

TPRT_TEST(safetensors_not_found_lists_the_first_names) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512], want[1024];
  tprt__join(&dir, "many.safetensors", path, sizeof path);
  tprt_tensor_t tensors[11];
  const char* names[11] = {"t0", "t1", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9", "t10"};
  int32_t value = 7;
  for (int i = 0; i < 11; ++i) tensors[i] = tprt_tensor_make(&value, TPRT_DTYPE_I32, 0, NULL);
  TPRT_EXPECT_OK(tprt_safetensors_write(path, 11, names, tensors, NULL));
  tprt_safetensors_t* file = NULL;
  TPRT_EXPECT_OK(tprt_safetensors_open(path, tprt_allocator_system(), &file));
  if (!file) return;
  for (int i = 0; i < 11; ++i) TPRT_EXPECT_EQ_I64(tprt_safetensors_find(file, names[i]), i);
  snprintf(want, sizeof want, "%s: tensor 't11' not found (the file has: t0, t1, t2, t3, t4, t5, t6, t7, ... (3 more))",
           path);
  TPRT_EXPECT_STATUS(tprt_safetensors_read(file, "t11", &tensors[0]), TPRT_STATUS_NOT_FOUND, want);
  tprt_safetensors_close(file);
  tprt__tmpdir_remove(&dir);
}

/// F64, I8 and the other standard dtypes open (a checkpoint may mix them in) but do not read.
TPRT_TEST(safetensors_unsupported_dtypes_open_but_do_not_read) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512], want[1024];
  tprt__join(&dir, "f64.safetensors", path, sizeof path);
  tprt__write_raw(path,
                  "{\"d\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                  "\"i\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[16,19]},"
                  "\"b\":{\"dtype\":\"BOOL\",\"shape\":[1],\"data_offsets\":[19,20]},"
                  "\"u\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[20,24]},"
                  "\"f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[24,28]}}",
                  0, 28);
  tprt_safetensors_t* file = NULL;
  TPRT_EXPECT_OK(tprt_safetensors_open(path, tprt_allocator_system(), &file));
  if (!file) return;
  tprt_safetensors_info_t info;
  TPRT_EXPECT_OK(tprt_safetensors_info(file, 0, &info));
  TPRT_EXPECT_EQ_I64(info.dtype, -1);
  TPRT_EXPECT_STREQ(info.dtype_name, "F64");
  TPRT_EXPECT_EQ_I64(info.byte_size, 16);
  double d[2];
  int64_t dims[1] = {2};
  tprt_tensor_t t = tprt_tensor_make(d, TPRT_DTYPE_I64, 1, dims);
  snprintf(want, sizeof want,
           "%s: tensor 'd' has dtype F64, which tpc does not support (it reads BF16, F16, F32, F8_E4M3, F8_E5M2, "
           "F8_E8M0, F4, I32 and I64)",
           path);
  TPRT_EXPECT_STATUS(tprt_safetensors_read(file, "d", &t), TPRT_STATUS_UNIMPLEMENTED, want);
  int64_t zero[1] = {0}, one[1] = {1};
  tprt_tensor_t one_view = tprt_tensor_make(d, TPRT_DTYPE_I64, 1, one);
  snprintf(want, sizeof want, "%s: tensor 'i' has dtype I8, which tpc does not support", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_read_slice(file, "i", &one_view, 1, zero, one, NULL), TPRT_STATUS_UNIMPLEMENTED,
                     want);
  float f = 0;
  int64_t f_dims[1] = {1};
  tprt_tensor_t ft = tprt_tensor_make(&f, TPRT_DTYPE_F32, 1, f_dims);
  TPRT_EXPECT_OK(tprt_safetensors_read(file, "f", &ft));
  tprt_safetensors_close(file);
  tprt__tmpdir_remove(&dir);
}

//===----------------------------------------------------------------------===//
// Malformed files: one exact message each
//===----------------------------------------------------------------------===//

typedef struct tprt__malformed_t {
  const char* json;
  size_t json_size;  // strlen(json) when 0
  int64_t declared;  // header size in the prefix; json_size when -1
  size_t data_size;  // bytes after the header, counting 0, 1, 2, ...
  int code;
  const char* message;  // after "<path>: "
} tprt__malformed_t;

#define TPRT__F32_4(name, begin, end) \
  "\"" name "\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[" #begin "," #end "]}"

static const tprt__malformed_t tprt__malformed[] = {
    // The prefix and the JSON text.
    {"{}", 0, 0, 0, TPRT_STATUS_DATA_LOSS, "corrupt header: header size is 0"},
    {"{}", 0, 200000000, 0, TPRT_STATUS_DATA_LOSS,
     "corrupt header: header size 200000000 is absurdly large (the limit is 100000000 bytes)"},
    {"{}", 0, 4096, 10, TPRT_STATUS_DATA_LOSS, "truncated header: file has 20 bytes but the header claims 4096"},
    {"{\"a\": {\"dtype\": \"F32\",, }}", 0, -1, 0, TPRT_STATUS_DATA_LOSS,
     "corrupt header: JSON parse error near byte 23 of the header"},
    {"        ", 0, -1, 0, TPRT_STATUS_DATA_LOSS, "corrupt header: JSON parse error near byte 0 of the header"},
    {"[1,2,3] ", 0, -1, 0, TPRT_STATUS_DATA_LOSS, "corrupt header: expected a JSON object, found an array"},
    {"{} x    ", 0, -1, 0, TPRT_STATUS_DATA_LOSS,
     "corrupt header: unexpected bytes after the JSON object at byte 3 of the header"},
    {"{}\x01", 0, -1, 0, TPRT_STATUS_DATA_LOSS,
     "corrupt header: unexpected bytes after the JSON object at byte 2 of the header"},
    {"{}\0     ", 8, -1, 0, TPRT_STATUS_DATA_LOSS, "corrupt header: NUL byte at byte 2 of the header"},
    {"{\"a\xff\":1}", 0, -1, 0, TPRT_STATUS_DATA_LOSS, "corrupt header: invalid UTF-8 at byte 3 of the header"},
    {"{\"\xc0\xae\":1}", 0, -1, 0, TPRT_STATUS_DATA_LOSS, "corrupt header: invalid UTF-8 at byte 2 of the header"},
    // Tensor entries.
    {"{\"a\":3}", 0, -1, 0, TPRT_STATUS_DATA_LOSS, "corrupt header: tensor 'a' is a number, not an object"},
    {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 0, -1, 4, TPRT_STATUS_DATA_LOSS,
     "corrupt header: tensor 'a' has no 'dtype' field"},
    {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 0, -1, 4, TPRT_STATUS_DATA_LOSS,
     "corrupt header: tensor 'a' has no 'shape' field"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 0, -1, 4, TPRT_STATUS_DATA_LOSS,
     "corrupt header: tensor 'a' has no 'data_offsets' field"},
    {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, -1, 4,
     TPRT_STATUS_DATA_LOSS, "corrupt header: tensor 'a' has two 'dtype' fields"},
    {"{\"a\":{\"dtype\":32,\"shape\":[1],\"data_offsets\":[0,4]}}", 0, -1, 4, TPRT_STATUS_DATA_LOSS,
     "corrupt header: tensor 'a' dtype is a number, not a string"},
    {"{\"a\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, -1, 4, TPRT_STATUS_UNIMPLEMENTED,
     "tensor 'a' has unknown dtype 'Q7'"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,16]}}", 0, -1, 16, TPRT_STATUS_DATA_LOSS,
     "corrupt header: tensor 'a' shape is a number, not an array"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,-3],\"data_offsets\":[0,24]}}", 0, -1, 24, TPRT_STATUS_DATA_LOSS,
     "tensor 'a' shape[1] is -3, not a non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 0, -1, 8, TPRT_STATUS_DATA_LOSS,
     "tensor 'a' shape[0] is 2.5, not a non-negative integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}}", 0, -1, 8, TPRT_STATUS_DATA_LOSS,
     "corrupt header: tensor 'a' shape[0] is a string, not an integer"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e20],\"data_offsets\":[0,8]}}", 0, -1, 8, TPRT_STATUS_DATA_LOSS,
     "tensor 'a' shape[0] is 1e+20, larger than 2^53"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 0, -1, 4,
     TPRT_STATUS_UNIMPLEMENTED, "tensor 'a' has rank 9; tpc supports at most 8"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 0, -1, 4,
     TPRT_STATUS_DATA_LOSS, "tensor 'a' shape [4294967296,4294967296] has too many elements"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 0, -1, 4, TPRT_STATUS_DATA_LOSS,
     "corrupt header: tensor 'a' data_offsets is not [begin, end]"},
    {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 0, -1, 4, TPRT_STATUS_DATA_LOSS,
     "tensor 'a' data_offsets[0] is -4, not a non-negative integer"},
    // Offsets against sizes and against each other.
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[4,6],\"data_offsets\":[0,100]}}", 0, -1, 100, TPRT_STATUS_DATA_LOSS,
     "tensor 'x' data_offsets [0,100] do not match its 96 bytes (dtype F32, shape [4,6])"},
    {"{\"x\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]}}", 0, -1, 1, TPRT_STATUS_DATA_LOSS,
     "tensor 'x' data_offsets [0,1] do not match its 2 bytes (dtype F4, shape [3])"},
    {"{\"x\":{\"dtype\":\"F32\",\"shape\":[4,6],\"data_offsets\":[0,96]}}", 0, -1, 50, TPRT_STATUS_DATA_LOSS,
     "tensor 'x' data_offsets [0,96] run past the end of the file (the data section has 50 bytes)"},
    {"{" TPRT__F32_4("a", 16, 0) "}", 0, -1, 16, TPRT_STATUS_DATA_LOSS,
     "tensor 'a' data_offsets [16,0] end before they begin"},
    {"{" TPRT__F32_4("a", 0, 16) "," TPRT__F32_4("b", 8, 24) "}", 0, -1, 24, TPRT_STATUS_DATA_LOSS,
     "tensor 'b' data_offsets [8,24] overlap tensor 'a' [0,16]"},
    {"{" TPRT__F32_4("a", 0, 16) "," TPRT__F32_4("b", 20, 36) "}", 0, -1, 36, TPRT_STATUS_DATA_LOSS,
     "tensor 'b' data_offsets [20,36] leave a gap of 4 bytes after tensor 'a' [0,16]"},
    {"{" TPRT__F32_4("a", 4, 20) "}", 0, -1, 20, TPRT_STATUS_DATA_LOSS,
     "tensor 'a' data_offsets [4,20] leave a gap of 4 bytes at the start of the data section"},
    {"{" TPRT__F32_4("a", 0, 16) "}", 0, -1, 20, TPRT_STATUS_DATA_LOSS,
     "4 bytes after the last tensor (data section of 20 bytes, tensors end at 16) are not described by the header"},
    {"{" TPRT__F32_4("a", 0, 16) "," TPRT__F32_4("a", 16, 32) "}", 0, -1, 32, TPRT_STATUS_DATA_LOSS,
     "corrupt header: duplicate tensor name 'a'"},
    // Metadata.
    {"{\"__metadata__\":[1]}", 0, -1, 0, TPRT_STATUS_DATA_LOSS,
     "corrupt header: '__metadata__' is an array, not an object"},
    {"{\"__metadata__\":{\"k\":1}}", 0, -1, 0, TPRT_STATUS_DATA_LOSS,
     "corrupt header: '__metadata__' value of 'k' is a number, not a string"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, -1, 0, TPRT_STATUS_DATA_LOSS,
     "corrupt header: two '__metadata__' objects"},
};

TPRT_TEST(safetensors_rejects_malformed_files_with_one_line_messages) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512], want[1024];
  tprt__join(&dir, "bad.safetensors", path, sizeof path);
  for (size_t i = 0; i < sizeof tprt__malformed / sizeof tprt__malformed[0]; ++i) {
    const tprt__malformed_t* m = &tprt__malformed[i];
    size_t json_size = m->json_size ? m->json_size : strlen(m->json);
    uint64_t declared = m->declared < 0 ? json_size : (uint64_t)m->declared;
    size_t n = 8 + json_size + m->data_size;
    uint8_t* bytes = malloc(n);
    for (int k = 0; k < 8; ++k) bytes[k] = (uint8_t)(declared >> (8 * k));
    memcpy(bytes + 8, m->json, json_size);
    for (size_t k = 0; k < m->data_size; ++k) bytes[8 + json_size + k] = (uint8_t)k;
    tprt__write_bytes(path, bytes, n);
    free(bytes);

    tprt__live_allocations = 0;
    tprt_safetensors_t* file = (tprt_safetensors_t*)&dir;  // must be reset to NULL
    tprt_status_t s = tprt_safetensors_open(path, tprt__counting_allocator(), &file);
    snprintf(want, sizeof want, "%s: %s", path, m->message);
    if (!s) {
      TPRT__FAIL("case %zu opened; expected \"%s\"", i, want);
      tprt_safetensors_close(file);
      continue;
    }
    if ((int)tprt_status_code(s) != m->code)
      TPRT__FAIL("case %zu: code %s, expected %s", i, tprt_status_code_string(tprt_status_code(s)),
                 tprt_status_code_string(m->code));
    TPRT_EXPECT_STREQ(tprt_status_message(s), want);
    TPRT_EXPECT(strchr(tprt_status_message(s), '\n') == NULL);
    TPRT_EXPECT(file == NULL);
    TPRT_EXPECT_EQ_I64(tprt__live_allocations, 0);
    tprt_status_free(s);
  }
  tprt__tmpdir_remove(&dir);
}

TPRT_TEST(safetensors_rejects_missing_short_and_non_regular_files) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512], want[1024];
  tprt_safetensors_t* file = NULL;
  tprt__join(&dir, "missing.safetensors", path, sizeof path);
  snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_open(path, tprt_allocator_system(), &file), TPRT_STATUS_NOT_FOUND, want);
  TPRT_EXPECT(file == NULL);

  tprt__join(&dir, "short.safetensors", path, sizeof path);
  tprt__write_bytes(path, "\x02\x00\x00\x00\x00", 5);
  snprintf(want, sizeof want, "%s: truncated header: file has 5 bytes, fewer than the 8 that hold the header size",
           path);
  TPRT_EXPECT_STATUS(tprt_safetensors_open(path, tprt_allocator_system(), &file), TPRT_STATUS_DATA_LOSS, want);

  snprintf(want, sizeof want, "%s: not a regular file", dir.path);
  TPRT_EXPECT_STATUS(tprt_safetensors_open(dir.path, tprt_allocator_system(), &file), TPRT_STATUS_INVALID_ARGUMENT,
                     want);
  tprt__tmpdir_remove(&dir);
}

//===----------------------------------------------------------------------===//
// Writer errors and atomic replacement
//===----------------------------------------------------------------------===//

TPRT_TEST(safetensors_writer_rejects_bad_inputs_before_touching_the_disk) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512], want[1024];
  tprt__join(&dir, "out.safetensors", path, sizeof path);
  float data[4] = {0};
  int64_t dims[1] = {4}, bad_dims[1] = {-4};
  tprt_tensor_t t[2] = {tprt_tensor_make(data, TPRT_DTYPE_F32, 1, dims),
                        tprt_tensor_make(data, TPRT_DTYPE_F32, 1, dims)};
  const char* dup[2] = {"a", "a"};
  snprintf(want, sizeof want, "%s: duplicate tensor name 'a'", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_write(path, 2, dup, t, NULL), TPRT_STATUS_INVALID_ARGUMENT, want);
  const char* reserved[1] = {"__metadata__"};
  snprintf(want, sizeof want, "%s: tensor name '__metadata__' is reserved", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_write(path, 1, reserved, t, NULL), TPRT_STATUS_INVALID_ARGUMENT, want);
  const char* names[1] = {"a"};
  tprt_tensor_t null_data = tprt_tensor_make(NULL, TPRT_DTYPE_F32, 1, dims);
  snprintf(want, sizeof want, "%s: tensor 'a' has NULL data", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_write(path, 1, names, &null_data, NULL), TPRT_STATUS_INVALID_ARGUMENT, want);
  tprt_tensor_t negative = tprt_tensor_make(data, TPRT_DTYPE_F32, 1, bad_dims);
  snprintf(want, sizeof want, "%s: tensor 'a' has negative dimension 0 = -4", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_write(path, 1, names, &negative, NULL), TPRT_STATUS_INVALID_ARGUMENT, want);
  tprt_tensor_t bad_dtype = tprt_tensor_make(data, 99, 1, dims);
  snprintf(want, sizeof want, "%s: tensor 'a' has invalid dtype code 99", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_write(path, 1, names, &bad_dtype, NULL), TPRT_STATUS_INVALID_ARGUMENT, want);
  int64_t huge_dims[2] = {INT64_C(1) << 40, INT64_C(1) << 40};
  tprt_tensor_t huge = tprt_tensor_make(data, TPRT_DTYPE_F32, 2, huge_dims);
  snprintf(want, sizeof want, "%s: tensor 'a' shape [1099511627776,1099511627776] has too many elements", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_write(path, 1, names, &huge, NULL), TPRT_STATUS_INVALID_ARGUMENT, want);
  const char* bad_name[1] = {"caf\xe9"};
  snprintf(want, sizeof want, "%s: tensor 0's name is not valid UTF-8", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_write(path, 1, bad_name, t, NULL), TPRT_STATUS_INVALID_ARGUMENT, want);
  const char* dup_meta[] = {"k", "1", "k", "2", NULL};
  snprintf(want, sizeof want, "%s: duplicate metadata key 'k'", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_write(path, 1, names, t, dup_meta), TPRT_STATUS_INVALID_ARGUMENT, want);
  const char* no_value[] = {"k", NULL};
  snprintf(want, sizeof want, "%s: metadata key 'k' has no value", path);
  TPRT_EXPECT_STATUS(tprt_safetensors_write(path, 1, names, t, no_value), TPRT_STATUS_INVALID_ARGUMENT, want);
  TPRT_EXPECT(!tprt__exists(path));
  tprt__tmpdir_remove(&dir);
}

TPRT_TEST(safetensors_writer_io_errors_name_the_file_and_leave_no_temporary) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512], tmp[600], want[2048];
  int32_t v = 1;
  tprt_tensor_t t = tprt_tensor_make(&v, TPRT_DTYPE_I32, 0, NULL);
  const char* names[1] = {"v"};

  tprt__join(&dir, "no/such/dir.safetensors", path, sizeof path);
  snprintf(want, sizeof want, "%s: cannot create %s.tmp: No such file or directory", path, path);
  TPRT_EXPECT_STATUS(tprt_safetensors_write(path, 1, names, &t, NULL), TPRT_STATUS_NOT_FOUND, want);

  // Renaming a file over a directory fails after all bytes went to the temporary file.
  tprt__join(&dir, "taken.safetensors", path, sizeof path);
  TPRT_EXPECT(mkdir(path, 0755) == 0);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  snprintf(want, sizeof want, "%s: cannot rename the temporary file over it (%s): Is a directory", path, tmp);
  TPRT_EXPECT_STATUS(tprt_safetensors_write(path, 1, names, &t, NULL), TPRT_STATUS_FAILED_PRECONDITION, want);
  TPRT_EXPECT(!tprt__exists(tmp));
  tprt__tmpdir_remove(&dir);
}

/// The writer renames a new file into place, so a reader that has the old one open keeps it.
TPRT_TEST(safetensors_writer_replaces_files_atomically) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512];
  tprt__join(&dir, "ckpt.safetensors", path, sizeof path);
  int32_t v1 = 1, v2 = 2, got = 0;
  tprt_tensor_t t1 = tprt_tensor_make(&v1, TPRT_DTYPE_I32, 0, NULL),
                t2 = tprt_tensor_make(&v2, TPRT_DTYPE_I32, 0, NULL);
  tprt_tensor_t out = tprt_tensor_make(&got, TPRT_DTYPE_I32, 0, NULL);
  const char* names[2] = {"v", "v"};
  TPRT_EXPECT_OK(tprt_safetensors_write(path, 1, names, &t1, NULL));
  tprt_safetensors_t* old_file = NULL;
  TPRT_EXPECT_OK(tprt_safetensors_open(path, tprt_allocator_system(), &old_file));

  // A failed write leaves the old file in place.
  tprt_tensor_t both[2] = {t2, t2};
  TPRT_EXPECT_STATUS(tprt_safetensors_write(path, 2, names, both, NULL), TPRT_STATUS_INVALID_ARGUMENT, "duplicate");
  TPRT_EXPECT_OK(tprt_safetensors_write(path, 1, names, &t2, NULL));

  tprt_safetensors_t* new_file = NULL;
  TPRT_EXPECT_OK(tprt_safetensors_open(path, tprt_allocator_system(), &new_file));
  if (old_file && new_file) {
    TPRT_EXPECT_OK(tprt_safetensors_read(old_file, "v", &out));
    TPRT_EXPECT_EQ_I64(got, 1);
    TPRT_EXPECT_OK(tprt_safetensors_read(new_file, "v", &out));
    TPRT_EXPECT_EQ_I64(got, 2);
  }
  tprt_safetensors_close(old_file);
  tprt_safetensors_close(new_file);
  tprt__tmpdir_remove(&dir);
}
