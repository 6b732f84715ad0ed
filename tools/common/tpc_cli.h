// One command-line parser for every tpc tool: a table of options, read the same way everywhere.
//
// Each tool describes its options once (name, value placeholder, help, id); tpc_cli_next walks
// argv and returns them one at a time. Every tool therefore accepts `--opt value` and
// `--opt=value`, `-o file` and `-ofile` for one-letter options, `--` to end the options, prints
// the same `-h/--help` layout and `--version` line, refuses a flag given a value, and answers an
// unknown option with the closest known one. Plain C, no MLIR: tpc-run and the benchmarks, which
// link only the runtime, use it too.
#ifndef TPC_CLI_H_
#define TPC_CLI_H_

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/// One option: `--name` (and `-s` when short_name is set).
typedef struct tpc_cli_option_t {
  /// Long name without the leading dashes ("world"); NULL ends a table.
  const char* name;
  /// One-letter alias ('o' for -o), or 0.
  char short_name;
  /// Placeholder of the value in the help ("N", "FILE"), or NULL for a flag.
  const char* value;
  /// Help text; '\n' starts a continuation line, indented under the first.
  const char* help;
  /// What tpc_cli_next returns for this option (>= 0; the tool's own enum).
  int id;
} tpc_cli_option_t;

/// A tool's command line.
typedef struct tpc_cli_t {
  /// The tool's name, printed before every error ("tpc-run: error: ...").
  const char* tool;
  /// One line for the help's OVERVIEW.
  const char* overview;
  /// The USAGE line without the tool's name ("<module.so | module.mlir> [options]").
  const char* usage;
  /// The options; a row with a NULL name ends the table.
  const tpc_cli_option_t* options;
  /// Also accept `-name` for `--name` (MLIR tools' spelling: `-split-input-file`).
  bool single_dash_long;
  /// Names accepted as flags beyond the table (tpc-opt's passes), or NULL: the i-th name, NULL past
  /// the last. tpc_cli_next returns TPC_CLI_EXTRA for them; a `=value` is passed on in state->value.
  const char* (*extra_name)(int i);
  /// Prints the help's sections after OPTIONS (passes, environment), or NULL.
  void (*print_more_help)(FILE* out);
} tpc_cli_t;

/// What tpc_cli_next returns besides an option's id.
enum {
  TPC_CLI_END = -1,        ///< argv is exhausted
  TPC_CLI_POSITIONAL = -2, ///< a plain argument, in value ("-" counts as one)
  TPC_CLI_EXTRA = -3,      ///< one of extra_name's names, in name; its `=value` (or NULL) in value
  TPC_CLI_EXIT = -4,       ///< -h/--help or --version was printed: exit with status 0
  TPC_CLI_ERROR = -5,      ///< a usage error was printed on stderr: exit with status 2
};

/// Where the walk over argv stands; zero-initialise it.
typedef struct tpc_cli_state_t {
  int index;          ///< next argv index to read (0 means 1: argv[0] is the program)
  bool options_done;  ///< after `--`, every argument is positional
  const char* value;  ///< the value of the option just returned, or the positional argument
  const tpc_cli_option_t* option;  ///< the table row just returned (NULL for the TPC_CLI_* codes)
  const char* name;   ///< TPC_CLI_EXTRA: the name, without dashes or `=value`
  char buffer[128];   ///< holds name when it is cut out of `--name=value`
} tpc_cli_state_t;

/// Returns the id of the next option in argv (its value, if it takes one, in state->value), or one
/// of the TPC_CLI_* codes above. Handles -h/--help and --version itself (printed on stdout).
int tpc_cli_next(const tpc_cli_t* cli, int argc, char** argv, tpc_cli_state_t* state);

/// Prints the help: OVERVIEW, USAGE, the option table (with -h/--help and --version), then
/// cli->print_more_help.
void tpc_cli_print_help(const tpc_cli_t* cli, FILE* out);

/// Prints `<tool> <version> (git <hash>)` and the versions tpc was built against (MLIR, CUDA, NCCL).
void tpc_cli_print_version(const char* tool, FILE* out);

/// Prints `<tool>: error: <message>` on stderr.
void tpc_cli_error(const tpc_cli_t* cli, const char* format, ...) __attribute__((format(printf, 2, 3)));

/// Parses state->value as a decimal integer in [min, max] for the option just returned. On failure,
/// prints `<option> must be <min>..<max>; got '<value>'` (or |what| instead of the range when not
/// NULL: "a positive number of bytes") and returns false.
bool tpc_cli_u64(const tpc_cli_t* cli, const tpc_cli_state_t* state, uint64_t min, uint64_t max,
                 const char* what, uint64_t* out_value);

/// Parses state->value as a number in [lo, hi] for the option just returned; on failure prints
/// `--<option> must be a number in [lo, hi]; got '<value>'` and returns false.
bool tpc_cli_number(const tpc_cli_t* cli, const tpc_cli_state_t* state, double lo, double hi, double* out_value);

/// Parses state->value as a decimal integer >= lo; on failure prints `--<option> must be an
/// integer >= lo; got '<value>'` and returns false.
bool tpc_cli_count(const tpc_cli_t* cli, const tpc_cli_state_t* state, int64_t lo, int64_t* out_value);

/// The known option (`--name`, with dashes; extra names included) closest to |written|, or NULL when
/// none is within three edits. The result lives in a static buffer.
const char* tpc_cli_closest(const tpc_cli_t* cli, const char* written);

#ifdef __cplusplus
}
#endif

#endif  // TPC_CLI_H_
