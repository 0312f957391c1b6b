/*
 * files.c - fixtures read whole (files.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "files.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *test_read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        fail_msg("%s: %s", path, strerror(errno));
    fseek(fp, 0, SEEK_END);
    *len = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *text = malloc(*len + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, *len, fp), *len);
    fclose(fp);
    text[*len] = '\0';
    return text;
}

cJSON *test_read_json(const char *path)
{
    size_t len;
    char *text = test_read_file(path, &len);
    cJSON *doc = cJSON_ParseWithLength(text, len);
    free(text);
    if (!doc)
        fail_msg("%s is not valid JSON", path);
    return doc;
}
