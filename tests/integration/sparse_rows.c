/*
 * sparse_rows.c - an answer's sparse_weights against its dense weights
 * (sparse_rows.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "sparse_rows.h"

/* One answer's sparse rows against its dense weights: w [heads][N][K],
 * keys and weights [heads][N][<= k]: each row the k strongest above 0, in
 * order, the earlier key among equals. */
void sparse_rows_check(const cJSON *w, const cJSON *keys, const cJSON *weights,
                       int k)
{
    for (int a = 0; a < cJSON_GetArraySize(w); a++) {
        const cJSON *A = cJSON_GetArrayItem(w, a);
        for (int i = 0; i < cJSON_GetArraySize(A); i++) {
            const cJSON *row = cJSON_GetArrayItem(A, i);
            const cJSON *kr =
                cJSON_GetArrayItem(cJSON_GetArrayItem(keys, a), i);
            const cJSON *wr =
                cJSON_GetArrayItem(cJSON_GetArrayItem(weights, a), i);
            int positive = 0;
            const cJSON *v;
            cJSON_ArrayForEach(v, row) positive += v->valuedouble > 0;
            assert_int_equal(cJSON_GetArraySize(kr),
                             positive < k ? positive : k);
            for (int e = 0; e < cJSON_GetArraySize(kr); e++) {
                const int j = (int)cJSON_GetArrayItem(kr, e)->valuedouble;
                const double wj = cJSON_GetArrayItem(row, j)->valuedouble;
                assert_true(cJSON_GetArrayItem(wr, e)->valuedouble == wj);
                int stronger = 0, q = 0;
                cJSON_ArrayForEach(v, row)
                {
                    stronger +=
                        v->valuedouble > wj || (v->valuedouble == wj && q < j);
                    q++;
                }
                assert_int_equal(stronger, e);
            }
        }
    }
}
