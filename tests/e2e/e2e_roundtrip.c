/*
 * e2e_roundtrip: produce N verifiable messages round-robin over P
 * partitions, wait for every delivery report, then consume each partition
 * from the beginning with assign() and check record by record.
 *
 *   e2e_roundtrip --brokers B --topic T --partitions P --messages N
 *                 --size BYTES --codec none|gzip|snappy|lz4|zstd
 *                 --acks 0|1|-1 [--create] [--timeout-s S]
 *
 * Message i goes to partition i % P as that partition's sequence i / P;
 * its value is "p<partition>-<seq>|" followed by filler derived from
 * (partition, seq), so every byte can be recomputed by the checker.
 * Exit 0 when every message is present exactly once, in order, intact,
 * at contiguous offsets (and at the offset its delivery report gave).
 */
#include <librdkafka/rdkafka.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_ANOMALIES 10

struct opts {
    const char *brokers;
    const char *topic;
    const char *codec;
    const char *acks;
    int partitions;
    long messages;
    int size;                   /* bytes per value */
    int create;
    int timeout_s;              /* overall bound per phase */
};

struct part_state {
    long expected;              /* messages produced to this partition */
    long seen;                  /* next sequence expected by the checker */
    int64_t first_off;          /* offset of seq 0, -1 until seen */
    int64_t last_off;
    int eof;
};

static struct opts o;
static int64_t *dr_offset;      /* per message index: offset from the DR */
static long dr_ok, dr_fail;
static int anomalies;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void anomaly(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void anomaly(const char *fmt, ...)
{
    va_list ap;

    if (anomalies++ >= MAX_ANOMALIES)
        return;
    va_start(ap, fmt);
    fputs("ANOMALY: ", stdout);
    vprintf(fmt, ap);
    fputc('\n', stdout);
    va_end(ap);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: e2e_roundtrip --brokers B --topic T --partitions P "
            "--messages N --size BYTES --codec C --acks A [--create] "
            "[--timeout-s S]\n");
    exit(2);
}

static void parse_args(int argc, char **argv)
{
    int i;

    o.partitions = 1;
    o.messages = 1000;
    o.size = 100;
    o.codec = "none";
    o.acks = "-1";
    o.timeout_s = 120;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (!strcmp(a, "--create")) {
            o.create = 1;
            continue;
        }
        if (!v)
            usage();
        i++;
        if (!strcmp(a, "--brokers"))
            o.brokers = v;
        else if (!strcmp(a, "--topic"))
            o.topic = v;
        else if (!strcmp(a, "--partitions"))
            o.partitions = atoi(v);
        else if (!strcmp(a, "--messages"))
            o.messages = atol(v);
        else if (!strcmp(a, "--size"))
            o.size = atoi(v);
        else if (!strcmp(a, "--codec"))
            o.codec = v;
        else if (!strcmp(a, "--acks"))
            o.acks = v;
        else if (!strcmp(a, "--timeout-s"))
            o.timeout_s = atoi(v);
        else
            usage();
    }
    if (!o.brokers || !o.topic || o.partitions < 1 || o.messages < 0 ||
        o.size < 0)
        usage();
}

/* Writes the value for (part, seq) into buf (o.size or header bytes). */
static size_t make_value(char *buf, size_t cap, int part, long seq)
{
    int n = snprintf(buf, cap, "p%d-%ld|", part, seq);
    size_t len = (size_t)n;
    size_t i;

    if ((size_t)o.size > len)
        len = (size_t)o.size;
    if (len > cap)
        len = cap;
    for (i = (size_t)n; i < len; i++)
        buf[i] = (char)('a' + (unsigned long)(seq * 31 + part * 7 +
                                              (long)i) % 26);
    return len;
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
    char errstr[256];

    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
        fprintf(stderr, "config %s=%s: %s\n", k, v, errstr);
        exit(2);
    }
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    long idx = (long)(intptr_t)m->_private;

    (void)rk;
    (void)opaque;
    if (m->err) {
        if (dr_fail < MAX_ANOMALIES)
            printf("delivery failed: partition %d: %s\n", m->partition,
                   rd_kafka_err2str(m->err));
        dr_fail++;
        return;
    }
    dr_ok++;
    /* With acks=0 the broker sends no offset; librdkafka's is made up. */
    if (strcmp(o.acks, "0"))
        dr_offset[idx] = m->offset;
}

static int create_topic(void)
{
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;
    rd_kafka_NewTopic_t *nt;
    rd_kafka_queue_t *q;
    rd_kafka_event_t *ev;
    int rc = 0;

    conf_set(conf, "bootstrap.servers", o.brokers);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        return -1;
    }
    nt = rd_kafka_NewTopic_new(o.topic, o.partitions, 1, errstr,
                               sizeof(errstr));
    q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, NULL, q);
    ev = rd_kafka_queue_poll(q, 30000);
    if (!ev || rd_kafka_event_error(ev)) {
        fprintf(stderr, "CreateTopics: %s\n",
                ev ? rd_kafka_event_error_string(ev) : "timed out");
        rc = -1;
    } else {
        const rd_kafka_CreateTopics_result_t *res =
            rd_kafka_event_CreateTopics_result(ev);
        size_t cnt;
        const rd_kafka_topic_result_t **tr =
            rd_kafka_CreateTopics_result_topics(res, &cnt);

        if (cnt == 1 && rd_kafka_topic_result_error(tr[0]) &&
            rd_kafka_topic_result_error(tr[0]) !=
                RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
            fprintf(stderr, "CreateTopics %s: %s\n", o.topic,
                    rd_kafka_topic_result_error_string(tr[0]));
            rc = -1;
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return rc;
}

static int produce_all(double *secs)
{
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;
    char *buf;
    size_t cap = (size_t)o.size + 64;
    double t0 = now_s();
    long i;

    conf_set(conf, "bootstrap.servers", o.brokers);
    conf_set(conf, "compression.codec", o.codec);
    conf_set(conf, "acks", o.acks);
    conf_set(conf, "linger.ms", "5");
    conf_set(conf, "queue.buffering.max.messages", "500000");
    conf_set(conf, "message.timeout.ms", "60000");
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        return -1;
    }
    buf = malloc(cap);
    for (i = 0; i < o.messages; i++) {
        int part = (int)(i % o.partitions);
        size_t len = make_value(buf, cap, part, i / o.partitions);
        rd_kafka_resp_err_t err;

        for (;;) {
            err = rd_kafka_producev(
                rk, RD_KAFKA_V_TOPIC(o.topic), RD_KAFKA_V_PARTITION(part),
                RD_KAFKA_V_VALUE(buf, len),
                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                RD_KAFKA_V_OPAQUE((void *)(intptr_t)i), RD_KAFKA_V_END);
            if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                break;
            rd_kafka_poll(rk, 10);
        }
        if (err) {
            fprintf(stderr, "producev: %s\n", rd_kafka_err2str(err));
            free(buf);
            rd_kafka_destroy(rk);
            return -1;
        }
        rd_kafka_poll(rk, 0);
    }
    free(buf);
    if (rd_kafka_flush(rk, o.timeout_s * 1000) != RD_KAFKA_RESP_ERR_NO_ERROR)
        fprintf(stderr, "flush timed out with %d messages outstanding\n",
                rd_kafka_outq_len(rk));
    *secs = now_s() - t0;
    /* With acks=0 a delivery report only means the bytes left us. Hang up
     * at once and a broker may still drop requests it had not read (the
     * mock cluster does), so give it a moment first. */
    if (!strcmp(o.acks, "0"))
        rd_kafka_poll(rk, 1000);
    rd_kafka_destroy(rk);
    return dr_ok == o.messages ? 0 : -1;
}

static void check_message(struct part_state *ps, const rd_kafka_message_t *m)
{
    struct part_state *p = &ps[m->partition];
    int part;
    long seq;
    char *buf;
    size_t len, cap;

    if (sscanf(m->payload ? (const char *)m->payload : "", "p%d-%ld|",
               &part, &seq) != 2 || m->len < 4) {
        anomaly("partition %d offset %" PRId64 ": unparsable value (%zu "
                "bytes)", m->partition, m->offset, m->len);
        return;
    }
    if (part != m->partition)
        anomaly("partition %d offset %" PRId64 ": value for partition %d",
                m->partition, m->offset, part);
    if (seq != p->seen) {
        anomaly("partition %d offset %" PRId64 ": seq %ld, expected %ld",
                m->partition, m->offset, seq, p->seen);
    }
    if (p->first_off >= 0 && m->offset != p->last_off + 1)
        anomaly("partition %d: offset %" PRId64 " follows %" PRId64,
                m->partition, m->offset, p->last_off);
    if (p->first_off < 0)
        p->first_off = m->offset;
    p->last_off = m->offset;
    if (seq >= 0 && seq < p->expected && part == m->partition) {
        long idx = seq * o.partitions + part;

        if (dr_offset[idx] >= 0 && dr_offset[idx] != m->offset)
            anomaly("partition %d seq %ld: at offset %" PRId64
                    ", delivery report said %" PRId64, part, seq,
                    m->offset, dr_offset[idx]);
    } else if (seq >= p->expected) {
        anomaly("partition %d offset %" PRId64 ": unexpected extra seq %ld",
                m->partition, m->offset, seq);
    }
    cap = (size_t)o.size + 64;
    buf = malloc(cap);
    len = make_value(buf, cap, part, seq);
    if (len != m->len || memcmp(buf, m->payload, len))
        anomaly("partition %d offset %" PRId64 ": value corrupt (len %zu, "
                "expected %zu)", m->partition, m->offset, m->len, len);
    free(buf);
    if (seq == p->seen)
        p->seen++;
    else if (seq > p->seen)
        p->seen = seq + 1;
}

static int consume_all(struct part_state *ps, double *secs, long *consumed)
{
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;
    rd_kafka_topic_partition_list_t *tl;
    double t0 = now_s(), last_progress = t0;
    int eofs = 0;
    int p;
    long errs = 0;

    conf_set(conf, "bootstrap.servers", o.brokers);
    /* assign() needs a group handle; no group API is used with it. */
    conf_set(conf, "group.id", "e2e_roundtrip");
    conf_set(conf, "enable.auto.commit", "false");
    conf_set(conf, "enable.partition.eof", "true");
    conf_set(conf, "auto.offset.reset", "earliest");
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        return -1;
    }
    tl = rd_kafka_topic_partition_list_new(o.partitions);
    for (p = 0; p < o.partitions; p++)
        rd_kafka_topic_partition_list_add(tl, o.topic, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, tl);
    rd_kafka_topic_partition_list_destroy(tl);

    while (eofs < o.partitions) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        double t = now_s();

        if (t - last_progress > 10 || t - t0 > o.timeout_s) {
            anomaly("consume timed out: %d of %d partitions at end",
                    eofs, o.partitions);
            break;
        }
        if (!m)
            continue;
        last_progress = t;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            p = m->partition;
            if (p >= 0 && p < o.partitions && !ps[p].eof &&
                ps[p].seen >= ps[p].expected) {
                ps[p].eof = 1;
                eofs++;
            }
        } else if (m->err) {
            if (errs++ < MAX_ANOMALIES)
                printf("consumer error (not fatal): %s\n",
                       rd_kafka_message_errstr(m));
        } else if (m->partition < 0 || m->partition >= o.partitions) {
            anomaly("message from unassigned partition %d", m->partition);
        } else {
            (*consumed)++;
            check_message(ps, m);
        }
        rd_kafka_message_destroy(m);
    }
    *secs = now_s() - t0;
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return 0;
}

int main(int argc, char **argv)
{
    struct part_state *ps;
    double psecs = 0, csecs = 0;
    long consumed = 0;
    long i;
    int p;

    parse_args(argc, argv);
    if (o.create && create_topic())
        return 1;
    dr_offset = malloc(sizeof(*dr_offset) * (size_t)(o.messages + 1));
    for (i = 0; i < o.messages; i++)
        dr_offset[i] = -1;
    ps = calloc((size_t)o.partitions, sizeof(*ps));
    for (p = 0; p < o.partitions; p++) {
        ps[p].expected = o.messages / o.partitions +
                         (p < o.messages % o.partitions);
        ps[p].first_off = -1;
    }
    if (produce_all(&psecs)) {
        printf("e2e_roundtrip: FAIL produce: %ld of %ld delivered, %ld "
               "failed\n", dr_ok, o.messages, dr_fail);
        return 1;
    }
    consume_all(ps, &csecs, &consumed);
    for (p = 0; p < o.partitions; p++) {
        if (ps[p].seen < ps[p].expected)
            anomaly("partition %d: only up to seq %ld of %ld seen",
                    p, ps[p].seen, ps[p].expected);
    }
    printf("e2e_roundtrip: %s messages=%ld consumed=%ld partitions=%d "
           "size=%d codec=%s acks=%s produce_s=%.2f consume_s=%.2f "
           "anomalies=%d\n",
           anomalies ? "FAIL" : "ok", o.messages, consumed, o.partitions,
           o.size, o.codec, o.acks, psecs, csecs, anomalies);
    free(ps);
    free(dr_offset);
    return anomalies ? 1 : 0;
}
