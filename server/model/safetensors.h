/*
 * safetensors.h - the header of a safetensors file, read by its
 * specification: an 8-byte little-endian header length N, N bytes of JSON
 * (an object of tensors, each {"dtype", "shape", "data_offsets"}, plus an
 * optional "__metadata__" of string pairs; padded with spaces), then the
 * data, whose offsets count from byte 8 + N.
 *
 * Everything is checked before it is trusted: the length against the file,
 * the JSON, every dtype, shape and offset, each tensor's byte count against
 * its dtype and shape, the ranges against the data, against each other
 * (no overlap) and against the data's size (no byte belongs to no tensor,
 * as the format requires).
 */
#ifndef ATTND_SAFETENSORS_H
#define ATTND_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER ((size_t)100 << 20) /* as the reference reader */

typedef enum st_dtype {
    ST_F64,
    ST_F32,
    ST_F16,
    ST_BF16,
    ST_I64,
    ST_I32,
    ST_I16,
    ST_I8,
    ST_U64,
    ST_U32,
    ST_U16,
    ST_U8,
    ST_BOOL,
    ST_F8_E4M3,
    ST_F8_E5M2,
    ST_N_DTYPES
} st_dtype;

struct st_tensor {
    const char *name; /* NUL-terminated, inside struct st_header's names */
    st_dtype dtype;
    size_t ndim;
    uint64_t shape[ST_MAX_DIMS];
    uint64_t elements; /* the product of the shape (1 for a scalar) */
    size_t offset;     /* of its first byte, from the start of the file */
    size_t bytes;
};

/* On success the caller owns it; release it with st_header_free(). */
struct st_header {
    size_t count;
    struct st_tensor *tensors; /* [count] in header order */
    char *names;               /* every name, back to back */
};

/*
 * Read and check the header of a file held in bytes[0..len). On failure,
 * returns false with one line in err naming the tensor (when one is at
 * fault) and what is wrong, and leaves *out empty.
 */
bool st_header_parse(const unsigned char *bytes, size_t len,
                     struct st_header *out, char *err, size_t err_len);
void st_header_free(struct st_header *h);

/* The tensor called name, or NULL. */
const struct st_tensor *st_find(const struct st_header *h, const char *name);

/* The specification's name of a dtype ("F32"), and its size in bytes. */
const char *st_dtype_name(st_dtype d);
size_t st_dtype_size(st_dtype d);

#endif
