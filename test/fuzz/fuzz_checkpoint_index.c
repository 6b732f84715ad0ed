// libFuzzer harness: Hugging Face checkpoint indexes (runtime/tprt_checkpoint.h).
//
// The input is the text of an index, {"metadata": {"total_size": N}, "weight_map": {"<tensor>":
// "<file>", ...}}. On first use the harness writes a small checkpoint into a fresh temporary
// directory, in /dev/shm when it exists: tensors a, b in model-00001-of-00002.safetensors; c,
// d.weight in model-00002-of-00002.safetensors (32 bytes of tensor data in the two); a alone in
// model.safetensors; e in sub/e.safetensors. Each input is written as model.safetensors.index.json
// beside them and opened with tprt_checkpoint_open, which opens and validates every file it names.
// An index that opens must be consistent with its files: each of its tensors is in the file
// tprt_checkpoint_find returns. The directory is removed when the process exits.
#define _POSIX_C_SOURCE 200809L  // mkdtemp
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "tprt_checkpoint.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// The files of the fixed checkpoint, relative to the directory, and the index's name.
static const char* const kFiles[] = {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                     "model.safetensors", "sub/e.safetensors"};
static const char* const kTensors[] = {"a", "b", "c", "d.weight", "e"};
static const char kIndex[] = "model.safetensors.index.json";
static char tpc__fuzz_dir[256];

static void tpc__fuzz_path(char* out, size_t size, const char* name) {
  snprintf(out, size, "%s/%s", tpc__fuzz_dir, name);
}

// Removes the directory and what the harness wrote into it.
static void tpc__fuzz_cleanup(void) {
  char path[512];
  for (size_t i = 0; i < sizeof kFiles / sizeof kFiles[0]; ++i) {
    tpc__fuzz_path(path, sizeof path, kFiles[i]);
    remove(path);
  }
  tpc__fuzz_path(path, sizeof path, kIndex);
  remove(path);
  tpc__fuzz_path(path, sizeof path, "sub");
  rmdir(path);
  rmdir(tpc__fuzz_dir);
}

// Writes one file of the fixed checkpoint.
static void tpc__fuzz_write(const char* name, int count, const char* const* names, const tprt_tensor_t* tensors) {
  char path[512];
  tpc__fuzz_path(path, sizeof path, name);
  tprt_status_t status = tprt_safetensors_write(path, count, names, tensors, NULL);
  if (status) fprintf(stderr, "fuzz: cannot write %s: %s\n", path, tprt_status_message(status));
  TPC_FUZZ_CHECK(status == NULL);
}

// Creates the temporary directory and the fixed checkpoint, once.
static void tpc__fuzz_setup(void) {
  if (tpc__fuzz_dir[0]) return;
  // Memory first: every input rewrites the index and opens the files, which costs a few
  // microseconds in /dev/shm and can cost a millisecond of metadata updates on a disk.
  const char* tmp = getenv("TMPDIR");
  if (access("/dev/shm", W_OK) == 0)
    tmp = "/dev/shm";
  else if (!tmp || !*tmp)
    tmp = "/tmp";
  snprintf(tpc__fuzz_dir, sizeof tpc__fuzz_dir, "%s/tpc-fuzz-index-XXXXXX", tmp);
  TPC_FUZZ_CHECK(mkdtemp(tpc__fuzz_dir) != NULL);
  atexit(tpc__fuzz_cleanup);
  char sub[512];
  tpc__fuzz_path(sub, sizeof sub, "sub");
  TPC_FUZZ_CHECK(mkdir(sub, 0700) == 0);
  static uint8_t bytes[64];  // every tensor's data; the values do not matter
  int64_t a_dims[2] = {2, 2}, b_dims[1] = {3}, c_dims[1] = {1}, d_dims[1] = {3};
  tprt_tensor_t a = tprt_tensor_make(bytes, TPRT_DTYPE_F32, 2, a_dims);
  tprt_tensor_t first[2] = {a, tprt_tensor_make(bytes, TPRT_DTYPE_BF16, 1, b_dims)};
  tprt_tensor_t second[2] = {tprt_tensor_make(bytes, TPRT_DTYPE_I64, 1, c_dims),
                             tprt_tensor_make(bytes, TPRT_DTYPE_F4E2M1FN, 1, d_dims)};
  tprt_tensor_t e = tprt_tensor_make(bytes, TPRT_DTYPE_I32, 0, NULL);
  tpc__fuzz_write(kFiles[0], 2, (const char* const[]){"a", "b"}, first);
  tpc__fuzz_write(kFiles[1], 2, (const char* const[]){"c", "d.weight"}, second);
  tpc__fuzz_write(kFiles[2], 1, (const char* const[]){"a"}, &a);
  tpc__fuzz_write(kFiles[3], 1, (const char* const[]){"e"}, &e);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tpc__fuzz_setup();
  char path[512];
  tpc__fuzz_path(path, sizeof path, kIndex);
  FILE* f = fopen(path, "wb");
  TPC_FUZZ_CHECK(f != NULL);
  TPC_FUZZ_CHECK(fwrite(data, 1, size, f) == size);
  TPC_FUZZ_CHECK(fclose(f) == 0);

  tprt_checkpoint_t* ck = NULL;
  tprt_status_t status = tprt_checkpoint_open(path, tprt_allocator_system(), &ck);
  if (status) {
    TPC_FUZZ_CHECK(ck == NULL && tprt_status_message(status) != NULL);
    tprt_status_free(status);
    return 0;
  }
  TPC_FUZZ_CHECK(tprt_checkpoint_num_files(ck) >= 1 && tprt_checkpoint_num_tensors(ck) >= 1);
  TPC_FUZZ_CHECK(strcmp(tprt_checkpoint_path(ck), path) == 0);
  int64_t found = 0;
  for (size_t i = 0; i < sizeof kTensors / sizeof kTensors[0]; ++i) {
    tprt_safetensors_t* file = tprt_checkpoint_find(ck, kTensors[i]);
    if (!file) continue;
    TPC_FUZZ_CHECK(tprt_safetensors_find(file, kTensors[i]) >= 0);
    ++found;
  }
  // The fixed files hold no other tensors, and every file an index names holds only listed ones.
  TPC_FUZZ_CHECK(found == tprt_checkpoint_num_tensors(ck));
  TPC_FUZZ_CHECK(tprt_checkpoint_find(ck, "\x01missing") == NULL);
  tprt_checkpoint_close(ck);
  return 0;
}
