// Unit tests of runtime/tprt_safetensors, slices: row, column, expert, strided, packed-F4,
// scalar and empty blocks read from one fixture file, and the messages of bad slice requests
// (the helpers are in test_safetensors_util.h).
// Files are written to a fresh directory under $TMPDIR (or /tmp) and removed at the end of each test.
#define _POSIX_C_SOURCE 200809L

#include "test_safetensors_util.h"

//===----------------------------------------------------------------------===//
// Slices
//===----------------------------------------------------------------------===//

// Reads element |i| of a packed buffer as an integer (all of a 1-8 byte element, or one nibble).
static uint64_t tprt__element(const uint8_t* base, int64_t i, int bits) {
  if (bits == 4) return (base[i / 2] >> (4 * (i % 2))) & 0xF;
  uint64_t v = 0;
  memcpy(&v, base + (size_t)i * (size_t)(bits / 8), (size_t)(bits / 8));
  return v;
}

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
