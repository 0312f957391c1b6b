/*
 * budget.c - see budget.h.
 */
#include "budget.h"

#include <unistd.h>

void budget_init(struct budget *b, size_t limit)
{
    atomic_init(&b->used, 0);
    b->limit = limit;
}

bool budget_reserve(struct budget_hold *h, size_t bytes, const char *what,
                    bool too_big_is_413, struct problem *pb)
{
    struct budget *b = h->budget;
    if (!b)
        return true;
    const double mib = 1.0 / (1 << 20);
    if (bytes > b->limit || h->held > b->limit - bytes) {
        problem_set(pb, too_big_is_413 ? 413 : 422, "",
                    "%s would take the request to %.1f MiB of memory; the "
                    "server's budget is %.1f MiB (--max-memory)",
                    what, ((double)h->held + (double)bytes) * mib,
                    (double)b->limit * mib);
        pb->reason = "memory_budget";
        return false;
    }
    size_t used = atomic_load(&b->used);
    do {
        if (used > b->limit - bytes) {
            problem_set(pb, 503, "",
                        "the server's memory is in use (%.1f of %.1f MiB; "
                        "%s needs %.1f MiB more); try again shortly",
                        (double)used * mib, (double)b->limit * mib, what,
                        (double)bytes * mib);
            pb->retry_after = 1;
            pb->reason = "memory_busy";
            return false;
        }
    } while (!atomic_compare_exchange_weak(&b->used, &used, used + bytes));
    h->held += bytes;
    return true;
}

void budget_release(struct budget_hold *h, size_t bytes)
{
    if (!h->budget)
        return;
    if (bytes > h->held)
        bytes = h->held;
    atomic_fetch_sub(&h->budget->used, bytes);
    h->held -= bytes;
}

size_t budget_used(const struct budget *b)
{
    return atomic_load(&((struct budget *)b)->used);
}

size_t budget_default_limit(void)
{
    const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0)
        return (size_t)1 << 30;
    return (size_t)pages / 2 * (size_t)size;
}
