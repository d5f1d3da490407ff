/*
 * quota.c - client quota values, precedence, sampled rates; see quota.h.
 *
 * Values: a small array of entities, searched linearly (operators set a
 * handful; eight searches a request is cheap next to the request).
 * Rates: one sensor per (key, user tag, client tag) in a hash table with
 * an LRU list, so a client that invents client ids cannot grow it past
 * max_sensors.
 */
#include "quota.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

#define SENSOR_BUCKETS 1024
#define DEFAULT_MAX_SENSORS 10000

static const char *const key_names[CN_QK_COUNT] = {
    "producer_byte_rate", "consumer_byte_rate", "request_percentage",
    "controller_mutation_rate"};

struct entry {
    struct cn_quota_entity e;
    double val[CN_QK_COUNT];
    bool has[CN_QK_COUNT];
};

struct sample {
    double value;
    int64_t start_ms; /* Kafka's lastWindowMs */
};

struct sensor {
    struct sensor *hnext;        /* bucket chain */
    struct sensor *lprev, *lnext; /* LRU, most recent at head */
    uint32_t hash;
    enum cn_quota_key k;
    int nsamples;                /* in use, <= window_num */
    int current;
    struct sample *samples;      /* window_num */
    char *user, *client;         /* the tags; one allocation with this */
};

struct cn_quota {
    struct cn_quota_cfg cfg;
    struct entry *entries;
    size_t n, cap;
    struct sensor *buckets[SENSOR_BUCKETS];
    struct sensor *lru_head, *lru_tail;
    size_t nsensors;
};

const char *cn_quota_key_name(enum cn_quota_key k)
{
    return (unsigned)k < CN_QK_COUNT ? key_names[k] : "?";
}

int cn_quota_key_find(const char *name, size_t len)
{
    for (int k = 0; k < CN_QK_COUNT; k++)
        if (strlen(key_names[k]) == len && memcmp(key_names[k], name, len) == 0)
            return k;
    return -1;
}

bool cn_quota_key_is_long(enum cn_quota_key k)
{
    return k == CN_QK_PRODUCE || k == CN_QK_FETCH;
}

int cn_quota_new(const struct cn_quota_cfg *cfg, struct cn_quota **out)
{
    if (cfg->window_num < 1 || cfg->window_ms < 1)
        return CN_EINVAL;
    struct cn_quota *q = calloc(1, sizeof *q);
    if (!q)
        return CN_ENOMEM;
    q->cfg = *cfg;
    if (!q->cfg.max_sensors)
        q->cfg.max_sensors = DEFAULT_MAX_SENSORS;
    *out = q;
    return 0;
}

static void sensors_clear(struct cn_quota *q)
{
    struct sensor *s = q->lru_head;
    while (s) {
        struct sensor *next = s->lnext;
        free(s->samples);
        free(s);
        s = next;
    }
    memset(q->buckets, 0, sizeof q->buckets);
    q->lru_head = q->lru_tail = NULL;
    q->nsensors = 0;
}

void cn_quota_clear(struct cn_quota *q)
{
    sensors_clear(q);
    free(q->entries);
    q->entries = NULL;
    q->n = q->cap = 0;
}

void cn_quota_free(struct cn_quota *q)
{
    if (!q)
        return;
    cn_quota_clear(q);
    free(q);
}

/* ---- values ------------------------------------------------------------ */

static bool part_eq(enum cn_quota_part pa, const char *a, enum cn_quota_part pb,
                    const char *b)
{
    return pa == pb && (pa != CN_QP_NAME || strcmp(a, b) == 0);
}

static struct entry *entry_find(const struct cn_quota *q,
                                enum cn_quota_part up, const char *u,
                                enum cn_quota_part cp, const char *c)
{
    for (size_t i = 0; i < q->n; i++) {
        struct entry *en = &q->entries[i];
        if (part_eq(en->e.user_part, en->e.user, up, u) &&
            part_eq(en->e.client_part, en->e.client, cp, c))
            return en;
    }
    return NULL;
}

int cn_quota_set(struct cn_quota *q, const struct cn_quota_entity *e,
                 enum cn_quota_key k, double value, bool remove)
{
    if ((unsigned)k >= CN_QK_COUNT ||
        (e->user_part == CN_QP_NONE && e->client_part == CN_QP_NONE))
        return CN_EINVAL;
    if (!remove && !(value >= 0 && isfinite(value)))
        return CN_EINVAL;
    struct entry *en =
        entry_find(q, e->user_part, e->user, e->client_part, e->client);
    if (remove) {
        if (!en)
            return 0;
        en->has[k] = false;
        for (int i = 0; i < CN_QK_COUNT; i++)
            if (en->has[i])
                return 0;
        size_t at = (size_t)(en - q->entries);
        memmove(en, en + 1, (q->n - at - 1) * sizeof *en);
        q->n--;
        return 0;
    }
    if (!en) {
        if (q->n == q->cap) {
            size_t cap = q->cap ? q->cap * 2 : 8;
            struct entry *ne = realloc(q->entries, cap * sizeof *ne);
            if (!ne)
                return CN_ENOMEM;
            q->entries = ne;
            q->cap = cap;
        }
        en = &q->entries[q->n++];
        memset(en, 0, sizeof *en);
        en->e.user_part = e->user_part;
        en->e.client_part = e->client_part;
        if (e->user_part == CN_QP_NAME)
            snprintf(en->e.user, sizeof en->e.user, "%s", e->user);
        if (e->client_part == CN_QP_NAME)
            snprintf(en->e.client, sizeof en->e.client, "%s", e->client);
    }
    en->val[k] = value;
    en->has[k] = true;
    return 0;
}

bool cn_quota_get(const struct cn_quota *q, const struct cn_quota_entity *e,
                  enum cn_quota_key k, double *out)
{
    const struct entry *en =
        entry_find(q, e->user_part, e->user, e->client_part, e->client);
    if (!en || (unsigned)k >= CN_QK_COUNT || !en->has[k])
        return false;
    *out = en->val[k];
    return true;
}

size_t cn_quota_count(const struct cn_quota *q)
{
    return q->n;
}

const struct cn_quota_entity *cn_quota_at(const struct cn_quota *q,
                                          size_t i, double vals[CN_QK_COUNT],
                                          bool has[CN_QK_COUNT])
{
    if (i >= q->n)
        return NULL;
    memcpy(vals, q->entries[i].val, sizeof q->entries[i].val);
    memcpy(has, q->entries[i].has, sizeof q->entries[i].has);
    return &q->entries[i].e;
}

/* ---- precedence -------------------------------------------------------- */

struct level {
    enum cn_quota_part up, cp;
    bool tag_user, tag_client; /* which parts the level's rate is per */
};

/* Kafka's DefaultQuotaCallback order, with its metric tags. */
static const struct level levels[8] = {
    {CN_QP_NAME, CN_QP_NAME, true, true},
    {CN_QP_NAME, CN_QP_DEFAULT, true, true},
    {CN_QP_NAME, CN_QP_NONE, true, false},
    {CN_QP_DEFAULT, CN_QP_NAME, true, true},
    {CN_QP_DEFAULT, CN_QP_DEFAULT, true, true},
    {CN_QP_DEFAULT, CN_QP_NONE, true, false},
    {CN_QP_NONE, CN_QP_NAME, false, true},
    {CN_QP_NONE, CN_QP_DEFAULT, false, true},
};

/* Index into levels of the first that sets k, or -1. */
static int level_find(const struct cn_quota *q, enum cn_quota_key k,
                      const char *user, const char *client, double *limit)
{
    if (q->n == 0 || (unsigned)k >= CN_QK_COUNT)
        return -1;
    for (int i = 0; i < 8; i++) {
        const struct entry *en =
            entry_find(q, levels[i].up, user, levels[i].cp, client);
        if (en && en->has[k]) {
            *limit = en->val[k];
            return i;
        }
    }
    return -1;
}

bool cn_quota_limit(const struct cn_quota *q, enum cn_quota_key k,
                    const char *user, const char *client_id, double *limit,
                    int *level)
{
    double l;
    int i = level_find(q, k, user, client_id, &l);
    if (i < 0)
        return false;
    *limit = l;
    if (level)
        *level = i + 1;
    return true;
}

/* ---- sensors ----------------------------------------------------------- */

static uint32_t tag_hash(enum cn_quota_key k, const char *u, const char *c)
{
    uint32_t h = 2166136261u ^ (uint32_t)k;
    for (const char *p = u; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    h = (h ^ 0xff) * 16777619u;
    for (const char *p = c; *p; p++)
        h = (h ^ (uint8_t)*p) * 16777619u;
    return h;
}

static void lru_unlink(struct cn_quota *q, struct sensor *s)
{
    if (s->lprev)
        s->lprev->lnext = s->lnext;
    else
        q->lru_head = s->lnext;
    if (s->lnext)
        s->lnext->lprev = s->lprev;
    else
        q->lru_tail = s->lprev;
    s->lprev = s->lnext = NULL;
}

static void lru_push(struct cn_quota *q, struct sensor *s)
{
    s->lnext = q->lru_head;
    s->lprev = NULL;
    if (q->lru_head)
        q->lru_head->lprev = s;
    else
        q->lru_tail = s;
    q->lru_head = s;
}

static void sensor_drop(struct cn_quota *q, struct sensor *s)
{
    struct sensor **pp = &q->buckets[s->hash % SENSOR_BUCKETS];
    while (*pp != s)
        pp = &(*pp)->hnext;
    *pp = s->hnext;
    lru_unlink(q, s);
    free(s->samples);
    free(s);
    q->nsensors--;
}

static struct sensor *sensor_get(struct cn_quota *q, enum cn_quota_key k,
                                 const char *u, const char *c, bool create)
{
    uint32_t h = tag_hash(k, u, c);
    for (struct sensor *s = q->buckets[h % SENSOR_BUCKETS]; s; s = s->hnext)
        if (s->hash == h && s->k == k && strcmp(s->user, u) == 0 &&
            strcmp(s->client, c) == 0) {
            lru_unlink(q, s);
            lru_push(q, s);
            return s;
        }
    if (!create)
        return NULL;
    if (q->nsensors >= q->cfg.max_sensors && q->lru_tail)
        sensor_drop(q, q->lru_tail);
    size_t ul = strlen(u) + 1, cl = strlen(c) + 1;
    struct sensor *s = calloc(1, sizeof *s + ul + cl);
    if (!s)
        return NULL;
    s->samples = calloc((size_t)q->cfg.window_num, sizeof *s->samples);
    if (!s->samples) {
        free(s);
        return NULL;
    }
    s->user = (char *)(s + 1);
    s->client = s->user + ul;
    memcpy(s->user, u, ul);
    memcpy(s->client, c, cl);
    s->k = k;
    s->hash = h;
    s->hnext = q->buckets[h % SENSOR_BUCKETS];
    q->buckets[h % SENSOR_BUCKETS] = s;
    lru_push(q, s);
    q->nsensors++;
    return s;
}

size_t cn_quota_sensor_count(const struct cn_quota *q)
{
    return q->nsensors;
}

/* Kafka's SampledStat.record: a new sample once the current one is a
 * window old, reusing the oldest slot when all are in use. */
static void sample_add(const struct cn_quota *q, struct sensor *s, double v,
                       int64_t now)
{
    if (s->nsamples == 0) {
        s->nsamples = 1;
        s->current = 0;
        s->samples[0] = (struct sample){0, now};
    }
    struct sample *cur = &s->samples[s->current];
    if (now - cur->start_ms >= q->cfg.window_ms) {
        s->current = (s->current + 1) % q->cfg.window_num;
        if (s->current >= s->nsamples)
            s->nsamples = s->current + 1;
        cur = &s->samples[s->current];
        *cur = (struct sample){0, now};
    }
    cur->value += v;
}

/* Kafka's purgeObsoleteSamples then Rate.measure: the sum over the live
 * samples, per second of max(elapsed, (num - 1) windows).  *elapsed_ms is
 * that time. */
static double sensor_rate(const struct cn_quota *q, struct sensor *s,
                          int64_t now, int64_t *elapsed_ms)
{
    int64_t expire = (int64_t)q->cfg.window_num * q->cfg.window_ms;
    double sum = 0;
    int64_t oldest = now;
    for (int i = 0; i < s->nsamples; i++) {
        struct sample *sm = &s->samples[i];
        if (now - sm->start_ms >= expire)
            *sm = (struct sample){0, now};
        sum += sm->value;
        if (sm->start_ms < oldest)
            oldest = sm->start_ms;
    }
    int64_t total = now - oldest;
    int64_t full = total / q->cfg.window_ms;
    int64_t min_full = q->cfg.window_num - 1;
    if (full < min_full)
        total += (min_full - full) * q->cfg.window_ms;
    *elapsed_ms = total;
    return total > 0 ? sum / ((double)total / 1000.0) : 0;
}

int64_t cn_quota_throttle_ms(double rate, double limit, int64_t window_ms,
                             int64_t max_ms)
{
    if (!(rate > limit))
        return 0;
    double t;
    if (limit <= 0)
        t = max_ms > 0 ? (double)max_ms : (double)window_ms;
    else
        t = (rate - limit) / limit * (double)window_ms;
    if (max_ms > 0 && t > (double)max_ms)
        t = (double)max_ms;
    /* Bounded so a tiny limit cannot ask for a throttle that overflows
     * the int32 field. */
    if (!(t < (double)INT32_MAX))
        return INT32_MAX;
    return (int64_t)llround(t);
}

/* The sensor's tags for the level found: the parts it is per, else "". */
static void tags_of(int level, const char *user, const char *client,
                    const char **tu, const char **tc)
{
    *tu = levels[level].tag_user ? user : "";
    *tc = levels[level].tag_client ? client : "";
}

int64_t cn_quota_record(struct cn_quota *q, enum cn_quota_key k,
                        const char *user, const char *client_id,
                        double value, int64_t now_ms)
{
    double limit;
    int lv = level_find(q, k, user, client_id, &limit);
    if (lv < 0)
        return 0;
    const char *tu, *tc;
    tags_of(lv, user, client_id, &tu, &tc);
    struct sensor *s = sensor_get(q, k, tu, tc, true);
    if (!s)
        return 0; /* out of memory: better unthrottled than refused */
    sample_add(q, s, value, now_ms);
    int64_t elapsed;
    double rate = sensor_rate(q, s, now_ms, &elapsed);
    int64_t max = k == CN_QK_REQUEST ? q->cfg.window_ms : 0;
    return cn_quota_throttle_ms(rate, limit, elapsed, max);
}

void cn_quota_unrecord(struct cn_quota *q, enum cn_quota_key k,
                       const char *user, const char *client_id, double value,
                       int64_t now_ms)
{
    double limit;
    int lv = level_find(q, k, user, client_id, &limit);
    if (lv < 0)
        return;
    const char *tu, *tc;
    tags_of(lv, user, client_id, &tu, &tc);
    struct sensor *s = sensor_get(q, k, tu, tc, false);
    if (s)
        sample_add(q, s, -value, now_ms);
}

double cn_quota_max_in_window(const struct cn_quota *q, enum cn_quota_key k,
                              const char *user, const char *client_id)
{
    double limit;
    if (level_find(q, k, user, client_id, &limit) < 0)
        return -1;
    return limit * (q->cfg.window_num - 1) * ((double)q->cfg.window_ms / 1000);
}

double cn_quota_rate(struct cn_quota *q, enum cn_quota_key k,
                     const char *user, const char *client_id, int64_t now_ms)
{
    double limit;
    int lv = level_find(q, k, user, client_id, &limit);
    if (lv < 0)
        return 0;
    const char *tu, *tc;
    tags_of(lv, user, client_id, &tu, &tc);
    struct sensor *s = sensor_get(q, k, tu, tc, false);
    int64_t elapsed;
    return s ? sensor_rate(q, s, now_ms, &elapsed) : 0;
}
