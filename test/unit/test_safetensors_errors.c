// Unit tests of runtime/tprt_safetensors, errors: one exact message per read error and per
// malformed file, writer argument and I/O errors, and atomic replacement of written files (the
// helpers are in test_safetensors_util.h).
// Files are written to a fresh directory under $TMPDIR (or /tmp) and removed at the end of each test.
#define _POSIX_C_SOURCE 200809L

#include "test_safetensors_util.h"

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
