// Parsing and validating a safetensors header (see tprt_safetensors.h and docs/io.md).
//
// The JSON is parsed with cJSON; this file turns the tree into the file's entry table and checks
// everything a later read relies on: each tensor's dtype, shape and byte size, and that the
// data_offsets tile the data section exactly (no overlap, no gap, nothing past the end or left
// over), which is what upstream safetensors also requires.
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tprt_safetensors_impl.h"

// Dimensions and offsets are read through a double (cJSON's only number type), which holds every
// integer up to 2^53 exactly; anything larger cannot be a real tensor.
#define TPRT__ST_MAX_INT 9007199254740992.0

// Standard safetensors dtypes that tpc recognises but does not compute with. Their sizes are still
// needed to validate the offsets of a file that also holds supported tensors.
static const struct {
  const char* name;
  int bits;
} tprt__st_other_dtypes[] = {
    {"BOOL", 8}, {"U8", 8},   {"I8", 8},      {"I16", 16},    {"U16", 16},        {"U32", 32},        {"U64", 64},
    {"F64", 64}, {"C64", 64}, {"F6_E2M3", 6}, {"F6_E3M2", 6}, {"F8_E4M3FNUZ", 8}, {"F8_E5M2FNUZ", 8},
};

// Fills |e|'s dtype fields from the file's spelling; false for an unknown spelling.
static bool tprt__st_resolve_dtype(const char* spelling, tprt__safetensors_entry_t* e) {
  for (int d = 0; d < TPRT_DTYPE_COUNT; ++d) {
    const char* s = tprt_dtype_safetensors_name(d);
    if (s && strcmp(s, spelling) == 0) {
      e->dtype = d;
      e->dtype_name = s;
      e->bits = tprt_dtype_bits(d);
      return true;
    }
  }
  for (size_t i = 0; i < sizeof tprt__st_other_dtypes / sizeof tprt__st_other_dtypes[0]; ++i) {
    if (strcmp(tprt__st_other_dtypes[i].name, spelling) == 0) {
      e->dtype = -1;
      e->dtype_name = tprt__st_other_dtypes[i].name;
      e->bits = tprt__st_other_dtypes[i].bits;
      return true;
    }
  }
  return false;
}

static const char* tprt__st_json_kind(const cJSON* item) {
  if (cJSON_IsArray(item)) return "an array";
  if (cJSON_IsObject(item)) return "an object";
  if (cJSON_IsString(item)) return "a string";
  if (cJSON_IsNumber(item)) return "a number";
  if (cJSON_IsBool(item)) return "a boolean";
  if (cJSON_IsNull(item)) return "null";
  return "not JSON";
}

// Reads |item| as an integer in [0, 2^53]; |what| names it in the message ("shape[1]").
static tprt_status_t tprt__st_read_uint(const char* path, const char* tensor, const char* what, const cJSON* item,
                                        uint64_t* out) {
  if (!cJSON_IsNumber(item))
    return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: tensor '%s' %s is %s, not an integer", path,
                            tensor, what, tprt__st_json_kind(item));
  double v = item->valuedouble;
  if (v > TPRT__ST_MAX_INT)
    return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: tensor '%s' %s is %.17g, larger than 2^53", path, tensor, what,
                            v);
  // The range check above makes the conversion defined.
  if (!(v >= 0) || v != (double)(uint64_t)v)
    return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: tensor '%s' %s is %.17g, not a non-negative integer", path,
                            tensor, what, v);
  *out = (uint64_t)v;
  return NULL;
}

// Finds the single member |key| of |obj|; an absent or repeated member is an error.
static tprt_status_t tprt__st_member(const char* path, const char* tensor, const cJSON* obj, const char* key,
                                     const cJSON** out) {
  *out = NULL;
  for (const cJSON* c = obj->child; c; c = c->next) {
    if (strcmp(c->string, key) != 0) continue;
    if (*out)
      return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: tensor '%s' has two '%s' fields", path,
                              tensor, key);
    *out = c;
  }
  if (!*out)
    return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: tensor '%s' has no '%s' field", path, tensor,
                            key);
  return NULL;
}

// Parses one tensor object into |e| (name already set) and checks its size against its offsets.
static tprt_status_t tprt__st_parse_entry(const tprt_safetensors_t* file, const cJSON* obj,
                                          tprt__safetensors_entry_t* e) {
  const char* path = file->path;
  const char* name = e->name;
  if (!cJSON_IsObject(obj))
    return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: tensor '%s' is %s, not an object", path, name,
                            tprt__st_json_kind(obj));
  const cJSON *dtype, *shape, *offsets;
  TPRT__ST_RETURN_IF_ERROR(tprt__st_member(path, name, obj, "dtype", &dtype));
  TPRT__ST_RETURN_IF_ERROR(tprt__st_member(path, name, obj, "shape", &shape));
  TPRT__ST_RETURN_IF_ERROR(tprt__st_member(path, name, obj, "data_offsets", &offsets));

  if (!cJSON_IsString(dtype))
    return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: tensor '%s' dtype is %s, not a string", path,
                            name, tprt__st_json_kind(dtype));
  if (!tprt__st_resolve_dtype(dtype->valuestring, e))
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "%s: tensor '%s' has unknown dtype '%s'", path, name,
                            dtype->valuestring);

  if (!cJSON_IsArray(shape))
    return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: tensor '%s' shape is %s, not an array", path,
                            name, tprt__st_json_kind(shape));
  int rank = cJSON_GetArraySize(shape);
  if (rank > TPRT_MAX_RANK)
    return tprt_make_status(TPRT_STATUS_UNIMPLEMENTED, "%s: tensor '%s' has rank %d; tpc supports at most %d", path,
                            name, rank, TPRT_MAX_RANK);
  e->rank = rank;
  for (int d = 0; d < TPRT_MAX_RANK; ++d) e->dims[d] = 1;
  int d = 0;
  bool empty = false;
  for (const cJSON* c = shape->child; c; c = c->next, ++d) {
    char what[32];
    snprintf(what, sizeof what, "shape[%d]", d);
    uint64_t v;
    TPRT__ST_RETURN_IF_ERROR(tprt__st_read_uint(path, name, what, c, &v));
    e->dims[d] = (int64_t)v;
    empty |= v == 0;
  }
  char shape_text[160];
  tprt__safetensors_format_shape(e->rank, e->dims, shape_text, sizeof shape_text);
  // Every size below fits in 64 bits: the element count is capped so that count * bits does.
  uint64_t numel = 1;
  for (d = 0; d < rank && !empty; ++d) {
    if (numel > UINT64_MAX / 64 / (uint64_t)e->dims[d])
      return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: tensor '%s' shape %s has too many elements", path, name,
                              shape_text);
    numel *= (uint64_t)e->dims[d];
  }
  if (empty) numel = 0;
  uint64_t bytes = (numel * (uint64_t)e->bits + 7) / 8;

  if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2)
    return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: tensor '%s' data_offsets is not [begin, end]",
                            path, name);
  TPRT__ST_RETURN_IF_ERROR(tprt__st_read_uint(path, name, "data_offsets[0]", offsets->child, &e->begin));
  TPRT__ST_RETURN_IF_ERROR(tprt__st_read_uint(path, name, "data_offsets[1]", offsets->child->next, &e->end));
  if (e->end < e->begin)
    return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                            "%s: tensor '%s' data_offsets [%" PRIu64 ",%" PRIu64 "] end before they begin", path, name,
                            e->begin, e->end);
  if (e->end - e->begin != bytes)
    return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                            "%s: tensor '%s' data_offsets [%" PRIu64 ",%" PRIu64 "] do not match its %" PRIu64
                            " bytes (dtype %s, shape %s)",
                            path, name, e->begin, e->end, bytes, e->dtype_name, shape_text);
  if (e->end > file->data_size)
    return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                            "%s: tensor '%s' data_offsets [%" PRIu64 ",%" PRIu64
                            "] run past the end of the file (the data section has %" PRIu64 " bytes)",
                            path, name, e->begin, e->end, file->data_size);
  return NULL;
}

static int tprt__st_by_offsets(const void* a, const void* b) {
  const tprt__safetensors_entry_t* x = *(tprt__safetensors_entry_t* const*)a;
  const tprt__safetensors_entry_t* y = *(tprt__safetensors_entry_t* const*)b;
  if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
  if (x->end != y->end) return x->end < y->end ? -1 : 1;
  return 0;
}

static int tprt__st_by_name(const void* a, const void* b) {
  return strcmp((*(tprt__safetensors_entry_t* const*)a)->name, (*(tprt__safetensors_entry_t* const*)b)->name);
}

// Checks that no two tensors share a name and that the tensors tile [0, data_size) exactly, then
// leaves |by_name| sorted by name.
static tprt_status_t tprt__st_check_layout(tprt_safetensors_t* file) {
  const char* path = file->path;
  int n = file->count;
  for (int i = 0; i < n; ++i) file->by_name[i] = &file->entries[i];
  qsort(file->by_name, (size_t)n, sizeof file->by_name[0], tprt__st_by_name);
  for (int i = 1; i < n; ++i)
    if (strcmp(file->by_name[i - 1]->name, file->by_name[i]->name) == 0)
      return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: duplicate tensor name '%s'", path,
                              file->by_name[i]->name);
  qsort(file->by_name, (size_t)n, sizeof file->by_name[0], tprt__st_by_offsets);
  uint64_t pos = 0;
  const tprt__safetensors_entry_t* prev = NULL;
  for (int i = 0; i < n; ++i) {
    const tprt__safetensors_entry_t* e = file->by_name[i];
    if (e->begin < pos)
      return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                              "%s: tensor '%s' data_offsets [%" PRIu64 ",%" PRIu64 "] overlap tensor '%s' [%" PRIu64
                              ",%" PRIu64 "]",
                              path, e->name, e->begin, e->end, prev->name, prev->begin, prev->end);
    if (e->begin > pos && prev)
      return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                              "%s: tensor '%s' data_offsets [%" PRIu64 ",%" PRIu64 "] leave a gap of %" PRIu64
                              " bytes after tensor '%s' [%" PRIu64 ",%" PRIu64 "]",
                              path, e->name, e->begin, e->end, e->begin - pos, prev->name, prev->begin, prev->end);
    if (e->begin > pos)
      return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                              "%s: tensor '%s' data_offsets [%" PRIu64 ",%" PRIu64 "] leave a gap of %" PRIu64
                              " bytes at the start of the data section",
                              path, e->name, e->begin, e->end, e->begin);
    pos = e->end;
    prev = e;
  }
  if (pos != file->data_size)
    return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                            "%s: %" PRIu64 " bytes after the last tensor (data section of %" PRIu64
                            " bytes, tensors end at %" PRIu64 ") are not described by the header",
                            path, file->data_size - pos, file->data_size, pos);
  qsort(file->by_name, (size_t)n, sizeof file->by_name[0], tprt__st_by_name);
  return NULL;
}

// Copies |s| into the arena at |*cursor| and returns the copy.
static const char* tprt__st_intern(char** cursor, const char* s) {
  size_t n = strlen(s) + 1;
  memcpy(*cursor, s, n);
  const char* copy = *cursor;
  *cursor += n;
  return copy;
}

// Returns the text's length without the JSON whitespace that pads it (upstream pads with spaces).
static size_t tprt__st_trim(const char* text, size_t n) {
  while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\t' || text[n - 1] == '\n' || text[n - 1] == '\r')) --n;
  return n;
}

// Checks that |root| is a tree that upstream safetensors would also accept, counting tensors and
// arena bytes and finding "__metadata__".
static tprt_status_t tprt__st_survey(const char* path, const cJSON* root, int* out_tensors, size_t* out_string_bytes,
                                     const cJSON** out_metadata) {
  int tensors = 0;
  size_t bytes = 0;
  const cJSON* metadata = NULL;
  for (const cJSON* c = root->child; c; c = c->next) {
    if (strcmp(c->string, "__metadata__") != 0) {
      if (tensors == INT32_MAX)
        return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: too many tensors", path);
      ++tensors;
      bytes += strlen(c->string) + 1;
      continue;
    }
    if (metadata)
      return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: two '__metadata__' objects", path);
    metadata = c;
    if (!cJSON_IsObject(c))
      return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: '__metadata__' is %s, not an object", path,
                              tprt__st_json_kind(c));
    for (const cJSON* m = c->child; m; m = m->next) {
      if (!cJSON_IsString(m))
        return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                                "%s: corrupt header: '__metadata__' value of '%s' is %s, not a string", path, m->string,
                                tprt__st_json_kind(m));
      bytes += strlen(m->string) + strlen(m->valuestring) + 2;
    }
  }
  *out_tensors = tensors;
  *out_string_bytes = bytes;
  *out_metadata = metadata;
  return NULL;
}

tprt_status_t tprt__safetensors_parse_header(tprt_safetensors_t* file, const char* text, size_t n) {
  const char* path = file->path;
  const char* nul = memchr(text, '\0', n);
  if (nul)
    return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: NUL byte at byte %td of the header", path,
                            nul - text);
  int64_t bad = tprt__safetensors_utf8_error(text, n);
  if (bad >= 0)
    return tprt_make_status(TPRT_STATUS_DATA_LOSS,
                            "%s: corrupt header: invalid UTF-8 at byte %" PRId64 " of the header", path, bad);
  size_t length = tprt__st_trim(text, n);
  const char* end = NULL;
  cJSON* root = cJSON_ParseWithLengthOpts(text, length, &end, 0);
  if (!root)
    return tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: JSON parse error near byte %td of the header",
                            path, end ? end - text : (ptrdiff_t)0);

  tprt_status_t status = NULL;
  const cJSON* metadata = NULL;
  size_t string_bytes = 0;
  if (!cJSON_IsObject(root)) {
    status = tprt_make_status(TPRT_STATUS_DATA_LOSS, "%s: corrupt header: expected a JSON object, found %s", path,
                              tprt__st_json_kind(root));
    goto done;
  }
  // cJSON stops right after the value; only the padding may follow it.
  if (end != text + length) {
    while (*end == ' ' || *end == '\t' || *end == '\n' || *end == '\r') ++end;
    status = tprt_make_status(TPRT_STATUS_DATA_LOSS,
                              "%s: corrupt header: unexpected bytes after the JSON object at byte %td of the header",
                              path, end - text);
    goto done;
  }
  status = tprt__st_survey(path, root, &file->count, &string_bytes, &metadata);
  if (status) goto done;
  file->metadata_count = metadata ? cJSON_GetArraySize(metadata) : 0;

  tprt_allocator_t a = file->allocator;
  size_t count = (size_t)file->count;
  TPRT_GOTO_IF_ERROR(status, tprt_allocator_malloc(a, count * sizeof *file->entries, 16, (void**)&file->entries), done,
                     "%s: tensor table", path);
  TPRT_GOTO_IF_ERROR(status, tprt_allocator_malloc(a, count * sizeof *file->by_name, 16, (void**)&file->by_name), done,
                     "%s: name index", path);
  TPRT_GOTO_IF_ERROR(
      status,
      tprt_allocator_malloc(a, 2 * (size_t)file->metadata_count * sizeof *file->metadata, 16, (void**)&file->metadata),
      done, "%s: metadata table", path);
  TPRT_GOTO_IF_ERROR(status, tprt_allocator_malloc(a, string_bytes, 16, (void**)&file->strings), done,
                     "%s: name strings", path);

  char* cursor = file->strings;
  int i = 0;
  for (const cJSON* c = root->child; c; c = c->next) {
    if (c == metadata) continue;
    tprt__safetensors_entry_t* e = &file->entries[i++];
    e->name = tprt__st_intern(&cursor, c->string);
    status = tprt__st_parse_entry(file, c, e);
    if (status) goto done;
  }
  i = 0;
  for (const cJSON* m = metadata ? metadata->child : NULL; m; m = m->next) {
    file->metadata[i++] = tprt__st_intern(&cursor, m->string);
    file->metadata[i++] = tprt__st_intern(&cursor, m->valuestring);
  }
  status = tprt__st_check_layout(file);

done:
  cJSON_Delete(root);
  return status;
}
