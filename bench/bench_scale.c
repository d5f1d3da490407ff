/*
 * bench_scale: produce and fetch throughput against the partition count.
 *
 *   bench_scale --brokers B --topic T --partitions P [--bytes TOTAL]
 *               [--batch-bytes MAX] [--per-request K] [--acks A]
 *               [--create-timeout-ms MS]
 *
 * Creates T with P partitions (timed; 10,000 per request, growing it with
 * CreatePartitions beyond that), then produces TOTAL bytes spread
 * evenly over every partition, one batch of one record per partition per
 * round, K partitions per Produce request, and then fetches everything
 * back twice, K partitions per Fetch request, from offset 0 to the end;
 * the second pass is timed (the first waits for the group commit).  A batch is TOTAL / P bytes, capped at MAX (64 KiB) and at
 * least 512 B, so with many partitions each gets few small batches: what
 * a broker with that many partitions sees.  Raw protocol (cn_kclient), one
 * request in flight, so the client costs little and the same at every
 * partition count; librdkafka spends seconds on 100,000 partitions' state.
 * Prints one JSON line per phase.
 */
#include <librdkafka/rdkafka.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "base/wr.h"
#include "bench_util.h"
#include "cli/kclient.h"
#include "proto/batch.h"
#include "proto/gen/msgs.h"


/* Partitions one CreateTopics or CreatePartitions request adds: the
 * broker creates them in one go on its loop (a few fsyncs each), and
 * librdkafka gives up on a request after 300 s at most. */
#define CREATE_STEP 10000

/* Grows topic to `total` partitions with CreatePartitions; 0 or -1. */
static int grow_topic(const char *brokers, const char *topic, int total,
                      int timeout_ms)
{
    char errstr[256], v[16];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    conf_set(conf, "bootstrap.servers", brokers);
    snprintf(v, sizeof v, "%d", timeout_ms < 300000 ? timeout_ms : 300000);
    conf_set(conf, "socket.timeout.ms", v);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr,
                                  sizeof(errstr));
    if (!rk)
        return -1;
    rd_kafka_NewPartitions_t *np =
        rd_kafka_NewPartitions_new(topic, (size_t)total, errstr,
                                   sizeof(errstr));
    rd_kafka_AdminOptions_t *opts =
        rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATEPARTITIONS);
    rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, errstr,
                                              sizeof(errstr));
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreatePartitions(rk, &np, 1, opts, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms + 10000);
    int rc = 0;
    if (!ev || rd_kafka_event_error(ev)) {
        fprintf(stderr, "CreatePartitions: %s\n",
                ev ? rd_kafka_event_error_string(ev) : "timed out");
        rc = -1;
    } else {
        size_t cnt;
        const rd_kafka_topic_result_t **tr =
            rd_kafka_CreatePartitions_result_topics(
                rd_kafka_event_CreatePartitions_result(ev), &cnt);
        if (cnt == 1 && rd_kafka_topic_result_error(tr[0])) {
            fprintf(stderr, "CreatePartitions: %s\n",
                    rd_kafka_topic_result_error_string(tr[0]));
            rc = -1;
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_NewPartitions_destroy(np);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return rc;
}

struct part {
    int64_t next; /* next offset to fetch */
    int64_t hw;   /* high watermark, -1 unknown */
};

/* One produce round: every partition gets batch once, k per request. */
static int produce_round(struct cn_kclient *c, const char *topic, int nparts,
                         int k, int16_t acks, const struct cn_wr *batch,
                         struct cn_produce_request_partition_produce_data *pd)
{
    for (int lo = 0; lo < nparts; lo += k) {
        int n = nparts - lo < k ? nparts - lo : k;
        struct cn_produce_request rq;
        struct cn_produce_request_topic_produce_data td;
        struct cn_produce_response rs;
        struct cn_arena arena;

        for (int i = 0; i < n; i++) {
            cn_produce_request_partition_produce_data_init(&pd[i]);
            pd[i].index = lo + i;
            pd[i].records = cn_bytes_of(batch->buf, (int32_t)batch->len);
        }
        cn_produce_request_init(&rq);
        cn_produce_request_topic_produce_data_init(&td);
        td.name = cn_bytes_str(topic);
        td.partition_data = pd;
        td.partition_data_len = n;
        rq.transactional_id = CN_BYTES_NULL;
        rq.acks = acks;
        rq.timeout_ms = 60000;
        rq.topic_data = &td;
        rq.topic_data_len = 1;
        cn_arena_init(&arena);
        if (cn_kclient_call(c, CN_API_PRODUCE, 8, &rq, &rs, &arena)) {
            fprintf(stderr, "produce: %s\n", c->err);
            return -1;
        }
        for (int t = 0; t < rs.responses_len; t++)
            for (int j = 0; j < rs.responses[t].partition_responses_len;
                 j++) {
                const struct cn_produce_response_partition_produce_response
                    *pr = &rs.responses[t].partition_responses[j];
                if (pr->error_code) {
                    fprintf(stderr, "produce partition %d: error %d\n",
                            pr->index, pr->error_code);
                    cn_arena_fini(&arena);
                    return -1;
                }
            }
        cn_arena_fini(&arena);
    }
    return 0;
}

/* Walks the complete batches of one partition's records from `from`. */
static int64_t walk(const uint8_t *p, size_t len, int64_t from,
                    long long *bytes, long long *records)
{
    struct cn_batch_hdr h;
    while (len >= CN_BATCH_LOG_OVERHEAD && cn_batch_hdr_parse(p, len, &h) == 0) {
        size_t sz = cn_batch_size(&h);
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

/* Fetches every partition from 0 to offset `want`, k at a time.  With
 * acks=1 the high watermark follows the group commit, so a partition may
 * need asking again until its last batch is synced. */
static int fetch_all(struct cn_kclient *c, const char *topic, int nparts,
                     int k, int64_t want, struct part *parts,
                     struct cn_fetch_request_fetch_partition *fps,
                     long long *bytes, long long *records,
                     long long *requests)
{
    for (int i = 0; i < nparts; i++) {
        parts[i].next = 0;
        parts[i].hw = -1;
    }
    for (int lo = 0; lo < nparts; lo += k) {
        int hi = nparts - lo < k ? nparts : lo + k;
        for (;;) {
            int n = 0;
            for (int i = lo; i < hi; i++) {
                if (parts[i].next >= want)
                    continue;
                cn_fetch_request_fetch_partition_init(&fps[n]);
                fps[n].partition = i;
                fps[n].fetch_offset = parts[i].next;
                fps[n].partition_max_bytes = 1 << 20;
                n++;
            }
            if (!n)
                break;
            struct cn_fetch_request rq;
            struct cn_fetch_request_fetch_topic ft;
            struct cn_fetch_response rs;
            struct cn_arena arena;
            cn_fetch_request_init(&rq);
            cn_fetch_request_fetch_topic_init(&ft);
            rq.max_wait_ms = 0;
            rq.min_bytes = 1;
            rq.max_bytes = 64 << 20;
            rq.session_id = 0;
            rq.session_epoch = -1;
            ft.topic = cn_bytes_str(topic);
            ft.partitions = fps;
            ft.partitions_len = n;
            rq.topics = &ft;
            rq.topics_len = 1;
            rq.forgotten_topics_data_len = 0;
            cn_arena_init(&arena);
            if (cn_kclient_call(c, CN_API_FETCH, 11, &rq, &rs, &arena)) {
                fprintf(stderr, "fetch: %s\n", c->err);
                return -1;
            }
            (*requests)++;
            for (int t = 0; t < rs.responses_len; t++)
                for (int j = 0; j < rs.responses[t].partitions_len; j++) {
                    const struct cn_fetch_response_partition_data *pd =
                        &rs.responses[t].partitions[j];
                    int idx = pd->partition_index;
                    if (idx < lo || idx >= hi || pd->error_code) {
                        fprintf(stderr, "fetch partition %d: error %d\n",
                                idx, pd->error_code);
                        cn_arena_fini(&arena);
                        return -1;
                    }
                    struct part *pt = &parts[idx];
                    pt->hw = pd->high_watermark;
                    if (pd->records.len > 0) {
                        int64_t next = walk(pd->records.ptr,
                                            (size_t)pd->records.len, pt->next,
                                            bytes, records);
                        if (next == pt->next && pt->next < pt->hw) {
                            fprintf(stderr, "partition %d: no progress\n",
                                    idx);
                            cn_arena_fini(&arena);
                            return -1;
                        }
                        pt->next = next;
                    }
                }
            cn_arena_fini(&arena);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *brokers = NULL, *topic = NULL;
    int nparts = 0, k = 100, i, create_timeout_ms = 300 * 1000;
    long long total = 256LL << 20, batch_max = 64 << 10;
    int16_t acks = 1;

    for (i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--brokers"))
            brokers = v;
        else if (!strcmp(a, "--topic"))
            topic = v;
        else if (!strcmp(a, "--partitions"))
            nparts = atoi(v);
        else if (!strcmp(a, "--bytes"))
            total = atoll(v);
        else if (!strcmp(a, "--batch-bytes"))
            batch_max = atoll(v);
        else if (!strcmp(a, "--per-request"))
            k = atoi(v);
        else if (!strcmp(a, "--acks"))
            acks = (int16_t)atoi(v);
        else if (!strcmp(a, "--create-timeout-ms"))
            create_timeout_ms = atoi(v);
        else
            brokers = NULL;
    }
    if (!brokers || !topic || i != argc || nparts < 1 || k < 1 ||
        total < 1 || batch_max < 512) {
        fprintf(stderr, "usage: bench_scale --brokers B --topic T "
                "--partitions P [--bytes TOTAL] [--batch-bytes MAX] "
                "[--per-request K] [--acks A] [--create-timeout-ms MS]\n");
        return 2;
    }
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);

    double t0 = now_s();
    if (create_topic_wait(brokers, topic,
                          nparts < CREATE_STEP ? nparts : CREATE_STEP,
                          create_timeout_ms))
        return 1;
    for (int have = CREATE_STEP; have < nparts; have += CREATE_STEP)
        if (grow_topic(brokers, topic,
                       nparts - have < CREATE_STEP ? nparts
                                                   : have + CREATE_STEP,
                       create_timeout_ms))
            return 1;
    double t_create = now_s() - t0;

    /* One record of about `size` bytes; reused for every partition (the
     * broker patches the base offset, which the CRC does not cover). */
    long long size = total / nparts;
    if (size > batch_max)
        size = batch_max;
    if (size < 512)
        size = 512;
    int rounds = (int)((total + size * nparts - 1) / (size * nparts));
    struct cn_batch_params bp = CN_BATCH_PARAMS_INIT;
    struct cn_batch_builder bb;
    struct cn_wr batch, value;
    cn_wr_init(&batch, (size_t)size + 128);
    cn_wr_init(&value, (size_t)size);
    for (long long j = 0; j < size - 80; j++)
        cn_wr_i8(&value, (int8_t)('a' + j % 26));
    cn_batch_builder_init(&bb, &bp);
    cn_batch_builder_add(&bb, (int64_t)(now_s() * 1000), CN_BYTES_NULL,
                         cn_bytes_of(value.buf, (int32_t)value.len), NULL, 0);
    if (cn_batch_builder_finish(&bb, &batch) != 0)
        return 1;
    cn_batch_builder_fini(&bb);

    struct cn_kclient c;
    cn_kclient_init(&c);
    if (cn_kclient_bootstrap(&c, brokers, 60000)) {
        fprintf(stderr, "%s\n", c.err);
        return 1;
    }
    c.timeout_ms = 120000;
    if (k > nparts)
        k = nparts;
    struct cn_produce_request_partition_produce_data *pd =
        calloc((size_t)k, sizeof *pd);
    struct cn_fetch_request_fetch_partition *fps =
        calloc((size_t)k, sizeof *fps);
    struct part *parts = calloc((size_t)nparts, sizeof *parts);
    if (!pd || !fps || !parts)
        return 1;

    t0 = now_s();
    for (int r = 0; r < rounds; r++)
        if (produce_round(&c, topic, nparts, k, acks, &batch, pd))
            return 1;
    double t = now_s() - t0;
    long long pbytes = (long long)batch.len * nparts * rounds;
    long long pmsgs = (long long)nparts * rounds;
    printf("{\"test\": \"scale_produce\", \"partitions\": %d, "
           "\"batch_bytes\": %zu, \"rounds\": %d, \"per_request\": %d, "
           "\"acks\": %d, \"create_seconds\": %.2f, \"messages\": %lld, "
           "\"bytes\": %lld, \"seconds\": %.3f, \"msgs_per_s\": %.0f, "
           "\"mb_per_s\": %.1f}\n",
           nparts, batch.len, rounds, k, acks, t_create, pmsgs, pbytes, t,
           pmsgs / t, pbytes / t / 1e6);
    fflush(stdout);

    /* A first pass waits for the high watermarks (acks=1: they follow the
     * group commit); the second, timed, reads what is all there. */
    long long bytes = 0, records = 0, requests = 0;
    if (fetch_all(&c, topic, nparts, k, rounds, parts, fps, &bytes, &records,
                  &requests))
        return 1;
    bytes = records = requests = 0;
    t0 = now_s();
    if (fetch_all(&c, topic, nparts, k, rounds, parts, fps, &bytes, &records,
                  &requests))
        return 1;
    t = now_s() - t0;
    printf("{\"test\": \"scale_fetch\", \"partitions\": %d, "
           "\"per_request\": %d, \"requests\": %lld, \"records\": %lld, "
           "\"bytes\": %lld, \"seconds\": %.3f, \"msgs_per_s\": %.0f, "
           "\"mb_per_s\": %.1f}\n",
           nparts, k, requests, records, bytes, t, records / t,
           bytes / t / 1e6);
    cn_kclient_close(&c);
    cn_wr_fini(&batch);
    cn_wr_fini(&value);
    free(pd);
    free(fps);
    free(parts);
    return records == pmsgs ? 0 : 1;
}
