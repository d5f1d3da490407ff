/*
 * test_image.c - the metadata log's entries (meta/records.h) and the image
 * they build (meta/image.h): each record type's rule, entries all or none
 * and idempotent by offset, the framing's corruption cases, and snapshots
 * that come back byte for byte.
 *
 * The rules are KRaft's; where one is not obvious the Kafka class that
 * holds it is named.  With CN_META_SEEDS=dir set, seeds_write also writes
 * the fuzz corpus (tests/fuzz/corpus/meta_entry) there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/arena.h"
#include "base/err.h"
#include "base/wr.h"
#include "meta/image.h"
#include "meta/records.h"
#include "unit.h"

/* ---- records ----------------------------------------------------------- */

static struct cn_uuid uid(unsigned x)
{
    struct cn_uuid u = {{0}};
    u.b[0] = 0x5a;
    u.b[14] = (uint8_t)(x >> 8);
    u.b[15] = (uint8_t)x;
    return u;
}

static struct cn_mrec mrec(int16_t type)
{
    struct cn_mrec r;

    memset(&r, 0, sizeof r);
    r.type = type;
    r.version = cn_mrec_version(type);
    switch (type) {
    case CN_MREC_REGISTER_BROKER:
        cn_register_broker_record_init(&r.u.register_broker);
        break;
    case CN_MREC_UNREGISTER_BROKER:
        cn_unregister_broker_record_init(&r.u.unregister_broker);
        break;
    case CN_MREC_TOPIC: cn_topic_record_init(&r.u.topic); break;
    case CN_MREC_PARTITION: cn_partition_record_init(&r.u.partition); break;
    case CN_MREC_CONFIG: cn_config_record_init(&r.u.config); break;
    case CN_MREC_PARTITION_CHANGE:
        cn_partition_change_record_init(&r.u.partition_change);
        break;
    case CN_MREC_FENCE_BROKER:
        cn_fence_broker_record_init(&r.u.fence_broker);
        break;
    case CN_MREC_UNFENCE_BROKER:
        cn_unfence_broker_record_init(&r.u.unfence_broker);
        break;
    case CN_MREC_REMOVE_TOPIC:
        cn_remove_topic_record_init(&r.u.remove_topic);
        break;
    case CN_MREC_FEATURE_LEVEL:
        cn_feature_level_record_init(&r.u.feature_level);
        break;
    case CN_MREC_PRODUCER_IDS:
        cn_producer_ids_record_init(&r.u.producer_ids);
        break;
    case CN_MREC_BROKER_REGISTRATION_CHANGE:
        cn_broker_registration_change_record_init(&r.u.registration_change);
        break;
    case CN_MREC_NO_OP: cn_no_op_record_init(&r.u.no_op); break;
    }
    return r;
}

static struct cn_register_broker_record_broker_endpoint eps[2];

static struct cn_mrec reg(int32_t id, int64_t epoch, bool fenced)
{
    struct cn_mrec r = mrec(CN_MREC_REGISTER_BROKER);

    eps[0].name = cn_bytes_str("PLAINTEXT");
    eps[0].host = cn_bytes_str("127.0.0.1");
    eps[0].port = 9092;
    eps[0].security_protocol = 0;
    eps[1].name = cn_bytes_str("SSL");
    eps[1].host = cn_bytes_str("broker.example");
    eps[1].port = 9093;
    eps[1].security_protocol = 1;
    r.u.register_broker.broker_id = id;
    r.u.register_broker.broker_epoch = epoch;
    r.u.register_broker.incarnation_id = uid((unsigned)id + 500);
    r.u.register_broker.end_points = eps;
    r.u.register_broker.end_points_len = id % 2 ? 2 : 1;
    r.u.register_broker.rack = id % 2 ? cn_bytes_str("rack-a") : CN_BYTES_NULL;
    r.u.register_broker.fenced = fenced;
    return r;
}

static struct cn_mrec unreg(int32_t id, int64_t epoch)
{
    struct cn_mrec r = mrec(CN_MREC_UNREGISTER_BROKER);
    r.u.unregister_broker.broker_id = id;
    r.u.unregister_broker.broker_epoch = epoch;
    return r;
}

static struct cn_mrec fence(int32_t id, int64_t epoch)
{
    struct cn_mrec r = mrec(CN_MREC_FENCE_BROKER);
    r.u.fence_broker.id = id;
    r.u.fence_broker.epoch = epoch;
    return r;
}

static struct cn_mrec unfence(int32_t id, int64_t epoch)
{
    struct cn_mrec r = mrec(CN_MREC_UNFENCE_BROKER);
    r.u.unfence_broker.id = id;
    r.u.unfence_broker.epoch = epoch;
    return r;
}

static struct cn_mrec brc(int32_t id, int64_t epoch, int8_t fenced, int8_t ics)
{
    struct cn_mrec r = mrec(CN_MREC_BROKER_REGISTRATION_CHANGE);
    r.u.registration_change.broker_id = id;
    r.u.registration_change.broker_epoch = epoch;
    r.u.registration_change.fenced = fenced;
    r.u.registration_change.in_controlled_shutdown = ics;
    return r;
}

static struct cn_mrec topic(const char *name, unsigned id)
{
    struct cn_mrec r = mrec(CN_MREC_TOPIC);
    r.u.topic.name = cn_bytes_str(name);
    r.u.topic.topic_id = uid(id);
    return r;
}

static struct cn_mrec remove_topic(unsigned id)
{
    struct cn_mrec r = mrec(CN_MREC_REMOVE_TOPIC);
    r.u.remove_topic.topic_id = uid(id);
    return r;
}

static int32_t reps2[] = {2, 3};
static int32_t reps1[] = {3};

/* Partition pid of topic id on replicas reps3 (rotated by pid), ISR all,
 * led by the first. */
static struct cn_mrec part(unsigned id, int32_t pid)
{
    static int32_t rot[3][3] = {{1, 2, 3}, {2, 3, 1}, {3, 1, 2}};
    struct cn_mrec r = mrec(CN_MREC_PARTITION);

    r.u.partition.topic_id = uid(id);
    r.u.partition.partition_id = pid;
    r.u.partition.replicas = rot[pid % 3];
    r.u.partition.replicas_len = 3;
    r.u.partition.isr = rot[pid % 3];
    r.u.partition.isr_len = 3;
    r.u.partition.leader = rot[pid % 3][0];
    r.u.partition.leader_epoch = 0;
    r.u.partition.partition_epoch = 0;
    return r;
}

/* leader -2: unchanged; isr NULL: unchanged. */
static struct cn_mrec pchange(unsigned id, int32_t pid, int32_t leader,
                              int32_t *isr, int32_t nisr)
{
    struct cn_mrec r = mrec(CN_MREC_PARTITION_CHANGE);

    r.u.partition_change.topic_id = uid(id);
    r.u.partition_change.partition_id = pid;
    r.u.partition_change.leader = leader;
    r.u.partition_change.isr = isr;
    r.u.partition_change.isr_len = isr ? nisr : -1;
    r.u.partition_change.replicas_len = -1;
    r.u.partition_change.removing_replicas_len = -1;
    r.u.partition_change.adding_replicas_len = -1;
    r.u.partition_change.directories_len = -1;
    return r;
}

static struct cn_mrec config(int8_t type, const char *res, const char *name,
                             const char *value)
{
    struct cn_mrec r = mrec(CN_MREC_CONFIG);
    r.u.config.resource_type = type;
    r.u.config.resource_name = cn_bytes_str(res);
    r.u.config.name = cn_bytes_str(name);
    r.u.config.value = cn_bytes_str(value);
    return r;
}

static struct cn_mrec feature(const char *name, int16_t level)
{
    struct cn_mrec r = mrec(CN_MREC_FEATURE_LEVEL);
    r.u.feature_level.name = cn_bytes_str(name);
    r.u.feature_level.feature_level = level;
    return r;
}

static struct cn_mrec pids(int64_t next)
{
    struct cn_mrec r = mrec(CN_MREC_PRODUCER_IDS);
    r.u.producer_ids.broker_id = 1;
    r.u.producer_ids.broker_epoch = 10;
    r.u.producer_ids.next_producer_id = next;
    return r;
}

static struct cn_mrec cluster(const char *id)
{
    struct cn_mrec r = mrec(CN_MREC_CLUSTER_ID);
    r.u.cluster_id.id = cn_bytes_str(id);
    return r;
}

/* ---- helpers ----------------------------------------------------------- */

/* Encodes recs as one entry; the caller frees *buf. */
static size_t entry(const struct cn_mrec *recs, size_t n, uint8_t **buf)
{
    struct cn_wr wr;
    size_t len;

    cn_wr_init(&wr, 64);
    cn_meta_entry_encode(&wr, recs, n);
    CHECK_EQ(wr.err, 0);
    *buf = cn_wr_steal(&wr, &len);
    return len;
}

/* Applies recs as the entry at off, through its bytes, as a follower
 * would from the raft log. */
static int apply_n(struct cn_image *img, int64_t off,
                   const struct cn_mrec *recs, size_t n)
{
    uint8_t *buf;
    size_t len = entry(recs, n, &buf);
    int err = cn_image_apply_entry(img, off, buf, len);
    free(buf);
    return err;
}

#define RECS(...) ((const struct cn_mrec[]){__VA_ARGS__})
#define NRECS(...) (sizeof(RECS(__VA_ARGS__)) / sizeof(struct cn_mrec))
#define APPLY(img, off, ...) \
    apply_n((img), (off), RECS(__VA_ARGS__), NRECS(__VA_ARGS__))

/* The snapshot of img; the caller frees it. */
static uint8_t *snap(const struct cn_image *img, size_t *len)
{
    struct cn_wr wr;

    cn_wr_init(&wr, 256);
    cn_image_encode(img, &wr);
    CHECK_EQ(wr.err, 0);
    return cn_wr_steal(&wr, len);
}

static bool same_image(const struct cn_image *a, const struct cn_image *b)
{
    size_t la, lb;
    uint8_t *sa = snap(a, &la), *sb = snap(b, &lb);
    bool same = la == lb && memcmp(sa, sb, la) == 0 &&
                cn_image_offset(a) == cn_image_offset(b);

    free(sa);
    free(sb);
    return same;
}

static const struct cn_image_topic *find(const struct cn_image *img,
                                         const char *name)
{
    return cn_image_topic_find(img, cn_bytes_str(name));
}

/* An image with cluster id, 3 brokers (3 fenced), topics a (3 partitions,
 * a config) and b (1 partition), through offset 5. */
static struct cn_image *base_image(void)
{
    struct cn_image *img = cn_image_new();

    CHECK(img != NULL);
    CHECK_EQ(APPLY(img, 1, cluster("MkU3OEVBNTcwNTJENDM2Qk"),
                   feature("metadata.version", 21)),
             0);
    CHECK_EQ(APPLY(img, 2, reg(1, 2, false), reg(2, 2, false),
                   reg(3, 2, true)),
             0);
    CHECK_EQ(APPLY(img, 3, topic("a", 1), part(1, 0), part(1, 1), part(1, 2),
                   config(2, "a", "retention.ms", "1000")),
             0);
    CHECK_EQ(APPLY(img, 4, topic("b", 2), part(2, 0)), 0);
    CHECK_EQ(APPLY(img, 5, pids(1000)), 0);
    return img;
}

/* ---- the entry codec --------------------------------------------------- */

/* Every record type comes back from its bytes field for field, and the
 * decoded records encode to the same bytes. */
UNIT_TEST(entry_roundtrip_every_type)
{
    int32_t isr[] = {1, 2};
    struct cn_mrec pc = pchange(7, 4, 2, isr, 2);
    const struct cn_mrec in[] = {
        reg(5, 77, true),
        unreg(5, 77),
        topic("orders", 7),
        part(7, 4),
        config(2, "orders", "cleanup.policy", "compact"),
        config(4, "", "log.retention.ms", NULL),
        pc,
        fence(5, 77),
        unfence(5, 77),
        remove_topic(7),
        feature("metadata.version", 21),
        pids(4000),
        brc(5, 77, -1, 1),
        mrec(CN_MREC_NO_OP),
        cluster("abcdefghijklmnopqrstuv"),
    };
    size_t n = sizeof in / sizeof in[0], n2, len, len2;
    struct cn_arena arena;
    struct cn_mrec *out;
    uint8_t *buf, *buf2;

    len = entry(in, n, &buf);
    CHECK_EQ(len % 8, 0);
    CHECK(memcmp(buf, "CNM1", 4) == 0);
    cn_arena_init(&arena);
    CHECK_EQ(cn_meta_entry_decode(buf, len, &arena, &out, &n2), 0);
    CHECK_EQ(n2, n);
    for (size_t i = 0; i < n && i < n2; i++) {
        CHECK_EQ(out[i].type, in[i].type);
        CHECK_EQ(out[i].version, cn_mrec_version(in[i].type));
        CHECK(strcmp(cn_mrec_name(out[i].type), "unknown") != 0);
    }
    {
        const struct cn_register_broker_record *r = &out[0].u.register_broker;
        CHECK_EQ(r->broker_id, 5);
        CHECK_EQ(r->broker_epoch, 77);
        CHECK_EQ(r->end_points_len, 2);
        CHECK(cn_bytes_eq_str(r->end_points[1].host, "broker.example"));
        CHECK_EQ(r->end_points[1].port, 9093);
        CHECK(cn_bytes_eq_str(r->rack, "rack-a"));
        CHECK(r->fenced);
    }
    CHECK_EQ(out[1].u.unregister_broker.broker_epoch, 77);
    CHECK(cn_bytes_eq_str(out[2].u.topic.name, "orders"));
    CHECK(memcmp(out[2].u.topic.topic_id.b, uid(7).b, 16) == 0);
    CHECK_EQ(out[3].u.partition.partition_id, 4);
    CHECK_EQ(out[3].u.partition.replicas_len, 3);
    CHECK_EQ(out[3].u.partition.replicas[0], 2);
    CHECK_EQ(out[3].u.partition.leader, 2);
    CHECK(cn_bytes_eq_str(out[4].u.config.value, "compact"));
    CHECK(cn_bytes_is_null(out[5].u.config.value));
    CHECK_EQ(out[6].u.partition_change.leader, 2);
    CHECK_EQ(out[6].u.partition_change.isr_len, 2);
    CHECK_EQ(out[6].u.partition_change.replicas_len, -1);
    CHECK_EQ(out[7].u.fence_broker.id, 5);
    CHECK_EQ(out[8].u.unfence_broker.epoch, 77);
    CHECK(memcmp(out[9].u.remove_topic.topic_id.b, uid(7).b, 16) == 0);
    CHECK_EQ(out[10].u.feature_level.feature_level, 21);
    CHECK_EQ(out[11].u.producer_ids.next_producer_id, 4000);
    CHECK_EQ(out[12].u.registration_change.fenced, -1);
    CHECK_EQ(out[12].u.registration_change.in_controlled_shutdown, 1);
    CHECK(cn_bytes_eq_str(out[14].u.cluster_id.id, "abcdefghijklmnopqrstuv"));

    len2 = entry(out, n2, &buf2);
    CHECK(len2 == len && memcmp(buf, buf2, len) == 0);
    free(buf2);
    cn_arena_fini(&arena);
    free(buf);
}

/* Each type alone, so a codec's length slip cannot hide behind the next
 * record. */
UNIT_TEST(entry_roundtrip_each_type_alone)
{
    const struct cn_mrec in[] = {
        reg(2, 1, false),
        unreg(2, 1),
        topic("t", 1),
        part(1, 0),
        config(4, "1", "x", "y"),
        pchange(1, 0, -2, NULL, 0),
        fence(1, 1),
        unfence(1, 1),
        remove_topic(1),
        feature("f", 1),
        pids(1),
        brc(1, 1, 0, 0),
        mrec(CN_MREC_NO_OP),
        cluster("c"),
    };

    for (size_t i = 0; i < sizeof in / sizeof in[0]; i++) {
        struct cn_arena arena;
        struct cn_mrec *out;
        uint8_t *buf, *buf2;
        size_t n, len = entry(&in[i], 1, &buf), len2;

        cn_arena_init(&arena);
        CHECK_EQ(cn_meta_entry_decode(buf, len, &arena, &out, &n), 0);
        CHECK_EQ(n, 1);
        CHECK_EQ(out[0].type, in[i].type);
        len2 = entry(out, 1, &buf2);
        CHECK(len2 == len && memcmp(buf, buf2, len) == 0);
        free(buf2);
        cn_arena_fini(&arena);
        free(buf);
    }
}

/* A frame version, record version or type Cairn does not know, a record
 * longer than its codec reads, a non-zero pad, a whole 8 bytes after the
 * last record: each is a log the node must not apply. */
UNIT_TEST(entry_corrupt)
{
    const struct cn_mrec one[] = {topic("t", 1)};
    struct cn_arena arena;
    struct cn_mrec *out;
    size_t n, len;
    uint8_t *buf, *bad;
    struct cn_wr wr;

    cn_corrupt_hush();
    cn_arena_init(&arena);
    len = entry(one, 1, &buf);
    /* layout: "CNM1", u32 1, u32 L, 0x01 frame, 0x02 type, 0x00 version */
    CHECK_EQ(buf[12], 1);
    CHECK_EQ(buf[13], CN_MREC_TOPIC);
    CHECK_EQ(cn_meta_entry_decode(buf, len, &arena, &out, &n), 0);
    bad = malloc(len + 8);

#define TRY(mutate, expect)                                         \
    do {                                                            \
        size_t blen = len;                                          \
        memcpy(bad, buf, len);                                      \
        mutate;                                                     \
        CHECK_EQ(cn_meta_entry_decode(bad, blen, &arena, &out, &n), \
                 (expect));                                         \
    } while (0)

    TRY(bad[0] = 'X', CN_ECORRUPT);     /* magic */
    TRY(bad[7] = 0, CN_ECORRUPT);       /* no records */
    TRY(bad[7] = 2, CN_ECORRUPT);       /* count beyond the bytes */
    TRY(bad[12] = 0, CN_ECORRUPT);      /* frame version 0 */
    TRY(bad[13] = 6, CN_ECORRUPT);      /* type 6: not one of ours */
    TRY(bad[13] = 0x7f, CN_ECORRUPT);   /* type 127 */
    TRY(bad[14] = 1, CN_ECORRUPT);      /* TopicRecord v1 */
    TRY(blen = len - 8, CN_ECORRUPT);   /* truncated */
    TRY(blen = len - 1, CN_ECORRUPT);   /* not a multiple of 8 */
    TRY(bad[len - 1] = 1, CN_ECORRUPT); /* padding not zero */
    TRY(bad[11]++, CN_ECORRUPT);        /* a byte the codec leaves */
    TRY((memset(bad + len, 0, 8), blen = len + 8), CN_ECORRUPT); /* trailing */
    free(bad);
    free(buf);

    /* A record whose codec stops short of its length: an extra byte inside
     * the frame, with the padding kept right. */
    cn_wr_init(&wr, 64);
    cn_wr_raw(&wr, "CNM1", 4);
    cn_wr_u32(&wr, 1);
    cn_wr_u32(&wr, 4);
    cn_wr_uvarint(&wr, 1);
    cn_wr_uvarint(&wr, CN_MREC_NO_OP);
    cn_wr_uvarint(&wr, 0);
    cn_wr_uvarint(&wr, 0); /* NoOpRecord's empty tags */
    CHECK_EQ(cn_meta_entry_decode(wr.buf, wr.len, &arena, &out, &n), 0);
    /* L = 5: one byte more than NoOpRecord reads, then 7 of padding */
    wr.buf[11] = 5;
    cn_wr_raw(&wr, "\0\0\0\0\0\0\0\0", 8);
    CHECK_EQ(cn_meta_entry_decode(wr.buf, wr.len, &arena, &out, &n),
             CN_ECORRUPT);
    cn_wr_fini(&wr);
    cn_arena_fini(&arena);
    cn_corrupt_unhush();
}

/* The writer refuses what no node could read back. */
UNIT_TEST(entry_encode_refuses)
{
    struct cn_mrec r = mrec(CN_MREC_TOPIC);
    struct cn_wr wr;

    cn_wr_init(&wr, 64);
    cn_meta_entry_encode(&wr, &r, 0);
    CHECK_EQ(wr.err, CN_EINVAL);
    cn_wr_reset(&wr);
    r.version = 1;
    cn_meta_entry_encode(&wr, &r, 1);
    CHECK_EQ(wr.err, CN_EINVAL);
    cn_wr_reset(&wr);
    r.type = 6;
    r.version = 0;
    cn_meta_entry_encode(&wr, &r, 1);
    CHECK_EQ(wr.err, CN_EINVAL);
    cn_wr_fini(&wr);
    CHECK_EQ(cn_mrec_version(6), -1);
    CHECK(strcmp(cn_mrec_name(6), "unknown") == 0);
}

/* ---- apply, record by record ------------------------------------------- */

UNIT_TEST(apply_brokers)
{
    struct cn_image *img = cn_image_new();
    const struct cn_image_broker *b;

    cn_corrupt_hush();
    CHECK_EQ(APPLY(img, 1, reg(2, 1, true), reg(1, 1, false)), 0);
    CHECK_EQ(cn_image_broker_count(img), 2);
    CHECK_EQ(cn_image_broker_at(img, 0)->id, 1); /* by id */
    CHECK_EQ(cn_image_broker_at(img, 1)->id, 2);
    b = cn_image_broker_find(img, 1);
    CHECK(b && b->epoch == 1 && !b->fenced && b->neps == 2);
    CHECK(b && strcmp(b->eps[1].host, "broker.example") == 0);
    CHECK(b && b->eps[1].port == 9093 && b->eps[1].security_protocol == 1);
    CHECK(b && strcmp(b->rack, "rack-a") == 0);
    b = cn_image_broker_find(img, 2);
    CHECK(b && b->fenced && b->rack == NULL && b->neps == 1);

    /* Unfence/fence by id and epoch; a stale epoch is corruption. */
    CHECK_EQ(APPLY(img, 2, unfence(2, 1)), 0);
    CHECK(!cn_image_broker_find(img, 2)->fenced);
    CHECK_EQ(APPLY(img, 3, fence(2, 1)), 0);
    CHECK(cn_image_broker_find(img, 2)->fenced);
    CHECK_EQ(APPLY(img, 4, unfence(2, 9)), CN_ECORRUPT);
    CHECK_EQ(APPLY(img, 4, fence(7, 1)), CN_ECORRUPT);

    /* BrokerRegistrationChangeRecord: 1 set, -1 clear, 0 keep. */
    CHECK_EQ(APPLY(img, 4, brc(2, 1, -1, 1)), 0);
    b = cn_image_broker_find(img, 2);
    CHECK(!b->fenced && b->in_controlled_shutdown);
    CHECK_EQ(APPLY(img, 5, brc(2, 1, 0, 0)), 0);
    CHECK(!b->fenced && b->in_controlled_shutdown);
    CHECK_EQ(APPLY(img, 6, brc(2, 1, 1, -1)), 0);
    CHECK(b->fenced && !b->in_controlled_shutdown);
    CHECK_EQ(APPLY(img, 7, brc(2, 1, 2, 0)), CN_ECORRUPT);
    CHECK_EQ(APPLY(img, 7, brc(2, 2, 1, 0)), CN_ECORRUPT);

    /* A new registration replaces the old whole. */
    CHECK_EQ(APPLY(img, 7, reg(2, 7, false)), 0);
    b = cn_image_broker_find(img, 2);
    CHECK(b->epoch == 7 && !b->fenced && !b->in_controlled_shutdown);
    CHECK_EQ(cn_image_broker_count(img), 2);

    /* Unregister at the current epoch only. */
    CHECK_EQ(APPLY(img, 8, unreg(2, 1)), CN_ECORRUPT);
    CHECK_EQ(APPLY(img, 8, unreg(2, 7)), 0);
    CHECK(cn_image_broker_find(img, 2) == NULL);
    CHECK_EQ(cn_image_broker_count(img), 1);
    CHECK_EQ(APPLY(img, 9, unreg(2, 7)), CN_ECORRUPT);
    CHECK_EQ(cn_image_offset(img), 8);
    cn_image_free(img);
    cn_corrupt_unhush();
}

UNIT_TEST(apply_topics)
{
    struct cn_image *img = base_image();
    const struct cn_image_topic *a, *t;
    struct cn_uuid id1 = uid(1);
    size_t seen = 0;

    cn_corrupt_hush();
    CHECK_EQ(cn_image_topic_count(img), 2);
    a = find(img, "a");
    CHECK(a && a->nparts == 3 && memcmp(a->id.b, id1.b, 16) == 0);
    CHECK(cn_image_topic_find_id(img, &id1) == a);
    CHECK(find(img, "c") == NULL);
    CHECK(find(img, "") == NULL);
    CHECK_EQ(a->parts[1].nreplicas, 3);
    CHECK_EQ(a->parts[1].replicas[0], 2);
    CHECK_EQ(a->parts[1].leader, 2);
    CHECK_EQ(a->parts[1].nisr, 3);
    for (t = cn_image_topic_next(img, NULL); t;
         t = cn_image_topic_next(img, t))
        seen++;
    CHECK_EQ(seen, 2);

    /* Duplicates by name or id; a partition that is not the next id; a
     * partition of no topic. */
    CHECK_EQ(APPLY(img, 6, topic("a", 9)), CN_ECORRUPT);
    CHECK_EQ(APPLY(img, 6, topic("z", 1)), CN_ECORRUPT);
    CHECK_EQ(APPLY(img, 6, part(1, 4)), CN_ECORRUPT);
    CHECK_EQ(APPLY(img, 6, part(9, 0)), CN_ECORRUPT);
    CHECK_EQ(APPLY(img, 6, topic("", 9)), CN_ECORRUPT);
    {
        struct cn_mrec z = topic("zero", 0);
        memset(z.u.topic.topic_id.b, 0, 16);
        CHECK_EQ(APPLY(img, 6, z), CN_ECORRUPT);
    }

    /* The next partition grows the topic; an existing one is replaced. */
    CHECK_EQ(APPLY(img, 6, part(1, 3)), 0);
    CHECK_EQ(find(img, "a")->nparts, 4);
    {
        struct cn_mrec p = part(1, 0);
        p.u.partition.replicas = reps1;
        p.u.partition.replicas_len = 1;
        p.u.partition.isr = reps1;
        p.u.partition.isr_len = 1;
        p.u.partition.leader = 3;
        p.u.partition.leader_epoch = 4;
        p.u.partition.partition_epoch = 9;
        CHECK_EQ(APPLY(img, 7, p), 0);
    }
    a = find(img, "a");
    CHECK(a->nparts == 4 && a->parts[0].leader == 3 &&
          a->parts[0].nreplicas == 1 && a->parts[0].leader_epoch == 4 &&
          a->parts[0].part_epoch == 9);

    /* RemoveTopic takes its partitions and configs; the name is free. */
    CHECK_EQ(APPLY(img, 8, remove_topic(1)), 0);
    CHECK(find(img, "a") == NULL);
    CHECK(cn_image_topic_find_id(img, &id1) == NULL);
    CHECK_EQ(cn_image_topic_count(img), 1);
    CHECK_EQ(APPLY(img, 9, remove_topic(1)), CN_ECORRUPT);
    CHECK_EQ(APPLY(img, 9, topic("a", 3), part(3, 0)), 0);
    a = find(img, "a");
    CHECK(a && a->nparts == 1 && a->nconfigs == 0);
    CHECK(cn_image_topic_config(a, "retention.ms") == NULL);
    cn_image_free(img);
    cn_corrupt_unhush();
}

/* PartitionRegistration.merge: the partition epoch moves at every record,
 * the leader epoch whenever Leader is not -2 (NO_LEADER_CHANGE). */
UNIT_TEST(apply_partition_change_epochs)
{
    struct cn_image *img = base_image();
    const struct cn_image_part *p;
    int32_t isr12[] = {1, 2};

    cn_corrupt_hush();
    p = &find(img, "a")->parts[0];
    CHECK(p->leader == 1 && p->leader_epoch == 0 && p->part_epoch == 0);

    /* ISR shrink, same leader: partition epoch only. */
    CHECK_EQ(APPLY(img, 6, pchange(1, 0, -2, isr12, 2)), 0);
    p = &find(img, "a")->parts[0];
    CHECK(p->leader == 1 && p->leader_epoch == 0 && p->part_epoch == 1);
    CHECK(p->nisr == 2 && p->isr[0] == 1 && p->isr[1] == 2);
    CHECK(p->nreplicas == 3 && p->replicas[2] == 3);

    /* New leader: both. */
    CHECK_EQ(APPLY(img, 7, pchange(1, 0, 2, NULL, 0)), 0);
    p = &find(img, "a")->parts[0];
    CHECK(p->leader == 2 && p->leader_epoch == 1 && p->part_epoch == 2);
    CHECK(p->nisr == 2);

    /* No leader (-1) is a leader change too. */
    CHECK_EQ(APPLY(img, 8, pchange(1, 0, -1, reps1, 0)), 0);
    p = &find(img, "a")->parts[0];
    CHECK(p->leader == -1 && p->leader_epoch == 2 && p->part_epoch == 3);
    CHECK_EQ(p->nisr, 0);

    /* The same leader named again still bumps the leader epoch (KRaft's
     * controller does so to fence a stale leader's writes). */
    CHECK_EQ(APPLY(img, 9, pchange(1, 0, 3, reps1, 1)), 0);
    CHECK_EQ(APPLY(img, 10, pchange(1, 0, 3, NULL, 0)), 0);
    p = &find(img, "a")->parts[0];
    CHECK(p->leader == 3 && p->leader_epoch == 4 && p->part_epoch == 5);

    /* Replicas reassigned. */
    {
        struct cn_mrec c = pchange(1, 0, -2, reps2, 2);
        c.u.partition_change.replicas = reps2;
        c.u.partition_change.replicas_len = 2;
        CHECK_EQ(APPLY(img, 11, c), 0);
    }
    p = &find(img, "a")->parts[0];
    CHECK(p->nreplicas == 2 && p->replicas[0] == 2 && p->nisr == 2);
    CHECK(p->leader_epoch == 4 && p->part_epoch == 6);

    /* Other partitions untouched; bad targets are corruption. */
    p = &find(img, "a")->parts[1];
    CHECK(p->leader_epoch == 0 && p->part_epoch == 0);
    CHECK_EQ(APPLY(img, 12, pchange(1, 3, 1, NULL, 0)), CN_ECORRUPT);
    CHECK_EQ(APPLY(img, 12, pchange(9, 0, 1, NULL, 0)), CN_ECORRUPT);
    CHECK_EQ(APPLY(img, 12, pchange(1, 0, -3, NULL, 0)), CN_ECORRUPT);
    cn_image_free(img);
    cn_corrupt_unhush();
}

UNIT_TEST(apply_configs)
{
    struct cn_image *img = base_image();
    const struct cn_image_topic *a;

    cn_corrupt_hush();
    a = find(img, "a");
    CHECK(strcmp(cn_image_topic_config(a, "retention.ms"), "1000") == 0);
    CHECK_EQ(APPLY(img, 6, config(2, "a", "cleanup.policy", "compact"),
                   config(2, "a", "retention.ms", "2000"),
                   config(2, "a", "segment.bytes", "1024")),
             0);
    a = find(img, "a");
    CHECK_EQ(a->nconfigs, 3);
    CHECK(strcmp(a->configs[0].name, "cleanup.policy") == 0); /* by name */
    CHECK(strcmp(cn_image_topic_config(a, "retention.ms"), "2000") == 0);
    CHECK_EQ(APPLY(img, 7, config(2, "a", "retention.ms", NULL),
                   config(2, "a", "never.set", NULL)),
             0);
    CHECK(cn_image_topic_config(a, "retention.ms") == NULL);
    CHECK_EQ(a->nconfigs, 2);
    CHECK(find(img, "b")->nconfigs == 0);

    CHECK_EQ(APPLY(img, 8, config(4, "1", "log.retention.ms", "5"),
                   config(4, "", "log.retention.ms", "6")),
             0);
    CHECK(strcmp(cn_image_broker_config(img, "1", "log.retention.ms"), "5") ==
          0);
    CHECK(strcmp(cn_image_broker_config(img, "", "log.retention.ms"), "6") ==
          0);
    CHECK(cn_image_broker_config(img, "2", "log.retention.ms") == NULL);
    CHECK_EQ(APPLY(img, 9, config(4, "1", "log.retention.ms", NULL)), 0);
    CHECK(cn_image_broker_config(img, "1", "log.retention.ms") == NULL);

    CHECK_EQ(APPLY(img, 10, config(2, "nope", "x", "1")), CN_ECORRUPT);
    CHECK_EQ(APPLY(img, 10, config(8, "1", "x", "1")), CN_ECORRUPT);
    CHECK_EQ(APPLY(img, 10, config(2, "a", "", "1")), CN_ECORRUPT);
    cn_image_free(img);
    cn_corrupt_unhush();
}

UNIT_TEST(apply_features_pids_cluster_noop)
{
    struct cn_image *img = cn_image_new();

    cn_corrupt_hush();
    CHECK_EQ(cn_image_offset(img), -1);
    CHECK(strcmp(cn_image_cluster_id(img), "") == 0);
    CHECK_EQ(cn_image_next_producer_id(img), 0);
    CHECK_EQ(cn_image_feature(img, "metadata.version"), 0);

    CHECK_EQ(APPLY(img, 1, cluster("cid-1"), feature("metadata.version", 21),
                   feature("transaction.version", 2)),
             0);
    CHECK(strcmp(cn_image_cluster_id(img), "cid-1") == 0);
    CHECK_EQ(cn_image_feature(img, "metadata.version"), 21);
    CHECK_EQ(cn_image_feature(img, "transaction.version"), 2);
    CHECK_EQ(APPLY(img, 2, feature("transaction.version", 0),
                   feature("metadata.version", 22)),
             0);
    CHECK_EQ(cn_image_feature(img, "transaction.version"), 0);
    CHECK_EQ(cn_image_feature(img, "metadata.version"), 22);
    CHECK_EQ(APPLY(img, 3, feature("x", -1)), CN_ECORRUPT);

    /* The same cluster id again is fine; another is not. */
    CHECK_EQ(APPLY(img, 3, cluster("cid-1")), 0);
    CHECK_EQ(APPLY(img, 4, cluster("cid-2")), CN_ECORRUPT);
    CHECK(strcmp(cn_image_cluster_id(img), "cid-1") == 0);

    CHECK_EQ(APPLY(img, 4, pids(1000)), 0);
    CHECK_EQ(APPLY(img, 5, pids(2000)), 0);
    CHECK_EQ(cn_image_next_producer_id(img), 2000);
    CHECK_EQ(APPLY(img, 6, pids(1000)), CN_ECORRUPT);
    CHECK_EQ(cn_image_next_producer_id(img), 2000);

    CHECK_EQ(APPLY(img, 6, mrec(CN_MREC_NO_OP)), 0);
    CHECK_EQ(cn_image_offset(img), 6);
    cn_image_free(img);
    cn_corrupt_unhush();
}

/* ---- entries: by offset, all or none ----------------------------------- */

UNIT_TEST(apply_idempotent_by_offset)
{
    struct cn_image *img = base_image(), *again;

    CHECK_EQ(cn_image_offset(img), 5);
    /* A replay of offsets up to 5 changes nothing, whatever it holds. */
    CHECK_EQ(APPLY(img, 3, topic("a", 1), part(1, 0)), 0);
    CHECK_EQ(APPLY(img, 5, pids(1)), 0);
    CHECK_EQ(APPLY(img, 4, cluster("other")), 0);
    CHECK_EQ(cn_image_next_producer_id(img), 1000);
    CHECK_EQ(cn_image_offset(img), 5);
    again = base_image();
    CHECK(same_image(img, again));
    cn_image_free(again);

    CHECK_EQ(APPLY(img, 6, pchange(1, 0, 2, NULL, 0)), 0);
    CHECK_EQ(APPLY(img, 6, pchange(1, 0, 2, NULL, 0)), 0);
    CHECK_EQ(find(img, "a")->parts[0].leader_epoch, 1);
    cn_image_free(img);
}

/* A bad third record leaves the image as it was before the entry, and at
 * the same offset, whatever the first two did. */
UNIT_TEST(apply_entry_atomic)
{
    struct cn_image *img = base_image(), *ref = base_image();
    const struct cn_image_topic *before = find(img, "a");
    struct cn_mrec bad = pchange(9, 0, 1, NULL, 0);

    cn_corrupt_hush();
#define ATOMIC(...)                                        \
    do {                                                   \
        CHECK_EQ(APPLY(img, 6, __VA_ARGS__), CN_ECORRUPT); \
        CHECK(same_image(img, ref));                       \
    } while (0)

    ATOMIC(reg(4, 6, false), reg(1, 6, true), bad);
    ATOMIC(unreg(1, 2), fence(2, 2), bad);
    ATOMIC(brc(2, 2, 1, 1), unfence(3, 2), bad);
    ATOMIC(topic("c", 3), part(3, 0), bad);
    ATOMIC(part(1, 3), part(1, 4), remove_topic(9));
    ATOMIC(part(1, 3), pchange(1, 3, 2, NULL, 0), bad);
    ATOMIC(pchange(1, 0, 2, reps2, 2), pchange(1, 0, 3, NULL, 0), bad);
    ATOMIC(remove_topic(1), topic("a", 4), bad);
    ATOMIC(topic("c", 3), remove_topic(3), bad);
    ATOMIC(config(2, "a", "retention.ms", NULL), config(2, "a", "x", "1"),
           bad);
    ATOMIC(config(2, "a", "retention.ms", "5"), remove_topic(1), bad);
    ATOMIC(config(4, "7", "x", "1"), config(4, "7", "x", NULL),
           config(4, "7", "y", "1"), bad);
    ATOMIC(feature("metadata.version", 0), feature("kraft.version", 1), bad);
    ATOMIC(pids(5000), mrec(CN_MREC_NO_OP), bad);
    ATOMIC(reg(1, 9, false), unreg(1, 9), bad);
    ATOMIC(remove_topic(2), remove_topic(1), bad);
    CHECK_EQ(cn_image_offset(img), 5);
    /* The untouched topic is still the same object (O(changed) undo). */
    CHECK(find(img, "a") == before);
    CHECK(find(img, "a")->configs != NULL);

    /* Broker configs of a fresh group: undone, yet the group stays empty
     * and the snapshot cannot tell. */
    CHECK(cn_image_broker_config(img, "7", "x") == NULL);

    /* And the entry applies once fixed. */
    CHECK_EQ(APPLY(img, 6, topic("c", 3), part(3, 0), part(3, 1)), 0);
    CHECK_EQ(find(img, "c")->nparts, 2);
    cn_image_free(ref);
    cn_image_free(img);
    cn_corrupt_unhush();
}

/* ---- snapshots --------------------------------------------------------- */

static struct cn_image *rich_image(void)
{
    struct cn_image *img = base_image();

    CHECK_EQ(APPLY(img, 6, reg(7, 6, false), brc(2, 2, 0, 1),
                   feature("transaction.version", 2),
                   config(4, "", "log.retention.ms", "100"),
                   config(4, "7", "log.dir", "/tmp/x"),
                   config(2, "b", "cleanup.policy", "compact")),
             0);
    CHECK_EQ(APPLY(img, 7, topic("0-first", 30), part(30, 0), part(30, 1),
                   pchange(1, 1, 3, reps1, 1), pchange(1, 2, -2, reps2, 2)),
             0);
    CHECK_EQ(APPLY(img, 8, pchange(1, 1, -1, NULL, 0)), 0);
    return img;
}

UNIT_TEST(snapshot_roundtrip_byte_identical)
{
    struct cn_image *img = rich_image(), *back = NULL;
    const struct cn_image_part *p;
    const struct cn_image_broker *b;
    uint8_t *s1, *s2;
    size_t l1, l2;

    s1 = snap(img, &l1);
    CHECK_EQ(cn_image_decode(s1, l1, 8, &back), 0);
    if (!back)
        return;
    s2 = snap(back, &l2);
    CHECK(l1 == l2 && memcmp(s1, s2, l1) == 0);
    CHECK_EQ(cn_image_offset(back), 8);

    CHECK(strcmp(cn_image_cluster_id(back), "MkU3OEVBNTcwNTJENDM2Qk") == 0);
    CHECK_EQ(cn_image_feature(back, "transaction.version"), 2);
    CHECK_EQ(cn_image_next_producer_id(back), 1000);
    CHECK_EQ(cn_image_broker_count(back), 4);
    b = cn_image_broker_find(back, 3);
    CHECK(b && b->fenced && b->epoch == 2);
    b = cn_image_broker_find(back, 2);
    CHECK(b && !b->fenced && b->in_controlled_shutdown);
    b = cn_image_broker_find(back, 7);
    CHECK(b && b->neps == 2 && strcmp(b->eps[0].name, "PLAINTEXT") == 0 &&
          b->eps[0].port == 9092 && strcmp(b->rack, "rack-a") == 0 &&
          memcmp(b->incarnation.b, uid(507).b, 16) == 0);
    CHECK(strcmp(cn_image_broker_config(back, "7", "log.dir"), "/tmp/x") == 0);
    CHECK_EQ(cn_image_topic_count(back), 3);
    p = &find(back, "a")->parts[1];
    CHECK(p->leader == -1 && p->leader_epoch == 2 && p->part_epoch == 2 &&
          p->nisr == 1 && p->isr[0] == 3);
    p = &find(back, "a")->parts[2];
    CHECK(p->leader == 3 && p->leader_epoch == 0 && p->part_epoch == 1);
    CHECK(strcmp(cn_image_topic_config(find(back, "b"), "cleanup.policy"),
                 "compact") == 0);

    /* The snapshot goes on like the image it came from. */
    CHECK_EQ(APPLY(back, 9, pchange(1, 1, 2, reps2, 2)), 0);
    CHECK_EQ(APPLY(img, 9, pchange(1, 1, 2, reps2, 2)), 0);
    CHECK(same_image(img, back));
    free(s2);
    free(s1);
    cn_image_free(back);
    cn_image_free(img);
}

/* A copy is the same image, and goes its own way. */
UNIT_TEST(image_copy)
{
    struct cn_image *img = rich_image(), *copy = NULL;

    CHECK_EQ(cn_image_copy(img, &copy), 0);
    if (!copy)
        return;
    CHECK(same_image(img, copy));
    CHECK_EQ(APPLY(copy, 9, remove_topic(1)), 0);
    CHECK(find(img, "a") != NULL && find(copy, "a") == NULL);
    cn_image_free(copy);
    cn_image_free(img);
}

/* The same image built in another order encodes to the same bytes. */
UNIT_TEST(snapshot_deterministic)
{
    struct cn_image *x = cn_image_new(), *y = cn_image_new();

    CHECK_EQ(APPLY(x, 1, reg(2, 1, false), reg(1, 1, false), topic("b", 2),
                   topic("a", 1), part(1, 0), feature("z", 1), feature("y", 1),
                   config(2, "a", "k2", "v"), config(2, "a", "k1", "v")),
             0);
    CHECK_EQ(APPLY(y, 1, feature("y", 1), topic("a", 1), part(1, 0),
                   config(2, "a", "k1", "v"), reg(1, 1, false),
                   config(2, "a", "k2", "v"), topic("b", 2), feature("z", 1),
                   reg(2, 1, false)),
             0);
    CHECK(same_image(x, y));
    cn_image_free(x);
    cn_image_free(y);
}

UNIT_TEST(snapshot_empty_and_corrupt)
{
    struct cn_image *img = cn_image_new(), *back = NULL;
    uint8_t *s, *bad;
    size_t len;

    cn_corrupt_hush();
    s = snap(img, &len);
    CHECK_EQ(len, 4);
    CHECK_EQ(cn_image_decode(s, len, 0, &back), 0);
    CHECK(back && cn_image_topic_count(back) == 0 &&
          cn_image_offset(back) == 0);
    cn_image_free(back);
    free(s);
    cn_image_free(img);

    img = rich_image();
    s = snap(img, &len);
    bad = malloc(len + 1);
    memcpy(bad, s, len);
    bad[len] = 0;
    back = NULL;
    CHECK_EQ(cn_image_decode(bad, len + 1, 8, &back), CN_ECORRUPT);
    CHECK_EQ(cn_image_decode(bad, len - 1, 8, &back), CN_ECORRUPT);
    CHECK_EQ(cn_image_decode(bad, 3, 8, &back), CN_ECORRUPT);
    bad[3]++; /* one entry more than there is */
    CHECK_EQ(cn_image_decode(bad, len, 8, &back), CN_ECORRUPT);
    bad[3] -= 2; /* one fewer: the last is trailing bytes */
    CHECK_EQ(cn_image_decode(bad, len, 8, &back), CN_ECORRUPT);
    CHECK(back == NULL);
    free(bad);
    free(s);
    cn_image_free(img);
    cn_corrupt_unhush();
}

/* 1,000 topics of 10 partitions: applies, snapshots and restores well
 * under a second, and each entry costs what it changes. */
UNIT_TEST(large_image)
{
    struct cn_image *img = cn_image_new(), *back = NULL;
    struct cn_mrec recs[11];
    char names[1000][16];
    clock_t t0 = clock();
    uint8_t *s1, *s2;
    size_t l1, l2;
    double secs;

    CHECK_EQ(APPLY(img, 1, cluster("big"), reg(1, 1, false), reg(2, 1, false),
                   reg(3, 1, false)),
             0);
    for (unsigned i = 0; i < 1000; i++) {
        snprintf(names[i], sizeof names[i], "topic-%04u", 999 - i);
        recs[0] = topic(names[i], 1000 + i);
        for (int32_t p = 0; p < 10; p++)
            recs[1 + p] = part(1000 + i, p);
        CHECK_EQ(apply_n(img, 2 + i, recs, 11), 0);
    }
    /* A round of leader changes, one entry per partition. */
    for (unsigned i = 0; i < 1000; i++)
        for (int32_t p = 0; p < 10; p++) {
            struct cn_mrec c = pchange(1000 + i, p, -1, reps1, 1);
            CHECK_EQ(apply_n(img, 2000 + i * 10 + p, &c, 1), 0);
        }
    CHECK_EQ(cn_image_topic_count(img), 1000);
    s1 = snap(img, &l1);
    CHECK_EQ(cn_image_decode(s1, l1, 20000, &back), 0);
    if (back) {
        s2 = snap(back, &l2);
        CHECK(l1 == l2 && memcmp(s1, s2, l1) == 0);
        CHECK_EQ(find(back, "topic-0500")->parts[9].leader_epoch, 1);
        free(s2);
    }
    secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    if (secs >= 1.0)
        fprintf(stderr, "  large_image took %.2f s\n", secs);
    CHECK(secs < 1.0);
    free(s1);
    cn_image_free(back);
    cn_image_free(img);
}

/* ---- fuzz seeds -------------------------------------------------------- */

static void seed(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof path, "%s/%s", dir, name);
    f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f)
        return;
    CHECK_EQ(fwrite(p, 1, n, f), n);
    fclose(f);
}

static void seed_entry(const char *dir, const char *name,
                       const struct cn_mrec *recs, size_t n)
{
    uint8_t *buf;
    size_t len = entry(recs, n, &buf);
    seed(dir, name, buf, len);
    free(buf);
}

#define SEED(dir, name, ...) \
    seed_entry((dir), (name), RECS(__VA_ARGS__), NRECS(__VA_ARGS__))

/* Writes the fuzz corpus where CN_META_SEEDS says; else does nothing.
 * Entries name topic id uid(1), as fuzz_meta_entry's base image does. */
UNIT_TEST(seeds_write)
{
    const char *dir = getenv("CN_META_SEEDS");
    struct cn_image *img;
    uint8_t *s;
    size_t len;

    if (!dir)
        return;
    SEED(dir, "brokers", reg(4, 9, true), unfence(4, 9), brc(4, 9, 1, 1),
         fence(1, 2), unreg(2, 2));
    SEED(dir, "topic", topic("new", 7), part(7, 0), part(7, 1),
         config(2, "new", "retention.ms", "1"));
    SEED(dir, "change", pchange(1, 0, 2, reps2, 2), pchange(1, 1, -2, NULL, 0),
         part(1, 3));
    SEED(dir, "remove", config(2, "a", "x", NULL), remove_topic(1));
    SEED(dir, "misc", cluster("MkU3OEVBNTcwNTJENDM2Qk"),
         feature("metadata.version", 0), pids(5000), mrec(CN_MREC_NO_OP),
         config(4, "", "k", "v"));
    img = rich_image();
    s = snap(img, &len);
    seed(dir, "snapshot", s, len);
    free(s);
    cn_image_free(img);
}

UNIT_MAIN(entry_roundtrip_every_type, entry_roundtrip_each_type_alone,
          entry_corrupt, entry_encode_refuses, apply_brokers, apply_topics,
          apply_partition_change_epochs, apply_configs,
          apply_features_pids_cluster_noop, apply_idempotent_by_offset,
          apply_entry_atomic, snapshot_roundtrip_byte_identical, image_copy,
          snapshot_deterministic, snapshot_empty_and_corrupt, large_image,
          seeds_write)
