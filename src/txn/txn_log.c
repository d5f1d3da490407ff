/*
 * txn_log.c - transactional id metadata and its __transaction_state
 * record; see txn_log.h for the byte layout.
 */
#include "txn_log.h"

#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "base/rd.h"
#include "proto/gen/transaction_log_key.h"
#include "proto/gen/transaction_log_value.h"

#define KAFKA_STRING_MAX 32767 /* int16 length prefix */

void cn_txn_meta_init(struct cn_txn_meta *m)
{
    memset(m, 0, sizeof *m);
    m->producer_id = -1;
    m->prev_producer_id = -1;
    m->next_producer_id = -1;
    m->producer_epoch = -1;
    m->last_producer_epoch = -1;
    m->state = CN_TXN_EMPTY;
    m->txn_start_ms = -1;
    m->last_update_ms = -1;
}

void cn_txn_meta_fini(struct cn_txn_meta *m)
{
    cn_txn_meta_clear_partitions(m);
    free(m->partitions);
    free(m->transactional_id);
    cn_txn_meta_init(m);
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);

    if (d)
        memcpy(d, s, n);
    return d;
}

int cn_txn_meta_set_id(struct cn_txn_meta *m, const char *id)
{
    char *d = NULL;

    if (id && !(d = dup_str(id)))
        return CN_ENOMEM;
    free(m->transactional_id);
    m->transactional_id = d;
    return 0;
}

static int tp_cmp(const char *topic_a, int32_t part_a, const char *topic_b,
                  int32_t part_b)
{
    int c = strcmp(topic_a, topic_b);

    if (c)
        return c;
    return part_a < part_b ? -1 : part_a > part_b;
}

/* Index of (topic, partition) if present, else where it would go; *found
 * says which. */
static size_t tp_find(const struct cn_txn_meta *m, const char *topic,
                      int32_t partition, bool *found)
{
    size_t lo = 0, hi = m->npartitions;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct cn_txn_tp *tp = &m->partitions[mid];
        int c = tp_cmp(tp->topic, tp->partition, topic, partition);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

int cn_txn_meta_add_partition(struct cn_txn_meta *m, const char *topic,
                              int32_t partition)
{
    bool found;
    size_t at;
    char *t;

    if (!topic || partition < 0)
        return CN_EINVAL;
    at = tp_find(m, topic, partition, &found);
    if (found)
        return 0;
    if (m->npartitions == m->partitions_cap) {
        size_t cap = m->partitions_cap ? m->partitions_cap * 2 : 8;
        struct cn_txn_tp *p;
        if (cap > SIZE_MAX / sizeof *p)
            return CN_ENOMEM;
        p = realloc(m->partitions, cap * sizeof *p);
        if (!p)
            return CN_ENOMEM;
        m->partitions = p;
        m->partitions_cap = cap;
    }
    if (!(t = dup_str(topic)))
        return CN_ENOMEM;
    memmove(&m->partitions[at + 1], &m->partitions[at],
            (m->npartitions - at) * sizeof *m->partitions);
    m->partitions[at].topic = t;
    m->partitions[at].partition = partition;
    m->npartitions++;
    return 0;
}

bool cn_txn_meta_remove_partition(struct cn_txn_meta *m, const char *topic,
                                  int32_t partition)
{
    bool found;
    size_t at;

    if (!topic)
        return false;
    at = tp_find(m, topic, partition, &found);
    if (!found)
        return false;
    free(m->partitions[at].topic);
    memmove(&m->partitions[at], &m->partitions[at + 1],
            (m->npartitions - at - 1) * sizeof *m->partitions);
    m->npartitions--;
    return true;
}

bool cn_txn_meta_has_partition(const struct cn_txn_meta *m,
                               const char *topic, int32_t partition)
{
    bool found = false;

    if (topic)
        tp_find(m, topic, partition, &found);
    return found;
}

void cn_txn_meta_clear_partitions(struct cn_txn_meta *m)
{
    size_t i;

    for (i = 0; i < m->npartitions; i++)
        free(m->partitions[i].topic);
    m->npartitions = 0;
}

int cn_txn_meta_copy(struct cn_txn_meta *dst, const struct cn_txn_meta *src)
{
    struct cn_txn_meta m = *src;
    size_t i;

    /* Start from src's scalars, then give m its own copies of the owned
     * parts. */
    m.transactional_id = NULL;
    m.partitions = NULL;
    m.npartitions = 0;
    m.partitions_cap = 0;
    if (cn_txn_meta_set_id(&m, src->transactional_id))
        goto out_nomem;
    if (src->npartitions) {
        m.partitions = calloc(src->npartitions, sizeof *m.partitions);
        if (!m.partitions)
            goto out_nomem;
        m.partitions_cap = src->npartitions;
        for (i = 0; i < src->npartitions; i++) {
            m.partitions[i].topic = dup_str(src->partitions[i].topic);
            if (!m.partitions[i].topic)
                goto out_nomem;
            m.partitions[i].partition = src->partitions[i].partition;
            m.npartitions++;
        }
    }
    cn_txn_meta_fini(dst);
    *dst = m;
    return 0;

out_nomem:
    cn_txn_meta_fini(&m);
    cn_txn_meta_fini(dst);
    return CN_ENOMEM;
}

static bool str_eq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

bool cn_txn_meta_eq(const struct cn_txn_meta *a, const struct cn_txn_meta *b)
{
    size_t i;

    if (!str_eq(a->transactional_id, b->transactional_id) ||
        a->producer_id != b->producer_id ||
        a->prev_producer_id != b->prev_producer_id ||
        a->next_producer_id != b->next_producer_id ||
        a->producer_epoch != b->producer_epoch ||
        a->last_producer_epoch != b->last_producer_epoch ||
        a->timeout_ms != b->timeout_ms || a->state != b->state ||
        a->txn_start_ms != b->txn_start_ms ||
        a->last_update_ms != b->last_update_ms ||
        a->client_tv != b->client_tv || a->npartitions != b->npartitions)
        return false;
    for (i = 0; i < a->npartitions; i++)
        if (a->partitions[i].partition != b->partitions[i].partition ||
            strcmp(a->partitions[i].topic, b->partitions[i].topic) != 0)
            return false;
    return true;
}

int cn_txn_log_encode_key(struct cn_wr *wr, const char *transactional_id)
{
    struct cn_transaction_log_key k;
    size_t n;

    if (!transactional_id)
        return CN_EINVAL;
    n = strlen(transactional_id);
    if (n > KAFKA_STRING_MAX)
        return CN_EINVAL;
    cn_transaction_log_key_init(&k);
    k.transactional_id = cn_bytes_of(transactional_id, (int32_t)n);
    cn_wr_i16(wr, CN_TXN_LOG_KEY_VERSION);
    cn_transaction_log_key_encode(wr, CN_TXN_LOG_KEY_VERSION, &k);
    return wr->err;
}

/*
 * Fills v's partition array from m's sorted set: one schema entry per
 * run of equal topics, ids pointing into `ids`.  Arrays live in `arena`.
 */
static int group_partitions(const struct cn_txn_meta *m,
                            struct cn_arena *arena,
                            struct cn_transaction_log_value *v)
{
    struct cn_transaction_log_value_partitions_schema *ps;
    int32_t *ids;
    size_t i, ntopics = 0;

    if (m->npartitions > INT32_MAX)
        return CN_EINVAL;
    for (i = 0; i < m->npartitions; i++) {
        if (strlen(m->partitions[i].topic) > KAFKA_STRING_MAX)
            return CN_EINVAL;
        if (i == 0 ||
            strcmp(m->partitions[i].topic, m->partitions[i - 1].topic) != 0)
            ntopics++;
    }
    v->transaction_partitions = NULL;
    v->transaction_partitions_len = 0;
    if (ntopics == 0)
        return 0;
    ps = cn_arena_calloc(arena, ntopics, sizeof *ps);
    ids = cn_arena_calloc(arena, m->npartitions, sizeof *ids);
    if (!ps || !ids)
        return CN_ENOMEM;
    ntopics = 0;
    for (i = 0; i < m->npartitions; i++) {
        const struct cn_txn_tp *tp = &m->partitions[i];
        struct cn_transaction_log_value_partitions_schema *cur;
        if (i == 0 || strcmp(tp->topic, m->partitions[i - 1].topic) != 0) {
            cur = &ps[ntopics++];
            cn_transaction_log_value_partitions_schema_init(cur);
            cur->topic = cn_bytes_str(tp->topic);
            cur->partition_ids = &ids[i];
            cur->partition_ids_len = 0;
        }
        cur = &ps[ntopics - 1];
        ids[i] = tp->partition;
        cur->partition_ids_len++;
    }
    v->transaction_partitions = ps;
    v->transaction_partitions_len = (int32_t)ntopics;
    return 0;
}

int cn_txn_log_encode_value(struct cn_wr *wr, const struct cn_txn_meta *m)
{
    struct cn_transaction_log_value v;
    struct cn_arena arena;
    int err;

    if (!cn_txn_state_valid((int)m->state) || m->state == CN_TXN_DEAD)
        return CN_EINVAL;
    /* Kafka refuses the same: an Empty id has no transaction to list. */
    if (m->state == CN_TXN_EMPTY && m->npartitions)
        return CN_EINVAL;
    if (m->client_tv < 0)
        return CN_EINVAL;

    cn_transaction_log_value_init(&v);
    v.producer_id = m->producer_id;
    v.previous_producer_id = m->prev_producer_id;
    v.next_producer_id = m->next_producer_id;
    v.producer_epoch = m->producer_epoch;
    v.transaction_timeout_ms = m->timeout_ms;
    v.transaction_status = (int8_t)m->state;
    v.transaction_last_update_timestamp_ms = m->last_update_ms;
    v.transaction_start_timestamp_ms = m->txn_start_ms;
    v.client_transaction_version = m->client_tv;

    cn_arena_init(&arena);
    if (m->state == CN_TXN_EMPTY) {
        v.transaction_partitions = NULL;
        v.transaction_partitions_len = -1; /* null, as Kafka writes it */
        err = 0;
    } else {
        err = group_partitions(m, &arena, &v);
    }
    if (!err) {
        cn_wr_i16(wr, CN_TXN_LOG_VALUE_VERSION);
        cn_transaction_log_value_encode(wr, CN_TXN_LOG_VALUE_VERSION, &v);
        err = wr->err;
    }
    cn_arena_fini(&arena);
    return err;
}

int cn_txn_log_encode(const struct cn_txn_meta *m, struct cn_wr *key,
                      struct cn_wr *value, bool *tombstone)
{
    int err = cn_txn_log_encode_key(key, m->transactional_id);

    if (err)
        return err;
    if (m->state == CN_TXN_DEAD) {
        *tombstone = true;
        return 0;
    }
    *tombstone = false;
    return cn_txn_log_encode_value(value, m);
}

/* A NUL-terminated copy of a decoded string; NUL inside is corruption
 * since the id or topic could not round-trip through a C string. */
static int take_str(struct cn_bytes b, char **out)
{
    char *s;

    if (b.len < 0)
        return cn_corrupt("txn log: null string");
    if (b.len > 0 && memchr(b.ptr, 0, (size_t)b.len))
        return cn_corrupt("txn log: NUL inside a string");
    s = malloc((size_t)b.len + 1);
    if (!s)
        return CN_ENOMEM;
    if (b.len > 0)
        memcpy(s, b.ptr, (size_t)b.len);
    s[b.len] = '\0';
    *out = s;
    return 0;
}

static int decode_key(struct cn_bytes key, struct cn_txn_meta *m)
{
    struct cn_transaction_log_key k;
    struct cn_arena arena;
    struct cn_rd rd;
    int16_t version;
    int err;

    if (key.len < 0)
        return cn_corrupt("txn log: null key");
    cn_rd_init(&rd, key.ptr, (size_t)key.len);
    version = cn_rd_i16(&rd);
    if (rd.err)
        return cn_corrupt("txn log: truncated key version");
    if (version != CN_TXN_LOG_KEY_VERSION)
        return cn_corrupt("txn log: unknown key version");
    cn_arena_init(&arena);
    err = cn_transaction_log_key_decode(&rd, &arena, version, &k);
    cn_arena_fini(&arena); /* the key has no arrays; the view is in key */
    if (err)
        return err == CN_ENOMEM ? err : cn_corrupt("txn log: bad key");
    if (cn_rd_left(&rd))
        return cn_corrupt("txn log: trailing bytes after key");
    return take_str(k.transactional_id, &m->transactional_id);
}

static int take_partitions(const struct cn_transaction_log_value *v,
                           struct cn_txn_meta *m)
{
    int32_t i, j;
    int err;

    if (v->transaction_partitions_len < 0)
        return cn_corrupt("txn log: null partitions outside Empty");
    for (i = 0; i < v->transaction_partitions_len; i++) {
        const struct cn_transaction_log_value_partitions_schema *ps =
            &v->transaction_partitions[i];
        char *topic;
        if ((err = take_str(ps->topic, &topic)))
            return err;
        for (j = 0; j < ps->partition_ids_len; j++) {
            if (ps->partition_ids[j] < 0) {
                free(topic);
                return cn_corrupt("txn log: negative partition");
            }
            if ((err = cn_txn_meta_add_partition(m, topic,
                                                 ps->partition_ids[j]))) {
                free(topic);
                return err;
            }
        }
        free(topic);
    }
    return 0;
}

static int decode_value(struct cn_bytes value, struct cn_txn_meta *m)
{
    struct cn_transaction_log_value v;
    struct cn_arena arena;
    struct cn_rd rd;
    int16_t version;
    int err;

    cn_rd_init(&rd, value.ptr, (size_t)value.len);
    version = cn_rd_i16(&rd);
    if (rd.err)
        return cn_corrupt("txn log: truncated value version");
    if (version < CN_TRANSACTION_LOG_VALUE_MIN_VERSION ||
        version > CN_TRANSACTION_LOG_VALUE_MAX_VERSION)
        return cn_corrupt("txn log: unknown value version");
    cn_arena_init(&arena);
    err = cn_transaction_log_value_decode(&rd, &arena, version, &v);
    if (err) {
        err = err == CN_ENOMEM ? err : cn_corrupt("txn log: bad value");
        goto out_arena;
    }
    if (cn_rd_left(&rd)) {
        err = cn_corrupt("txn log: trailing bytes after value");
        goto out_arena;
    }
    if (!cn_txn_state_valid(v.transaction_status)) {
        err = cn_corrupt("txn log: unknown transaction status");
        goto out_arena;
    }
    if (v.client_transaction_version < 0 ||
        v.client_transaction_version > INT8_MAX) {
        err = cn_corrupt("txn log: bad client transaction version");
        goto out_arena;
    }
    m->producer_id = v.producer_id;
    m->prev_producer_id = v.previous_producer_id;
    m->next_producer_id = v.next_producer_id;
    m->producer_epoch = v.producer_epoch;
    m->last_producer_epoch = -1;
    m->timeout_ms = v.transaction_timeout_ms;
    m->state = (enum cn_txn_state)v.transaction_status;
    m->txn_start_ms = v.transaction_start_timestamp_ms;
    m->last_update_ms = v.transaction_last_update_timestamp_ms;
    m->client_tv = (int8_t)v.client_transaction_version;
    /* Kafka reads no partitions for an Empty id, whatever was written. */
    if (m->state != CN_TXN_EMPTY)
        err = take_partitions(&v, m);

out_arena:
    cn_arena_fini(&arena);
    return err;
}

int cn_txn_log_decode(struct cn_bytes key, struct cn_bytes value,
                      struct cn_txn_meta *out, bool *tombstone)
{
    struct cn_txn_meta m;
    int err;

    cn_txn_meta_init(&m);
    if ((err = decode_key(key, &m)))
        goto out_fini;
    if (value.len < 0) {
        m.state = CN_TXN_DEAD;
        *tombstone = true;
        *out = m;
        return 0;
    }
    if ((err = decode_value(value, &m)))
        goto out_fini;
    *tombstone = false;
    *out = m;
    return 0;

out_fini:
    cn_txn_meta_fini(&m);
    return err;
}
