/*
 * vecmath.h - what the core's elementwise kernels share: eight- and
 * sixteen-wide float vectors (GCC/Clang vector extensions), the builds a
 * kernel comes in (plain SSE on any x86-64, AVX2 + FMA, AVX-512) with the
 * CPU test that picks one, and exp() over a vector. Internal to the core.
 *
 * A kernel that includes this is compiled with no multiply-add fused
 * into one rounding, so that every build gives the same bits: GCC fuses
 * nothing in ISO C mode, and clang is told not to below.
 */
#ifndef ATTN_VECMATH_H
#define ATTN_VECMATH_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));
typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));

/* x86-64 CPUs with AVX2 and FMA get a second build of each kernel, and
 * those with AVX-512 (F, VL and DQ, whose 64-bit multiply the seeded
 * draws use) a third, chosen per call (vec_isa_best()). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2_BUILD 1
#define AVX2_TARGET __attribute__((target("avx2,fma")))
#define AVX512_TARGET                                                          \
    __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma")))
#else
#define HAVE_AVX2_BUILD 0
#endif

enum vec_isa { VEC_ISA_PLAIN, VEC_ISA_AVX2, VEC_ISA_AVX512 };

/* Can this CPU run the build? The plain one always can. */
bool vec_isa_available(enum vec_isa isa);

/* The widest build this CPU runs. */
enum vec_isa vec_isa_best(void);

/* Call name_plain, name_avx2 or name_avx512 (args) as isa says. */
#if HAVE_AVX2_BUILD
#define VEC_DISPATCH(isa, name, ...)                                           \
    ((isa) == VEC_ISA_AVX512 ? name##_avx512(__VA_ARGS__)                      \
     : (isa) == VEC_ISA_AVX2 ? name##_avx2(__VA_ARGS__)                        \
                             : name##_plain(__VA_ARGS__))
#else
#define VEC_DISPATCH(isa, name, ...) ((void)(isa), name##_plain(__VA_ARGS__))
#endif

#define ALWAYS_INLINE static inline __attribute__((always_inline))

typedef uint16_t v16h __attribute__((vector_size(32)));
typedef uint32_t v16u __attribute__((vector_size(64)));

/* 16 bfloat16s of h as floats: each a float's upper half, widened and
 * shifted in registers (a vector cast keeps the bits; going through
 * memory instead would stall on every load). */
ALWAYS_INLINE void bf16x16(const uint16_t *h, v16f *out)
{
    v16h half;
    __builtin_memcpy(&half, h, sizeof half);
    const v16u bits = __builtin_convertvector(half, v16u) << 16;
    *out = (v16f)bits;
}

/* Below this exp(x) is under FLT_MIN; it is returned as exactly 0. */
#define EXP_FLOOR -87.0f

/* Vectors pass between helpers by pointer: a 32-byte vector argument
 * would tie the helpers to the AVX calling convention. */
#define SELECT(mask, yes, no)                                                  \
    ((v8f)(((v8i)(yes) & (mask)) | ((v8i)(no) & ~(mask))))

#define SELECT16(mask, yes, no)                                                \
    ((v16f)(((v16i)(yes) & (mask)) | ((v16i)(no) & ~(mask))))

/* Statement-by-statement over N vectors at once: each statement of a
 * kernel done to every vector before the next statement. A kernel's long
 * chain of dependent steps then meets the core's scheduler as N chains
 * side by side; one vector after another fills the scheduler with the
 * waiting steps of one chain and runs at its latency (GELU over a 64 x
 * 3072 block: 1.5 ns an element one vector at a time, 0.7 four at once,
 * the same bits). */
#define EACH(i, N) _Pragma("GCC unroll 16") for (int i = 0; i < (N); i++)

/*
 * exp(x) for each of N vectors of floats xs[0 .. N-1] in place (type VF,
 * its integer twin VI, its SELECT), within 2 ulp for x in [-87, 88]; 0
 * below -87, including -INFINITY (a masked score); exp(88) above 88.
 * exp(x) = 2^n * exp(r), n = round(x / ln 2), r = x - n ln 2 in
 * [-ln2/2, ln2/2], exp(r) by Cephes' degree-6 polynomial. Each lane's
 * arithmetic is the same at every width and every N.
 */
#define EXP_N(VF, VI, SEL, N, xs)                                              \
    do {                                                                       \
        const VF zero_ = {0};                                                  \
        const float shifter_ = 12582912.0f; /* 1.5 * 2^23: adding it rounds */ \
        VF x_[N], t_[N], r_[N], p_[N];                                         \
        VI underflow_[N];                                                      \
        EACH(i, N) underflow_[i] = (xs)[i] < EXP_FLOOR;                        \
        EACH(i, N) x_[i] = SEL(underflow_[i], zero_ + EXP_FLOOR, (xs)[i]);     \
        EACH(i, N) x_[i] = SEL(x_[i] > 88.0f, zero_ + 88.0f, x_[i]);           \
        EACH(i, N) t_[i] = x_[i] * 1.44269504088896341f + shifter_;            \
        EACH(i, N)                                                             \
        {                                                                      \
            const VF n_ = t_[i] - shifter_;                                    \
            r_[i] = x_[i] - n_ * 0.693359375f - n_ * -2.12194440e-4f;          \
        }                                                                      \
        EACH(i, N) p_[i] = zero_ + 1.9875691500e-4f;                           \
        EACH(i, N) p_[i] = p_[i] * r_[i] + 1.3981999507e-3f;                   \
        EACH(i, N) p_[i] = p_[i] * r_[i] + 8.3334519073e-3f;                   \
        EACH(i, N) p_[i] = p_[i] * r_[i] + 4.1665795894e-2f;                   \
        EACH(i, N) p_[i] = p_[i] * r_[i] + 1.6666665459e-1f;                   \
        EACH(i, N) p_[i] = p_[i] * r_[i] + 5.0000001201e-1f;                   \
        EACH(i, N) p_[i] = p_[i] * r_[i] * r_[i] + r_[i] + 1.0f;               \
        EACH(i, N)                                                             \
        {                                                                      \
            const VI bits_ = ((VI)t_[i] - (VI)(zero_ + shifter_) + 127) << 23; \
            (xs)[i] = SEL(underflow_[i], zero_, p_[i] * (VF)bits_);            \
        }                                                                      \
    } while (0)

ALWAYS_INLINE void exp_v8(v8f *xp)
{
    EXP_N(v8f, v8i, SELECT, 1, xp);
}

ALWAYS_INLINE void exp_v16(v16f *xp)
{
    EXP_N(v16f, v16i, SELECT16, 1, xp);
}

#endif
