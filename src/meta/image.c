/*
 * image.c - apply metadata records to the image, and look things up in it
 * (image.h).
 *
 * The rules are KRaft's (MetadataDelta and its ClusterDelta, TopicsDelta,
 * ConfigurationsDelta, FeaturesDelta; PartitionRegistration.merge), with
 * the checks of the controller's replay (ClusterControlManager,
 * ReplicationControlManager): a record naming what the image does not hold
 * is corruption, not something to skip.  Atomicity: image_int.h.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/fnv.h"
#include "meta/image_int.h"

#define INITIAL_BUCKETS 64
#define TOPIC_NAME_MAX 249 /* Kafka's Topic.MAX_NAME_LENGTH */

/* PartitionChangeRecord.Leader: the leader did not change. */
#define NO_LEADER_CHANGE (-2)

/* ---- strings ----------------------------------------------------------- */

/* A NUL-terminated copy of b in *out; a null b is NULL when nullable.  A
 * string with a NUL inside could not be looked up again: corruption. */
static int dup_bytes(struct cn_bytes b, bool nullable, char **out)
{
    char *s;

    if (b.len < 0) {
        if (!nullable)
            return cn_corrupt("metadata: null string");
        *out = NULL;
        return 0;
    }
    if (b.len > 0 && memchr(b.ptr, 0, (size_t)b.len))
        return cn_corrupt("metadata: NUL in a string");
    s = malloc((size_t)b.len + 1);
    if (!s)
        return CN_ENOMEM;
    if (b.len > 0)
        memcpy(s, b.ptr, (size_t)b.len);
    s[b.len] = '\0';
    *out = s;
    return 0;
}

/* strcmp of a C string with bytes, as if b were NUL-terminated. */
static int cmp_str_bytes(const char *s, struct cn_bytes b)
{
    size_t n = strlen(s), m = b.len > 0 ? (size_t)b.len : 0;
    int c = memcmp(s, b.ptr ? (const char *)b.ptr : "", n < m ? n : m);

    if (c)
        return c;
    return n < m ? -1 : n > m ? 1 : 0;
}

/* ---- undo log ---------------------------------------------------------- */

/* Makes room for one more undo record, before the change it undoes. */
static int undo_reserve(struct cn_image *img)
{
    struct undo *u;
    size_t cap;

    if (img->nundo < img->undo_cap)
        return 0;
    cap = img->undo_cap ? img->undo_cap * 2 : 16;
    u = realloc(img->undo, cap * sizeof *u);
    if (!u)
        return CN_ENOMEM;
    img->undo = u;
    img->undo_cap = cap;
    return 0;
}

static struct undo *undo_push(struct cn_image *img, enum undo_kind kind)
{
    struct undo *u = &img->undo[img->nundo++];

    memset(u, 0, sizeof *u);
    u->kind = kind;
    return u;
}

/* ---- brokers ----------------------------------------------------------- */

static void broker_fini(struct cn_image_broker *b)
{
    for (size_t i = 0; i < b->neps; i++) {
        free(b->eps[i].name);
        free(b->eps[i].host);
    }
    free(b->eps);
    free(b->rack);
    memset(b, 0, sizeof *b);
}

/* The index of broker id, or where it would go (*found false). */
static size_t broker_pos(const struct cn_image *img, int32_t id, bool *found)
{
    size_t lo = 0, hi = img->nbrokers;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (img->brokers[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < img->nbrokers && img->brokers[lo].id == id;
    return lo;
}

static struct cn_image_broker *broker_get(struct cn_image *img, int32_t id)
{
    bool found;
    size_t i = broker_pos(img, id, &found);
    return found ? &img->brokers[i] : NULL;
}

/* Inserts b (moved) where id goes; the caller made room. */
static void broker_insert(struct cn_image *img, size_t at,
                          const struct cn_image_broker *b)
{
    memmove(&img->brokers[at + 1], &img->brokers[at],
            (img->nbrokers - at) * sizeof *img->brokers);
    img->brokers[at] = *b;
    img->nbrokers++;
}

static void broker_remove(struct cn_image *img, size_t at)
{
    memmove(&img->brokers[at], &img->brokers[at + 1],
            (img->nbrokers - at - 1) * sizeof *img->brokers);
    img->nbrokers--;
}

static int brokers_reserve(struct cn_image *img)
{
    struct cn_image_broker *nb;
    size_t cap;

    if (img->nbrokers < img->brokers_cap)
        return 0;
    cap = img->brokers_cap ? img->brokers_cap * 2 : 8;
    nb = realloc(img->brokers, cap * sizeof *nb);
    if (!nb)
        return CN_ENOMEM;
    img->brokers = nb;
    img->brokers_cap = cap;
    return 0;
}

static int broker_from_record(const struct cn_register_broker_record *r,
                              struct cn_image_broker *b)
{
    int err = 0;

    memset(b, 0, sizeof *b);
    if (r->broker_id < 0 || r->end_points_len < 0)
        return cn_corrupt("metadata: RegisterBrokerRecord");
    b->id = r->broker_id;
    b->epoch = r->broker_epoch;
    b->incarnation = r->incarnation_id;
    b->fenced = r->fenced;
    b->in_controlled_shutdown = r->in_controlled_shutdown;
    if (r->end_points_len > 0) {
        b->eps = calloc((size_t)r->end_points_len, sizeof *b->eps);
        if (!b->eps)
            return CN_ENOMEM;
    }
    for (int32_t i = 0; i < r->end_points_len && !err; i++) {
        const struct cn_register_broker_record_broker_endpoint *e =
            &r->end_points[i];
        b->neps++;
        b->eps[i].port = e->port;
        b->eps[i].security_protocol = e->security_protocol;
        err = dup_bytes(e->name, false, &b->eps[i].name);
        if (!err)
            err = dup_bytes(e->host, false, &b->eps[i].host);
    }
    if (!err)
        err = dup_bytes(r->rack, true, &b->rack);
    if (err)
        broker_fini(b);
    return err;
}

static int apply_register_broker(struct cn_image *img,
                                 const struct cn_register_broker_record *r)
{
    struct cn_image_broker b;
    struct undo *u;
    bool found;
    size_t at;
    int err;

    err = broker_from_record(r, &b);
    if (!err)
        err = undo_reserve(img);
    if (!err)
        err = brokers_reserve(img);
    if (err) {
        broker_fini(&b);
        return err;
    }
    /* A broker registers again at every start: the new record replaces
     * the old one whole (ClusterDelta.replay). */
    at = broker_pos(img, b.id, &found);
    u = undo_push(img, UNDO_BROKER);
    u->id = b.id;
    u->had = found;
    if (found) {
        u->broker = img->brokers[at];
        img->brokers[at] = b;
    } else {
        broker_insert(img, at, &b);
    }
    return 0;
}

/* The registered broker `id` at `epoch` (ClusterControlManager's
 * getBrokerOrThrow); a change to any other is corruption. */
static struct cn_image_broker *broker_at_epoch(struct cn_image *img,
                                               int32_t id, int64_t epoch)
{
    struct cn_image_broker *b = broker_get(img, id);
    if (!b || b->epoch != epoch)
        return NULL;
    return b;
}

static int apply_unregister_broker(struct cn_image *img,
                                   const struct cn_unregister_broker_record *r)
{
    struct undo *u;
    bool found;
    size_t at;
    int err;

    if (!broker_at_epoch(img, r->broker_id, r->broker_epoch))
        return cn_corrupt("metadata: unregister of an unknown broker");
    err = undo_reserve(img);
    if (err)
        return err;
    at = broker_pos(img, r->broker_id, &found);
    u = undo_push(img, UNDO_BROKER);
    u->id = r->broker_id;
    u->had = true;
    u->broker = img->brokers[at];
    broker_remove(img, at);
    return 0;
}

/* fenced / ics: -1 clear, 0 keep, 1 set (BrokerRegistrationFencingChange;
 * Cairn takes -1 for controlled shutdown too). */
static int set_broker_flags(struct cn_image *img, int32_t id, int64_t epoch,
                            int fenced, int ics)
{
    struct cn_image_broker *b = broker_at_epoch(img, id, epoch);
    struct undo *u;
    int err;

    if (!b)
        return cn_corrupt("metadata: change to an unknown broker");
    if (fenced < -1 || fenced > 1 || ics < -1 || ics > 1)
        return cn_corrupt("metadata: broker registration change value");
    err = undo_reserve(img);
    if (err)
        return err;
    u = undo_push(img, UNDO_BROKER_FLAGS);
    u->id = id;
    u->fenced = b->fenced;
    u->ics = b->in_controlled_shutdown;
    if (fenced)
        b->fenced = fenced > 0;
    if (ics)
        b->in_controlled_shutdown = ics > 0;
    return 0;
}

/* ---- topics ------------------------------------------------------------ */

static uint32_t hash_id(const struct cn_uuid *id)
{
    return cn_fnv1a(id->b, sizeof id->b);
}

static uint32_t hash_name(struct cn_bytes name)
{
    return cn_fnv1a(name.ptr, name.len > 0 ? (size_t)name.len : 0);
}

static struct itopic *topic_by_name(const struct cn_image *img,
                                    struct cn_bytes name)
{
    if (name.len < 0)
        return NULL;
    for (struct itopic *t =
             img->by_name[hash_name(name) & (img->nbuckets - 1)];
         t; t = t->name_next)
        if (cmp_str_bytes(t->pub.name, name) == 0)
            return t;
    return NULL;
}

static struct itopic *topic_by_id(const struct cn_image *img,
                                  const struct cn_uuid *id)
{
    for (struct itopic *t = img->by_id[hash_id(id) & (img->nbuckets - 1)]; t;
         t = t->id_next)
        if (memcmp(t->pub.id.b, id->b, 16) == 0)
            return t;
    return NULL;
}

static void hash_link(struct cn_image *img, struct itopic *t)
{
    size_t mask = img->nbuckets - 1;
    size_t hn = cn_fnv1a_str(t->pub.name) & mask;
    size_t hi = hash_id(&t->pub.id) & mask;

    t->name_next = img->by_name[hn];
    img->by_name[hn] = t;
    t->id_next = img->by_id[hi];
    img->by_id[hi] = t;
}

/* Doubling is best effort: if it cannot allocate, chains grow longer. */
static void hash_grow(struct cn_image *img)
{
    size_t nb = img->nbuckets * 2;
    struct itopic **bn = calloc(nb, sizeof *bn);
    struct itopic **bi = calloc(nb, sizeof *bi);

    if (!bn || !bi) {
        free(bn);
        free(bi);
        return;
    }
    free(img->by_name);
    free(img->by_id);
    img->by_name = bn;
    img->by_id = bi;
    img->nbuckets = nb;
    for (struct itopic *t = img->head; t; t = t->next)
        hash_link(img, t);
}

/* Links t into both tables, and into the list at the tail, or back where
 * it was (`relink`, an undo of its removal: its neighbours are again next
 * to each other). */
static void topic_link(struct cn_image *img, struct itopic *t, bool relink)
{
    if (!relink) {
        t->prev = img->tail;
        t->next = NULL;
    }
    if (t->prev)
        t->prev->next = t;
    else
        img->head = t;
    if (t->next)
        t->next->prev = t;
    else
        img->tail = t;
    img->ntopics++;
    hash_link(img, t);
    if (img->ntopics > img->nbuckets)
        hash_grow(img);
}

/* Unlinks t, keeping its own list pointers for a relink. */
static void topic_unlink(struct cn_image *img, struct itopic *t)
{
    size_t mask = img->nbuckets - 1;
    struct itopic **pp;

    for (pp = &img->by_name[cn_fnv1a_str(t->pub.name) & mask]; *pp != t;
         pp = &(*pp)->name_next)
        ;
    *pp = t->name_next;
    for (pp = &img->by_id[hash_id(&t->pub.id) & mask]; *pp != t;
         pp = &(*pp)->id_next)
        ;
    *pp = t->id_next;
    if (t->prev)
        t->prev->next = t->next;
    else
        img->head = t->next;
    if (t->next)
        t->next->prev = t->prev;
    else
        img->tail = t->prev;
    img->ntopics--;
}

static void part_fini(struct cn_image_part *p)
{
    free(p->replicas); /* isr shares the block */
    memset(p, 0, sizeof *p);
}

static void config_fini(struct cn_image_config *c)
{
    free(c->name);
    free(c->value);
}

static void topic_free(struct itopic *t)
{
    for (int32_t i = 0; i < t->pub.nparts; i++)
        part_fini(&t->pub.parts[i]);
    free(t->pub.parts);
    for (size_t i = 0; i < t->pub.nconfigs; i++)
        config_fini(&t->pub.configs[i]);
    free(t->pub.configs);
    free(t->pub.name);
    free(t);
}

/* Kafka's legal characters are the controller's to enforce; the image only
 * needs a name it can hash, print and compare. */
static bool topic_name_ok(struct cn_bytes name)
{
    return name.len > 0 && name.len <= TOPIC_NAME_MAX;
}

static int apply_topic(struct cn_image *img, const struct cn_topic_record *r)
{
    struct itopic *t;
    int err;

    if (!topic_name_ok(r->name) || cn_uuid_is_zero(&r->topic_id))
        return cn_corrupt("metadata: TopicRecord name or id");
    if (topic_by_name(img, r->name) || topic_by_id(img, &r->topic_id))
        return cn_corrupt("metadata: TopicRecord for an existing topic");
    err = undo_reserve(img);
    if (err)
        return err;
    t = calloc(1, sizeof *t);
    if (!t)
        return CN_ENOMEM;
    err = dup_bytes(r->name, false, &t->pub.name);
    if (err) {
        free(t);
        return err;
    }
    t->pub.id = r->topic_id;
    topic_link(img, t, false);
    undo_push(img, UNDO_TOPIC_ADDED)->t = t;
    return 0;
}

static int apply_remove_topic(struct cn_image *img,
                              const struct cn_remove_topic_record *r)
{
    struct itopic *t = topic_by_id(img, &r->topic_id);
    int err;

    if (!t)
        return cn_corrupt("metadata: RemoveTopicRecord for an unknown topic");
    err = undo_reserve(img);
    if (err)
        return err;
    /* Its partitions and configs go with it (MetadataDelta.replay hands the
     * removal to ConfigurationsDelta too). */
    topic_unlink(img, t);
    undo_push(img, UNDO_TOPIC_REMOVED)->t = t;
    return 0;
}

/* Fills p from replicas and isr, in one block that p->replicas owns. */
static int part_set_arrays(struct cn_image_part *p, const int32_t *replicas,
                           int32_t nreplicas, const int32_t *isr, int32_t nisr)
{
    size_t n = (size_t)nreplicas + (size_t)nisr;
    int32_t *block = malloc((n ? n : 1) * sizeof *block);

    if (!block)
        return CN_ENOMEM;
    if (nreplicas)
        memcpy(block, replicas, (size_t)nreplicas * sizeof *block);
    if (nisr)
        memcpy(block + nreplicas, isr, (size_t)nisr * sizeof *block);
    p->replicas = block;
    p->nreplicas = nreplicas;
    p->isr = block + nreplicas;
    p->nisr = nisr;
    return 0;
}

/* Replaces t's partition idx with *np (moved), keeping the old one in the
 * undo log; the caller reserved the undo slot. */
static void part_replace(struct cn_image *img, struct itopic *t, int32_t idx,
                         const struct cn_image_part *np)
{
    struct undo *u = undo_push(img, UNDO_PART);

    u->t = t;
    u->idx = idx;
    u->part = t->pub.parts[idx];
    t->pub.parts[idx] = *np;
}

static int apply_partition(struct cn_image *img,
                           const struct cn_partition_record *r)
{
    struct itopic *t = topic_by_id(img, &r->topic_id);
    struct cn_image_part np = {0};
    struct undo *u;
    int err;

    if (!t)
        return cn_corrupt("metadata: PartitionRecord for an unknown topic");
    /* Partitions arrive in order, so ids are dense 0..n-1; one already
     * there is replaced (ReplicationControlManager.replay). */
    if (r->partition_id < 0 || r->partition_id > t->pub.nparts ||
        r->replicas_len < 0 || r->isr_len < 0 || r->leader < -1)
        return cn_corrupt("metadata: PartitionRecord");
    err = undo_reserve(img);
    if (!err && r->partition_id == t->pub.nparts &&
        t->pub.nparts == t->parts_cap) {
        int32_t cap = t->parts_cap ? t->parts_cap * 2 : 4;
        struct cn_image_part *parts;

        if (t->parts_cap > INT32_MAX / 2)
            return cn_corrupt("metadata: partition count");
        parts = realloc(t->pub.parts, (size_t)cap * sizeof *parts);
        if (!parts)
            return CN_ENOMEM;
        t->pub.parts = parts;
        t->parts_cap = cap;
    }
    if (!err)
        err = part_set_arrays(&np, r->replicas, r->replicas_len, r->isr,
                              r->isr_len);
    if (err)
        return err;
    np.leader = r->leader;
    np.leader_epoch = r->leader_epoch;
    np.part_epoch = r->partition_epoch;
    if (r->partition_id < t->pub.nparts) {
        part_replace(img, t, r->partition_id, &np);
        return 0;
    }
    u = undo_push(img, UNDO_PARTS_GROWN);
    u->t = t;
    u->idx = t->pub.nparts;
    t->pub.parts[t->pub.nparts++] = np;
    return 0;
}

/*
 * PartitionRegistration.merge: a null array is unchanged; any leader but
 * NO_LEADER_CHANGE (even the same broker) starts a new leader epoch; every
 * record is a new partition epoch.  Adding/removing replicas, directories,
 * ELR and the recovery state are not kept in the image.
 */
static int apply_partition_change(struct cn_image *img,
                                  const struct cn_partition_change_record *r)
{
    struct itopic *t = topic_by_id(img, &r->topic_id);
    const struct cn_image_part *old;
    struct cn_image_part np = {0};
    int err;

    if (!t || r->partition_id < 0 || r->partition_id >= t->pub.nparts)
        return cn_corrupt("metadata: PartitionChangeRecord for an unknown "
                          "partition");
    if (r->leader < NO_LEADER_CHANGE)
        return cn_corrupt("metadata: PartitionChangeRecord leader");
    old = &t->pub.parts[r->partition_id];
    if (old->part_epoch == INT32_MAX ||
        (r->leader != NO_LEADER_CHANGE && old->leader_epoch == INT32_MAX))
        return cn_corrupt("metadata: partition epoch overflow");
    err = undo_reserve(img);
    if (!err)
        err = part_set_arrays(
            &np, r->replicas_len >= 0 ? r->replicas : old->replicas,
            r->replicas_len >= 0 ? r->replicas_len : old->nreplicas,
            r->isr_len >= 0 ? r->isr : old->isr,
            r->isr_len >= 0 ? r->isr_len : old->nisr);
    if (err)
        return err;
    np.leader = old->leader;
    np.leader_epoch = old->leader_epoch;
    if (r->leader != NO_LEADER_CHANGE) {
        np.leader = r->leader;
        np.leader_epoch = old->leader_epoch + 1;
    }
    np.part_epoch = old->part_epoch + 1;
    part_replace(img, t, r->partition_id, &np);
    return 0;
}

/* ---- configs ----------------------------------------------------------- */

/* Where name is in configs[0..n), or would go. */
static size_t config_pos(const struct cn_image_config *configs, size_t n,
                         const char *name, bool *found)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(configs[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < n && strcmp(configs[lo].name, name) == 0;
    return lo;
}

/* One sorted config array, wherever it lives. */
struct cfgs {
    struct cn_image_config **configs;
    size_t *n, *cap;
};

static struct cfgs topic_cfgs(struct itopic *t)
{
    return (struct cfgs){&t->pub.configs, &t->pub.nconfigs, &t->configs_cap};
}

static struct bconfigs *bconfigs_get(const struct cn_image *img,
                                     const char *resource, size_t *at)
{
    size_t lo = 0, hi = img->nbconfigs;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(img->bconfigs[mid].resource, resource) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (at)
        *at = lo;
    if (lo < img->nbconfigs &&
        strcmp(img->bconfigs[lo].resource, resource) == 0)
        return &img->bconfigs[lo];
    return NULL;
}

/* The config group of broker `resource`, made if new (groups stay, empty,
 * so an undo never needs to allocate one). */
static int bconfigs_make(struct cn_image *img, const char *resource,
                         struct bconfigs **out)
{
    size_t at;
    struct bconfigs *g = bconfigs_get(img, resource, &at);

    if (!g) {
        char *res = strdup(resource);
        if (!res)
            return CN_ENOMEM;
        if (img->nbconfigs == img->bconfigs_cap) {
            size_t cap = img->bconfigs_cap ? img->bconfigs_cap * 2 : 4;
            struct bconfigs *ng = realloc(img->bconfigs, cap * sizeof *ng);
            if (!ng) {
                free(res);
                return CN_ENOMEM;
            }
            img->bconfigs = ng;
            img->bconfigs_cap = cap;
        }
        memmove(&img->bconfigs[at + 1], &img->bconfigs[at],
                (img->nbconfigs - at) * sizeof *img->bconfigs);
        g = &img->bconfigs[at];
        memset(g, 0, sizeof *g);
        g->resource = res;
        img->nbconfigs++;
    }
    *out = g;
    return 0;
}

/*
 * Sets name to value in c (both moved in; value NULL deletes) and returns
 * the value it had in *old (moved out, NULL when absent).  Allocates only
 * to insert a new name when the array is full: never when undoing, since
 * arrays do not shrink.  On error nothing moved.
 */
static int cfg_put(struct cfgs c, char **name, char **value, char **old)
{
    bool found;
    size_t at = config_pos(*c.configs, *c.n, *name, &found);
    struct cn_image_config *e;

    *old = NULL;
    if (found) {
        e = &(*c.configs)[at];
        *old = e->value;
        if (*value) {
            e->value = *value;
        } else {
            free(e->name);
            memmove(e, e + 1, (*c.n - at - 1) * sizeof *e);
            (*c.n)--;
        }
        *value = NULL;
        return 0;
    }
    if (!*value)
        return 0;
    if (*c.n == *c.cap) {
        size_t cap = *c.cap ? *c.cap * 2 : 4;
        struct cn_image_config *nc = realloc(*c.configs, cap * sizeof *nc);
        if (!nc)
            return CN_ENOMEM;
        *c.configs = nc;
        *c.cap = cap;
    }
    e = &(*c.configs)[at];
    memmove(e + 1, e, (*c.n - at) * sizeof *e);
    e->name = *name;
    e->value = *value;
    (*c.n)++;
    *name = NULL;
    *value = NULL;
    return 0;
}

static int apply_config(struct cn_image *img, const struct cn_config_record *r)
{
    char *name = NULL, *value = NULL, *uname = NULL, *res = NULL, *old;
    struct bconfigs *g = NULL;
    struct itopic *t = NULL;
    struct cfgs c;
    struct undo *u;
    int err;

    /* ConfigResource.Type: 2 topic, 4 broker; nothing else is kept. */
    if (r->resource_type == 2) {
        t = topic_by_name(img, r->resource_name);
        if (!t)
            return cn_corrupt("metadata: ConfigRecord for an unknown topic");
    } else if (r->resource_type != 4) {
        return cn_corrupt("metadata: ConfigRecord resource type");
    }
    if (r->name.len <= 0)
        return cn_corrupt("metadata: ConfigRecord name");
    err = undo_reserve(img);
    if (!err)
        err = dup_bytes(r->name, false, &name);
    if (!err)
        err = dup_bytes(r->name, false, &uname);
    if (!err)
        err = dup_bytes(r->value, true, &value);
    if (!err && !t)
        err = dup_bytes(r->resource_name, false, &res);
    if (!err && !t)
        err = bconfigs_make(img, res, &g);
    if (!err) {
        c = t ? topic_cfgs(t)
              : (struct cfgs){&g->configs, &g->nconfigs, &g->cap};
        err = cfg_put(c, &name, &value, &old);
    }
    free(name);
    free(value);
    if (err) {
        free(uname);
        free(res);
        return err;
    }
    u = undo_push(img, UNDO_CONFIG);
    u->t = t;
    u->resource = res;
    u->name = uname;
    u->value = old;
    return 0;
}

/* ---- features, producer ids, cluster id -------------------------------- */

static size_t feature_pos(const struct cn_image *img, const char *name,
                          bool *found)
{
    size_t lo = 0, hi = img->nfeatures;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(img->features[mid].name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < img->nfeatures && strcmp(img->features[lo].name, name) == 0;
    return lo;
}

/* Sets feature *name to level (0 deletes).  *name is moved in when a new
 * entry needs it; returns the old level (0: absent) in *old. */
static int feature_put(struct cn_image *img, char **name, int16_t level,
                       int16_t *old)
{
    bool found;
    size_t at = feature_pos(img, *name, &found);
    struct ifeature *f;

    *old = 0;
    if (found) {
        f = &img->features[at];
        *old = f->level;
        if (level) {
            f->level = level;
        } else {
            free(f->name);
            memmove(f, f + 1, (img->nfeatures - at - 1) * sizeof *f);
            img->nfeatures--;
        }
        return 0;
    }
    if (!level)
        return 0;
    if (img->nfeatures == img->features_cap) {
        size_t cap = img->features_cap ? img->features_cap * 2 : 4;
        struct ifeature *nf = realloc(img->features, cap * sizeof *nf);
        if (!nf)
            return CN_ENOMEM;
        img->features = nf;
        img->features_cap = cap;
    }
    f = &img->features[at];
    memmove(f + 1, f, (img->nfeatures - at) * sizeof *f);
    f->name = *name;
    f->level = level;
    *name = NULL;
    img->nfeatures++;
    return 0;
}

static int apply_feature(struct cn_image *img,
                         const struct cn_feature_level_record *r)
{
    char *name = NULL, *uname = NULL;
    struct undo *u;
    int16_t old;
    int err;

    if (r->name.len <= 0 || r->feature_level < 0)
        return cn_corrupt("metadata: FeatureLevelRecord");
    err = undo_reserve(img);
    if (!err)
        err = dup_bytes(r->name, false, &name);
    if (!err)
        err = dup_bytes(r->name, false, &uname);
    if (!err)
        err = feature_put(img, &name, r->feature_level, &old);
    free(name);
    if (err) {
        free(uname);
        return err;
    }
    u = undo_push(img, UNDO_FEATURE);
    u->name = uname;
    u->level = old;
    return 0;
}

static int apply_producer_ids(struct cn_image *img,
                              const struct cn_producer_ids_record *r)
{
    /* A block handed out twice would give two producers one id. */
    if (r->next_producer_id < img->next_pid)
        return cn_corrupt("metadata: ProducerIdsRecord goes backwards");
    img->next_pid = r->next_producer_id;
    return 0;
}

static int apply_cluster_id(struct cn_image *img, struct cn_bytes id)
{
    if (id.len <= 0 || id.len > CN_META_CLUSTER_ID_MAX ||
        memchr(id.ptr, 0, (size_t)id.len))
        return cn_corrupt("metadata: cluster id");
    if (img->cluster_id[0]) {
        if (cmp_str_bytes(img->cluster_id, id) != 0)
            return cn_corrupt("metadata: a second cluster id");
        return 0;
    }
    memcpy(img->cluster_id, id.ptr, (size_t)id.len);
    img->cluster_id[id.len] = '\0';
    return 0;
}

/* ---- entries ----------------------------------------------------------- */

static int apply_one(struct cn_image *img, const struct cn_mrec *r)
{
    switch (r->type) {
    case CN_MREC_REGISTER_BROKER:
        return apply_register_broker(img, &r->u.register_broker);
    case CN_MREC_UNREGISTER_BROKER:
        return apply_unregister_broker(img, &r->u.unregister_broker);
    case CN_MREC_TOPIC: return apply_topic(img, &r->u.topic);
    case CN_MREC_PARTITION: return apply_partition(img, &r->u.partition);
    case CN_MREC_CONFIG: return apply_config(img, &r->u.config);
    case CN_MREC_PARTITION_CHANGE:
        return apply_partition_change(img, &r->u.partition_change);
    case CN_MREC_FENCE_BROKER:
        return set_broker_flags(img, r->u.fence_broker.id,
                                r->u.fence_broker.epoch, 1, 0);
    case CN_MREC_UNFENCE_BROKER:
        return set_broker_flags(img, r->u.unfence_broker.id,
                                r->u.unfence_broker.epoch, -1, 0);
    case CN_MREC_REMOVE_TOPIC:
        return apply_remove_topic(img, &r->u.remove_topic);
    case CN_MREC_FEATURE_LEVEL: return apply_feature(img, &r->u.feature_level);
    case CN_MREC_PRODUCER_IDS:
        return apply_producer_ids(img, &r->u.producer_ids);
    case CN_MREC_BROKER_REGISTRATION_CHANGE:
        return set_broker_flags(
            img, r->u.registration_change.broker_id,
            r->u.registration_change.broker_epoch,
            r->u.registration_change.fenced,
            r->u.registration_change.in_controlled_shutdown);
    case CN_MREC_NO_OP: return 0;
    case CN_MREC_CLUSTER_ID: return apply_cluster_id(img, r->u.cluster_id.id);
    }
    return cn_corrupt("metadata: record type");
}

/* Puts back what u's change replaced; cannot fail (image_int.h). */
static void undo_one(struct cn_image *img, struct undo *u)
{
    struct cn_image_broker *b;
    struct itopic *t = u->t;
    bool found;
    size_t at;

    switch (u->kind) {
    case UNDO_BROKER:
        at = broker_pos(img, u->id, &found);
        if (found) {
            broker_fini(&img->brokers[at]);
            broker_remove(img, at);
        }
        if (u->had)
            broker_insert(img, at, &u->broker);
        u->had = false;
        break;
    case UNDO_BROKER_FLAGS:
        b = broker_get(img, u->id);
        b->fenced = u->fenced;
        b->in_controlled_shutdown = u->ics;
        break;
    case UNDO_TOPIC_ADDED:
        topic_unlink(img, t);
        topic_free(t);
        break;
    case UNDO_TOPIC_REMOVED:
        topic_link(img, t, true);
        u->t = NULL;
        break;
    case UNDO_PART:
        part_fini(&t->pub.parts[u->idx]);
        t->pub.parts[u->idx] = u->part;
        u->part.replicas = NULL;
        break;
    case UNDO_PARTS_GROWN:
        while (t->pub.nparts > u->idx)
            part_fini(&t->pub.parts[--t->pub.nparts]);
        break;
    case UNDO_CONFIG: {
        struct bconfigs *g;
        struct cfgs c;
        char *cur;

        if (t) {
            c = topic_cfgs(t);
        } else {
            g = bconfigs_get(img, u->resource, NULL);
            c = (struct cfgs){&g->configs, &g->nconfigs, &g->cap};
        }
        (void)cfg_put(c, &u->name, &u->value, &cur);
        free(cur);
        break;
    }
    case UNDO_FEATURE: {
        int16_t cur;
        (void)feature_put(img, &u->name, u->level, &cur);
        break;
    }
    }
}

/* Frees what u owns once its entry has committed (or was undone). */
static void undo_fini(struct undo *u)
{
    if (u->kind == UNDO_BROKER && u->had)
        broker_fini(&u->broker);
    if (u->kind == UNDO_TOPIC_REMOVED && u->t)
        topic_free(u->t);
    if (u->kind == UNDO_PART)
        part_fini(&u->part);
    free(u->resource);
    free(u->name);
    free(u->value);
}

int cn_image_apply_recs(struct cn_image *img, const struct cn_mrec *recs,
                        size_t n)
{
    char cluster_id[sizeof img->cluster_id];
    int64_t next_pid = img->next_pid;
    int err = 0;

    memcpy(cluster_id, img->cluster_id, sizeof cluster_id);
    img->nundo = 0;
    for (size_t i = 0; i < n && !err; i++)
        err = apply_one(img, &recs[i]);
    if (err) {
        for (size_t i = img->nundo; i-- > 0;)
            undo_one(img, &img->undo[i]);
        memcpy(img->cluster_id, cluster_id, sizeof cluster_id);
        img->next_pid = next_pid;
    }
    for (size_t i = 0; i < img->nundo; i++)
        undo_fini(&img->undo[i]);
    img->nundo = 0;
    return err;
}

int cn_image_apply(struct cn_image *img, int64_t offset,
                   const struct cn_mrec *recs, size_t n)
{
    int err;

    if (offset <= img->offset)
        return 0;
    err = cn_image_apply_recs(img, recs, n);
    if (!err)
        img->offset = offset;
    return err;
}

int cn_image_apply_entry(struct cn_image *img, int64_t offset,
                         const uint8_t *buf, size_t len)
{
    struct cn_arena arena;
    struct cn_mrec *recs;
    size_t n;
    int err;

    if (offset <= img->offset)
        return 0;
    cn_arena_init(&arena);
    err = cn_meta_entry_decode(buf, len, &arena, &recs, &n);
    if (!err)
        err = cn_image_apply(img, offset, recs, n);
    cn_arena_fini(&arena);
    return err;
}

/* ---- life and look-ups ------------------------------------------------- */

struct cn_image *cn_image_new(void)
{
    struct cn_image *img = calloc(1, sizeof *img);

    if (!img)
        return NULL;
    img->offset = -1;
    img->nbuckets = INITIAL_BUCKETS;
    img->by_name = calloc(img->nbuckets, sizeof *img->by_name);
    img->by_id = calloc(img->nbuckets, sizeof *img->by_id);
    if (!img->by_name || !img->by_id) {
        cn_image_free(img);
        return NULL;
    }
    return img;
}

void cn_image_free(struct cn_image *img)
{
    struct itopic *t, *next;

    if (!img)
        return;
    for (size_t i = 0; i < img->nbrokers; i++)
        broker_fini(&img->brokers[i]);
    free(img->brokers);
    for (t = img->head; t; t = next) {
        next = t->next;
        topic_free(t);
    }
    free(img->by_name);
    free(img->by_id);
    for (size_t i = 0; i < img->nfeatures; i++)
        free(img->features[i].name);
    free(img->features);
    for (size_t i = 0; i < img->nbconfigs; i++) {
        for (size_t j = 0; j < img->bconfigs[i].nconfigs; j++)
            config_fini(&img->bconfigs[i].configs[j]);
        free(img->bconfigs[i].configs);
        free(img->bconfigs[i].resource);
    }
    free(img->bconfigs);
    free(img->undo);
    free(img);
}

int64_t cn_image_offset(const struct cn_image *img)
{
    return img->offset;
}

const char *cn_image_cluster_id(const struct cn_image *img)
{
    return img->cluster_id;
}

size_t cn_image_broker_count(const struct cn_image *img)
{
    return img->nbrokers;
}

const struct cn_image_broker *cn_image_broker_at(const struct cn_image *img,
                                                 size_t i)
{
    return i < img->nbrokers ? &img->brokers[i] : NULL;
}

const struct cn_image_broker *cn_image_broker_find(const struct cn_image *img,
                                                   int32_t id)
{
    bool found;
    size_t i = broker_pos(img, id, &found);
    return found ? &img->brokers[i] : NULL;
}

const struct cn_image_topic *
cn_image_topic_next(const struct cn_image *img,
                    const struct cn_image_topic *prev)
{
    const struct itopic *t = prev ? itopic_of(prev)->next : img->head;
    return t ? &t->pub : NULL;
}

size_t cn_image_topic_count(const struct cn_image *img)
{
    return img->ntopics;
}

const struct cn_image_topic *cn_image_topic_find(const struct cn_image *img,
                                                 struct cn_bytes name)
{
    const struct itopic *t = topic_by_name(img, name);
    return t ? &t->pub : NULL;
}

const struct cn_image_topic *cn_image_topic_find_id(const struct cn_image *img,
                                                    const struct cn_uuid *id)
{
    const struct itopic *t = topic_by_id(img, id);
    return t ? &t->pub : NULL;
}

int16_t cn_image_feature(const struct cn_image *img, const char *name)
{
    bool found;
    size_t i = feature_pos(img, name, &found);
    return found ? img->features[i].level : 0;
}

int64_t cn_image_next_producer_id(const struct cn_image *img)
{
    return img->next_pid;
}

const char *cn_image_broker_config(const struct cn_image *img,
                                   const char *resource, const char *name)
{
    const struct bconfigs *g = bconfigs_get(img, resource, NULL);
    bool found;
    size_t i;

    if (!g)
        return NULL;
    i = config_pos(g->configs, g->nconfigs, name, &found);
    return found ? g->configs[i].value : NULL;
}

const char *cn_image_topic_config(const struct cn_image_topic *t,
                                  const char *name)
{
    bool found;
    size_t i = config_pos(t->configs, t->nconfigs, name, &found);
    return found ? t->configs[i].value : NULL;
}
