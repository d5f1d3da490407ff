/*
 * e2e_verify: checks what e2e_crash_producer had acknowledged against
 * what the broker now holds.
 *
 *   e2e_verify --brokers B --topic T --partitions P --acked-file F
 *              [--check-gaps]
 *
 * Reads every partition from the beginning up to its high watermark (as
 * rd_kafka_query_watermark_offsets reports it) and checks that each
 * acknowledged value "s<seq>" is present exactly once, at the partition
 * and offset its delivery report gave, and that acknowledged values
 * appear in increasing sequence order within each partition. Values that
 * were never acknowledged may be present or not (once at most is still
 * checked, as a duplicate means a write was repeated). Exit 1 on any
 * missing, duplicated or misplaced acknowledged message.
 *
 * --check-gaps (for an idempotent producer, which must deliver everything
 * it sent, retries included, exactly once and in order): every value in
 * partition p, acknowledged or not, must be the one after the previous
 * value there -- s<p>, s<p+P>, s<p+2P>, ... -- so a lost or reordered
 * message counts as a gap and fails the run.
 */
#include <librdkafka/rdkafka.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SHOWN 10

struct acked_msg {
    int32_t partition;          /* -1: this seq was not acknowledged */
    int64_t offset;
    int seen;                   /* times found in the log */
};

static struct acked_msg *msgs;  /* indexed by seq */
static long n_msgs;             /* allocated entries */
static long shown;

static void show(const char *what, long seq, int32_t part, int64_t off)
{
    if (shown++ < MAX_SHOWN)
        printf("%s: s%ld at partition %d offset %" PRId64 " (acked at "
               "%d/%" PRId64 ")\n", what, seq, part, off,
               seq < n_msgs ? msgs[seq].partition : -1,
               seq < n_msgs ? msgs[seq].offset : -1);
}

static void grow(long seq)
{
    long n = n_msgs ? n_msgs : 1024;
    long i;

    if (seq < n_msgs)
        return;
    while (n <= seq)
        n *= 2;
    msgs = realloc(msgs, sizeof(*msgs) * (size_t)n);
    if (!msgs) {
        perror("realloc");
        exit(2);
    }
    for (i = n_msgs; i < n; i++) {
        msgs[i].partition = -1;
        msgs[i].offset = -1;
        msgs[i].seen = 0;
    }
    n_msgs = n;
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

static void usage(void)
{
    fprintf(stderr, "usage: e2e_verify --brokers B --topic T "
                    "--partitions P --acked-file F [--check-gaps]\n");
    exit(2);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    const char *brokers = NULL, *topic = NULL, *file = NULL;
    int partitions = 1;
    char errstr[256];
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;
    rd_kafka_topic_partition_list_t *tl;
    FILE *f;
    long n_acked = 0, present = 0, missing = 0, dup = 0, misplaced = 0;
    long out_of_order = 0, unacked_present = 0, unparsable = 0;
    long gaps = 0;
    long *last_seq, *expect;
    int check_gaps = 0;
    int64_t *hw, *next;
    int done = 0, i, p;
    double t0, last_progress;
    char line[256];

    for (i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--check-gaps")) {
            check_gaps = 1;
            i--;
            continue;
        }
        if (i + 1 >= argc)
            usage();
        if (!strcmp(argv[i], "--brokers"))
            brokers = argv[i + 1];
        else if (!strcmp(argv[i], "--topic"))
            topic = argv[i + 1];
        else if (!strcmp(argv[i], "--partitions"))
            partitions = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--acked-file"))
            file = argv[i + 1];
        else
            usage();
    }
    if (i != argc || !brokers || !topic || !file || partitions < 1)
        usage();

    f = fopen(file, "r");
    if (!f) {
        perror(file);
        return 2;
    }
    while (fgets(line, sizeof(line), f)) {
        int32_t part;
        int64_t off;
        long seq;

        if (sscanf(line, "%" SCNd32 " %" SCNd64 " s%ld", &part, &off,
                   &seq) != 3 || seq < 0) {
            /* A torn last line is possible only if the producer died. */
            unparsable++;
            continue;
        }
        grow(seq);
        if (msgs[seq].partition >= 0)
            printf("acked file lists s%ld twice\n", seq);
        msgs[seq].partition = part;
        msgs[seq].offset = off;
        n_acked++;
    }
    fclose(f);

    conf = rd_kafka_conf_new();
    conf_set(conf, "bootstrap.servers", brokers);
    conf_set(conf, "group.id", "e2e_verify");
    conf_set(conf, "enable.auto.commit", "false");
    conf_set(conf, "log_level", "3");
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        return 2;
    }
    hw = calloc((size_t)partitions, sizeof(*hw));
    next = calloc((size_t)partitions, sizeof(*next));
    last_seq = calloc((size_t)partitions, sizeof(*last_seq));
    expect = calloc((size_t)partitions, sizeof(*expect));
    tl = rd_kafka_topic_partition_list_new(partitions);
    for (p = 0; p < partitions; p++) {
        int64_t lo = 0, hi = 0;
        rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
        int tries;

        /* Right after a restart the first query may still fail. */
        for (tries = 0; tries < 20; tries++) {
            err = rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi,
                                                   5000);
            if (!err)
                break;
        }
        if (err) {
            fprintf(stderr, "watermarks of partition %d: %s\n", p,
                    rd_kafka_err2str(err));
            return 2;
        }
        hw[p] = hi;
        next[p] = lo;
        last_seq[p] = -1;
        expect[p] = p;
        if (lo >= hi)
            done++;
        rd_kafka_topic_partition_list_add(tl, topic, p)->offset = lo;
    }
    rd_kafka_assign(rk, tl);
    rd_kafka_topic_partition_list_destroy(tl);

    t0 = now_s();
    last_progress = t0;
    while (done < partitions) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
        long seq;

        if (now_s() - last_progress > 20) {
            printf("consume stalled: %d of %d partitions read to the "
                   "high watermark\n", done, partitions);
            missing++;
            break;
        }
        if (!m)
            continue;
        if (m->err) {
            fprintf(stderr, "consumer error (not fatal): %s\n",
                    rd_kafka_message_errstr(m));
            rd_kafka_message_destroy(m);
            continue;
        }
        p = m->partition;
        if (p < 0 || p >= partitions || m->offset < next[p] ||
            m->offset >= hw[p]) {
            rd_kafka_message_destroy(m);
            continue;
        }
        last_progress = now_s();
        next[p] = m->offset + 1;
        if (next[p] >= hw[p])
            done++;
        if (m->len < 2 || ((const char *)m->payload)[0] != 's' ||
            sscanf((const char *)m->payload + 1, "%ld", &seq) != 1 ||
            seq < 0) {
            unparsable++;
            rd_kafka_message_destroy(m);
            continue;
        }
        grow(seq);
        if (check_gaps) {
            if (seq != expect[p]) {
                gaps++;
                if (shown++ < MAX_SHOWN)
                    printf("gap: s%ld at partition %d offset %" PRId64
                           " where s%ld was next\n", seq, p, m->offset,
                           expect[p]);
            }
            expect[p] = seq + partitions;
        }
        if (++msgs[seq].seen > 1) {
            dup++;
            show("duplicate", seq, p, m->offset);
        }
        if (msgs[seq].partition < 0) {
            unacked_present++;
        } else {
            if (msgs[seq].seen == 1)
                present++;
            if (msgs[seq].partition != p || msgs[seq].offset != m->offset) {
                misplaced++;
                show("misplaced", seq, p, m->offset);
            }
            if (seq <= last_seq[p]) {
                out_of_order++;
                show("out of order", seq, p, m->offset);
            }
            last_seq[p] = seq;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);

    for (i = 0; i < n_msgs; i++) {
        if (msgs[i].partition >= 0 && !msgs[i].seen) {
            missing++;
            show("missing", i, msgs[i].partition, msgs[i].offset);
        }
    }
    printf("e2e_verify: %s acked=%ld present=%ld missing=%ld "
           "duplicated=%ld misplaced=%ld out_of_order=%ld "
           "unacked_present=%ld unparsable=%ld gaps=%ld read_s=%.2f\n",
           (missing || dup || misplaced || out_of_order || gaps) ? "FAIL"
                                                                 : "ok",
           n_acked, present, missing, dup, misplaced, out_of_order,
           unacked_present, unparsable, gaps, now_s() - t0);
    free(hw);
    free(next);
    free(last_seq);
    free(expect);
    free(msgs);
    return (missing || dup || misplaced || out_of_order || gaps) ? 1 : 0;
}
