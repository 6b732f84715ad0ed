// Unit tests of runtime/tprt_safetensors, reading and writing: the upstream byte format (a
// hand-written golden file) and round trips of every dtype and rank. Slices are in
// test_safetensors_slices.c, read, malformed-file and writer errors in test_safetensors_errors.c;
// the helpers in test_safetensors_util.h.
// Files are written to a fresh directory under $TMPDIR (or /tmp) and removed at the end of each test.
#define _POSIX_C_SOURCE 200809L

#include "test_safetensors_util.h"

//===----------------------------------------------------------------------===//
// The upstream format
//===----------------------------------------------------------------------===//

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
