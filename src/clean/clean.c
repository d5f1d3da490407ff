/*
 * clean.c - the cleaner's record-retention rules (see clean.h), after
 * Kafka's LogCleaner.scala: CleanedTransactionMetadata, buildOffsetMap,
 * checkBatchRetention and shouldRetainRecord.
 */
#include "clean/clean.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "proto/compress.h"

/* ---- scheduling bounds ----------------------------------------------- */

int64_t cn_clean_first_uncleanable(const struct cn_clean_seg *segs, size_t n,
                                   int64_t first_dirty, int64_t lso,
                                   int64_t now_ms, int64_t min_lag_ms)
{
    if (n == 0)
        return first_dirty;
    int64_t bound = segs[n - 1].base_offset; /* the active segment */
    if (lso < bound)
        bound = lso;
    for (size_t i = 0; i + 1 < n && min_lag_ms > 0; i++) {
        /* Segments wholly below the dirty point are already clean. */
        if (segs[i + 1].base_offset <= first_dirty)
            continue;
        if (segs[i].max_timestamp > now_ms - min_lag_ms) {
            if (segs[i].base_offset < bound)
                bound = segs[i].base_offset;
            break;
        }
    }
    return bound;
}

double cn_clean_dirty_ratio(const struct cn_clean_seg *segs, size_t n,
                            int64_t first_dirty, int64_t uncleanable)
{
    int64_t clean = 0, dirty = 0;
    for (size_t i = 0; i < n; i++) {
        if (segs[i].base_offset >= uncleanable)
            break;
        bool below_dirty = i + 1 < n && segs[i + 1].base_offset <= first_dirty;
        if (below_dirty)
            clean += segs[i].bytes;
        else
            dirty += segs[i].bytes;
    }
    return clean + dirty > 0 ? (double)dirty / (double)(clean + dirty) : 0.0;
}

/* ---- a small table keyed by producer id ------------------------------- */

struct pid_slot {
    int64_t pid; /* -1 empty */
    /* tracker state */
    bool aborted_ongoing;      /* an aborted txn of pid has begun */
    bool aborted_observed;     /* a batch of it was read in this pass */
    struct cn_clean_aborted aborted;
    bool committed_ongoing;    /* a batch of a non-aborted txn was read */
    /* pass state */
    int16_t epoch;
    int64_t last_data_offset;
};

struct pid_table {
    struct pid_slot *slots;
    size_t cap, used; /* cap a power of two */
};

static size_t pid_hash(int64_t pid, size_t cap)
{
    uint64_t x = (uint64_t)pid * 0x9e3779b97f4a7c15ull;
    return (size_t)(x >> 17) & (cap - 1);
}

static void pid_table_fini(struct pid_table *pt)
{
    free(pt->slots);
    pt->slots = NULL;
    pt->cap = pt->used = 0;
}

static struct pid_slot *pid_find(const struct pid_table *pt, int64_t pid)
{
    if (pt->cap == 0)
        return NULL;
    for (size_t i = pid_hash(pid, pt->cap);; i = (i + 1) & (pt->cap - 1)) {
        if (pt->slots[i].pid == pid)
            return &pt->slots[i];
        if (pt->slots[i].pid == -1)
            return NULL;
    }
}

static int pid_grow(struct pid_table *pt)
{
    size_t ncap = pt->cap ? pt->cap * 2 : 16;
    struct pid_slot *ns = malloc(ncap * sizeof *ns);
    if (!ns)
        return CN_ENOMEM;
    for (size_t i = 0; i < ncap; i++)
        ns[i].pid = -1;
    for (size_t j = 0; j < pt->cap; j++) {
        if (pt->slots[j].pid == -1)
            continue;
        size_t i = pid_hash(pt->slots[j].pid, ncap);
        while (ns[i].pid != -1)
            i = (i + 1) & (ncap - 1);
        ns[i] = pt->slots[j];
    }
    free(pt->slots);
    pt->slots = ns;
    pt->cap = ncap;
    return 0;
}

/* Finds or adds pid; NULL only when out of memory. */
static struct pid_slot *pid_get(struct pid_table *pt, int64_t pid)
{
    struct pid_slot *s = pid_find(pt, pid);
    if (s)
        return s;
    if ((pt->used + 1) * 2 > pt->cap && pid_grow(pt))
        return NULL;
    size_t i = pid_hash(pid, pt->cap);
    while (pt->slots[i].pid != -1)
        i = (i + 1) & (pt->cap - 1);
    s = &pt->slots[i];
    memset(s, 0, sizeof *s);
    s->pid = pid;
    s->last_data_offset = -1;
    pt->used++;
    return s;
}

/* ---- transaction tracker ---------------------------------------------- */

struct cn_clean_txns {
    struct cn_clean_aborted *aborted; /* queue by first_offset */
    size_t n, cap, head;
    struct pid_table pids;
    int err; /* CN_ENOMEM once a producer could not be tracked */
};

int cn_clean_txns_new(struct cn_clean_txns **out)
{
    struct cn_clean_txns *t = calloc(1, sizeof *t);
    if (!t)
        return CN_ENOMEM;
    *out = t;
    return 0;
}

void cn_clean_txns_free(struct cn_clean_txns *t)
{
    if (!t)
        return;
    free(t->aborted);
    pid_table_fini(&t->pids);
    free(t);
}

int cn_clean_txns_add_aborted(struct cn_clean_txns *t,
                              const struct cn_clean_aborted *a, size_t n)
{
    if (n == 0)
        return 0;
    if (t->n + n > t->cap) {
        size_t ncap = t->cap ? t->cap : 16;
        while (ncap < t->n + n)
            ncap *= 2;
        struct cn_clean_aborted *na = realloc(t->aborted, ncap * sizeof *na);
        if (!na)
            return CN_ENOMEM;
        t->aborted = na;
        t->cap = ncap;
    }
    memcpy(t->aborted + t->n, a, n * sizeof *a);
    t->n += n;
    return 0;
}

/* Transactions that began at or before offset are now ongoing. */
static void consume_aborted_up_to(struct cn_clean_txns *t, int64_t offset)
{
    while (t->head < t->n && t->aborted[t->head].first_offset <= offset) {
        const struct cn_clean_aborted *a = &t->aborted[t->head++];
        struct pid_slot *s = pid_get(&t->pids, a->producer_id);
        if (!s) {
            t->err = CN_ENOMEM;
            continue;
        }
        if (!s->aborted_ongoing) {
            s->aborted_ongoing = true;
            s->aborted_observed = false;
            s->aborted = *a;
        }
    }
}

bool cn_clean_txns_on_batch(struct cn_clean_txns *t,
                            const struct cn_batch_hdr *h)
{
    consume_aborted_up_to(t, cn_batch_last_offset(h));
    if (!cn_batch_is_transactional(h))
        return false;
    struct pid_slot *s = pid_get(&t->pids, h->producer_id);
    if (!s) {
        t->err = CN_ENOMEM;
        return false;
    }
    if (s->aborted_ongoing) {
        s->aborted_observed = true;
        return true;
    }
    s->committed_ongoing = true;
    return false;
}

bool cn_clean_txns_on_control(struct cn_clean_txns *t,
                              const struct cn_batch_hdr *h, int type,
                              struct cn_clean_aborted *append,
                              bool *has_append)
{
    if (has_append)
        *has_append = false;
    consume_aborted_up_to(t, cn_batch_last_offset(h));
    if (type < 0)
        return true; /* emptied by an earlier pass */
    struct pid_slot *s = pid_find(&t->pids, h->producer_id);
    if (type == CN_CONTROL_ABORT) {
        if (!s || !s->aborted_ongoing)
            return true;
        s->aborted_ongoing = false;
        if (!s->aborted_observed)
            return true;
        /* Data of the transaction was still there: the marker and its
         * index entry must outlive it, to the next pass at least. */
        if (append)
            *append = s->aborted;
        if (has_append)
            *has_append = true;
        return false;
    }
    if (type == CN_CONTROL_COMMIT) {
        bool had = s && s->committed_ongoing;
        if (s)
            s->committed_ongoing = false;
        return !had;
    }
    return false; /* an unknown control type: keep it */
}

/* ---- key map ------------------------------------------------------------ */

struct key_slot {
    uint64_t hash;
    int64_t offset; /* -1 empty */
    uint32_t key_off, key_len;
};

struct cn_clean_map {
    struct key_slot *slots;
    size_t cap, used;
    struct cn_wr keys;
    size_t max_bytes;
    int64_t latest;
};

/* Bytes a mapped key costs, with the half-empty table it lives in. */
#define KEY_COST(len) (2 * sizeof(struct key_slot) + (size_t)(len))

static uint64_t key_hash(struct cn_bytes k)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int32_t i = 0; i < k.len; i++)
        h = (h ^ k.ptr[i]) * 0x100000001b3ull;
    return h;
}

int cn_clean_map_new(size_t max_bytes, struct cn_clean_map **out)
{
    struct cn_clean_map *m = calloc(1, sizeof *m);
    if (!m)
        return CN_ENOMEM;
    cn_wr_init(&m->keys, 4096);
    m->max_bytes = max_bytes;
    m->latest = -1;
    *out = m;
    return 0;
}

void cn_clean_map_free(struct cn_clean_map *m)
{
    if (!m)
        return;
    free(m->slots);
    cn_wr_fini(&m->keys);
    free(m);
}

static struct key_slot *key_find(const struct cn_clean_map *m,
                                 struct cn_bytes k, uint64_t h)
{
    if (m->cap == 0)
        return NULL;
    for (size_t i = (size_t)h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        struct key_slot *s = &m->slots[i];
        if (s->offset < 0)
            return s; /* the empty slot where k would go */
        if (s->hash == h && s->key_len == (uint32_t)k.len &&
            (k.len == 0 || !memcmp(m->keys.buf + s->key_off, k.ptr,
                                   (size_t)k.len)))
            return s;
    }
}

static int key_grow(struct cn_clean_map *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 1024;
    struct key_slot *ns = malloc(ncap * sizeof *ns);
    if (!ns)
        return CN_ENOMEM;
    for (size_t i = 0; i < ncap; i++)
        ns[i].offset = -1;
    for (size_t j = 0; j < m->cap; j++) {
        if (m->slots[j].offset < 0)
            continue;
        size_t i = (size_t)m->slots[j].hash & (ncap - 1);
        while (ns[i].offset >= 0)
            i = (i + 1) & (ncap - 1);
        ns[i] = m->slots[j];
    }
    free(m->slots);
    m->slots = ns;
    m->cap = ncap;
    return 0;
}

static int key_put(struct cn_clean_map *m, struct cn_bytes k, int64_t offset)
{
    uint64_t h = key_hash(k);
    struct key_slot *s = key_find(m, k, h);
    if (s && s->offset >= 0) {
        if (offset > s->offset)
            s->offset = offset;
        return 0;
    }
    if ((m->used + 1) * 2 > m->cap) {
        if (key_grow(m))
            return CN_ENOMEM;
        s = key_find(m, k, h);
    }
    size_t off = m->keys.len;
    cn_wr_raw(&m->keys, k.ptr, (size_t)k.len);
    if (m->keys.err || off > UINT32_MAX)
        return CN_ENOMEM;
    s->hash = h;
    s->offset = offset;
    s->key_off = (uint32_t)off;
    s->key_len = (uint32_t)k.len;
    m->used++;
    return 0;
}

static size_t map_bytes(const struct cn_clean_map *m)
{
    return m->used * KEY_COST(0) + m->keys.len;
}

/* The type of a control batch's marker, -1 when it has no record. */
static int control_type(const uint8_t *batch, size_t len,
                        struct cn_wr *scratch, int *type)
{
    struct cn_batch_hdr h;
    struct cn_record_iter it;
    struct cn_record rec;
    int rc = cn_batch_records(batch, len, 0, scratch, &h, &it);
    if (rc)
        return rc;
    rc = cn_record_iter_next(&it, &rec);
    if (rc < 0)
        return rc;
    if (rc == 0) {
        *type = -1;
        return 0;
    }
    int16_t t;
    if (cn_control_key_parse(rec.key, &t))
        return cn_corrupt("control record key");
    *type = t;
    return 0;
}

int cn_clean_map_add(struct cn_clean_map *m, struct cn_clean_txns *t,
                     const uint8_t *batch, size_t len, struct cn_wr *scratch)
{
    struct cn_batch_hdr h;
    struct cn_record_iter it;
    struct cn_record rec;
    int rc = cn_batch_records(batch, len, 0, scratch, &h, &it);
    if (rc)
        return rc;
    if (cn_batch_is_control(&h)) {
        int type = -1; /* set by control_type on success */
        if ((rc = control_type(batch, len, scratch, &type)))
            return rc;
        cn_clean_txns_on_control(t, &h, type, NULL, NULL);
        goto out_latest;
    }
    /* Worst case first, so a full map leaves this batch out whole. */
    size_t need = 0;
    struct cn_record_iter probe = it;
    while ((rc = cn_record_iter_next(&probe, &rec)) == 1)
        if (rec.key.len >= 0)
            need += KEY_COST(rec.key.len);
    if (rc < 0)
        return rc;
    if (map_bytes(m) + need > m->max_bytes && need > 0)
        return CN_ETOOBIG;
    if (cn_clean_txns_on_batch(t, &h))
        goto out_latest; /* aborted: its keys must not shadow older data */
    while ((rc = cn_record_iter_next(&it, &rec)) == 1) {
        if (rec.key.len < 0)
            continue;
        if ((rc = key_put(m, rec.key, rec.offset)))
            return rc;
    }
    if (rc < 0)
        return rc;
out_latest:
    if (t->err)
        return t->err;
    if (cn_batch_last_offset(&h) > m->latest)
        m->latest = cn_batch_last_offset(&h);
    return 0;
}

int64_t cn_clean_map_latest(const struct cn_clean_map *m)
{
    return m->latest;
}

int64_t cn_clean_map_get(const struct cn_clean_map *m, struct cn_bytes key)
{
    if (key.len < 0)
        return -1;
    struct key_slot *s = key_find(m, key, key_hash(key));
    return s && s->offset >= 0 ? s->offset : -1;
}

size_t cn_clean_map_count(const struct cn_clean_map *m)
{
    return m->used;
}

/* ---- the rewrite -------------------------------------------------------- */

struct cn_clean_pass {
    const struct cn_clean_map *map;
    struct cn_clean_txns *txns;
    struct pid_table producers;
    struct cn_clean_params params;
    int64_t retain;    /* last offset of a batch kept even emptied */
    struct cn_wr recs; /* kept records, uncompressed */
    struct cn_wr rec;  /* one record being encoded */
};

int cn_clean_pass_new(const struct cn_clean_map *map, struct cn_clean_txns *t,
                      const struct cn_clean_producer *producers, size_t n,
                      const struct cn_clean_params *params,
                      struct cn_clean_pass **out)
{
    struct cn_clean_pass *p = calloc(1, sizeof *p);
    if (!p)
        return CN_ENOMEM;
    p->map = map;
    p->txns = t;
    p->retain = -1;
    p->params = *params;
    for (size_t i = 0; i < n; i++) {
        struct pid_slot *s = pid_get(&p->producers, producers[i].producer_id);
        if (!s) {
            pid_table_fini(&p->producers);
            free(p);
            return CN_ENOMEM;
        }
        s->epoch = producers[i].epoch;
        s->last_data_offset = producers[i].last_data_offset;
    }
    cn_wr_init(&p->recs, 4096);
    cn_wr_init(&p->rec, 256);
    *out = p;
    return 0;
}

void cn_clean_pass_free(struct cn_clean_pass *p)
{
    if (!p)
        return;
    pid_table_fini(&p->producers);
    cn_wr_fini(&p->recs);
    cn_wr_fini(&p->rec);
    free(p);
}

void cn_clean_pass_retain(struct cn_clean_pass *p, int64_t last_offset)
{
    p->retain = last_offset;
}

static bool has_horizon(const struct cn_batch_hdr *h)
{
    return (h->attributes & CN_BATCH_ATTR_DELETE_HORIZON) != 0;
}

/*
 * The batch an active producer's state is rebuilt from: the one holding its
 * last data offset, or, when its last entry is a marker, a marker of its
 * current epoch.  Kept even emptied (Kafka's RETAIN_EMPTY).
 */
static bool last_of_producer(const struct cn_clean_pass *p,
                             const struct cn_batch_hdr *h)
{
    if (!cn_batch_has_producer_id(h))
        return false;
    const struct pid_slot *s = pid_find(&p->producers, h->producer_id);
    if (!s)
        return false;
    if (s->last_data_offset >= 0)
        return cn_batch_last_offset(h) == s->last_data_offset;
    return cn_batch_is_control(h) && h->producer_epoch == s->epoch;
}

/* Kafka's shouldRetainRecord for a data record. */
static bool keep_record(const struct cn_clean_pass *p,
                        const struct cn_batch_hdr *h,
                        const struct cn_record *rec)
{
    if (rec->offset > cn_clean_map_latest(p->map))
        return true; /* past what the map saw: not decided this pass */
    if (rec->key.len < 0)
        return false; /* a compacted log cannot place it */
    if (rec->offset < cn_clean_map_get(p->map, rec->key))
        return false;
    if (rec->value.len >= 0)
        return true;
    return !has_horizon(h) || p->params.now_ms < h->base_timestamp;
}

static void encode_record(struct cn_clean_pass *p, const struct cn_record *rec,
                          int64_t ts_delta)
{
    struct cn_wr *r = &p->rec;
    cn_wr_reset(r);
    cn_wr_i8(r, rec->attributes);
    cn_wr_varlong(r, ts_delta);
    cn_wr_varint(r, rec->offset_delta);
    cn_wr_varint(r, rec->key.len);
    if (rec->key.len > 0)
        cn_wr_raw(r, rec->key.ptr, (size_t)rec->key.len);
    cn_wr_varint(r, rec->value.len);
    if (rec->value.len > 0)
        cn_wr_raw(r, rec->value.ptr, (size_t)rec->value.len);
    cn_wr_varint(r, rec->header_count);
    if (rec->headers_raw.len > 0)
        cn_wr_raw(r, rec->headers_raw.ptr, (size_t)rec->headers_raw.len);
    cn_wr_varint(&p->recs, (int32_t)r->len);
    cn_wr_raw(&p->recs, r->buf, r->len);
}

/* Writes the batch header h (already adjusted) and the kept records. */
static int write_batch(struct cn_clean_pass *p, const struct cn_batch_hdr *h,
                       int codec, struct cn_wr *out)
{
    size_t start = out->len;
    int rc;
    cn_wr_i64(out, h->base_offset);
    size_t len_slot = cn_wr_reserve(out, 4);
    cn_wr_i32(out, h->leader_epoch);
    cn_wr_i8(out, CN_BATCH_MAGIC);
    size_t crc_slot = cn_wr_reserve(out, 4);
    cn_wr_i16(out, h->attributes);
    cn_wr_i32(out, h->last_offset_delta);
    cn_wr_i64(out, h->base_timestamp);
    cn_wr_i64(out, h->max_timestamp);
    cn_wr_i64(out, h->producer_id);
    cn_wr_i16(out, h->producer_epoch);
    cn_wr_i32(out, h->base_sequence);
    cn_wr_i32(out, h->records_count);
    if (out->err || p->recs.err || p->rec.err) {
        rc = CN_ENOMEM;
        goto out_truncate;
    }
    if (h->records_count > 0 &&
        (rc = cn_compress(codec, p->recs.buf, p->recs.len, out)))
        goto out_truncate;
    size_t total = out->len - start;
    cn_wr_patch_i32(out, len_slot, (int32_t)(total - CN_BATCH_LOG_OVERHEAD));
    cn_wr_patch_u32(out, crc_slot,
                    cn_batch_compute_crc(out->buf + start, total));
    return 0;
out_truncate:
    out->len = start;
    out->err = 0;
    return rc;
}

int cn_clean_batch(struct cn_clean_pass *p, const uint8_t *batch, size_t len,
                   struct cn_wr *scratch, struct cn_wr *out,
                   struct cn_clean_result *res)
{
    struct cn_batch_hdr h;
    struct cn_record_iter it;
    struct cn_record rec;
    int rc;

    memset(res, 0, sizeof *res);
    if ((rc = cn_batch_records(batch, len, 0, scratch, &h, &it)))
        return rc;

    /* Kafka's checkBatchRetention. */
    bool can_discard;
    if (cn_batch_is_control(&h)) {
        int type = -1; /* set by control_type on success */
        if ((rc = control_type(batch, len, scratch, &type)))
            return rc;
        /* control_type reused scratch: iterate afresh below. */
        if ((rc = cn_batch_records(batch, len, 0, scratch, &h, &it)))
            return rc;
        can_discard = cn_clean_txns_on_control(p->txns, &h, type,
                                               &res->txn_entry,
                                               &res->has_txn_entry);
    } else {
        can_discard = cn_clean_txns_on_batch(p->txns, &h);
    }
    if (p->txns->err)
        return p->txns->err;
    bool discard_records = can_discard;
    if (cn_batch_is_control(&h))
        discard_records = can_discard && has_horizon(&h) &&
                          h.base_timestamp <= p->params.now_ms;
    bool retain_empty = last_of_producer(p, &h) ||
                        cn_batch_last_offset(&h) == p->retain;
    /* A marker with nothing left to guard gets its delete horizon. */
    bool marker_expiring = can_discard && cn_batch_is_control(&h);

    /* Which records stay; never dedupe a control batch by key (KAFKA-14055). */
    cn_wr_reset(&p->recs);
    bool tombstones = false;
    int32_t last_delta = -1;
    struct cn_record_iter walk = it;
    while ((rc = cn_record_iter_next(&walk, &rec)) == 1) {
        bool keep = !discard_records &&
                    (cn_batch_is_control(&h) || keep_record(p, &h, &rec));
        if (!keep) {
            res->records_dropped++;
            continue;
        }
        res->records_kept++;
        last_delta = rec.offset_delta;
        if (rec.value.len < 0 && !cn_batch_is_control(&h))
            tombstones = true;
    }
    if (rc < 0)
        return rc;

    bool set_horizon = !has_horizon(&h) && (tombstones || marker_expiring);
    if (res->records_kept == 0 && !retain_empty)
        return 0; /* the batch is gone */
    if (res->records_kept > 0 && res->records_dropped == 0 && !set_horizon) {
        cn_wr_raw(out, batch, len);
        if (out->err)
            return CN_ENOMEM;
        res->kept = true;
        return 0;
    }

    struct cn_batch_hdr nh = h;
    int codec = cn_batch_codec(&h);
    int64_t base_ts = h.base_timestamp;
    if (set_horizon) {
        nh.attributes |= CN_BATCH_ATTR_DELETE_HORIZON;
        nh.base_timestamp = p->params.now_ms + p->params.delete_retention_ms;
    }
    nh.records_count = res->records_kept;
    if (res->records_kept == 0) {
        /* Empty but kept for producer state: the whole offset range and
         * sequence stay, as Kafka's writeEmptyHeader. */
        nh.attributes &= (int16_t)~CN_BATCH_ATTR_CODEC_MASK;
    } else {
        nh.last_offset_delta = last_delta;
        cn_wr_reset(&p->recs);
        walk = it;
        while ((rc = cn_record_iter_next(&walk, &rec)) == 1) {
            bool keep = cn_batch_is_control(&h) || keep_record(p, &h, &rec);
            if (keep)
                encode_record(p, &rec,
                              base_ts + rec.timestamp_delta - nh.base_timestamp);
        }
        if (rc < 0)
            return rc;
    }
    if ((rc = write_batch(p, &nh, codec, out)))
        return rc;
    res->kept = true;
    res->rewritten = true;
    return 0;
}
