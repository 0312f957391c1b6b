/*
 * bandwidth.c - the machine's read bandwidth, the best of several read
 * loops over a block larger than the caches (bandwidth.h).
 */
/* madvise() and MADV_HUGEPAGE, where the system has them */
#define _DEFAULT_SOURCE

#include "bandwidth.h"
#include "bench_clock.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define AVX2_TARGET __attribute__((target("avx2")))
#define AVX512_TARGET __attribute__((target("avx512f")))
#define HUGE_PAGE ((size_t)2 << 20)
#define MAX_READERS 64
#define LINE 64

/* A read loop: sums n bytes from p (64-byte aligned, n a multiple of
 * 1 KiB), so that no load can be left out; ahead is its prefetch
 * distance in bytes, when it has one. */
typedef uint64_t (*read_loop)(const char *p, size_t n, size_t ahead);

static uint64_t read_scalar(const char *p, size_t n, size_t ahead)
{
    (void)ahead;
    const uint64_t *w = (const uint64_t *)(const void *)p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i < n / 8; i += 4) {
        s0 += w[i];
        s1 += w[i + 1];
        s2 += w[i + 2];
        s3 += w[i + 3];
    }
    return s0 + s1 + s2 + s3;
}

/* 256-bit loads into k sums, k * 32 bytes a step */
#define A2(k, q) a##k = _mm256_add_epi64(a##k, _mm256_load_si256((q) + (k)))

AVX2_TARGET static uint64_t avx2_total(__m256i a)
{
    uint64_t v[4];
    _mm256_storeu_si256((__m256i *)(void *)v, a);
    return v[0] + v[1] + v[2] + v[3];
}

AVX2_TARGET static uint64_t read_avx2_x4(const char *p, size_t n, size_t ahead)
{
    (void)ahead;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 4 * 32) {
        const __m256i *q = (const __m256i *)(const void *)(p + i);
        A2(0, q);
        A2(1, q);
        A2(2, q);
        A2(3, q);
    }
    return avx2_total(
        _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3)));
}

AVX2_TARGET static uint64_t read_avx2_x8(const char *p, size_t n, size_t ahead)
{
    (void)ahead;
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0,
            a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i < n; i += 8 * 32) {
        const __m256i *q = (const __m256i *)(const void *)(p + i);
        A2(0, q);
        A2(1, q);
        A2(2, q);
        A2(3, q);
        A2(4, q);
        A2(5, q);
        A2(6, q);
        A2(7, q);
    }
    a0 = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    a4 = _mm256_add_epi64(_mm256_add_epi64(a4, a5), _mm256_add_epi64(a6, a7));
    return avx2_total(_mm256_add_epi64(a0, a4));
}

/* 512-bit loads into k sums, k * 64 bytes a step */
#define A5(k, q) a##k = _mm512_add_epi64(a##k, _mm512_load_si512((q) + (k)))
/* the same through non-temporal loads (VMOVNTDQA) */
#define N5(k, q)                                                               \
    a##k = _mm512_add_epi64(                                                   \
        a##k, _mm512_stream_load_si512((void *)(uintptr_t)((q) + (k))))
#define EIGHT(M, q)                                                            \
    do {                                                                       \
        M(0, q);                                                               \
        M(1, q);                                                               \
        M(2, q);                                                               \
        M(3, q);                                                               \
        M(4, q);                                                               \
        M(5, q);                                                               \
        M(6, q);                                                               \
        M(7, q);                                                               \
    } while (0)

AVX512_TARGET static uint64_t avx512_total8(__m512i a0, __m512i a1, __m512i a2,
                                            __m512i a3, __m512i a4, __m512i a5,
                                            __m512i a6, __m512i a7)
{
    a0 = _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3));
    a4 = _mm512_add_epi64(_mm512_add_epi64(a4, a5), _mm512_add_epi64(a6, a7));
    return (uint64_t)_mm512_reduce_add_epi64(_mm512_add_epi64(a0, a4));
}

AVX512_TARGET static uint64_t read_avx512_x4(const char *p, size_t n,
                                             size_t ahead)
{
    (void)ahead;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i < n; i += 4 * 64) {
        const __m512i *q = (const __m512i *)(const void *)(p + i);
        A5(0, q);
        A5(1, q);
        A5(2, q);
        A5(3, q);
    }
    return avx512_total8(a0, a1, a2, a3, _mm512_setzero_si512(),
                         _mm512_setzero_si512(), _mm512_setzero_si512(),
                         _mm512_setzero_si512());
}

AVX512_TARGET static uint64_t read_avx512_x8(const char *p, size_t n,
                                             size_t ahead)
{
    (void)ahead;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0,
            a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i < n; i += 8 * 64) {
        const __m512i *q = (const __m512i *)(const void *)(p + i);
        EIGHT(A5, q);
    }
    return avx512_total8(a0, a1, a2, a3, a4, a5, a6, a7);
}

AVX512_TARGET static uint64_t read_avx512_x16(const char *p, size_t n,
                                              size_t ahead)
{
    (void)ahead;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0,
            a5 = a0, a6 = a0, a7 = a0;
    __m512i b0 = a0, b1 = a0, b2 = a0, b3 = a0, b4 = a0, b5 = a0, b6 = a0,
            b7 = a0;
    for (size_t i = 0; i < n; i += 16 * 64) {
        const __m512i *q = (const __m512i *)(const void *)(p + i);
        EIGHT(A5, q);
        b0 = _mm512_add_epi64(b0, _mm512_load_si512(q + 8));
        b1 = _mm512_add_epi64(b1, _mm512_load_si512(q + 9));
        b2 = _mm512_add_epi64(b2, _mm512_load_si512(q + 10));
        b3 = _mm512_add_epi64(b3, _mm512_load_si512(q + 11));
        b4 = _mm512_add_epi64(b4, _mm512_load_si512(q + 12));
        b5 = _mm512_add_epi64(b5, _mm512_load_si512(q + 13));
        b6 = _mm512_add_epi64(b6, _mm512_load_si512(q + 14));
        b7 = _mm512_add_epi64(b7, _mm512_load_si512(q + 15));
    }
    return avx512_total8(a0, a1, a2, a3, a4, a5, a6, a7) +
           avx512_total8(b0, b1, b2, b3, b4, b5, b6, b7);
}

/* 8 loads a step, each step's 8 lines prefetched ahead bytes before they
 * are read (the last line of the block, past its end) */
#define PREFETCH_LOOP(name, hint)                                              \
    AVX512_TARGET static uint64_t name(const char *p, size_t n, size_t ahead)  \
    {                                                                          \
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0,        \
                a4 = a0, a5 = a0, a6 = a0, a7 = a0;                            \
        const size_t last = n - 8 * LINE;                                      \
        for (size_t i = 0; i < n; i += 8 * LINE) {                             \
            const char *f = p + (i + ahead < last ? i + ahead : last);         \
            for (int l = 0; l < 8; l++)                                        \
                _mm_prefetch(f + l * LINE, hint);                              \
            const __m512i *q = (const __m512i *)(const void *)(p + i);         \
            EIGHT(A5, q);                                                      \
        }                                                                      \
        return avx512_total8(a0, a1, a2, a3, a4, a5, a6, a7);                  \
    }
PREFETCH_LOOP(read_avx512_prefetch, _MM_HINT_T0)
PREFETCH_LOOP(read_avx512_prefetch_nta, _MM_HINT_NTA)

AVX512_TARGET static uint64_t read_avx512_stream(const char *p, size_t n,
                                                 size_t ahead)
{
    (void)ahead;
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, a4 = a0,
            a5 = a0, a6 = a0, a7 = a0;
    for (size_t i = 0; i < n; i += 8 * 64) {
        const __m512i *q = (const __m512i *)(const void *)(p + i);
        EIGHT(N5, q);
    }
    return avx512_total8(a0, a1, a2, a3, a4, a5, a6, a7);
}

enum isa { ISA_PLAIN, ISA_AVX2, ISA_AVX512 };

static const struct loop {
    const char *name;
    read_loop run;
    size_t ahead;
    enum isa isa;
} loops[] = {
    {"64-bit loads, 4 sums", read_scalar, 0, ISA_PLAIN},
    {"AVX2 loads, 4 sums", read_avx2_x4, 0, ISA_AVX2},
    {"AVX2 loads, 8 sums", read_avx2_x8, 0, ISA_AVX2},
    {"AVX-512 loads, 4 sums", read_avx512_x4, 0, ISA_AVX512},
    {"AVX-512 loads, 8 sums", read_avx512_x8, 0, ISA_AVX512},
    {"AVX-512 loads, 16 sums", read_avx512_x16, 0, ISA_AVX512},
    {"AVX-512, 8 sums, prefetch 1 KiB ahead", read_avx512_prefetch, 1024,
     ISA_AVX512},
    {"AVX-512, 8 sums, prefetch 4 KiB ahead", read_avx512_prefetch, 4096,
     ISA_AVX512},
    {"AVX-512, 8 sums, prefetch 16 KiB ahead", read_avx512_prefetch, 16384,
     ISA_AVX512},
    {"AVX-512, 8 sums, prefetchnta 4 KiB ahead", read_avx512_prefetch_nta, 4096,
     ISA_AVX512},
    {"AVX-512 non-temporal loads, 8 sums", read_avx512_stream, 0, ISA_AVX512},
};
enum { N_LOOPS = sizeof loops / sizeof loops[0], N_THREADS = 2, N_PAGES = 2 };

struct bandwidth_probe {
    char *map; /* the mapping, map_bytes long */
    size_t map_bytes;
    char *part[N_PAGES];         /* 4 KiB pages, 2 MiB pages: 2 MiB aligned */
    size_t part_bytes;           /* each */
    bool huge;                   /* the second part got 2 MiB pages */
    unsigned threads[N_THREADS]; /* 1, and one a core */
    volatile uint64_t sink;      /* the loops' sums, never read */
};

/* KiB of anonymous memory in huge pages, all of this process's. */
static size_t huge_kib(void)
{
    char line[256];
    size_t kib = 0;
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "AnonHugePages:", 14))
            kib = strtoull(line + 14, NULL, 10);
    if (f)
        fclose(f);
    return kib;
}

struct bandwidth_probe *bandwidth_probe_new(size_t bytes)
{
    struct bandwidth_probe *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    /* each part a multiple of 2 MiB, so that threads' shares stay whole
     * lines */
    p->part_bytes = bytes / N_PAGES / HUGE_PAGE * HUGE_PAGE;
    p->map_bytes = N_PAGES * p->part_bytes + HUGE_PAGE;
    p->map = p->part_bytes ? mmap(NULL, p->map_bytes, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                           : MAP_FAILED;
    if (p->map == MAP_FAILED) {
        free(p);
        return NULL;
    }
    const uintptr_t base =
        ((uintptr_t)p->map + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    p->part[0] = (char *)base;
    p->part[1] = p->part[0] + p->part_bytes;
#if defined(MADV_HUGEPAGE) && defined(MADV_NOHUGEPAGE)
    madvise(p->part[0], p->part_bytes, MADV_NOHUGEPAGE); /* only advice */
    madvise(p->part[1], p->part_bytes, MADV_HUGEPAGE);
#endif
    const size_t before = huge_kib();
    for (int k = 0; k < N_PAGES; k++) {
        uint64_t *w = (uint64_t *)(void *)p->part[k];
        for (size_t i = 0; i < p->part_bytes / sizeof *w; i++)
            w[i] = i * 2654435761u;
    }
    /* at least half of the part in huge pages: name it so */
    const size_t after = huge_kib();
    p->huge = after > before && (after - before) * 1024 >= p->part_bytes / 2;
    const unsigned c = cores();
    p->threads[0] = 1;
    p->threads[1] = c > MAX_READERS ? MAX_READERS : c;
    return p;
}

void bandwidth_probe_free(struct bandwidth_probe *p)
{
    if (!p)
        return;
    munmap(p->map, p->map_bytes);
    free(p);
}

struct reader {
    const struct loop *loop;
    const char *from;
    size_t bytes;
    atomic_int *go; /* set once every reader is started */
    double t0, t1;
    uint64_t sum; /* kept, so that the reads are not optimised away */
};

static void *reader_run(void *arg)
{
    struct reader *r = arg;
    while (!atomic_load_explicit(r->go, memory_order_acquire))
        ; /* a few microseconds: the others being started */
    r->t0 = now_seconds();
    r->sum = r->bytes ? r->loop->run(r->from, r->bytes, r->loop->ahead) : 0;
    r->t1 = now_seconds();
    return NULL;
}

/* GB/s of one read of part by n threads, each its own share, from the
 * first start to the last end; -1 when a thread cannot be started. */
static double read_once(const struct loop *loop, const char *part, size_t bytes,
                        unsigned n, uint64_t *sum)
{
    struct reader r[MAX_READERS];
    pthread_t id[MAX_READERS];
    atomic_int go = 0;
    const size_t share = bytes / n / 1024 * 1024;
    unsigned made = 0;
    for (; made < n; made++) {
        r[made] =
            (struct reader){loop, part + made * share, share, &go, 0.0, 0.0, 0};
        if (pthread_create(&id[made], NULL, reader_run, &r[made]))
            break;
    }
    if (made < n) /* nothing is timed: the started ones read nothing */
        for (unsigned i = 0; i < made; i++)
            r[i].bytes = 0;
    atomic_store_explicit(&go, 1, memory_order_release);
    double t0 = 0.0, t1 = 0.0;
    for (unsigned i = 0; i < made; i++) {
        pthread_join(id[i], NULL);
        t0 = i == 0 || r[i].t0 < t0 ? r[i].t0 : t0;
        t1 = i == 0 || r[i].t1 > t1 ? r[i].t1 : t1;
        *sum += r[i].sum;
    }
    return made < n || t1 <= t0 ? -1.0 : (double)(share * n) / (t1 - t0) / 1e9;
}

static bool isa_there(enum isa isa)
{
    switch (isa) {
    case ISA_AVX2: return __builtin_cpu_supports("avx2");
    case ISA_AVX512: return __builtin_cpu_supports("avx512f");
    default: return true;
    }
}

bool bandwidth_measure(struct bandwidth_probe *p, int repeats, FILE *report,
                       struct bandwidth *out)
{
    double best[N_LOOPS][N_THREADS][N_PAGES] = {{{0}}};
    uint64_t sum = 0;
    for (int t = 0; t < repeats; t++)
        for (int l = 0; l < N_LOOPS; l++)
            for (int k = 0; isa_there(loops[l].isa) && k < N_THREADS; k++)
                for (int g = 0; g < N_PAGES; g++) {
                    const double gbs =
                        read_once(&loops[l], p->part[g], p->part_bytes,
                                  p->threads[k], &sum);
                    if (gbs < 0)
                        return false;
                    if (gbs > best[l][k][g])
                        best[l][k][g] = gbs;
                }
    const char *pages[N_PAGES] = {"4 KiB pages",
                                  p->huge ? "2 MiB pages"
                                          : "2 MiB pages asked, 4 KiB given"};
    int bl = 0, bk = 0, bg = 0;
    for (int l = 0; l < N_LOOPS; l++)
        for (int k = 0; k < N_THREADS; k++)
            for (int g = 0; g < N_PAGES; g++)
                if (best[l][k][g] > best[bl][bk][bg]) {
                    bl = l;
                    bk = k;
                    bg = g;
                }
    out->gbs = best[bl][bk][bg];
    snprintf(out->strategy, sizeof out->strategy, "%s; %u thread%s; %s",
             loops[bl].name, p->threads[bk], p->threads[bk] > 1 ? "s" : "",
             pages[bg]);
    if (report) {
        fprintf(report,
                "read bandwidth, GB/s, the best of %d turn%s over %zu MiB a "
                "kind of page (threads %u / %u; %s / %s):\n",
                repeats, repeats > 1 ? "s" : "", p->part_bytes >> 20,
                p->threads[0], p->threads[1], pages[0], pages[1]);
        for (int l = 0; l < N_LOOPS; l++) {
            if (!isa_there(loops[l].isa)) {
                fprintf(report, "  %-42s  (no %s on this CPU)\n", loops[l].name,
                        loops[l].isa == ISA_AVX2 ? "AVX2" : "AVX-512");
                continue;
            }
            fprintf(report, "  %-42s", loops[l].name);
            for (int k = 0; k < N_THREADS; k++)
                for (int g = 0; g < N_PAGES; g++)
                    fprintf(report, " %6.1f", best[l][k][g]);
            fputc('\n', report);
        }
        fprintf(report, "  best: %.1f GB/s, %s\n", out->gbs, out->strategy);
    }
    p->sink += sum;
    return out->gbs > 0;
}
