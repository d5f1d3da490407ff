/*
 * test_txn.c - transaction states, transitions, coordinator partition
 * hashing, and the __transaction_state record codec.
 *
 * Hash vectors: valid UTF-8 ids computed with an independent Python
 * String.hashCode (UTF-16 units of str.encode('utf-16-be')); every vector,
 * and all the malformed-UTF-8 ones, confirmed with OpenJDK 17's
 * new String(bytes, UTF_8).hashCode().
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/wr.h"
#include "proto/gen/transaction_log_value.h"
#include "txn/txn_log.h"
#include "txn/txn_state.h"
#include "unit.h"

UNIT_TEST(test_state_ids_and_names)
{
    static const struct {
        int id;
        const char *name;
    } want[] = {
        {0, "Empty"},          {1, "Ongoing"},       {2, "PrepareCommit"},
        {3, "PrepareAbort"},   {4, "CompleteCommit"}, {5, "CompleteAbort"},
        {6, "Dead"},           {7, "PrepareEpochFence"},
    };
    size_t i;

    CHECK_EQ(CN_TXN_EMPTY, 0);
    CHECK_EQ(CN_TXN_ONGOING, 1);
    CHECK_EQ(CN_TXN_PREPARE_COMMIT, 2);
    CHECK_EQ(CN_TXN_PREPARE_ABORT, 3);
    CHECK_EQ(CN_TXN_COMPLETE_COMMIT, 4);
    CHECK_EQ(CN_TXN_COMPLETE_ABORT, 5);
    CHECK_EQ(CN_TXN_DEAD, 6);
    CHECK_EQ(CN_TXN_PREPARE_EPOCH_FENCE, 7);
    for (i = 0; i < sizeof want / sizeof want[0]; i++) {
        CHECK(strcmp(cn_txn_state_name((enum cn_txn_state)want[i].id),
                     want[i].name) == 0);
        CHECK_EQ(cn_txn_state_parse(want[i].name), want[i].id);
    }
    CHECK(strcmp(cn_txn_state_name((enum cn_txn_state)8), "Unknown") == 0);
    CHECK(strcmp(cn_txn_state_name((enum cn_txn_state)-1), "Unknown") == 0);
    CHECK_EQ(cn_txn_state_parse("ongoing"), -1); /* case matters */
    CHECK_EQ(cn_txn_state_parse(""), -1);
    CHECK_EQ(cn_txn_state_parse("Unknown"), -1);
    CHECK_EQ(cn_txn_state_parse(NULL), -1);
    CHECK(cn_txn_state_valid(7));
    CHECK(!cn_txn_state_valid(8));
    CHECK(!cn_txn_state_valid(-1));
}

/*
 * ok[from][to], Kafka 4.x TransactionState.VALID_PREVIOUS_STATES read
 * column by column.  Columns (to): Em On PC PA CC CA De PF.
 */
static const int ok[8][8] = {
    /* from Empty          */ {1, 1, 0, 1, 0, 0, 1, 0},
    /* from Ongoing        */ {0, 1, 1, 1, 0, 0, 0, 1},
    /* from PrepareCommit  */ {0, 0, 0, 0, 1, 0, 0, 0},
    /* from PrepareAbort   */ {0, 0, 0, 0, 0, 1, 0, 0},
    /* from CompleteCommit */ {1, 1, 0, 1, 0, 0, 1, 0},
    /* from CompleteAbort  */ {1, 1, 0, 1, 0, 0, 1, 0},
    /* from Dead           */ {0, 0, 0, 0, 0, 0, 0, 0},
    /* from PrepEpochFence */ {0, 0, 0, 1, 0, 0, 0, 0},
};

UNIT_TEST(test_transition_matrix)
{
    int from, to, n = 0;

    for (from = 0; from < 8; from++)
        for (to = 0; to < 8; to++) {
            bool got = cn_txn_transition_ok((enum cn_txn_state)from,
                                            (enum cn_txn_state)to);
            if (got != (ok[from][to] != 0))
                fprintf(stderr, "  transition %s -> %s: got %d\n",
                        cn_txn_state_name((enum cn_txn_state)from),
                        cn_txn_state_name((enum cn_txn_state)to), got);
            CHECK_EQ(got, ok[from][to]);
            n++;
        }
    CHECK_EQ(n, 64);
    CHECK(!cn_txn_transition_ok((enum cn_txn_state)8, CN_TXN_EMPTY));
    CHECK(!cn_txn_transition_ok(CN_TXN_EMPTY, (enum cn_txn_state)8));
    CHECK(!cn_txn_transition_ok((enum cn_txn_state)-1, CN_TXN_ONGOING));
}

UNIT_TEST(test_expirable)
{
    static const int want[8] = {1, 0, 0, 0, 1, 1, 0, 0};
    int s;

    for (s = 0; s < 8; s++)
        CHECK_EQ(cn_txn_state_expirable((enum cn_txn_state)s), want[s]);
}

struct hash_vec {
    const char *bytes; /* UTF-8, possibly malformed */
    size_t len;
    int32_t hash;      /* Java String.hashCode */
    int32_t part50;    /* abs(hash) % 50, abs(INT_MIN) = 0 */
};

#define V(s, h, p) {s, sizeof(s) - 1, h, p}

static const struct hash_vec valid_vecs[] = {
    V("my-txn", -1061187895, 45),
    V("", 0, 0),
    V("a", 97, 47),
    V("polygenelubricants", INT32_MIN, 0), /* hash is INT_MIN */
    V("transactional-id-42", -1774587604, 4),
    V("zzzzzzzz", -1910022912, 12),
    V("\xe4\xba\x8b\xe5\x8a\xa1-1", 619337114, 14), /* "事务-1" */
    V("caf\xc3\xa9", 3045921, 21),                  /* "café" */
    V("tx-\xf0\x9f\x98\x80", 112519500, 0),         /* "tx-😀" */
    V("\xf0\x9f\x98\x80", 1772899, 49),             /* "😀": D83D DE00 */
    V("\xc3\xbf", 255, 5),                          /* "ÿ" */
    V("\xce\xa9-txn", 866795078, 28),               /* "Ω-txn" */
    V("\xdf\xbf", 2047, 47),                        /* U+07FF */
    V("\xed\x9f\xbf", 55295, 45),                   /* U+D7FF */
    V("\xef\xbf\xbf", 65535, 35),                   /* U+FFFF */
    V("\xf4\x8f\xbf\xbf", 1803232, 32),             /* U+10FFFF */
};

/* Malformed UTF-8: each U+FFFD is 65533 in the hash. */
static const struct hash_vec bad_vecs[] = {
    V("\xff", 65533, 33),
    V("a\x80" "b", 2124838, 38),
    V("\xc0\xaf", 2097056, 6),        /* C0: two replacements */
    V("\xbf\xbf", 2097056, 6),        /* lone continuations */
    V("\xc3", 65533, 33),             /* cut off */
    V("\xc2" "A", 2031588, 38),
    V("\xe2\x82", 65533, 33),         /* cut-off prefix: one */
    V("\xe2\x82" "a", 2031620, 20),
    V("\xe0\x80\x80", 65074269, 19),  /* overlong: three */
    V("\xe0\x80" "A", 65008801, 1),
    V("\xe0\xa0", 65533, 33),
    V("\xe0\xa0" "A", 2031588, 38),
    V("\xed\xa0\x80", 65533, 33),     /* surrogate: Java makes one */
    V("\xed\xa0" "A", 2031588, 38),   /* Java: one for ED A0 */
    V("\xed\xa0", 65533, 33),
    V("\xed\xbf", 65533, 33),
    V("\xed\xbf\xbf" "a", 2031620, 20),
    V("\xf0\x9f\x98", 65533, 33),
    V("\xf0\x9f\x98" "a", 2031620, 20),
    V("\xf0\x9f" "A", 2031588, 38),
    V("\xf0\x90\x80" "A", 2031588, 38),
    V("\xf0" "A", 2031588, 38),
    V("\xf0\x9f", 65533, 33),
    V("\xf0\xa0", 65533, 33),
    V("\xf0", 65533, 33),
    V("\xf4", 65533, 33),
    V("\xf4\x8f", 65533, 33),
    V("\xf0\x80\x80\x80", 2017367872, 22), /* overlong: four */
    V("\xf4\x90\x80\x80", 2017367872, 22), /* > U+10FFFF: four */
    V("\xf4\x90\x80" "A", 2017302404, 4),
    V("\xf5\x80\x80\x80", 2017367872, 22),
    V("\xf8\x88\x80\x80", 2017367872, 22),
    V("\x80\x80\x80\x80", 2017367872, 22),
    V("\x8f", 65533, 33),
};

static void check_vecs(const struct hash_vec *v, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        int32_t h = cn_txn_java_hash((const uint8_t *)v[i].bytes, v[i].len);
        int32_t p = cn_txn_partition_for((const uint8_t *)v[i].bytes,
                                         v[i].len, 50);
        if (h != v[i].hash || p != v[i].part50)
            fprintf(stderr, "  vector %zu (%zu bytes)\n", i, v[i].len);
        CHECK_EQ(h, v[i].hash);
        CHECK_EQ(p, v[i].part50);
    }
}

UNIT_TEST(test_partition_for_valid_utf8)
{
    check_vecs(valid_vecs, sizeof valid_vecs / sizeof valid_vecs[0]);
}

UNIT_TEST(test_partition_for_malformed_utf8)
{
    check_vecs(bad_vecs, sizeof bad_vecs / sizeof bad_vecs[0]);
}

UNIT_TEST(test_partition_for_edges)
{
    const uint8_t *id = (const uint8_t *)"my-txn";

    CHECK_EQ(cn_txn_partition_for(id, 6, 0), -1);
    CHECK_EQ(cn_txn_partition_for(id, 6, -3), -1);
    CHECK_EQ(cn_txn_partition_for(id, 6, 1), 0);
    /* 1061187895 % 7 */
    CHECK_EQ(cn_txn_partition_for(id, 6, 7), 1061187895 % 7);
    CHECK_EQ(cn_txn_partition_for((const uint8_t *)"polygenelubricants",
                                  18, 7), 0);
    CHECK_EQ(cn_txn_partition_for(NULL, 0, 50), 0);
}

UNIT_TEST(test_partition_set)
{
    struct cn_txn_meta m;

    cn_txn_meta_init(&m);
    CHECK_EQ(cn_txn_meta_add_partition(&m, "b", 2), 0);
    CHECK_EQ(cn_txn_meta_add_partition(&m, "a", 5), 0);
    CHECK_EQ(cn_txn_meta_add_partition(&m, "b", 0), 0);
    CHECK_EQ(cn_txn_meta_add_partition(&m, "b", 2), 0); /* duplicate */
    CHECK_EQ(cn_txn_meta_add_partition(&m, "a", 10), 0);
    CHECK_EQ(cn_txn_meta_add_partition(&m, NULL, 1), CN_EINVAL);
    CHECK_EQ(cn_txn_meta_add_partition(&m, "a", -1), CN_EINVAL);
    CHECK_EQ(m.npartitions, 4);
    /* Sorted by topic, then partition number (not text). */
    CHECK(strcmp(m.partitions[0].topic, "a") == 0);
    CHECK_EQ(m.partitions[0].partition, 5);
    CHECK_EQ(m.partitions[1].partition, 10);
    CHECK(strcmp(m.partitions[2].topic, "b") == 0);
    CHECK_EQ(m.partitions[2].partition, 0);
    CHECK_EQ(m.partitions[3].partition, 2);
    CHECK(cn_txn_meta_has_partition(&m, "a", 10));
    CHECK(!cn_txn_meta_has_partition(&m, "a", 2));
    CHECK(!cn_txn_meta_has_partition(&m, "c", 0));
    CHECK(!cn_txn_meta_has_partition(&m, NULL, 0));
    CHECK(cn_txn_meta_remove_partition(&m, "a", 5));
    CHECK(!cn_txn_meta_remove_partition(&m, "a", 5));
    CHECK(!cn_txn_meta_remove_partition(&m, NULL, 5));
    CHECK_EQ(m.npartitions, 3);
    CHECK_EQ(m.partitions[0].partition, 10);
    cn_txn_meta_clear_partitions(&m);
    CHECK_EQ(m.npartitions, 0);
    CHECK(!cn_txn_meta_has_partition(&m, "b", 2));
    /* Many adds grow the array and stay sorted. */
    for (int i = 99; i >= 0; i--)
        CHECK_EQ(cn_txn_meta_add_partition(&m, i % 2 ? "odd" : "even", i),
                 0);
    CHECK_EQ(m.npartitions, 100);
    for (size_t i = 1; i < m.npartitions; i++) {
        int c = strcmp(m.partitions[i - 1].topic, m.partitions[i].topic);
        CHECK(c < 0 || (c == 0 && m.partitions[i - 1].partition <
                                      m.partitions[i].partition));
    }
    cn_txn_meta_fini(&m);
    CHECK(m.partitions == NULL && m.npartitions == 0);
}

/* A meta with every field set; partitions across three topics unless the
 * state is Empty. */
static void fill_meta(struct cn_txn_meta *m, enum cn_txn_state s)
{
    cn_txn_meta_init(m);
    CHECK_EQ(cn_txn_meta_set_id(m, "tx-\xf0\x9f\x98\x80-app"), 0);
    m->producer_id = 4000 + s;
    m->prev_producer_id = s % 2 ? 3999 : -1;
    m->next_producer_id = s == CN_TXN_PREPARE_EPOCH_FENCE ? 4100 : -1;
    m->producer_epoch = (int16_t)(7 + s);
    m->last_producer_epoch = -1; /* not stored */
    m->timeout_ms = 60000;
    m->state = s;
    m->txn_start_ms = s == CN_TXN_EMPTY ? -1 : 1700000000000LL + s;
    m->last_update_ms = 1700000000500LL + s;
    m->client_tv = (int8_t)(s % 3);
    if (s != CN_TXN_EMPTY) {
        CHECK_EQ(cn_txn_meta_add_partition(m, "orders", 3), 0);
        CHECK_EQ(cn_txn_meta_add_partition(m, "orders", 0), 0);
        CHECK_EQ(cn_txn_meta_add_partition(m, "__consumer_offsets", 17), 0);
        CHECK_EQ(cn_txn_meta_add_partition(m, "\xe4\xba\x8b", 1), 0);
        CHECK_EQ(cn_txn_meta_add_partition(m, "payments", 11), 0);
    }
}

static struct cn_bytes wr_bytes(const struct cn_wr *wr)
{
    return cn_bytes_of(wr->buf, (int32_t)wr->len);
}

UNIT_TEST(test_roundtrip_every_state)
{
    int s;

    for (s = 0; s < CN_TXN_NSTATES; s++) {
        struct cn_txn_meta m, back;
        struct cn_wr k, v;
        bool tomb = false;

        fill_meta(&m, (enum cn_txn_state)s);
        cn_wr_init(&k, 0);
        cn_wr_init(&v, 0);
        CHECK_EQ(cn_txn_log_encode(&m, &k, &v, &tomb), 0);
        CHECK_EQ(tomb, s == CN_TXN_DEAD);
        CHECK(k.len > 0);
        CHECK_EQ(v.len == 0, s == CN_TXN_DEAD);
        CHECK_EQ(cn_txn_log_decode(wr_bytes(&k),
                                   tomb ? CN_BYTES_NULL : wr_bytes(&v),
                                   &back, &tomb),
                 0);
        CHECK_EQ(tomb, s == CN_TXN_DEAD);
        if (s == CN_TXN_DEAD) {
            CHECK(strcmp(back.transactional_id, m.transactional_id) == 0);
            CHECK_EQ(back.state, CN_TXN_DEAD);
            CHECK_EQ(back.producer_id, -1);
            CHECK_EQ(back.npartitions, 0);
        } else {
            if (!cn_txn_meta_eq(&m, &back))
                fprintf(stderr, "  state %s did not round-trip\n",
                        cn_txn_state_name((enum cn_txn_state)s));
            CHECK(cn_txn_meta_eq(&m, &back));
            CHECK_EQ(back.npartitions, s == CN_TXN_EMPTY ? 0 : 5);
        }
        cn_txn_meta_fini(&back);
        cn_txn_meta_fini(&m);
        cn_wr_fini(&k);
        cn_wr_fini(&v);
    }
}

UNIT_TEST(test_copy_and_eq)
{
    struct cn_txn_meta a, b;

    fill_meta(&a, CN_TXN_ONGOING);
    cn_txn_meta_init(&b);
    CHECK(!cn_txn_meta_eq(&a, &b));
    CHECK_EQ(cn_txn_meta_copy(&b, &a), 0);
    CHECK(cn_txn_meta_eq(&a, &b));
    CHECK(b.transactional_id != a.transactional_id);
    CHECK(b.partitions[0].topic != a.partitions[0].topic);
    CHECK(cn_txn_meta_remove_partition(&b, "orders", 3));
    CHECK(!cn_txn_meta_eq(&a, &b));
    CHECK_EQ(cn_txn_meta_add_partition(&b, "orders", 3), 0);
    CHECK(cn_txn_meta_eq(&a, &b));
    b.last_producer_epoch = 3;
    CHECK(!cn_txn_meta_eq(&a, &b));
    /* Copy over a meta that already owns things. */
    CHECK_EQ(cn_txn_meta_copy(&b, &a), 0);
    CHECK(cn_txn_meta_eq(&a, &b));
    cn_txn_meta_fini(&a);
    cn_txn_meta_fini(&b);
}

UNIT_TEST(test_key_bytes)
{
    static const uint8_t want[] = {0x00, 0x00, 0x00, 0x06, 'm', 'y',
                                   '-',  't',  'x',  'n'};
    struct cn_wr k;
    char *big;

    cn_wr_init(&k, 0);
    CHECK_EQ(cn_txn_log_encode_key(&k, "my-txn"), 0);
    CHECK_EQ(k.len, sizeof want);
    CHECK(memcmp(k.buf, want, sizeof want) == 0);
    cn_wr_reset(&k);
    CHECK_EQ(cn_txn_log_encode_key(&k, NULL), CN_EINVAL);
    big = malloc(32769);
    memset(big, 'x', 32768);
    big[32768] = '\0';
    CHECK_EQ(cn_txn_log_encode_key(&k, big), CN_EINVAL);
    big[32767] = '\0'; /* the longest a Kafka string can be */
    CHECK_EQ(cn_txn_log_encode_key(&k, big), 0);
    free(big);
    cn_wr_fini(&k);
}

/* Ongoing, pid 1000, epoch 3, timeout 60000, {t-0, t-2}, updated at 5,
 * started at 4, TV2: version 1 bytes, written out by hand. */
static const uint8_t value_v1[] = {
    0x00, 0x01,                                     /* version 1 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, /* ProducerId */
    0x00, 0x03,                                     /* ProducerEpoch */
    0x00, 0x00, 0xea, 0x60,                         /* TimeoutMs */
    0x01,                                           /* Ongoing */
    0x02,                                           /* 1 topic */
    0x02, 't',                                      /* "t" */
    0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, /* [0, 2] */
    0x00,                                           /* topic tags */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, /* LastUpdate */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, /* Start */
    0x01, 0x02, 0x02, 0x00, 0x02,                   /* tag 2: TV 2 */
};

UNIT_TEST(test_value_bytes)
{
    struct cn_txn_meta m, back;
    struct cn_wr v;
    bool tomb;

    cn_txn_meta_init(&m);
    CHECK_EQ(cn_txn_meta_set_id(&m, "x"), 0);
    m.producer_id = 1000;
    m.producer_epoch = 3;
    m.timeout_ms = 60000;
    m.state = CN_TXN_ONGOING;
    m.last_update_ms = 5;
    m.txn_start_ms = 4;
    m.client_tv = 2;
    CHECK_EQ(cn_txn_meta_add_partition(&m, "t", 2), 0);
    CHECK_EQ(cn_txn_meta_add_partition(&m, "t", 0), 0);
    cn_wr_init(&v, 0);
    CHECK_EQ(cn_txn_log_encode_value(&v, &m), 0);
    CHECK_EQ(v.len, sizeof value_v1);
    CHECK(v.len == sizeof value_v1 &&
          memcmp(v.buf, value_v1, sizeof value_v1) == 0);
    CHECK_EQ(cn_txn_log_decode(cn_bytes_of("\0\0\0\1x", 5),
                               cn_bytes_of(value_v1, sizeof value_v1), &back,
                               &tomb),
             0);
    CHECK(!tomb);
    CHECK(cn_txn_meta_eq(&m, &back));
    cn_txn_meta_fini(&back);
    cn_txn_meta_fini(&m);
    cn_wr_fini(&v);
}

/* An Empty id as version 0 writes it (Kafka before TV2): null partitions,
 * no tagged fields. */
static const uint8_t value_v0_empty[] = {
    0x00, 0x00,                                     /* version 0 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, /* ProducerId 42 */
    0x00, 0x00,                                     /* ProducerEpoch 0 */
    0x00, 0x00, 0x27, 0x10,                         /* TimeoutMs 10000 */
    0x00,                                           /* Empty */
    0xff, 0xff, 0xff, 0xff,                         /* partitions null */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x09, /* LastUpdate */
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* Start -1 */
};

UNIT_TEST(test_value_v0)
{
    struct cn_txn_meta m;
    bool tomb = true;

    CHECK_EQ(cn_txn_log_decode(cn_bytes_of("\0\0\0\2id", 6),
                               cn_bytes_of(value_v0_empty,
                                           sizeof value_v0_empty),
                               &m, &tomb),
             0);
    CHECK(!tomb);
    CHECK(strcmp(m.transactional_id, "id") == 0);
    CHECK_EQ(m.producer_id, 42);
    CHECK_EQ(m.producer_epoch, 0);
    CHECK_EQ(m.timeout_ms, 10000);
    CHECK_EQ(m.state, CN_TXN_EMPTY);
    CHECK_EQ(m.last_update_ms, 9);
    CHECK_EQ(m.txn_start_ms, -1);
    CHECK_EQ(m.prev_producer_id, -1);
    CHECK_EQ(m.next_producer_id, -1);
    CHECK_EQ(m.client_tv, 0);
    CHECK_EQ(m.last_producer_epoch, -1);
    cn_txn_meta_fini(&m);
}

/* Encodes a hand-made TransactionLogValue with the generated encoder. */
static void raw_value(struct cn_wr *wr, int16_t version,
                      const struct cn_transaction_log_value *v)
{
    cn_wr_reset(wr);
    cn_wr_i16(wr, version);
    cn_transaction_log_value_encode(wr, version, v);
}

UNIT_TEST(test_value_semantics)
{
    struct cn_transaction_log_value_partitions_schema ps[2];
    int32_t ids_a[] = {4, 1, 4}, ids_b[] = {2};
    struct cn_transaction_log_value v;
    struct cn_bytes key = cn_bytes_of("\0\0\0\1k", 5);
    struct cn_txn_meta m;
    struct cn_wr wr;
    bool tomb;
    int ver;

    cn_wr_init(&wr, 0);
    cn_transaction_log_value_init(&v);
    memset(ps, 0, sizeof ps);
    ps[0].topic = cn_bytes_str("a");
    ps[0].partition_ids = ids_a;
    ps[0].partition_ids_len = 3;
    ps[1].topic = cn_bytes_str("a"); /* same topic twice: merged */
    ps[1].partition_ids = ids_b;
    ps[1].partition_ids_len = 1;
    v.transaction_partitions = ps;
    v.transaction_partitions_len = 2;
    v.transaction_status = CN_TXN_PREPARE_COMMIT;
    for (ver = 0; ver <= 1; ver++) {
        raw_value(&wr, (int16_t)ver, &v);
        CHECK_EQ(cn_txn_log_decode(key, wr_bytes(&wr), &m, &tomb), 0);
        CHECK_EQ(m.npartitions, 3); /* a-1, a-2, a-4 */
        CHECK(cn_txn_meta_has_partition(&m, "a", 1));
        CHECK(cn_txn_meta_has_partition(&m, "a", 2));
        CHECK(cn_txn_meta_has_partition(&m, "a", 4));
        cn_txn_meta_fini(&m);
    }

    /* Empty: whatever partitions were written are ignored, as Kafka. */
    v.transaction_status = CN_TXN_EMPTY;
    raw_value(&wr, 1, &v);
    CHECK_EQ(cn_txn_log_decode(key, wr_bytes(&wr), &m, &tomb), 0);
    CHECK_EQ(m.npartitions, 0);
    /* ...but we never write them. */
    CHECK_EQ(cn_txn_meta_add_partition(&m, "a", 1), 0);
    CHECK_EQ(cn_txn_log_encode_value(&wr, &m), CN_EINVAL);
    m.state = CN_TXN_DEAD;
    CHECK_EQ(cn_txn_log_encode_value(&wr, &m), CN_EINVAL);
    m.state = (enum cn_txn_state)9;
    CHECK_EQ(cn_txn_log_encode_value(&wr, &m), CN_EINVAL);
    m.state = CN_TXN_ONGOING;
    m.client_tv = -1;
    CHECK_EQ(cn_txn_log_encode_value(&wr, &m), CN_EINVAL);
    cn_txn_meta_fini(&m);

    /* Ongoing with no partitions yet (TV2 abort from Empty) is fine;
     * a null array outside Empty is not. */
    v.transaction_status = CN_TXN_PREPARE_ABORT;
    v.transaction_partitions_len = 0;
    raw_value(&wr, 1, &v);
    CHECK_EQ(cn_txn_log_decode(key, wr_bytes(&wr), &m, &tomb), 0);
    CHECK_EQ(m.npartitions, 0);
    cn_txn_meta_fini(&m);
    v.transaction_partitions_len = -1;
    raw_value(&wr, 1, &v);
    cn_txn_meta_init(&m);
    CHECK_EQ(cn_txn_log_decode(key, wr_bytes(&wr), &m, &tomb), CN_ECORRUPT);
    CHECK(m.transactional_id == NULL); /* untouched on failure */

    /* Status bytes outside the enum. */
    v.transaction_partitions_len = 0;
    v.transaction_status = 8;
    raw_value(&wr, 1, &v);
    CHECK_EQ(cn_txn_log_decode(key, wr_bytes(&wr), &m, &tomb), CN_ECORRUPT);
    v.transaction_status = -1;
    raw_value(&wr, 0, &v);
    CHECK_EQ(cn_txn_log_decode(key, wr_bytes(&wr), &m, &tomb), CN_ECORRUPT);

    /* Negative partition id, NUL inside a topic. */
    v.transaction_status = CN_TXN_ONGOING;
    v.transaction_partitions_len = 1;
    ids_a[1] = -1;
    raw_value(&wr, 1, &v);
    CHECK_EQ(cn_txn_log_decode(key, wr_bytes(&wr), &m, &tomb), CN_ECORRUPT);
    ids_a[1] = 1;
    ps[0].topic = cn_bytes_of("a\0b", 3);
    raw_value(&wr, 1, &v);
    CHECK_EQ(cn_txn_log_decode(key, wr_bytes(&wr), &m, &tomb), CN_ECORRUPT);
    ps[0].topic = cn_bytes_str("a");

    /* Client transaction version beyond int8. */
    v.client_transaction_version = 300;
    raw_value(&wr, 1, &v);
    CHECK_EQ(cn_txn_log_decode(key, wr_bytes(&wr), &m, &tomb), CN_ECORRUPT);
    v.client_transaction_version = 2;
    raw_value(&wr, 1, &v);
    CHECK_EQ(cn_txn_log_decode(key, wr_bytes(&wr), &m, &tomb), 0);
    CHECK_EQ(m.client_tv, 2);
    cn_txn_meta_fini(&m);
    cn_wr_fini(&wr);
}

UNIT_TEST(test_tombstone)
{
    struct cn_txn_meta m, back;
    struct cn_wr k, v;
    bool tomb = false;

    fill_meta(&m, CN_TXN_COMPLETE_COMMIT);
    m.state = CN_TXN_DEAD;
    cn_wr_init(&k, 0);
    cn_wr_init(&v, 0);
    CHECK_EQ(cn_txn_log_encode(&m, &k, &v, &tomb), 0);
    CHECK(tomb);
    CHECK_EQ(v.len, 0);
    CHECK_EQ(cn_txn_log_decode(wr_bytes(&k), CN_BYTES_NULL, &back, &tomb), 0);
    CHECK(tomb);
    CHECK(strcmp(back.transactional_id, m.transactional_id) == 0);
    CHECK_EQ(back.state, CN_TXN_DEAD);
    cn_txn_meta_fini(&back);
    /* An empty (not null) value is a truncated record, not a tombstone. */
    CHECK_EQ(cn_txn_log_decode(wr_bytes(&k), cn_bytes_of("", 0), &back,
                               &tomb),
             CN_ECORRUPT);
    cn_txn_meta_fini(&m);
    cn_wr_fini(&k);
    cn_wr_fini(&v);
}

UNIT_TEST(test_reject_bad_keys)
{
    static const struct {
        const char *b;
        int32_t len;
    } bad[] = {
        {"", 0},                   /* no version */
        {"\0", 1},                 /* half a version */
        {"\0\1\0\1k", 5},          /* key version 1 */
        {"\xff\xff\0\1k", 5},      /* key version -1 */
        {"\0\0", 2},               /* no string */
        {"\0\0\0", 3},             /* half a length */
        {"\0\0\0\2k", 5},          /* string cut short */
        {"\0\0\xff\xff", 4},       /* null id */
        {"\0\0\xff\xfe", 4},       /* length -2 */
        {"\0\0\0\1kX", 6},         /* trailing byte */
        {"\0\0\0\3k\0k", 7},       /* NUL inside the id */
    };
    struct cn_txn_meta m;
    bool tomb;
    size_t i;

    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int err = cn_txn_log_decode(cn_bytes_of(bad[i].b, bad[i].len),
                                    CN_BYTES_NULL, &m, &tomb);
        if (err != CN_ECORRUPT)
            fprintf(stderr, "  bad key %zu: %d\n", i, err);
        CHECK_EQ(err, CN_ECORRUPT);
    }
    CHECK_EQ(cn_txn_log_decode(CN_BYTES_NULL, CN_BYTES_NULL, &m, &tomb),
             CN_ECORRUPT);
    /* The empty id is a valid (if odd) key. */
    CHECK_EQ(cn_txn_log_decode(cn_bytes_of("\0\0\0\0", 4), CN_BYTES_NULL, &m,
                               &tomb),
             0);
    CHECK(strcmp(m.transactional_id, "") == 0);
    cn_txn_meta_fini(&m);
}

UNIT_TEST(test_reject_truncated_values)
{
    struct cn_bytes key = cn_bytes_of("\0\0\0\1k", 5);
    uint8_t buf[sizeof value_v1 + 1];
    struct cn_txn_meta m;
    bool tomb;
    size_t n;

    /* Every proper prefix of a valid value is rejected. */
    for (n = 0; n < sizeof value_v1; n++) {
        int err = cn_txn_log_decode(key, cn_bytes_of(value_v1, (int32_t)n),
                                    &m, &tomb);
        if (err != CN_ECORRUPT)
            fprintf(stderr, "  v1 prefix of %zu bytes: %d\n", n, err);
        CHECK_EQ(err, CN_ECORRUPT);
    }
    for (n = 0; n < sizeof value_v0_empty; n++)
        CHECK_EQ(cn_txn_log_decode(key,
                                   cn_bytes_of(value_v0_empty, (int32_t)n),
                                   &m, &tomb),
                 CN_ECORRUPT);
    /* One byte too many. */
    memcpy(buf, value_v1, sizeof value_v1);
    buf[sizeof value_v1] = 0;
    CHECK_EQ(cn_txn_log_decode(key, cn_bytes_of(buf, sizeof buf), &m, &tomb),
             CN_ECORRUPT);
    /* Unknown value versions. */
    memcpy(buf, value_v1, sizeof value_v1);
    buf[1] = 2;
    CHECK_EQ(cn_txn_log_decode(key, cn_bytes_of(buf, sizeof value_v1), &m,
                               &tomb),
             CN_ECORRUPT);
    buf[0] = 0xff;
    buf[1] = 0xff;
    CHECK_EQ(cn_txn_log_decode(key, cn_bytes_of(buf, sizeof value_v1), &m,
                               &tomb),
             CN_ECORRUPT);
    /* A huge array count must fail cleanly, not allocate. */
    memcpy(buf, value_v1, sizeof value_v1);
    buf[17] = 0xff; /* uvarint continues into the topic bytes */
    CHECK_EQ(cn_txn_log_decode(key, cn_bytes_of(buf, sizeof value_v1), &m,
                               &tomb),
             CN_ECORRUPT);
}

/* Deterministic pseudo-random bytes (xorshift), seed printed on failure. */
static uint32_t rnd_state;

static uint32_t rnd(void)
{
    rnd_state ^= rnd_state << 13;
    rnd_state ^= rnd_state >> 17;
    rnd_state ^= rnd_state << 5;
    return rnd_state;
}

UNIT_TEST(test_garbage_and_mutations)
{
    struct cn_bytes key = cn_bytes_of("\0\0\0\1k", 5);
    uint8_t buf[96];
    int i, ok_count = 0;

    rnd_state = 0x7a5e1u;
    for (i = 0; i < 20000; i++) {
        struct cn_txn_meta m;
        bool tomb;
        size_t n;
        int err;
        uint32_t seed = rnd_state;

        if (i % 2) {
            /* Mutate one or two bytes of a valid value. */
            n = sizeof value_v1;
            memcpy(buf, value_v1, n);
            buf[rnd() % n] = (uint8_t)rnd();
            if (rnd() % 2)
                buf[rnd() % n] = (uint8_t)rnd();
        } else {
            n = rnd() % sizeof buf;
            for (size_t j = 0; j < n; j++)
                buf[j] = (uint8_t)rnd();
        }
        err = cn_txn_log_decode(key, cn_bytes_of(buf, (int32_t)n), &m, &tomb);
        if (err == 0) {
            /* Whatever decodes must survive a round trip. */
            struct cn_txn_meta back;
            struct cn_wr k, v;
            bool t2;
            ok_count++;
            cn_wr_init(&k, 0);
            cn_wr_init(&v, 0);
            CHECK_EQ(cn_txn_log_encode(&m, &k, &v, &t2), 0);
            CHECK_EQ(cn_txn_log_decode(wr_bytes(&k),
                                       t2 ? CN_BYTES_NULL : wr_bytes(&v),
                                       &back, &t2),
                     0);
            if (m.state != CN_TXN_DEAD && !cn_txn_meta_eq(&m, &back)) {
                fprintf(stderr, "  round trip failed, seed %u\n", seed);
                CHECK(0);
            }
            cn_txn_meta_fini(&back);
            cn_txn_meta_fini(&m);
            cn_wr_fini(&k);
            cn_wr_fini(&v);
        } else if (err != CN_ECORRUPT) {
            fprintf(stderr, "  seed %u: error %d\n", seed, err);
            CHECK_EQ(err, CN_ECORRUPT);
        }
    }
    CHECK(ok_count > 0); /* some mutations (timestamps, ids) still decode */
}

UNIT_MAIN(test_state_ids_and_names, test_transition_matrix, test_expirable,
          test_partition_for_valid_utf8, test_partition_for_malformed_utf8,
          test_partition_for_edges, test_partition_set,
          test_roundtrip_every_state, test_copy_and_eq, test_key_bytes,
          test_value_bytes, test_value_v0, test_value_semantics,
          test_tombstone, test_reject_bad_keys, test_reject_truncated_values,
          test_garbage_and_mutations)
