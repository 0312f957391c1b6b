/*
 * vecmath.c - which builds of the core's vector kernels this CPU runs
 * (vecmath.h).
 */
#include "vecmath.h"

static bool cpu_has_avx2_fma(void)
{
#if HAVE_AVX2_BUILD
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return false;
#endif
}

static bool cpu_has_avx512(void)
{
#if HAVE_AVX2_BUILD
    return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq");
#else
    return false;
#endif
}

bool vec_isa_available(enum vec_isa isa)
{
    switch (isa) {
    case VEC_ISA_PLAIN: return true;
    case VEC_ISA_AVX2: return cpu_has_avx2_fma();
    case VEC_ISA_AVX512: return cpu_has_avx512();
    }
    return false;
}

/* The compiler's feature bits are read from memory each time: cheap
 * beside any kernel worth dispatching. */
enum vec_isa vec_isa_best(void)
{
    return cpu_has_avx512()     ? VEC_ISA_AVX512
           : cpu_has_avx2_fma() ? VEC_ISA_AVX2
                                : VEC_ISA_PLAIN;
}
