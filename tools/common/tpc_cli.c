// The tools' shared command-line parser (see tpc_cli.h).
#include "tpc_cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

// CMake generates tpc_version.h (cmake/version.cmake); builds without CMake (the GPU machines'
// test/gpu/run.sh) say so instead.
#if __has_include("tpc_version.h")
#include "tpc_version.h"
#else
#define TPC_VERSION "0.1.0"
#define TPC_GIT_HASH "unknown: built without CMake"
#define TPC_MLIR_VERSION "unknown"
#define TPC_CUDA_VERSIONS "see nvcc --version"
#endif

// The help's option column: options longer than this start their text on the next line.
#define TPC_CLI_HELP_COLUMN 28

void tpc_cli_error(const tpc_cli_t* cli, const char* format, ...) {
  va_list args;
  va_start(args, format);
  fprintf(stderr, "%s: error: ", cli->tool);
  vfprintf(stderr, format, args);
  fputc('\n', stderr);
  va_end(args);
}

// Prints one row of the option table: the option column, then the help lines under each other.
static void tpc__help_row(FILE* out, const char* left, const char* help) {
  int width = fprintf(out, "  %s", left);
  if (width > TPC_CLI_HELP_COLUMN - 1) {
    fputc('\n', out);
    width = 0;
  }
  fprintf(out, "%*s", TPC_CLI_HELP_COLUMN - width, "");
  for (const char* p = help; *p; ++p) {
    fputc(*p, out);
    if (*p == '\n') fprintf(out, "%*s", TPC_CLI_HELP_COLUMN, "");
  }
  fputc('\n', out);
}

void tpc_cli_print_help(const tpc_cli_t* cli, FILE* out) {
  fprintf(out, "OVERVIEW: %s — %s\n\nUSAGE: %s %s\n\nOPTIONS:\n", cli->tool, cli->overview, cli->tool, cli->usage);
  char left[128];
  for (const tpc_cli_option_t* o = cli->options; o->name; ++o) {
    int n = o->short_name ? snprintf(left, sizeof left, "-%c, --%s", o->short_name, o->name)
                          : snprintf(left, sizeof left, "    --%s", o->name);
    if (o->value && n > 0 && (size_t)n < sizeof left) snprintf(left + n, sizeof left - (size_t)n, " %s", o->value);
    tpc__help_row(out, left, o->help);
  }
  tpc__help_row(out, "-h, --help", "Print this help");
  tpc__help_row(out, "    --version", "Print the version and what tpc was built with");
  if (cli->print_more_help) {
    fputc('\n', out);
    cli->print_more_help(out);
  }
}

void tpc_cli_print_version(const char* tool, FILE* out) {
  fprintf(out, "%s %s (git %s)\n", tool, TPC_VERSION, TPC_GIT_HASH);
  fprintf(out, "  built with MLIR %s; CUDA backend: %s\n", TPC_MLIR_VERSION, TPC_CUDA_VERSIONS);
}

// Edit distance between |a| and |b| (insertions, deletions, substitutions; short strings).
static size_t tpc__edit_distance(const char* a, const char* b) {
  size_t n = strlen(a), m = strlen(b);
  size_t* row = malloc((m + 1) * sizeof *row);
  if (!row) return (size_t)-1;
  for (size_t j = 0; j <= m; ++j) row[j] = j;
  for (size_t i = 1; i <= n; ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= m; ++j) {
      size_t up = row[j], best = diag + (a[i - 1] != b[j - 1]);
      if (up + 1 < best) best = up + 1;
      if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
      diag = up;
      row[j] = best;
    }
  }
  size_t d = row[m];
  free(row);
  return d;
}

const char* tpc_cli_closest(const tpc_cli_t* cli, const char* written) {
  static char best[128];
  size_t best_d = 4;  // suggest nothing more than three edits away
  const char* w = written;
  while (*w == '-') ++w;  // compare names, so that "-hash" finds "--hash"
  const char* builtin[] = {"help", "version", NULL};
  for (int pass = 0; pass < 3; ++pass) {
    for (int i = 0;; ++i) {
      const char* name = pass == 0   ? cli->options[i].name
                         : pass == 1 ? builtin[i]
                                     : (cli->extra_name ? cli->extra_name(i) : NULL);
      if (!name) break;
      size_t d = tpc__edit_distance(w, name);
      if (d < best_d) {
        best_d = d;
        snprintf(best, sizeof best, "--%s", name);
      }
    }
  }
  return best_d < 4 ? best : NULL;
}

static bool tpc__is_extra(const tpc_cli_t* cli, const char* name) {
  if (!cli->extra_name) return false;
  for (int i = 0; cli->extra_name(i); ++i)
    if (!strcmp(cli->extra_name(i), name)) return true;
  return false;
}

static const tpc_cli_option_t* tpc__find_long(const tpc_cli_t* cli, const char* name) {
  for (const tpc_cli_option_t* o = cli->options; o->name; ++o)
    if (!strcmp(o->name, name)) return o;
  return NULL;
}

static const tpc_cli_option_t* tpc__find_short(const tpc_cli_t* cli, char c) {
  for (const tpc_cli_option_t* o = cli->options; o->name; ++o)
    if (c && o->short_name == c) return o;
  return NULL;
}

static int tpc__unknown(const tpc_cli_t* cli, const char* written) {
  const char* near = tpc_cli_closest(cli, written);
  if (near)
    tpc_cli_error(cli, "unknown option '%s'; did you mean '%s'? (see --help)", written, near);
  else
    tpc_cli_error(cli, "unknown option '%s' (see --help)", written);
  return TPC_CLI_ERROR;
}

// Returns |o|'s id with its value taken from |inline_value| or the next argument.
// |short_form|: the option was written as -c, and errors name it so.
static int tpc__take_value(const tpc_cli_t* cli, const tpc_cli_option_t* o, bool short_form, const char* arg,
                           const char* inline_value, int argc, char** argv, tpc_cli_state_t* st) {
  char written[136];
  if (short_form)
    snprintf(written, sizeof written, "-%c", o->short_name);
  else
    snprintf(written, sizeof written, "--%s", o->name);
  st->option = o;
  if (!o->value) {
    if (inline_value) {
      tpc_cli_error(cli, "%s takes no value; got '%s'", written, arg);
      return TPC_CLI_ERROR;
    }
    st->value = NULL;
    return o->id;
  }
  if (inline_value) {
    st->value = inline_value;
    return o->id;
  }
  if (st->index >= argc) {
    tpc_cli_error(cli, "%s needs a value (%s)", written, o->value);
    return TPC_CLI_ERROR;
  }
  st->value = argv[st->index++];
  return o->id;
}

int tpc_cli_next(const tpc_cli_t* cli, int argc, char** argv, tpc_cli_state_t* st) {
  if (st->index < 1) st->index = 1;
  for (;;) {
    st->option = NULL;
    st->name = NULL;
    st->value = NULL;
    if (st->index >= argc) return TPC_CLI_END;
    const char* arg = argv[st->index++];
    if (st->options_done || arg[0] != '-' || arg[1] == '\0') {
      st->value = arg;
      return TPC_CLI_POSITIONAL;
    }
    if (!strcmp(arg, "--")) {
      st->options_done = true;
      continue;
    }
    // A long option: "--name", "--name=value", or "-name" where the tool allows it and the
    // name is a known long one (otherwise "-ofile" stays -o with value "file").
    const char* body = arg[1] == '-' ? arg + 2 : arg + 1;
    const char* eq = strchr(body, '=');
    size_t len = eq ? (size_t)(eq - body) : strlen(body);
    const char* inline_value = eq ? eq + 1 : NULL;
    if (len >= sizeof st->buffer) return tpc__unknown(cli, arg);
    memcpy(st->buffer, body, len);
    st->buffer[len] = '\0';
    const char* name = st->buffer;
    bool dashdash = arg[1] == '-';
    bool long_form = dashdash || (cli->single_dash_long && len > 1 &&
                                  (tpc__find_long(cli, name) || tpc__is_extra(cli, name) ||
                                   !strcmp(name, "help") || !strcmp(name, "version")));
    if (long_form) {
      if (!strcmp(name, "help") || !strcmp(name, "version")) {
        if (inline_value) {
          tpc_cli_error(cli, "--%s takes no value; got '%s'", name, arg);
          return TPC_CLI_ERROR;
        }
        if (name[0] == 'h')
          tpc_cli_print_help(cli, stdout);
        else
          tpc_cli_print_version(cli->tool, stdout);
        return TPC_CLI_EXIT;
      }
      const tpc_cli_option_t* o = tpc__find_long(cli, name);
      if (o) return tpc__take_value(cli, o, false, arg, inline_value, argc, argv, st);
      if (tpc__is_extra(cli, name)) {
        st->name = name;
        st->value = inline_value;
        return TPC_CLI_EXTRA;
      }
      return tpc__unknown(cli, arg);
    }
    // A short option: "-o file", "-ofile"; "-h" is help.
    if (arg[1] == 'h' && arg[2] == '\0') {
      tpc_cli_print_help(cli, stdout);
      return TPC_CLI_EXIT;
    }
    const tpc_cli_option_t* o = tpc__find_short(cli, arg[1]);
    if (!o) return tpc__unknown(cli, arg);
    return tpc__take_value(cli, o, true, arg, arg[2] ? arg + 2 : NULL, argc, argv, st);
  }
}

bool tpc_cli_u64(const tpc_cli_t* cli, const tpc_cli_state_t* st, uint64_t min, uint64_t max, const char* what,
                 uint64_t* out_value) {
  const char* s = st->value ? st->value : "";
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  bool ok = s[0] >= '0' && s[0] <= '9' && !errno && end && *end == '\0' && v >= min && v <= max;
  if (!ok) {
    const char* name = st->option ? st->option->name : "?";
    if (what)
      tpc_cli_error(cli, "--%s must be %s; got '%s'", name, what, s);
    else
      tpc_cli_error(cli, "--%s must be %llu..%llu; got '%s'", name, (unsigned long long)min,
                    (unsigned long long)max, s);
    return false;
  }
  *out_value = v;
  return true;
}

bool tpc_cli_number(const tpc_cli_t* cli, const tpc_cli_state_t* st, double lo, double hi, double* out_value) {
  const char* s = st->value ? st->value : "";
  char* end = NULL;
  double x = strtod(s, &end);
  if (!end || end == s || *end || !(x >= lo && x <= hi)) {
    tpc_cli_error(cli, "--%s must be a number in [%g, %g]; got '%s'", st->option ? st->option->name : "?", lo, hi, s);
    return false;
  }
  *out_value = x;
  return true;
}

bool tpc_cli_count(const tpc_cli_t* cli, const tpc_cli_state_t* st, int64_t lo, int64_t* out_value) {
  const char* s = st->value ? st->value : "";
  char* end = NULL;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (!end || end == s || *end || errno || x < lo) {
    tpc_cli_error(cli, "--%s must be an integer >= %lld; got '%s'", st->option ? st->option->name : "?", (long long)lo,
                  s);
    return false;
  }
  *out_value = x;
  return true;
}
