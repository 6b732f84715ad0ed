// tpc-opt --verify-diagnostics: the diagnostics a chunk produces against the ones its comments
// expect, as mlir-opt checks them.
//
//   %y = "tp.linear"(%x, %w) : ...   // expected-error {{violates rule linear.k}}
//   // expected-error@+1 {{violates rule linear.k}}
//
// A comment `expected-<severity>[@<where>] {{<text>}}` (severity error, warning, note or remark;
// where +N, -N, above, below, an absolute line, or unknown for a diagnostic without a position;
// default its own line) expects a diagnostic of
// that severity on that line whose message contains <text>. Every diagnostic must be expected and
// every expectation met.
#ifndef TPC_VERIFY_DIAGNOSTICS_H_
#define TPC_VERIFY_DIAGNOSTICS_H_

#include <stddef.h>

typedef struct tpc_diag_verifier_t tpc_diag_verifier_t;

/// Reads the expectations in |text| (|length| bytes; its first line is line |first_line| of
/// |file|). Malformed expectations are reported on stderr and count as failures at the end.
/// Returns NULL when out of memory.
tpc_diag_verifier_t* tpc_diag_verifier_create(const char* file, const char* text, size_t length, int first_line);

/// Records one diagnostic (a tpc_diag_counts_t capture function; |user| is the verifier).
void tpc_diag_verifier_capture(void* user, const char* severity, const char* file, int line, int col,
                               const char* message);

/// Matches what was recorded against what was expected, prints one line per mismatch on stderr
/// (`file:line:col: error: unexpected error: ...`, `file:line: error: expected error "..." was
/// not produced`) and returns how many there were.
int tpc_diag_verifier_finish(tpc_diag_verifier_t* verifier);

/// Frees |verifier| (NULL-safe).
void tpc_diag_verifier_destroy(tpc_diag_verifier_t* verifier);

#endif  // TPC_VERIFY_DIAGNOSTICS_H_
