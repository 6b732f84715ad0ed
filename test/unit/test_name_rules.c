// Unit tests of runtime/tprt_name_rules (argument-name rules: parsing with one exact message per
// error, matching with backtracking, first rule wins, loading from a file).
#define _POSIX_C_SOURCE 200809L

#include <stdbool.h>
#include <stdlib.h>

#include "test_checkpoint_util.h"
#include "test_safetensors_util.h"
#include "tprt_name_rules.h"

//===----------------------------------------------------------------------===//
// Name rules: matching
//===----------------------------------------------------------------------===//

// Expects |name| to map to the |n| names in |want| under |rules|.
static void ck__expect_apply(const tprt_name_rules_t* rules, const char* name, int n, const char* const* want) {
  int count = -1;
  char** names = NULL;
  tprt_status_t s = tprt_name_rules_apply(rules, name, &count, &names);
  if (s) {
    TPRT__FAIL("apply(\"%s\") failed: %s", name, tprt_status_message(s));
    tprt_status_free(s);
    return;
  }
  if (count != n) TPRT__FAIL("apply(\"%s\"): %d names, expected %d", name, count, n);
  for (int i = 0; names && i < count && i < n; ++i)
    if (!names[i] || strcmp(names[i], want[i]) != 0)
      TPRT__FAIL("apply(\"%s\"): name %d is \"%s\", expected \"%s\"", name, i, names[i] ? names[i] : "(null)", want[i]);
  if (names && count >= 0 && names[count] != NULL) TPRT__FAIL("apply(\"%s\"): the names are not NULL-terminated", name);
  tprt_name_rules_free_names(names);
}

#define CK__APPLY(rules, name, ...)                                      \
  do {                                                                   \
    static const char* const ck__want[] = {__VA_ARGS__};                 \
    ck__expect_apply((rules), (name), (int)(sizeof ck__want / sizeof ck__want[0]), ck__want); \
  } while (0)

static tprt_name_rules_t* ck__parse(const char* text) {
  tprt_name_rules_t* rules = NULL;
  TPRT_EXPECT_OK(tprt_name_rules_parse("rules.txt", text, &rules));
  return rules;
}

TPRT_TEST(name_rules_fuse_sources_and_map_unmatched_names_to_themselves) {
  tprt_name_rules_t* rules = ck__parse(
      "# SwiGLU FC1 is gate and up, fused\n"
      "w1_{i} = a.{i}.g + a.{i}.u\n"
      "\n"
      "   \t\n"
      "w2_{i} = a.{i}.d   # down\n");
  if (!rules) return;
  CK__APPLY(rules, "w1_12", "a.12.g", "a.12.u");
  CK__APPLY(rules, "w1_0", "a.0.g", "a.0.u");
  CK__APPLY(rules, "w1_007", "a.007.g", "a.007.u");  // the digits as written
  CK__APPLY(rules, "w2_3", "a.3.d");
  // No rule matches: the name is its own tensor.
  CK__APPLY(rules, "norm.weight", "norm.weight");
  CK__APPLY(rules, "w1_", "w1_");          // a placeholder needs one digit or more
  CK__APPLY(rules, "w1_x", "w1_x");        // ... and only digits
  CK__APPLY(rules, "w1_12x", "w1_12x");    // the whole name must match
  CK__APPLY(rules, "xw1_12", "xw1_12");
  CK__APPLY(rules, "w1_1.2", "w1_1.2");
  tprt_name_rules_free(rules);
  // No rules at all.
  CK__APPLY(NULL, "w1_12", "w1_12");
  rules = ck__parse("");
  if (rules) CK__APPLY(rules, "w1_12", "w1_12");
  tprt_name_rules_free(rules);
  rules = ck__parse("# only a comment\n\n");
  if (rules) CK__APPLY(rules, "w1_12", "w1_12");
  tprt_name_rules_free(rules);
}

TPRT_TEST(name_rules_first_matching_rule_wins) {
  tprt_name_rules_t* rules = ck__parse(
      "w{i} = first.{i}\n"
      "w{j} = second.{j}\n"
      "w1 = special\n"
      "v1 = exact\n"
      "v{i} = general.{i}\n");
  if (!rules) return;
  CK__APPLY(rules, "w3", "first.3");
  CK__APPLY(rules, "w1", "first.1");  // the earlier, general rule wins over the later, exact one
  CK__APPLY(rules, "v1", "exact");
  CK__APPLY(rules, "v2", "general.2");
  tprt_name_rules_free(rules);
}

TPRT_TEST(name_rules_several_placeholders_and_backtracking) {
  tprt_name_rules_t* rules = ck__parse(
      "l{a}.e{b} = x.{b}.{a}\n"
      "w{i}0 = y.{i}\n"
      "a{x}1{y} = t.{x}.{y}\n"
      "m{i}_{ii} = z.{ii}.{i}.{ii}\n"
      "{n}.bias = b.{n}\n"
      "k{i} = c.{i} + d + e.{i}.{i}\n");
  if (!rules) return;
  CK__APPLY(rules, "l3.e10", "x.10.3");
  CK__APPLY(rules, "l123.e4", "x.4.123");
  CK__APPLY(rules, "w120", "y.12");  // {i} gives back its last digit to the literal '0'
  CK__APPLY(rules, "w00", "y.0");
  CK__APPLY(rules, "w0", "w0");      // {i} would be empty
  CK__APPLY(rules, "a1211", "t.12.1");  // {x} backtracks twice: 1211, 121 fail, 12 then 1{y} = 11
  CK__APPLY(rules, "m1_2", "z.2.1.2");   // {i} and {ii}: placeholders whose names share a prefix
  CK__APPLY(rules, "17.bias", "b.17");
  CK__APPLY(rules, "k5", "c.5", "d", "e.5.5");
  tprt_name_rules_free(rules);
}

TPRT_TEST(name_rules_blanks_comments_and_crlf) {
  tprt_name_rules_t* rules = ck__parse(
      "  # leading comment = with an equals sign + and a plus\r\n"
      "\t w1_{i}\t=\ta.{i}.g   +   a.{i}.u   # = trailing comment\r\n"
      "\r\n"
      "w2 = b");  // no final newline
  if (!rules) return;
  CK__APPLY(rules, "w1_4", "a.4.g", "a.4.u");
  CK__APPLY(rules, "w2", "b");
  tprt_name_rules_free(rules);
}

//===----------------------------------------------------------------------===//
// Name rules: one exact message per error
//===----------------------------------------------------------------------===//

typedef struct {
  const char* text;
  const char* message;  // the whole message
} ck__rule_error_t;

static const ck__rule_error_t ck__rule_errors[] = {
    {"w1_{i} = a.{i}\nw2 a.b\n", "rules.txt:2: a rule is '<argument> = <tensor> [+ <tensor> ...]' with one '='"},
    {"# c\n\n# d\nw2_{i} = a = b\n", "rules.txt:4: a rule is '<argument> = <tensor> [+ <tensor> ...]' with one '='"},
    {"w = x # = is commented out\nw == x\n", "rules.txt:2: a rule is '<argument> = <tensor> [+ <tensor> ...]' with one '='"},
    {"  = a.b\n", "rules.txt:1: the argument pattern has an empty name"},
    {"w{i} = x.{j}\n", "rules.txt:1: '{j}' in 'x.{j}' does not appear in 'w{i}'"},
    {"w{i} = x.{i} + y.{i}.{j}\n", "rules.txt:1: '{j}' in 'y.{i}.{j}' does not appear in 'w{i}'"},
    {"w{ii} = x.{i}\n", "rules.txt:1: '{i}' in 'x.{i}' does not appear in 'w{ii}'"},
    {"w{i}{j} = x.{i}.{j}\n",
     "rules.txt:1: the argument pattern has two placeholders side by side (which digits belong to which?)"},
    {"w{i = x\n", "rules.txt:1: the argument pattern has a '{' not followed by a name and '}'"},
    {"w{} = x\n", "rules.txt:1: the argument pattern has a '{' not followed by a name and '}'"},
    {"w{i.j} = x\n", "rules.txt:1: the argument pattern has a '{' not followed by a name and '}'"},
    {"wi} = x\n", "rules.txt:1: the argument pattern has a '}' without its '{'"},
    {"w{i} = x.{i\n", "rules.txt:1: tensor pattern 1 has a '{' not followed by a name and '}'"},
    {"w{i} = x.{i} + y.{i\n", "rules.txt:1: tensor pattern 2 has a '{' not followed by a name and '}'"},
    {"w{i} = x.{i} +\n", "rules.txt:1: tensor pattern 2 has an empty name"},
    {"w{i} =\n", "rules.txt:1: tensor pattern 1 has an empty name"},
};

TPRT_TEST(name_rules_parse_errors_give_path_line_and_problem) {
  for (size_t i = 0; i < sizeof ck__rule_errors / sizeof ck__rule_errors[0]; ++i) {
    tprt_name_rules_t* rules = (tprt_name_rules_t*)&rules;  // must be reset to NULL
    char what[256];
    snprintf(what, sizeof what, "parse(\"%s\")", ck__rule_errors[i].text);
    ck__expect_exact(tprt_name_rules_parse("rules.txt", ck__rule_errors[i].text, &rules), TPRT_STATUS_INVALID_ARGUMENT,
                     ck__rule_errors[i].message, what);
    if (rules != NULL) {
      TPRT__FAIL("%s: *out is not NULL after a failure", what);
      if (rules != (tprt_name_rules_t*)&rules) tprt_name_rules_free(rules);
    }
  }
}

TPRT_TEST(name_rules_load_reads_a_file) {
  tprt__tmpdir_t dir;
  tprt__tmpdir_create(&dir);
  char path[512], want[1024];
  tprt__join(&dir, "rules.txt", path, sizeof path);
  ck__write_text(&dir, "rules.txt", "w1_{i} = a.{i}.g + a.{i}.u\n");
  tprt_name_rules_t* rules = NULL;
  TPRT_EXPECT_OK(tprt_name_rules_load(path, &rules));
  if (rules) CK__APPLY(rules, "w1_12", "a.12.g", "a.12.u");
  tprt_name_rules_free(rules);
  // Messages name the file.
  ck__write_text(&dir, "rules.txt", "\nw1_{i} a.{i}.g\n");
  snprintf(want, sizeof want, "%s:2: a rule is '<argument> = <tensor> [+ <tensor> ...]' with one '='", path);
  ck__expect_exact(tprt_name_rules_load(path, &rules), TPRT_STATUS_INVALID_ARGUMENT, want, "load(bad rule)");
  tprt__write_bytes(path, "w = x\n\0", 7);
  snprintf(want, sizeof want, "%s: not a text file (it holds a NUL byte)", path);
  ck__expect_exact(tprt_name_rules_load(path, &rules), TPRT_STATUS_INVALID_ARGUMENT, want, "load(NUL)");
  tprt__join(&dir, "missing.txt", path, sizeof path);
  snprintf(want, sizeof want, "%s: cannot open: ", path);
  ck__expect_fail(tprt_name_rules_load(path, &rules), TPRT_STATUS_NOT_FOUND, want, "load(missing)");
  TPRT_EXPECT(rules == NULL);
  tprt__tmpdir_remove(&dir);
}
