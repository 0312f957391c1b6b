/*
 * sparse_rows.h - an answer's sparse_weights checked against the dense
 * weights of the same answer, for the integration tests.
 */
#ifndef ATTND_TEST_SPARSE_ROWS_H
#define ATTND_TEST_SPARSE_ROWS_H

#include <cJSON.h>

/* w [heads][N][K], keys and weights [heads][N][<= k]: each row lists the
 * k strongest keys above 0 (fewer when fewer are), strongest first, the
 * earlier key among equals, with their weights; the test fails
 * otherwise. */
void sparse_rows_check(const cJSON *w, const cJSON *keys, const cJSON *weights,
                       int k);

#endif
