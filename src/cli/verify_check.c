/*
 * verify_check.c - the history checker of `cairnctl verify` (verify.h).
 *
 * Keeps one entry per transaction, per value and per topic-partition in
 * string hash maps, the final reads as a flat list, and checks them all
 * in cn_vcheck_run.  Sizes are what a run of minutes produces (10^5 to
 * 10^6 values), so plain open addressing is enough.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "cli/verify.h"

#define TXN_SENT 1u      /* S seen */
#define TXN_COMMITTED 2u /* C seen */
#define TXN_ABORTED 4u   /* A seen */
#define KEY_MAX 128      /* longest transaction or partition key */

/* String -> index map, open addressing, keys owned by the map. */
struct smap {
    char **keys;   /* cap slots, NULL when free */
    int32_t *vals; /* index stored for each key */
    size_t cap;    /* slots, a power of two */
    size_t n;      /* keys stored */
};

struct vtxn {
    const char *key;     /* "w1.0.17", owned by the txns map */
    unsigned flags;      /* TXN_* */
    int64_t nacked;      /* W lines */
    int64_t nacked_seen; /* acked values read read_committed */
    int64_t nseen;       /* distinct values read read_committed */
    int64_t nvisible;    /* ... by the final or the tailing reader */
    int32_t missing;     /* one acked value not read, -1 if none */
};

struct vwrite {
    const char *value;   /* owned by the values map */
    int32_t txn;         /* index in txns, -1 if the value is not ours */
    int32_t tp;          /* acked partition, -1 when not acked */
    bool acked;          /* a W line named it */
    int64_t acked_offset;          /* the offset its W line gave */
    int32_t seen[CN_VC_NSOURCES];  /* reads per source */
    int64_t first[CN_VC_NSOURCES]; /* offset of the first read, per source */
    int32_t outputs;     /* read_committed rpw outputs naming it */
};

struct vread {
    int32_t tp;     /* partition index */
    int64_t offset; /* as read */
    int32_t write;  /* value index */
    enum cn_vc_source src; /* who read it */
};

struct cn_vcheck {
    struct smap txn_map, value_map, tp_map;
    struct vtxn *txns;
    size_t ntxns, txns_cap;
    struct vwrite *writes;
    size_t nwrites, writes_cap;
    struct vread *reads;
    size_t nreads, reads_cap;
    const char *in_topic;  /* rpw input, NULL if none */
    const char *out_topic; /* rpw output */
    struct cn_vc_report rep; /* filled as anomalies are found */
};

static const char *const kind_names[CN_VC_NKINDS] = {
    "lost_committed_write", "aborted_visible",  "duplicate", "order",
    "torn_transaction",     "rpw_exactly_once", "stall",     "vanished",
};

const char *cn_vc_kind_name(enum cn_vc_kind k)
{
    return (unsigned)k < CN_VC_NKINDS ? kind_names[k] : "?";
}

__attribute__((format(printf, 3, 4)))
static void anomaly(struct cn_vcheck *vc, enum cn_vc_kind k, const char *fmt,
                    ...)
{
    struct cn_vc_report *r = &vc->rep;
    va_list ap;

    r->count[k]++;
    r->anomalies++;
    if (r->nexamples[k] >= CN_VC_EXAMPLES)
        return;
    va_start(ap, fmt);
    vsnprintf(r->example[k][r->nexamples[k]++], CN_VC_EXAMPLE_LEN, fmt, ap);
    va_end(ap);
}

/* ---- string map ---- */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;

    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

static size_t smap_slot(const struct smap *m, const char *key)
{
    size_t i = (size_t)hash_str(key) & (m->cap - 1);

    while (m->keys[i] && strcmp(m->keys[i], key) != 0)
        i = (i + 1) & (m->cap - 1);
    return i;
}

static int smap_grow(struct smap *m)
{
    struct smap g;

    g.cap = m->cap ? m->cap * 2 : 1024;
    g.n = m->n;
    g.keys = calloc(g.cap, sizeof *g.keys);
    g.vals = calloc(g.cap, sizeof *g.vals);
    if (!g.keys || !g.vals) {
        free(g.keys);
        free(g.vals);
        return CN_ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i]) {
            size_t j = smap_slot(&g, m->keys[i]);
            g.keys[j] = m->keys[i];
            g.vals[j] = m->vals[i];
        }
    }
    free(m->keys);
    free(m->vals);
    *m = g;
    return 0;
}

/* The index stored for key, or -1. */
static int32_t smap_get(const struct smap *m, const char *key)
{
    size_t i;

    if (!m->cap)
        return -1;
    i = smap_slot(m, key);
    return m->keys[i] ? m->vals[i] : -1;
}

/* Stores key -> val (key absent); *stored points at the map's copy. */
static int smap_put(struct smap *m, const char *key, int32_t val,
                    const char **stored)
{
    size_t i;

    if ((m->n + 1) * 2 > m->cap && smap_grow(m))
        return CN_ENOMEM;
    i = smap_slot(m, key);
    m->keys[i] = strdup(key);
    if (!m->keys[i])
        return CN_ENOMEM;
    m->vals[i] = val;
    m->n++;
    *stored = m->keys[i];
    return 0;
}

static void smap_fini(struct smap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->keys[i]);
    free(m->keys);
    free(m->vals);
}

static int grow(void **arr, size_t *cap, size_t n, size_t size)
{
    void *p;
    size_t c;

    if (n < *cap)
        return 0;
    c = *cap ? *cap * 2 : 256;
    p = realloc(*arr, c * size);
    if (!p)
        return CN_ENOMEM;
    *arr = p;
    *cap = c;
    return 0;
}

/* ---- values ---- */

struct vname {
    char txn[KEY_MAX];  /* "w1.0.17" */
    char prod[KEY_MAX]; /* "w1" */
    int64_t inc, seq, idx;
    const char *payload; /* after ':', or NULL */
};

/* Splits "<prod>.<inc>.<txn>.<idx>[:payload]"; false if not ours. */
static bool parse_value(const char *v, struct vname *n)
{
    const char *dot = strchr(v, '.');
    char *end;
    size_t plen;

    if (!dot || dot == v || (size_t)(dot - v) >= KEY_MAX)
        return false;
    plen = (size_t)(dot - v);
    memcpy(n->prod, v, plen);
    n->prod[plen] = '\0';
    n->inc = strtoll(dot + 1, &end, 10);
    if (end == dot + 1 || *end != '.')
        return false;
    n->seq = strtoll(end + 1, &end, 10);
    if (*end != '.')
        return false;
    if ((size_t)(end - v) >= KEY_MAX)
        return false;
    memcpy(n->txn, v, (size_t)(end - v));
    n->txn[end - v] = '\0';
    dot = end;
    n->idx = strtoll(dot + 1, &end, 10);
    if (end == dot + 1 || (*end && *end != ':'))
        return false;
    n->payload = *end == ':' ? end + 1 : NULL;
    return true;
}

static int txn_get(struct cn_vcheck *vc, const char *key, int32_t *out)
{
    int32_t i = smap_get(&vc->txn_map, key);
    struct vtxn *t;
    int rc;

    if (i < 0) {
        rc = grow((void **)&vc->txns, &vc->txns_cap, vc->ntxns,
                  sizeof *vc->txns);
        if (rc)
            return rc;
        i = (int32_t)vc->ntxns;
        t = &vc->txns[i];
        memset(t, 0, sizeof *t);
        t->missing = -1;
        rc = smap_put(&vc->txn_map, key, i, &t->key);
        if (rc)
            return rc;
        vc->ntxns++;
    }
    *out = i;
    return 0;
}

static int tp_get(struct cn_vcheck *vc, const char *topic, int32_t part,
                  int32_t *out)
{
    char key[KEY_MAX + 16];
    const char *stored;
    int32_t i;
    int rc;

    snprintf(key, sizeof key, "%s %" PRId32, topic, part);
    i = smap_get(&vc->tp_map, key);
    if (i < 0) {
        i = (int32_t)vc->tp_map.n;
        rc = smap_put(&vc->tp_map, key, i, &stored);
        if (rc)
            return rc;
    }
    *out = i;
    return 0;
}

/* The key "topic partition" of a partition index (for examples). */
static const char *tp_name(const struct cn_vcheck *vc, int32_t tp)
{
    for (size_t i = 0; i < vc->tp_map.cap; i++)
        if (vc->tp_map.keys[i] && vc->tp_map.vals[i] == tp)
            return vc->tp_map.keys[i];
    return "?";
}

static int value_get(struct cn_vcheck *vc, const char *value, int32_t *out)
{
    int32_t i = smap_get(&vc->value_map, value);
    struct vname n;
    struct vwrite *w;
    int rc;

    if (i >= 0) {
        *out = i;
        return 0;
    }
    rc = grow((void **)&vc->writes, &vc->writes_cap, vc->nwrites,
              sizeof *vc->writes);
    if (rc)
        return rc;
    i = (int32_t)vc->nwrites;
    w = &vc->writes[i];
    memset(w, 0, sizeof *w);
    w->txn = -1;
    w->tp = -1;
    rc = smap_put(&vc->value_map, value, i, &w->value);
    if (rc)
        return rc;
    vc->nwrites++;
    if (parse_value(value, &n)) {
        int32_t t;
        rc = txn_get(vc, n.txn, &t);
        if (rc)
            return rc;
        vc->writes[i].txn = t;
    }
    *out = i;
    return 0;
}

struct cn_vcheck *cn_vcheck_new(void)
{
    return calloc(1, sizeof(struct cn_vcheck));
}

void cn_vcheck_free(struct cn_vcheck *vc)
{
    if (!vc)
        return;
    smap_fini(&vc->txn_map);
    smap_fini(&vc->value_map);
    smap_fini(&vc->tp_map);
    free(vc->txns);
    free(vc->writes);
    free(vc->reads);
    free(vc);
}

void cn_vcheck_set_rpw(struct cn_vcheck *vc, const char *in_topic,
                       const char *out_topic)
{
    vc->in_topic = in_topic;
    vc->out_topic = out_topic;
}

int cn_vcheck_history(struct cn_vcheck *vc, const char *line)
{
    char kind, txn[KEY_MAX], topic[KEY_MAX], value[512];
    int32_t part, t, w, tp;
    int64_t off;
    int rc;

    /* A line without its newline was cut by a kill -9: its value might be
     * a prefix of the real one, so it is dropped. */
    if (!line[0] || line[1] != ' ' || line[strlen(line) - 1] != '\n')
        return CN_EINVAL;
    kind = line[0];
    if (kind == 'W') {
        /* A torn line parses short or with a cut value; the value must
         * also parse as ours and name the same transaction. */
        struct vname n;
        if (sscanf(line + 2, "%127s %127s %" SCNd32 " %" SCNd64 " %511s",
                   txn, topic, &part, &off, value) != 5)
            return CN_EINVAL;
        if (!parse_value(value, &n) || strcmp(n.txn, txn) != 0)
            return CN_EINVAL;
        rc = value_get(vc, value, &w);
        if (!rc)
            rc = tp_get(vc, topic, part, &tp);
        if (rc)
            return rc;
        if (vc->writes[w].acked)
            return 0;
        vc->writes[w].acked = true;
        vc->writes[w].acked_offset = off;
        vc->writes[w].tp = tp;
        vc->txns[vc->writes[w].txn].nacked++;
        vc->rep.writes_acked++;
        return 0;
    }
    if (kind != 'S' && kind != 'C' && kind != 'A')
        return CN_EINVAL;
    if (sscanf(line + 2, "%127s", txn) != 1)
        return CN_EINVAL;
    rc = txn_get(vc, txn, &t);
    if (rc)
        return rc;
    vc->txns[t].flags |= kind == 'S'   ? TXN_SENT
                         : kind == 'C' ? TXN_COMMITTED
                                       : TXN_ABORTED;
    return 0;
}

int cn_vcheck_read(struct cn_vcheck *vc, enum cn_vc_source src,
                   const char *topic, int32_t partition, int64_t offset,
                   const char *value)
{
    struct vread *r;
    int32_t w, tp;
    int rc;

    rc = grow((void **)&vc->reads, &vc->reads_cap, vc->nreads,
              sizeof *vc->reads);
    if (!rc)
        rc = value_get(vc, value, &w);
    if (!rc)
        rc = tp_get(vc, topic, partition, &tp);
    if (rc)
        return rc;
    r = &vc->reads[vc->nreads++];
    r->tp = tp;
    r->offset = offset;
    r->write = w;
    r->src = src;
    if (src == CN_VC_FINAL_RC)
        vc->rep.reads_rc++;
    else if (src == CN_VC_FINAL_RU)
        vc->rep.reads_ru++;
    else
        vc->rep.reads_tail++;
    return 0;
}

void cn_vcheck_group_offset(struct cn_vcheck *vc, const char *topic,
                            int32_t partition, int64_t committed, int64_t lo,
                            int64_t hi)
{
    /* No offset committed reads as the start of the log. */
    if (committed < 0)
        committed = 0;
    if (committed < lo || committed > hi)
        anomaly(vc, CN_VC_RPW,
                "group offset of %s %" PRId32 " is %" PRId64
                ", want %" PRId64 "..%" PRId64,
                topic, partition, committed, lo, hi);
}

void cn_vcheck_stall(struct cn_vcheck *vc, int64_t stall_ms, int64_t bound_ms)
{
    if (stall_ms > bound_ms)
        anomaly(vc, CN_VC_STALL,
                "read_committed end offsets stuck %" PRId64
                " ms after faults ended (bound %" PRId64 " ms)",
                stall_ms, bound_ms);
}

void cn_vcheck_ack_stall(struct cn_vcheck *vc, const char *topic,
                         int32_t partition, int64_t stall_ms, int64_t bound_ms)
{
    if (stall_ms > bound_ms)
        anomaly(vc, CN_VC_STALL,
                "%s %" PRId32 " took no acknowledged write for %" PRId64
                " ms (bound %" PRId64 " ms)",
                topic, partition, stall_ms, bound_ms);
}

static int cmp_read(const void *a, const void *b)
{
    const struct vread *x = a, *y = b;

    if (x->src != y->src)
        return x->src < y->src ? -1 : 1;
    if (x->tp != y->tp)
        return x->tp < y->tp ? -1 : 1;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Per-producer order within each partition, read_committed. */
struct last {
    int64_t inc, seq, idx; /* position of the last record seen */
    int64_t offset;        /* where */
    const char *value;
};

static int check_order(struct cn_vcheck *vc)
{
    struct smap m = {0};
    struct last *lasts = NULL;
    size_t nl = 0, cl = 0;
    int rc = 0;

    for (size_t i = 0; i < vc->nreads && !rc; i++) {
        const struct vread *r = &vc->reads[i];
        const struct vwrite *w = &vc->writes[r->write];
        char key[2 * KEY_MAX];
        const char *stored;
        struct vname n;
        struct last *l;
        int32_t li;

        if (r->src != CN_VC_FINAL_RC || !parse_value(w->value, &n))
            continue;
        snprintf(key, sizeof key, "%" PRId32 " %s", r->tp, n.prod);
        li = smap_get(&m, key);
        if (li < 0) {
            rc = grow((void **)&lasts, &cl, nl, sizeof *lasts);
            if (!rc)
                rc = smap_put(&m, key, (int32_t)nl, &stored);
            if (rc)
                break;
            li = (int32_t)nl++;
        } else {
            l = &lasts[li];
            if (n.inc < l->inc ||
                (n.inc == l->inc &&
                 (n.seq < l->seq || (n.seq == l->seq && n.idx <= l->idx))))
                anomaly(vc, CN_VC_ORDER,
                        "%s: %s at offset %" PRId64 " after %s at %" PRId64,
                        tp_name(vc, r->tp), w->value, r->offset, l->value,
                        l->offset);
        }
        l = &lasts[li];
        l->inc = n.inc;
        l->seq = n.seq;
        l->idx = n.idx;
        l->offset = r->offset;
        l->value = w->value;
    }
    smap_fini(&m);
    free(lasts);
    return rc;
}

static void check_reads(struct cn_vcheck *vc)
{
    static const char *const src_names[CN_VC_NSOURCES] = {
        "read_uncommitted", "read_committed", "tailing read_committed",
        "tailing read_uncommitted"};

    for (size_t i = 0; i < vc->nreads; i++) {
        const struct vread *r = &vc->reads[i];
        struct vwrite *w = &vc->writes[r->write];

        if (w->seen[r->src]++ == 0) {
            w->first[r->src] = r->offset;
            if ((r->src == CN_VC_FINAL_RC || r->src == CN_VC_TAIL_RC) &&
                w->txn >= 0 &&
                w->seen[CN_VC_FINAL_RC] + w->seen[CN_VC_TAIL_RC] == 1)
                vc->txns[w->txn].nvisible++;
        } else {
            anomaly(vc, CN_VC_DUPLICATE,
                    "%s read %s at offsets %" PRId64 " and %" PRId64
                    " of %s",
                    w->value, src_names[r->src], w->first[r->src],
                    r->offset, tp_name(vc, r->tp));
            continue;
        }
        if (r->src != CN_VC_FINAL_RC)
            continue;
        if (w->txn >= 0) {
            struct vtxn *t = &vc->txns[w->txn];
            t->nseen++;
            if (w->acked)
                t->nacked_seen++;
        }
    }
}

/* The final read_uncommitted record at (tp, offset), or NULL: reads[] is
 * sorted, and that pass (source 0) comes first. */
static const struct vread *final_at(const struct cn_vcheck *vc, int32_t tp,
                                    int64_t offset)
{
    size_t lo = 0, hi = vc->nreads;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct vread *r = &vc->reads[mid];
        if (r->src != CN_VC_FINAL_RU || r->tp > tp ||
            (r->tp == tp && r->offset >= offset))
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo < vc->nreads && vc->reads[lo].src == CN_VC_FINAL_RU &&
        vc->reads[lo].tp == tp && vc->reads[lo].offset == offset)
        return &vc->reads[lo];
    return NULL;
}

/* What a reader saw during the run, and the offset a write was
 * acknowledged at, must still be there in the final log: a leader that
 * exposed or acknowledged records a failover later truncated fails this.
 * (An acked record missing everywhere is lost_committed_write instead.) */
static void check_vanished(struct cn_vcheck *vc)
{
    for (size_t i = 0; i < vc->nreads; i++) {
        const struct vread *r = &vc->reads[i];
        const struct vread *f;

        if (r->src != CN_VC_TAIL_RC && r->src != CN_VC_TAIL_RU)
            continue;
        f = final_at(vc, r->tp, r->offset);
        if (!f || f->write != r->write)
            anomaly(vc, CN_VC_VANISHED,
                    "%s read by the tailing reader at %s offset %" PRId64
                    "; the final log holds %s there",
                    vc->writes[r->write].value, tp_name(vc, r->tp), r->offset,
                    f ? vc->writes[f->write].value : "nothing");
    }
    for (size_t i = 0; i < vc->nwrites; i++) {
        const struct vwrite *w = &vc->writes[i];

        if (w->acked && w->acked_offset >= 0 && w->seen[CN_VC_FINAL_RU] &&
            w->first[CN_VC_FINAL_RU] != w->acked_offset)
            anomaly(vc, CN_VC_VANISHED,
                    "%s acknowledged at %s offset %" PRId64
                    " but found at %" PRId64,
                    w->value, tp_name(vc, w->tp), w->acked_offset,
                    w->first[CN_VC_FINAL_RU]);
    }
}

/* rpw outputs: each committed input exactly once in the output. */
static void check_rpw(struct cn_vcheck *vc)
{
    if (!vc->in_topic || !vc->out_topic)
        return;
    for (size_t i = 0; i < vc->nreads; i++) {
        const struct vread *r = &vc->reads[i];
        const struct vwrite *w = &vc->writes[r->write];
        const char *tpn = tp_name(vc, r->tp);
        size_t olen = strlen(vc->out_topic);
        struct vname n;
        int32_t in;

        if (r->src != CN_VC_FINAL_RC ||
            strncmp(tpn, vc->out_topic, olen) != 0 ||
            tpn[olen] != ' ')
            continue;
        if (!parse_value(w->value, &n) || !n.payload)
            continue;
        in = smap_get(&vc->value_map, n.payload);
        if (in < 0 || !vc->writes[in].seen[CN_VC_FINAL_RC]) {
            anomaly(vc, CN_VC_RPW,
                    "output %s at %s offset %" PRId64
                    " has no committed input",
                    w->value, tpn, r->offset);
            continue;
        }
        if (++vc->writes[in].outputs == 2)
            anomaly(vc, CN_VC_RPW, "input %s processed twice (second: %s)",
                    n.payload, w->value);
    }
    for (size_t i = 0; i < vc->nreads; i++) {
        const struct vread *r = &vc->reads[i];
        const struct vwrite *w = &vc->writes[r->write];
        const char *tpn = tp_name(vc, r->tp);
        size_t ilen = strlen(vc->in_topic);

        if (r->src != CN_VC_FINAL_RC ||
            strncmp(tpn, vc->in_topic, ilen) != 0 ||
            tpn[ilen] != ' ' || r->offset != w->first[CN_VC_FINAL_RC])
            continue;
        if (w->outputs == 0)
            anomaly(vc, CN_VC_RPW,
                    "input %s at %s offset %" PRId64 " never in the output",
                    w->value, tpn, r->offset);
    }
}

int cn_vcheck_run(struct cn_vcheck *vc, struct cn_vc_report *rep)
{
    int rc;

    qsort(vc->reads, vc->nreads, sizeof *vc->reads, cmp_read);
    check_reads(vc);
    rc = check_order(vc);
    if (rc)
        return rc;

    /* Acked writes not read read_committed: one per transaction noted. */
    for (size_t i = 0; i < vc->nwrites; i++) {
        const struct vwrite *w = &vc->writes[i];
        if (w->acked && !w->seen[CN_VC_FINAL_RC] && w->txn >= 0 &&
            vc->txns[w->txn].missing < 0)
            vc->txns[w->txn].missing = (int32_t)i;
    }
    for (size_t i = 0; i < vc->ntxns; i++) {
        const struct vtxn *t = &vc->txns[i];
        bool committed = t->flags & TXN_COMMITTED;
        bool aborted = !committed && (t->flags & TXN_ABORTED);
        bool unknown = !committed && !aborted && (t->flags & TXN_SENT);

        if (committed)
            vc->rep.txn_committed++;
        else if (aborted)
            vc->rep.txn_aborted++;
        else if (unknown)
            vc->rep.txn_unknown++;
        else
            vc->rep.txn_open++;
        if ((committed || unknown) && t->missing >= 0 && t->nseen > 0) {
            anomaly(vc, CN_VC_TORN,
                    "%s transaction %s: %" PRId64 " of %" PRId64
                    " acked records read_committed, %s missing",
                    committed ? "committed" : "unknown-outcome", t->key,
                    t->nacked_seen, t->nacked,
                    vc->writes[t->missing].value);
        } else if (committed && t->missing >= 0) {
            for (size_t j = 0; j < vc->nwrites; j++) {
                const struct vwrite *w = &vc->writes[j];
                if (w->txn == (int32_t)i && w->acked && !w->seen[CN_VC_FINAL_RC])
                    anomaly(vc, CN_VC_LOST,
                            "%s (transaction %s committed, acked in %s)",
                            w->value, t->key, tp_name(vc, w->tp));
            }
        }
        if (!committed && !unknown && t->nvisible > 0) {
            for (size_t j = 0; j < vc->nwrites; j++) {
                const struct vwrite *w = &vc->writes[j];
                int s = w->seen[CN_VC_FINAL_RC] ? CN_VC_FINAL_RC
                                                : CN_VC_TAIL_RC;
                if (w->txn == (int32_t)i && w->seen[s])
                    anomaly(vc, CN_VC_ABORTED,
                            "%s read %s at offset %" PRId64
                            " (transaction %s %s)",
                            w->value,
                            s == CN_VC_FINAL_RC ? "read_committed"
                                                : "by the tailing reader",
                            w->first[s], t->key,
                            aborted ? "aborted" : "never committed");
            }
        }
    }
    check_rpw(vc);
    check_vanished(vc);
    *rep = vc->rep;
    return 0;
}
