/*
 * replay.c - a fuzz target's committed corpus as cmocka tests, so that
 * every input the fuzzers once tripped on runs in `make test` (and under
 * the sanitizers in `make asan`) without clang or libFuzzer.
 *
 * Built once per target, with CORPUS_DIR naming its corpus folder relative
 * to the repository root (where make runs the tests). One test per file,
 * named by it. A target reports a bad answer by aborting, which ends the
 * program; the test runner counts that as a failure.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#ifndef CORPUS_DIR
#error "build with -DCORPUS_DIR=\"tests/fuzz/corpus_<target>\""
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Defined by the targets that need set-up only. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

#define MAX_INPUTS 512
#define MAX_INPUT_BYTES ((size_t)4 << 20)

static void replay_one(void **state)
{
    const char *path = *state;
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    const long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size < 0 || (size_t)size > MAX_INPUT_BYTES || fseek(f, 0, SEEK_SET)) {
        fclose(f);
        fail_msg("%s: unreadable, or over %zu bytes", path, MAX_INPUT_BYTES);
    }
    /* the input in a buffer of exactly its size, as libFuzzer hands it,
     * so a read past the end is caught under ASan */
    uint8_t *data = malloc(size ? (size_t)size : 1);
    assert_non_null(data);
    const size_t got = fread(data, 1, (size_t)size, f);
    fclose(f);
    assert_int_equal(got, (size_t)size);
    LLVMFuzzerTestOneInput(data, got);
    free(data);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);

    DIR *dir = opendir(CORPUS_DIR);
    if (!dir) {
        fprintf(stderr, "replay: cannot open %s\n", CORPUS_DIR);
        return 1;
    }
    static char *names[MAX_INPUTS];
    size_t n = 0;
    const struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == MAX_INPUTS) {
            fprintf(stderr, "replay: more than %d inputs in %s\n", MAX_INPUTS,
                    CORPUS_DIR);
            closedir(dir);
            return 1;
        }
        const size_t len = strlen(CORPUS_DIR) + 1 + strlen(e->d_name) + 1;
        names[n] = malloc(len);
        if (!names[n]) {
            closedir(dir);
            return 1;
        }
        snprintf(names[n], len, "%s/%s", CORPUS_DIR, e->d_name);
        n++;
    }
    closedir(dir);
    qsort(names, n, sizeof names[0], by_name);

    static struct CMUnitTest tests[MAX_INPUTS];
    for (size_t i = 0; i < n; i++)
        tests[i] = (struct CMUnitTest){.name = strrchr(names[i], '/') + 1,
                                       .test_func = replay_one,
                                       .initial_state = names[i]};
    const int failed =
        _cmocka_run_group_tests(CORPUS_DIR, tests, n, NULL, NULL);
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    return failed;
}
