/*
 * publish.c - the metadata image made local; see publish.h.
 */
#include <stdlib.h>
#include <string.h>

#include "base/say.h"
#include "meta/image.h"
#include "node/broker_int.h"
#include "node/group_coord.h"
#include "node/lifecycle.h"
#include "node/publish.h"
#include "node/quorum.h"
#include "node/replica.h"
#include "node/txn_exec.h"
#include "proto/kerr.h"
#include "txn/coord.h"

/* Between publishes that left work for later. */
#define RETRY_MS 1000

/* A topic as the last publish saw it in the image. */
struct seen {
    char *name;
    struct cn_uuid id;
};

struct cn_publish {
    struct cn_broker *b;
    uv_timer_t timer; /* one-shot: the publish after applied entries */
    bool scheduled;   /* armed to run at the next loop turn */
    bool stopped;
    int64_t published; /* the image offset last published, -1 none */
    bool again;        /* the last publish left work for later */
    bool orphans_done; /* local topics in no image were deleted */
    struct seen *seen; /* the image's topics at the last publish */
    size_t nseen;
    struct cn_reap_waiter reap; /* a recreated name waits for the reap */
    bool reap_waiting;
    bool kept_warned; /* an internal topic's keeping was logged */
};

static bool is_internal(const char *name)
{
    return name[0] == '_' && name[1] == '_';
}

static bool same_id(const struct cn_uuid *a, const struct cn_uuid *b)
{
    return memcmp(a->b, b->b, 16) == 0;
}

static void on_timer(uv_timer_t *t);

static void schedule(struct cn_publish *pub)
{
    if (pub->scheduled || pub->stopped)
        return;
    pub->scheduled = true;
    uv_timer_start(&pub->timer, on_timer, 0, 0);
}

static void on_reaped(struct cn_broker *b, struct cn_reap_waiter *w)
{
    struct cn_publish *pub = b->publish;
    (void)w;
    if (!pub)
        return;
    pub->reap_waiting = false;
    pub->again = true;
    schedule(pub);
}

static void wait_reap(struct cn_publish *pub)
{
    pub->again = true;
    if (pub->reap_waiting)
        return;
    pub->reap_waiting = true;
    pub->reap.wake = on_reaped;
    cn_reap_wait(pub->b, &pub->reap);
}

static void delete_local(struct cn_publish *pub, struct cn_topic *t,
                         const char *why)
{
    if (is_internal(t->name)) {
        if (pub->kept_warned)
            return;
        pub->kept_warned = true;
        CN_WARN("topic %s: %s, but the coordinators hold it: kept (remove "
                "its directories with the broker stopped to take the "
                "image's)",
                t->name, why);
        return;
    }
    CN_INFO("topic %s: %s: deleting its local logs", t->name, why);
    if (cn_topic_delete(pub->b, t) != KAFKA_NONE)
        pub->again = true;
}

/* The configs the image gives topic it: the broker's defaults and its
 * ConfigRecords. */
static void image_config(struct cn_broker *b, const struct cn_image_topic *it,
                         bool warn, struct cn_topic_config *tc)
{
    cn_topic_config_init_defaults(tc, b->cfg);
    char msg[256];
    for (size_t i = 0; i < it->nconfigs; i++)
        if (cn_topic_config_set(tc, it->configs[i].name, it->configs[i].value,
                                msg, sizeof msg) != 0 &&
            warn)
            /* The controller checked it; a broker of another version
             * may not know the key: the topic still serves. */
            CN_WARN("topic %s: ignoring config %s=%s: %s", it->name,
                    it->configs[i].name, it->configs[i].value, msg);
}

static int16_t create_local(struct cn_publish *pub,
                            const struct cn_image_topic *it,
                            struct cn_topic **out)
{
    struct cn_broker *b = pub->b;
    struct cn_topic_config tc;
    image_config(b, it, true, &tc);
    char msg[256];
    int16_t kerr = cn_topic_create_id(b, cn_bytes_str(it->name), &it->id,
                                      it->nparts, &tc, out, msg, sizeof msg);
    if (kerr)
        CN_ERROR("topic %s: cannot create its local logs: %s", it->name, msg);
    return kerr;
}

/* Whether two configs hold the same overrides with the same values. */
static bool same_overrides(const struct cn_topic_config *a,
                           const struct cn_topic_config *b)
{
    if (a->overrides != b->overrides)
        return false;
    for (int k = 0; k < CN_TOPIC_NKEYS; k++) {
        if (!cn_topic_config_is_override(a, (enum cn_topic_key)k))
            continue;
        char va[64], vb[64];
        struct cn_config_entry ea, eb;
        cn_topic_config_describe(a, (enum cn_topic_key)k, va, sizeof va, &ea);
        cn_topic_config_describe(b, (enum cn_topic_key)k, vb, sizeof vb, &eb);
        if (strcmp(ea.value, eb.value) != 0)
            return false;
    }
    return true;
}

/* An existing topic takes the image's configs when ConfigRecords changed
 * them (AlterConfigs through the controller), persisted first as the
 * single-node AlterConfigs does, so a restart before the next publish
 * still has them. */
static void sync_config(struct cn_publish *pub, struct cn_topic *t,
                        const struct cn_image_topic *it)
{
    struct cn_topic_config tc;
    image_config(pub->b, it, false, &tc);
    if (same_overrides(&t->config, &tc))
        return;
    image_config(pub->b, it, true, &tc);
    struct cn_topic_config old = t->config;
    t->config = tc;
    if (cn_topic_persist(pub->b, t) != 0) {
        t->config = old;
        CN_ERROR("topic %s: cannot persist its configs from the image",
                 t->name);
        pub->again = true;
        return;
    }
    cn_topic_apply_config(t);
    CN_INFO("topic %s: configs from the image applied", t->name);
}

/* Local topic for image topic it, made or grown as the image says;
 * NULL when it cannot be now (publish.h). */
static struct cn_topic *reconcile(struct cn_publish *pub,
                                  const struct cn_image_topic *it)
{
    struct cn_broker *b = pub->b;
    struct cn_bytes name = cn_bytes_str(it->name);
    struct cn_topic *t = cn_topic_find(b, name);
    if (t && !same_id(&t->id, &it->id)) {
        if (is_internal(t->name)) {
            delete_local(pub, t, "the image gives it another id");
            return t; /* kept: its leaders still follow the image */
        }
        delete_local(pub, t, "the image gives it another id");
        t = NULL;
    }
    if (!t) {
        if (cn_topic_doomed(b, name)) {
            wait_reap(pub);
            return NULL;
        }
        if (it->nparts <= 0)
            return NULL;
        if (create_local(pub, it, &t) != KAFKA_NONE) {
            pub->again = true;
            return NULL;
        }
    }
    if (t->partition_count < it->nparts &&
        cn_topic_add_partitions(b, t, it->nparts) != KAFKA_NONE) {
        CN_ERROR("topic %s: cannot add partitions up to %d", t->name,
                 it->nparts);
        pub->again = true;
    }
    return t;
}

static void set_leaders(struct cn_publish *pub, struct cn_topic *t,
                        const struct cn_image_topic *it)
{
    bool txn = strcmp(t->name, CN_TXN_TOPIC) == 0;
    bool offsets = strcmp(t->name, CN_OFFSETS_TOPIC) == 0;
    for (int32_t i = 0; i < t->partition_count && i < it->nparts; i++) {
        struct cn_partition *p = t->partitions[i];
        const struct cn_image_part *ip = &it->parts[i];
        if (!p)
            continue;
        if (p->leader != ip->leader || p->leader_epoch != ip->leader_epoch)
            CN_DEBUG("%s-%d: leader %d at epoch %d", t->name, i, ip->leader,
                     ip->leader_epoch);
        /* Leading with followers, following, or neither; it sets
         * p->leader and p->leader_epoch. */
        cn_replica_partition(pub->b, t, p, ip);
        if (txn)
            cn_txn_exec_lead(pub->b, i, ip->leader == pub->b->node_id,
                             ip->leader_epoch);
        else if (offsets)
            cn_group_coord_lead(pub->b, i, ip->leader == pub->b->node_id,
                                ip->leader_epoch);
    }
}

static void delete_dropped(struct cn_publish *pub, const struct cn_image *img)
{
    for (size_t i = 0; i < pub->nseen; i++) {
        const struct cn_image_topic *it =
            cn_image_topic_find(img, cn_bytes_str(pub->seen[i].name));
        if (it && same_id(&it->id, &pub->seen[i].id))
            continue;
        struct cn_topic *t = cn_topic_find(pub->b,
                                           cn_bytes_str(pub->seen[i].name));
        if (t && same_id(&t->id, &pub->seen[i].id))
            delete_local(pub, t, "deleted from the cluster");
    }
}

/* Orphans: topics this broker has from before, which no image names. */
struct orphan_ctx {
    struct cn_publish *pub;
    const struct cn_image *img;
};

static void delete_orphan(struct cn_topic *t, void *arg)
{
    struct orphan_ctx *oc = arg;
    if (!cn_image_topic_find(oc->img, cn_bytes_str(t->name)))
        delete_local(oc->pub, t, "in no image");
}

/* Whether the image is the cluster's as of this broker's registration:
 * the controller unfences a broker once its heartbeat says it applied
 * that far.  Before (the replay at start, an empty image) a topic
 * missing from the image may just not be applied yet. */
static bool caught_up(struct cn_broker *b, const struct cn_image *img)
{
    const struct cn_image_broker *me = cn_image_broker_find(img, b->node_id);
    int64_t epoch = cn_lifecycle_epoch(b);
    return me && epoch >= 0 && me->epoch == epoch && !me->fenced;
}

static void remember(struct cn_publish *pub, const struct cn_image *img)
{
    size_t n = cn_image_topic_count(img);
    struct seen *s = calloc(n ? n : 1, sizeof *s);
    size_t k = 0;
    if (!s) {
        /* Without the view a drop goes unnoticed until the next start's
         * orphan pass; keep the old one and try again. */
        pub->again = true;
        return;
    }
    for (const struct cn_image_topic *it = cn_image_topic_next(img, NULL);
         it && k < n; it = cn_image_topic_next(img, it)) {
        s[k].name = strdup(it->name);
        if (!s[k].name) {
            pub->again = true;
            break;
        }
        s[k++].id = it->id;
    }
    for (size_t i = 0; i < pub->nseen; i++)
        free(pub->seen[i].name);
    free(pub->seen);
    pub->seen = s;
    pub->nseen = k;
}

static void publish(struct cn_publish *pub)
{
    struct cn_broker *b = pub->b;
    if (b->stopping || !b->quorum)
        return;
    const struct cn_image *img = cn_quorum_image(b->quorum);
    int64_t off = cn_image_offset(img);
    bool cleanup = !pub->orphans_done && caught_up(b, img);
    if (off == pub->published && !pub->again && !cleanup)
        return;
    pub->again = false;
    delete_dropped(pub, img);
    for (const struct cn_image_topic *it = cn_image_topic_next(img, NULL); it;
         it = cn_image_topic_next(img, it)) {
        struct cn_topic *t = reconcile(pub, it);
        /* An internal topic kept with another id keeps its own configs
         * too: they are not the image topic's. */
        if (t && same_id(&t->id, &it->id))
            sync_config(pub, t, it);
        if (t)
            set_leaders(pub, t, it);
    }
    if (cleanup) {
        struct orphan_ctx oc = {pub, img};
        cn_topics_foreach(b, delete_orphan, &oc);
        pub->orphans_done = true;
    }
    cn_replica_published(b);
    remember(pub, img);
    pub->published = off;
}

static void on_timer(uv_timer_t *t)
{
    struct cn_publish *pub = t->data;
    pub->scheduled = false;
    publish(pub);
    /* Work left for a cause no entry or reap will announce (a full
     * disk): tried again later, not at every loop turn. */
    if (pub->again && !pub->reap_waiting && !pub->stopped)
        uv_timer_start(&pub->timer, on_timer, RETRY_MS, 0);
}

void cn_publish_applied(struct cn_broker *b, int64_t offset)
{
    (void)offset; /* the publish reads the image's, which may be newer */
    if (b->stopping)
        return;
    if (!b->publish) {
        struct cn_publish *pub = calloc(1, sizeof *pub);
        if (!pub) {
            CN_ERROR("out of memory: the metadata image is not published "
                     "to the local partitions");
            return;
        }
        pub->b = b;
        pub->published = -1;
        uv_timer_init(b->loop, &pub->timer);
        pub->timer.data = pub;
        b->publish = pub;
    }
    schedule(b->publish);
}

static void on_closed(uv_handle_t *h)
{
    struct cn_publish *pub = h->data;
    for (size_t i = 0; i < pub->nseen; i++)
        free(pub->seen[i].name);
    free(pub->seen);
    free(pub);
}

void cn_publish_stop(struct cn_broker *b)
{
    struct cn_publish *pub = b->publish;
    if (!pub)
        return;
    b->publish = NULL;
    pub->stopped = true;
    if (pub->reap_waiting)
        cn_reap_wait_cancel(b, &pub->reap);
    uv_timer_stop(&pub->timer);
    uv_close((uv_handle_t *)&pub->timer, on_closed);
}

int16_t cn_partition_missing(struct cn_broker *b, struct cn_bytes topic,
                             int32_t part)
{
    if (!b->quorum)
        return KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
    const struct cn_image_topic *t =
        cn_image_topic_find(cn_quorum_image(b->quorum), topic);
    return t && part >= 0 && part < t->nparts
               ? KAFKA_NOT_LEADER_OR_FOLLOWER
               : KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
}
