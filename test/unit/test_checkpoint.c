// Unit tests of runtime/tprt_checkpoint (index checkpoints: write + open round trips, the file
// split and names, atomic writes that leave nothing behind on failure, and one message per
// malformed index). The name rules are in test_name_rules.c.
// Files are written to a fresh directory under $TMPDIR (or /tmp) and removed at the end of each
// test (helpers in test_safetensors_util.h).
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <stdbool.h>
#include <stdlib.h>

#include "test_checkpoint_util.h"
#include "test_safetensors_util.h"
#include "tprt_checkpoint.h"

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

// The entries of |dir| (without "." and ".."), sorted, joined by ' ' into |buf|.
static const char* ck__listing(const tprt__tmpdir_t* dir, char* buf, size_t size) {
  char names[64][256];
  int n = 0;
  DIR* d = opendir(dir->path);
  if (d) {
    struct dirent* ent;
    while ((ent = readdir(d)) != NULL && n < 64) {
      if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) continue;
      snprintf(names[n++], sizeof names[0], "%s", ent->d_name);
    }
    closedir(d);
  }
  for (int i = 1; i < n; ++i)  // insertion sort
    for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; --j) {
      char t[256];
      memcpy(t, names[j], sizeof t);
      memcpy(names[j], names[j - 1], sizeof t);
      memcpy(names[j - 1], t, sizeof t);
    }
  buf[0] = '\0';
  size_t at = 0;
  for (int i = 0; i < n && at < size; ++i) at += (size_t)snprintf(buf + at, size - at, "%s%s", i ? " " : "", names[i]);
  return buf;
}


//===----------------------------------------------------------------------===//
// A minimal JSON checker (the index must be JSON that any reader parses, not only cJSON): it
// validates the grammar and records metadata.total_size and the weight_map's string entries.
//===----------------------------------------------------------------------===//

typedef struct {
  const char* p;
  bool has_total;
  double total_size;
  int num_entries;
  char keys[16][64];
  char values[16][128];
} ck__json_t;

static void ck__json_ws(ck__json_t* j) {
  while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r') ++j->p;
}

// A string; its raw contents (escapes kept) go to |out|.
static bool ck__json_string(ck__json_t* j, char* out, size_t cap) {
  if (*j->p != '"') return false;
  ++j->p;
  size_t n = 0;
  while (*j->p != '"') {
    unsigned char c = (unsigned char)*j->p;
    if (c == '\0' || c < 0x20) return false;
    if (c == '\\') {
      if (out && n + 1 < cap) out[n++] = '\\';
      ++j->p;
      if (*j->p == 'u') {
        for (int k = 1; k <= 4; ++k)
          if (!isxdigit((unsigned char)j->p[k])) return false;
      } else if (!strchr("\"\\/bfnrt", *j->p) || !*j->p) {
        return false;
      }
      c = (unsigned char)*j->p;
    }
    if (out && n + 1 < cap) out[n++] = (char)c;
    ++j->p;
  }
  ++j->p;
  if (out) out[n] = '\0';
  return true;
}

static bool ck__json_value(ck__json_t* j, const char* container, const char* key, int depth) {
  if (depth > 16) return false;
  ck__json_ws(j);
  char c = *j->p;
  if (c == '{') {
    ++j->p;
    ck__json_ws(j);
    if (*j->p == '}') return ++j->p, true;
    for (;;) {
      char member[128];
      ck__json_ws(j);
      if (!ck__json_string(j, member, sizeof member)) return false;
      ck__json_ws(j);
      if (*j->p++ != ':') return false;
      if (!ck__json_value(j, key ? key : "", member, depth + 1)) return false;
      ck__json_ws(j);
      if (*j->p == ',') {
        ++j->p;
        continue;
      }
      if (*j->p == '}') return ++j->p, true;
      return false;
    }
  }
  if (c == '[') {
    ++j->p;
    ck__json_ws(j);
    if (*j->p == ']') return ++j->p, true;
    for (;;) {
      if (!ck__json_value(j, NULL, NULL, depth + 1)) return false;
      ck__json_ws(j);
      if (*j->p == ',') {
        ++j->p;
        continue;
      }
      if (*j->p == ']') return ++j->p, true;
      return false;
    }
  }
  if (c == '"') {
    char value[128];
    if (!ck__json_string(j, value, sizeof value)) return false;
    if (container && key && strcmp(container, "weight_map") == 0 && j->num_entries < 16) {
      snprintf(j->keys[j->num_entries], sizeof j->keys[0], "%s", key);
      snprintf(j->values[j->num_entries], sizeof j->values[0], "%s", value);
      ++j->num_entries;
    }
    return true;
  }
  if (c == '-' || isdigit((unsigned char)c)) {
    const char* s = j->p;
    if (*s == '-') ++s;
    if (!isdigit((unsigned char)*s)) return false;
    if (*s == '0' && isdigit((unsigned char)s[1])) return false;  // no leading zeros
    while (isdigit((unsigned char)*s)) ++s;
    if (*s == '.') {
      ++s;
      if (!isdigit((unsigned char)*s)) return false;
      while (isdigit((unsigned char)*s)) ++s;
    }
    if (*s == 'e' || *s == 'E') {
      ++s;
      if (*s == '+' || *s == '-') ++s;
      if (!isdigit((unsigned char)*s)) return false;
      while (isdigit((unsigned char)*s)) ++s;
    }
    double v = strtod(j->p, NULL);
    if (container && key && strcmp(container, "metadata") == 0 && strcmp(key, "total_size") == 0)
      j->has_total = true, j->total_size = v;
    j->p = s;
    return true;
  }
  static const char* const kLiterals[] = {"true", "false", "null"};
  for (int k = 0; k < 3; ++k)
    if (strncmp(j->p, kLiterals[k], strlen(kLiterals[k])) == 0) {
      j->p += strlen(kLiterals[k]);
      return true;
    }
  return false;
}

// Parses |text| as one JSON value followed by nothing but blanks.
static bool ck__json_parse(const char* text, ck__json_t* j) {
  memset(j, 0, sizeof *j);
  j->p = text;
  if (!ck__json_value(j, NULL, NULL, 0)) return false;
  ck__json_ws(j);
  return *j->p == '\0';
}

TPRT_TEST(checkpoint_json_checker_checks) {  // the checker itself, so that its verdicts mean something
  ck__json_t j;
  TPRT_EXPECT(ck__json_parse("{\"metadata\": {\"total_size\": 94}, \"weight_map\": {\"a\": \"f\", \"b\": \"g\"}}", &j));
  TPRT_EXPECT(j.has_total && j.total_size == 94);
  TPRT_EXPECT_EQ_I64(j.num_entries, 2);
  TPRT_EXPECT(!ck__json_parse("{\"a\": 1,}", &j));
  TPRT_EXPECT(!ck__json_parse("{\"a\": 01}", &j));
  TPRT_EXPECT(!ck__json_parse("{\"a\": [1, 2]} x", &j));
  TPRT_EXPECT(!ck__json_parse("{\"a\" 1}", &j));
  TPRT_EXPECT(!ck__json_parse("{\"a\": \"x", &j));
  TPRT_EXPECT(ck__json_parse("[true, false, null, -1.5e3, \"\\u00e9\\n\"]", &j));
}

//===----------------------------------------------------------------------===//
// Checkpoints: writing and reading back
//===----------------------------------------------------------------------===//

enum { CK__N = 5 };

// Five tensors of different dtypes and shapes: 24 + 8 + 40 + 16 + 6 = 94 bytes of data.
typedef struct {
  uint16_t bf16[12];  // [3, 4]
  float f32[2];       // [2]
  int64_t i64[5];     // [5]
  int32_t i32[4];     // [2, 2]
  uint16_t f16[3];    // [3]
  const char* names[CK__N];
  tprt_tensor_t tensors[CK__N];
} ck__five_t;

static void ck__five_make(ck__five_t* f) {
  for (int i = 0; i < 12; ++i) f->bf16[i] = (uint16_t)(0x3F80 + 7 * i);
  f->f32[0] = -1.25f, f->f32[1] = 3.5e-3f;
  for (int i = 0; i < 5; ++i) f->i64[i] = (int64_t)0x0102030405060708LL * (i + 1) - 3;
  for (int i = 0; i < 4; ++i) f->i32[i] = -1000 * i + 17;
  f->f16[0] = 0x3C00, f->f16[1] = 0xC000, f->f16[2] = 0x7BFF;
  static const int64_t d_bf16[2] = {3, 4}, d_f32[1] = {2}, d_i64[1] = {5}, d_i32[2] = {2, 2}, d_f16[1] = {3};
  // Names not in sorted order, so that the index's order and the data order differ.
  f->names[0] = "model.embed.weight";
  f->names[1] = "model.norm.bias";
  f->names[2] = "lm_head.steps";
  f->names[3] = "model.layers.0.counts";
  f->names[4] = "a.first";
  f->tensors[0] = tprt_tensor_make(f->bf16, TPRT_DTYPE_BF16, 2, d_bf16);
  f->tensors[1] = tprt_tensor_make(f->f32, TPRT_DTYPE_F32, 1, d_f32);
  f->tensors[2] = tprt_tensor_make(f->i64, TPRT_DTYPE_I64, 1, d_i64);
  f->tensors[3] = tprt_tensor_make(f->i32, TPRT_DTYPE_I32, 2, d_i32);
  f->tensors[4] = tprt_tensor_make(f->f16, TPRT_DTYPE_F16, 1, d_f16);
}

// Expects tensor |i| of |f| to be found in |ck|, in the file |want_file| (a path or NULL), with
// the same bytes.
static void ck__expect_tensor(const tprt_checkpoint_t* ck, const ck__five_t* f, int i, const char* want_file) {
  tprt_safetensors_t* file = tprt_checkpoint_find(ck, f->names[i]);
  if (!file) {
    TPRT__FAIL("tensor '%s' not found", f->names[i]);
    return;
  }
  if (want_file) TPRT_EXPECT_STREQ(tprt_safetensors_path(file), want_file);
  uint8_t buf[64];
  memset(buf, 0xA5, sizeof buf);
  tprt_tensor_t expect = f->tensors[i];
  expect.data = buf;
  size_t n = tprt_tensor_bytes(&f->tensors[i]);
  TPRT_EXPECT_OK(tprt_safetensors_read(file, f->names[i], &expect));
  if (memcmp(buf, f->tensors[i].data, n) != 0) TPRT__FAIL("tensor '%s' reads back different bytes", f->names[i]);
}

TPRT_TEST(checkpoint_write_splits_files_and_reads_back) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  ck__five_t five;
  ck__five_make(&five);
  char index[512], listing[2048];
  tprt__join(&dir, "model.safetensors.index.json", index, sizeof index);
  // At most 32 bytes a file: {24 + 8}, {40, alone as it is larger}, {16 + 6}.
  TPRT_EXPECT_OK(tprt_checkpoint_write(index, CK__N, five.names, five.tensors, 32));
  TPRT_EXPECT_STREQ(ck__listing(&dir, listing, sizeof listing),
                    "model-00001-of-00003.safetensors model-00002-of-00003.safetensors "
                    "model-00003-of-00003.safetensors model.safetensors.index.json");
  char files[3][512];
  tprt__join(&dir, "model-00001-of-00003.safetensors", files[0], sizeof files[0]);
  tprt__join(&dir, "model-00002-of-00003.safetensors", files[1], sizeof files[1]);
  tprt__join(&dir, "model-00003-of-00003.safetensors", files[2], sizeof files[2]);
  for (int f = 0; f < 3; ++f) TPRT_EXPECT(tprt__exists(files[f]));

  tprt_checkpoint_t* ck = NULL;
  TPRT_EXPECT_OK(tprt_checkpoint_open(index, tprt_allocator_system(), &ck));
  if (ck) {
    TPRT_EXPECT_STREQ(tprt_checkpoint_path(ck), index);
    TPRT_EXPECT_EQ_I64(tprt_checkpoint_num_files(ck), 3);
    TPRT_EXPECT_EQ_I64(tprt_checkpoint_num_tensors(ck), 5);
    static const int kFileOf[CK__N] = {0, 0, 1, 2, 2};
    for (int i = 0; i < CK__N; ++i) ck__expect_tensor(ck, &five, i, files[kFileOf[i]]);
    TPRT_EXPECT(tprt_checkpoint_find(ck, "missing") == NULL);
    TPRT_EXPECT(tprt_checkpoint_find(ck, "") == NULL);
    TPRT_EXPECT(tprt_checkpoint_find(ck, "model.embed.weigh") == NULL);
    TPRT_EXPECT(tprt_checkpoint_find(ck, "model.embed.weightx") == NULL);
    // Each file holds its tensors only, with the Hugging Face "format": "pt" metadata.
    tprt_safetensors_t* first = tprt_checkpoint_find(ck, five.names[0]);
    tprt_safetensors_t* second = tprt_checkpoint_find(ck, five.names[2]);
    tprt_safetensors_t* third = tprt_checkpoint_find(ck, five.names[4]);
    if (first && second && third) {
      TPRT_EXPECT_EQ_I64(tprt_safetensors_count(first), 2);
      TPRT_EXPECT_EQ_I64(tprt_safetensors_count(second), 1);
      TPRT_EXPECT_EQ_I64(tprt_safetensors_count(third), 2);
      const char* format = tprt_safetensors_metadata(first, "format");
      TPRT_EXPECT(format && strcmp(format, "pt") == 0);
    }
    tprt_checkpoint_close(ck);
  }

  // The index is JSON: total_size is the bytes of data, the weight_map names every tensor's file
  // (relative to the index's directory), sorted by tensor name.
  size_t size = 0;
  uint8_t* text = tprt__read_bytes(index, &size);
  TPRT_EXPECT(text != NULL);
  if (text) {
    text[size] = '\0';
    ck__json_t j;
    TPRT_EXPECT(ck__json_parse((const char*)text, &j));
    TPRT_EXPECT(j.has_total);
    TPRT_EXPECT_EQ_I64((int64_t)j.total_size, 94);
    TPRT_EXPECT_EQ_I64(j.num_entries, 5);
    static const char* const kSorted[CK__N][2] = {
        {"a.first", "model-00003-of-00003.safetensors"},
        {"lm_head.steps", "model-00002-of-00003.safetensors"},
        {"model.embed.weight", "model-00001-of-00003.safetensors"},
        {"model.layers.0.counts", "model-00003-of-00003.safetensors"},
        {"model.norm.bias", "model-00001-of-00003.safetensors"},
    };
    for (int i = 0; i < j.num_entries && i < CK__N; ++i) {
      TPRT_EXPECT_STREQ(j.keys[i], kSorted[i][0]);
      TPRT_EXPECT_STREQ(j.values[i], kSorted[i][1]);
    }
    free(text);
  }

  // A second write replaces the checkpoint in place (here: one file of everything).
  TPRT_EXPECT_OK(tprt_checkpoint_write(index, CK__N, five.names, five.tensors, 1000));
  TPRT_EXPECT(tprt__exists(files[0]));  // the old files stay, unreferenced
  ck = NULL;
  TPRT_EXPECT_OK(tprt_checkpoint_open(index, tprt_allocator_system(), &ck));
  if (ck) {
    char one[512];
    tprt__join(&dir, "model-00001-of-00001.safetensors", one, sizeof one);
    TPRT_EXPECT_EQ_I64(tprt_checkpoint_num_files(ck), 1);
    for (int i = 0; i < CK__N; ++i) ck__expect_tensor(ck, &five, i, one);
    tprt_checkpoint_close(ck);
  }
  TPRT_EXPECT(!strstr(ck__listing(&dir, listing, sizeof listing), ".partial"));
  TPRT_EXPECT(!strstr(listing, ".tmp"));
  tprt__tmpdir_remove(&dir);
}

TPRT_TEST(checkpoint_one_safetensors_file_is_a_checkpoint) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  ck__five_t five;
  ck__five_make(&five);
  char index[512], path[512];
  tprt__join(&dir, "ck.json", index, sizeof index);
  TPRT_EXPECT_OK(tprt_checkpoint_write(index, CK__N, five.names, five.tensors, 32));
  // One of the index's files, opened alone.
  tprt__join(&dir, "ck-00003-of-00003.safetensors", path, sizeof path);
  tprt_checkpoint_t* ck = NULL;
  TPRT_EXPECT_OK(tprt_checkpoint_open(path, tprt_allocator_system(), &ck));
  if (ck) {
    TPRT_EXPECT_STREQ(tprt_checkpoint_path(ck), path);
    TPRT_EXPECT_EQ_I64(tprt_checkpoint_num_files(ck), 1);
    TPRT_EXPECT_EQ_I64(tprt_checkpoint_num_tensors(ck), 2);
    ck__expect_tensor(ck, &five, 3, path);
    ck__expect_tensor(ck, &five, 4, path);
    TPRT_EXPECT(tprt_checkpoint_find(ck, five.names[0]) == NULL);
    TPRT_EXPECT(tprt_checkpoint_find(ck, "missing") == NULL);
    tprt_checkpoint_close(ck);
  }
  // A file written with tprt_safetensors_write, all five tensors.
  tprt__join(&dir, "all.safetensors", path, sizeof path);
  TPRT_EXPECT_OK(tprt_safetensors_write(path, CK__N, five.names, five.tensors, NULL));
  ck = NULL;
  TPRT_EXPECT_OK(tprt_checkpoint_open(path, tprt_allocator_system(), &ck));
  if (ck) {
    TPRT_EXPECT_EQ_I64(tprt_checkpoint_num_files(ck), 1);
    TPRT_EXPECT_EQ_I64(tprt_checkpoint_num_tensors(ck), 5);
    for (int i = 0; i < CK__N; ++i) ck__expect_tensor(ck, &five, i, path);
    TPRT_EXPECT(tprt_checkpoint_find(ck, "missing") == NULL);
    tprt_checkpoint_close(ck);
  }
  // A missing or corrupt file fails as tprt_safetensors_open does.
  tprt__join(&dir, "missing.safetensors", path, sizeof path);
  ck = (tprt_checkpoint_t*)&ck;
  ck__expect_fail(tprt_checkpoint_open(path, tprt_allocator_system(), &ck), TPRT_STATUS_NOT_FOUND, path,
                  "open(missing file)");
  TPRT_EXPECT(ck == NULL);
  tprt__join(&dir, "short.safetensors", path, sizeof path);
  tprt__write_bytes(path, "\x10\0\0", 3);
  ck__expect_fail(tprt_checkpoint_open(path, tprt_allocator_system(), &ck), TPRT_STATUS_DATA_LOSS, path,
                  "open(truncated file)");
  tprt_checkpoint_close(NULL);  // NULL-safe
  tprt__tmpdir_remove(&dir);
}

TPRT_TEST(checkpoint_write_names_files_after_the_index) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  ck__five_t five;
  ck__five_make(&five);
  char index[512], listing[2048];
  // "<prefix>.index.json": the prefix without ".index.json"; 0 bytes a file: one tensor a file.
  tprt__join(&dir, "m.index.json", index, sizeof index);
  TPRT_EXPECT_OK(tprt_checkpoint_write(index, 2, five.names, five.tensors, 0));
  TPRT_EXPECT_STREQ(ck__listing(&dir, listing, sizeof listing),
                    "m-00001-of-00002.safetensors m-00002-of-00002.safetensors m.index.json");
  tprt__tmpdir_remove(&dir);
  // "<prefix>.json".
  tprt__tmpdir_create(&dir);
  tprt__join(&dir, "plain.json", index, sizeof index);
  TPRT_EXPECT_OK(tprt_checkpoint_write(index, CK__N, five.names, five.tensors, UINT64_MAX));
  TPRT_EXPECT_STREQ(ck__listing(&dir, listing, sizeof listing), "plain-00001-of-00001.safetensors plain.json");
  tprt_checkpoint_t* ck = NULL;
  TPRT_EXPECT_OK(tprt_checkpoint_open(index, tprt_allocator_system(), &ck));
  if (ck) {
    TPRT_EXPECT_EQ_I64(tprt_checkpoint_num_files(ck), 1);
    TPRT_EXPECT_EQ_I64(tprt_checkpoint_num_tensors(ck), 5);
    tprt_checkpoint_close(ck);
  }
  tprt__tmpdir_remove(&dir);
  // An index path without a directory: the files land beside it, in the working directory.
  tprt__tmpdir_create(&dir);
  char cwd[1024];
  if (getcwd(cwd, sizeof cwd) && chdir(dir.path) == 0) {
    TPRT_EXPECT_OK(tprt_checkpoint_write("rel.json", CK__N, five.names, five.tensors, 32));
    ck = NULL;
    TPRT_EXPECT_OK(tprt_checkpoint_open("rel.json", tprt_allocator_system(), &ck));
    if (ck) {
      TPRT_EXPECT_EQ_I64(tprt_checkpoint_num_files(ck), 3);
      for (int i = 0; i < CK__N; ++i) ck__expect_tensor(ck, &five, i, NULL);
      tprt_checkpoint_close(ck);
    }
    if (chdir(cwd) != 0) TPRT__FAIL("cannot return to %s", cwd);
    TPRT_EXPECT_STREQ(ck__listing(&dir, listing, sizeof listing),
                      "rel-00001-of-00003.safetensors rel-00002-of-00003.safetensors "
                      "rel-00003-of-00003.safetensors rel.json");
  } else {
    TPRT__FAIL("cannot enter %s", dir.path);
  }
  tprt__tmpdir_remove(&dir);
}

TPRT_TEST(checkpoint_write_failures_leave_nothing_behind) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  ck__five_t five;
  ck__five_make(&five);
  char index[512], want[1024], listing[2048];
  ck__write_text(&dir, "keep.txt", "existing\n");
  tprt__join(&dir, "model.safetensors.index.json", index, sizeof index);
  // A name given twice.
  const char* dup[CK__N] = {"a", "b", "c", "b", "e"};
  snprintf(want, sizeof want, "%s: tensor name 'b' given twice", index);
  ck__expect_exact(tprt_checkpoint_write(index, CK__N, dup, five.tensors, 32), TPRT_STATUS_INVALID_ARGUMENT, want,
                   "write(duplicate)");
  TPRT_EXPECT_STREQ(ck__listing(&dir, listing, sizeof listing), "keep.txt");
  // An index name that is not *.json.
  char bad[512];
  tprt__join(&dir, "model.safetensors", bad, sizeof bad);
  snprintf(want, sizeof want, "%s: an index's name ends in .json", bad);
  ck__expect_exact(tprt_checkpoint_write(bad, CK__N, five.names, five.tensors, 32), TPRT_STATUS_INVALID_ARGUMENT,
                   want, "write(not .json)");
  tprt__join(&dir, "model.json.txt", bad, sizeof bad);
  ck__expect_fail(tprt_checkpoint_write(bad, CK__N, five.names, five.tensors, 32), TPRT_STATUS_INVALID_ARGUMENT,
                  "an index's name ends in .json", "write(.json.txt)");
  TPRT_EXPECT_STREQ(ck__listing(&dir, listing, sizeof listing), "keep.txt");
  // NULL arguments.
  ck__expect_fail(tprt_checkpoint_write(NULL, CK__N, five.names, five.tensors, 32), TPRT_STATUS_INVALID_ARGUMENT,
                  "NULL argument", "write(NULL path)");
  ck__expect_fail(tprt_checkpoint_write(index, CK__N, NULL, five.tensors, 32), TPRT_STATUS_INVALID_ARGUMENT,
                  "NULL argument", "write(NULL names)");
  ck__expect_fail(tprt_checkpoint_write(index, -1, five.names, five.tensors, 32), TPRT_STATUS_INVALID_ARGUMENT,
                  "NULL argument", "write(count -1)");
  // The third file fails (a name the safetensors writer refuses) after two are complete: their
  // temporary files are removed, nothing is renamed into place.
  const char* refused[CK__N] = {"a", "b", "c", "__metadata__", "e"};
  tprt_status_t s = tprt_checkpoint_write(index, CK__N, refused, five.tensors, 32);
  TPRT_EXPECT(s != NULL);
  if (s) {
    TPRT_EXPECT(tprt_status_code(s) == TPRT_STATUS_INVALID_ARGUMENT);
    TPRT_EXPECT_CONTAINS(tprt_status_message(s), "__metadata__");
    TPRT_EXPECT_CONTAINS(tprt_status_message(s), "model-00003-of-00003.safetensors");
    tprt_status_free(s);
  }
  TPRT_EXPECT_STREQ(ck__listing(&dir, listing, sizeof listing), "keep.txt");
  tprt__tmpdir_remove(&dir);
  // A missing directory.
  tprt__tmpdir_create(&dir);
  tprt__join(&dir, "no/such/dir/ck.json", bad, sizeof bad);
  ck__expect_fail(tprt_checkpoint_write(bad, CK__N, five.names, five.tensors, 32), TPRT_STATUS_NOT_FOUND,
                  "ck-00001-of-00003.safetensors", "write(missing directory)");
  TPRT_EXPECT_STREQ(ck__listing(&dir, listing, sizeof listing), "");
  tprt__tmpdir_remove(&dir);
}

/// The index cannot be written (a directory is in its place): the message gives rename's reason
/// (EISDIR, FAILED_PRECONDITION) whatever errno held before the call, and no temporary file stays.
TPRT_TEST(checkpoint_write_index_failure_reports_its_own_errno) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  ck__five_t five;
  ck__five_make(&five);
  char bad[512], want[1024], listing[2048];
  tprt__join(&dir, "dir.json", bad, sizeof bad);
  TPRT_EXPECT(mkdir(bad, 0755) == 0);
  snprintf(want, sizeof want, "%s: cannot write: %s", bad, strerror(EISDIR));
  errno = ENOENT;  // stale, as an earlier unrelated failure (a missing file) leaves it
  tprt_status_t s = tprt_checkpoint_write(bad, CK__N, five.names, five.tensors, 32);
  TPRT_EXPECT(s != NULL);
  if (s) {
    TPRT_EXPECT_CONTAINS(tprt_status_message(s), "cannot write");
    TPRT_EXPECT_STREQ(tprt_status_message(s), want);
    TPRT_EXPECT_STREQ(tprt_status_code_string(tprt_status_code(s)),
                      tprt_status_code_string(TPRT_STATUS_FAILED_PRECONDITION));
    tprt_status_free(s);
  }
  ck__listing(&dir, listing, sizeof listing);
  TPRT_EXPECT(!strstr(listing, ".partial"));
  TPRT_EXPECT(!strstr(listing, ".tmp"));
  TPRT_EXPECT(rmdir(bad) == 0);
  tprt__tmpdir_remove(&dir);
}

/// Whatever tprt_checkpoint_write accepts, tprt_checkpoint_open reads back: a write of no tensors
/// either fails or leaves a checkpoint of no tensors that opens.
TPRT_TEST(checkpoint_write_of_no_tensors_fails_or_opens) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char index[512];
  tprt__join(&dir, "empty.json", index, sizeof index);
  tprt_status_t s = tprt_checkpoint_write(index, 0, NULL, NULL, 32);
  if (s) {
    tprt_status_free(s);
  } else {
    tprt_checkpoint_t* ck = NULL;
    TPRT_EXPECT_OK(tprt_checkpoint_open(index, tprt_allocator_system(), &ck));
    if (ck) TPRT_EXPECT_EQ_I64(tprt_checkpoint_num_tensors(ck), 0);
    tprt_checkpoint_close(ck);
  }
  tprt__tmpdir_remove(&dir);
}

//===----------------------------------------------------------------------===//
// Checkpoints: malformed indexes, one line each
//===----------------------------------------------------------------------===//

// a.safetensors holds x (F32 [2], 8 bytes) and y (I32 [3], 12 bytes), b.safetensors z (BF16
// [2, 2], 8 bytes), c.safetensors x (again) and q: 28 bytes in a and b.
static void ck__write_parts(const tprt__tmpdir_t* dir) {
  static float x[2] = {1, 2};
  static int32_t y[3] = {3, 4, 5};
  static uint16_t z[4] = {0x3F80, 0x4000, 0x4040, 0x4080};
  static const int64_t dx[1] = {2}, dy[1] = {3}, dz[2] = {2, 2};
  char path[512];
  const char* ab_names[2] = {"x", "y"};
  tprt_tensor_t ab[2] = {tprt_tensor_make(x, TPRT_DTYPE_F32, 1, dx), tprt_tensor_make(y, TPRT_DTYPE_I32, 1, dy)};
  TPRT_EXPECT_OK(tprt_safetensors_write(tprt__join(dir, "a.safetensors", path, sizeof path), 2, ab_names, ab, NULL));
  const char* b_names[1] = {"z"};
  tprt_tensor_t b[1] = {tprt_tensor_make(z, TPRT_DTYPE_BF16, 2, dz)};
  TPRT_EXPECT_OK(tprt_safetensors_write(tprt__join(dir, "b.safetensors", path, sizeof path), 1, b_names, b, NULL));
  const char* c_names[2] = {"x", "q"};
  tprt_tensor_t c[2] = {ab[0], ab[1]};
  TPRT_EXPECT_OK(tprt_safetensors_write(tprt__join(dir, "c.safetensors", path, sizeof path), 2, c_names, c, NULL));
}

typedef struct {
  const char* json;
  int code;
  const char* message;  // a part of the message after "<index>: "
} ck__bad_index_t;

#define CK__AB "\"x\": \"a.safetensors\", \"y\": \"a.safetensors\", \"z\": \"b.safetensors\""

static const ck__bad_index_t ck__bad_indexes[] = {
    {"{\"metadata\": {\"total_size\": 28}}", TPRT_STATUS_DATA_LOSS,
     "no \"weight_map\" object (an index is {\"metadata\": {...}, \"weight_map\": {\"<tensor>\": \"<file>\"}})"},
    {"{\"weight_map\": [\"a.safetensors\"]}", TPRT_STATUS_DATA_LOSS, "no \"weight_map\" object"},
    {"[1, 2]", TPRT_STATUS_DATA_LOSS, "no \"weight_map\" object"},
    {"{\"weight_map\": {\"x\": \"a.safetensors\", \"y\": 3}}", TPRT_STATUS_DATA_LOSS,
     "weight_map entry 'y' is not a file name"},
    {"{\"weight_map\": {\"x\": null}}", TPRT_STATUS_DATA_LOSS, "weight_map entry 'x' is not a file name"},
    {"{\"weight_map\": {\"x\": \"\"}}", TPRT_STATUS_DATA_LOSS, "weight_map entry 'x' is not a file name"},
    {"{\"weight_map\": {\"x\": \"/tmp/a.safetensors\"}}", TPRT_STATUS_DATA_LOSS,
     "weight_map entry 'x' names '/tmp/a.safetensors'; files are named relative to the index's directory, without "
     "'..'"},
    {"{\"weight_map\": {\"x\": \"../a.safetensors\"}}", TPRT_STATUS_DATA_LOSS,
     "weight_map entry 'x' names '../a.safetensors'; files are named relative"},
    {"{\"weight_map\": {\"x\": \"sub/../../a.safetensors\"}}", TPRT_STATUS_DATA_LOSS,
     "weight_map entry 'x' names 'sub/../../a.safetensors'"},
    {"{\"metadata\": {\"total_size\": 0}, \"weight_map\": {}}", TPRT_STATUS_DATA_LOSS, "the weight_map lists no tensors"},
    {"{\"weight_map\": {" CK__AB ", \"w\": \"b.safetensors\"}}", TPRT_STATUS_DATA_LOSS,
     "tensor 'w' is mapped to 'b.safetensors', which does not hold it"},
    {"{\"weight_map\": {" CK__AB ", \"y\": \"a.safetensors\"}}", TPRT_STATUS_DATA_LOSS,
     "tensor 'y' is listed twice in the weight_map"},
    {"{\"weight_map\": {\"x\": \"a.safetensors\", \"z\": \"b.safetensors\"}}", TPRT_STATUS_DATA_LOSS,
     "file 'a.safetensors' holds tensor 'y', which the weight_map does not list"},
    {"{\"weight_map\": {" CK__AB ", \"q\": \"c.safetensors\"}}", TPRT_STATUS_DATA_LOSS,
     "tensor 'x' is held by both 'c.safetensors' and 'a.safetensors' (the weight_map names 'a.safetensors')"},
    {"{\"metadata\": {\"total_size\": 99}, \"weight_map\": {" CK__AB "}}", TPRT_STATUS_DATA_LOSS,
     "metadata.total_size is 99 but the files hold 28 bytes of the listed tensors"},
    {"{\"metadata\": {\"total_size\": 27}, \"weight_map\": {" CK__AB "}}", TPRT_STATUS_DATA_LOSS,
     "metadata.total_size is 27 but the files hold 28 bytes"},
    {"{\"metadata\": {\"total_size\": \"28\"}, \"weight_map\": {" CK__AB "}}", TPRT_STATUS_DATA_LOSS,
     "metadata.total_size is"},
    {"{\"weight_map\": {" CK__AB ", \"m\": \"missing.safetensors\"}}", TPRT_STATUS_NOT_FOUND,
     "file 'missing.safetensors': "},
    {"{\"weight_map\": {\"x\": \"a.safetensors\",", TPRT_STATUS_DATA_LOSS, "not valid JSON (at byte "},
    {"", TPRT_STATUS_DATA_LOSS, "not valid JSON"},
};

TPRT_TEST(checkpoint_open_rejects_malformed_indexes_in_one_line) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  ck__write_parts(&dir);
  char index[512], want[2048];
  tprt__join(&dir, "model.safetensors.index.json", index, sizeof index);
  // The well-formed index opens, with and without total_size.
  const char* good[] = {"{\"metadata\": {\"total_size\": 28}, \"weight_map\": {" CK__AB "}}",
                        "{\"weight_map\": {" CK__AB "}}", "{\"metadata\": {}, \"weight_map\": {" CK__AB "}}"};
  for (int g = 0; g < 3; ++g) {
    ck__write_text(&dir, "model.safetensors.index.json", good[g]);
    tprt_checkpoint_t* ck = NULL;
    TPRT_EXPECT_OK(tprt_checkpoint_open(index, tprt_allocator_system(), &ck));
    if (!ck) continue;
    TPRT_EXPECT_EQ_I64(tprt_checkpoint_num_files(ck), 2);
    TPRT_EXPECT_EQ_I64(tprt_checkpoint_num_tensors(ck), 3);
    char a[512], b[512];
    tprt_safetensors_t* fx = tprt_checkpoint_find(ck, "x");
    tprt_safetensors_t* fz = tprt_checkpoint_find(ck, "z");
    TPRT_EXPECT(fx && fz && tprt_checkpoint_find(ck, "y") == fx && tprt_checkpoint_find(ck, "q") == NULL);
    if (fx) TPRT_EXPECT_STREQ(tprt_safetensors_path(fx), tprt__join(&dir, "a.safetensors", a, sizeof a));
    if (fz) TPRT_EXPECT_STREQ(tprt_safetensors_path(fz), tprt__join(&dir, "b.safetensors", b, sizeof b));
    tprt_checkpoint_close(ck);
  }
  for (size_t i = 0; i < sizeof ck__bad_indexes / sizeof ck__bad_indexes[0]; ++i) {
    ck__write_text(&dir, "model.safetensors.index.json", ck__bad_indexes[i].json);
    snprintf(want, sizeof want, "%s: %s", index, ck__bad_indexes[i].message);
    char what[512];
    snprintf(what, sizeof what, "open(%s)", ck__bad_indexes[i].json);
    tprt_checkpoint_t* ck = (tprt_checkpoint_t*)&ck;
    ck__expect_fail(tprt_checkpoint_open(index, tprt_allocator_system(), &ck), ck__bad_indexes[i].code, want, what);
    if (ck != NULL) {
      TPRT__FAIL("%s: *out is not NULL after a failure", what);
      if (ck != (tprt_checkpoint_t*)&ck) tprt_checkpoint_close(ck);
    }
  }
  // A corrupt file: its error, after the index and the file's name.
  char path[512];
  tprt__write_bytes(tprt__join(&dir, "b.safetensors", path, sizeof path), "\x10\0\0", 3);
  ck__write_text(&dir, "model.safetensors.index.json", "{\"weight_map\": {" CK__AB "}}");
  tprt_checkpoint_t* ck = NULL;
  snprintf(want, sizeof want, "%s: file 'b.safetensors': %s", index, path);
  ck__expect_fail(tprt_checkpoint_open(index, tprt_allocator_system(), &ck), TPRT_STATUS_DATA_LOSS, want,
                  "open(corrupt file)");
  // The index itself missing; NULL arguments.
  tprt__join(&dir, "missing.json", path, sizeof path);
  snprintf(want, sizeof want, "%s: cannot open: ", path);
  ck__expect_fail(tprt_checkpoint_open(path, tprt_allocator_system(), &ck), TPRT_STATUS_NOT_FOUND, want,
                  "open(missing index)");
  ck__expect_fail(tprt_checkpoint_open(NULL, tprt_allocator_system(), &ck), TPRT_STATUS_INVALID_ARGUMENT,
                  "NULL argument", "open(NULL)");
  tprt__tmpdir_remove(&dir);
}

/// Opening and closing an index, failed or not, frees everything it allocated from |allocator|.
TPRT_TEST(checkpoint_open_frees_what_it_allocates) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  ck__write_parts(&dir);
  char index[512];
  tprt__join(&dir, "i.json", index, sizeof index);
  const char* texts[] = {"{\"weight_map\": {" CK__AB "}}", "{\"weight_map\": {\"x\": \"a.safetensors\"}}",
                         "{\"weight_map\": {" CK__AB ", \"m\": \"missing.safetensors\"}}"};
  for (int t = 0; t < 3; ++t) {
    ck__write_text(&dir, "i.json", texts[t]);
    tprt__live_allocations = 0;
    tprt_checkpoint_t* ck = NULL;
    tprt_status_t s = tprt_checkpoint_open(index, tprt__counting_allocator(), &ck);
    TPRT_EXPECT((s == NULL) == (t == 0));
    tprt_status_free(s);
    tprt_checkpoint_close(ck);
    TPRT_EXPECT_EQ_I64(tprt__live_allocations, 0);
  }
  tprt__tmpdir_remove(&dir);
}
