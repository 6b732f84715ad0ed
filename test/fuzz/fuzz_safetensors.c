// libFuzzer harness: opening a safetensors file and reading from it.
//
// The input is the whole file (8-byte header size, JSON header, data). It is written to an
// in-memory file (memfd) and opened with tprt_safetensors_open, which maps it and validates the
// header (runtime/tprt_safetensors_header.c). When the file opens, every promise of
// runtime/tprt_safetensors.h is checked against the bytes themselves:
//   - the tensors tile the data section: 8 + header size + their bytes = the file's size;
//   - info() describes bytes inside the file, find() returns each tensor's own index, every
//     __metadata__ key is found;
//   - read() of a supported tensor copies exactly its bytes; a wrong dtype or shape is refused with
//     INVALID_ARGUMENT, an unsupported dtype with UNIMPLEMENTED;
//   - read_slice() with offsets, sizes and strides taken from the input's last bytes either fails
//     with OUT_OF_RANGE exactly when the slice leaves the tensor, or copies what a naive
//     element-by-element reference copies (F4 nibbles and the zeroed padding nibble included).
#define _GNU_SOURCE  // memfd_create
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "tprt_safetensors_impl.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

/// Tensors read per input; the rest are only described (a header may list thousands).
#define TPC_FUZZ_MAX_READS 16
/// Elements a slice may have; larger ones are skipped to keep each input fast.
#define TPC_FUZZ_MAX_SLICE_ELEMENTS (1 << 16)

// Writes |data| to the harness's in-memory file and returns a path that opens it.
static const char* tpc__fuzz_write_file(const uint8_t* data, size_t size) {
  static int fd = -1;
  static char path[64];
  if (fd < 0) {
    fd = memfd_create("fuzz.safetensors", MFD_CLOEXEC);
    TPC_FUZZ_CHECK(fd >= 0);
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  }
  TPC_FUZZ_CHECK(ftruncate(fd, 0) == 0);
  for (size_t done = 0; done < size;) {
    ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
    TPC_FUZZ_CHECK(n > 0);
    done += (size_t)n;
  }
  return path;
}

// Parameters drawn from the input's last bytes, read backwards and cycling: mutating them changes
// the slices without touching the header (the data section's contents mean nothing to the reader).
typedef struct {
  const uint8_t* data;
  size_t size, next;
} tpc__fuzz_bytes_t;

static unsigned tpc__fuzz_byte(tpc__fuzz_bytes_t* b) {
  if (b->size == 0) return 0;
  unsigned v = b->data[b->size - 1 - b->next % (b->size < 64 ? b->size : 64)];
  ++b->next;
  return v;
}

// Reads element |i| of a packed row-major array with |bits| bits per element (4, 8, 16, 32, 64).
static uint64_t tpc__fuzz_get(const uint8_t* src, uint64_t i, int bits) {
  if (bits == 4) return (src[i / 2] >> (4 * (i % 2))) & 0xFu;
  uint64_t v = 0;
  memcpy(&v, src + i * (uint64_t)bits / 8, (size_t)bits / 8);
  return v;
}

static void tpc__fuzz_set(uint8_t* dst, uint64_t i, int bits, uint64_t v) {
  if (bits == 4) {
    unsigned shift = 4u * (unsigned)(i % 2);
    dst[i / 2] = (uint8_t)((dst[i / 2] & ~(0xFu << shift)) | ((unsigned)v << shift));
    return;
  }
  memcpy(dst + i * (uint64_t)bits / 8, &v, (size_t)bits / 8);
}

// Expects read() of entry |e| to copy exactly its bytes, and to refuse a wrong dtype or shape.
static void tpc__fuzz_read_whole(const tprt_safetensors_t* file, const tprt__safetensors_entry_t* e,
                                 const uint8_t* bytes, uint64_t byte_size) {
  uint8_t* buf = malloc(byte_size + 1);
  TPC_FUZZ_CHECK(buf != NULL);
  tprt_tensor_t want = tprt_tensor_make(buf, e->dtype, e->rank, e->dims);
  tprt_status_t status = tprt_safetensors_read(file, e->name, &want);
  TPC_FUZZ_CHECK(status == NULL);
  TPC_FUZZ_CHECK(memcmp(buf, bytes, byte_size) == 0);
  tprt_tensor_t other = want;
  other.dtype = (e->dtype + 1) % TPRT_DTYPE_COUNT;
  status = tprt_safetensors_read(file, e->name, &other);
  TPC_FUZZ_CHECK(tprt_status_code(status) == TPRT_STATUS_INVALID_ARGUMENT);
  tprt_status_free(status);
  if (e->rank < TPRT_MAX_RANK) {
    other = tprt_tensor_make(buf, e->dtype, e->rank + 1, e->dims);
    status = tprt_safetensors_read(file, e->name, &other);
    TPC_FUZZ_CHECK(tprt_status_code(status) == TPRT_STATUS_INVALID_ARGUMENT);
    tprt_status_free(status);
  }
  free(buf);
}

// Reads one slice of entry |e| chosen by |b| and compares it with an element-by-element copy.
static void tpc__fuzz_read_slice(const tprt_safetensors_t* file, const tprt__safetensors_entry_t* e,
                                 const uint8_t* bytes, tpc__fuzz_bytes_t* b) {
  int rank = e->rank;
  int64_t offsets[TPRT_MAX_RANK], sizes[TPRT_MAX_RANK], strides[TPRT_MAX_RANK];
  bool inside = true, empty = false;
  uint64_t total = 1;
  for (int d = 0; d < rank; ++d) {
    // Offsets and sizes around the dimension's ends: in range, on the edge or one past it.
    int64_t dim = e->dims[d];
    unsigned r = tpc__fuzz_byte(b);
    offsets[d] = r & 1 ? (int64_t)(tpc__fuzz_byte(b) % 4) : dim - (int64_t)(tpc__fuzz_byte(b) % 3);
    if (offsets[d] < 0) offsets[d] = 0;
    strides[d] = 1 + (int64_t)((r >> 1) % 3);
    int64_t room = dim > offsets[d] ? (dim - offsets[d] + strides[d] - 1) / strides[d] : 0;
    sizes[d] = r & 8 ? room - (int64_t)((r >> 4) % 2) + (int64_t)((r >> 5) % 2) : (int64_t)((r >> 4) % 4);
    if (sizes[d] < 0) sizes[d] = 0;
    inside = inside &&
             (sizes[d] == 0 || (offsets[d] < dim &&
                                (uint64_t)(sizes[d] - 1) <= (uint64_t)(dim - 1 - offsets[d]) / (uint64_t)strides[d]));
    empty = empty || sizes[d] == 0;
  }
  for (int d = 0; d < rank && !empty; ++d) {
    if ((uint64_t)sizes[d] > TPC_FUZZ_MAX_SLICE_ELEMENTS / total) return;
    total *= (uint64_t)sizes[d];
  }
  if (empty) total = 0;
  if (!inside) total = 0;  // nothing is copied; the destination may stay unallocated
  size_t out_bytes = (size_t)((total * (uint64_t)e->bits + 7) / 8);
  uint8_t* out = malloc(out_bytes + 1);
  uint8_t* ref = calloc(out_bytes + 1, 1);
  TPC_FUZZ_CHECK(out && ref);
  memset(out, 0xA5, out_bytes + 1);  // the reader must overwrite every byte it promises
  tprt_tensor_t view = tprt_tensor_make(total ? out : NULL, e->dtype, rank, sizes);
  tprt_status_t status = tprt_safetensors_read_slice(file, e->name, &view, rank, offsets, sizes, strides);
  if (!inside) {
    TPC_FUZZ_CHECK(tprt_status_code(status) == TPRT_STATUS_OUT_OF_RANGE);
  } else {
    TPC_FUZZ_CHECK(status == NULL);
    // The reference: result element i (row-major over |sizes|) is source element
    // sum_d (offsets[d] + index[d] * strides[d]) * pitch[d].
    int64_t index[TPRT_MAX_RANK] = {0};
    for (uint64_t i = 0; i < total; ++i) {
      uint64_t src = 0;
      for (int d = 0; d < rank; ++d) src = src * (uint64_t)e->dims[d] + (uint64_t)(offsets[d] + index[d] * strides[d]);
      tpc__fuzz_set(ref, i, e->bits, tpc__fuzz_get(bytes, src, e->bits));
      for (int d = rank - 1; d >= 0 && ++index[d] == sizes[d]; --d) index[d] = 0;
    }
    TPC_FUZZ_CHECK(memcmp(out, ref, out_bytes) == 0);
  }
  tprt_status_free(status);
  free(out);
  free(ref);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tprt_safetensors_t* file = NULL;
  tprt_status_t status = tprt_safetensors_open(tpc__fuzz_write_file(data, size), tprt_allocator_system(), &file);
  if (status) {
    TPC_FUZZ_CHECK(file == NULL && tprt_status_message(status) != NULL);
    tprt_status_free(status);
    return 0;
  }
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | data[i];
  int count = tprt_safetensors_count(file);
  uint64_t tensor_bytes = 0;
  tpc__fuzz_bytes_t bytes = {data, size, 0};
  for (int i = 0; i < count; ++i) {
    tprt_safetensors_info_t info;
    TPC_FUZZ_CHECK(tprt_safetensors_info(file, i, &info) == NULL);
    TPC_FUZZ_CHECK(info.rank >= 0 && info.rank <= TPRT_MAX_RANK);
    TPC_FUZZ_CHECK(info.file_offset >= 8 + header && info.file_offset + info.byte_size <= size);
    TPC_FUZZ_CHECK(tprt_safetensors_find(file, info.name) == i);
    tensor_bytes += info.byte_size;
    if (i >= TPC_FUZZ_MAX_READS) continue;
    const tprt__safetensors_entry_t* e = &file->entries[i];
    if (info.dtype < 0) {
      tprt_tensor_t any = tprt_tensor_make(NULL, TPRT_DTYPE_F32, info.rank, info.dims);
      status = tprt_safetensors_read(file, info.name, &any);
      TPC_FUZZ_CHECK(tprt_status_code(status) == TPRT_STATUS_UNIMPLEMENTED);
      tprt_status_free(status);
      continue;
    }
    tpc__fuzz_read_whole(file, e, data + info.file_offset, info.byte_size);
    for (int k = 0; k < 3; ++k) tpc__fuzz_read_slice(file, e, data + info.file_offset, &bytes);
  }
  TPC_FUZZ_CHECK(8 + header + tensor_bytes == size);
  for (int i = 0; i < file->metadata_count; ++i)
    TPC_FUZZ_CHECK(tprt_safetensors_metadata(file, file->metadata[2 * i]) != NULL);
  tprt_safetensors_info_t past;
  status = tprt_safetensors_info(file, count, &past);
  TPC_FUZZ_CHECK(tprt_status_code(status) == TPRT_STATUS_OUT_OF_RANGE);
  tprt_status_free(status);
  // A name that no tensor has is NOT_FOUND, and the message lists some that exist.
  static const char kMissing[] = "\x01missing";
  if (tprt_safetensors_find(file, kMissing) < 0) {
    status = tprt_safetensors_read(file, kMissing, NULL);
    TPC_FUZZ_CHECK(tprt_status_code(status) == TPRT_STATUS_NOT_FOUND);
    tprt_status_free(status);
  }
  tprt_safetensors_close(file);
  return 0;
}
