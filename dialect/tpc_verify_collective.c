// Verifier rules of the collectives (all_reduce, all_gather, reduce_scatter, all_to_all, their
// async forms) and the fused all-reduce / reduce-scatter + add + RMSNorm ops: the mesh exists, the
// axes belong to it, the gathered or scattered dimension divides by the group size, the result
// shape follows from the input, and a max all-reduce keeps the input's element type.
#include <stdio.h>
#include <string.h>

#include "mlir-c/BuiltinAttributes.h"
#include "mlir-c/BuiltinTypes.h"
#include "tp_ops.h"
#include "tpc_verify.h"
#include "tpc_verify_util.h"

#define FAIL mlirLogicalResultFailure()
#define OK mlirLogicalResultSuccess()

// Checks `mesh` and `axes`; on success stores the number of ranks in the group.
MlirLogicalResult tpc__verify_group(MlirOperation op, MlirAttribute mesh_ref, MlirAttribute axes,
                                           int64_t* out_group_size) {
  if (mlirAttributeIsNull(mesh_ref) || mlirAttributeIsNull(axes)) return FAIL;
  MlirStringRef name = mlirFlatSymbolRefAttrGetValue(mesh_ref);
  MlirOperation mesh = tpc_mesh_lookup(op, name);
  if (mlirOperationIsNull(mesh))
    return tpc__rule_error(op, "collective.mesh", "mesh @%.*s is not declared by a tp.mesh in the enclosing module",
                           (int)name.length, name.data);
  MlirAttribute mesh_axes = tpc_mesh_get_axes_attr(mesh), mesh_shape = tpc_mesh_get_shape_attr(mesh);
  if (mlirAttributeIsNull(mesh_axes) || mlirAttributeIsNull(mesh_shape) || !mlirAttributeIsAArray(mesh_axes) ||
      !mlirAttributeIsADenseI64Array(mesh_shape))
    return FAIL;  // the mesh's own verifier reports it
  intptr_t n = mlirArrayAttrGetNumElements(axes);
  if (n == 0) return tpc__rule_error(op, "collective.axes", "axes must name at least one axis of mesh @%.*s", (int)name.length, name.data);
  int64_t group = 1;
  for (intptr_t i = 0; i < n; ++i) {
    MlirAttribute a = mlirArrayAttrGetElement(axes, i);
    if (!mlirAttributeIsAString(a))
      return tpc__rule_error(op, "collective.axes", "axes must be strings naming axes of mesh @%.*s", (int)name.length, name.data);
    MlirStringRef s = mlirStringAttrGetValue(a);
    for (intptr_t j = 0; j < i; ++j)
      if (mlirAttributeEqual(a, mlirArrayAttrGetElement(axes, j)))
        return tpc__rule_error(op, "collective.axes", "axis \"%.*s\" appears twice", (int)s.length, s.data);
    intptr_t found = -1;
    for (intptr_t j = 0; j < mlirArrayAttrGetNumElements(mesh_axes) && found < 0; ++j) {
      MlirAttribute m = mlirArrayAttrGetElement(mesh_axes, j);
      if (mlirAttributeIsAString(m) && mlirStringRefEqual(mlirStringAttrGetValue(m), s)) found = j;
    }
    if (found < 0)
      return tpc__rule_error(op, "collective.axes", "mesh @%.*s has no axis \"%.*s\"", (int)name.length, name.data,
                             (int)s.length, s.data);
    // A shape entry that is missing, < 1 or too large is the mesh's own error (mesh.shape); a
    // group size of 0 would divide by zero below, one past TPC_MESH_MAX_RANKS could overflow.
    int64_t size =
        found < mlirDenseArrayGetNumElements(mesh_shape) ? mlirDenseI64ArrayGetElement(mesh_shape, found) : 0;
    if (size < 1 || size > TPC_MESH_MAX_RANKS / group) return FAIL;
    group *= size;
  }
  *out_group_size = group;
  return OK;
}

static MlirLogicalResult tpc__check_dim(MlirOperation op, const char* which, int64_t dim, const tpc_shape_t* in) {
  if (dim < 0 || dim >= in->rank)
    return tpc__rule_error(op, "collective.dim", "%s=%lld is out of range for a rank-%d input", which, (long long)dim,
                           in->rank);
  return OK;
}

static MlirLogicalResult tpc__check_divisible(MlirOperation op, const char* which, int64_t dim, const tpc_shape_t* in,
                                              int64_t group) {
  char a[96];
  if (in->dims[dim] % group != 0)
    return tpc__rule_error(op, "collective.divisible", "input %s dimension %lld has size %lld, not divisible by the %lld ranks of the group (input %s)",
                           which, (long long)dim, (long long)in->dims[dim], (long long)group,
                           tpc__dims_str(in, a, sizeof a));
  return OK;
}

// The result must be the input with dims[dim] multiplied (gather) or divided (scatter); for
// all_to_all both apply. |out_type| is the tensor type (for futures, the carried one). A
// reduction (|sum|) may change the float type: f32 partials summed into a bf16 result is the
// row-parallel linear's completion, rounded once after the sum.
static MlirLogicalResult tpc__check_result(MlirOperation op, const tpc_shape_t* in, MlirType out_type, int64_t mul_dim,
                                           int64_t div_dim, int64_t group, bool sum) {
  char a[96], b[96], c[96];
  tpc_shape_t expect = *in;
  if (mul_dim >= 0 && __builtin_mul_overflow(in->dims[mul_dim], group, &expect.dims[mul_dim]))
    return tpc__rule_error(op, "collective.result", "gathering dimension %lld of %s over %lld ranks overflows int64",
                           (long long)mul_dim, tpc__dims_str(in, a, sizeof a), (long long)group);
  if (div_dim >= 0) expect.dims[div_dim] /= group;
  bool ok = !mlirTypeIsNull(out_type) && mlirTypeIsARankedTensor(out_type) &&
            mlirShapedTypeHasStaticShape(out_type) && mlirShapedTypeGetRank(out_type) == in->rank;
  MlirType out_element = ok ? mlirShapedTypeGetElementType(out_type) : (MlirType){NULL};
  ok = ok && (mlirTypeEqual(out_element, in->element) ||
              (sum && tpc__is_storage_float(in->element) && tpc__is_storage_float(out_element)));
  for (int i = 0; ok && i < in->rank; ++i) ok = mlirShapedTypeGetDimSize(out_type, i) == expect.dims[i];
  if (!ok)
    return tpc__rule_error(op, "collective.result", "the result must be %s of %s%s over a group of %lld ranks; got %s",
                           tpc__dims_str(&expect, a, sizeof a), tpc__type_str(in->element, b, sizeof b),
                           sum && tpc__is_storage_float(in->element) ? " (or another float type)" : "",
                           (long long)group, tpc__type_str(out_type, c, sizeof c));
  return OK;
}

// Rules of the fused collective + add + RMSNorm ops. With |scatter|, partial holds all ranks'
// tokens ([M*g,H]) and residual only this rank's ([M,H]).
static MlirLogicalResult tpc__verify_fused_norm(MlirOperation op, MlirValue partial_v, MlirValue residual_v,
                                               MlirValue gamma_v, double eps, bool scatter, int64_t group) {
  char a[96], b[96];
  tpc_shape_t p = tpc__shape_of(partial_v), r = tpc__shape_of(residual_v);
  if (!p.valid || !r.valid) return FAIL;
  if (mlirLogicalResultIsFailure(tpc__verify_norm_params(op, residual_v, gamma_v, (MlirValue){NULL}, eps))) return FAIL;
  int64_t rows = r.dims[0];
  if (scatter && __builtin_mul_overflow(r.dims[0], group, &rows))
    return tpc__rule_error(op, "fused_norm.partial", "residual %s over %lld ranks has more rows than int64 holds",
                           tpc__type_str(r.type, b, sizeof b), (long long)group);
  bool ok = p.rank == 2 && p.dims[0] == rows && p.dims[1] == r.dims[1] &&
            (tpc__is_f32(p.element) || mlirTypeEqual(p.element, r.element));
  if (!ok)
    return tpc__rule_error(op, "fused_norm.partial",
                           "partial must be [%lld,%lld] in f32 or residual's element type (residual %s%s); got %s",
                           (long long)rows, (long long)r.dims[1], tpc__type_str(r.type, b, sizeof b),
                           scatter ? ", scattered over dim 0" : "", tpc__type_str(p.type, a, sizeof a));
  return OK;
}

MlirLogicalResult tpc__verify_collective(MlirOperation op, int kind) {
  int64_t g = 0;
  MlirAttribute mesh = {NULL}, axes = {NULL};
  MlirValue input = {NULL}, output = {NULL};
  int64_t dim = -1, blocks = 1;
  switch (kind) {
    case TPC_OP_ALL_REDUCE: {
      if (mlirLogicalResultIsFailure(tpc__verify_group(op, tpc_all_reduce_get_mesh_attr(op), tpc_all_reduce_get_axes_attr(op), &g)))
        return FAIL;
      tpc_shape_t in = tpc__shape_of(tpc_all_reduce_get_input(op));
      if (!in.valid) return FAIL;
      bool max = tpc_all_reduce_get_reduce(op) == TPC_REDUCE_MAX;
      MlirType out = mlirValueGetType(tpc_all_reduce_get_output(op));
      char a[96], b[96];
      // A maximum is one of the inputs: nothing to round, so nothing to round to.
      if (max && (!tpc__is_storage_float(in.element) || !mlirTypeIsARankedTensor(out) ||
                  !mlirTypeEqual(mlirShapedTypeGetElementType(out), in.element)))
        return tpc__rule_error(
            op, "collective.reduce",
            "reduce = \"max\" takes a bf16, f16 or f32 input and keeps its element type; got %s -> %s",
            tpc__type_str(in.type, a, sizeof a), tpc__type_str(out, b, sizeof b));
      return tpc__check_result(op, &in, out, -1, -1, g, !max);
    }
    case TPC_OP_ALL_GATHER:
    case TPC_OP_REDUCE_SCATTER:
      mesh = tpc_op_get_attr(op, kind, kind == TPC_OP_ALL_GATHER ? TPC_ALL_GATHER_ATTR_MESH : TPC_REDUCE_SCATTER_ATTR_MESH);
      axes = tpc_op_get_attr(op, kind, kind == TPC_OP_ALL_GATHER ? TPC_ALL_GATHER_ATTR_AXES : TPC_REDUCE_SCATTER_ATTR_AXES);
      dim = kind == TPC_OP_ALL_GATHER ? tpc_all_gather_get_dim(op) : tpc_reduce_scatter_get_dim(op);
      blocks = kind == TPC_OP_ALL_GATHER ? tpc_all_gather_get_blocks(op) : tpc_reduce_scatter_get_blocks(op);
      input = tpc_op_get_operand(op, kind, 0);
      output = tpc_op_get_result(op, kind, 0);
      break;
    case TPC_OP_ALL_GATHER_START:
      mesh = tpc_all_gather_start_get_mesh_attr(op);
      axes = tpc_all_gather_start_get_axes_attr(op);
      dim = tpc_all_gather_start_get_dim(op);
      blocks = tpc_all_gather_start_get_blocks(op);
      input = tpc_all_gather_start_get_input(op);
      output = tpc_all_gather_start_get_future(op);
      break;
    case TPC_OP_REDUCE_SCATTER_START:
      mesh = tpc_reduce_scatter_start_get_mesh_attr(op);
      axes = tpc_reduce_scatter_start_get_axes_attr(op);
      dim = tpc_reduce_scatter_start_get_dim(op);
      blocks = tpc_reduce_scatter_start_get_blocks(op);
      input = tpc_reduce_scatter_start_get_input(op);
      output = tpc_reduce_scatter_start_get_future(op);
      break;
    case TPC_OP_ALL_TO_ALL:
    case TPC_OP_ALL_TO_ALL_START: {
      bool start = kind == TPC_OP_ALL_TO_ALL_START;
      if (mlirLogicalResultIsFailure(tpc__verify_group(
              op, start ? tpc_all_to_all_start_get_mesh_attr(op) : tpc_all_to_all_get_mesh_attr(op),
              start ? tpc_all_to_all_start_get_axes_attr(op) : tpc_all_to_all_get_axes_attr(op), &g)))
        return FAIL;
      tpc_shape_t in = tpc__shape_of(start ? tpc_all_to_all_start_get_input(op) : tpc_all_to_all_get_input(op));
      int64_t split = start ? tpc_all_to_all_start_get_split_dim(op) : tpc_all_to_all_get_split_dim(op);
      int64_t concat = start ? tpc_all_to_all_start_get_concat_dim(op) : tpc_all_to_all_get_concat_dim(op);
      int64_t b = start ? tpc_all_to_all_start_get_blocks(op) : tpc_all_to_all_get_blocks(op);
      if (!in.valid || mlirLogicalResultIsFailure(tpc__check_dim(op, "split_dim", split, &in)) ||
          mlirLogicalResultIsFailure(tpc__check_dim(op, "concat_dim", concat, &in)) ||
          mlirLogicalResultIsFailure(tpc__check_divisible(op, "split", split, &in, g)))
        return FAIL;
      char a[96];
      if (b < 1 || (b > 1 && (split == concat || in.rank >= 8 || !tpc__splits(in.dims[split], b, g))))
        return tpc__rule_error(op, "collective.blocks",
                               "blocks = %lld must be >= 1; with more than one block, split_dim (%lld, size %lld) "
                               "must differ from concat_dim, each block must split over the %lld ranks, and the "
                               "input's rank be below 8 (input %s)",
                               (long long)b, (long long)split, (long long)in.dims[split], (long long)g,
                               tpc__dims_str(&in, a, sizeof a));
      MlirType out = mlirValueGetType(start ? tpc_all_to_all_start_get_future(op) : tpc_all_to_all_get_output(op));
      MlirType carried = tpc_future_get_value_type(out);
      return tpc__check_result(op, &in, mlirTypeIsNull(carried) ? out : carried, concat, split, g, false);
    }
    case TPC_OP_FUSED_ALLREDUCE_ADD_RMSNORM:
      if (mlirLogicalResultIsFailure(tpc__verify_group(op, tpc_fused_allreduce_add_rmsnorm_get_mesh_attr(op),
                                                       tpc_fused_allreduce_add_rmsnorm_get_axes_attr(op), &g)))
        return FAIL;
      return tpc__verify_fused_norm(op, tpc_fused_allreduce_add_rmsnorm_get_partial(op),
                                    tpc_fused_allreduce_add_rmsnorm_get_residual(op),
                                    tpc_fused_allreduce_add_rmsnorm_get_gamma(op),
                                    tpc_fused_allreduce_add_rmsnorm_get_eps(op), false, g);
    case TPC_OP_FUSED_ALLREDUCE_ADD_RMSNORM_QUANTIZE: {
      if (mlirLogicalResultIsFailure(tpc__verify_group(op, tpc_fused_allreduce_add_rmsnorm_quantize_get_mesh_attr(op),
                                                       tpc_fused_allreduce_add_rmsnorm_quantize_get_axes_attr(op), &g)) ||
          mlirLogicalResultIsFailure(tpc__verify_fused_norm(op, tpc_fused_allreduce_add_rmsnorm_quantize_get_partial(op),
                                                            tpc_fused_allreduce_add_rmsnorm_quantize_get_residual(op),
                                                            tpc_fused_allreduce_add_rmsnorm_quantize_get_gamma(op),
                                                            tpc_fused_allreduce_add_rmsnorm_quantize_get_eps(op), false, g)))
        return FAIL;
      tpc_format_t format = tpc_fused_allreduce_add_rmsnorm_quantize_get_format(op);
      MlirValue amax = tpc_fused_allreduce_add_rmsnorm_quantize_get_amax(op);
      if (mlirLogicalResultIsFailure(tpc__verify_quant_layout(
              op, format, TPC_AXIS_ROWWISE, tpc_fused_allreduce_add_rmsnorm_quantize_get_normed(op),
              tpc_fused_allreduce_add_rmsnorm_quantize_get_data(op), tpc_fused_allreduce_add_rmsnorm_quantize_get_scale(op),
              tpc_fused_allreduce_add_rmsnorm_quantize_get_global_scale(op))) ||
          mlirLogicalResultIsFailure(tpc__verify_quant_amax(op, format, amax)))
        return FAIL;
      // A row's quantization must not depend on other rows: the per-tensor formats take the amax.
      if (format != TPC_FORMAT_MXFP8 && mlirValueIsNull(amax))
        return tpc__rule_error(op, "fused_norm.quantize",
                               "%s scales by the whole tensor's amax, which no row knows before every row is "
                               "normalized: give the amax operand (a tp.amax, or a calibrated or previous "
                               "step's), or use mxfp8",
                               tpc_format_names[format]);
      return OK;
    }
    case TPC_OP_FUSED_REDUCE_SCATTER_ADD_RMSNORM: {
      if (mlirLogicalResultIsFailure(tpc__verify_group(op, tpc_fused_reduce_scatter_add_rmsnorm_get_mesh_attr(op),
                                                       tpc_fused_reduce_scatter_add_rmsnorm_get_axes_attr(op), &g)))
        return FAIL;
      // The one-shot and two-shot kernels are all-reduces; the reduce-scatter form has no fused
      // kernel to force.
      tpc_algorithm_t algorithm = tpc_fused_reduce_scatter_add_rmsnorm_get_algorithm(op);
      if (algorithm == TPC_ALGORITHM_ONE_SHOT || algorithm == TPC_ALGORITHM_TWO_SHOT)
        return tpc__rule_error(op, "fused_norm.algorithm",
                               "algorithm = \"%s\" is for tp.fused_allreduce_add_rmsnorm only; use \"auto\" "
                               "or \"composition\"",
                               tpc_algorithm_names[algorithm]);
      return tpc__verify_fused_norm(op, tpc_fused_reduce_scatter_add_rmsnorm_get_partial(op),
                                    tpc_fused_reduce_scatter_add_rmsnorm_get_residual(op),
                                    tpc_fused_reduce_scatter_add_rmsnorm_get_gamma(op),
                                    tpc_fused_reduce_scatter_add_rmsnorm_get_eps(op), true, g);
    }
    default:
      return OK;
  }
  // all_gather / reduce_scatter and their async forms.
  if (mlirLogicalResultIsFailure(tpc__verify_group(op, mesh, axes, &g))) return FAIL;
  tpc_shape_t in = tpc__shape_of(input);
  if (!in.valid || mlirLogicalResultIsFailure(tpc__check_dim(op, "dim", dim, &in))) return FAIL;
  bool gather = kind == TPC_OP_ALL_GATHER || kind == TPC_OP_ALL_GATHER_START;
  // blocks = B: dim is B equal blocks, each gathered or scattered on its own.
  char a[96];
  if (blocks < 1 || in.dims[dim] % blocks != 0)
    return tpc__rule_error(op, "collective.blocks",
                           "blocks = %lld must be >= 1 and divide input dimension %lld (size %lld; input %s)",
                           (long long)blocks, (long long)dim, (long long)in.dims[dim], tpc__dims_str(&in, a, sizeof a));
  if (!gather && mlirLogicalResultIsFailure(tpc__check_divisible(op, "scattered", dim, &in, g))) return FAIL;
  if (!gather && blocks > 1 && !tpc__splits(in.dims[dim], g, blocks))
    return tpc__rule_error(op, "collective.blocks",
                           "each of the %lld blocks of input dimension %lld (size %lld) must divide by the %lld ranks "
                           "of the group (input %s)",
                           (long long)blocks, (long long)dim, (long long)in.dims[dim], (long long)g,
                           tpc__dims_str(&in, a, sizeof a));
  MlirType out = mlirValueGetType(output);
  MlirType carried = tpc_future_get_value_type(out);
  return tpc__check_result(op, &in, mlirTypeIsNull(carried) ? out : carried, gather ? dim : -1, gather ? -1 : dim, g,
                           !gather);
}
