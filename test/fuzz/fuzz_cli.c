// libFuzzer harness: the command lines of the tools.
//
// Every tool reads argv through one option table (tools/common/tpc_cli.c); tpc-run and tpc-opt add
// their checks between options, tpc-opt its textual pass pipelines (--pass-pipeline) and pass
// options. The input is an argv: the first byte picks the parser (tpc-run's, tpc-opt's, or the bare
// table parser with short, long, valued and extra options), the rest is split at NUL and newline
// bytes into arguments. Whatever the words, a parser returns one of its documented codes, never
// reads past argv, and tpc-opt's pipeline elements are well-formed strings.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "tpc_cli.h"
#include "tpc_opt_args.h"
#include "tpc_run_args.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

// A table with every kind of option the shared parser knows, for the bare parser.
static const char* tpc__extra(int i) {
  static const char* const kNames[] = {"tp-verify", "tp-shard", NULL};
  return i < 2 ? kNames[i] : NULL;
}
static const tpc_cli_option_t kOptions[] = {{"output", 'o', "FILE", "output", 0},
                                            {"flag", 'f', NULL, "a flag", 1},
                                            {"value", 0, "V", "a value", 2},
                                            {NULL, 0, NULL, NULL, 0}};
static const tpc_cli_t kBare = {"fuzz", "the bare parser", "[options]", kOptions, true, tpc__extra, NULL};

// At most this many arguments: the parsers have no limit; the cap keeps inputs meaningful.
#define TPC_FUZZ_MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  int which = data[0] % 3;
  // One NUL-terminated copy of the bytes, cut into words.
  char* text = malloc(size);
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  char* argv[TPC_FUZZ_MAX_ARGS + 2] = {"tool"};
  int argc = 1;
  for (char* p = text; p < text + size - 1 && argc <= TPC_FUZZ_MAX_ARGS;) {
    argv[argc++] = p;
    while (p < text + size - 1 && *p != '\0' && *p != '\n') ++p;
    if (p < text + size - 1) *p++ = '\0';
  }
  argv[argc] = NULL;
  if (which == 0) {
    tpc_run_options_t o;
    memset(&o, 0, sizeof o);
    int rc = tpc_run_parse_args(argc, argv, &o);
    TPC_FUZZ_CHECK(rc == 1 || rc == 0 || rc == -1);
    if (rc == 1) {
      TPC_FUZZ_CHECK(o.module_path != NULL);
      TPC_FUZZ_CHECK(o.repeat >= 1 && o.warmup >= 0);
      TPC_FUZZ_CHECK(o.world >= 0 && o.world <= TPC_RUN_MAX_RANKS);
    }
  } else if (which == 1) {
    tpc_opt_options_t o;
    memset(&o, 0, sizeof o);
    int rc = tpc_opt_parse_args(argc, argv, &o);
    TPC_FUZZ_CHECK(rc == 1 || rc == 0 || rc == -1);
    TPC_FUZZ_CHECK(o.num_elements >= 0);
    for (int i = 0; i < o.num_elements; ++i) TPC_FUZZ_CHECK(o.elements[i] != NULL && o.elements[i][0] != '\0');
    if (rc == 1) TPC_FUZZ_CHECK(o.input != NULL);
    tpc_opt_options_free(&o);
  } else {
    tpc_cli_state_t st = {0};
    for (int id; (id = tpc_cli_next(&kBare, argc, argv, &st)) != TPC_CLI_END;) {
      TPC_FUZZ_CHECK(id >= TPC_CLI_ERROR && id <= 2);
      if (id == TPC_CLI_EXIT || id == TPC_CLI_ERROR) break;
      TPC_FUZZ_CHECK(st.index <= argc);
      if (id == 0 || id == 2 || id == TPC_CLI_POSITIONAL) TPC_FUZZ_CHECK(st.value != NULL);
      if (id == 1) TPC_FUZZ_CHECK(st.value == NULL);
      if (id == TPC_CLI_EXTRA) TPC_FUZZ_CHECK(st.name != NULL && tpc__extra(0) != NULL);
    }
  }
  free(text);
  return 0;
}
