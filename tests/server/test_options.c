/*
 * test_options.c - the settings table's list kind (--model NAME=DIR,
 * ATTND_MODELS): repeated flags in order, the variable's comma-separated
 * items, the flag winning over the variable, and the caps; and the model
 * set it feeds: every checkpoint loaded or none, a name given twice, a
 * spec without '='.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "models.h"
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Load argv (NULL-terminated after argv[0]) with the variable set to env
 * (NULL: unset); the result and, in err, what was written there. */
static enum options_result load(struct options *o, const char *env, char **argv,
                                char *err, size_t err_len)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    if (env)
        setenv("ATTND_MODELS", env, 1);
    else
        unsetenv("ATTND_MODELS");
    FILE *e = fmemopen(err, err_len, "w");
    assert_non_null(e);
    FILE *out = fopen("/dev/null", "w");
    const enum options_result r = options_load(o, argc, argv, out, e);
    fclose(e);
    fclose(out);
    unsetenv("ATTND_MODELS");
    return r;
}

static void test_model_flags_and_variable(void **state)
{
    (void)state;
    static struct options o;
    char err[512] = "";
    char *none[] = {"attnd", NULL};
    assert_int_equal(load(&o, NULL, none, err, sizeof err), OPTIONS_RUN);
    assert_int_equal(o.models.count, 0);

    /* repeated flags, in order */
    char *two[] = {"attnd", "--model", "a=/x", "--model=b=/y", NULL};
    assert_int_equal(load(&o, NULL, two, err, sizeof err), OPTIONS_RUN);
    assert_int_equal(o.models.count, 2);
    assert_string_equal(o.models.item[0], "a=/x");
    assert_string_equal(o.models.item[1], "b=/y");

    /* the variable: items separated by commas, empty ones skipped */
    assert_int_equal(load(&o, "a=/x,,b=/y,", none, err, sizeof err),
                     OPTIONS_RUN);
    assert_int_equal(o.models.count, 2);
    assert_string_equal(o.models.item[1], "b=/y");

    /* the flag wins: its list replaces the variable's */
    char *one[] = {"attnd", "--model", "c=/z", NULL};
    assert_int_equal(load(&o, "a=/x,b=/y", one, err, sizeof err), OPTIONS_RUN);
    assert_int_equal(o.models.count, 1);
    assert_string_equal(o.models.item[0], "c=/z");

    /* at most OPTIONS_MAX_MODELS */
    char many[OPTIONS_MAX_MODELS * 8 + 16] = "";
    size_t at = 0;
    for (int i = 0; i <= OPTIONS_MAX_MODELS; i++)
        at += (size_t)snprintf(many + at, sizeof many - at, "%sm%d=/d",
                               i ? "," : "", i);
    err[0] = '\0';
    assert_int_equal(load(&o, many, none, err, sizeof err), OPTIONS_EXIT_ERROR);
    assert_non_null(strstr(err, "ATTND_MODELS"));
    assert_non_null(strstr(err, "more than 16"));

    /* no value */
    char *bare[] = {"attnd", "--model", NULL};
    assert_int_equal(load(&o, NULL, bare, err, sizeof err), OPTIONS_EXIT_ERROR);
}

static void test_models_all_or_none(void **state)
{
    (void)state;
    char err[512];
    struct models set = {0};
    const struct options_list ok = {
        .item = {"f32=tests/models/f32", "f16=tests/models/f16_prefixed"},
        .count = 2};
    assert_true(models_load(&set, &ok, err, sizeof err));
    assert_int_equal(set.count, 2);
    assert_non_null(models_find(&set, "f16", 3));
    assert_null(models_find(&set, "f1", 2));
    char names[64];
    models_names(&set, names, sizeof names);
    assert_string_equal(names, "\"f32\", \"f16\"");
    size_t len = 0;
    char *doc = models_document(&set, &len);
    assert_non_null(strstr(doc, "\"name\":\"f16\",\"layers\":3"));
    free(doc);
    models_free(&set);
    assert_int_equal(set.count, 0);

    /* a later failure leaves nothing loaded */
    const struct options_list bad = {
        .item = {"f32=tests/models/f32", "x=/nonexistent"}, .count = 2};
    assert_false(models_load(&set, &bad, err, sizeof err));
    assert_int_equal(set.count, 0);
    assert_non_null(strstr(err, "/nonexistent"));
    const struct options_list twice = {
        .item = {"a=tests/models/f32", "a=tests/models/f32"}, .count = 2};
    assert_false(models_load(&set, &twice, err, sizeof err));
    assert_int_equal(set.count, 0);
    assert_non_null(strstr(err, "twice"));
    const struct options_list no_eq = {.item = {"tests/models/f32"},
                                       .count = 1};
    assert_false(models_load(&set, &no_eq, err, sizeof err));
    assert_non_null(strstr(err, "NAME=DIR"));
    models_names(&set, names, sizeof names);
    assert_string_equal(names, "none is loaded");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_flags_and_variable),
        cmocka_unit_test(test_models_all_or_none),
    };
    return cmocka_run_group_tests_name("options", tests, NULL, NULL);
}
