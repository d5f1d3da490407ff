/*
 * replica.c - partition replication in cluster mode; see replica.h.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/say.h"
#include "meta/image.h"
#include "node/broker_int.h"
#include "node/ctlcall.h"
#include "node/lifecycle.h"
#include "node/peer.h"
#include "node/quorum.h"
#include "node/replica.h"
#include "partition/epochs.h"
#include "partition/follow.h"
#include "partition/isr.h"
#include "proto/batch.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

/* Fetch v17: ReplicaState (v15), topic ids (v13), DivergingEpoch (v12). */
#define FETCH_VERSION 17
/* A fetch is answered within replica.fetch.wait.max.ms; past this much
 * more the leader is taken as unreachable (Kafka's request.timeout.ms). */
#define FETCH_TIMEOUT_MS 30000
/* The period of deadline checks for acks=all waiters and of the ISR
 * check (which also runs no more often than lag/2, as Kafka's). */
#define TICK_MS 100
/* An AlterPartition gets this long to find the controller. */
#define ALTER_TIMEOUT_MS 30000
/* A fetch refused because the leader's image and ours disagree is
 * tried again after this long: one of them catches up within a metadata
 * round trip. */
#define METADATA_RETRY_MS 100
/* Frames a follower accepts: the response limit plus headroom for one
 * batch larger than it (a leader still sends one). */
#define FETCH_FRAME_SLACK (64 * 1024 * 1024)

/* One partition a fetcher follows. */
struct fpart {
    struct cn_uuid topic_id;
    int32_t index;
    int32_t leader_epoch; /* the image's: Fetch's current_leader_epoch */
    int64_t retry_ms;     /* monotonic: not fetched before; 0 now */
};

/* Fetches from one leader broker every partition followed there. */
struct cn_replica_fetcher {
    struct cn_replica *r;
    int32_t leader;
    char host[CN_CONFIG_HOST_MAX];
    int port;
    struct cn_peer *peer;
    struct fpart *parts;
    size_t nparts, cap;
    bool inflight; /* a Fetch is out */
    bool syncing;  /* waiting for our sync round before the next */
    bool closing;  /* released: freed once the timer closed and no sync
                     * round holds the waiter */
    bool timer_closed;
    struct cn_sync_waiter waiter;
    uv_timer_t timer; /* backoff */
    struct cn_replica_fetcher *next;
    int64_t error_log_ms; /* rate limit of its error lines */
};

struct cn_replica {
    struct cn_broker *b;
    struct cn_replica_fetcher *fetchers;
    struct cn_hw_wait *waits; /* acks=all produces */
    uv_timer_t tick;          /* waits' deadlines, ISR checks */
    uv_timer_t wake;          /* deferred: high watermarks moved */
    bool wake_armed;
    int64_t next_isr_check_ms;
    bool stopped;
    int handles_open;
    struct cn_replica_stats stats;
};

static void fetcher_kick(struct cn_replica_fetcher *f);

/* ---- helpers -------------------------------------------------------- */

static bool same_id(const struct cn_uuid *a, const struct cn_uuid *b)
{
    return memcmp(a->b, b->b, 16) == 0;
}

static int64_t now_ms(void)
{
    return cn_clock_mono_ms();
}

/* What this broker holds on disk of p: the synced offset under group
 * commit, else the log end (the same rule as the high watermark of a
 * partition of one replica). */
static int64_t durable_end(const struct cn_broker *b,
                           const struct cn_partition *p)
{
    return b->cfg->cairn_fsync_group_commit ? cn_log_synced_offset(p->log)
                                            : cn_log_end_offset(p->log);
}

static void on_tick(uv_timer_t *t);
static void on_wake(uv_timer_t *t);

static struct cn_replica *get(struct cn_broker *b)
{
    if (b->replica)
        return b->replica->stopped ? NULL : b->replica;
    if (b->stopping || !b->cfg->cluster_mode)
        return NULL;
    struct cn_replica *r = calloc(1, sizeof *r);
    if (!r) {
        CN_ERROR("out of memory: partition replication cannot start");
        return NULL;
    }
    r->b = b;
    uv_timer_init(b->loop, &r->tick);
    uv_timer_init(b->loop, &r->wake);
    r->tick.data = r->wake.data = r;
    r->handles_open = 2;
    uv_timer_start(&r->tick, on_tick, TICK_MS, TICK_MS);
    b->replica = r;
    return r;
}

/* High watermarks or ISRs moved: parked fetches and acks=all waiters look
 * again, from the loop rather than from inside the caller (a fetch
 * handler, a sync round). */
static void hw_moved(struct cn_broker *b)
{
    struct cn_replica *r = b->replica;
    if (!r || r->stopped || r->wake_armed)
        return;
    r->wake_armed = true;
    uv_timer_start(&r->wake, on_wake, 0, 0);
}

static void check_waits(struct cn_replica *r, bool deadlines)
{
    int64_t now = deadlines ? now_ms() : 0;
    struct cn_hw_wait **pp = &r->waits;
    while (*pp) {
        struct cn_hw_wait *w = *pp;
        bool final = r->stopped || (deadlines && now >= w->deadline_ms);
        /* Unlinked before check: it answers and may free itself. */
        *pp = w->next;
        w->next = NULL;
        if (w->check(r->b, w, final))
            continue;
        w->next = *pp;
        *pp = w;
        pp = &w->next;
    }
}

static void on_wake(uv_timer_t *t)
{
    struct cn_replica *r = t->data;
    r->wake_armed = false;
    if (r->stopped)
        return;
    r->b->data_visible(r->b);
    check_waits(r, false);
}

/* The broker epoch the image holds for each of s's replicas, in their
 * order (partition/isr.h): CN_ISR_INELIGIBLE for one that is fenced, in
 * controlled shutdown or not registered, which may not join the ISR. */
static void image_epochs(struct cn_broker *b, const struct cn_isr *s,
                         int64_t *out)
{
    const struct cn_image *img = cn_quorum_image(b->quorum);
    for (int32_t i = 0; i < s->nreplicas; i++) {
        const struct cn_image_broker *ib =
            cn_image_broker_find(img, s->replicas[i]);
        out[i] = !ib || ib->fenced || ib->in_controlled_shutdown
                     ? CN_ISR_INELIGIBLE
                     : ib->epoch;
    }
}

bool cn_replica_durable(struct cn_broker *b, struct cn_partition *p,
                        int64_t end)
{
    if (!p->topic)
        return false; /* a deleted topic's, waiting for its reap */
    int64_t before = p->high_watermark;
    if (p->isr && b->quorum) {
        int64_t epochs[CN_ISR_MAX_REPLICAS];
        image_epochs(b, p->isr, epochs);
        if (cn_isr_advance_hw_at(p->isr, end, cn_log_end_offset(p->log),
                                 now_ms(), b->cfg->replica_lag_time_max_ms,
                                 epochs) &&
            p->isr->hw > p->high_watermark)
            p->high_watermark = p->isr->hw;
    } else if (p->leader == b->node_id && end > p->high_watermark) {
        p->high_watermark = end;
    }
    if (p->high_watermark == before)
        return false;
    hw_moved(b);
    return true;
}

void cn_replica_appended(struct cn_broker *b, struct cn_partition *p)
{
    if (p->isr)
        hw_moved(b);
}

int32_t cn_replica_isr_size(const struct cn_partition *p)
{
    return p->isr ? p->isr->nisr : 1;
}

void cn_replica_hw_wait(struct cn_broker *b, struct cn_hw_wait *w)
{
    struct cn_replica *r = get(b);
    if (!r) {
        w->check(b, w, true);
        return;
    }
    if (w->check(b, w, false))
        return;
    w->next = r->waits;
    r->waits = w;
}

static struct cn_partition *find_part(struct cn_broker *b,
                                      const struct cn_uuid *id, int32_t index)
{
    struct cn_topic *t = cn_topic_find_id(b, id);
    if (!t || index < 0 || index >= t->partition_count)
        return NULL;
    return t->partitions[index];
}

/* A coordinator's record or a marker waiting for the ISR. */
struct hw_await {
    struct cn_hw_wait hw; /* first */
    struct cn_uuid topic_id;
    int32_t index;
    int32_t leader_epoch;
    int64_t end;
    int32_t min_isr;
    void (*done)(struct cn_broker *b, void *arg, int16_t kerr);
    void *arg;
};

static bool await_check(struct cn_broker *b, struct cn_hw_wait *w, bool final)
{
    struct hw_await *a = (struct hw_await *)w;
    struct cn_partition *p = find_part(b, &a->topic_id, a->index);
    int16_t kerr;
    if (!p || p->leader != b->node_id || p->leader_epoch != a->leader_epoch)
        kerr = KAFKA_NOT_LEADER_OR_FOLLOWER;
    else if (p->high_watermark >= a->end)
        kerr = cn_replica_isr_size(p) < a->min_isr
                   ? KAFKA_NOT_ENOUGH_REPLICAS_AFTER_APPEND
                   : KAFKA_NONE;
    else if (final)
        kerr = KAFKA_REQUEST_TIMED_OUT;
    else
        return false;
    void (*done)(struct cn_broker *, void *, int16_t) = a->done;
    void *arg = a->arg;
    free(a);
    done(b, arg, kerr);
    return true;
}

int cn_replica_await_hw(struct cn_broker *b, struct cn_partition *p,
                        int64_t end, int32_t min_isr, int64_t timeout_ms,
                        void (*done)(struct cn_broker *b, void *arg,
                                     int16_t kerr),
                        void *arg)
{
    struct hw_await *a = calloc(1, sizeof *a);
    if (!a)
        return CN_ENOMEM;
    a->hw.check = await_check;
    a->hw.deadline_ms = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    a->topic_id = p->topic ? p->topic->id : (struct cn_uuid){0};
    a->index = p->index;
    a->leader_epoch = p->leader_epoch;
    a->end = end;
    a->min_isr = min_isr;
    a->done = done;
    a->arg = arg;
    cn_replica_hw_wait(b, &a->hw);
    return 0;
}

void cn_replica_stats(const struct cn_broker *b, struct cn_replica_stats *out)
{
    if (b->replica)
        *out = b->replica->stats;
    else
        memset(out, 0, sizeof *out);
}

/* ---- leader: the ISR through the controller ------------------------------ */

struct alter_ctx {
    struct cn_broker *b;
    struct cn_uuid topic_id;
    int32_t index;
    int32_t leader_epoch;
    int32_t old_nisr;
};

static void on_altered(void *arg, const struct cn_ctlcall_alter_result *res)
{
    struct alter_ctx *ac = arg;
    struct cn_broker *b = ac->b;
    struct cn_partition *p = b->stopping
                                 ? NULL
                                 : find_part(b, &ac->topic_id, ac->index);
    /* The answer to a leadership that ended or changed epoch meanwhile is
     * the image's business now. */
    if (p && p->isr && p->isr->leader_epoch == ac->leader_epoch) {
        cn_isr_change_done(p->isr, res->error, res->isr, res->nisr,
                           res->leader_epoch, res->partition_epoch);
        if (res->error) {
            CN_WARN("%s-%d: ISR change refused by the controller: %s",
                    p->topic->name, p->index, cn_kerr_name(res->error));
        } else if (b->replica) {
            if (res->nisr < ac->old_nisr)
                b->replica->stats.isr_shrinks++;
            else if (res->nisr > ac->old_nisr)
                b->replica->stats.isr_expands++;
            CN_INFO("%s-%d: ISR now has %d of %d replicas (partition epoch "
                    "%d)",
                    p->topic->name, p->index, res->nisr, p->isr->nreplicas,
                    res->partition_epoch);
        }
        /* A smaller ISR can let the high watermark move at once. */
        cn_replica_durable(b, p, durable_end(b, p));
        hw_moved(b);
    }
    free(ac);
}

/* Proposes the ISR change p's leader state wants now, if any. */
static void maybe_alter(struct cn_broker *b, struct cn_partition *p)
{
    struct cn_isr *s = p->isr;
    if (!s || s->pending || !b->quorum || !p->topic)
        return;
    int32_t isr[CN_ISR_MAX_REPLICAS];
    int32_t n = 0;
    int64_t img_epochs[CN_ISR_MAX_REPLICAS];
    image_epochs(b, s, img_epochs);
    if (!cn_isr_want_change_img(s, now_ms(), b->cfg->replica_lag_time_max_ms,
                                cn_log_end_offset(p->log), img_epochs, isr,
                                &n))
        return;
    /* Each member with the broker epoch the image has for it: the
     * controller refuses a member that re-registered since. */
    int64_t epochs[CN_ISR_MAX_REPLICAS];
    for (int32_t i = 0; i < n; i++) {
        epochs[i] = -1;
        for (int32_t r = 0; r < s->nreplicas; r++)
            if (s->replicas[r] == isr[i] && img_epochs[r] >= 0)
                epochs[i] = img_epochs[r];
    }
    struct alter_ctx *ac = calloc(1, sizeof *ac);
    if (!ac)
        return;
    ac->b = b;
    ac->topic_id = p->topic->id;
    ac->index = p->index;
    ac->leader_epoch = s->leader_epoch;
    ac->old_nisr = s->nisr;
    cn_isr_change_sent(s, isr, n);
    CN_INFO("%s-%d: asking the controller for an ISR of %d (now %d)",
            p->topic->name, p->index, n, s->nisr);
    if (cn_ctlcall_alter_partition(b, &p->topic->id, p->index, s->leader_epoch,
                                   s->partition_epoch, isr, epochs, n,
                                   ALTER_TIMEOUT_MS, on_altered, ac) != 0) {
        struct cn_ctlcall_alter_result res = {
            .error = KAFKA_REQUEST_TIMED_OUT};
        cn_isr_change_done(s, res.error, NULL, 0, -1, -1);
        free(ac);
    }
}

int16_t cn_replica_follower_fetch(struct cn_broker *b, struct cn_partition *p,
                                  int32_t replica_id, int64_t replica_epoch,
                                  int64_t fetch_offset)
{
    if (!p->isr || p->leader != b->node_id)
        return KAFKA_NOT_LEADER_OR_FOLLOWER;
    /* A fetch from an incarnation of the follower older than the one the
     * image knows (a process that was replaced) counts for nothing. */
    const struct cn_image_broker *ib =
        cn_image_broker_find(cn_quorum_image(b->quorum), replica_id);
    if (replica_epoch >= 0 && ib && ib->epoch > replica_epoch)
        return KAFKA_NOT_LEADER_OR_FOLLOWER;
    int16_t kerr = cn_isr_on_fetch(p->isr, replica_id, replica_epoch,
                                   fetch_offset, cn_log_end_offset(p->log),
                                   now_ms());
    if (kerr)
        return kerr;
    cn_replica_durable(b, p, durable_end(b, p));
    maybe_alter(b, p);
    return KAFKA_NONE;
}

static void isr_check_topic(struct cn_topic *t, void *arg)
{
    struct cn_broker *b = arg;
    for (int32_t i = 0; i < t->partition_count; i++)
        if (t->partitions[i] && t->partitions[i]->isr)
            maybe_alter(b, t->partitions[i]);
}

static void on_tick(uv_timer_t *t)
{
    struct cn_replica *r = t->data;
    if (r->stopped)
        return;
    int64_t now = now_ms();
    check_waits(r, true);
    if (now >= r->next_isr_check_ms) {
        int64_t every = r->b->cfg->replica_lag_time_max_ms / 2;
        r->next_isr_check_ms = now + (every > TICK_MS ? every : TICK_MS);
        cn_topics_foreach(r->b, isr_check_topic, r->b);
    }
    /* A fetcher in backoff fetches once its partitions' time comes. */
    for (struct cn_replica_fetcher *f = r->fetchers; f; f = f->next)
        fetcher_kick(f);
}

/* ---- leading and following, from the image ----------------------------- */

static void stop_leading(struct cn_broker *b, struct cn_partition *p)
{
    if (!p->isr)
        return;
    free(p->isr);
    p->isr = NULL;
    hw_moved(b); /* acks=all waiters on it answer NOT_LEADER_OR_FOLLOWER */
}

static void lead(struct cn_broker *b, struct cn_partition *p,
                 const struct cn_image_part *ip)
{
    struct cn_replica *r = b->replica;
    bool new_term = p->leader != b->node_id ||
                    p->leader_epoch != ip->leader_epoch;
    if (new_term) {
        int err = cn_part_become_leader(p, ip->leader_epoch);
        if (err)
            CN_ERROR("%s-%d: cannot record leader epoch %d: %s",
                     p->topic->name, p->index, ip->leader_epoch,
                     cn_strerror(err));
        if (r)
            r->stats.leader_elections++;
    }
    p->leader = ip->leader;
    p->leader_epoch = ip->leader_epoch;
    if (ip->nreplicas <= 1) {
        stop_leading(b, p);
        cn_replica_durable(b, p, durable_end(b, p));
        return;
    }
    if (p->isr && !new_term && p->isr->partition_epoch == ip->part_epoch)
        return;
    bool fresh = !p->isr;
    if (fresh) {
        p->isr = calloc(1, sizeof *p->isr);
        if (!p->isr) {
            CN_ERROR("%s-%d: out of memory for its followers' state",
                     p->topic->name, p->index);
            return;
        }
    }
    int64_t start = cn_epochs_start_of(p->epochs, ip->leader_epoch);
    if (start < 0)
        start = cn_log_end_offset(p->log);
    if (cn_isr_reset(p->isr, b->node_id, ip->replicas, ip->nreplicas, ip->isr,
                     ip->nisr, ip->leader_epoch, ip->part_epoch, start,
                     p->high_watermark, now_ms()) != 0) {
        CN_ERROR("%s-%d: %d replicas are more than Cairn replicates",
                 p->topic->name, p->index, ip->nreplicas);
        free(p->isr);
        p->isr = NULL;
        return;
    }
    cn_replica_durable(b, p, durable_end(b, p));
    hw_moved(b);
}

static struct fpart *fetcher_find(struct cn_replica_fetcher *f,
                                  const struct cn_uuid *id, int32_t index)
{
    for (size_t i = 0; i < f->nparts; i++)
        if (f->parts[i].index == index && same_id(&f->parts[i].topic_id, id))
            return &f->parts[i];
    return NULL;
}

static void fetcher_remove(struct cn_partition *p)
{
    struct cn_replica_fetcher *f = p->fetcher;
    if (!f)
        return;
    p->fetcher = NULL;
    if (!p->topic)
        return;
    struct fpart *fp = fetcher_find(f, &p->topic->id, p->index);
    if (fp)
        *fp = f->parts[--f->nparts];
}

/* The endpoint of broker id a follower fetches from: the inter-broker
 * listener's (inter.broker.listener.name, else PLAINTEXT, else the
 * first).  Returns false when the image has none. */
bool cn_replica_broker_endpoint(struct cn_broker *b, int32_t id, char *host,
                                size_t hostsz, int *port)
{
    const struct cn_image_broker *ib =
        cn_image_broker_find(cn_quorum_image(b->quorum), id);
    if (!ib || ib->neps == 0)
        return false;
    const char *want = NULL;
    if (cn_config_get(b->cfg, "inter.broker.listener.name", &want, NULL) !=
            0 ||
        !want || !*want)
        want = "PLAINTEXT";
    const struct cn_image_endpoint *ep = &ib->eps[0];
    for (size_t i = 0; i < ib->neps; i++)
        if (strcmp(ib->eps[i].name, want) == 0) {
            ep = &ib->eps[i];
            break;
        }
    if (strlen(ep->host) >= hostsz)
        return false;
    strcpy(host, ep->host);
    *port = ep->port;
    return true;
}

static struct cn_replica_fetcher *fetcher_get(struct cn_replica *r,
                                              int32_t leader)
{
    for (struct cn_replica_fetcher *f = r->fetchers; f; f = f->next)
        if (f->leader == leader && !f->closing)
            return f;
    struct cn_replica_fetcher *f = calloc(1, sizeof *f);
    if (!f)
        return NULL;
    f->r = r;
    f->leader = leader;
    f->port = -1;
    uv_timer_init(r->b->loop, &f->timer);
    f->timer.data = f;
    f->next = r->fetchers;
    r->fetchers = f;
    return f;
}

static void follow(struct cn_broker *b, struct cn_partition *p,
                   const struct cn_image_part *ip)
{
    stop_leading(b, p);
    p->leader = ip->leader;
    p->leader_epoch = ip->leader_epoch;
    struct cn_replica *r = b->replica;
    if (ip->leader < 0 || !r) {
        fetcher_remove(p);
        return;
    }
    if (p->fetcher && p->fetcher->leader != ip->leader)
        fetcher_remove(p);
    struct cn_replica_fetcher *f = p->fetcher ? p->fetcher
                                              : fetcher_get(r, ip->leader);
    if (!f)
        return;
    struct fpart *fp = fetcher_find(f, &p->topic->id, p->index);
    if (!fp) {
        if (f->nparts == f->cap) {
            size_t cap = f->cap ? f->cap * 2 : 16;
            struct fpart *v = realloc(f->parts, cap * sizeof *v);
            if (!v)
                return;
            f->parts = v;
            f->cap = cap;
        }
        fp = &f->parts[f->nparts++];
        fp->topic_id = p->topic->id;
        fp->index = p->index;
    }
    fp->leader_epoch = ip->leader_epoch;
    fp->retry_ms = 0;
    p->fetcher = f;
}

void cn_replica_partition(struct cn_broker *b, struct cn_topic *t,
                          struct cn_partition *p,
                          const struct cn_image_part *ip)
{
    (void)t;
    if (!get(b) || !ip) {
        stop_leading(b, p);
        fetcher_remove(p);
        return;
    }
    bool replica = false;
    for (int32_t i = 0; i < ip->nreplicas; i++)
        replica = replica || ip->replicas[i] == b->node_id;
    if (ip->leader == b->node_id) {
        fetcher_remove(p);
        lead(b, p, ip);
    } else if (replica) {
        follow(b, p, ip);
    } else {
        /* Not a replica (#14 still keeps a log of every partition on
         * every broker): it takes no data. */
        stop_leading(b, p);
        fetcher_remove(p);
        p->leader = ip->leader;
        p->leader_epoch = ip->leader_epoch;
    }
}

void cn_replica_forget(struct cn_broker *b, struct cn_partition *p)
{
    (void)b;
    fetcher_remove(p);
    free(p->isr);
    p->isr = NULL;
    hw_moved(b);
}

/* ---- follower: the fetch loop ---------------------------------------------- */

static void fetcher_free_if_done(struct cn_replica_fetcher *f)
{
    if (f->closing && f->timer_closed && !f->syncing && !f->inflight) {
        free(f->parts);
        free(f);
    }
}

static void on_fetcher_timer_closed(uv_handle_t *h)
{
    struct cn_replica_fetcher *f = h->data;
    f->timer_closed = true;
    fetcher_free_if_done(f);
}

/* Stops f (unlinked by the caller): its peer's calls end with
 * -ECANCELED, then it is freed once nothing refers to it. */
static void fetcher_release(struct cn_replica_fetcher *f)
{
    f->closing = true;
    uv_timer_stop(&f->timer);
    if (f->peer) {
        struct cn_peer *peer = f->peer;
        f->peer = NULL;
        cn_peer_free(peer); /* runs on_fetched with -ECANCELED */
    }
    uv_close((uv_handle_t *)&f->timer, on_fetcher_timer_closed);
}

static void fetcher_backoff_all(struct cn_replica_fetcher *f)
{
    int64_t at = now_ms() + f->r->b->cfg->replica_fetch_backoff_ms;
    for (size_t i = 0; i < f->nparts; i++)
        if (f->parts[i].retry_ms < at)
            f->parts[i].retry_ms = at;
}

static void log_fetch_error(struct cn_replica_fetcher *f, const char *what,
                            const char *why)
{
    int64_t now = now_ms();
    f->r->stats.fetch_errors++;
    if (now - f->error_log_ms < 10000)
        return;
    f->error_log_ms = now;
    CN_WARN("fetch from leader %d (%s:%d): %s: %s", f->leader, f->host,
            f->port, what, why);
}

static struct cn_part_env part_env(struct cn_broker *b)
{
    return cn_sync_part_env(b);
}

/* Cuts p's log where cn_follow_decide said: to `off` (which may be the
 * log end: only epoch-cache entries from there on go), or, fully, to
 * restart at `off`. */
static void truncate_partition(struct cn_replica_fetcher *f,
                               struct cn_partition *p, struct fpart *fp,
                               bool fully, int64_t off)
{
    struct cn_broker *b = f->r->b;
    struct cn_part_env env = part_env(b);
    int64_t leo = cn_log_end_offset(p->log);
    int err;
    if (fully) {
        CN_WARN("%s-%d: log diverged from leader %d below anything both "
                "hold: emptied, restarting at %lld",
                p->topic->name, p->index, f->leader, (long long)off);
        err = cn_part_truncate_fully(p, &env, off);
    } else if (off < leo) {
        CN_INFO("%s-%d: truncating from %lld to %lld where it diverges "
                "from leader %d",
                p->topic->name, p->index, (long long)leo, (long long)off,
                f->leader);
        err = cn_part_truncate(p, &env, off);
    } else {
        /* An epoch this broker began as leader and never wrote to: its
         * entry goes, or the next fetch diverges at the same place. */
        err = cn_epochs_truncate_from_end(p->epochs, off);
    }
    if (err == CN_EBUSY) {
        fp->retry_ms = now_ms() + 100; /* a cleaner pass or snapshot */
        return;
    }
    if (err) {
        log_fetch_error(f, "truncation", cn_strerror(err));
        fp->retry_ms = now_ms() + b->cfg->replica_fetch_backoff_ms;
        return;
    }
    f->r->stats.truncations++;
}

/* Appends the whole, intact batches of a fetched records blob.  Returns
 * true when something was written. */
static bool append_fetched(struct cn_replica_fetcher *f,
                           struct cn_partition *p, struct fpart *fp,
                           const struct cn_bytes *records)
{
    struct cn_broker *b = f->r->b;
    uint8_t *buf = (uint8_t *)records->ptr;
    size_t len = records->len > 0 ? (size_t)records->len : 0, whole = 0;
    while (whole < len) {
        struct cn_batch_hdr hdr;
        if (cn_batch_hdr_parse(buf + whole, len - whole, &hdr) != 0)
            break; /* a partial batch at the end: the next fetch has it */
        size_t sz = cn_batch_size(&hdr);
        if (cn_batch_compute_crc(buf + whole, sz) != hdr.crc) {
            log_fetch_error(f, "a fetched batch", "CRC mismatch");
            fp->retry_ms = now_ms() + b->cfg->replica_fetch_backoff_ms;
            break;
        }
        whole += sz;
    }
    if (whole == 0)
        return false;
    struct cn_part_env env = part_env(b);
    struct cn_part_append a = {
        .origin = CN_PART_REPLICA,
        .batches = buf,
        .len = whole,
        .what = "a replica append",
        .append_time = -1,
    };
    cn_part_append(p, &env, &a);
    if (a.kerr) {
        log_fetch_error(f, "an append of fetched batches",
                        cn_kerr_name(a.kerr));
        fp->retry_ms = now_ms() + b->cfg->replica_fetch_backoff_ms;
    }
    return a.base_offset >= 0;
}

/* One partition's part of a fetch response.  Returns true when it
 * appended. */
static bool
fetched_partition(struct cn_replica_fetcher *f, const struct cn_uuid *topic_id,
                  const struct cn_fetch_response_partition_data *pd)
{
    struct cn_broker *b = f->r->b;
    struct cn_partition *p = find_part(b, topic_id, pd->partition_index);
    if (!p || p->fetcher != f)
        return false; /* no longer followed from here */
    struct fpart *fp = fetcher_find(f, topic_id, pd->partition_index);
    if (!fp)
        return false;
    if (cn_partition_offline(b, p)) {
        fp->retry_ms = now_ms() + b->cfg->replica_fetch_backoff_ms;
        return false;
    }
    struct cn_follow_log fl = {
        .leo = cn_log_end_offset(p->log),
        .log_start = cn_log_start_offset(p->log),
        .hw = p->high_watermark,
    };
    struct cn_follow_resp fr = {
        .error = pd->error_code,
        .high_watermark = pd->high_watermark,
        .log_start_offset = pd->log_start_offset,
        .diverging_epoch = pd->diverging_epoch.epoch,
        .diverging_end_offset = pd->diverging_epoch.end_offset,
        .has_records = pd->records.len > 0,
        .own_epoch = -1,
        .own_end_offset = -1,
        /* Cairn's leader answers OFFSET_OUT_OF_RANGE with its log start;
         * without an unclean election (never made) a follower is not
         * ahead of its leader's end, so no ListOffsets is needed. */
        .leader_leo = pd->error_code == KAFKA_OFFSET_OUT_OF_RANGE ? fl.leo
                                                                  : -1,
    };
    if (fr.diverging_epoch >= 0 || fr.diverging_end_offset >= 0)
        cn_epochs_end_offset_for(p->epochs, fr.diverging_epoch, fl.leo,
                                 &fr.own_epoch, &fr.own_end_offset);
    struct cn_follow_action act;
    cn_follow_decide(&fl, &fr, &act);
    bool appended = false;
    switch (act.kind) {
    case CN_FOLLOW_APPEND:
        if (fr.has_records)
            appended = append_fetched(f, p, fp, &pd->records);
        break;
    case CN_FOLLOW_TRUNCATE:
    case CN_FOLLOW_TRUNCATE_FULLY:
        truncate_partition(f, p, fp, act.kind == CN_FOLLOW_TRUNCATE_FULLY,
                           act.offset);
        return false;
    case CN_FOLLOW_LIST_OFFSETS:
    case CN_FOLLOW_BACKOFF:
    default:
        /* NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, unknown
         * topic: the leader's image and ours differ for now.  When ours
         * is behind, a publish that changes the partition brings it back
         * at once (follow() sets retry 0); when the leader's is, it
         * catches up within a metadata round trip, and waiting the whole
         * replica.fetch.backoff.ms would hold acks=all that long after
         * every failover. */
        fp->retry_ms = now_ms() +
                       (act.await_metadata ||
                                fr.error == KAFKA_UNKNOWN_LEADER_EPOCH
                            ? METADATA_RETRY_MS
                            : b->cfg->replica_fetch_backoff_ms);
        return false;
    }
    fl.leo = cn_log_end_offset(p->log);
    int64_t hw = p->high_watermark, start = fl.log_start;
    cn_follow_settle(&fl, &fr, &hw, &start);
    /* Never below what this broker already showed, should it lead
     * again before the leader's catches up (it shows nothing now). */
    if (hw > p->high_watermark)
        p->high_watermark = hw;
    /* The leader's log start moved (retention, DeleteRecords). */
    if (start > cn_log_start_offset(p->log) &&
        cn_log_delete_records(p->log, start) == 0)
        cn_partition_after_retention(p);
    return appended;
}

static void on_synced(struct cn_broker *b, struct cn_sync_waiter *w)
{
    struct cn_replica_fetcher *f =
        (struct cn_replica_fetcher *)((char *)w -
                                      offsetof(struct cn_replica_fetcher,
                                               waiter));
    (void)b;
    f->syncing = false;
    if (f->closing) {
        fetcher_free_if_done(f);
        return;
    }
    fetcher_kick(f);
}

static void on_fetched(void *arg, int err, const void *response,
                       struct cn_arena *arena)
{
    struct cn_replica_fetcher *f = arg;
    (void)arena;
    f->inflight = false;
    if (f->closing) {
        fetcher_free_if_done(f);
        return;
    }
    struct cn_broker *b = f->r->b;
    if (err) {
        if (err != -ECANCELED)
            log_fetch_error(f, "fetch", cn_strerror(err));
        fetcher_backoff_all(f);
        fetcher_kick(f);
        return;
    }
    const struct cn_fetch_response *rs = response;
    if (rs->error_code) {
        log_fetch_error(f, "fetch", cn_kerr_name(rs->error_code));
        fetcher_backoff_all(f);
        fetcher_kick(f);
        return;
    }
    bool appended = false;
    for (int32_t i = 0; i < rs->responses_len; i++) {
        const struct cn_fetch_response_fetchable_topic_response *tr =
            &rs->responses[i];
        for (int32_t j = 0; j < tr->partitions_len; j++)
            appended |= fetched_partition(f, &tr->topic_id,
                                          &tr->partitions[j]);
    }
    /* What was appended is on disk before the next fetch offset tells
     * the leader it is here (cairn.replica.sync). */
    if (appended && b->cfg->cairn_replica_sync &&
        b->cfg->cairn_fsync_group_commit) {
        f->syncing = true;
        f->waiter.req = NULL;
        f->waiter.finish = on_synced;
        cn_sync_wait(b, &f->waiter);
        return;
    }
    fetcher_kick(f);
}

static bool fetcher_connect(struct cn_replica_fetcher *f)
{
    struct cn_broker *b = f->r->b;
    char host[CN_CONFIG_HOST_MAX];
    int port = -1;
    if (!cn_replica_broker_endpoint(b, f->leader, host, sizeof host, &port))
        return false;
    if (f->peer && port == f->port && strcmp(host, f->host) == 0)
        return true;
    if (f->peer) {
        struct cn_peer *old = f->peer;
        f->peer = NULL;
        cn_peer_free(old);
    }
    struct cn_peer_opts o = {
        .host = host,
        .port = port,
        .client_id = "cairn-replica-fetcher",
        .backoff_ms = 50,
        .backoff_max_ms = 1000,
        .max_frame_bytes = b->cfg->replica_fetch_response_max_bytes +
                           FETCH_FRAME_SLACK,
    };
    if (cn_peer_new(b->loop, &o, &f->peer) != 0) {
        f->peer = NULL;
        return false;
    }
    snprintf(f->host, sizeof f->host, "%s", host);
    f->port = port;
    return true;
}

static void on_fetcher_timer(uv_timer_t *t)
{
    fetcher_kick(t->data);
}

/* Sends the next Fetch if none is out and some partition is due. */
static void fetcher_kick(struct cn_replica_fetcher *f)
{
    struct cn_broker *b = f->r->b;
    if (f->closing || f->inflight || f->syncing || f->nparts == 0 ||
        b->stopping)
        return;
    int64_t now = now_ms(), next = INT64_MAX;
    size_t due = 0;
    for (size_t i = 0; i < f->nparts; i++) {
        if (f->parts[i].retry_ms <= now)
            due++;
        else if (f->parts[i].retry_ms < next)
            next = f->parts[i].retry_ms;
    }
    if (!due) {
        uv_timer_start(&f->timer, on_fetcher_timer, (uint64_t)(next - now), 0);
        return;
    }
    if (!fetcher_connect(f)) {
        fetcher_backoff_all(f);
        uv_timer_start(&f->timer, on_fetcher_timer,
                       (uint64_t)b->cfg->replica_fetch_backoff_ms, 0);
        return;
    }
    struct cn_arena arena;
    cn_arena_init(&arena);
    struct cn_fetch_request rq;
    cn_fetch_request_init(&rq);
    rq.replica_id = -1;
    rq.replica_state.replica_id = b->node_id;
    rq.replica_state.replica_epoch = cn_lifecycle_epoch(b);
    rq.max_wait_ms = b->cfg->replica_fetch_wait_max_ms;
    rq.min_bytes = 1;
    rq.max_bytes = b->cfg->replica_fetch_response_max_bytes;
    rq.isolation_level = 0;
    rq.session_id = 0;
    rq.session_epoch = -1; /* no session: every fetch is whole */
    /* One topic entry per partition: ids repeat, which Fetch allows. */
    rq.topics = cn_arena_calloc(&arena, due, sizeof *rq.topics);
    struct cn_fetch_request_fetch_partition *parts =
        cn_arena_calloc(&arena, due, sizeof *parts);
    if (!rq.topics || !parts) {
        cn_arena_fini(&arena);
        fetcher_backoff_all(f);
        uv_timer_start(&f->timer, on_fetcher_timer,
                       (uint64_t)b->cfg->replica_fetch_backoff_ms, 0);
        return;
    }
    size_t k = 0;
    for (size_t i = 0; i < f->nparts && k < due; i++) {
        struct fpart *fp = &f->parts[i];
        if (fp->retry_ms > now)
            continue;
        struct cn_partition *p = find_part(b, &fp->topic_id, fp->index);
        if (!p || cn_partition_offline(b, p))
            continue;
        struct cn_fetch_request_fetch_topic *ft = &rq.topics[k];
        struct cn_fetch_request_fetch_partition *pp = &parts[k];
        cn_fetch_request_fetch_topic_init(ft);
        cn_fetch_request_fetch_partition_init(pp);
        ft->topic_id = fp->topic_id;
        ft->partitions = pp;
        ft->partitions_len = 1;
        pp->partition = fp->index;
        pp->current_leader_epoch = fp->leader_epoch;
        pp->fetch_offset = cn_log_end_offset(p->log);
        pp->last_fetched_epoch = cn_epochs_latest(p->epochs);
        pp->log_start_offset = cn_log_start_offset(p->log);
        pp->partition_max_bytes = b->cfg->replica_fetch_max_bytes;
        k++;
    }
    rq.topics_len = (int32_t)k;
    if (k == 0) {
        cn_arena_fini(&arena);
        return;
    }
    int err = cn_peer_call(f->peer, CN_API_FETCH, FETCH_VERSION, &rq,
                           rq.max_wait_ms + FETCH_TIMEOUT_MS, on_fetched, f);
    cn_arena_fini(&arena);
    if (err) {
        log_fetch_error(f, "fetch", cn_strerror(err));
        fetcher_backoff_all(f);
        uv_timer_start(&f->timer, on_fetcher_timer,
                       (uint64_t)b->cfg->replica_fetch_backoff_ms, 0);
        return;
    }
    f->inflight = true;
}

void cn_replica_published(struct cn_broker *b)
{
    struct cn_replica *r = b->replica;
    if (!r || r->stopped)
        return;
    struct cn_replica_fetcher **pp = &r->fetchers;
    while (*pp) {
        struct cn_replica_fetcher *f = *pp;
        if (f->nparts == 0) {
            *pp = f->next;
            fetcher_release(f);
            continue;
        }
        fetcher_kick(f);
        pp = &f->next;
    }
    hw_moved(b);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct cn_replica *r = h->data;
    if (--r->handles_open == 0)
        free(r);
}

static void unfollow_topic(struct cn_topic *t, void *arg)
{
    (void)arg;
    for (int32_t i = 0; i < t->partition_count; i++)
        if (t->partitions[i])
            t->partitions[i]->fetcher = NULL;
}

void cn_replica_stop(struct cn_broker *b)
{
    struct cn_replica *r = b->replica;
    if (!r || r->stopped)
        return;
    r->stopped = true;
    cn_topics_foreach(b, unfollow_topic, NULL);
    while (r->fetchers) {
        struct cn_replica_fetcher *f = r->fetchers;
        r->fetchers = f->next;
        fetcher_release(f);
    }
    check_waits(r, true); /* final: every waiter answers */
    b->replica = NULL;
    uv_timer_stop(&r->tick);
    uv_timer_stop(&r->wake);
    uv_close((uv_handle_t *)&r->tick, on_handle_closed);
    uv_close((uv_handle_t *)&r->wake, on_handle_closed);
}
