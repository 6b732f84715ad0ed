// The module manifest of tp-lower-runtime (lower_runtime_impl.h): the JSON that tprt_module_load
// reads back (tensors with their shards, numerics, chunks, meshes), and the dtype mapping.
#include <stdio.h>

#include "lower_runtime_impl.h"
#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "passes.h"
#include "tpc_dialect.h"
#include "tprt_dtype.h"

int tpc_lower_dtype_of(MlirType t) {
  if (mlirTypeIsABF16(t)) return TPRT_DTYPE_BF16;
  if (mlirTypeIsAF16(t)) return TPRT_DTYPE_F16;
  if (mlirTypeIsAF32(t)) return TPRT_DTYPE_F32;
  if (mlirTypeIsAFloat8E4M3FN(t)) return TPRT_DTYPE_F8E4M3FN;
  if (mlirTypeIsAFloat8E5M2(t)) return TPRT_DTYPE_F8E5M2;
  if (mlirTypeIsAFloat8E8M0FNU(t)) return TPRT_DTYPE_F8E8M0FNU;
  if (mlirTypeIsAFloat4E2M1FN(t)) return TPRT_DTYPE_F4E2M1FN;
  if (mlirTypeIsAInteger(t) && mlirIntegerTypeGetWidth(t) == 32) return TPRT_DTYPE_I32;
  if (mlirTypeIsAInteger(t) && mlirIntegerTypeGetWidth(t) == 64) return TPRT_DTYPE_I64;
  return -1;
}

// Copies a tp.shard attribute ({axes, blocks, logical}) into |o| as "shard".
static void tpc__json_shard(cJSON* o, MlirAttribute shard) {
  if (mlirAttributeIsNull(shard) || !mlirAttributeIsADictionary(shard)) return;
  MlirAttribute axes = mlirDictionaryAttrGetElementByName(shard, mlirStringRefCreateFromCString("axes"));
  MlirAttribute blocks = mlirDictionaryAttrGetElementByName(shard, mlirStringRefCreateFromCString("blocks"));
  MlirAttribute logical = mlirDictionaryAttrGetElementByName(shard, mlirStringRefCreateFromCString("logical"));
  if (mlirAttributeIsNull(axes) || mlirAttributeIsNull(blocks) || mlirAttributeIsNull(logical) ||
      !mlirAttributeIsAArray(axes) || !mlirAttributeIsADenseI64Array(blocks) || !mlirAttributeIsADenseI64Array(logical))
    return;
  cJSON* s = cJSON_AddObjectToObject(o, "shard");
  cJSON* ja = cJSON_AddArrayToObject(s, "axes");
  for (intptr_t d = 0; d < mlirArrayAttrGetNumElements(axes); ++d) {
    MlirAttribute dim = mlirArrayAttrGetElement(axes, d);
    char buf[128] = "";
    size_t n = 0;
    for (intptr_t k = 0; mlirAttributeIsAArray(dim) && k < mlirArrayAttrGetNumElements(dim); ++k) {
      MlirStringRef a = mlirStringAttrGetValue(mlirArrayAttrGetElement(dim, k));
      n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%.*s", k ? "," : "", (int)a.length, a.data);
      if (n >= sizeof buf) break;
    }
    cJSON_AddItemToArray(ja, cJSON_CreateString(buf));
  }
  cJSON* jb = cJSON_AddArrayToObject(s, "blocks");
  cJSON* jl = cJSON_AddArrayToObject(s, "logical");
  for (intptr_t d = 0; d < mlirDenseArrayGetNumElements(logical); ++d) {
    cJSON_AddItemToArray(jb, cJSON_CreateNumber((double)mlirDenseI64ArrayGetElement(blocks, d)));
    cJSON_AddItemToArray(jl, cJSON_CreateNumber((double)mlirDenseI64ArrayGetElement(logical, d)));
  }
}

void tpc_manifest_tensor(cJSON* list, const char* name, MlirType t, MlirAttribute shard) {
  cJSON* o = cJSON_CreateObject();
  tpc__json_shard(o, shard);
  cJSON_AddStringToObject(o, "name", name);
  cJSON_AddStringToObject(o, "dtype", tprt_dtype_name(tpc_lower_dtype_of(mlirShapedTypeGetElementType(t))));
  cJSON* shape = cJSON_AddArrayToObject(o, "shape");
  for (intptr_t i = 0; i < mlirShapedTypeGetRank(t); ++i)
    cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)mlirShapedTypeGetDimSize(t, i)));
  cJSON_AddItemToArray(list, o);
}

void tpc_manifest_module_attrs(cJSON* root, MlirOperation module) {
  MlirAttribute numerics = mlirOperationGetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_NUMERICS));
  MlirAttribute chunks = mlirOperationGetAttributeByName(module, mlirStringRefCreateFromCString(TPC_MODULE_ATTR_CHUNKS));
  char buf[64] = "fast";
  if (!mlirAttributeIsNull(numerics) && mlirAttributeIsAString(numerics)) {
    MlirStringRef s = mlirStringAttrGetValue(numerics);
    snprintf(buf, sizeof buf, "%.*s", (int)s.length, s.data);
  }
  cJSON_AddStringToObject(root, "numerics", buf);
  cJSON_AddNumberToObject(root, "chunks",
                          !mlirAttributeIsNull(chunks) && mlirAttributeIsAInteger(chunks)
                              ? (double)mlirIntegerAttrGetValueInt(chunks)
                              : TPC_DEFAULT_CHUNKS);
  cJSON* meshes = cJSON_AddArrayToObject(root, "meshes");
  for (MlirOperation o = mlirBlockGetFirstOperation(mlirModuleGetBody(mlirModuleFromOperation(module)));
       !mlirOperationIsNull(o); o = mlirOperationGetNextInBlock(o)) {
    if (!tpc_is_mesh(o)) continue;
    cJSON* m = cJSON_CreateObject();
    MlirStringRef n = mlirStringAttrGetValue(tpc_mesh_get_sym_name_attr(o));
    snprintf(buf, sizeof buf, "%.*s", (int)n.length, n.data);
    cJSON_AddStringToObject(m, "name", buf);
    cJSON* axes = cJSON_AddArrayToObject(m, "axes");
    cJSON* shape = cJSON_AddArrayToObject(m, "shape");
    MlirAttribute a = tpc_mesh_get_axes_attr(o), s = tpc_mesh_get_shape_attr(o);
    for (intptr_t i = 0; i < mlirArrayAttrGetNumElements(a); ++i) {
      MlirStringRef an = mlirStringAttrGetValue(mlirArrayAttrGetElement(a, i));
      snprintf(buf, sizeof buf, "%.*s", (int)an.length, an.data);
      cJSON_AddItemToArray(axes, cJSON_CreateString(buf));
      cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)mlirDenseI64ArrayGetElement(s, i)));
    }
    cJSON_AddItemToArray(meshes, m);
  }
}
