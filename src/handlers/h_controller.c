/*
 * h_controller.c - the controller's APIs: BrokerRegistration,
 * BrokerHeartbeat, AllocateProducerIds, AlterPartition (cluster mode
 * only; dispatch.c
 * neither serves nor advertises them on a single node, as a Kafka broker
 * listener does not), and DescribeQuorum (every mode: a single node is a
 * quorum of itself).
 *
 * A request for the controller is decoded, parked, and handed to this
 * node's quorum with a waiter that lives in the request's arena; the
 * quorum answers through the waiter exactly once (NOT_CONTROLLER when this
 * node does not lead), and only then is the response written.  The
 * request stays allocated until then even if its connection closes.
 *
 * DescribeQuorum sent to a cluster node that does not lead is forwarded
 * to the active controller (cn_ctlcall), as a Kafka 4 broker forwards it:
 * only the raft leader knows every voter's log end offset.
 */
#include <stdlib.h>
#include <string.h>

#include "base/say.h"
#include "node/authz.h"
#include "handlers/handlers.h"
#include "node/ctlcall.h"
#include "node/quorum.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

#define METADATA_TOPIC "__cluster_metadata"

/* What a parked request keeps for its answer (req->handler_state). */
struct ctl_call {
    struct cn_quorum_waiter w; /* first: done casts back */
    struct cn_req *req;
    struct cn_req_header h;
};

static void ctl_done(struct cn_quorum_waiter *w, const struct cn_ctl_answer *a)
{
    struct ctl_call *c = (struct ctl_call *)w;
    struct cn_req *req = c->req;
    const struct cn_req_header *h = &c->h;
    cn_resp_begin(req, h);
    switch (h->api_key) {
    case CN_API_BROKER_REGISTRATION: {
        struct cn_broker_registration_response rs;
        cn_broker_registration_response_init(&rs);
        rs.error_code = a->error;
        rs.broker_epoch = a->error ? -1 : a->u.broker_epoch;
        cn_broker_registration_response_encode(&req->resp, h->api_version,
                                               &rs);
        break;
    }
    case CN_API_BROKER_HEARTBEAT: {
        struct cn_broker_heartbeat_response rs;
        cn_broker_heartbeat_response_init(&rs);
        rs.error_code = a->error;
        rs.is_fenced = a->error ? true : a->u.hb.fenced;
        rs.is_caught_up = a->error ? false : a->u.hb.caught_up;
        rs.should_shut_down = a->error ? false : a->u.hb.should_shut_down;
        cn_broker_heartbeat_response_encode(&req->resp, h->api_version, &rs);
        break;
    }
    default: {
        struct cn_allocate_producer_ids_response rs;
        cn_allocate_producer_ids_response_init(&rs);
        rs.error_code = a->error;
        rs.producer_id_start = a->error ? -1 : a->u.pids.start;
        rs.producer_id_len = a->error ? 0 : a->u.pids.len;
        cn_allocate_producer_ids_response_encode(&req->resp, h->api_version,
                                                 &rs);
        break;
    }
    }
    cn_req_done(req);
}

static struct ctl_call *call_new(struct cn_req *req,
                                 const struct cn_req_header *h)
{
    struct ctl_call *c = cn_arena_calloc(&req->arena, 1, sizeof *c);
    if (!c)
        return NULL;
    c->w.done = ctl_done;
    c->req = req;
    c->h = *h;
    req->handler_state = c;
    return c;
}

/* Answers at once with err, through the same encoder. */
static void answer_error(struct ctl_call *c, int16_t err)
{
    struct cn_ctl_answer a;
    memset(&a, 0, sizeof a);
    a.error = err;
    ctl_done(&c->w, &a);
}

static void submit(struct cn_broker *b, struct cn_req *req, struct ctl_call *c,
                   struct cn_ctl_event *ev)
{
    ev->token = NULL; /* the quorum's */
    cn_req_park(req);
    cn_quorum_submit(b->quorum, ev, &c->w);
}

void cn_h_broker_registration(struct cn_broker *b, struct cn_req *req,
                              const struct cn_req_header *h,
                              struct cn_rd *body)
{
    struct cn_broker_registration_request rq;
    int err = cn_broker_registration_request_decode(body, &req->arena,
                                                    h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct ctl_call *c = call_new(req, h);
    if (!c) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    if (!b->quorum) {
        answer_error(c, KAFKA_NOT_CONTROLLER);
        return;
    }
    /* A broker that cannot read the cluster's metadata.version must not
     * join it (Kafka: UNSUPPORTED_VERSION). */
    int16_t mv = cn_image_feature(cn_quorum_image(b->quorum),
                                  "metadata.version");
    for (int32_t i = 0; mv > 0 && i < rq.features_len; i++) {
        const struct cn_broker_registration_request_feature *f =
            &rq.features[i];
        if (cn_bytes_eq_str(f->name, "metadata.version") &&
            (mv < f->min_supported_version || mv > f->max_supported_version)) {
            CN_WARN("cluster: broker %d supports metadata.version %d-%d, "
                    "the cluster is at %d: refused",
                    rq.broker_id, f->min_supported_version,
                    f->max_supported_version, mv);
            answer_error(c, KAFKA_UNSUPPORTED_VERSION);
            return;
        }
    }
    int32_t n = rq.listeners_len > 0 ? rq.listeners_len : 0;
    struct cn_ctl_endpoint *eps = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                                  sizeof *eps);
    if (!eps) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    for (int32_t i = 0; i < n; i++) {
        eps[i].name = rq.listeners[i].name;
        eps[i].host = rq.listeners[i].host;
        eps[i].port = rq.listeners[i].port;
        eps[i].security_protocol = rq.listeners[i].security_protocol;
    }
    struct cn_ctl_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = CN_CTE_REGISTER;
    ev.u.reg.broker_id = rq.broker_id;
    ev.u.reg.cluster_id = rq.cluster_id;
    ev.u.reg.incarnation = rq.incarnation_id;
    ev.u.reg.eps = eps;
    ev.u.reg.neps = (size_t)n;
    ev.u.reg.rack = rq.rack;
    submit(b, req, c, &ev);
}

void cn_h_broker_heartbeat(struct cn_broker *b, struct cn_req *req,
                           const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_broker_heartbeat_request rq;
    int err = cn_broker_heartbeat_request_decode(body, &req->arena,
                                                 h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct ctl_call *c = call_new(req, h);
    if (!c) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    if (!b->quorum) {
        answer_error(c, KAFKA_NOT_CONTROLLER);
        return;
    }
    struct cn_ctl_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = CN_CTE_HEARTBEAT;
    ev.u.hb.broker_id = rq.broker_id;
    ev.u.hb.broker_epoch = rq.broker_epoch;
    ev.u.hb.metadata_offset = rq.current_metadata_offset;
    ev.u.hb.want_fence = rq.want_fence;
    ev.u.hb.want_shut_down = rq.want_shut_down;
    submit(b, req, c, &ev);
}

void cn_h_allocate_producer_ids(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h,
                                struct cn_rd *body)
{
    struct cn_allocate_producer_ids_request rq;
    int err = cn_allocate_producer_ids_request_decode(body, &req->arena,
                                                      h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct ctl_call *c = call_new(req, h);
    if (!c) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    if (!b->quorum) {
        answer_error(c, KAFKA_NOT_CONTROLLER);
        return;
    }
    struct cn_ctl_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = CN_CTE_ALLOC_PIDS;
    ev.u.pids.broker_id = rq.broker_id;
    ev.u.pids.broker_epoch = rq.broker_epoch;
    submit(b, req, c, &ev);
}

/* ---- AlterPartition ----------------------------------------------------- */

/*
 * Each partition of the request is one controller event (ctl.h); the
 * response is written when the last is answered.  Errors that concern the
 * whole request come back as the top-level error with no topics, as
 * Kafka's getErrorResponse: a stale broker epoch, and NOT_CONTROLLER when
 * every partition got it (this node's controller does not lead).
 */
struct ap_call;

struct ap_part {
    struct cn_quorum_waiter w; /* first: done casts back */
    struct ap_call *call;
    int32_t topic, part; /* indexes in the request */
    struct cn_ctl_answer ans;
};

struct ap_call {
    struct cn_req *req;
    struct cn_req_header h;
    struct cn_alter_partition_request rq;
    struct ap_part *parts;
    int32_t nparts;
    int32_t pending; /* answers still due, plus one while submitting */
};

static void ap_respond(struct ap_call *c, int16_t top)
{
    struct cn_req *req = c->req;
    struct cn_alter_partition_response rs;
    cn_alter_partition_response_init(&rs);
    rs.error_code = top;
    rs.topics_len = 0;
    int32_t nt = c->rq.topics_len > 0 ? c->rq.topics_len : 0;
    if (!top && nt > 0) {
        rs.topics = cn_arena_calloc(&req->arena, (size_t)nt,
                                    sizeof *rs.topics);
        if (!rs.topics) {
            cn_req_bad(req, &c->h, CN_ENOMEM);
            return;
        }
        rs.topics_len = nt;
        int32_t k = 0;
        for (int32_t i = 0; i < nt; i++) {
            const struct cn_alter_partition_request_topic_data *qt =
                &c->rq.topics[i];
            struct cn_alter_partition_response_topic_data *t = &rs.topics[i];
            cn_alter_partition_response_topic_data_init(t);
            t->topic_name = qt->topic_name;
            t->topic_id = qt->topic_id;
            int32_t np = qt->partitions_len > 0 ? qt->partitions_len : 0;
            t->partitions = cn_arena_calloc(&req->arena, (size_t)np + 1,
                                            sizeof *t->partitions);
            if (!t->partitions) {
                cn_req_bad(req, &c->h, CN_ENOMEM);
                return;
            }
            t->partitions_len = np;
            for (int32_t j = 0; j < np; j++, k++) {
                const struct cn_ctl_answer *a = &c->parts[k].ans;
                struct cn_alter_partition_response_partition_data *p =
                    &t->partitions[j];
                cn_alter_partition_response_partition_data_init(p);
                p->partition_index = qt->partitions[j].partition_index;
                p->error_code = a->error;
                p->leader_id = a->error ? -1 : a->u.part.leader;
                p->leader_epoch = a->error ? -1 : a->u.part.leader_epoch;
                p->partition_epoch = a->error ? -1 : a->u.part.partition_epoch;
                p->isr = a->error ? NULL : c->parts[k].ans.u.part.isr;
                p->isr_len = a->error ? 0 : a->u.part.nisr;
            }
        }
    }
    cn_resp_begin(req, &c->h);
    cn_alter_partition_response_encode(&req->resp, c->h.api_version, &rs);
    cn_req_done(req);
}

static void ap_finish(struct ap_call *c)
{
    int32_t not_ctl = 0;
    for (int32_t k = 0; k < c->nparts; k++) {
        int16_t e = c->parts[k].ans.error;
        if (e == KAFKA_STALE_BROKER_EPOCH) {
            ap_respond(c, e);
            return;
        }
        not_ctl += e == KAFKA_NOT_CONTROLLER;
    }
    ap_respond(c, c->nparts > 0 && not_ctl == c->nparts ? KAFKA_NOT_CONTROLLER
                                                        : 0);
}

static void ap_done(struct cn_quorum_waiter *w, const struct cn_ctl_answer *a)
{
    struct ap_part *p = (struct ap_part *)w;
    p->ans = *a;
    p->ans.message = NULL; /* freed after this call */
    if (--p->call->pending == 0)
        ap_finish(p->call);
}

void cn_h_alter_partition(struct cn_broker *b, struct cn_req *req,
                          const struct cn_req_header *h, struct cn_rd *body)
{
    struct ap_call *c = cn_arena_calloc(&req->arena, 1, sizeof *c);
    if (!c) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    int err = cn_alter_partition_request_decode(body, &req->arena,
                                                h->api_version, &c->rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    c->req = req;
    c->h = *h;
    req->handler_state = c;
    const struct cn_alter_partition_request *rq = &c->rq;
    int32_t nt = rq->topics_len > 0 ? rq->topics_len : 0;
    for (int32_t i = 0; i < nt; i++)
        c->nparts += rq->topics[i].partitions_len > 0
                         ? rq->topics[i].partitions_len
                         : 0;
    c->parts = cn_arena_calloc(&req->arena, (size_t)c->nparts + 1,
                               sizeof *c->parts);
    if (!c->parts) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    if (!b->quorum) {
        ap_respond(c, KAFKA_NOT_CONTROLLER);
        return;
    }
    /* Every ISR in the request, converted before anything is submitted:
     * from then on only answers may end the request. */
    struct cn_ctl_event *evs = cn_arena_calloc(&req->arena,
                                               (size_t)c->nparts + 1,
                                               sizeof *evs);
    if (!evs) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    int32_t k = 0;
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_alter_partition_request_topic_data *t = &rq->topics[i];
        for (int32_t j = 0; j < t->partitions_len; j++, k++) {
            const struct cn_alter_partition_request_partition_data *pd =
                &t->partitions[j];
            /* v3 names each member's broker epoch; before, -1: not
             * checked (Kafka's newIsrToSimpleNewIsrWithBrokerEpochs). */
            bool v3 = h->api_version >= 3;
            int32_t n = v3 ? pd->new_isr_with_epochs_len : pd->new_isr_len;
            n = n > 0 ? n : 0;
            struct cn_ctl_isr_member *m = cn_arena_calloc(&req->arena,
                                                          (size_t)n + 1,
                                                          sizeof *m);
            if (!m) {
                cn_req_bad(req, h, CN_ENOMEM);
                return;
            }
            for (int32_t x = 0; x < n; x++) {
                m[x].id = v3 ? pd->new_isr_with_epochs[x].broker_id
                             : pd->new_isr[x];
                m[x].broker_epoch =
                    v3 ? pd->new_isr_with_epochs[x].broker_epoch : -1;
            }
            struct cn_ctl_event *ev = &evs[k];
            ev->kind = CN_CTE_ALTER_PARTITION;
            ev->u.isr.broker_id = rq->broker_id;
            ev->u.isr.broker_epoch = rq->broker_epoch;
            ev->u.isr.topic_id = t->topic_id;
            ev->u.isr.partition = pd->partition_index;
            ev->u.isr.leader_epoch = pd->leader_epoch;
            ev->u.isr.partition_epoch = pd->partition_epoch;
            ev->u.isr.isr = m;
            ev->u.isr.nisr = n;
            c->parts[k].w.done = ap_done;
            c->parts[k].call = c;
            c->parts[k].topic = i;
            c->parts[k].part = j;
        }
    }
    if (c->nparts == 0) {
        ap_respond(c, 0);
        return;
    }
    cn_req_park(req);
    c->pending = c->nparts + 1;
    for (k = 0; k < c->nparts; k++)
        cn_quorum_submit(b->quorum, &evs[k], &c->parts[k].w);
    if (--c->pending == 0)
        ap_finish(c);
}

/* ---- DescribeQuorum ----------------------------------------------------- */

/* The quorum as this node knows it; a single node is the sole voter of a
 * quorum that has always had it as leader. */
static void quorum_state(struct cn_broker *b, struct cn_quorum_state *st)
{
    if (b->quorum) {
        cn_quorum_describe(b->quorum, st);
        return;
    }
    memset(st, 0, sizeof *st);
    st->leader_id = b->node_id;
    st->term = 1;
    st->high_watermark = 0;
    st->replicas[0].id = b->node_id;
    st->replicas[0].log_end_offset = 0;
    st->replicas[0].last_contact_ms = -1;
    st->replicas[0].voter = true;
    st->nreplicas = 1;
}

static int fill_replicas(
    struct cn_req *req, const struct cn_quorum_state *st, bool voters,
    struct cn_describe_quorum_response_replica_state **out, int32_t *n)
{
    *out = cn_arena_calloc(&req->arena, st->nreplicas + 1, sizeof **out);
    if (!*out)
        return CN_ENOMEM;
    int32_t k = 0;
    for (size_t i = 0; i < st->nreplicas; i++) {
        const struct cn_quorum_replica *r = &st->replicas[i];
        if (r->voter != voters)
            continue;
        struct cn_describe_quorum_response_replica_state *s = &(*out)[k++];
        cn_describe_quorum_response_replica_state_init(s);
        s->replica_id = r->id;
        s->log_end_offset = r->log_end_offset;
        s->last_fetch_timestamp = r->last_contact_ms;
        s->last_caught_up_timestamp = r->last_contact_ms;
    }
    *n = k;
    return 0;
}

/* v2 names each voter's controller endpoint (its voter entry). */
static int fill_nodes(struct cn_broker *b, struct cn_req *req,
                      const struct cn_quorum_state *st,
                      struct cn_describe_quorum_response *rs)
{
    const char *lname = NULL;
    cn_config_get(b->cfg, "controller.listener.names", &lname, NULL);
    char name[CN_LISTENER_NAME_MAX] = "CONTROLLER";
    if (lname && *lname) {
        size_t l = strcspn(lname, ", ");
        if (l > 0 && l < sizeof name) {
            memcpy(name, lname, l);
            name[l] = '\0';
        }
    }
    rs->nodes = cn_arena_calloc(&req->arena, st->nreplicas + 1,
                                sizeof *rs->nodes);
    if (!rs->nodes)
        return CN_ENOMEM;
    int32_t k = 0;
    for (size_t i = 0; i < st->nreplicas; i++) {
        if (!st->replicas[i].voter)
            continue;
        int32_t id = st->replicas[i].id;
        struct cn_describe_quorum_response_node *nd = &rs->nodes[k];
        cn_describe_quorum_response_node_init(nd);
        nd->node_id = id;
        nd->listeners = cn_arena_calloc(&req->arena, 1, sizeof *nd->listeners);
        if (!nd->listeners)
            return CN_ENOMEM;
        cn_describe_quorum_response_listener_init(nd->listeners);
        nd->listeners_len = 0;
        if (!b->quorum) {
            const char *host;
            int port;
            cn_broker_advertised(b, req, &host, &port);
            nd->listeners[0].name = cn_bytes_str(b->cfg->nlisteners > 0
                                                     ? b->cfg->listener[0].name
                                                     : "PLAINTEXT");
            nd->listeners[0].host = cn_bytes_str(host);
            nd->listeners[0].port = (uint16_t)port;
            nd->listeners_len = 1;
        } else {
            for (int v = 0; v < b->cfg->nvoters; v++) {
                const struct cn_cfg_voter *cv = &b->cfg->voters[v];
                if (cv->id != id)
                    continue;
                nd->listeners[0].name = cn_req_str(req, name);
                nd->listeners[0].host = cn_req_str(req, cv->host);
                nd->listeners[0].port = (uint16_t)cv->port;
                nd->listeners_len = 1;
                break;
            }
        }
        k++;
    }
    rs->nodes_len = k;
    return 0;
}

/* This node's own view, answered now. */
static void dq_answer_own(struct cn_broker *b, struct cn_req *req,
                          const struct cn_req_header *h,
                          const struct cn_describe_quorum_request *rq)
{
    struct cn_quorum_state st;
    quorum_state(b, &st);
    struct cn_describe_quorum_response rs;
    cn_describe_quorum_response_init(&rs);
    int32_t nt = rq->topics_len > 0 ? rq->topics_len : 0;
    rs.topics = cn_arena_calloc(&req->arena, (size_t)nt + 1,
                                sizeof *rs.topics);
    if (!rs.topics)
        goto nomem;
    rs.topics_len = nt;
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_describe_quorum_request_topic_data *qt =
            &rq->topics[i];
        struct cn_describe_quorum_response_topic_data *t = &rs.topics[i];
        cn_describe_quorum_response_topic_data_init(t);
        t->topic_name = qt->topic_name;
        int32_t np = qt->partitions_len > 0 ? qt->partitions_len : 0;
        t->partitions = cn_arena_calloc(&req->arena, (size_t)np + 1,
                                        sizeof *t->partitions);
        if (!t->partitions)
            goto nomem;
        t->partitions_len = np;
        bool ours = cn_bytes_eq_str(qt->topic_name, METADATA_TOPIC);
        for (int32_t j = 0; j < np; j++) {
            struct cn_describe_quorum_response_partition_data *p =
                &t->partitions[j];
            cn_describe_quorum_response_partition_data_init(p);
            p->partition_index = qt->partitions[j].partition_index;
            if (!ours || p->partition_index != 0) {
                p->error_code = KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
                p->leader_id = -1;
                p->current_voters_len = 0;
                p->observers_len = 0;
                continue;
            }
            p->leader_id = st.leader_id;
            p->leader_epoch = (int32_t)st.term;
            p->high_watermark = st.high_watermark;
            if (fill_replicas(req, &st, true, &p->current_voters,
                              &p->current_voters_len) ||
                fill_replicas(req, &st, false, &p->observers,
                              &p->observers_len))
                goto nomem;
        }
    }
    rs.nodes_len = 0;
    if (h->api_version >= 2 && fill_nodes(b, req, &st, &rs))
        goto nomem;
    cn_resp_begin(req, h);
    cn_describe_quorum_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}

/*
 * DescribeQuorum carries no timeout: a forwarded one gives up after this
 * and answers from the own view, well before a client's default request
 * timeout (30 s), so that a minority still gets an answer.
 */
#define DQ_FORWARD_MS 5000

/* A forwarded DescribeQuorum (req->handler_state). */
struct dq_fwd {
    struct cn_broker *b;
    struct cn_req *req;
    struct cn_req_header h;
    struct cn_describe_quorum_request rq; /* views into req's frame */
};

/*
 * A node that does not lead answers its CONTROLLER listener from its own
 * view, in which every other voter's log end offset is -1, while a
 * leader knows each voter's (match index, 0 before any contact): such an
 * answer came from a node that lost (or never had) the lead, so the call
 * goes to whichever node leads now.
 */
static bool dq_not_leader(const void *response)
{
    const struct cn_describe_quorum_response *rs = response;
    for (int32_t i = 0; i < rs->topics_len; i++)
        for (int32_t j = 0; j < rs->topics[i].partitions_len; j++) {
            const struct cn_describe_quorum_response_partition_data *p =
                &rs->topics[i].partitions[j];
            if (p->error_code)
                continue;
            if (p->leader_id < 0)
                return true;
            for (int32_t k = 0; k < p->current_voters_len; k++)
                if (p->current_voters[k].log_end_offset < 0)
                    return true;
        }
    return false;
}

static void dq_forwarded(void *arg, int err, const void *response,
                         struct cn_arena *arena)
{
    (void)arena;
    struct dq_fwd *f = arg;
    if (err) {
        /* No controller within DQ_FORWARD_MS (a minority, an election, a
         * stopping broker): this node's view says less (other voters'
         * offsets unknown) but is better than no answer. */
        dq_answer_own(f->b, f->req, &f->h, &f->rq);
        return;
    }
    /* Encoded now, while the peer's arena holds the response's strings;
     * the version is the client's, which the controller answered. */
    cn_resp_begin(f->req, &f->h);
    cn_describe_quorum_response_encode(&f->req->resp, f->h.api_version,
                                       response);
    cn_req_done(f->req);
}

void cn_h_describe_quorum(struct cn_broker *b, struct cn_req *req,
                          const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_describe_quorum_request rq;
    int err = cn_describe_quorum_request_decode(body, &req->arena,
                                                h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    if (!cn_authz(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_CLUSTER,
                  cn_bytes_str(CN_ACL_CLUSTER_NAME))) {
        struct cn_describe_quorum_response rs;
        cn_describe_quorum_response_init(&rs);
        rs.error_code = KAFKA_CLUSTER_AUTHORIZATION_FAILED;
        rs.topics_len = 0;
        rs.nodes_len = 0;
        cn_resp_begin(req, h);
        cn_describe_quorum_response_encode(&req->resp, h->api_version, &rs);
        cn_req_done(req);
        return;
    }
    /* On the CONTROLLER listener the request may itself be a forwarded
     * one: it is answered here whatever this node knows, never sent on,
     * so that two nodes that each think the other leads cannot pass it
     * back and forth. */
    if (!b->quorum || cn_quorum_leads(b->quorum) ||
        cn_req_on_controller_listener(b, req)) {
        dq_answer_own(b, req, h, &rq);
        return;
    }
    struct dq_fwd *f = cn_arena_calloc(&req->arena, 1, sizeof *f);
    if (!f) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    f->b = b;
    f->req = req;
    f->h = *h;
    f->rq = rq;
    req->handler_state = f;
    cn_req_park(req);
    if (cn_ctlcall(b, CN_API_DESCRIBE_QUORUM, h->api_version, &f->rq,
                   DQ_FORWARD_MS, dq_not_leader, dq_forwarded, f) != 0)
        dq_answer_own(b, req, h, &rq);
}
