// Replays inputs through one fuzz harness without libFuzzer, for builds that cannot link it (the
// gcc build and its ASan build): every file named on the command line, and every regular file of
// every directory named (sorted by name, dot files skipped), goes through LLVMFuzzerTestOneInput
// once. A crash or sanitizer report ends the process as it would end the fuzzer; otherwise the
// last line says how many inputs ran. test/fuzz/replay.test runs the regression corpus this way.
//
// Usage: replay_<harness> FILE_OR_DIR...
#define _DEFAULT_SOURCE  // scandir, alphasort
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// Runs the harness on the file at |path|; returns 0 when it could not be read.
static int tpc__replay_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "replay: error: cannot open '%s'\n", path);
    return 0;
  }
  size_t size = 0, cap = 4096;
  uint8_t* data = malloc(cap);
  for (size_t n; data && (n = fread(data + size, 1, cap - size, f)) > 0;) {
    size += n;
    if (size == cap) {
      uint8_t* bigger = realloc(data, cap *= 2);
      if (!bigger) free(data);
      data = bigger;
    }
  }
  int ok = data && !ferror(f);
  fclose(f);
  if (!ok) {
    fprintf(stderr, "replay: error: cannot read '%s'\n", path);
    free(data);
    return 0;
  }
  // Named before it runs, so that a crash report follows the name of the input that caused it.
  fprintf(stderr, "replay: %s (%zu bytes)\n", path, size);
  LLVMFuzzerTestOneInput(data, size);
  free(data);
  return 1;
}

static int tpc__replay_skip_dot(const struct dirent* e) { return e->d_name[0] != '.'; }

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  int replayed = 0, failed = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat st;
    if (stat(argv[i], &st) != 0) {
      fprintf(stderr, "replay: error: '%s' does not exist\n", argv[i]);
      ++failed;
      continue;
    }
    if (!S_ISDIR(st.st_mode)) {
      tpc__replay_file(argv[i]) ? ++replayed : ++failed;
      continue;
    }
    struct dirent** entries = NULL;
    int n = scandir(argv[i], &entries, tpc__replay_skip_dot, alphasort);
    if (n < 0) {
      fprintf(stderr, "replay: error: cannot list '%s'\n", argv[i]);
      ++failed;
      continue;
    }
    for (int k = 0; k < n; ++k) {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", argv[i], entries[k]->d_name);
      if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) tpc__replay_file(path) ? ++replayed : ++failed;
      free(entries[k]);
    }
    free(entries);
  }
  printf("replayed %d inputs\n", replayed);
  return failed ? 1 : 0;
}
