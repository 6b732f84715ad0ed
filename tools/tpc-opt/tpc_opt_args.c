// tpc-opt's command line (see tpc_opt_args.h): the option table, pass flags, named pipelines and
// textual pipelines (--pass-pipeline='builtin.module(tp-shard{mesh=tp=2},canonicalize)').
#define _POSIX_C_SOURCE 200809L  // strndup
#include "tpc_opt_args.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline.h"
#include "tpc_cli.h"

enum {
  OPT_OUTPUT, OPT_SPLIT_INPUT, OPT_TP_PIPELINE, OPT_PASS_PIPELINE, OPT_MESH, OPT_NUMERICS, OPT_STRATEGY,
  OPT_SEQUENCE_PARALLEL, OPT_VERIFY_EACH, OPT_NO_VERIFY_EACH, OPT_VERIFY_DIAGNOSTICS, OPT_PRINT_DEBUGINFO,
  OPT_PRINT_GENERIC, OPT_PRINT_BEFORE_ALL, OPT_PRINT_AFTER_ALL, OPT_PRINT_AFTER_CHANGE, OPT_PRINT_AFTER_FAILURE,
  OPT_PRINT_MODULE_SCOPE, OPT_TIMING, OPT_GTP_PREFETCH, OPT_GTP_KEEP, OPT_GTP_WGRAD, OPT_FUSED_NORM_ALGORITHM,
};

static const tpc_cli_option_t kOptions[] = {
    {"output", 'o', "FILE", "Write the output to FILE (default: stdout)", OPT_OUTPUT},
    {"split-input-file", 0, NULL, "Process each `// -----` separated chunk on its own", OPT_SPLIT_INPUT},
    {"tp-pipeline", 0, "NAME", "Run a named pipeline (see below)", OPT_TP_PIPELINE},
    {"pass-pipeline", 0, "PIPELINE",
     "Run a textual pipeline, as mlir-opt: 'builtin.module(tp-shard{mesh=tp=2},canonicalize)'.\n"
     "tp passes take module settings as options: tp-shard{mesh=tp=4,dp=2 sequence-parallel=true},\n"
     "tp-invariant{numerics=invariant strategy=canonical}, tp-gtp{prefetch=2 keep=true},\n"
     "tp-lower-runtime{fused-norm-algorithm=one-shot}; they apply before the pipeline runs",
     OPT_PASS_PIPELINE},
    {"mesh", 0, "tp=4[,dp=2]", "Declare the device mesh as tp.mesh @world (replacing one of that name)", OPT_MESH},
    {"numerics", 0, "MODE", "Set tp.numerics: fast, invariant or exact (default: the module's)", OPT_NUMERICS},
    {"strategy", 0, "S", "Set tp.strategy for invariant numerics: canonical (default) or gather", OPT_STRATEGY},
    {"sequence-parallel", 0, NULL, "Set sequence_parallel = true on every column/row-parallel linear",
     OPT_SEQUENCE_PARALLEL},
    {"gtp-prefetch", 0, "N",
     "Set tp.gtp_prefetch: tp-gtp starts a weight's all-gather N contractions before its use\n"
     "(default: chosen by tp-gtp's cost model; 0: just before the use)",
     OPT_GTP_PREFETCH},
    {"gtp-keep", 0, NULL, "Set tp.gtp_keep: gather each GTP weight once and keep it for the backward", OPT_GTP_KEEP},
    {"gtp-wgrad", 0, "MODE",
     "Set tp.gtp_wgrad: how a GTP linear's weight gradient reaches its shard: scatter, gather or\n"
     "auto (default: tp-gtp's cost model)",
     OPT_GTP_WGRAD},
    {"fused-norm-algorithm", 0, "A",
     "Set algorithm on every fused norm left at \"auto\": auto (default), one-shot, two-shot or\n"
     "composition (one-shot and two-shot leave the reduce-scatter form at auto)",
     OPT_FUSED_NORM_ALGORITHM},
    {"verify-each", 0, NULL, "Run tp-verify after every pass (default in Debug builds)", OPT_VERIFY_EACH},
    {"no-verify-each", 0, NULL, "Do not run tp-verify between passes", OPT_NO_VERIFY_EACH},
    {"verify-diagnostics", 0, NULL,
     "Check the diagnostics against `// expected-error {{...}}` comments (also\n"
     "expected-warning, -note, -remark; @+N, @-N, @above, @below) instead of printing them",
     OPT_VERIFY_DIAGNOSTICS},
    {"mlir-print-debuginfo", 0, NULL, "Print locations", OPT_PRINT_DEBUGINFO},
    {"mlir-print-op-generic", 0, NULL, "Print every op in generic form", OPT_PRINT_GENERIC},
    {"mlir-print-ir-before-all", 0, NULL, "Print the IR before every pass (on stderr)", OPT_PRINT_BEFORE_ALL},
    {"mlir-print-ir-after-all", 0, NULL, "Print the IR after every pass (on stderr)", OPT_PRINT_AFTER_ALL},
    {"mlir-print-ir-after-change", 0, NULL, "With --mlir-print-ir-after-all, only after passes that changed it",
     OPT_PRINT_AFTER_CHANGE},
    {"mlir-print-ir-after-failure", 0, NULL, "Print the IR after the pass that failed (on stderr)",
     OPT_PRINT_AFTER_FAILURE},
    {"mlir-print-ir-module-scope", 0, NULL, "Print the whole module, not just the op a pass ran on",
     OPT_PRINT_MODULE_SCOPE},
    {"mlir-timing", 0, NULL, "Print the time each pass took (on stderr)", OPT_TIMING},
    {NULL, 0, NULL, NULL, 0}};

// The registered passes are flags too ("--tp-shard").
static const char* tpc__pass_name(int i) { return tpc_pass_registry[i].argument; }

static void tpc__more_help(FILE* out) {
  fprintf(out, "PASSES (run in the order given):\n");
  for (const tpc_pass_entry_t* p = tpc_pass_registry; p->argument; ++p)
    fprintf(out, "  --%-24s %s\n", p->argument, p->description);
  fprintf(out, "\nPIPELINES (--tp-pipeline=<name>):\n");
  for (const tpc_pipeline_entry_t* p = tpc_pipeline_registry; p->name; ++p)
    fprintf(out, "  %-26s %s [%s]\n", p->name, p->description, p->passes);
}

static const tpc_cli_t kCli = {"tpc-opt", "parse, verify and transform tp dialect IR", "[options] [<input file> | -]",
                               kOptions, true, tpc__pass_name, tpc__more_help};

// Appends a copy of |text| (|len| bytes) to the pipeline.
static bool tpc__add_element(tpc_opt_options_t* o, const char* text, size_t len) {
  char** grown = realloc(o->elements, (size_t)(o->num_elements + 1) * sizeof *grown);
  char* copy = strndup(text, len);
  if (!grown || !copy) {
    free(copy);
    if (grown) o->elements = grown;
    tpc_cli_error(&kCli, "out of memory");
    return false;
  }
  o->elements = grown;
  o->elements[o->num_elements++] = copy;
  return true;
}

// Appends a named pipeline's passes (comma-separated; none has nested commas).
static bool tpc__add_named_pipeline(tpc_opt_options_t* o, const char* name) {
  const tpc_pipeline_entry_t* pl = tpc_pipeline_lookup(name);
  if (!pl) {
    tpc_cli_error(&kCli, "unknown pipeline '%s' (see --help for the list)", name);
    return false;
  }
  for (const char* p = pl->passes; *p;) {
    size_t n = strcspn(p, ",");
    if (!tpc__add_element(o, p, n)) return false;
    p += n + (p[n] == ',');
  }
  return true;
}

// Checks and sets --numerics or --strategy. The value kept is a literal, not |value|: pass options
// live in a copy of the pipeline text that is freed after parsing.
static bool tpc__set_numerics(tpc_opt_options_t* o, const char* flag, const char* value) {
  static const char* const kValues[] = {"fast", "invariant", "exact", "canonical", "gather"};
  char error[256];
  if (!tpc_numerics_option_check(flag, value, error, sizeof error)) {
    tpc_cli_error(&kCli, "%s", error);
    return false;
  }
  for (size_t i = 0; i < sizeof kValues / sizeof kValues[0]; ++i)
    if (!strcmp(value, kValues[i])) value = kValues[i];
  *(flag[0] == 'n' ? &o->numerics : &o->strategy) = value;
  return true;
}

static bool tpc__set_mesh(tpc_opt_options_t* o, const char* value) {
  char error[256];
  if (!tpc_mesh_spec_parse(value, &o->mesh, error, sizeof error)) {
    tpc_cli_error(&kCli, "%s", error);
    return false;
  }
  o->has_mesh = true;
  return true;
}

static bool tpc__set_gtp_prefetch(tpc_opt_options_t* o, const char* value) {
  char error[256];
  if (!tpc_gtp_prefetch_option_check(value, &o->gtp_prefetch, error, sizeof error)) {
    tpc_cli_error(&kCli, "%s", error);
    return false;
  }
  o->has_gtp_prefetch = true;
  return true;
}

static bool tpc__set_gtp_wgrad(tpc_opt_options_t* o, const char* value) {
  char error[256];
  if (!tpc_gtp_wgrad_option_check(value, error, sizeof error)) {
    tpc_cli_error(&kCli, "%s", error);
    return false;
  }
  o->gtp_wgrad = value;
  return true;
}

static bool tpc__set_fused_norm_algorithm(tpc_opt_options_t* o, const char* value) {
  char error[256];
  int algorithm = tpc_fused_norm_algorithm_option_parse(value, error, sizeof error);
  if (algorithm < 0) {
    tpc_cli_error(&kCli, "%s", error);
    return false;
  }
  o->fused_norm_algorithm = algorithm;
  return true;
}

// Applies the options of a tp pass in a textual pipeline: |opts| is the text between the braces,
// space-separated key=value pairs.
static bool tpc__pass_options(tpc_opt_options_t* o, const char* pass, char* opts) {
  for (char* save = NULL, *kv = strtok_r(opts, " \t", &save); kv; kv = strtok_r(NULL, " \t", &save)) {
    char* eq = strchr(kv, '=');
    const char* value = eq ? eq + 1 : "true";
    if (eq) *eq = '\0';
    bool shard = !strcmp(pass, "tp-shard"), invariant = !strcmp(pass, "tp-invariant"), gtp = !strcmp(pass, "tp-gtp");
    bool lower = !strcmp(pass, "tp-lower-runtime") || !strcmp(pass, "tp-lower-runtime-poison");
    bool ok;
    if (shard && !strcmp(kv, "mesh")) {
      ok = tpc__set_mesh(o, value);
    } else if (shard && !strcmp(kv, "sequence-parallel")) {
      if (strcmp(value, "true") && strcmp(value, "false") && strcmp(value, "1") && strcmp(value, "0")) {
        tpc_cli_error(&kCli, "%s{sequence-parallel=...} must be true or false; got '%s'", pass, value);
        return false;
      }
      o->sequence_parallel = !strcmp(value, "true") || !strcmp(value, "1");
      ok = true;
    } else if (invariant && (!strcmp(kv, "numerics") || !strcmp(kv, "strategy"))) {
      ok = tpc__set_numerics(o, kv, value);
    } else if (gtp && !strcmp(kv, "prefetch")) {
      ok = tpc__set_gtp_prefetch(o, value);
    } else if (gtp && !strcmp(kv, "keep")) {
      if (strcmp(value, "true") && strcmp(value, "false") && strcmp(value, "1") && strcmp(value, "0")) {
        tpc_cli_error(&kCli, "%s{keep=...} must be true or false; got '%s'", pass, value);
        return false;
      }
      o->gtp_keep = !strcmp(value, "true") || !strcmp(value, "1");
      ok = true;
    } else if (gtp && !strcmp(kv, "wgrad")) {
      ok = tpc__set_gtp_wgrad(o, value);
    } else if (lower && !strcmp(kv, "fused-norm-algorithm")) {
      ok = tpc__set_fused_norm_algorithm(o, value);
    } else {
      tpc_cli_error(&kCli, "pass %s has no option '%s' (%s)", pass, kv,
                    shard       ? "it takes mesh and sequence-parallel"
                    : invariant ? "it takes numerics and strategy"
                    : gtp       ? "it takes prefetch, keep and wgrad"
                    : lower     ? "it takes fused-norm-algorithm"
                                : "it takes none");
      return false;
    }
    if (!ok) return false;
  }
  return true;
}

// Parses 'builtin.module(elem,elem,...)': tp passes (with options) become pass arguments, every
// other element is handed to MLIR's parser as it is ("mlir:<element>").
static bool tpc__add_textual_pipeline(tpc_opt_options_t* o, char* text) {
  while (*text == ' ') ++text;
  size_t len = strlen(text);
  while (len && text[len - 1] == ' ') text[--len] = '\0';
  const char* anchor = "builtin.module(";
  if (strncmp(text, anchor, strlen(anchor)) != 0 || len == 0 || text[len - 1] != ')') {
    tpc_cli_error(&kCli, "--pass-pipeline must be anchored on the module: 'builtin.module(pass,pass,...)'; got '%s'",
                  text);
    return false;
  }
  text[len - 1] = '\0';
  char* p = text + strlen(anchor);
  while (*p) {
    // One element: up to the next comma outside parentheses and braces.
    int depth = 0;
    char* end = p;
    for (; *end && !(depth == 0 && *end == ','); ++end) {
      if (*end == '(' || *end == '{') ++depth;
      if ((*end == ')' || *end == '}') && --depth < 0) break;
    }
    if (depth != 0) {
      tpc_cli_error(&kCli, "--pass-pipeline has unbalanced brackets near '%s'", p);
      return false;
    }
    char* next = *end ? end + 1 : end;
    *end = '\0';
    while (*p == ' ') ++p;
    for (char* t = p + strlen(p); t > p && t[-1] == ' ';) *--t = '\0';
    if (*p == '\0') {
      tpc_cli_error(&kCli, "--pass-pipeline has an empty element");
      return false;
    }
    size_t name_len = strcspn(p, "{(");
    char name[128];
    snprintf(name, sizeof name, "%.*s", (int)name_len, p);
    if (tpc_pass_lookup(name)) {
      if (p[name_len] == '(') {
        tpc_cli_error(&kCli, "pass %s runs on the module: it takes no nested pipeline", name);
        return false;
      }
      if (p[name_len] == '{') {
        char* close = strrchr(p, '}');
        if (!close || close[1] != '\0') {
          tpc_cli_error(&kCli, "pass %s: options go in one {...} at the end; got '%s'", name, p);
          return false;
        }
        *close = '\0';
        if (!tpc__pass_options(o, name, p + name_len + 1)) return false;
      }
      if (!tpc__add_element(o, name, strlen(name))) return false;
    } else {
      char element[4096];
      int n = snprintf(element, sizeof element, "mlir:%s", p);
      if (n < 0 || (size_t)n >= sizeof element) {
        tpc_cli_error(&kCli, "--pass-pipeline element too long: '%.40s...'", p);
        return false;
      }
      if (!tpc__add_element(o, element, (size_t)n)) return false;
    }
    p = next;
  }
  return true;
}

int tpc_opt_parse_args(int argc, char** argv, tpc_opt_options_t* o) {
#ifdef TPC_DEBUG_BUILD
  o->verify_each = true;
#endif
  tpc_cli_state_t st = {0};
  for (int id; (id = tpc_cli_next(&kCli, argc, argv, &st)) != TPC_CLI_END;) {
    const char* v = st.value;
    bool ok = true;
    switch (id) {
      case TPC_CLI_EXIT: return 0;
      case TPC_CLI_ERROR: return -1;
      case TPC_CLI_POSITIONAL:
        if (o->input) {
          tpc_cli_error(&kCli, "more than one input file ('%s' and '%s')", o->input, v);
          return -1;
        }
        o->input = v;
        break;
      case TPC_CLI_EXTRA:  // a pass
        if (v) {
          tpc_cli_error(&kCli, "--%s takes no value; pass options go in --pass-pipeline='builtin.module(%s{...})'",
                        st.name, st.name);
          return -1;
        }
        ok = tpc__add_element(o, st.name, strlen(st.name));
        break;
      case OPT_PASS_PIPELINE: {
        char* text = strdup(v);  // parsed in place
        ok = text && tpc__add_textual_pipeline(o, text);
        if (!text) tpc_cli_error(&kCli, "out of memory");
        free(text);
        break;
      }
      case OPT_OUTPUT: o->output = v; break;
      case OPT_SPLIT_INPUT: o->split_input = true; break;
      case OPT_TP_PIPELINE: ok = tpc__add_named_pipeline(o, v); break;
      case OPT_MESH: ok = tpc__set_mesh(o, v); break;
      case OPT_NUMERICS:
      case OPT_STRATEGY: ok = tpc__set_numerics(o, st.option->name, v); break;
      case OPT_SEQUENCE_PARALLEL: o->sequence_parallel = true; break;
      case OPT_VERIFY_EACH: o->verify_each = true; break;
      case OPT_NO_VERIFY_EACH: o->verify_each = false; break;
      case OPT_VERIFY_DIAGNOSTICS: o->verify_diagnostics = true; break;
      case OPT_PRINT_DEBUGINFO: o->print_debuginfo = true; break;
      case OPT_PRINT_GENERIC: o->generic = true; break;
      case OPT_PRINT_BEFORE_ALL: o->print_before_all = true; break;
      case OPT_PRINT_AFTER_ALL: o->print_after_all = true; break;
      case OPT_PRINT_AFTER_CHANGE: o->print_after_change = true; break;
      case OPT_PRINT_AFTER_FAILURE: o->print_after_failure = true; break;
      case OPT_PRINT_MODULE_SCOPE: o->print_module_scope = true; break;
      case OPT_TIMING: o->timing = true; break;
      case OPT_GTP_PREFETCH: ok = tpc__set_gtp_prefetch(o, v); break;
      case OPT_GTP_KEEP: o->gtp_keep = true; break;
      case OPT_GTP_WGRAD: ok = tpc__set_gtp_wgrad(o, v); break;
      case OPT_FUSED_NORM_ALGORITHM: ok = tpc__set_fused_norm_algorithm(o, v); break;
      default: tpc_cli_error(&kCli, "internal error: option %d has no handler", id); return -1;
    }
    if (!ok) return -1;
  }
  if (!o->input) o->input = "-";
  return 1;
}

void tpc_opt_options_free(tpc_opt_options_t* o) {
  for (int i = 0; i < o->num_elements; ++i) free(o->elements[i]);
  free(o->elements);
  o->elements = NULL;
  o->num_elements = 0;
}
