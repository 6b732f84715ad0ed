// The pass and pipeline registry. Later passes add a line here and a constructor in passes.h.
#include "pipeline.h"

#include <string.h>

#include "passes.h"

const tpc_pass_entry_t tpc_pass_registry[] = {
    {"tp-verify", "Check the tp dialect's shape, type, mesh, quantization and module-attribute rules",
     tpc_create_verify_pass},
    {NULL, NULL, NULL},
};

const tpc_pipeline_entry_t tpc_pipeline_registry[] = {
    {"verify", "Verify a module and print it unchanged", "tp-verify"},
    {NULL, NULL, NULL},
};

const tpc_pass_entry_t* tpc_pass_lookup(const char* argument) {
  for (const tpc_pass_entry_t* e = tpc_pass_registry; e->argument; ++e)
    if (strcmp(e->argument, argument) == 0) return e;
  return NULL;
}

const tpc_pipeline_entry_t* tpc_pipeline_lookup(const char* name) {
  for (const tpc_pipeline_entry_t* e = tpc_pipeline_registry; e->name; ++e)
    if (strcmp(e->name, name) == 0) return e;
  return NULL;
}
