// Splits tpc-opt input at `// -----` separators, keeping each chunk's line offset so that
// diagnostics name lines of the original file.
#include "split_input.h"

#include <string.h>

static const char tpc__marker[] = "// -----";

int tpc_split_input(const char* buffer, size_t length, tpc_chunk_t* out_chunks, int max_chunks) {
  int n = 0, line = 1, chunk_line = 1;
  size_t start = 0, pos = 0;
  size_t mlen = sizeof tpc__marker - 1;
  while (pos <= length) {
    size_t eol = pos;
    while (eol < length && buffer[eol] != '\n') ++eol;
    if (eol - pos >= mlen && memcmp(buffer + pos, tpc__marker, mlen) == 0) {
      if (out_chunks && n == max_chunks) return -1;
      if (out_chunks) out_chunks[n] = (tpc_chunk_t){buffer + start, pos - start, chunk_line};
      ++n;
      start = eol < length ? eol + 1 : length;
      chunk_line = line + 1;
    }
    if (eol >= length) break;
    pos = eol + 1;
    ++line;
  }
  if (out_chunks && n == max_chunks) return -1;
  if (out_chunks) out_chunks[n] = (tpc_chunk_t){buffer + start, length - start, chunk_line};
  return n + 1;
}
