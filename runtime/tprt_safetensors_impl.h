// Internals shared by the safetensors reader, slicer and writer (not part of the API).
#ifndef TPRT_SAFETENSORS_IMPL_H_
#define TPRT_SAFETENSORS_IMPL_H_

#include <stddef.h>
#include <stdint.h>

#include "tprt_safetensors.h"

/// Largest header tpc reads or writes; the same limit as upstream safetensors (MAX_HEADER_SIZE).
#define TPRT__SAFETENSORS_MAX_HEADER 100000000u

/// One tensor of an open file; begin and end are relative to the start of the data section.
typedef struct tprt__safetensors_entry_t {
  const char* name;        // in the file's string arena
  const char* dtype_name;  // a static string from the dtype table
  int dtype;               // tprt_dtype_t or -1
  int bits;                // storage bits per element, also for unsupported dtypes
  int rank;
  int64_t dims[TPRT_MAX_RANK];
  uint64_t begin;
  uint64_t end;
} tprt__safetensors_entry_t;

struct tprt_safetensors_t {
  tprt_allocator_t allocator;
  char* path;  // a copy of the path given to open
  const uint8_t* map;
  size_t map_size;
  const uint8_t* data;  // map + 8 + header size
  uint64_t data_size;
  int count;
  tprt__safetensors_entry_t* entries;   // header order
  tprt__safetensors_entry_t** by_name;  // sorted by strcmp of the names
  int metadata_count;
  const char** metadata;  // key0, value0, key1, value1, ... in |strings|
  char* strings;          // every tensor name and metadata string, NUL-terminated
};

/// Returns |expr|'s failure unchanged: messages made here already name the file.
#define TPRT__ST_RETURN_IF_ERROR(expr) \
  do {                                 \
    tprt_status_t tprt__st_s = (expr); \
    if (tprt__st_s) return tprt__st_s; \
  } while (0)

/// Parses and validates the |n|-byte header |text| of |file| (whose path, allocator and data
/// section are set), filling its tensor table, name index and metadata.
tprt_status_t tprt__safetensors_parse_header(tprt_safetensors_t* file, const char* text, size_t n);

/// Returns the byte index of the first invalid UTF-8 sequence in |s|[0, n), or -1 when valid.
/// Overlong forms, surrogates and code points above U+10FFFF are invalid, as in RFC 3629.
int64_t tprt__safetensors_utf8_error(const char* s, size_t n);

/// Maps an errno value from open/read/write/rename to a status code.
int tprt__safetensors_errno_code(int err);

/// Reads the whole of |path| into a NUL-terminated buffer (|*out|, freed with free; |*out_size|
/// bytes before the NUL): checkpoint indexes and --weight-names rules.
tprt_status_t tprt__read_file(const char* path, char** out, size_t* out_size);

/// Formats |dims|[0, rank) as "[512,128]" into |buf|, truncating; returns |buf|.
const char* tprt__safetensors_format_shape(int rank, const int64_t* dims, char* buf, size_t size);

/// Returns the entry called |name| or NULL.
const tprt__safetensors_entry_t* tprt__safetensors_lookup(const tprt_safetensors_t* file, const char* name);

/// Returns NOT_FOUND for a missing |name|, listing the first names of |file| in the message.
tprt_status_t tprt__safetensors_not_found(const tprt_safetensors_t* file, const char* name);

/// Returns UNIMPLEMENTED when |entry|'s dtype is not one tpc supports, else NULL.
tprt_status_t tprt__safetensors_check_supported(const tprt_safetensors_t* file, const tprt__safetensors_entry_t* entry);

#endif  // TPRT_SAFETENSORS_IMPL_H_
