/*
 * quant.h - ggml's block-quantized tensor types (the ones GGUF files hold
 * weights in) widened to float32, bit for bit as ggml's reference
 * dequantizers (dequantize_row_* in ggml-quants.c) give them: the same
 * fields, the same float32 operations in the same order, each fp16 scale
 * widened exactly (attn_widen, ATTN_F16). float16 and bfloat16 tensors
 * are not here: attn_widen (attention.h) widens them.
 *
 * A tensor of a type here is a run of blocks, each block_values values
 * in block_bytes bytes, little-endian, with no padding:
 *
 *   Q8_0   32 values,  34 bytes: fp16 d; int8 qs[32].        y = qs*d
 *   Q4_0   32 values,  18 bytes: fp16 d; qs[16], value j the low nibble
 *          of qs[j] for j < 16, the high nibble of qs[j-16] for j >= 16.
 *                                                             y = (q-8)*d
 *   Q4_1   32 values,  20 bytes: fp16 d, m; qs[16] as Q4_0.   y = q*d + m
 *   Q5_0   32 values,  22 bytes: fp16 d; qh[4] (bit j of the little-endian
 *          uint32 is value j's fifth bit); qs[16] as Q4_0.    y = (q-16)*d
 *   Q5_1   32 values,  24 bytes: fp16 d, m; qh[4]; qs[16].   y = q*d + m
 *   Q4_K  256 values, 144 bytes: fp16 d, dmin; scales[12] (eight 6-bit
 *          scales and eight 6-bit mins, one pair per 32 values); qs[128],
 *          each 64 values 32 bytes, low nibbles then high.
 *                                          y = (d*sc)*q - dmin*m
 *   Q5_K  256 values, 176 bytes: as Q4_K with qh[32] before qs (bit 2i
 *          and 2i+1 of qh[l] the fifth bits of the i-th 64 values' l-th
 *          and (32+l)-th).
 *   Q6_K  256 values, 210 bytes: ql[128] (low 4 bits); qh[64] (high 2
 *          bits); int8 scales[16], one per 16 values; fp16 d.
 *                                          y = (d*sc)*(q-32)
 *
 * Nothing here is fused into a multiply-add: a product is rounded before
 * the sum that follows it, as in ggml's C.
 */
#ifndef ATTN_QUANT_H
#define ATTN_QUANT_H

#include <stddef.h>

/* The quantized types; each value is GGML's type id (ggml.h's enum
 * ggml_type), as a GGUF file's tensor info names it. */
typedef enum quant_type {
    QUANT_Q4_0 = 2,
    QUANT_Q4_1 = 3,
    QUANT_Q5_0 = 6,
    QUANT_Q5_1 = 7,
    QUANT_Q8_0 = 8,
    QUANT_Q4_K = 12,
    QUANT_Q5_K = 13,
    QUANT_Q6_K = 14
} quant_type;

/* Values and bytes of one block of type; 0 for any other number. */
size_t quant_block_values(int type);
size_t quant_block_bytes(int type);

/* ggml's name of type ("Q4_K"), or NULL for any other number. */
const char *quant_type_name(int type);

/*
 * dst[i] = the i-th value of the blocks at src, for i < count. count is
 * a whole number of type's blocks (asserted: the caller has checked it);
 * src holds count / block_values blocks and may be unaligned.
 */
void quant_widen(const void *src, quant_type type, size_t count, float *dst);

/* The same, one type each. */
void quant_widen_q8_0(const void *src, size_t count, float *dst);
void quant_widen_q4_0(const void *src, size_t count, float *dst);
void quant_widen_q4_1(const void *src, size_t count, float *dst);
void quant_widen_q5_0(const void *src, size_t count, float *dst);
void quant_widen_q5_1(const void *src, size_t count, float *dst);
void quant_widen_q4_k(const void *src, size_t count, float *dst);
void quant_widen_q5_k(const void *src, size_t count, float *dst);
void quant_widen_q6_k(const void *src, size_t count, float *dst);

#endif
