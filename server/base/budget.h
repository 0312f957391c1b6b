/*
 * budget.h - the server's memory budget (--max-memory): what every request
 * will hold is reserved against it before it is allocated, and given back
 * when the request's exchange ends. A request that could never fit is
 * refused for its size; one that could fit later is told to retry.
 */
#ifndef ATTND_BUDGET_H
#define ATTND_BUDGET_H

#include "problem.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct budget {
    atomic_size_t used;
    size_t limit; /* bytes */
};

void budget_init(struct budget *b, size_t limit);

/* One request's part of the budget; zeroed is empty. */
struct budget_hold {
    struct budget *budget; /* NULL: nothing is counted */
    size_t held;
};

/*
 * Reserve bytes more for what (e.g. "the body") on h. False with pb set:
 * 413 (when too_big_is_413) or 422 naming the sizes when the request's
 * whole hold could never fit the limit, 503 with Retry-After when the
 * budget is in use by others now.
 */
bool budget_reserve(struct budget_hold *h, size_t bytes, const char *what,
                    bool too_big_is_413, struct problem *pb);

/* Give back bytes of h (no more than it holds). */
void budget_release(struct budget_hold *h, size_t bytes);

/* Bytes reserved by every request now. */
size_t budget_used(const struct budget *b);

/* Half the machine's memory, the default of --max-memory. */
size_t budget_default_limit(void);

#endif
