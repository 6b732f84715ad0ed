// Splitting an input buffer at `// -----` lines (tpc-opt --split-input-file).
#ifndef TPC_SPLIT_INPUT_H_
#define TPC_SPLIT_INPUT_H_

#include <stddef.h>

/// One piece of the input. |text| points into the original buffer.
typedef struct tpc_chunk_t {
  const char* text;
  size_t length;
  int first_line;  // 1-based line of the chunk's first character in the whole file
} tpc_chunk_t;

/// Splits |buffer| at lines that start with "// -----". Returns the number of chunks written to
/// |out_chunks| (at most |max_chunks|), or -1 when there are more chunks than that. With
/// |out_chunks| NULL, only counts them.
int tpc_split_input(const char* buffer, size_t length, tpc_chunk_t* out_chunks, int max_chunks);

#endif  // TPC_SPLIT_INPUT_H_
