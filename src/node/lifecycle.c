/*
 * lifecycle.c - registration and heartbeats with the controller
 * (lifecycle.h): the machine, then its executor on the loop.
 *
 * One request at a time, as Kafka's BrokerLifecycleManager: a heartbeat
 * never overtakes the registration it belongs to, and an answer always
 * applies to the state it was sent from.
 */
#include "node/lifecycle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/say.h"
#include "node/broker_int.h"
#include "node/peer.h"
#include "meta/image.h"
#include "node/quorum.h"
#include "proto/gen/api.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

/* ---- the machine ------------------------------------------------------ */

/* While fenced the controller is waiting for our offset to catch up:
 * asking sooner than the interval unfences a starting broker in tens of
 * milliseconds rather than a whole interval later (Kafka polls every 10 ms
 * while STARTING). */
#define LC_FENCED_INTERVAL_MS 100
/* While shutting down the controller waits for this broker's heartbeats
 * (Kafka asks again 50 ms after the first answer, then every interval). */
#define LC_SHUTDOWN_INTERVAL_MS 250

void cn_lc_init(struct cn_lc *lc, int64_t interval_ms,
                int64_t backoff_first_ms, int64_t backoff_max_ms)
{
    memset(lc, 0, sizeof *lc);
    lc->state = CN_LC_UNREGISTERED;
    lc->epoch = -1;
    lc->fenced = true;
    lc->interval_ms = interval_ms > 0 ? interval_ms : 2000;
    lc->backoff_first_ms = backoff_first_ms > 0 ? backoff_first_ms : 50;
    lc->backoff_max_ms = backoff_max_ms >= lc->backoff_first_ms
                             ? backoff_max_ms
                             : lc->backoff_first_ms;
    lc->backoff_ms = lc->backoff_first_ms;
}

static void lc_backoff(struct cn_lc *lc, int64_t now_ms)
{
    lc->next_ms = now_ms + lc->backoff_ms;
    lc->backoff_ms *= 2;
    if (lc->backoff_ms > lc->backoff_max_ms)
        lc->backoff_ms = lc->backoff_max_ms;
}

enum cn_lc_action cn_lc_poll(struct cn_lc *lc, int64_t now_ms,
                             bool leader_known)
{
    if (lc->in_flight || lc->shut_down || now_ms < lc->next_ms)
        return CN_LCA_NONE;
    if (!leader_known) {
        lc_backoff(lc, now_ms);
        return CN_LCA_NONE;
    }
    lc->in_flight = true;
    return lc->state == CN_LC_REGISTERED ? CN_LCA_HEARTBEAT : CN_LCA_REGISTER;
}

void cn_lc_registered(struct cn_lc *lc, int64_t now_ms, int err, int64_t epoch)
{
    lc->in_flight = false;
    if (err == 0) {
        lc->state = CN_LC_REGISTERED;
        lc->epoch = epoch;
        lc->fenced = true;
        lc->caught_up = false;
        lc->backoff_ms = lc->backoff_first_ms;
        lc->registrations++;
        lc->next_ms = now_ms; /* the first heartbeat unfences: at once */
        return;
    }
    /* NOT_CONTROLLER, a lost connection, and refusals that another try
     * can cure (DUPLICATE_BROKER_REGISTRATION until the old incarnation's
     * session expires) all retry after a backoff, as Kafka does. */
    lc_backoff(lc, now_ms);
}

void cn_lc_heartbeat(struct cn_lc *lc, int64_t now_ms, int err, bool fenced,
                     bool caught_up, bool should_shut_down)
{
    lc->in_flight = false;
    int64_t every = lc->interval_ms;
    switch (err) {
    case 0:
        lc->fenced = fenced;
        lc->caught_up = caught_up;
        lc->backoff_ms = lc->backoff_first_ms;
        if (fenced && every > LC_FENCED_INTERVAL_MS)
            every = LC_FENCED_INTERVAL_MS;
        if (lc->want_shut_down) {
            lc->shut_down = lc->shut_down || should_shut_down;
            if (every > LC_SHUTDOWN_INTERVAL_MS)
                every = LC_SHUTDOWN_INTERVAL_MS;
        }
        lc->next_ms = now_ms + every;
        return;
    case KAFKA_STALE_BROKER_EPOCH:
    case KAFKA_BROKER_ID_NOT_REGISTERED:
        if (lc->want_shut_down) {
            /* The controller has no registration of ours left, so no
             * leadership either: nothing to wait for. */
            lc->shut_down = true;
            return;
        }
        /* The controller forgot this registration (a new incarnation took
         * the id, or the record was never committed): start over. */
        lc->state = CN_LC_UNREGISTERED;
        lc->epoch = -1;
        lc->fenced = true;
        lc->next_ms = now_ms;
        return;
    default: lc_backoff(lc, now_ms); return;
    }
}

bool cn_lc_begin_shutdown(struct cn_lc *lc, int64_t now_ms)
{
    if (lc->want_shut_down)
        return lc->shut_down;
    lc->want_shut_down = true;
    if (lc->state != CN_LC_REGISTERED || lc->fenced) {
        lc->shut_down = true;
        return true;
    }
    /* The first want_shut_down goes now; one in flight already carries
     * none, and its answer schedules the next. */
    if (!lc->in_flight)
        lc->next_ms = now_ms;
    return false;
}

/* ---- the executor ----------------------------------------------------- */

#define LC_REQUEST_TIMEOUT_MS 2000 /* controller.quorum.request.timeout.ms */
#define LC_BROKER_REGISTRATION_VERSION 3
#define LC_BROKER_HEARTBEAT_VERSION 1
/* Kafka 4.0's metadata.version range: 3.3-IV3 (the oldest KRaft level 4.0
 * still reads) to 4.0-IV3. */
#define LC_METADATA_VERSION_MIN 7
#define LC_METADATA_VERSION_MAX 25
#define LC_TXN_VERSION_MAX 2

struct lc_endpoint {
    char name[CN_LISTENER_NAME_MAX];
    char host[CN_CONFIG_HOST_MAX];
    int port;
    int16_t proto;
};

struct lc_voter {
    int32_t id;
    char host[CN_CONFIG_HOST_MAX];
    int port;
};

struct cn_lifecycle;

/* An in-process request; separate from the lifecycle because the quorum
 * may answer it after the lifecycle has stopped. */
struct lc_waiter {
    struct cn_quorum_waiter w; /* first: done casts back */
    struct cn_lifecycle *lc;   /* NULL once orphaned */
    enum cn_lc_action act;
    struct cn_ctl_endpoint eps[CN_LISTENERS_MAX];
};

struct cn_lifecycle {
    struct cn_broker *b;
    struct cn_lc m;
    uv_timer_t timer;
    struct cn_peer *peer; /* to peer_id's CONTROLLER listener */
    int32_t peer_id;
    struct lc_waiter *waiter; /* in-process request in flight */
    bool stopping;
    struct cn_uuid incarnation;
    struct lc_endpoint eps[CN_LISTENERS_MAX];
    size_t neps;
    char rack[256];
    bool has_rack;
    struct lc_voter *voters;
    size_t nvoters;
    int32_t last_leader; /* for the log line on change */
    bool was_fenced;
    /* Discovery, for a node that knows no leader or no cluster id yet (a
     * new process.roles=broker node is not in the raft configuration
     * until it has registered): DescribeCluster asked of the voters in
     * turn, as Kafka's brokers try controller.quorum.voters. */
    struct cn_peer *disc_peer;
    int32_t disc_id;     /* the voter disc_peer reaches */
    size_t disc_next;    /* the voter to ask next */
    bool discovering;    /* a DescribeCluster is in flight */
    int32_t hint_leader; /* the controller a voter named, -1 */
    char disc_cluster_id[64];
    /* Controlled shutdown: its deadline, and whom to tell (NULL before it
     * starts and once told). */
    uv_timer_t sd_timer;
    cn_lifecycle_shutdown_cb sd_cb;
    int open_handles; /* timer and sd_timer, until closed */
};

static void lc_kick(struct cn_lifecycle *lc);

static int64_t lc_now(void)
{
    return cn_clock_mono_ms();
}

static const char *cfg_str(const struct cn_broker *b, const char *key)
{
    const char *v = NULL;
    if (cn_config_get(b->cfg, key, &v, NULL) != 0)
        return NULL;
    return v;
}

static int64_t cfg_int(const struct cn_broker *b, const char *key,
                       int64_t dflt)
{
    const char *v = cfg_str(b, key);
    if (!v || !*v)
        return dflt;
    char *end;
    long long n = strtoll(v, &end, 10);
    return *end == '\0' && n > 0 ? (int64_t)n : dflt;
}

/* The voters of controller.quorum.voters (parsed and checked by the
 * config), with an IPv6 host's brackets dropped for the address lookup. */
static int voters_from_config(const struct cn_config *cfg,
                              struct lc_voter **out, size_t *n)
{
    *out = calloc((size_t)cfg->nvoters + 1, sizeof **out);
    if (!*out)
        return CN_ENOMEM;
    for (int i = 0; i < cfg->nvoters; i++) {
        const struct cn_cfg_voter *cv = &cfg->voters[i];
        struct lc_voter *v = &(*out)[i];
        const char *h = cv->host;
        size_t hl = strlen(h);
        if (hl >= 2 && h[0] == '[' && h[hl - 1] == ']') {
            h++;
            hl -= 2;
        }
        snprintf(v->host, sizeof v->host, "%.*s", (int)hl, h);
        v->id = cv->id;
        v->port = cv->port;
    }
    *n = (size_t)cfg->nvoters;
    return 0;
}

static bool is_controller_listener(const struct cn_broker *b, const char *name)
{
    const char *names = cfg_str(b, "controller.listener.names");
    if (!names)
        return false;
    size_t nl = strlen(name);
    for (const char *p = names; *p;) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if ((size_t)(e - p) == nl && strncasecmp(p, name, nl) == 0)
            return true;
        p = e;
    }
    return false;
}

/* The broker listeners as clients reach them (the bound port when the
 * configured one was 0). */
static void collect_endpoints(struct cn_lifecycle *lc)
{
    const struct cn_broker *b = lc->b;
    const struct cn_config *cfg = b->cfg;
    lc->neps = 0;
    for (int i = 0; i < cfg->nlisteners && lc->neps < CN_LISTENERS_MAX; i++) {
        const struct cn_listener *l = &cfg->listener[i];
        if (is_controller_listener(b, l->name))
            continue;
        struct lc_endpoint *e = &lc->eps[lc->neps];
        snprintf(e->name, sizeof e->name, "%s", l->name);
        if (i < b->nservers) {
            snprintf(e->host, sizeof e->host, "%s", b->adv_hosts[i]);
            e->port = b->adv_ports[i];
        } else {
            snprintf(e->host, sizeof e->host, "%s",
                     l->adv_host[0] ? l->adv_host
                     : l->host[0]   ? l->host
                                    : "127.0.0.1");
            e->port = l->adv_port ? l->adv_port : l->port;
        }
        e->proto = (int16_t)l->proto;
        lc->neps++;
    }
}

static const struct lc_voter *voter_find(const struct cn_lifecycle *lc,
                                         int32_t id)
{
    for (size_t i = 0; i < lc->nvoters; i++)
        if (lc->voters[i].id == id)
            return &lc->voters[i];
    return NULL;
}

static void peer_drop(struct cn_lifecycle *lc)
{
    if (!lc->peer)
        return;
    struct cn_peer *p = lc->peer;
    lc->peer = NULL;
    lc->peer_id = -1;
    cn_peer_free(p); /* a call in flight is answered -ECANCELED now */
}

/* Where requests go now: in-process (*self), over the peer to the leader,
 * or nowhere yet (false). */
static bool lc_target(struct cn_lifecycle *lc, bool *self)
{
    struct cn_broker *b = lc->b;
    int32_t leader = cn_quorum_leader(b->quorum);
    if (leader < 0)
        leader = lc->hint_leader;
    if (leader != lc->last_leader) {
        if (leader >= 0)
            CN_INFO("cluster: the active controller is node %d", leader);
        lc->last_leader = leader;
    }
    *self = false;
    if (leader < 0)
        return false;
    /* A controller registering its own broker needs no socket. */
    if (leader == b->node_id) {
        if (!cn_quorum_leads(b->quorum))
            return false; /* elected, barrier not yet applied */
        *self = true;
        return true;
    }
    const struct lc_voter *v = voter_find(lc, leader);
    if (!v)
        return false;
    if (lc->peer && lc->peer_id == leader)
        return true;
    peer_drop(lc);
    struct cn_peer_opts o = {
        .host = v->host,
        .port = v->port,
        .client_id = "cairn-broker-lifecycle",
        .backoff_ms = 50,
        .backoff_max_ms = 1000,
        .max_frame_bytes = 1 << 20,
    };
    if (cn_peer_new(b->loop, &o, &lc->peer) != 0) {
        lc->peer = NULL;
        return false;
    }
    lc->peer_id = leader;
    return true;
}

static void note_state(struct cn_lifecycle *lc)
{
    if (lc->m.state == CN_LC_REGISTERED && lc->m.fenced != lc->was_fenced) {
        CN_INFO("cluster: node %d is %s (broker epoch %lld)", lc->b->node_id,
                lc->m.fenced ? "fenced" : "unfenced", (long long)lc->m.epoch);
        lc->was_fenced = lc->m.fenced;
    }
}

/* Tells the broker controlled shutdown is over, once. */
static void sd_finish(struct cn_lifecycle *lc, bool approved)
{
    cn_lifecycle_shutdown_cb cb = lc->sd_cb;
    if (!cb)
        return;
    lc->sd_cb = NULL;
    uv_timer_stop(&lc->sd_timer);
    if (approved)
        CN_INFO("cluster: the controller approved the shutdown of node %d",
                lc->b->node_id);
    else
        CN_WARN("cluster: the controller did not approve the shutdown of "
                "node %d in time; stopping anyway",
                lc->b->node_id);
    cb(lc->b, approved);
}

static void on_sd_timer(uv_timer_t *t)
{
    struct cn_lifecycle *lc = t->data;
    sd_finish(lc, lc->m.shut_down);
}

/* An answer to the one request in flight, from either path. */
static void lc_answer(struct cn_lifecycle *lc, enum cn_lc_action act, int err,
                      int64_t epoch, bool fenced, bool caught_up,
                      bool should_shut_down)
{
    int64_t now = lc_now();
    /* A controller named by a voter that turns out not to answer as one
     * is asked for again. */
    if (err == CN_LC_ERR_TRANSPORT)
        lc->hint_leader = -1;
    if (act == CN_LCA_REGISTER) {
        if (err == 0)
            CN_INFO("cluster: node %d registered with the controller, broker "
                    "epoch %lld",
                    lc->b->node_id, (long long)epoch);
        else if (err != CN_LC_ERR_TRANSPORT && err != KAFKA_NOT_CONTROLLER)
            CN_WARN("cluster: registration of node %d refused: %s",
                    lc->b->node_id, cn_kerr_name((int16_t)err));
        cn_lc_registered(&lc->m, now, err, epoch);
    } else {
        if (err == KAFKA_STALE_BROKER_EPOCH ||
            err == KAFKA_BROKER_ID_NOT_REGISTERED)
            CN_WARN("cluster: heartbeat refused (%s): registering again",
                    cn_kerr_name((int16_t)err));
        cn_lc_heartbeat(&lc->m, now, err, fenced, caught_up, should_shut_down);
    }
    note_state(lc);
    if (lc->m.shut_down) {
        /* The broker stops, this lifecycle and its peer with it: not from
         * inside the peer's (or the quorum's) callback. */
        if (lc->sd_cb)
            uv_timer_start(&lc->sd_timer, on_sd_timer, 1, 0);
        return;
    }
    lc_kick(lc);
}

static int map_peer_err(int err, int16_t kerr)
{
    if (err)
        return CN_LC_ERR_TRANSPORT;
    return kerr == KAFKA_NOT_CONTROLLER ? CN_LC_ERR_TRANSPORT : kerr;
}

static void on_peer_register(void *arg, int err, const void *response,
                             struct cn_arena *arena)
{
    (void)arena;
    struct cn_lifecycle *lc = arg;
    if (lc->stopping)
        return;
    const struct cn_broker_registration_response *rs = response;
    lc_answer(lc, CN_LCA_REGISTER, map_peer_err(err, rs ? rs->error_code : 0),
              rs ? rs->broker_epoch : -1, true, false, false);
}

static void on_peer_heartbeat(void *arg, int err, const void *response,
                              struct cn_arena *arena)
{
    (void)arena;
    struct cn_lifecycle *lc = arg;
    if (lc->stopping)
        return;
    const struct cn_broker_heartbeat_response *rs = response;
    lc_answer(lc, CN_LCA_HEARTBEAT, map_peer_err(err, rs ? rs->error_code : 0),
              -1, rs ? rs->is_fenced : true, rs ? rs->is_caught_up : false,
              rs ? rs->should_shut_down : false);
}

static void on_waiter_done(struct cn_quorum_waiter *w,
                           const struct cn_ctl_answer *ans)
{
    struct lc_waiter *lw = (struct lc_waiter *)w;
    struct cn_lifecycle *lc = lw->lc;
    enum cn_lc_action act = lw->act;
    free(lw);
    if (!lc)
        return; /* stopped meanwhile */
    lc->waiter = NULL;
    int err = ans->error == KAFKA_NOT_CONTROLLER ? CN_LC_ERR_TRANSPORT
                                                 : ans->error;
    if (act == CN_LCA_REGISTER)
        lc_answer(lc, act, err, ans->u.broker_epoch, true, false, false);
    else
        lc_answer(lc, act, err, -1, ans->u.hb.fenced, ans->u.hb.caught_up,
                  ans->u.hb.should_shut_down);
}

static int64_t applied_offset(const struct cn_lifecycle *lc)
{
    return cn_image_offset(cn_quorum_image(lc->b->quorum));
}

static void send_self(struct cn_lifecycle *lc, enum cn_lc_action act,
                      const char *cluster_id)
{
    struct lc_waiter *lw = calloc(1, sizeof *lw);
    if (!lw) {
        lc_answer(lc, act, CN_LC_ERR_TRANSPORT, -1, true, false, false);
        return;
    }
    lw->w.done = on_waiter_done;
    lw->lc = lc;
    lw->act = act;
    struct cn_ctl_event ev;
    memset(&ev, 0, sizeof ev);
    if (act == CN_LCA_REGISTER) {
        ev.kind = CN_CTE_REGISTER;
        for (size_t i = 0; i < lc->neps; i++) {
            lw->eps[i].name = cn_bytes_str(lc->eps[i].name);
            lw->eps[i].host = cn_bytes_str(lc->eps[i].host);
            lw->eps[i].port = (uint16_t)lc->eps[i].port;
            lw->eps[i].security_protocol = lc->eps[i].proto;
        }
        ev.u.reg.broker_id = lc->b->node_id;
        ev.u.reg.cluster_id = cn_bytes_str(cluster_id);
        ev.u.reg.incarnation = lc->incarnation;
        ev.u.reg.eps = lw->eps;
        ev.u.reg.neps = lc->neps;
        ev.u.reg.rack = lc->has_rack ? cn_bytes_str(lc->rack) : CN_BYTES_NULL;
    } else {
        ev.kind = CN_CTE_HEARTBEAT;
        ev.u.hb.broker_id = lc->b->node_id;
        ev.u.hb.broker_epoch = lc->m.epoch;
        ev.u.hb.metadata_offset = applied_offset(lc);
        ev.u.hb.want_fence = false;
        ev.u.hb.want_shut_down = lc->m.want_shut_down;
    }
    lc->waiter = lw;
    cn_quorum_submit(lc->b->quorum, &ev, &lw->w);
}

static void send_peer(struct cn_lifecycle *lc, enum cn_lc_action act,
                      const char *cluster_id)
{
    int rc;
    if (act == CN_LCA_REGISTER) {
        struct cn_broker_registration_request rq;
        cn_broker_registration_request_init(&rq);
        struct cn_broker_registration_request_listener ls[CN_LISTENERS_MAX];
        struct cn_broker_registration_request_feature fs[2];
        for (size_t i = 0; i < lc->neps; i++) {
            cn_broker_registration_request_listener_init(&ls[i]);
            ls[i].name = cn_bytes_str(lc->eps[i].name);
            ls[i].host = cn_bytes_str(lc->eps[i].host);
            ls[i].port = (uint16_t)lc->eps[i].port;
            ls[i].security_protocol = lc->eps[i].proto;
        }
        cn_broker_registration_request_feature_init(&fs[0]);
        fs[0].name = cn_bytes_str("metadata.version");
        fs[0].min_supported_version = LC_METADATA_VERSION_MIN;
        fs[0].max_supported_version = LC_METADATA_VERSION_MAX;
        cn_broker_registration_request_feature_init(&fs[1]);
        fs[1].name = cn_bytes_str("transaction.version");
        fs[1].min_supported_version = 0;
        fs[1].max_supported_version = LC_TXN_VERSION_MAX;
        rq.broker_id = lc->b->node_id;
        rq.cluster_id = cn_bytes_str(cluster_id);
        rq.incarnation_id = lc->incarnation;
        rq.listeners = ls;
        rq.listeners_len = (int32_t)lc->neps;
        rq.features = fs;
        rq.features_len = 2;
        rq.rack = lc->has_rack ? cn_bytes_str(lc->rack) : CN_BYTES_NULL;
        rq.log_dirs_len = 0;
        rq.previous_broker_epoch = -1;
        rc = cn_peer_call(lc->peer, CN_API_BROKER_REGISTRATION,
                          LC_BROKER_REGISTRATION_VERSION, &rq,
                          LC_REQUEST_TIMEOUT_MS, on_peer_register, lc);
    } else {
        struct cn_broker_heartbeat_request rq;
        cn_broker_heartbeat_request_init(&rq);
        rq.broker_id = lc->b->node_id;
        rq.broker_epoch = lc->m.epoch;
        rq.current_metadata_offset = applied_offset(lc);
        rq.want_fence = false;
        rq.want_shut_down = lc->m.want_shut_down;
        rq.offline_log_dirs_len = 0;
        rc = cn_peer_call(lc->peer, CN_API_BROKER_HEARTBEAT,
                          LC_BROKER_HEARTBEAT_VERSION, &rq,
                          LC_REQUEST_TIMEOUT_MS, on_peer_heartbeat, lc);
    }
    if (rc != 0) {
        CN_WARN("cluster: cannot send to the controller: %s", cn_strerror(rc));
        lc_answer(lc, act, CN_LC_ERR_TRANSPORT, -1, true, false, false);
    }
}

static void on_discovered(void *arg, int err, const void *response,
                          struct cn_arena *arena)
{
    (void)arena;
    struct cn_lifecycle *lc = arg;
    if (lc->stopping)
        return;
    lc->discovering = false;
    const struct cn_describe_cluster_response *rs = response;
    if (!err && rs && rs->error_code == 0) {
        if (rs->controller_id >= 0 && voter_find(lc, rs->controller_id))
            lc->hint_leader = rs->controller_id;
        if (rs->cluster_id.len > 0 &&
            (size_t)rs->cluster_id.len < sizeof lc->disc_cluster_id) {
            memcpy(lc->disc_cluster_id, rs->cluster_id.ptr,
                   (size_t)rs->cluster_id.len);
            lc->disc_cluster_id[rs->cluster_id.len] = '\0';
        }
    }
    lc_kick(lc);
}

/* Asks the next voter (not this node) who the controller is and which
 * cluster this is. */
static void discover(struct cn_lifecycle *lc)
{
    const struct lc_voter *v = NULL;
    for (size_t i = 0; i < lc->nvoters && !v; i++) {
        const struct lc_voter *c = &lc->voters[lc->disc_next++ % lc->nvoters];
        if (c->id != lc->b->node_id)
            v = c;
    }
    if (!v)
        return;
    if (lc->disc_peer && lc->disc_id != v->id) {
        struct cn_peer *p = lc->disc_peer;
        lc->disc_peer = NULL;
        cn_peer_free(p);
    }
    if (!lc->disc_peer) {
        struct cn_peer_opts o = {
            .host = v->host,
            .port = v->port,
            .client_id = "cairn-broker-lifecycle",
            .backoff_ms = 50,
            .backoff_max_ms = 1000,
            .max_frame_bytes = 1 << 20,
        };
        if (cn_peer_new(lc->b->loop, &o, &lc->disc_peer) != 0) {
            lc->disc_peer = NULL;
            return;
        }
        lc->disc_id = v->id;
    }
    struct cn_describe_cluster_request rq;
    cn_describe_cluster_request_init(&rq);
    rq.endpoint_type = 1;
    if (cn_peer_call(lc->disc_peer, CN_API_DESCRIBE_CLUSTER, 0, &rq,
                     LC_REQUEST_TIMEOUT_MS / 2, on_discovered, lc) == 0)
        lc->discovering = true;
}

/* The id to register with: the one this node has applied, else its
 * meta.properties' (a mismatch must reach the controller, which refuses
 * it), else the one a voter named. */
static const char *lc_cluster_id(const struct cn_lifecycle *lc)
{
    const char *id = cn_image_cluster_id(cn_quorum_image(lc->b->quorum));
    if (id[0])
        return id;
    if (lc->b->cluster_id[0])
        return lc->b->cluster_id;
    return lc->disc_cluster_id;
}

static void on_timer(uv_timer_t *t)
{
    lc_kick(t->data);
}

/* Sends what the machine says is due, else arms the timer for when
 * something will be. */
static void lc_kick(struct cn_lifecycle *lc)
{
    if (lc->stopping)
        return;
    int64_t now = lc_now();
    bool self = false;
    bool known = false;
    const char *cluster_id = lc_cluster_id(lc);
    /* Registering needs the cluster's id; until one is known it is as if
     * no controller were. */
    bool due = !lc->m.in_flight && now >= lc->m.next_ms;
    if (due && (lc->m.state == CN_LC_REGISTERED || cluster_id[0]))
        known = lc_target(lc, &self);
    if (due && !known && !lc->discovering)
        discover(lc);
    enum cn_lc_action act = cn_lc_poll(&lc->m, now, known);
    if (act == CN_LCA_NONE) {
        if (!lc->m.in_flight) {
            /* Never 0 ms from inside the timer's own callback: libuv
             * 1.44 runs such a timer again in the same pass. */
            int64_t wait = lc->m.next_ms - now;
            uv_timer_start(&lc->timer, on_timer,
                           (uint64_t)(wait > 0 ? wait : 1), 0);
        }
        return;
    }
    uv_timer_stop(&lc->timer);
    if (self)
        send_self(lc, act, cluster_id);
    else
        send_peer(lc, act, cluster_id);
}

int cn_lifecycle_start(struct cn_broker *b)
{
    if (!b->quorum)
        return CN_EINVAL;
    struct cn_lifecycle *lc = calloc(1, sizeof *lc);
    if (!lc)
        return CN_ENOMEM;
    lc->b = b;
    lc->peer_id = -1;
    lc->last_leader = -1;
    lc->hint_leader = -1;
    lc->disc_id = -1;
    lc->was_fenced = true;
    int rc = voters_from_config(b->cfg, &lc->voters, &lc->nvoters);
    if (rc != 0) {
        free(lc);
        return rc;
    }
    if (uv_random(NULL, NULL, lc->incarnation.b, sizeof lc->incarnation.b, 0,
                  NULL) != 0) {
        /* Only has to differ from the last start's. */
        int64_t t = cn_clock_wall_ms() ^ (int64_t)uv_os_getpid() << 20;
        memcpy(lc->incarnation.b, &t, sizeof t);
    }
    const char *rack = cfg_str(b, "broker.rack");
    if (rack && *rack) {
        snprintf(lc->rack, sizeof lc->rack, "%s", rack);
        lc->has_rack = true;
    }
    collect_endpoints(lc);
    int64_t interval = cfg_int(b, "broker.heartbeat.interval.ms", 2000);
    cn_lc_init(&lc->m, interval, 50, interval < 1000 ? interval : 1000);
    uv_timer_init(b->loop, &lc->timer);
    lc->timer.data = lc;
    uv_timer_init(b->loop, &lc->sd_timer);
    lc->sd_timer.data = lc;
    lc->open_handles = 2;
    b->lifecycle = lc;
    lc_kick(lc);
    return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
    struct cn_lifecycle *lc = h->data;
    if (--lc->open_handles > 0)
        return;
    free(lc->voters);
    free(lc);
}

void cn_lifecycle_stop(struct cn_broker *b)
{
    struct cn_lifecycle *lc = b->lifecycle;
    if (!lc)
        return;
    b->lifecycle = NULL;
    lc->stopping = true;
    if (lc->waiter)
        lc->waiter->lc = NULL;
    lc->waiter = NULL;
    peer_drop(lc);
    if (lc->disc_peer) {
        struct cn_peer *p = lc->disc_peer;
        lc->disc_peer = NULL;
        cn_peer_free(p);
    }
    lc->sd_cb = NULL; /* the broker stops anyway */
    uv_timer_stop(&lc->timer);
    uv_timer_stop(&lc->sd_timer);
    uv_close((uv_handle_t *)&lc->timer, on_timer_closed);
    uv_close((uv_handle_t *)&lc->sd_timer, on_timer_closed);
}

/* Whether the image has another broker leadership could move to
 * (registered, unfenced, not shutting down itself).  Without one, asking
 * the controller only waits: the last broker of a cluster being stopped,
 * or one whose peers are all gone. */
static bool another_usable(const struct cn_broker *b)
{
    if (!b->quorum)
        return false;
    const struct cn_image *img = cn_quorum_image(b->quorum);
    for (size_t i = 0; i < cn_image_broker_count(img); i++) {
        const struct cn_image_broker *ib = cn_image_broker_at(img, i);
        if (ib->id != b->node_id && !ib->fenced && !ib->in_controlled_shutdown)
            return true;
    }
    return false;
}

int cn_lifecycle_shutdown(struct cn_broker *b, int64_t timeout_ms,
                          cn_lifecycle_shutdown_cb cb)
{
    struct cn_lifecycle *lc = b->lifecycle;
    if (!lc || lc->stopping || lc->m.want_shut_down)
        return CN_EINVAL;
    lc->sd_cb = cb;
    if (!another_usable(b)) {
        CN_INFO("cluster: node %d: no other live broker could take its "
                "leaderships: no controlled shutdown",
                b->node_id);
        lc->m.want_shut_down = lc->m.shut_down = true;
        uv_timer_start(&lc->sd_timer, on_sd_timer, 1, 0);
        return 0;
    }
    if (cn_lc_begin_shutdown(&lc->m, lc_now())) {
        CN_INFO("cluster: node %d leads nothing the controller knows of: "
                "no controlled shutdown needed",
                b->node_id);
        /* Never inside this call. */
        uv_timer_start(&lc->sd_timer, on_sd_timer, 1, 0);
        return 0;
    }
    CN_INFO("cluster: controlled shutdown of node %d: asking the controller "
            "to move its leaderships (at most %lld ms)",
            b->node_id, (long long)timeout_ms);
    uv_timer_start(&lc->sd_timer, on_sd_timer,
                   (uint64_t)(timeout_ms > 0 ? timeout_ms : 1), 0);
    if (!lc->m.in_flight) {
        uv_timer_stop(&lc->timer);
        uv_timer_start(&lc->timer, on_timer, 1, 0);
    }
    return 0;
}

int64_t cn_lifecycle_epoch(const struct cn_broker *b)
{
    return b->lifecycle ? b->lifecycle->m.epoch : -1;
}

bool cn_lifecycle_fenced(const struct cn_broker *b)
{
    return b->lifecycle ? b->lifecycle->m.fenced : true;
}
