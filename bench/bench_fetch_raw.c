/*
 * bench_fetch_raw: the broker's fetch path without a client library.
 *
 *   bench_fetch_raw --brokers B --topic T [--passes N] [--version V]
 *                   [--max-bytes BYTES] [--partition-max-bytes BYTES]
 *
 * Reads every partition of T from offset 0 to its high watermark with
 * large Fetch requests (max_wait 0, so the broker answers at once) over
 * one connection of the project's blocking client, N times over, and
 * prints one JSON object: record bytes (whole batches, as the broker
 * ships them) and records per second.  The client only walks batch
 * headers to find each partition's next offset, so nearly all of its
 * time is the socket read; what remains is the broker's cost plus one
 * request round trip per response.
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/arena.h"
#include "base/err.h"
#include "cli/kclient.h"
#include "proto/batch.h"
#include "proto/gen/msgs.h"

#define MAX_PARTS 1024

struct part {
    int32_t index;       /* partition id */
    int64_t next;        /* next offset to ask for */
    int64_t hw;          /* high watermark, -1 until the first answer */
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Partition ids of topic via Metadata; returns the count or -1. */
static int list_partitions(struct cn_kclient *c, const char *topic,
                           struct part *parts)
{
    struct cn_metadata_request rq;
    struct cn_metadata_request_metadata_request_topic t;
    struct cn_metadata_response rs;
    struct cn_arena arena;
    int16_t v = cn_kclient_version(c, CN_API_METADATA);
    int n = -1;

    if (v < 0) {
        fprintf(stderr, "broker has no Metadata\n");
        return -1;
    }
    cn_metadata_request_init(&rq);
    cn_metadata_request_metadata_request_topic_init(&t);
    t.name = cn_bytes_str(topic);
    rq.topics = &t;
    rq.topics_len = 1;
    rq.allow_auto_topic_creation = false;
    cn_arena_init(&arena);
    if (cn_kclient_call(c, CN_API_METADATA, v, &rq, &rs, &arena)) {
        fprintf(stderr, "metadata: %s\n", c->err);
        goto out;
    }
    if (rs.topics_len != 1 || rs.topics[0].error_code) {
        fprintf(stderr, "metadata: topic %s not found (error %d)\n", topic,
                rs.topics_len == 1 ? rs.topics[0].error_code : -1);
        goto out;
    }
    n = rs.topics[0].partitions_len;
    if (n > MAX_PARTS)
        n = MAX_PARTS;
    for (int i = 0; i < n; i++) {
        parts[i].index = rs.topics[0].partitions[i].partition_index;
        parts[i].next = 0;
        parts[i].hw = -1;
    }
out:
    cn_arena_fini(&arena);
    return n;
}

/*
 * Walks the complete batches in one partition's records; a batch cut short
 * by the byte limit ends the walk.  Adds to the totals and returns the
 * offset after the last complete batch, or from when none is complete.
 */
static int64_t walk_batches(const uint8_t *p, size_t len, int64_t from,
                            long long *bytes, long long *records)
{
    struct cn_batch_hdr h;

    while (len >= CN_BATCH_LOG_OVERHEAD &&
           cn_batch_hdr_parse(p, len, &h) == 0) {
        size_t sz = cn_batch_size(&h);

        /* A fetch may start inside a batch; only newer records count. */
        if (cn_batch_last_offset(&h) >= from) {
            *bytes += (long long)sz;
            *records += h.records_count;
            from = cn_batch_last_offset(&h) + 1;
        }
        p += sz;
        len -= sz;
    }
    return from;
}

int main(int argc, char **argv)
{
    const char *brokers = NULL, *topic = NULL;
    int passes = 1, version = 11, nparts, i;
    int32_t max_bytes = 50 << 20, part_max_bytes = 8 << 20;
    static struct part parts[MAX_PARTS];
    struct cn_fetch_request_fetch_partition fps[MAX_PARTS];
    struct cn_kclient c;
    long long bytes = 0, records = 0, requests = 0;
    double t0, t;

    for (i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];

        if (!strcmp(a, "--brokers"))
            brokers = v;
        else if (!strcmp(a, "--topic"))
            topic = v;
        else if (!strcmp(a, "--passes"))
            passes = atoi(v);
        else if (!strcmp(a, "--version"))
            version = atoi(v);
        else if (!strcmp(a, "--max-bytes"))
            max_bytes = atoi(v);
        else if (!strcmp(a, "--partition-max-bytes"))
            part_max_bytes = atoi(v);
        else
            brokers = NULL;
    }
    if (!brokers || !topic || i != argc || passes < 1 || max_bytes < 1 ||
        part_max_bytes < 1) {
        fprintf(stderr, "usage: bench_fetch_raw --brokers B --topic T "
                "[--passes N] [--version V] [--max-bytes BYTES] "
                "[--partition-max-bytes BYTES]\n");
        return 2;
    }
    /* Keep freed response frames in the heap: a fresh mmap'd frame per
     * response costs a page fault per 4 KiB, client time that would be
     * charged to the broker on a 2-core machine. */
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);

    cn_kclient_init(&c);
    if (cn_kclient_bootstrap(&c, brokers, 30000)) {
        fprintf(stderr, "%s\n", c.err);
        return 1;
    }
    if (cn_kclient_version(&c, CN_API_FETCH) < version) {
        fprintf(stderr, "broker does not speak Fetch v%d\n", version);
        return 1;
    }
    nparts = list_partitions(&c, topic, parts);
    if (nparts < 1)
        return 1;

    t0 = now_s();
    for (int pass = 0; pass < passes; pass++) {
        for (i = 0; i < nparts; i++) {
            parts[i].next = 0;
            parts[i].hw = -1;
        }
        for (;;) {
            struct cn_fetch_request rq;
            struct cn_fetch_request_fetch_topic ft;
            struct cn_fetch_response rs;
            struct cn_arena arena;
            int n = 0;

            for (i = 0; i < nparts; i++) {
                if (parts[i].hw >= 0 && parts[i].next >= parts[i].hw)
                    continue;
                cn_fetch_request_fetch_partition_init(&fps[n]);
                fps[n].partition = parts[i].index;
                fps[n].fetch_offset = parts[i].next;
                fps[n].partition_max_bytes = part_max_bytes;
                n++;
            }
            if (!n)
                break;
            cn_fetch_request_init(&rq);
            cn_fetch_request_fetch_topic_init(&ft);
            rq.max_wait_ms = 0;
            rq.min_bytes = 1;
            rq.max_bytes = max_bytes;
            rq.session_id = 0;
            rq.session_epoch = -1; /* full fetch, no session */
            ft.topic = cn_bytes_str(topic);
            ft.partitions = fps;
            ft.partitions_len = n;
            rq.topics = &ft;
            rq.topics_len = 1;
            rq.forgotten_topics_data_len = 0;
            cn_arena_init(&arena);
            if (cn_kclient_call(&c, CN_API_FETCH, (int16_t)version, &rq, &rs,
                                &arena)) {
                fprintf(stderr, "fetch: %s\n", c.err);
                return 1;
            }
            requests++;
            if (rs.error_code) {
                fprintf(stderr, "fetch: error %d\n", rs.error_code);
                return 1;
            }
            for (int ti = 0; ti < rs.responses_len; ti++) {
                for (int j = 0; j < rs.responses[ti].partitions_len; j++) {
                    const struct cn_fetch_response_partition_data *pd =
                        &rs.responses[ti].partitions[j];
                    struct part *pt = NULL;

                    for (i = 0; i < nparts; i++)
                        if (parts[i].index == pd->partition_index)
                            pt = &parts[i];
                    if (!pt)
                        continue;
                    if (pd->error_code) {
                        fprintf(stderr, "fetch partition %d: error %d\n",
                                pd->partition_index, pd->error_code);
                        return 1;
                    }
                    pt->hw = pd->high_watermark;
                    if (pd->records.len > 0) {
                        int64_t next = walk_batches(
                            pd->records.ptr, (size_t)pd->records.len,
                            pt->next, &bytes, &records);

                        if (next == pt->next && pt->next < pt->hw) {
                            fprintf(stderr, "partition %d: batch larger "
                                    "than --partition-max-bytes\n",
                                    pt->index);
                            return 1;
                        }
                        pt->next = next;
                    }
                }
            }
            cn_arena_fini(&arena);
        }
    }
    t = now_s() - t0;
    cn_kclient_close(&c);
    printf("{\"test\": \"fetch_raw\", \"partitions\": %d, \"passes\": %d, "
           "\"version\": %d, \"requests\": %lld, \"records\": %lld, "
           "\"bytes\": %lld, \"seconds\": %.3f, \"msgs_per_s\": %.0f, "
           "\"mb_per_s\": %.1f}\n",
           nparts, passes, version, requests, records, bytes, t,
           records / t, bytes / t / 1e6);
    return records ? 0 : 1;
}
