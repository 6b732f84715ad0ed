// Shape, type and diagnostic helpers for the tp verifier.
#include "tpc_verify_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "mlir-c/BuiltinTypes.h"
#include "mlir-c/Diagnostics.h"

tpc_shape_t tpc__shape_of(MlirValue v) {
  tpc_shape_t s;
  memset(&s, 0, sizeof s);
  if (mlirValueIsNull(v)) return s;
  MlirType t = mlirValueGetType(v);
  s.type = t;
  if (!mlirTypeIsARankedTensor(t) || !mlirShapedTypeHasStaticShape(t)) return s;
  intptr_t rank = mlirShapedTypeGetRank(t);
  if (rank > TPC_MAX_RANK) return s;
  s.rank = (int)rank;
  for (intptr_t i = 0; i < rank; ++i) s.dims[i] = mlirShapedTypeGetDimSize(t, i);
  s.element = mlirShapedTypeGetElementType(t);
  s.valid = true;
  return s;
}

bool tpc__is_storage_float(MlirType t) { return mlirTypeIsABF16(t) || mlirTypeIsAF16(t) || mlirTypeIsAF32(t); }
bool tpc__is_f32(MlirType t) { return mlirTypeIsAF32(t); }
bool tpc__is_i32(MlirType t) { return mlirTypeIsAInteger(t) && mlirIntegerTypeGetWidth(t) == 32 && mlirIntegerTypeIsSignless(t); }
bool tpc__is_i64(MlirType t) { return mlirTypeIsAInteger(t) && mlirIntegerTypeGetWidth(t) == 64 && mlirIntegerTypeIsSignless(t); }

const char* tpc__dims_str(const tpc_shape_t* s, char* buf, int size) {
  int n = snprintf(buf, (size_t)size, "[");
  for (int i = 0; i < s->rank && n < size; ++i) n += snprintf(buf + n, (size_t)(size - n), i ? ",%lld" : "%lld", (long long)s->dims[i]);
  if (n < size) snprintf(buf + n, (size_t)(size - n), "]");
  return buf;
}

typedef struct {
  char* buf;
  int size;
  int len;
} tpc__print_buf_t;

static void tpc__print_cb(MlirStringRef s, void* user) {
  tpc__print_buf_t* b = user;
  int room = b->size - b->len - 1;
  int n = (int)s.length < room ? (int)s.length : room;
  if (n > 0) {
    memcpy(b->buf + b->len, s.data, (size_t)n);
    b->len += n;
  }
  b->buf[b->len] = '\0';
}

const char* tpc__type_str(MlirType t, char* buf, int size) {
  tpc__print_buf_t b = {buf, size, 0};
  buf[0] = '\0';
  if (mlirTypeIsNull(t)) {
    snprintf(buf, (size_t)size, "<none>");
    return buf;
  }
  mlirTypePrint(t, tpc__print_cb, &b);
  return buf;
}

MlirLogicalResult tpc__rule_error(MlirOperation op, const char* rule, const char* fmt, ...) {
  char msg[1024];
  MlirStringRef name = mlirIdentifierStr(mlirOperationGetName(op));
  int n = snprintf(msg, sizeof msg, "'%.*s' op violates rule %s: ", (int)name.length, name.data, rule);
  va_list ap;
  va_start(ap, fmt);
  if (n > 0 && n < (int)sizeof msg) vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
  va_end(ap);
  mlirEmitError(mlirOperationGetLocation(op), msg);
  return mlirLogicalResultFailure();
}

MlirLogicalResult tpc__verify_acc(MlirOperation op, bool partial, MlirValue acc) {
  if (partial && !mlirValueIsNull(acc))
    return tpc__rule_error(op, "grad.acc",
                           "acc cannot be added to a partial result (the collective that completes it would add acc "
                           "once per rank); add it after the collective");
  return mlirLogicalResultSuccess();
}
