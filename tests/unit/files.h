/*
 * files.h - the unit tests' reading of their fixtures: a whole file, or a
 * JSON document; a file that is missing or unreadable fails the test.
 */
#ifndef ATTN_TEST_FILES_H
#define ATTN_TEST_FILES_H

#include <cJSON.h>
#include <stddef.h>

/* The whole of path, NUL-terminated (not counted in *len); the caller
 * frees it. */
char *test_read_file(const char *path, size_t *len);

/* path parsed as JSON; the caller deletes it. */
cJSON *test_read_json(const char *path);

#endif
