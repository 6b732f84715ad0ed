// libFuzzer harness: the reader of a compiled module's manifest.
//
// tpc-compile embeds a JSON description of the module in the shared object (the tpc_module_info
// string: functions, entry points, arena sizes, argument and result layouts with their shards,
// meshes, numerics; runtime/tprt_abi.h), and tprt_module_load reads it back with
// tprt__module_parse_info (runtime/tprt_module_impl.h). The input is that string. Entry points
// resolve to a dummy address, so no shared object is needed. A description the reader accepts must
// be one the rest of the runtime can use: every function has an entry point, every tensor a valid
// dtype and a rank within TPRT_MAX_RANK, and lookups by name find what was read.
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "tprt_module_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static void* tpc__fuzz_resolve(void* user, const char* symbol) {
  // A name that ends in '!' plays a missing symbol, so that the error path is reachable too.
  size_t n = strlen(symbol);
  return n > 0 && symbol[n - 1] == '!' ? NULL : user;
}

// Checks what the reader promises about one argument or result list.
static void tpc__fuzz_check_tensors(const tprt_module_tensor_t* list, int count) {
  TPC_FUZZ_CHECK(count >= 0);
  TPC_FUZZ_CHECK(count == 0 || list != NULL);
  for (int i = 0; i < count; ++i) {
    const tprt_module_tensor_t* t = &list[i];
    TPC_FUZZ_CHECK(memchr(t->name, '\0', sizeof t->name) != NULL);
    TPC_FUZZ_CHECK(t->layout.dtype >= 0 && t->layout.dtype < TPRT_DTYPE_COUNT);
    TPC_FUZZ_CHECK(t->layout.rank >= 0 && t->layout.rank <= TPRT_MAX_RANK);
    TPC_FUZZ_CHECK(t->layout.data == NULL);
    // Consumers size buffers from the layouts: no dimension is negative and the element counts
    // are defined (UBSan reports an overflow inside tprt_tensor_numel).
    for (int d = 0; d < t->layout.rank; ++d) TPC_FUZZ_CHECK(t->layout.dims[d] >= 0);
    TPC_FUZZ_CHECK(tprt_tensor_numel(&t->layout) >= 0);
    if (!t->sharded) continue;
    for (int d = 0; d < t->layout.rank; ++d) {
      TPC_FUZZ_CHECK(memchr(t->axes[d], '\0', sizeof t->axes[d]) != NULL);
      TPC_FUZZ_CHECK(t->blocks[d] >= 1 && t->logical[d] >= 0);
    }
    tprt_tensor_t logical = tprt_tensor_make(NULL, t->layout.dtype, t->layout.rank, t->logical);
    TPC_FUZZ_CHECK(tprt_tensor_numel(&logical) >= 0);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* json = malloc(size + 1);
  tprt_allocator_t allocator = tprt_allocator_system();
  tprt_module_t* m = NULL;
  tprt_status_t status = tprt_allocator_malloc(allocator, sizeof *m, 16, (void**)&m);
  TPC_FUZZ_CHECK(json && !status);
  if (size) memcpy(json, data, size);
  json[size] = '\0';
  snprintf(m->path, sizeof m->path, "fuzz-manifest");
  static int entry;  // the address every entry point resolves to
  status = tprt__module_parse_info(m, json, tpc__fuzz_resolve, &entry);
  if (status) {
    TPC_FUZZ_CHECK(tprt_status_message(status) != NULL);
    tprt_status_free(status);
  } else {
    TPC_FUZZ_CHECK(m->num_functions > 0);
    TPC_FUZZ_CHECK(m->num_mesh_axes >= 0 && m->num_mesh_axes <= 4);
    int world = 1;  // as tpc-run computes it
    for (int i = 0; i < m->num_mesh_axes; ++i) {
      TPC_FUZZ_CHECK(m->mesh_shape[i] >= 1);
      world *= m->mesh_shape[i];
    }
    TPC_FUZZ_CHECK(world >= 1);
    for (int i = 0; i < m->num_functions; ++i) {
      const tprt_module_function_t* f = &m->functions[i];
      TPC_FUZZ_CHECK(f->entry != NULL);
      tpc__fuzz_check_tensors(f->args, f->num_args);
      tpc__fuzz_check_tensors(f->results, f->num_results);
      // A lookup by name finds this function or an earlier one of the same name.
      const tprt_module_function_t* found = tprt_module_function(m, f->name);
      TPC_FUZZ_CHECK(found != NULL && found <= f && strcmp(found->name, f->name) == 0);
    }
    TPC_FUZZ_CHECK(tprt_module_function(m, NULL) == &m->functions[0]);
  }
  tprt_module_unload(m, allocator);  // no dlopen handle: it frees the tables and |m|
  free(json);
  return 0;
}
