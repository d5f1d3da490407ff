/*
 * hist.c - see hist.h.
 */
#include "base/hist.h"

#include <math.h>

const double cn_hist_bounds_ms[CN_HIST_BUCKETS] = {
    0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, INFINITY,
};

void cn_hist_record(struct cn_hist *h, double ms)
{
    int i = 0;
    while (i < CN_HIST_BUCKETS - 1 && ms > cn_hist_bounds_ms[i])
        i++;
    h->buckets[i]++;
    h->count++;
    h->sum_ms += ms;
}
