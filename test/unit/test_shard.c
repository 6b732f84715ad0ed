// Unit tests of runtime/tprt_shard: local dims, extract and insert against a per-element
// reference of the mapping in tprt_shard.h for every dtype (f4E2M1FN nibbles included),
// hand-checked pieces (Megatron stride 2, expert weights, two-axis dims), name parsing, and every
// validation error with its exact message.
#include <stdlib.h>
#include <string.h>

#include "tprt_shard.h"
#include "tprt_test.h"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

// A world over |num_axes| axes "name=size"; the caller destroys it.
static tprt_world_t* test_world(int num_axes, const char* const* names, const int* sizes) {
  tprt_world_options_t options = {.num_axes = num_axes};
  for (int a = 0; a < num_axes; ++a) options.axes[a] = (tprt_mesh_axis_t){names[a], sizes[a]};
  tprt_world_t* world = NULL;
  TPRT_EXPECT_OK(tprt_world_create(&options, tprt_allocator_system(), &world));
  return world;
}

static tprt_world_t* test_world_tp(int tp) { return test_world(1, (const char*[]){"tp"}, (int[]){tp}); }
static tprt_world_t* test_world_dp_tp(void) { return test_world(2, (const char*[]){"dp", "tp"}, (int[]){2, 4}); }
static tprt_world_t* test_world_ep_tp(void) { return test_world(2, (const char*[]){"ep", "tp"}, (int[]){2, 2}); }

// A shard from names; blocks NULL means all 1. Names are resolved by the code under test, which
// the parsing tests check separately.
static tprt_shard_t test_shard(const tprt_world_t* world, int rank, const int64_t* logical, const char* const* axes,
                               const int64_t* blocks) {
  tprt_shard_t shard;
  memset(&shard, 0, sizeof shard);
  TPRT_EXPECT_OK(tprt_shard_from_names(rank, logical, axes, blocks, world, &shard));
  return shard;
}

// Reads element |i| of a packed buffer of |bits|-bit elements.
static uint64_t test_get(const uint8_t* data, int bits, int64_t i) {
  if (bits == 4) return (data[i / 2] >> (4 * (i % 2))) & 0xFu;
  uint64_t v = 0;
  memcpy(&v, data + i * (bits / 8), (size_t)bits / 8);
  return v;
}
// The logical element that local element |i| of world rank |r| holds, computed one element at a
// time from the formula in tprt_shard.h (independent of the library's merged plan).
static int64_t test_logical_index(const tprt_shard_t* s, const tprt_world_t* world, int r, const int64_t* local,
                                  int64_t i) {
  int coord[TPRT_MAX_MESH_AXES];
  for (int a = tprt_world_num_axes(world) - 1, rest = r; a >= 0; --a) {
    coord[a] = rest % tprt_world_axis_size(world, a);
    rest /= tprt_world_axis_size(world, a);
  }
  int64_t index = 0, pitch = 1;
  for (int d = s->rank - 1; d >= 0; pitch *= s->logical[d], --d) {
    int64_t li = i % local[d];
    i /= local[d];
    int64_t c = 0, n = 1;
    for (int k = 0; k < s->num_axes[d]; ++k) {
      c = c * tprt_world_axis_size(world, s->axes[d][k]) + coord[s->axes[d][k]];
      n *= tprt_world_axis_size(world, s->axes[d][k]);
    }
    int64_t piece = s->logical[d] / (s->blocks[d] * n);
    index += ((li / piece) * (s->logical[d] / s->blocks[d]) + c * piece + li % piece) * pitch;
  }
  return index;
}

// For every rank: extract must match the per-element reference, and inserting every rank's
// piece into the bitwise complement of the original must reassemble the original exactly (an
// element that no rank writes keeps its complemented bits and fails the comparison).
static void test_round_trip(const tprt_world_t* world, const tprt_shard_t* shard, int dtype) {
  int bits = tprt_dtype_bits(dtype);
  int64_t local_dims[TPRT_MAX_RANK];
  TPRT_EXPECT_OK(tprt_shard_local_dims(shard, world, local_dims));
  tprt_tensor_t full = tprt_tensor_make(NULL, dtype, shard->rank, shard->logical);
  tprt_tensor_t local = tprt_tensor_make(NULL, dtype, shard->rank, local_dims);
  size_t full_bytes = tprt_tensor_bytes(&full), local_bytes = tprt_tensor_bytes(&local);
  uint8_t* original = malloc(full_bytes + 1);
  uint8_t* rebuilt = malloc(full_bytes + 1);
  uint8_t* piece = malloc(local_bytes + 1);
  uint32_t seed = 12345u + (uint32_t)dtype;
  for (size_t b = 0; b < full_bytes; ++b) {
    seed = seed * 1664525u + 1013904223u;
    original[b] = (uint8_t)(seed >> 24);
    rebuilt[b] = (uint8_t)~original[b];
  }
  full.data = original;
  tprt_tensor_t out = full;
  out.data = rebuilt;
  local.data = piece;
  int64_t local_numel = tprt_tensor_numel(&local);
  for (int r = 0; r < tprt_world_size(world); ++r) {
    memset(piece, 0xFF, local_bytes + 1);
    TPRT_EXPECT_OK(tprt_shard_extract(shard, world, r, &full, &local));
    int mismatches = 0;
    for (int64_t i = 0; i < local_numel; ++i) {
      int64_t li = test_logical_index(shard, world, r, local_dims, i);
      if (test_get(piece, bits, i) != test_get(original, bits, li) && mismatches++ == 0)
        TPRT__FAIL("%s rank %d: local element %" PRId64 " is 0x%" PRIx64 ", logical element %" PRId64 " is 0x%" PRIx64,
                   tprt_dtype_name(dtype), r, i, test_get(piece, bits, i), li, test_get(original, bits, li));
    }
    if (bits == 4 && local_numel % 2 == 1) TPRT_EXPECT_EQ_BITS(piece[local_numel / 2] >> 4, 0);
    TPRT_EXPECT_EQ_BITS(piece[local_bytes], 0xFF);  // nothing written past the end
    TPRT_EXPECT_OK(tprt_shard_insert(shard, world, r, &local, &out));
  }
  int64_t full_numel = tprt_tensor_numel(&full);
  int64_t first_bad = -1;
  for (int64_t i = 0; i < full_numel && first_bad < 0; ++i)
    if (test_get(rebuilt, bits, i) != test_get(original, bits, i)) first_bad = i;
  if (first_bad >= 0)
    TPRT__FAIL("%s: reassembled element %" PRId64 " is 0x%" PRIx64 ", expected 0x%" PRIx64, tprt_dtype_name(dtype),
               first_bad, test_get(rebuilt, bits, first_bad), test_get(original, bits, first_bad));
  free(original);
  free(rebuilt);
  free(piece);
}

static void test_round_trip_dtypes(const tprt_world_t* world, const tprt_shard_t* shard, const int* dtypes, int n) {
  for (int k = 0; k < n; ++k) test_round_trip(world, shard, dtypes[k]);
}

static const int kAllDtypes[] = {TPRT_DTYPE_BF16,     TPRT_DTYPE_F16,    TPRT_DTYPE_F32,
                                 TPRT_DTYPE_F8E4M3FN, TPRT_DTYPE_F8E5M2, TPRT_DTYPE_F8E8M0FNU,
                                 TPRT_DTYPE_F4E2M1FN, TPRT_DTYPE_I32,    TPRT_DTYPE_I64};
#define TEST_ALL_DTYPES kAllDtypes, (int)(sizeof kAllDtypes / sizeof kAllDtypes[0])

// Expects an INVALID_ARGUMENT status with exactly |text| as its message; frees it.
#define TEST_EXPECT_INVALID(expr, text)                                            \
  do {                                                                             \
    tprt_status_t test__s = (expr);                                                \
    if (!test__s) {                                                                \
      TPRT__FAIL("%s succeeded; expected \"%s\"", #expr, (text));                  \
    } else {                                                                       \
      TPRT_EXPECT_EQ_I64(tprt_status_code(test__s), TPRT_STATUS_INVALID_ARGUMENT); \
      TPRT_EXPECT_STREQ(tprt_status_message(test__s), (text));                     \
      tprt_status_free(test__s);                                                   \
    }                                                                              \
  } while (0)

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TPRT_TEST(shard_round_trip_tp4) {
  tprt_world_t* world = test_world_tp(4);
  tprt_shard_t rows = test_shard(world, 2, (int64_t[]){8, 12}, (const char*[]){"tp", ""}, NULL);
  test_round_trip_dtypes(world, &rows, TEST_ALL_DTYPES);
  tprt_shard_t cols = test_shard(world, 2, (int64_t[]){6, 8}, (const char*[]){NULL, "tp"}, NULL);
  test_round_trip_dtypes(world, &cols, TEST_ALL_DTYPES);
  // Blocked middle dim, and a blocked last dim whose pieces are one element (strided runs).
  tprt_shard_t mid = test_shard(world, 3, (int64_t[]){3, 16, 5}, (const char*[]){"", "tp", ""}, (int64_t[]){1, 2, 1});
  test_round_trip_dtypes(world, &mid, TEST_ALL_DTYPES);
  tprt_shard_t last = test_shard(world, 2, (int64_t[]){3, 8}, (const char*[]){"", "tp"}, (int64_t[]){1, 2});
  int whole_bytes[] = {TPRT_DTYPE_BF16, TPRT_DTYPE_F32, TPRT_DTYPE_I64, TPRT_DTYPE_F8E4M3FN};
  test_round_trip_dtypes(world, &last, whole_bytes, 4);
  tprt_world_destroy(world);
}

TPRT_TEST(shard_round_trip_dp2_tp4) {
  tprt_world_t* world = test_world_dp_tp();
  tprt_shard_t both = test_shard(world, 2, (int64_t[]){16, 6}, (const char*[]){"dp,tp", ""}, NULL);
  test_round_trip_dtypes(world, &both, TEST_ALL_DTYPES);
  tprt_shard_t reversed = test_shard(world, 2, (int64_t[]){8, 3}, (const char*[]){"tp,dp", ""}, NULL);
  test_round_trip_dtypes(world, &reversed, TEST_ALL_DTYPES);
  tprt_shard_t two_dims = test_shard(world, 2, (int64_t[]){4, 16}, (const char*[]){"dp", "tp"}, (int64_t[]){1, 2});
  test_round_trip_dtypes(world, &two_dims, TEST_ALL_DTYPES);
  // dp replicates: ranks 0 and 4 hold the same piece and both write it.
  tprt_shard_t tp_only = test_shard(world, 3, (int64_t[]){2, 4, 8}, (const char*[]){"", "", "tp"}, NULL);
  test_round_trip_dtypes(world, &tp_only, TEST_ALL_DTYPES);
  // f4 with a replicated odd last dim: runs of 15 elements start on odd nibbles.
  tprt_shard_t odd = test_shard(world, 2, (int64_t[]){6, 5}, (const char*[]){"dp", ""}, NULL);
  test_round_trip_dtypes(world, &odd, TEST_ALL_DTYPES);
  // f4 with a blocked last dim of even pieces.
  tprt_shard_t f4_blocked = test_shard(world, 2, (int64_t[]){2, 16}, (const char*[]){"dp", "tp"}, (int64_t[]){1, 2});
  test_round_trip(world, &f4_blocked, TPRT_DTYPE_F4E2M1FN);
  tprt_world_destroy(world);
}

TPRT_TEST(shard_round_trip_ep2_tp2) {
  tprt_world_t* world = test_world_ep_tp();
  tprt_shard_t expert =
      test_shard(world, 3, (int64_t[]){4, 8, 6}, (const char*[]){"ep", "tp", ""}, (int64_t[]){1, 2, 1});
  test_round_trip_dtypes(world, &expert, TEST_ALL_DTYPES);
  tprt_shard_t down = test_shard(world, 3, (int64_t[]){4, 6, 8}, (const char*[]){"ep", "", "tp"}, NULL);
  test_round_trip_dtypes(world, &down, TEST_ALL_DTYPES);
  tprt_world_destroy(world);
}

TPRT_TEST(shard_replicated_scalar_and_empty) {
  tprt_world_t* world = test_world_dp_tp();
  tprt_shard_t replicated = test_shard(world, 2, (int64_t[]){3, 5}, NULL, NULL);
  int64_t dims[TPRT_MAX_RANK] = {0};
  TPRT_EXPECT_OK(tprt_shard_local_dims(&replicated, world, dims));
  TPRT_EXPECT_EQ_I64(dims[0], 3);
  TPRT_EXPECT_EQ_I64(dims[1], 5);
  test_round_trip_dtypes(world, &replicated, TEST_ALL_DTYPES);
  tprt_shard_t scalar = test_shard(world, 0, NULL, NULL, NULL);
  test_round_trip_dtypes(world, &scalar, TEST_ALL_DTYPES);
  // A zero-sized dim: nothing is copied and NULL data is fine.
  tprt_shard_t empty = test_shard(world, 2, (int64_t[]){0, 4}, (const char*[]){"tp", ""}, NULL);
  TPRT_EXPECT_OK(tprt_shard_local_dims(&empty, world, dims));
  TPRT_EXPECT_EQ_I64(dims[0], 0);
  tprt_tensor_t full = tprt_tensor_make(NULL, TPRT_DTYPE_F32, 2, (int64_t[]){0, 4});
  tprt_tensor_t local = full;
  TPRT_EXPECT_OK(tprt_shard_extract(&empty, world, 5, &full, &local));
  TPRT_EXPECT_OK(tprt_shard_insert(&empty, world, 5, &local, &full));
  tprt_world_destroy(world);
}

//===----------------------------------------------------------------------===//
// Hand-checked pieces
//===----------------------------------------------------------------------===//

/// Megatron stride 2: a fused [gate; up] weight of 8 rows over tp=2; rank r holds gate rows
/// 2r, 2r+1 and up rows 4+2r, 4+2r+1.
TPRT_TEST(shard_stride2_rows) {
  tprt_world_t* world = test_world_tp(2);
  tprt_shard_t shard = test_shard(world, 2, (int64_t[]){8, 2}, (const char*[]){"tp", ""}, (int64_t[]){2, 1});
  float full[8][2], local[4][2];
  for (int i = 0; i < 8; ++i) full[i][0] = (float)i, full[i][1] = (float)i + 0.5f;
  tprt_tensor_t tf = tprt_tensor_make(full, TPRT_DTYPE_F32, 2, (int64_t[]){8, 2});
  tprt_tensor_t tl = tprt_tensor_make(local, TPRT_DTYPE_F32, 2, (int64_t[]){4, 2});
  const int rows[2][4] = {{0, 1, 4, 5}, {2, 3, 6, 7}};
  for (int r = 0; r < 2; ++r) {
    TPRT_EXPECT_OK(tprt_shard_extract(&shard, world, r, &tf, &tl));
    for (int i = 0; i < 4; ++i) {
      TPRT_EXPECT_EQ_I64(local[i][0], rows[r][i]);
      TPRT_EXPECT_NEAR(local[i][1], rows[r][i] + 0.5, 0, 0);
    }
  }
  tprt_world_destroy(world);
}

/// An expert FC1 weight [E=4, N=8, K=6]: experts over ep, [gate; up] rows over tp with stride 2.
TPRT_TEST(shard_expert_weight) {
  tprt_world_t* world = test_world_ep_tp();
  tprt_shard_t shard =
      test_shard(world, 3, (int64_t[]){4, 8, 6}, (const char*[]){"ep", "tp", ""}, (int64_t[]){1, 2, 1});
  int32_t full[4][8][6], local[2][4][6];
  for (int e = 0; e < 4; ++e)
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 6; ++k) full[e][n][k] = e * 100 + n * 10 + k;
  tprt_tensor_t tf = tprt_tensor_make(full, TPRT_DTYPE_I32, 3, (int64_t[]){4, 8, 6});
  tprt_tensor_t tl = tprt_tensor_make(local, TPRT_DTYPE_I32, 3, (int64_t[]){2, 4, 6});
  const int rows[2][4] = {{0, 1, 4, 5}, {2, 3, 6, 7}};  // by tp coordinate
  for (int r = 0; r < 4; ++r) {
    int ep = r / 2, tp = r % 2;
    TPRT_EXPECT_OK(tprt_shard_extract(&shard, world, r, &tf, &tl));
    int bad = 0;
    for (int e = 0; e < 2; ++e)
      for (int n = 0; n < 4; ++n)
        for (int k = 0; k < 6; ++k) bad += local[e][n][k] != (2 * ep + e) * 100 + rows[tp][n] * 10 + k;
    TPRT_EXPECT_EQ_I64(bad, 0);
    TPRT_EXPECT_EQ_I64(local[1][2][3], (2 * ep + 1) * 100 + rows[tp][2] * 10 + 3);
  }
  tprt_world_destroy(world);
}

/// A dim over two axes: [dp,tp] makes dp major (c = dp * 4 + tp), [tp,dp] makes tp major
/// (c = tp * 2 + dp).
TPRT_TEST(shard_two_axes_major_first) {
  tprt_world_t* world = test_world_dp_tp();
  int32_t full[16], local[2];
  for (int i = 0; i < 16; ++i) full[i] = i;
  tprt_tensor_t tf = tprt_tensor_make(full, TPRT_DTYPE_I32, 1, (int64_t[]){16});
  tprt_tensor_t tl = tprt_tensor_make(local, TPRT_DTYPE_I32, 1, (int64_t[]){2});
  tprt_shard_t dp_tp = test_shard(world, 1, (int64_t[]){16}, (const char*[]){"dp,tp"}, NULL);
  tprt_shard_t tp_dp = test_shard(world, 1, (int64_t[]){16}, (const char*[]){"tp,dp"}, NULL);
  for (int r = 0; r < 8; ++r) {
    int dp = r / 4, tp = r % 4;
    TPRT_EXPECT_OK(tprt_shard_extract(&dp_tp, world, r, &tf, &tl));
    TPRT_EXPECT_EQ_I64(local[0], 2 * (dp * 4 + tp));
    TPRT_EXPECT_EQ_I64(local[1], 2 * (dp * 4 + tp) + 1);
    TPRT_EXPECT_OK(tprt_shard_extract(&tp_dp, world, r, &tf, &tl));
    TPRT_EXPECT_EQ_I64(local[0], 2 * (tp * 2 + dp));
    TPRT_EXPECT_EQ_I64(local[1], 2 * (tp * 2 + dp) + 1);
  }
  // Rank 4 is (dp 1, tp 0): the 5th pair under [dp,tp], the 2nd under [tp,dp].
  TPRT_EXPECT_OK(tprt_shard_extract(&tp_dp, world, 4, &tf, &tl));
  TPRT_EXPECT_EQ_I64(local[0], 2);
  tprt_world_destroy(world);
}

/// f4E2M1FN nibbles: element i holds i % 16. Row 1 of [4,3] over tp=4 is elements 3, 4, 5,
/// starting on a high nibble; the piece's unused high nibble is cleared, and insert touches only
/// its own nibbles.
TPRT_TEST(shard_f4_nibbles) {
  tprt_world_t* world = test_world_tp(4);
  tprt_shard_t shard = test_shard(world, 2, (int64_t[]){4, 3}, (const char*[]){"tp", ""}, NULL);
  uint8_t full[6], local[2] = {0xFF, 0xFF};
  for (int b = 0; b < 6; ++b) full[b] = (uint8_t)((2 * b) | ((2 * b + 1) << 4));
  tprt_tensor_t tf = tprt_tensor_make(full, TPRT_DTYPE_F4E2M1FN, 2, (int64_t[]){4, 3});
  tprt_tensor_t tl = tprt_tensor_make(local, TPRT_DTYPE_F4E2M1FN, 2, (int64_t[]){1, 3});
  TPRT_EXPECT_OK(tprt_shard_extract(&shard, world, 1, &tf, &tl));
  TPRT_EXPECT_EQ_BITS(local[0], 0x43);
  TPRT_EXPECT_EQ_BITS(local[1], 0x05);
  uint8_t out[6] = {0};
  tprt_tensor_t to = tprt_tensor_make(out, TPRT_DTYPE_F4E2M1FN, 2, (int64_t[]){4, 3});
  TPRT_EXPECT_OK(tprt_shard_insert(&shard, world, 1, &tl, &to));
  const uint8_t want[6] = {0x00, 0x30, 0x54, 0x00, 0x00, 0x00};
  for (int b = 0; b < 6; ++b) TPRT_EXPECT_EQ_BITS(out[b], want[b]);
  // A sharded last dim with even pieces: [2,8] over tp=2, rank 1 holds columns 4..7 of each row.
  tprt_world_t* tp2 = test_world_tp(2);
  tprt_shard_t cols = test_shard(tp2, 2, (int64_t[]){2, 8}, (const char*[]){"", "tp"}, NULL);
  uint8_t full2[8], local2[4];
  for (int b = 0; b < 8; ++b) full2[b] = (uint8_t)(0x10 * b + b);
  tf = tprt_tensor_make(full2, TPRT_DTYPE_F4E2M1FN, 2, (int64_t[]){2, 8});
  tl = tprt_tensor_make(local2, TPRT_DTYPE_F4E2M1FN, 2, (int64_t[]){2, 4});
  TPRT_EXPECT_OK(tprt_shard_extract(&cols, tp2, 1, &tf, &tl));
  const uint8_t want2[4] = {0x22, 0x33, 0x66, 0x77};
  for (int b = 0; b < 4; ++b) TPRT_EXPECT_EQ_BITS(local2[b], want2[b]);
  tprt_world_destroy(tp2);
  tprt_world_destroy(world);
}

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

TPRT_TEST(shard_from_names_resolves_axes) {
  tprt_world_t* world = test_world_dp_tp();
  tprt_shard_t s = test_shard(world, 3, (int64_t[]){16, 4, 8}, (const char*[]){" tp , dp", "", NULL}, NULL);
  TPRT_EXPECT_EQ_I64(s.rank, 3);
  TPRT_EXPECT_EQ_I64(s.num_axes[0], 2);
  TPRT_EXPECT_EQ_I64(s.axes[0][0], 1);
  TPRT_EXPECT_EQ_I64(s.axes[0][1], 0);
  TPRT_EXPECT_EQ_I64(s.num_axes[1], 0);
  TPRT_EXPECT_EQ_I64(s.num_axes[2], 0);
  TPRT_EXPECT_EQ_I64(s.blocks[0], 1);
  TPRT_EXPECT_EQ_I64(s.logical[2], 8);
  int64_t dims[TPRT_MAX_RANK];
  TPRT_EXPECT_OK(tprt_shard_local_dims(&s, world, dims));
  TPRT_EXPECT_EQ_I64(dims[0], 2);
  TPRT_EXPECT_EQ_I64(dims[1], 4);
  TPRT_EXPECT_EQ_I64(dims[2], 8);
  tprt_shard_t untouched = {.rank = 7};
  TEST_EXPECT_INVALID(tprt_shard_from_names(1, (int64_t[]){8}, (const char*[]){"xp"}, NULL, world, &untouched),
                      "shard dim 0: axis list 'xp' names axis 'xp', but the mesh's axes are {dp,tp}");
  TPRT_EXPECT_EQ_I64(untouched.rank, 7);
  TEST_EXPECT_INVALID(tprt_shard_from_names(2, (int64_t[]){8, 8}, (const char*[]){"", "dp,,tp"}, NULL, world, &s),
                      "shard dim 1: axis list 'dp,,tp' has an empty name");
  TEST_EXPECT_INVALID(tprt_shard_from_names(1, (int64_t[]){8}, (const char*[]){"tp,"}, NULL, world, &s),
                      "shard dim 0: axis list 'tp,' has an empty name");
  TEST_EXPECT_INVALID(tprt_shard_from_names(1, (int64_t[]){64}, (const char*[]){"dp,tp,dp,tp,dp"}, NULL, world, &s),
                      "shard dim 0: axis list 'dp,tp,dp,tp,dp' names more than 4 mesh axes");
  TEST_EXPECT_INVALID(
      tprt_shard_from_names(1, (int64_t[]){8}, (const char*[]){"an_axis_name_longer_than_31_bytes"}, NULL, world, &s),
      "shard dim 0: axis list 'an_axis_name_longer_than_31_bytes' names axis 'an_axis_name_longer_than_31_bytes', "
      "but the mesh's axes are {dp,tp}");
  TEST_EXPECT_INVALID(tprt_shard_from_names(1, (int64_t[]){16}, (const char*[]){"tp,tp"}, NULL, world, &s),
                      "shard dim 0 names mesh axis 'tp' twice");
  TEST_EXPECT_INVALID(tprt_shard_from_names(9, NULL, NULL, NULL, world, &s), "shard has rank 9; expected 0 to 8");
  TEST_EXPECT_INVALID(tprt_shard_from_names(2, NULL, NULL, NULL, world, &s),
                      "shard has rank 2, but its logical shape is NULL");
  TEST_EXPECT_INVALID(tprt_shard_from_names(1, (int64_t[]){8}, NULL, NULL, NULL, &s),
                      "shard_from_names: world or out_shard is NULL");
  tprt_world_destroy(world);
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

// A valid [16,8] shard on dp=2 x tp=4: dim 0 over tp, dim 1 replicated.
static tprt_shard_t test_base_shard(void) {
  tprt_shard_t s;
  memset(&s, 0, sizeof s);
  s.rank = 2;
  s.logical[0] = 16, s.logical[1] = 8;
  s.num_axes[0] = 1, s.axes[0][0] = 1;
  s.blocks[0] = 1, s.blocks[1] = 1;
  return s;
}

TPRT_TEST(shard_local_dims_errors) {
  tprt_world_t* world = test_world_dp_tp();
  int64_t dims[TPRT_MAX_RANK];
  tprt_shard_t s = test_base_shard();
  TPRT_EXPECT_OK(tprt_shard_local_dims(&s, world, dims));
  TPRT_EXPECT_EQ_I64(dims[0], 4);
  TPRT_EXPECT_EQ_I64(dims[1], 8);
  TEST_EXPECT_INVALID(tprt_shard_local_dims(NULL, world, dims), "shard, world or out_dims is NULL");
  s.rank = -1;
  TEST_EXPECT_INVALID(tprt_shard_local_dims(&s, world, dims), "shard has rank -1; expected 0 to 8");
  s = test_base_shard();
  s.logical[1] = -3;
  TEST_EXPECT_INVALID(tprt_shard_local_dims(&s, world, dims), "shard dim 1 has logical size -3; expected >= 0");
  s = test_base_shard();
  s.num_axes[1] = 5;
  TEST_EXPECT_INVALID(tprt_shard_local_dims(&s, world, dims), "shard dim 1 has 5 mesh axes; expected 0 to 4");
  s = test_base_shard();
  s.axes[0][0] = 2;
  TEST_EXPECT_INVALID(tprt_shard_local_dims(&s, world, dims),
                      "shard dim 0 names mesh axis 2, but the mesh's axes are {dp,tp}");
  s.axes[0][0] = -1;
  TEST_EXPECT_INVALID(tprt_shard_local_dims(&s, world, dims),
                      "shard dim 0 names mesh axis -1, but the mesh's axes are {dp,tp}");
  s = test_base_shard();
  s.num_axes[0] = 2, s.axes[0][1] = 1;
  TEST_EXPECT_INVALID(tprt_shard_local_dims(&s, world, dims), "shard dim 0 names mesh axis 'tp' twice");
  s = test_base_shard();
  s.num_axes[1] = 2, s.axes[1][0] = 0, s.axes[1][1] = 1;
  TEST_EXPECT_INVALID(tprt_shard_local_dims(&s, world, dims), "shard dims 0 and 1 both use mesh axis 'tp'");
  s = test_base_shard();
  s.blocks[0] = 0;
  TEST_EXPECT_INVALID(tprt_shard_local_dims(&s, world, dims), "shard dim 0 has blocks 0; expected >= 1");
  s = test_base_shard();
  s.blocks[1] = 2;
  TEST_EXPECT_INVALID(tprt_shard_local_dims(&s, world, dims),
                      "shard dim 1 is replicated but has blocks 2; only a sharded dim can be blocked");
  s = test_base_shard();
  s.logical[0] = 12, s.blocks[0] = 2;
  TEST_EXPECT_INVALID(tprt_shard_local_dims(&s, world, dims),
                      "shard dim 0 has logical size 12, not divisible by blocks 2 x 4 shards over {tp}");
  s = test_base_shard();
  s.num_axes[1] = 2, s.axes[1][0] = 0, s.axes[1][1] = 1, s.num_axes[0] = 0, s.logical[1] = 12;
  TEST_EXPECT_INVALID(tprt_shard_local_dims(&s, world, dims),
                      "shard dim 1 has logical size 12, not divisible by blocks 1 x 8 shards over {dp,tp}");
  // A huge block count cannot overflow the divisibility check.
  s = test_base_shard();
  s.blocks[0] = INT64_MAX;
  TEST_EXPECT_INVALID(tprt_shard_local_dims(&s, world, dims),
                      "shard dim 0 has logical size 16, not divisible by blocks 9223372036854775807 x 4 shards "
                      "over {tp}");
  // Failures leave out_dims alone.
  dims[0] = 77;
  s.blocks[0] = 3;
  tprt_status_ignore(tprt_shard_local_dims(&s, world, dims));
  TPRT_EXPECT_EQ_I64(dims[0], 77);
  tprt_world_destroy(world);
}

TPRT_TEST(shard_copy_errors) {
  tprt_world_t* world = test_world_dp_tp();
  tprt_shard_t s = test_base_shard();
  float full[16 * 8] = {0}, local[4 * 8] = {0};
  tprt_tensor_t tf = tprt_tensor_make(full, TPRT_DTYPE_F32, 2, (int64_t[]){16, 8});
  tprt_tensor_t tl = tprt_tensor_make(local, TPRT_DTYPE_F32, 2, (int64_t[]){4, 8});
  TPRT_EXPECT_OK(tprt_shard_extract(&s, world, 7, &tf, &tl));
  TEST_EXPECT_INVALID(tprt_shard_extract(&s, world, 0, NULL, &tl),
                      "shard_extract: shard, world, logical or local is NULL");
  TEST_EXPECT_INVALID(tprt_shard_extract(&s, world, 8, &tf, &tl),
                      "shard_extract: rank index 8 is outside the world's ranks 0 to 7");
  TEST_EXPECT_INVALID(tprt_shard_insert(&s, world, -1, &tl, &tf),
                      "shard_insert: rank index -1 is outside the world's ranks 0 to 7");
  s.blocks[1] = 2;
  TEST_EXPECT_INVALID(tprt_shard_insert(&s, world, 0, &tl, &tf),
                      "shard_insert: shard dim 1 is replicated but has blocks 2; only a sharded dim can be blocked");
  s = test_base_shard();
  tprt_tensor_t bad = tprt_tensor_make(full, TPRT_DTYPE_F32, 2, (int64_t[]){8, 16});
  TEST_EXPECT_INVALID(tprt_shard_extract(&s, world, 0, &bad, &tl),
                      "shard_extract: logical is f32[8,16]; expected f32[16,8], the shard's logical shape");
  bad = tprt_tensor_make(full, TPRT_DTYPE_F32, 1, (int64_t[]){128});
  TEST_EXPECT_INVALID(tprt_shard_insert(&s, world, 0, &tl, &bad),
                      "shard_insert: logical is f32[128]; expected f32[16,8], the shard's logical shape");
  bad = tprt_tensor_make(local, TPRT_DTYPE_F32, 2, (int64_t[]){2, 8});
  TEST_EXPECT_INVALID(tprt_shard_extract(&s, world, 5, &tf, &bad),
                      "shard_extract: local is f32[2,8]; expected f32[4,8], rank 5's piece of f32[16,8]");
  bad = tprt_tensor_make(local, TPRT_DTYPE_I32, 2, (int64_t[]){4, 8});
  TEST_EXPECT_INVALID(tprt_shard_insert(&s, world, 1, &bad, &tf),
                      "shard_insert: local is i32[4,8]; expected f32[4,8], rank 1's piece of f32[16,8]");
  bad = tprt_tensor_make(full, 42, 2, (int64_t[]){16, 8});
  TEST_EXPECT_INVALID(tprt_shard_extract(&s, world, 0, &bad, &tl), "shard_extract: logical has invalid dtype 42");
  bad = tprt_tensor_make(NULL, TPRT_DTYPE_F32, 2, (int64_t[]){16, 8});
  TEST_EXPECT_INVALID(tprt_shard_extract(&s, world, 0, &bad, &tl), "shard_extract: logical data is NULL");
  bad = tprt_tensor_make(NULL, TPRT_DTYPE_F32, 2, (int64_t[]){4, 8});
  TEST_EXPECT_INVALID(tprt_shard_insert(&s, world, 0, &bad, &tf), "shard_insert: local data is NULL");
  // f4: the sharded last dim's pieces must be even, blocked or not.
  tprt_world_t* tp2 = test_world_tp(2);
  tprt_shard_t f4 = test_shard(tp2, 2, (int64_t[]){2, 6}, (const char*[]){"", "tp"}, NULL);
  uint8_t f4_full[6] = {0}, f4_local[3] = {0};
  tf = tprt_tensor_make(f4_full, TPRT_DTYPE_F4E2M1FN, 2, (int64_t[]){2, 6});
  tl = tprt_tensor_make(f4_local, TPRT_DTYPE_F4E2M1FN, 2, (int64_t[]){2, 3});
  TEST_EXPECT_INVALID(tprt_shard_extract(&f4, tp2, 0, &tf, &tl),
                      "shard_extract: the last dim (1) of f4E2M1FN[2,6] is cut into pieces of 3 elements (blocks 1 x "
                      "2 shards over {tp}); f4E2M1FN packs two elements per byte, so pieces must be even");
  tprt_shard_t f4_blocked = test_shard(tp2, 2, (int64_t[]){1, 12}, (const char*[]){"", "tp"}, (int64_t[]){1, 2});
  tf = tprt_tensor_make(f4_full, TPRT_DTYPE_F4E2M1FN, 2, (int64_t[]){1, 12});
  tl = tprt_tensor_make(f4_local, TPRT_DTYPE_F4E2M1FN, 2, (int64_t[]){1, 6});
  TEST_EXPECT_INVALID(tprt_shard_insert(&f4_blocked, tp2, 1, &tl, &tf),
                      "shard_insert: the last dim (1) of f4E2M1FN[1,12] is cut into pieces of 3 elements (blocks 2 x "
                      "2 shards over {tp}); f4E2M1FN packs two elements per byte, so pieces must be even");
  // The same shard is fine for whole-byte dtypes.
  uint8_t bytes_full[12] = {0}, bytes_local[6] = {0};
  tf = tprt_tensor_make(bytes_full, TPRT_DTYPE_F8E4M3FN, 2, (int64_t[]){1, 12});
  tl = tprt_tensor_make(bytes_local, TPRT_DTYPE_F8E4M3FN, 2, (int64_t[]){1, 6});
  TPRT_EXPECT_OK(tprt_shard_insert(&f4_blocked, tp2, 1, &tl, &tf));
  tprt_world_destroy(tp2);
  tprt_world_destroy(world);
}
