/*
 * ctlcall.c - calls to the active controller (ctlcall.h).
 *
 * Each call is a heap object with its own timer: the timer runs the first
 * attempt (so the callback never runs inside cn_ctlcall) and every retry
 * after a backoff.  One cn_peer per controller id, kept until the broker
 * stops: a leader change only moves calls to another peer, and a call in
 * flight on the old one is never cancelled under it.
 */
#include "node/ctlcall.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/say.h"
#include "node/broker_int.h"
#include "node/lifecycle.h"
#include "node/quorum.h"
#include "proto/gen/api.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

#define CC_BACKOFF_FIRST_MS 50
#define CC_BACKOFF_MAX_MS 1000
/* Kafka's request.timeout.ms for what a broker asks of the controller on
 * its own behalf. */
#define CC_OWN_TIMEOUT_MS 30000
#define CC_CREATE_TOPICS_VERSION 7
#define CC_MAX_FRAME (16 << 20)
/* How often a waiting call looks whether its controller is still the one
 * to ask, and how long an unreachable voter is given while no leader is
 * known. */
#define CC_WATCH_MS 100
#define CC_STUCK_MS 1000

struct call;

struct cc_peer {
    int32_t id; /* the voter it reaches */
    struct cn_peer *peer;
};

/* A topic cn_ctlcall_ensure_topic asked for, until its answer. */
struct ensure {
    struct cn_ctlcall *cc;
    char *name;
    struct cn_create_topics_request rq;
    struct cn_create_topics_request_creatable_topic t;
    struct cn_create_topics_request_creatable_topic_config
        cfg[CN_INTERNAL_TOPIC_NCONFIGS + 1];
    char min_isr[16];
    struct ensure *next;
};

struct cn_ctlcall {
    struct cn_broker *b;
    struct cc_peer peers[CN_VOTERS_MAX];
    int npeers;
    int next_voter;         /* asked next while no leader is known */
    struct call *calls;     /* live, for the stop */
    struct ensure *ensures; /* topics being created */
};

/* One sending of a call on a peer.  A peer keeps a call it could not send
 * until the call's own deadline (a dead controller's peer refuses and
 * reconnects meanwhile), so a call whose controller changed moves on and
 * leaves its attempt behind: c NULL, freed when the peer answers it. */
struct attempt {
    struct call *c; /* NULL once abandoned */
};

struct call {
    struct cn_ctlcall *cc;
    int16_t api_key, api_version;
    const void *request;
    int64_t deadline_ms; /* monotonic */
    int64_t backoff_ms;
    cn_ctlcall_retry_fn not_controller;
    /* Refreshes the request before each attempt; false: not ready to
     * send yet (as if no controller were known). */
    bool (*prepare)(struct call *c);
    cn_peer_cb cb;
    void *arg;
    uv_timer_t timer;    /* the first attempt, a backoff, or the watch */
    struct attempt *att; /* the attempt awaiting its answer, or NULL */
    int32_t sent_to;     /* the voter att went to */
    int64_t sent_ms;     /* when (monotonic) */
    struct call *prev, *next;
};

/* ---- calls -------------------------------------------------------------- */

static void on_call_closed(uv_handle_t *h)
{
    free(h->data);
}

static void abandon(struct call *c)
{
    if (c->att)
        c->att->c = NULL;
    c->att = NULL;
}

/* Unlinks c, runs its callback, and frees it once its timer has closed. */
static void call_finish(struct call *c, int err, const void *response,
                        struct cn_arena *arena)
{
    struct cn_ctlcall *cc = c->cc;
    abandon(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        cc->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_call_closed);
    c->cb(c->arg, err, response, arena);
}

/* The voter to ask: the leader this node's quorum knows, else the voters
 * in turn (a NOT_CONTROLLER answer moves to the next). */
static const struct cn_cfg_voter *target(struct cn_ctlcall *cc)
{
    const struct cn_config *cfg = cc->b->cfg;
    if (cfg->nvoters <= 0)
        return NULL;
    int32_t leader = cc->b->quorum ? cn_quorum_leader(cc->b->quorum) : -1;
    for (int i = 0; leader >= 0 && i < cfg->nvoters; i++)
        if (cfg->voters[i].id == leader)
            return &cfg->voters[i];
    return &cfg->voters[cc->next_voter % cfg->nvoters];
}

static struct cn_peer *peer_for(struct cn_ctlcall *cc,
                                const struct cn_cfg_voter *v)
{
    for (int i = 0; i < cc->npeers; i++)
        if (cc->peers[i].id == v->id)
            return cc->peers[i].peer;
    if (cc->npeers >= CN_VOTERS_MAX)
        return NULL;
    /* An IPv6 voter is written [addr]:port; the lookup wants addr. */
    char host[CN_CONFIG_HOST_MAX];
    const char *h = v->host;
    size_t hl = strlen(h);
    if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    snprintf(host, sizeof host, "%.*s", (int)hl, h);
    struct cn_peer_opts o = {
        .host = host,
        .port = v->port,
        .client_id = "cairn-broker-ctlcall",
        .backoff_ms = CC_BACKOFF_FIRST_MS,
        .backoff_max_ms = CC_BACKOFF_MAX_MS,
        .max_frame_bytes = CC_MAX_FRAME,
    };
    struct cn_peer *p = NULL;
    if (cn_peer_new(cc->b->loop, &o, &p) != 0)
        return NULL;
    cc->peers[cc->npeers].id = v->id;
    cc->peers[cc->npeers].peer = p;
    cc->npeers++;
    return p;
}

static void call_send(struct call *c);

static void on_call_timer(uv_timer_t *t)
{
    call_send(t->data);
}

/* Another attempt after the backoff, unless the deadline comes first. */
static void call_retry(struct call *c)
{
    int64_t left = c->deadline_ms - cn_clock_mono_ms();
    if (left <= 0) {
        call_finish(c, -ETIMEDOUT, NULL, NULL);
        return;
    }
    int64_t wait = c->backoff_ms < left ? c->backoff_ms : left;
    c->backoff_ms *= 2;
    if (c->backoff_ms > CC_BACKOFF_MAX_MS)
        c->backoff_ms = CC_BACKOFF_MAX_MS;
    /* Never 0 ms from inside the timer's own callback (libuv 1.44 runs it
     * again in the same pass). */
    uv_timer_start(&c->timer, on_call_timer, (uint64_t)(wait > 0 ? wait : 1),
                   0);
}

static void on_call_answer(void *arg, int err, const void *response,
                           struct cn_arena *arena)
{
    struct attempt *att = arg;
    struct call *c = att->c;
    free(att);
    if (!c)
        return; /* abandoned: the call went on without it */
    c->att = NULL;
    uv_timer_stop(&c->timer);
    if (err == -ECANCELED || err == CN_ECORRUPT) {
        call_finish(c, err, NULL, NULL);
        return;
    }
    if (err == 0 && !(c->not_controller && c->not_controller(response))) {
        call_finish(c, 0, response, arena);
        return;
    }
    /* Refused, lost or not the controller: while the quorum names no
     * leader, the next attempt asks another voter. */
    c->cc->next_voter++;
    call_retry(c);
}

/* While an attempt waits: the deadline, and whether its controller is
 * still the one to ask (the quorum names another, or it names none and
 * the voter asked has not been reachable for a while). */
static void on_call_watch(uv_timer_t *t)
{
    struct call *c = t->data;
    int64_t now = cn_clock_mono_ms();
    if (now >= c->deadline_ms) {
        call_finish(c, -ETIMEDOUT, NULL, NULL);
        return;
    }
    struct cn_broker *b = c->cc->b;
    int32_t leader = b->quorum ? cn_quorum_leader(b->quorum) : -1;
    bool moved = leader >= 0 && leader != c->sent_to;
    bool stuck = false;
    if (leader < 0 && now - c->sent_ms >= CC_STUCK_MS) {
        for (int i = 0; i < c->cc->npeers; i++)
            if (c->cc->peers[i].id == c->sent_to)
                stuck = !cn_peer_connected(c->cc->peers[i].peer);
        if (stuck)
            c->cc->next_voter++;
    }
    if (!moved && !stuck)
        return;
    uv_timer_stop(&c->timer);
    abandon(c);
    call_send(c);
}

static void call_send(struct call *c)
{
    struct cn_ctlcall *cc = c->cc;
    int64_t now = cn_clock_mono_ms();
    int64_t left = c->deadline_ms - now;
    if (left <= 0) {
        call_finish(c, -ETIMEDOUT, NULL, NULL);
        return;
    }
    const struct cn_cfg_voter *v = target(cc);
    struct cn_peer *p = v ? peer_for(cc, v) : NULL;
    if (!p || (c->prepare && !c->prepare(c))) {
        call_retry(c);
        return;
    }
    struct attempt *att = calloc(1, sizeof *att);
    if (!att) {
        call_finish(c, CN_ENOMEM, NULL, NULL);
        return;
    }
    att->c = c;
    int rc = cn_peer_call(p, c->api_key, c->api_version, c->request, left,
                          on_call_answer, att);
    if (rc != 0) {
        free(att);
        call_finish(c, rc, NULL, NULL);
        return;
    }
    c->att = att;
    c->sent_to = v->id;
    c->sent_ms = now;
    uv_timer_start(&c->timer, on_call_watch, CC_WATCH_MS, CC_WATCH_MS);
}

static struct cn_ctlcall *cc_get(struct cn_broker *b)
{
    if (b->ctlcall)
        return b->ctlcall;
    /* Nothing is asked before the quorum runs: a start that fails before
     * then must find no call on the loop. */
    if (!b->cfg->cluster_mode || !b->quorum || b->stopping)
        return NULL;
    struct cn_ctlcall *cc = calloc(1, sizeof *cc);
    if (!cc)
        return NULL;
    cc->b = b;
    b->ctlcall = cc;
    return cc;
}

static int call_start(struct cn_broker *b, int16_t api_key,
                      int16_t api_version, const void *request,
                      int64_t timeout_ms, cn_ctlcall_retry_fn not_controller,
                      bool (*prepare)(struct call *c), cn_peer_cb cb,
                      void *arg, struct call **out)
{
    struct cn_ctlcall *cc = cc_get(b);
    if (!cc)
        return b->cfg->cluster_mode && b->quorum && !b->stopping ? CN_ENOMEM
                                                                 : CN_EINVAL;
    struct call *c = calloc(1, sizeof *c);
    if (!c)
        return CN_ENOMEM;
    c->cc = cc;
    c->api_key = api_key;
    c->api_version = api_version;
    c->request = request;
    c->deadline_ms = cn_clock_mono_ms() + (timeout_ms > 0 ? timeout_ms : 1);
    c->backoff_ms = CC_BACKOFF_FIRST_MS;
    c->not_controller = not_controller;
    c->prepare = prepare;
    c->cb = cb;
    c->arg = arg;
    uv_timer_init(b->loop, &c->timer);
    c->timer.data = c;
    c->next = cc->calls;
    if (cc->calls)
        cc->calls->prev = c;
    cc->calls = c;
    if (out)
        *out = c;
    uv_timer_start(&c->timer, on_call_timer, 0, 0);
    return 0;
}

int cn_ctlcall(struct cn_broker *b, int16_t api_key, int16_t api_version,
               const void *request, int64_t timeout_ms,
               cn_ctlcall_retry_fn not_controller, cn_peer_cb cb, void *arg)
{
    return call_start(b, api_key, api_version, request, timeout_ms,
                      not_controller, NULL, cb, arg, NULL);
}

/* ---- topics ------------------------------------------------------------- */

bool cn_ctlcall_create_topics_retry(const void *response)
{
    const struct cn_create_topics_response *rs = response;
    for (int32_t i = 0; i < rs->topics_len; i++)
        if (rs->topics[i].error_code == KAFKA_NOT_CONTROLLER)
            return true;
    return false;
}

static void ensure_unlink(struct ensure *e)
{
    for (struct ensure **pp = &e->cc->ensures; *pp; pp = &(*pp)->next)
        if (*pp == e) {
            *pp = e->next;
            break;
        }
}

static void on_ensured(void *arg, int err, const void *response,
                       struct cn_arena *arena)
{
    (void)arena;
    struct ensure *e = arg;
    const struct cn_create_topics_response *rs = response;
    if (err && err != -ECANCELED)
        CN_WARN("cluster: asking the controller to create topic %s failed: "
                "%s",
                e->name, cn_strerror(err));
    else if (!err && rs->topics_len > 0) {
        const struct cn_create_topics_response_creatable_topic_result *r =
            &rs->topics[0];
        if (r->error_code == 0)
            CN_INFO("cluster: topic %s created (%d partitions, replication "
                    "factor %d)",
                    e->name, r->num_partitions, r->replication_factor);
        else if (r->error_code != KAFKA_TOPIC_ALREADY_EXISTS)
            CN_WARN(
                "cluster: the controller did not create topic %s: %s%s%.*s",
                e->name, cn_kerr_name(r->error_code),
                r->error_message.len > 0 ? ": " : "",
                r->error_message.len > 0 ? (int)r->error_message.len : 0,
                r->error_message.len > 0 ? (const char *)r->error_message.ptr
                                         : "");
    }
    ensure_unlink(e);
    free(e->name);
    free(e);
}

/* Brokers the controller can place replicas on now. */
static int32_t unfenced_brokers(struct cn_broker *b)
{
    if (!b->quorum)
        return 0;
    const struct cn_image *img = cn_quorum_image(b->quorum);
    int32_t n = 0;
    for (size_t i = 0; i < cn_image_broker_count(img); i++) {
        const struct cn_image_broker *ib = cn_image_broker_at(img, i);
        if (!ib->fenced && !ib->in_controlled_shutdown)
            n++;
    }
    return n;
}

/* The transaction log's min.insync.replicas: transaction.state.log.min.isr,
 * as Kafka sets it, but no more than the replicas it gets (a log of fewer
 * replicas than its min ISR could never be written: every transaction
 * would stop). */
static void add_txn_min_isr(struct cn_broker *b, struct ensure *e, int16_t rf)
{
    int32_t isr = b->cfg->transaction_state_log_min_isr;
    if (rf > 0 && isr > rf) {
        CN_WARN("cluster: creating __transaction_state with "
                "min.insync.replicas %d, not the configured "
                "transaction.state.log.min.isr %d: it has only %d "
                "replica(s)",
                rf, isr, rf);
        isr = rf;
    }
    snprintf(e->min_isr, sizeof e->min_isr, "%d", (int)isr);
    struct cn_create_topics_request_creatable_topic_config *c =
        &e->cfg[e->t.configs_len];
    cn_create_topics_request_creatable_topic_config_init(c);
    c->name = cn_bytes_str("min.insync.replicas");
    c->value = cn_bytes_str(e->min_isr);
    e->t.configs_len++;
}

void cn_ctlcall_ensure_topic(struct cn_broker *b, const char *name,
                             int32_t nparts, int16_t rf, bool internal)
{
    if (b->quorum &&
        cn_image_topic_find(cn_quorum_image(b->quorum), cn_bytes_str(name)))
        return;
    /* With no broker to place it on the controller can only refuse;
     * callers ask again (FindCoordinator is retried by every client), so
     * wait for one rather than log a refusal per retry. */
    if (unfenced_brokers(b) == 0)
        return;
    struct cn_ctlcall *cc = cc_get(b);
    if (!cc)
        return;
    for (struct ensure *e = cc->ensures; e; e = e->next)
        if (strcmp(e->name, name) == 0)
            return;
    struct ensure *e = calloc(1, sizeof *e);
    char *copy = strdup(name);
    if (!e || !copy) {
        free(e);
        free(copy);
        CN_WARN("cluster: out of memory asking for topic %s", name);
        return;
    }
    e->cc = cc;
    e->name = copy;
    if (internal && rf > 0) {
        /* Kafka's rule for offsets.topic.replication.factor on a cluster
         * smaller than it: as many replicas as there are brokers, rather
         * than no coordinator at all. */
        int32_t live = unfenced_brokers(b);
        if (live > 0 && rf > live) {
            CN_WARN("cluster: creating %s with replication factor %d, not "
                    "the configured %d: only %d broker(s) are unfenced",
                    name, live, rf, live);
            rf = (int16_t)live;
        }
    }
    cn_create_topics_request_init(&e->rq);
    cn_create_topics_request_creatable_topic_init(&e->t);
    e->t.name = cn_bytes_str(e->name);
    e->t.num_partitions = nparts;
    e->t.replication_factor = rf;
    e->t.assignments_len = 0;
    e->t.configs_len = 0;
    if (internal) {
        for (int i = 0; i < CN_INTERNAL_TOPIC_NCONFIGS; i++) {
            cn_create_topics_request_creatable_topic_config_init(&e->cfg[i]);
            e->cfg[i].name = cn_bytes_str(cn_internal_topic_configs[i][0]);
            e->cfg[i].value = cn_bytes_str(cn_internal_topic_configs[i][1]);
        }
        e->t.configs = e->cfg;
        e->t.configs_len = CN_INTERNAL_TOPIC_NCONFIGS;
        if (strcmp(name, "__transaction_state") == 0)
            add_txn_min_isr(b, e, rf);
    }
    e->rq.topics = &e->t;
    e->rq.topics_len = 1;
    e->rq.timeout_ms = CC_OWN_TIMEOUT_MS;
    e->rq.validate_only = false;
    e->next = cc->ensures;
    cc->ensures = e;
    int rc = cn_ctlcall(b, CN_API_CREATE_TOPICS, CC_CREATE_TOPICS_VERSION,
                        &e->rq, CC_OWN_TIMEOUT_MS,
                        cn_ctlcall_create_topics_retry, on_ensured, e);
    if (rc != 0) {
        CN_WARN("cluster: cannot ask for topic %s: %s", name, cn_strerror(rc));
        ensure_unlink(e);
        free(e->name);
        free(e);
    }
}

/* ---- producer ids ------------------------------------------------------- */

struct pids_call {
    struct cn_broker *b;
    struct cn_allocate_producer_ids_request rq;
    cn_ctlcall_pids_cb cb;
    void *arg;
};

static bool pids_prepare(struct call *c)
{
    struct pids_call *pc = c->arg;
    int64_t epoch = cn_lifecycle_epoch(pc->b);
    if (epoch < 0)
        return false; /* the controller answers only registered brokers */
    pc->rq.broker_id = pc->b->node_id;
    pc->rq.broker_epoch = epoch;
    return true;
}

static bool pids_retry(const void *response)
{
    const struct cn_allocate_producer_ids_response *rs = response;
    switch (rs->error_code) {
    case KAFKA_NOT_CONTROLLER:
    /* Registered again meanwhile, or the registration not yet applied
     * where the controller decides: the next attempt sends the new
     * epoch. */
    case KAFKA_STALE_BROKER_EPOCH:
    case KAFKA_BROKER_ID_NOT_REGISTERED:
    /* The controller lost leadership with the block proposed: a block
     * asked for twice only skips ids. */
    case KAFKA_REQUEST_TIMED_OUT: return true;
    default: return false;
    }
}

static void on_pids(void *arg, int err, const void *response,
                    struct cn_arena *arena)
{
    (void)arena;
    struct pids_call *pc = arg;
    const struct cn_allocate_producer_ids_response *rs = response;
    int64_t start = -1;
    int32_t len = 0;
    if (!err && rs->error_code) {
        CN_WARN("cluster: the controller refused a producer-id block: %s",
                cn_kerr_name(rs->error_code));
        err = -EIO;
    } else if (!err &&
               (rs->producer_id_start < 0 || rs->producer_id_len <= 0)) {
        err = CN_ECORRUPT;
    } else if (!err) {
        start = rs->producer_id_start;
        len = rs->producer_id_len;
    }
    cn_ctlcall_pids_cb cb = pc->cb;
    void *cb_arg = pc->arg;
    struct cn_broker *b = pc->b;
    free(pc);
    cb(b, cb_arg, err, start, len);
}

int cn_ctlcall_alloc_pids(struct cn_broker *b, cn_ctlcall_pids_cb cb,
                          void *arg)
{
    struct pids_call *pc = calloc(1, sizeof *pc);
    if (!pc)
        return CN_ENOMEM;
    pc->b = b;
    pc->cb = cb;
    pc->arg = arg;
    cn_allocate_producer_ids_request_init(&pc->rq);
    int rc = call_start(b, CN_API_ALLOCATE_PRODUCER_IDS, 0, &pc->rq,
                        CC_OWN_TIMEOUT_MS, pids_retry, pids_prepare, on_pids,
                        pc, NULL);
    if (rc)
        free(pc);
    return rc;
}

/* ---- AlterPartition ----------------------------------------------------- */

#define CC_ALTER_PARTITION_VERSION 3

struct ap_call {
    struct cn_broker *b;
    struct cn_alter_partition_request rq;
    struct cn_alter_partition_request_topic_data t;
    struct cn_alter_partition_request_partition_data p;
    struct cn_alter_partition_request_broker_state isr[CN_CTLCALL_ISR_MAX];
    cn_ctlcall_alter_cb cb;
    void *arg;
};

static bool ap_prepare(struct call *c)
{
    struct ap_call *ac = c->arg;
    int64_t epoch = cn_lifecycle_epoch(ac->b);
    if (epoch < 0)
        return false; /* the controller answers only registered brokers */
    ac->rq.broker_id = ac->b->node_id;
    ac->rq.broker_epoch = epoch;
    return true;
}

static bool ap_retry(const void *response)
{
    const struct cn_alter_partition_response *rs = response;
    if (rs->error_code == KAFKA_NOT_CONTROLLER)
        return true;
    for (int32_t i = 0; i < rs->topics_len; i++)
        for (int32_t j = 0; j < rs->topics[i].partitions_len; j++)
            if (rs->topics[i].partitions[j].error_code == KAFKA_NOT_CONTROLLER)
                return true;
    return false;
}

static void on_alter_partition(void *arg, int err, const void *response,
                               struct cn_arena *arena)
{
    (void)arena;
    struct ap_call *ac = arg;
    const struct cn_alter_partition_response *rs = response;
    struct cn_ctlcall_alter_result r;
    memset(&r, 0, sizeof r);
    r.error = -1;
    r.leader_id = -1;
    r.leader_epoch = -1;
    r.partition_epoch = -1;
    if (!err && rs->error_code) {
        r.error = rs->error_code;
    } else if (!err) {
        const struct cn_alter_partition_response_partition_data *pd = NULL;
        for (int32_t i = 0; !pd && i < rs->topics_len; i++) {
            const struct cn_alter_partition_response_topic_data *t =
                &rs->topics[i];
            if (memcmp(t->topic_id.b, ac->t.topic_id.b, 16) != 0)
                continue;
            for (int32_t j = 0; !pd && j < t->partitions_len; j++)
                if (t->partitions[j].partition_index == ac->p.partition_index)
                    pd = &t->partitions[j];
        }
        if (!pd || pd->isr_len > CN_CTLCALL_ISR_MAX) {
            err = CN_ECORRUPT;
        } else {
            r.error = pd->error_code;
            if (!pd->error_code) {
                r.leader_id = pd->leader_id;
                r.leader_epoch = pd->leader_epoch;
                r.partition_epoch = pd->partition_epoch;
                r.nisr = pd->isr_len > 0 ? pd->isr_len : 0;
                if (r.nisr > 0)
                    memcpy(r.isr, pd->isr, (size_t)r.nisr * sizeof *r.isr);
            }
        }
    }
    if (err) {
        r.error = err == CN_ECORRUPT ? KAFKA_UNKNOWN_SERVER_ERROR
                                     : KAFKA_REQUEST_TIMED_OUT;
        if (err != -ECANCELED)
            CN_WARN("cluster: AlterPartition got no answer: %s",
                    cn_strerror(err));
    }
    cn_ctlcall_alter_cb cb = ac->cb;
    void *cb_arg = ac->arg;
    free(ac);
    cb(cb_arg, &r);
}

int cn_ctlcall_alter_partition(struct cn_broker *b,
                               const struct cn_uuid *topic_id,
                               int32_t partition, int32_t leader_epoch,
                               int32_t partition_epoch, const int32_t *isr,
                               const int64_t *isr_broker_epochs, int32_t nisr,
                               int64_t timeout_ms, cn_ctlcall_alter_cb cb,
                               void *arg)
{
    if (nisr <= 0 || nisr > CN_CTLCALL_ISR_MAX)
        return CN_EINVAL;
    struct ap_call *ac = calloc(1, sizeof *ac);
    if (!ac)
        return CN_ENOMEM;
    ac->b = b;
    ac->cb = cb;
    ac->arg = arg;
    for (int32_t i = 0; i < nisr; i++) {
        cn_alter_partition_request_broker_state_init(&ac->isr[i]);
        ac->isr[i].broker_id = isr[i];
        ac->isr[i].broker_epoch = isr_broker_epochs ? isr_broker_epochs[i]
                                                    : -1;
    }
    cn_alter_partition_request_partition_data_init(&ac->p);
    ac->p.partition_index = partition;
    ac->p.leader_epoch = leader_epoch;
    ac->p.partition_epoch = partition_epoch;
    ac->p.new_isr_len = 0;
    ac->p.new_isr_with_epochs = ac->isr;
    ac->p.new_isr_with_epochs_len = nisr;
    ac->p.leader_recovery_state = 0;
    cn_alter_partition_request_topic_data_init(&ac->t);
    ac->t.topic_id = *topic_id;
    ac->t.partitions = &ac->p;
    ac->t.partitions_len = 1;
    cn_alter_partition_request_init(&ac->rq);
    ac->rq.topics = &ac->t;
    ac->rq.topics_len = 1;
    int rc = call_start(b, CN_API_ALTER_PARTITION, CC_ALTER_PARTITION_VERSION,
                        &ac->rq, timeout_ms, ap_retry, ap_prepare,
                        on_alter_partition, ac, NULL);
    if (rc)
        free(ac);
    return rc;
}

/* ---- stop --------------------------------------------------------------- */

void cn_ctlcall_stop(struct cn_broker *b)
{
    struct cn_ctlcall *cc = b->ctlcall;
    if (!cc)
        return;
    b->ctlcall = NULL;
    /* Freeing the peers answers their attempts (-ECANCELED) before it
     * returns, which ends the calls still on them; the calls waiting for
     * a retry, or that moved on from an attempt, end here. */
    for (int i = 0; i < cc->npeers; i++)
        cn_peer_free(cc->peers[i].peer);
    cc->npeers = 0;
    while (cc->calls)
        call_finish(cc->calls, -ECANCELED, NULL, NULL);
    for (struct ensure *e = cc->ensures, *next; e; e = next) {
        next = e->next;
        free(e->name);
        free(e);
    }
    free(cc);
}

int16_t cn_ctlcall_error(int err, const char **msg)
{
    if (err == -ETIMEDOUT) {
        *msg = "No active controller answered within the request's "
               "timeout.";
        return KAFKA_REQUEST_TIMED_OUT;
    }
    if (err == -ECANCELED) {
        *msg = "The broker is shutting down.";
        return KAFKA_REQUEST_TIMED_OUT;
    }
    *msg = "The controller could not be reached.";
    return KAFKA_UNKNOWN_SERVER_ERROR;
}
