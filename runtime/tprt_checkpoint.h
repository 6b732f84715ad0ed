// Checkpoints of one or many safetensors files (docs/io.md, "Checkpoints of several files").
//
// A checkpoint is either one .safetensors file or a Hugging Face index: a JSON file
//   {"metadata": {"total_size": <bytes>}, "weight_map": {"<tensor>": "<file>", ...}}
// whose files lie in the index's directory. tprt_checkpoint_open validates the whole checkpoint
// before anything is read: the index parses, every file it names opens (each header validated as
// by tprt_safetensors_open; the data stays memory-mapped, so a reader touches only the pages it
// copies), every listed tensor is in its file, no tensor is listed twice or held by two files, no
// file holds a tensor the index does not map to it, and total_size, when given, matches. Each
// failure is one line that names the index, the file and the tensor.
//
// tprt_checkpoint_write writes the index layout: files of at most |max_file_bytes| of tensor data
// (a larger tensor gets a file of its own), "<prefix>-00001-of-0000N.safetensors", and the index.
// Nothing is replaced until every file is complete: the files are written under temporary names,
// then renamed, the index last; on failure the temporary files are removed.
//
// Thread safety: an open checkpoint is immutable (its files as in tprt_safetensors.h).
#ifndef TPRT_CHECKPOINT_H_
#define TPRT_CHECKPOINT_H_

#include <stdint.h>

#include "tprt_allocator.h"
#include "tprt_safetensors.h"
#include "tprt_status.h"
#include "tprt_tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tprt_checkpoint_t tprt_checkpoint_t;

/// Opens the checkpoint at |path|: an index when the name ends in ".json", else one safetensors
/// file. On success |*out| is owned by the caller (tprt_checkpoint_close).
tprt_status_t tprt_checkpoint_open(const char* path, tprt_allocator_t allocator,
                                   tprt_checkpoint_t** out) TPRT_MUST_USE_RESULT;

/// Closes |ck| and its files (NULL-safe).
void tprt_checkpoint_close(tprt_checkpoint_t* ck);

/// The path |ck| was opened with.
const char* tprt_checkpoint_path(const tprt_checkpoint_t* ck);

/// The number of files and of tensors.
int tprt_checkpoint_num_files(const tprt_checkpoint_t* ck);
int64_t tprt_checkpoint_num_tensors(const tprt_checkpoint_t* ck);

/// The file that holds tensor |name|, or NULL (binary search).
tprt_safetensors_t* tprt_checkpoint_find(const tprt_checkpoint_t* ck, const char* name);

/// Writes |count| tensors as an index checkpoint at |index_path| (a name ending in ".json"; the
/// files are "<prefix>-KKKKK-of-NNNNN.safetensors" beside it, <prefix> the index name without
/// ".safetensors.index.json" or ".json"), at most |max_file_bytes| of tensor data per file.
tprt_status_t tprt_checkpoint_write(const char* index_path, int64_t count, const char* const* names,
                                    const tprt_tensor_t* tensors, uint64_t max_file_bytes) TPRT_MUST_USE_RESULT;

#ifdef __cplusplus
}
#endif

#endif  // TPRT_CHECKPOINT_H_
