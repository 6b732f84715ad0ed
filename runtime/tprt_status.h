// Status values of the tpc runtime (libtprt).
//
// A tprt_status_t is NULL when the operation succeeded; otherwise it owns a heap record with a
// code, the file and line that made it, and a message to which callers prepend context on the way
// up. Every status must be consumed: returned, freed with tprt_status_free, or ignored explicitly
// with tprt_status_ignore. Library code never exits or aborts; it returns statuses.
// Thread safety: a status is owned by one thread at a time; the functions are reentrant.
#ifndef TPRT_STATUS_H_
#define TPRT_STATUS_H_

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TPRT_MUST_USE_RESULT __attribute__((warn_unused_result))
#define TPRT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TPRT_MUST_USE_RESULT
#define TPRT_PRINTF(f, a)
#endif

/// Status codes, in the spirit of IREE's canonical codes: each says what the caller can do.
#define TPRT_STATUS_CODES(X)                                                                      \
  X(OK, "ok")                               /* success; only NULL statuses carry it */           \
  X(INVALID_ARGUMENT, "invalid argument")   /* the caller passed something wrong; do not retry */ \
  X(NOT_FOUND, "not found")                 /* a file, tensor or symbol does not exist */         \
  X(OUT_OF_RANGE, "out of range")           /* an index or size exceeds what exists */            \
  X(DATA_LOSS, "data loss")                 /* a file is truncated or corrupt */                   \
  X(RESOURCE_EXHAUSTED, "resource exhausted") /* out of memory or another resource */             \
  X(FAILED_PRECONDITION, "failed precondition") /* state must be fixed before retrying */         \
  X(ABORTED, "aborted")                     /* another rank failed; the world is torn down */     \
  X(UNIMPLEMENTED, "unimplemented")         /* not supported by this backend or dtype */          \
  X(INTERNAL, "internal")                   /* a bug in tpc */                                    \
  X(UNAVAILABLE, "unavailable")             /* a device or library is missing; may work elsewhere */ \
  X(DEADLINE_EXCEEDED, "deadline exceeded") /* a collective or peer did not answer in time */

typedef enum tprt_status_code_e {
#define TPRT__CODE_ENUM(name, text) TPRT_STATUS_##name,
  TPRT_STATUS_CODES(TPRT__CODE_ENUM)
#undef TPRT__CODE_ENUM
} tprt_status_code_t;

typedef struct tprt_status_record_t* tprt_status_t;

/// Returns a new status with |code| and a printf-style message; records the caller's file and
/// line. Ownership goes to the caller. Use the tprt_make_status macro.
tprt_status_t tprt__make_status(const char* file, int line, tprt_status_code_t code, const char* fmt, ...)
    TPRT_PRINTF(4, 5) TPRT_MUST_USE_RESULT;
#define tprt_make_status(code, ...) tprt__make_status(__FILE__, __LINE__, (code), __VA_ARGS__)

/// Prepends "context: " to |status|'s message and returns it (NULL stays NULL).
tprt_status_t tprt_status_annotate(tprt_status_t status, const char* fmt, ...) TPRT_PRINTF(2, 3);

/// Returns |status|'s code, TPRT_STATUS_OK for NULL.
tprt_status_code_t tprt_status_code(tprt_status_t status);

/// Returns the message without location; "" for NULL. Valid until the status is freed.
const char* tprt_status_message(tprt_status_t status);

/// Returns the spelling of |code| ("invalid argument").
const char* tprt_status_code_string(tprt_status_code_t code);

/// Formats "file:line: code: message" into |buf| (truncating) and returns |buf|.
const char* tprt_status_format(tprt_status_t status, char* buf, size_t size);

/// Frees |status| (NULL-safe).
void tprt_status_free(tprt_status_t status);

/// Consumes a status whose failure is deliberately ignored.
static inline void tprt_status_ignore(tprt_status_t status) { tprt_status_free(status); }

/// Keeps the first failure: returns |first| if it failed (freeing |second|), else |second|.
tprt_status_t tprt_status_join(tprt_status_t first, tprt_status_t second);

static inline bool tprt_status_is_ok(tprt_status_t status) { return status == NULL; }

/// Returns |expr|'s status from the enclosing function if it failed, annotated with context.
#define TPRT_RETURN_IF_ERROR(expr, ...)                              \
  do {                                                               \
    tprt_status_t tprt__s = (expr);                                  \
    if (tprt__s) return tprt_status_annotate(tprt__s, __VA_ARGS__);  \
  } while (0)

/// Stores |expr|'s failure in |status_var| (annotated) and jumps to |label| (single-exit cleanup).
#define TPRT_GOTO_IF_ERROR(status_var, expr, label, ...)             \
  do {                                                               \
    tprt_status_t tprt__s = (expr);                                  \
    if (tprt__s) {                                                   \
      (status_var) = tprt_status_annotate(tprt__s, __VA_ARGS__);     \
      goto label;                                                    \
    }                                                                \
  } while (0)

#ifdef __cplusplus
}
#endif

#endif  // TPRT_STATUS_H_
