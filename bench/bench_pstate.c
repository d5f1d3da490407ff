/*
 * bench_pstate.c - memory per idle producer entry and the cost of the
 * per-batch producer check, measured on the producer table itself.
 *
 *     bench_pstate [--producers N]
 *
 * Prints one JSON line: bytes per entry as the table accounts them, the
 * process's resident-memory growth per entry (what the OS sees), and
 * nanoseconds per check+update of an in-sequence batch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "producer/pstate.h"

static long rss_bytes(void)
{
    long pages_total, pages_rss;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return -1;
    if (fscanf(f, "%ld %ld", &pages_total, &pages_rss) != 2)
        pages_rss = -1;
    fclose(f);
    return pages_rss * sysconf(_SC_PAGESIZE);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    long n = 100000;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--producers"))
            n = atol(argv[++i]);
    long rss0 = rss_bytes();
    struct cn_pstate *ps = cn_pstate_new();
    struct cn_batch_hdr h;
    memset(&h, 0, sizeof h);
    h.magic = 2;
    h.producer_epoch = 0;
    h.last_offset_delta = 9;
    h.records_count = 10;
    h.max_timestamp = 1700000000000;
    /* Five batches each, as a producer that has been busy then idle. */
    int64_t offset = 0;
    for (int b = 0; b < 5; b++)
        for (long p = 0; p < n; p++) {
            h.producer_id = p;
            h.base_sequence = b * 10;
            h.base_offset = offset;
            offset += 10;
            cn_pstate_update(ps, &h, -1, -1, NULL);
        }
    long rss1 = rss_bytes();
    size_t mem = cn_pstate_memory(ps);

    /* Hot path: check then record one in-sequence batch per producer. */
    double t0 = now_s();
    long ops = 0;
    for (int round = 0; round < 5; round++)
        for (long p = 0; p < n; p++) {
            int64_t dup;
            h.producer_id = p;
            h.base_sequence = 50 + round * 10;
            h.base_offset = offset;
            offset += 10;
            if (cn_pstate_check(ps, &h, &dup) != CN_PCHECK_APPEND)
                return 1;
            cn_pstate_update(ps, &h, -1, -1, NULL);
            ops++;
        }
    double dt = now_s() - t0;
    printf("{\"test\": \"producer_state\", \"producers\": %ld, "
           "\"table_bytes_per_entry\": %.1f, \"rss_bytes_per_entry\": %.1f, "
           "\"ns_per_check_update\": %.1f}\n",
           n, (double)mem / n, (double)(rss1 - rss0) / n, dt * 1e9 / ops);
    cn_pstate_free(ps);
    return 0;
}
