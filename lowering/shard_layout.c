// Sharded tensor layouts (see shard_layout.h).
#include "shard_layout.h"

#include <string.h>

#include "mlir-c/BuiltinTypes.h"

tpc_layout_t tpc_layout_replicated(MlirType t) {
  tpc_layout_t l;
  memset(&l, 0, sizeof l);
  // Only ranked tensors have a layout. Any other value (the !tp.future of an async collective,
  // which a logical module should not hold) gets rank 0, and its op's sharding rule reports it.
  if (!mlirTypeIsARankedTensor(t)) return l;
  l.rank = (int)mlirShapedTypeGetRank(t);
  for (int d = 0; d < l.rank && d < TPC_LAYOUT_MAX_RANK; ++d) {
    l.logical[d] = mlirShapedTypeGetDimSize(t, d);
    l.blocks[d] = 1;
  }
  l.element = mlirShapedTypeGetElementType(t);
  return l;
}

int64_t tpc_mesh_group_size(const tpc_mesh_t* mesh, uint32_t mask) {
  int64_t g = 1;
  for (int i = 0; i < mesh->num_axes; ++i)
    if (mask & (1u << i)) g *= mesh->sizes[i];
  return g;
}

int64_t tpc_layout_local_dim(const tpc_layout_t* l, const tpc_mesh_t* mesh, int d) {
  int64_t g = tpc_mesh_group_size(mesh, l->mask[d]);
  int64_t b = l->blocks[d] > 0 ? l->blocks[d] : 1;
  return l->logical[d] % (g * b) == 0 ? l->logical[d] / g : -1;
}

bool tpc_layout_equal(const tpc_layout_t* a, const tpc_layout_t* b) {
  if (a->rank != b->rank) return false;
  for (int d = 0; d < a->rank; ++d)
    if (a->mask[d] != b->mask[d] || a->blocks[d] != b->blocks[d] || a->logical[d] != b->logical[d]) return false;
  return true;
}

void tpc_layout_describe(const tpc_layout_t* l, const tpc_mesh_t* mesh, tpc_text_t* t) {
  tpc_text_printf(t, "[");
  for (int d = 0; d < l->rank; ++d) {
    if (d) tpc_text_printf(t, ", ");
    if (!l->mask[d]) tpc_text_printf(t, "-");
    bool first = true;
    for (int i = 0; i < mesh->num_axes; ++i)
      if (l->mask[d] & (1u << i)) {
        tpc_text_printf(t, "%s%s", first ? "" : "*", mesh->axes[i]);
        first = false;
      }
    if (l->blocks[d] > 1) tpc_text_printf(t, "/%lld", (long long)l->blocks[d]);
  }
  tpc_text_printf(t, "]");
}

void tpc_layout_print_local_type(const tpc_layout_t* l, const tpc_mesh_t* mesh, tpc_text_t* t) {
  tpc_text_printf(t, "tensor<");
  for (int d = 0; d < l->rank; ++d) tpc_text_printf(t, "%lldx", (long long)tpc_layout_local_dim(l, mesh, d));
  mlirTypePrint(l->element, tpc_text_append_ref, t);
  tpc_text_printf(t, ">");
}

void tpc_layout_print_attr(const tpc_layout_t* l, const tpc_mesh_t* mesh, tpc_text_t* t) {
  tpc_text_printf(t, "{axes = [");
  for (int d = 0; d < l->rank; ++d) {
    tpc_text_printf(t, "%s[", d ? ", " : "");
    bool first = true;
    for (int i = 0; i < mesh->num_axes; ++i)
      if (l->mask[d] & (1u << i)) {
        tpc_text_printf(t, "%s\"%s\"", first ? "" : ", ", mesh->axes[i]);
        first = false;
      }
    tpc_text_printf(t, "]");
  }
  tpc_text_printf(t, "], blocks = array<i64%s", l->rank ? ": " : "");
  for (int d = 0; d < l->rank; ++d) tpc_text_printf(t, "%s%lld", d ? ", " : "", (long long)l->blocks[d]);
  tpc_text_printf(t, ">, logical = array<i64%s", l->rank ? ": " : "");
  for (int d = 0; d < l->rank; ++d) tpc_text_printf(t, "%s%lld", d ? ", " : "", (long long)l->logical[d]);
  tpc_text_printf(t, ">}");
}
