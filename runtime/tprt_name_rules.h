// Rules that name the checkpoint tensors an argument is made of (docs/io.md, "Tensor names").
//
// A rules file has one rule per line, '#' starts a comment:
//   <argument pattern> = <tensor pattern> [+ <tensor pattern> ...]
// e.g.
//   w1_{i} = model.layers.{i}.mlp.gate_proj.weight + model.layers.{i}.mlp.up_proj.weight
//   w2_{i} = model.layers.{i}.mlp.down_proj.weight
// A placeholder {name} in the argument pattern matches one or more decimal digits; the tensor
// patterns use the values it matched. The first rule whose argument pattern matches a whole
// argument name gives its tensors; several are concatenated along the first dimension (the
// fused [gate; up] weight of a SwiGLU FC1). An argument no rule matches is its own tensor.
#ifndef TPRT_NAME_RULES_H_
#define TPRT_NAME_RULES_H_

#include "tprt_status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tprt_name_rules_t tprt_name_rules_t;

/// Parses the rules in |text| (from |path|, for messages: "rules.txt:3: ..."). On success
/// |*out| is owned by the caller (tprt_name_rules_free).
tprt_status_t tprt_name_rules_parse(const char* path, const char* text, tprt_name_rules_t** out) TPRT_MUST_USE_RESULT;

/// Reads and parses the rules file |path|.
tprt_status_t tprt_name_rules_load(const char* path, tprt_name_rules_t** out) TPRT_MUST_USE_RESULT;

void tprt_name_rules_free(tprt_name_rules_t* rules);

/// The tensors argument |name| is made of under |rules| (NULL: no rules): |*out_count| names in
/// |*out_names|, a NULL-terminated array owned by the caller (tprt_name_rules_free_names).
tprt_status_t tprt_name_rules_apply(const tprt_name_rules_t* rules, const char* name, int* out_count,
                                    char*** out_names) TPRT_MUST_USE_RESULT;

void tprt_name_rules_free_names(char** names);

#ifdef __cplusplus
}
#endif

#endif  // TPRT_NAME_RULES_H_
