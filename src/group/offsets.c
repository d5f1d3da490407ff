/*
 * offsets.c - committed offsets of consumer groups; see offsets.h.
 *
 * Three levels of chained hash tables: groups by name, a group's topics by
 * name, a topic's partitions by id.  Each name is stored once, at the end
 * of its node.  A partition node ("part") exists while it has a visible
 * offset or pending transactional ones; emptied parts, topics and groups
 * are freed at once so the table holds only live keys.
 *
 * Each pending offset is one node on two lists: its producer's (walked
 * when the transaction ends) and its part's (so the part knows its
 * pending count, and a later put in the same transaction finds the node
 * by scanning the few producers that have the key open).
 */
#include "offsets.h"

#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "base/fnv.h"
#include "base/rd.h"
#include "proto/gen/offset_commit_key.h"
#include "proto/gen/offset_commit_value.h"

#define KAFKA_STRING_MAX 32767 /* int16 length prefix */

/* Intrusive chained hash table; the node is the first member of its
 * owner, so a node pointer converts to the owner pointer. */
struct hnode {
    struct hnode *next; /* next in the bucket */
    uint32_t hash;      /* full hash of the key */
};

struct htab {
    struct hnode **slots; /* buckets, NULL until the first insert */
    size_t nslots;        /* power of two, or 0 */
    size_t n;             /* nodes linked */
};

/* A visible or pending offset as stored. */
struct val {
    int64_t offset;       /* next offset to consume */
    int64_t commit_ts;    /* wall clock ms */
    int64_t expire_ts;    /* wall clock ms or -1 */
    uint8_t *meta;        /* metadata bytes, owned; NULL when len <= 0 */
    int32_t meta_len;     /* bytes, or -1 for null */
    int32_t leader_epoch; /* -1 unknown */
};

struct group {
    struct hnode hn;   /* in cn_offsets.groups */
    struct htab topics; /* struct topic by name */
    size_t ncommitted; /* parts with a visible offset */
    size_t npending;   /* pending nodes under this group */
    size_t namelen;    /* bytes in name, without the NUL */
    char name[];       /* NUL-terminated */
};

struct topic {
    struct hnode hn;     /* in group.topics */
    struct group *group; /* owner */
    struct htab parts;   /* struct part by partition */
    size_t namelen;      /* bytes in name, without the NUL */
    char name[];         /* NUL-terminated */
};

struct pend;

struct part {
    struct hnode hn;      /* in topic.parts */
    struct topic *topic;  /* owner */
    int32_t partition;    /* >= 0 */
    bool has_value;       /* v is a visible committed offset */
    uint32_t npending;    /* nodes on `pending` */
    uint64_t seq;         /* store sequence when v was applied */
    struct val v;         /* valid when has_value */
    struct pend *pending; /* pending offsets of open transactions */
};

struct producer {
    struct hnode hn;    /* in cn_offsets.producers */
    int64_t pid;        /* producer id */
    int16_t epoch;      /* highest epoch seen in the open txn, or -1 */
    struct pend *head;  /* its pending offsets, any group */
    size_t n;           /* nodes on head */
};

struct pend {
    struct pend *p_next, *p_prev; /* in producer.head */
    struct pend *e_next, *e_prev; /* in part.pending */
    struct part *part;            /* the key */
    struct producer *prod;        /* the transaction */
    uint64_t seq;                 /* store sequence when put */
    struct val v;                 /* the offset, owned */
};

struct cn_offsets {
    struct htab groups;    /* struct group by name */
    struct htab producers; /* struct producer with pending offsets */
    uint64_t seq;          /* bumped by every put: the log order */
};

/* A name being looked up: not NUL-terminated when it comes from a record. */
struct name {
    const char *p; /* bytes */
    size_t n;      /* length */
    uint32_t h;    /* hash_bytes(p, n) */
};

static uint32_t hash_bytes(const char *p, size_t n)
{
    return cn_fnv1a(p, n);
}

/* 64-bit finalizer (splitmix64) folded to 32 bits. */
static uint32_t hash_u64(uint64_t x)
{
    x ^= x >> 30;
    x *= UINT64_C(0xbf58476d1ce4e5b9);
    x ^= x >> 27;
    x *= UINT64_C(0x94d049bb133111eb);
    x ^= x >> 31;
    return (uint32_t)(x ^ (x >> 32));
}

static struct name name_of(const char *s)
{
    struct name nm;

    nm.p = s;
    nm.n = strlen(s);
    nm.h = hash_bytes(s, nm.n);
    return nm;
}

static struct name name_of_bytes(struct cn_bytes b)
{
    struct name nm;

    /* Never NULL, so memcmp/memcpy of zero bytes stay defined. */
    nm.p = b.len > 0 ? (const char *)b.ptr : "";
    nm.n = b.len > 0 ? (size_t)b.len : 0;
    nm.h = hash_bytes(nm.p, nm.n);
    return nm;
}

/* ---- hash table ---- */

static struct hnode *ht_bucket(const struct htab *t, uint32_t h)
{
    return t->nslots ? t->slots[h & (t->nslots - 1)] : NULL;
}

/*
 * Makes room for one more node.  Fails only while the table has no
 * buckets at all: a table that cannot grow just gets longer chains.
 */
static int ht_reserve(struct htab *t)
{
    struct hnode **slots, *node, *next;
    size_t ns, i;

    if (t->n < t->nslots)
        return 0;
    ns = t->nslots ? t->nslots * 2 : 4;
    slots = ns <= SIZE_MAX / sizeof *slots ? calloc(ns, sizeof *slots)
                                           : NULL;
    if (!slots)
        return t->nslots ? 0 : CN_ENOMEM;
    for (i = 0; i < t->nslots; i++) {
        for (node = t->slots[i]; node; node = next) {
            size_t b = node->hash & (ns - 1);
            next = node->next;
            node->next = slots[b];
            slots[b] = node;
        }
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = ns;
    return 0;
}

/* Links a node; ht_reserve() must have succeeded first. */
static void ht_link(struct htab *t, struct hnode *node)
{
    size_t b = node->hash & (t->nslots - 1);

    node->next = t->slots[b];
    t->slots[b] = node;
    t->n++;
}

/* Unlinks a linked node.  Buckets are kept, so a walk over the table
 * survives removing the node it stands on (once it saved ->next). */
static void ht_unlink(struct htab *t, struct hnode *node)
{
    struct hnode **pp = &t->slots[node->hash & (t->nslots - 1)];

    while (*pp != node)
        pp = &(*pp)->next;
    *pp = node->next;
    t->n--;
}

static void ht_fini(struct htab *t)
{
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* ---- values ---- */

/* Fills *out with a copy of src (fresh metadata).  0 or CN_ENOMEM. */
static int val_copy(struct val *out, const struct cn_offset_value *src)
{
    int32_t len = src->metadata.len < 0 ? -1 : src->metadata.len;

    memset(out, 0, sizeof *out);
    if (len > 0) {
        out->meta = malloc((size_t)len);
        if (!out->meta)
            return CN_ENOMEM;
        memcpy(out->meta, src->metadata.ptr, (size_t)len);
    }
    out->meta_len = len;
    out->offset = src->offset;
    out->leader_epoch = src->leader_epoch;
    out->commit_ts = src->commit_timestamp_ms;
    out->expire_ts = src->expire_timestamp_ms;
    return 0;
}

static void val_out(const struct val *v, struct cn_offset_value *out)
{
    out->offset = v->offset;
    out->leader_epoch = v->leader_epoch;
    out->metadata = cn_bytes_of(v->meta, v->meta_len);
    out->commit_timestamp_ms = v->commit_ts;
    out->expire_timestamp_ms = v->expire_ts;
}

/* ---- lookup ---- */

static struct group *group_find(const struct cn_offsets *os,
                                const struct name *nm)
{
    struct hnode *n;

    for (n = ht_bucket(&os->groups, nm->h); n; n = n->next) {
        struct group *g = (struct group *)n;
        if (n->hash == nm->h && g->namelen == nm->n &&
            memcmp(g->name, nm->p, nm->n) == 0)
            return g;
    }
    return NULL;
}

static struct topic *topic_find(const struct group *g, const struct name *nm)
{
    struct hnode *n;

    for (n = ht_bucket(&g->topics, nm->h); n; n = n->next) {
        struct topic *t = (struct topic *)n;
        if (n->hash == nm->h && t->namelen == nm->n &&
            memcmp(t->name, nm->p, nm->n) == 0)
            return t;
    }
    return NULL;
}

static struct part *part_find(const struct topic *t, int32_t partition)
{
    uint32_t h = hash_u64((uint32_t)partition);
    struct hnode *n;

    for (n = ht_bucket(&t->parts, h); n; n = n->next)
        if (n->hash == h && ((struct part *)n)->partition == partition)
            return (struct part *)n;
    return NULL;
}

static struct producer *prod_find(const struct cn_offsets *os, int64_t pid)
{
    uint32_t h = hash_u64((uint64_t)pid);
    struct hnode *n;

    for (n = ht_bucket(&os->producers, h); n; n = n->next)
        if (n->hash == h && ((struct producer *)n)->pid == pid)
            return (struct producer *)n;
    return NULL;
}

static struct part *lookup(const struct cn_offsets *os, const struct name *g,
                           const struct name *t, int32_t partition)
{
    struct group *grp = group_find(os, g);
    struct topic *tp = grp ? topic_find(grp, t) : NULL;

    return tp ? part_find(tp, partition) : NULL;
}

/* ---- removal of emptied nodes ---- */

static void topic_release(struct topic *t)
{
    if (t->parts.n)
        return;
    ht_unlink(&t->group->topics, &t->hn);
    ht_fini(&t->parts);
    free(t);
}

static void group_release(struct cn_offsets *os, struct group *g)
{
    if (g->topics.n)
        return;
    ht_unlink(&os->groups, &g->hn);
    ht_fini(&g->topics);
    free(g);
}

/* Frees a part that holds nothing any more, then its topic and group if
 * they are left empty. */
static void prune(struct cn_offsets *os, struct part *p)
{
    struct topic *t = p->topic;
    struct group *g = t->group;

    if (p->has_value || p->pending)
        return;
    ht_unlink(&t->parts, &p->hn);
    free(p);
    topic_release(t);
    group_release(os, g);
}

static void prod_release(struct cn_offsets *os, struct producer *prod)
{
    if (prod->head)
        return;
    ht_unlink(&os->producers, &prod->hn);
    free(prod);
}

/* Takes a pending node off its part's list (counts included). */
static void pend_unlink_part(struct pend *e)
{
    struct part *p = e->part;

    if (e->e_prev)
        e->e_prev->e_next = e->e_next;
    else
        p->pending = e->e_next;
    if (e->e_next)
        e->e_next->e_prev = e->e_prev;
    p->npending--;
    p->topic->group->npending--;
}

static void pend_unlink_prod(struct pend *e)
{
    struct producer *prod = e->prod;

    if (e->p_prev)
        e->p_prev->p_next = e->p_next;
    else
        prod->head = e->p_next;
    if (e->p_next)
        e->p_next->p_prev = e->p_prev;
    prod->n--;
}

/* Drops every pending offset of a part, as its tombstone does; producers
 * left without pending offsets go too.  The part itself stays. */
static void part_drop_pending(struct cn_offsets *os, struct part *p)
{
    while (p->pending) {
        struct pend *e = p->pending;
        struct producer *prod = e->prod;
        pend_unlink_part(e);
        pend_unlink_prod(e);
        free(e->v.meta);
        free(e);
        prod_release(os, prod);
    }
}

static void part_clear_value(struct part *p)
{
    if (!p->has_value)
        return;
    free(p->v.meta);
    memset(&p->v, 0, sizeof p->v);
    p->has_value = false;
    p->topic->group->ncommitted--;
}

/* ---- creation ---- */

/*
 * Finds or creates the part for a key.  On CN_ENOMEM nothing new is left
 * behind.
 */
static int locate(struct cn_offsets *os, const struct name *gn,
                  const struct name *tn, int32_t partition,
                  struct part **out)
{
    struct group *g = group_find(os, gn);
    struct topic *t = NULL;
    struct part *p = NULL;

    if (!g) {
        if (ht_reserve(&os->groups) ||
            !(g = calloc(1, sizeof *g + gn->n + 1)))
            return CN_ENOMEM;
        g->hn.hash = gn->h;
        g->namelen = gn->n;
        memcpy(g->name, gn->p, gn->n);
        ht_link(&os->groups, &g->hn);
    }
    if (!(t = topic_find(g, tn))) {
        if (ht_reserve(&g->topics) ||
            !(t = calloc(1, sizeof *t + tn->n + 1)))
            goto out_release_group;
        t->hn.hash = tn->h;
        t->group = g;
        t->namelen = tn->n;
        memcpy(t->name, tn->p, tn->n);
        ht_link(&g->topics, &t->hn);
    }
    if (!(p = part_find(t, partition))) {
        if (ht_reserve(&t->parts) || !(p = calloc(1, sizeof *p)))
            goto out_release_topic;
        p->hn.hash = hash_u64((uint32_t)partition);
        p->topic = t;
        p->partition = partition;
        ht_link(&t->parts, &p->hn);
    }
    *out = p;
    return 0;

out_release_topic:
    topic_release(t);
out_release_group:
    group_release(os, g);
    return CN_ENOMEM;
}

static int put_names(struct cn_offsets *os, const struct name *gn,
                     const struct name *tn, int32_t partition,
                     const struct cn_offset_value *v)
{
    struct val nv;
    struct part *p;
    int err;

    if ((err = val_copy(&nv, v)))
        return err;
    if ((err = locate(os, gn, tn, partition, &p))) {
        free(nv.meta);
        return err;
    }
    if (p->has_value) {
        free(p->v.meta);
    } else {
        p->has_value = true;
        p->topic->group->ncommitted++;
    }
    p->v = nv;
    p->seq = ++os->seq;
    return 0;
}

static int txn_put_names(struct cn_offsets *os, const struct name *gn,
                         int64_t pid, int16_t epoch, const struct name *tn,
                         int32_t partition, const struct cn_offset_value *v)
{
    struct producer *prod = prod_find(os, pid);
    struct pend *e;
    struct part *p;
    struct val nv;
    int err;

    if (prod && epoch >= 0 && epoch < prod->epoch)
        return CN_EINVAL;
    if ((err = val_copy(&nv, v)))
        return err;
    if (!prod) {
        if (ht_reserve(&os->producers) ||
            !(prod = calloc(1, sizeof *prod))) {
            err = CN_ENOMEM;
            goto out_free_val;
        }
        prod->hn.hash = hash_u64((uint64_t)pid);
        prod->pid = pid;
        prod->epoch = -1;
        ht_link(&os->producers, &prod->hn);
    }
    if ((err = locate(os, gn, tn, partition, &p)))
        goto out_release_prod;
    for (e = p->pending; e; e = e->e_next)
        if (e->prod == prod)
            break;
    if (e) {
        free(e->v.meta);
    } else {
        if (!(e = calloc(1, sizeof *e))) {
            err = CN_ENOMEM;
            prune(os, p);
            goto out_release_prod;
        }
        e->part = p;
        e->prod = prod;
        e->e_next = p->pending;
        if (p->pending)
            p->pending->e_prev = e;
        p->pending = e;
        p->npending++;
        p->topic->group->npending++;
        e->p_next = prod->head;
        if (prod->head)
            prod->head->p_prev = e;
        prod->head = e;
        prod->n++;
    }
    e->v = nv;
    e->seq = ++os->seq;
    if (epoch > prod->epoch)
        prod->epoch = epoch;
    return 0;

out_release_prod:
    prod_release(os, prod);
out_free_val:
    free(nv.meta);
    return err;
}

static int delete_names(struct cn_offsets *os, const struct name *gn,
                        const struct name *tn, int32_t partition)
{
    struct part *p = lookup(os, gn, tn, partition);

    if (!p)
        return CN_ENOTFOUND;
    part_clear_value(p);
    part_drop_pending(os, p);
    prune(os, p);
    return 0;
}

/* ---- public: store ---- */

struct cn_offsets *cn_offsets_new(void)
{
    return calloc(1, sizeof(struct cn_offsets));
}

/* Frees one group and all below it, dropping its pending offsets from
 * their producers; returns how many keys it had. */
static size_t group_destroy(struct cn_offsets *os, struct group *g)
{
    size_t i, j, nkeys = 0;
    struct hnode *tn, *tnext, *pn, *pnext;

    for (i = 0; i < g->topics.nslots; i++) {
        for (tn = g->topics.slots[i]; tn; tn = tnext) {
            struct topic *t = (struct topic *)tn;
            tnext = tn->next;
            for (j = 0; j < t->parts.nslots; j++) {
                for (pn = t->parts.slots[j]; pn; pn = pnext) {
                    struct part *p = (struct part *)pn;
                    pnext = pn->next;
                    part_clear_value(p);
                    part_drop_pending(os, p);
                    free(p);
                    nkeys++;
                }
            }
            ht_fini(&t->parts);
            free(t);
        }
    }
    ht_fini(&g->topics);
    ht_unlink(&os->groups, &g->hn);
    free(g);
    return nkeys;
}

size_t cn_offsets_unload(struct cn_offsets *os, cn_offsets_match_fn match,
                         void *arg)
{
    struct hnode *n, *next;
    size_t i, gone = 0;

    /* Unlinking keeps the buckets, so the walk goes on from next. */
    for (i = 0; i < os->groups.nslots; i++) {
        for (n = os->groups.slots[i]; n; n = next) {
            struct group *g = (struct group *)n;
            next = n->next;
            if (match(arg, g->name)) {
                group_destroy(os, g);
                gone++;
            }
        }
    }
    return gone;
}

void cn_offsets_free(struct cn_offsets *os)
{
    size_t i;

    if (!os)
        return;
    for (i = 0; i < os->groups.nslots; i++)
        while (os->groups.slots[i])
            group_destroy(os, (struct group *)os->groups.slots[i]);
    /* Every pending node hangs under some group, so this is empty now. */
    ht_fini(&os->groups);
    ht_fini(&os->producers);
    free(os);
}

int cn_offsets_put(struct cn_offsets *os, const char *group,
                   const char *topic, int32_t partition,
                   const struct cn_offset_value *v)
{
    struct name gn, tn;

    if (!group || !topic || partition < 0 || !v)
        return CN_EINVAL;
    gn = name_of(group);
    tn = name_of(topic);
    return put_names(os, &gn, &tn, partition, v);
}

int cn_offsets_get(const struct cn_offsets *os, const char *group,
                   const char *topic, int32_t partition,
                   struct cn_offset_value *out)
{
    struct name gn, tn;
    struct part *p;

    if (!group || !topic)
        return CN_ENOTFOUND;
    gn = name_of(group);
    tn = name_of(topic);
    p = lookup(os, &gn, &tn, partition);
    if (!p || !p->has_value)
        return CN_ENOTFOUND;
    val_out(&p->v, out);
    return 0;
}

int cn_offsets_delete(struct cn_offsets *os, const char *group,
                      const char *topic, int32_t partition)
{
    struct name gn, tn;

    if (!group || !topic)
        return CN_ENOTFOUND;
    gn = name_of(group);
    tn = name_of(topic);
    return delete_names(os, &gn, &tn, partition);
}

size_t cn_offsets_delete_group(struct cn_offsets *os, const char *group)
{
    struct name gn;
    struct group *g;

    if (!group)
        return 0;
    gn = name_of(group);
    g = group_find(os, &gn);
    return g ? group_destroy(os, g) : 0;
}

static int foreach_in(const struct cn_offsets *os, const char *group,
                      bool with_pending, cn_offsets_visit_fn fn, void *arg)
{
    struct cn_offset_value v;
    struct hnode *tn, *pn;
    struct group *g;
    struct name gn;
    size_t i, j;
    int r;

    if (!group)
        return 0;
    gn = name_of(group);
    if (!(g = group_find(os, &gn)))
        return 0;
    for (i = 0; i < g->topics.nslots; i++) {
        for (tn = g->topics.slots[i]; tn; tn = tn->next) {
            const struct topic *t = (const struct topic *)tn;
            for (j = 0; j < t->parts.nslots; j++) {
                for (pn = t->parts.slots[j]; pn; pn = pn->next) {
                    const struct part *p = (const struct part *)pn;
                    if (p->has_value) {
                        val_out(&p->v, &v);
                        r = fn(arg, t->name, p->partition, &v);
                    } else if (with_pending) {
                        r = fn(arg, t->name, p->partition, NULL);
                    } else {
                        continue;
                    }
                    if (r)
                        return r;
                }
            }
        }
    }
    return 0;
}

int cn_offsets_foreach(const struct cn_offsets *os, const char *group,
                       cn_offsets_visit_fn fn, void *arg)
{
    return foreach_in(os, group, false, fn, arg);
}

int cn_offsets_foreach_key(const struct cn_offsets *os, const char *group,
                           cn_offsets_visit_fn fn, void *arg)
{
    return foreach_in(os, group, true, fn, arg);
}

int cn_offsets_foreach_group(const struct cn_offsets *os,
                             cn_offsets_group_fn fn, void *arg)
{
    struct hnode *n;
    size_t i;
    int r;

    for (i = 0; i < os->groups.nslots; i++) {
        for (n = os->groups.slots[i]; n; n = n->next) {
            const struct group *g = (const struct group *)n;
            if ((r = fn(arg, g->name, g->ncommitted, g->npending)))
                return r;
        }
    }
    return 0;
}

size_t cn_offsets_count(const struct cn_offsets *os, const char *group)
{
    struct group *g;
    struct name gn;

    if (!group)
        return 0;
    gn = name_of(group);
    g = group_find(os, &gn);
    return g ? g->ncommitted : 0;
}

size_t cn_offsets_pending_count(const struct cn_offsets *os,
                                const char *group)
{
    struct group *g;
    struct name gn;

    if (!group)
        return 0;
    gn = name_of(group);
    g = group_find(os, &gn);
    return g ? g->npending : 0;
}

size_t cn_offsets_ngroups(const struct cn_offsets *os)
{
    return os->groups.n;
}

/* ---- public: transactions ---- */

int cn_offsets_txn_put(struct cn_offsets *os, const char *group,
                       int64_t producer_id, int16_t producer_epoch,
                       const char *topic, int32_t partition,
                       const struct cn_offset_value *v)
{
    struct name gn, tn;

    if (!group || !topic || partition < 0 || producer_id < 0 || !v)
        return CN_EINVAL;
    gn = name_of(group);
    tn = name_of(topic);
    return txn_put_names(os, &gn, producer_id, producer_epoch, &tn,
                         partition, v);
}

/* Ends one pending offset: visible on commit unless the key was
 * committed later outside the transaction; freed either way. */
static void pend_complete(struct cn_offsets *os, struct pend *e, bool commit)
{
    struct part *p = e->part;

    pend_unlink_part(e);
    /* Kafka 4.x keeps whichever commit came later in the log, so a plain
     * commit made while the transaction was open survives it. */
    if (commit && (!p->has_value || p->seq < e->seq)) {
        if (p->has_value) {
            free(p->v.meta);
        } else {
            p->has_value = true;
            p->topic->group->ncommitted++;
        }
        p->v = e->v;
        p->seq = e->seq;
        e->v.meta = NULL;
    }
    free(e->v.meta);
    free(e);
    prune(os, p);
}

size_t cn_offsets_txn_complete(struct cn_offsets *os, int64_t producer_id,
                               bool commit)
{
    return cn_offsets_txn_complete_match(os, producer_id, commit, NULL, NULL);
}

size_t cn_offsets_txn_complete_match(struct cn_offsets *os,
                                     int64_t producer_id, bool commit,
                                     cn_offsets_match_fn match, void *arg)
{
    struct producer *prod = prod_find(os, producer_id);
    struct pend *e, *next;
    size_t n = 0;

    if (!prod)
        return 0;
    for (e = prod->head; e; e = next) {
        next = e->p_next;
        if (match && !match(arg, e->part->topic->group->name))
            continue;
        pend_unlink_prod(e);
        pend_complete(os, e, commit);
        n++;
    }
    prod_release(os, prod);
    return n;
}

bool cn_offsets_has_pending(const struct cn_offsets *os, const char *group,
                            const char *topic, int32_t partition)
{
    struct name gn, tn;
    struct part *p;

    if (!group || !topic)
        return false;
    gn = name_of(group);
    tn = name_of(topic);
    p = lookup(os, &gn, &tn, partition);
    return p && p->npending > 0;
}

/* ---- public: retention ---- */

static bool expired(const struct val *v, int64_t now_ms, int64_t retention_ms)
{
    if (v->expire_ts >= 0)
        return now_ms >= v->expire_ts;
    if (retention_ms < 0 || v->commit_ts > now_ms)
        return false;
    /* commit_ts <= now_ms, so the unsigned difference is exact even for a
     * wild timestamp read from disk. */
    return (uint64_t)now_ms - (uint64_t)v->commit_ts >= (uint64_t)retention_ms;
}

int cn_offsets_expire(struct cn_offsets *os, const char *group,
                      int64_t now_ms, int64_t retention_ms,
                      cn_offsets_visit_fn on_expired, void *arg)
{
    struct hnode *tn, *tnext, *pn, *pnext;
    struct cn_offset_value v;
    struct group *g;
    struct name gn;
    size_t i, j;
    int n = 0, stop = 0;

    if (!group)
        return 0;
    gn = name_of(group);
    if (!(g = group_find(os, &gn)))
        return 0;
    for (i = 0; i < g->topics.nslots && !stop; i++) {
        for (tn = g->topics.slots[i]; tn && !stop; tn = tnext) {
            struct topic *t = (struct topic *)tn;
            tnext = tn->next;
            for (j = 0; j < t->parts.nslots && !stop; j++) {
                for (pn = t->parts.slots[j]; pn; pn = pnext) {
                    struct part *p = (struct part *)pn;
                    pnext = pn->next;
                    if (!p->has_value || p->npending ||
                        !expired(&p->v, now_ms, retention_ms))
                        continue;
                    if (on_expired) {
                        val_out(&p->v, &v);
                        stop = on_expired(arg, t->name, p->partition, &v);
                        if (stop)
                            break;
                    }
                    part_clear_value(p);
                    ht_unlink(&t->parts, &p->hn);
                    free(p);
                    if (n < INT32_MAX)
                        n++;
                }
            }
            topic_release(t);
        }
    }
    group_release(os, g);
    return stop ? stop : n;
}

/* ---- records ---- */

static bool name_ok(const char *s)
{
    return s && strlen(s) <= KAFKA_STRING_MAX;
}

int cn_offsets_tombstone_key(struct cn_wr *key, const char *group,
                             const char *topic, int32_t partition)
{
    struct cn_offset_commit_key k;

    if (!name_ok(group) || !name_ok(topic) || partition < 0)
        return CN_EINVAL;
    cn_offset_commit_key_init(&k);
    k.group = cn_bytes_str(group);
    k.topic = cn_bytes_str(topic);
    k.partition = partition;
    cn_wr_i16(key, CN_OFFSETS_KEY_VERSION);
    cn_offset_commit_key_encode(key, CN_OFFSETS_KEY_VERSION, &k);
    return key->err;
}

int cn_offsets_record(struct cn_wr *key, struct cn_wr *value,
                      const char *group, const char *topic,
                      int32_t partition, const struct cn_offset_value *v)
{
    struct cn_offset_commit_value cv;
    int err;

    if (!v || v->metadata.len > KAFKA_STRING_MAX)
        return CN_EINVAL;
    if ((err = cn_offsets_tombstone_key(key, group, topic, partition)))
        return err;
    cn_offset_commit_value_init(&cv);
    cv.offset = v->offset;
    cv.leader_epoch = v->leader_epoch;
    cv.metadata = v->metadata; /* the codec writes null as empty */
    cv.commit_timestamp = v->commit_timestamp_ms;
    cn_wr_i16(value, CN_OFFSETS_VALUE_VERSION);
    cn_offset_commit_value_encode(value, CN_OFFSETS_VALUE_VERSION, &cv);
    return value->err;
}

static bool has_nul(struct cn_bytes b)
{
    return b.len > 0 && memchr(b.ptr, 0, (size_t)b.len) != NULL;
}

static int decode_value(const uint8_t *value, size_t value_len,
                        struct cn_offset_value *out)
{
    struct cn_offset_commit_value cv;
    struct cn_arena arena;
    struct cn_rd rd;
    int16_t version;
    int err;

    cn_rd_init(&rd, value, value_len);
    version = cn_rd_i16(&rd);
    if (rd.err)
        return cn_corrupt("offsets: truncated value version");
    if (version < CN_OFFSET_COMMIT_VALUE_MIN_VERSION ||
        version > CN_OFFSET_COMMIT_VALUE_MAX_VERSION)
        return cn_corrupt("offsets: unknown value version");
    /* The value has no arrays; metadata is a view into `value`. */
    cn_arena_init(&arena);
    err = cn_offset_commit_value_decode(&rd, &arena, version, &cv);
    cn_arena_fini(&arena);
    if (err)
        return err == CN_ENOMEM ? err : cn_corrupt("offsets: bad value");
    if (cn_rd_left(&rd))
        return cn_corrupt("offsets: trailing bytes after value");
    out->offset = cv.offset;
    out->leader_epoch = cv.leader_epoch;
    out->metadata = cv.metadata;
    out->commit_timestamp_ms = cv.commit_timestamp;
    out->expire_timestamp_ms = cv.expire_timestamp;
    return 0;
}

int cn_offsets_load_record(struct cn_offsets *os, const uint8_t *key,
                           size_t key_len, const uint8_t *value,
                           size_t value_len, int64_t producer_id,
                           bool transactional)
{
    struct cn_offset_commit_key k;
    struct cn_offset_value v;
    struct cn_arena arena;
    struct name gn, tn;
    struct cn_rd rd;
    int16_t version;
    int err;

    if (!key)
        return cn_corrupt("offsets: null key");
    cn_rd_init(&rd, key, key_len);
    version = cn_rd_i16(&rd);
    if (rd.err)
        return cn_corrupt("offsets: truncated key version");
    if (version < 0)
        return cn_corrupt("offsets: negative key version");
    if (version > CN_OFFSET_COMMIT_KEY_MAX_VERSION)
        return CN_OFFSETS_NOT_OFFSET;
    cn_arena_init(&arena);
    err = cn_offset_commit_key_decode(&rd, &arena, version, &k);
    cn_arena_fini(&arena); /* the key has no arrays; views are into key */
    if (err)
        return err == CN_ENOMEM ? err : cn_corrupt("offsets: bad key");
    if (cn_rd_left(&rd))
        return cn_corrupt("offsets: trailing bytes after key");
    if (has_nul(k.group) || has_nul(k.topic))
        return cn_corrupt("offsets: NUL inside a name");
    if (k.partition < 0)
        return cn_corrupt("offsets: negative partition");
    gn = name_of_bytes(k.group);
    tn = name_of_bytes(k.topic);

    if (!value) {
        delete_names(os, &gn, &tn, k.partition);
        return 0;
    }
    if ((err = decode_value(value, value_len, &v)))
        return err;
    if (transactional) {
        if (producer_id < 0)
            return CN_EINVAL;
        return txn_put_names(os, &gn, producer_id, -1, &tn, k.partition,
                             &v);
    }
    return put_names(os, &gn, &tn, k.partition, &v);
}
