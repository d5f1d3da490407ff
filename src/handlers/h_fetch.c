/*
 * h_fetch.c - Fetch with long polling (max_wait_ms / min_bytes), KIP-74
 * byte limits, and fetch sessions declined as KIP-227 allows.
 *
 * A fetch that finds less than min_bytes is parked: it is tried again
 * whenever a high watermark moves (cn_fetch_wake_all) and answered with
 * whatever there is when max_wait_ms runs out.
 *
 * Sessions: a client asking for a new session (session id 0, epoch 0) gets
 * session id 0 back, which means "no session": it keeps sending full
 * fetches.  An incremental fetch naming a session is FETCH_SESSION_ID_NOT_
 * FOUND, which makes the client start over with a full fetch.
 */
#include <stdlib.h>
#include <string.h>

#include "node/authz.h"
#include "base/err.h"
#include "base/failpoint.h"
#include "base/say.h"
#include "handlers/handlers.h"
#include "handlers/quotas.h"
#include "node/replica.h"
#include "partition/epochs.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

struct fetch_state {
    struct cn_fetch_wait wait;  /* first: container_of by cast */
    struct cn_req_header h;     /* copy of the request header */
    struct cn_fetch_request rq; /* decoded; views into the frame */
    bool parked;
    /* Cluster mode: a follower's fetch (Fetch's ReplicaState), served to
     * the log end with divergence checks; its fetch offsets were recorded
     * (cn_replica_follower_fetch) on the first try, and errors[k] holds
     * what that said of the k-th partition. */
    int32_t replica_id; /* -1: a consumer */
    int16_t *replica_errors;
};

static int64_t fetch_lso(const struct cn_partition *p)
{
    /* A planted bug for the history checker's self-test: read_committed
     * readers then see open and aborted transactions. */
    if (CN_TEST_BUG("bug.lso_ignores_open_txns"))
        return p->high_watermark;
    return cn_partition_lso(p);
}

static int64_t visible_end(const struct cn_partition *p, int8_t isolation)
{
    return isolation == 1 ? fetch_lso(p) : p->high_watermark;
}

/* The offset after the last whole batch in buf (what a fetch returned). */
static int64_t end_of_batches(const uint8_t *buf, size_t len, int64_t dflt)
{
    int64_t next = dflt;
    for (size_t pos = 0; pos < len;) {
        struct cn_batch_hdr hdr;
        if (cn_batch_hdr_parse(buf + pos, len - pos, &hdr) != 0)
            break;
        next = cn_batch_last_offset(&hdr) + 1;
        pos += cn_batch_size(&hdr);
    }
    return next;
}

struct aborted_list {
    struct cn_arena *arena;
    struct cn_fetch_response_aborted_transaction *v;
    int32_t n, cap;
};

static int aborted_collect(void *arg, const struct cn_aborted_txn *t)
{
    struct aborted_list *l = arg;
    if (l->n == l->cap) {
        int32_t cap = l->cap ? l->cap * 2 : 8;
        struct cn_fetch_response_aborted_transaction *v =
            cn_arena_calloc(l->arena, (size_t)cap, sizeof *v);
        if (!v)
            return CN_ENOMEM;
        if (l->n)
            memcpy(v, l->v, (size_t)l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n].producer_id = t->producer_id;
    l->v[l->n].first_offset = t->first_offset;
    l->n++;
    return 0;
}

/* read_committed: the aborted transactions overlapping what is returned,
 * from the aborted-transaction index, so the client can drop their
 * records.  Returns 0 or CN_ENOMEM. */
static int fill_aborted(struct cn_arena *arena, const struct cn_partition *p,
                        int64_t from, int64_t to,
                        struct cn_fetch_response_partition_data *pd)
{
    struct aborted_list l = {arena, NULL, 0, 0};
    int rc = cn_log_aborted_txns(p->log, from, to, aborted_collect, &l);
    if (rc)
        return rc;
    pd->aborted_transactions = l.v;
    pd->aborted_transactions_len = l.n;
    return 0;
}

static struct cn_topic *
resolve_topic(struct cn_broker *b, int16_t version,
              const struct cn_fetch_request_fetch_topic *ft)
{
    if (version >= 13)
        return cn_topic_find_id(b, &ft->topic_id);
    return cn_topic_find(b, ft->topic);
}

/* A follower's log diverges from ours when the last epoch it fetched
 * ends here before its fetch offset, or is not ours at all (KIP-320,
 * Fetch v12+): it is told where our log has that epoch end, and
 * truncates there before fetching again. */
static bool diverges(const struct cn_partition *p,
                     const struct cn_fetch_request_fetch_partition *fp,
                     struct cn_fetch_response_epoch_end_offset *out)
{
    if (fp->last_fetched_epoch < 0)
        return false;
    int32_t epoch = -1;
    int64_t end = -1;
    cn_epochs_end_offset_for(p->epochs, fp->last_fetched_epoch,
                             cn_log_end_offset(p->log), &epoch, &end);
    if (epoch >= fp->last_fetched_epoch && end >= fp->fetch_offset)
        return false;
    out->epoch = epoch;
    out->end_offset = end;
    /* An epoch newer than any of ours (no election makes one): {-1, -1}
     * would read as "no divergence" and the follower would ask again at
     * once, forever; our log start makes it start over from what we
     * hold. */
    if (epoch < 0 && end < 0)
        out->end_offset = cn_log_start_offset(p->log);
    return true;
}

/* Records a follower's fetch offsets (its log ends), once per request:
 * they may move the high watermark and the ISR (replica.h). */
static int record_follower(struct cn_broker *b, struct cn_req *req,
                           struct fetch_state *fs)
{
    const struct cn_fetch_request *rq = &fs->rq;
    int16_t v = fs->h.api_version;
    size_t np_total = 0;
    for (int32_t i = 0; i < rq->topics_len; i++)
        np_total += rq->topics[i].partitions_len > 0
                        ? (size_t)rq->topics[i].partitions_len
                        : 0;
    fs->replica_errors = cn_arena_calloc(&req->arena, np_total + 1,
                                         sizeof *fs->replica_errors);
    if (!fs->replica_errors)
        return CN_ENOMEM;
    int64_t epoch = v >= 15 ? rq->replica_state.replica_epoch : -1;
    size_t k = 0;
    for (int32_t i = 0; i < rq->topics_len; i++) {
        const struct cn_fetch_request_fetch_topic *ft = &rq->topics[i];
        struct cn_topic *t = resolve_topic(b, v, ft);
        for (int32_t j = 0; j < ft->partitions_len; j++, k++) {
            const struct cn_fetch_request_fetch_partition *fp =
                &ft->partitions[j];
            if (!t || fp->partition < 0 ||
                fp->partition >= t->partition_count ||
                !t->partitions[fp->partition])
                continue; /* answered by try_fetch's own checks */
            struct cn_partition *p = t->partitions[fp->partition];
            struct cn_fetch_response_epoch_end_offset div;
            /* Kafka records nothing for a fetch it answers with a
             * diverging epoch: that fetch offset is not the follower's
             * log end for long. */
            if (!cn_partition_led(b, p) ||
                (fp->current_leader_epoch >= 0 &&
                 fp->current_leader_epoch != p->leader_epoch) ||
                (v >= 12 && diverges(p, fp, &div)))
                continue;
            fs->replica_errors[k] = cn_replica_follower_fetch(
                b, p, fs->replica_id, epoch, fp->fetch_offset);
        }
    }
    return 0;
}

/*
 * Builds the response.  Returns true when it should be sent now: enough
 * bytes, an error, no waiting asked for, or `final`.  On true, req->resp
 * holds the encoded response.
 */
/* min_bytes, at least 1, and (Kafka) no more than the quota lets the
 * answer carry, or the fetch would wait out max_wait_ms for nothing. */
static size_t fetch_min_bytes(int32_t min_bytes, int64_t quota_max)
{
    size_t m = min_bytes > 0 ? (size_t)min_bytes : 1;
    if (quota_max >= 0 && (uint64_t)quota_max < m)
        m = quota_max > 0 ? (size_t)quota_max : 1;
    return m;
}

static bool try_fetch(struct cn_broker *b, struct fetch_state *fs, bool final)
{
    struct cn_req *req = fs->wait.req;
    const struct cn_fetch_request *rq = &fs->rq;
    int16_t v = fs->h.api_version;
    struct cn_fetch_response rs;
    cn_fetch_response_init(&rs);
    /* Record bytes are read into the request's payload buffer and sent
     * from there by reference (no copy into the response).  Freed memory
     * stays in malloc's heap (see main.c), so reusing it costs no page
     * faults. */
    struct cn_wr *dp = &req->payload;
    cn_wr_reset(dp);
#define data (*dp)
    int32_t nt = 0;
    bool urgent = false;
    bool sent = true;
    /* This attempt's arrays: a parked fetch is tried again after every
     * sync round, and the request's own arena would grow each time. */
    struct cn_arena scratch;
    cn_arena_init(&scratch);

    if (v >= 7 && (rq->session_id != 0 || rq->session_epoch > 0)) {
        /* Closing a session we never opened (epoch -1) is fine. */
        if (rq->session_epoch != -1) {
            rs.error_code = KAFKA_FETCH_SESSION_ID_NOT_FOUND;
            rs.responses_len = 0;
            goto encode;
        }
    }
    nt = rq->topics_len > 0 ? rq->topics_len : 0;
    rs.responses = cn_arena_calloc(&scratch, (size_t)nt + 1,
                                   sizeof *rs.responses);
    if (!rs.responses)
        goto nomem;
    rs.responses_len = nt;
    size_t total_max = rq->max_bytes > 0 ? (size_t)rq->max_bytes : 0;
    if (v < 3)
        total_max = SIZE_MAX;
    /* Never more than consumer_byte_rate allows in its window (Kafka's
     * getMaxValueInQuotaWindow caps fetch.max.bytes). */
    bool replica = fs->replica_id >= 0;
    /* Replication is not a client: client quotas do not apply to it. */
    int64_t quota_max = replica ? -1
                                : cn_quota_fetch_max_bytes(b, req, &fs->h);
    if (quota_max >= 0 && (uint64_t)quota_max < total_max)
        total_max = (size_t)quota_max;
    /* At least one batch still goes out (first_data below), as Kafka
     * answers whatever max_bytes says. */
    size_t conn_room = cn_req_conn_room(req);
    bool room_capped = total_max > conn_room;
    if (room_capped)
        total_max = conn_room;
    size_t total = 0;
    bool first_data = true;
    /* Offsets into `data` for each partition; patched to pointers last
     * because `data` may move while it grows. */
    size_t *starts = NULL, *lens = NULL;
    size_t np_total = 0;
    for (int32_t i = 0; i < nt; i++)
        np_total += rq->topics[i].partitions_len > 0
                        ? (size_t)rq->topics[i].partitions_len
                        : 0;
    starts = cn_arena_calloc(&scratch, np_total + 1, sizeof *starts);
    lens = cn_arena_calloc(&scratch, np_total + 1, sizeof *lens);
    if (!starts || !lens)
        goto nomem;
    size_t k = 0;
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_fetch_request_fetch_topic *ft = &rq->topics[i];
        struct cn_fetch_response_fetchable_topic_response *tr =
            &rs.responses[i];
        cn_fetch_response_fetchable_topic_response_init(tr);
        tr->topic = ft->topic;
        tr->topic_id = ft->topic_id;
        int32_t np = ft->partitions_len > 0 ? ft->partitions_len : 0;
        tr->partitions = cn_arena_calloc(&scratch, (size_t)np + 1,
                                         sizeof *tr->partitions);
        if (!tr->partitions)
            goto nomem;
        tr->partitions_len = np;
        struct cn_topic *t = resolve_topic(b, v, ft);
        /* READ on the topic; a topic id nobody knows stays
         * UNKNOWN_TOPIC_ID (there is no name to check).  A follower was
         * checked for CLUSTER_ACTION instead, as Kafka does. */
        bool denied = replica ? false
                      : t     ? !cn_authz_cstr(b, req, CN_ACL_OP_READ,
                                               CN_ACL_RT_TOPIC, t->name)
                              : v < 13 && !cn_authz(b, req, CN_ACL_OP_READ,
                                                    CN_ACL_RT_TOPIC, ft->topic);
        for (int32_t j = 0; j < np; j++, k++) {
            const struct cn_fetch_request_fetch_partition *fp =
                &ft->partitions[j];
            struct cn_fetch_response_partition_data *pd = &tr->partitions[j];
            cn_fetch_response_partition_data_init(pd);
            pd->partition_index = fp->partition;
            pd->high_watermark = -1;
            pd->last_stable_offset = -1;
            pd->log_start_offset = -1;
            pd->preferred_read_replica = -1;
            pd->aborted_transactions_len = rq->isolation_level ? 0 : -1;
            starts[k] = lens[k] = 0;
            if (denied) {
                pd->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
                urgent = true;
                continue;
            }
            if (!t) {
                pd->error_code = v >= 13 ? KAFKA_UNKNOWN_TOPIC_ID
                                         : cn_partition_missing(b, ft->topic,
                                                                fp->partition);
                urgent = true;
                continue;
            }
            if (fp->partition < 0 || fp->partition >= t->partition_count) {
                pd->error_code = cn_partition_missing(b, ft->topic,
                                                      fp->partition);
                urgent = true;
                continue;
            }
            struct cn_partition *p = t->partitions[fp->partition];
            if (v < 4) {
                pd->error_code = KAFKA_UNSUPPORTED_VERSION;
                urgent = true;
                continue;
            }
            /* KIP-392: from v11 a consumer may read from a follower, up
             * to the follower's high watermark, as Kafka serves it
             * (whether or not its rack asked for one). */
            bool follower_read = v >= 11 && !replica && p->fetcher;
            if (!cn_partition_led(b, p) && !follower_read) {
                pd->error_code = KAFKA_NOT_LEADER_OR_FOLLOWER;
                pd->current_leader.leader_id = p->leader;
                pd->current_leader.leader_epoch = p->leader_epoch;
                urgent = true;
                continue;
            }
            if (fp->current_leader_epoch >= 0 &&
                fp->current_leader_epoch != p->leader_epoch) {
                pd->error_code = fp->current_leader_epoch > p->leader_epoch
                                     ? KAFKA_UNKNOWN_LEADER_EPOCH
                                     : KAFKA_FENCED_LEADER_EPOCH;
                urgent = true;
                continue;
            }
            if (cn_partition_offline(b, p)) {
                pd->error_code = KAFKA_KAFKA_STORAGE_ERROR;
                urgent = true;
                continue;
            }
            if (replica && fs->replica_errors[k]) {
                pd->error_code = fs->replica_errors[k];
                urgent = true;
                continue;
            }
            int64_t start = cn_log_start_offset(p->log);
            /* A follower copies the whole log; only what the ISR holds is
             * visible to consumers. */
            int64_t end = replica ? cn_log_end_offset(p->log)
                                  : visible_end(p, rq->isolation_level);
            pd->high_watermark = p->high_watermark;
            pd->last_stable_offset = fetch_lso(p);
            pd->log_start_offset = start;
            if (replica && v >= 12 && diverges(p, fp, &pd->diverging_epoch)) {
                urgent = true;
                continue;
            }
            if (fp->fetch_offset < start ||
                fp->fetch_offset > cn_log_end_offset(p->log)) {
                pd->error_code = KAFKA_OFFSET_OUT_OF_RANGE;
                urgent = true;
                continue;
            }
            if (fp->fetch_offset >= end)
                continue;
            size_t part_max = fp->partition_max_bytes > 0
                                  ? (size_t)fp->partition_max_bytes
                                  : 0;
            size_t room = total_max > total ? total_max - total : 0;
            size_t limit = part_max < room ? part_max : room;
            size_t got = 0;
            size_t before = data.len;
            int err = cn_log_read(p->log, fp->fetch_offset, end, limit,
                                  first_data, &data, &got);
            if (err) {
                pd->error_code = err == CN_ERANGE ? KAFKA_OFFSET_OUT_OF_RANGE
                                                  : KAFKA_KAFKA_STORAGE_ERROR;
                urgent = true;
                continue;
            }
            if (rq->isolation_level == 1 && got > 0 &&
                fill_aborted(&scratch, p, fp->fetch_offset,
                             end_of_batches(data.buf + before, got, end),
                             pd) != 0)
                goto nomem;
            starts[k] = before;
            lens[k] = got;
            total += got;
            if (got)
                first_data = false;
        }
    }
    if (data.err)
        goto nomem;
    /* Capped by the connection's room, waiting for min_bytes cannot help
     * until the client reads: what fits goes now. */
    if (!final && !urgent && rq->max_wait_ms > 0 &&
        !(room_capped && total > 0) &&
        total < fetch_min_bytes(rq->min_bytes, quota_max)) {
        /* It waits: what it read is given back rather than held for the
         * whole wait (up to min_bytes per parked fetch). */
        cn_wr_fini(dp);
        sent = false;
        goto out;
    }
    /* KIP-219: a throttled fetch is answered at once, with the time and
     * no partitions; the connection then waits it out. */
    rs.throttle_time_ms = replica
                              ? 0
                              : cn_quota_fetch_answer(b, req, &fs->h, total);
    if (rs.throttle_time_ms > 0) {
        rs.responses_len = 0;
        goto encode;
    }
    k = 0;
    for (int32_t i = 0; i < nt; i++)
        for (int32_t j = 0; j < rs.responses[i].partitions_len; j++, k++)
            rs.responses[i].partitions[j].records = cn_bytes_of(
                lens[k] ? data.buf + starts[k] : NULL, (int32_t)lens[k]);
encode:
    rs.session_id = 0;
    cn_wr_reset(&req->resp);
    cn_wr_by_reference(&req->resp, 4096);
    cn_resp_begin(req, &fs->h);
    cn_fetch_response_encode(&req->resp, v, &rs);
    cn_req_hold_response(req);
    goto out;
nomem:
    req->resp.err = CN_ENOMEM; /* the net layer closes the connection */
out:
    cn_arena_fini(&scratch);
    return sent;
#undef data
}

static void wait_unlink(struct cn_broker *b, struct cn_fetch_wait *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else if (b->fetch_waits == w)
        b->fetch_waits = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->prev = w->next = NULL;
}

static void on_wait_closed(uv_handle_t *h)
{
    struct cn_fetch_wait *w = h->data;
    cn_req_done(w->req);
}

/* Ends a parked fetch: its response (if any) goes out once the timer
 * handle has closed, since the handle lives inside the request. */
static void wait_finish(struct cn_broker *b, struct cn_fetch_wait *w)
{
    ((struct fetch_state *)w)->parked = false;
    wait_unlink(b, w);
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, on_wait_closed);
}

static void on_wait_timeout(uv_timer_t *t)
{
    struct cn_fetch_wait *w = t->data;
    struct fetch_state *fs = (struct fetch_state *)w;
    if (cn_req_conn_closed(w->req))
        w->req->no_response = true;
    else
        try_fetch(w->broker, fs, true);
    wait_finish(w->broker, w);
}

void cn_fetch_wake_all(struct cn_broker *b)
{
    struct cn_fetch_wait *w = b->fetch_waits;
    while (w) {
        struct cn_fetch_wait *next = w->next;
        struct fetch_state *fs = (struct fetch_state *)w;
        if (cn_req_conn_closed(w->req)) {
            w->req->no_response = true;
            wait_finish(b, w);
        } else if (try_fetch(b, fs, false)) {
            wait_finish(b, w);
        }
        w = next;
    }
}

void cn_fetch_cancel_all(struct cn_broker *b)
{
    while (b->fetch_waits) {
        struct cn_fetch_wait *w = b->fetch_waits;
        w->req->no_response = true;
        wait_finish(b, w);
    }
}

void cn_fetch_abandon(struct cn_broker *b, struct cn_req *req)
{
    struct fetch_state *fs = req->handler_state;
    if (!fs || !fs->parked)
        return;
    req->no_response = true;
    wait_finish(b, &fs->wait);
}

void cn_broker_data_arrived(struct cn_broker *b)
{
    if (b->fetch_waits)
        cn_fetch_wake_all(b);
}

void cn_h_fetch(struct cn_broker *b, struct cn_req *req,
                const struct cn_req_header *h, struct cn_rd *body)
{
    struct fetch_state *fs = cn_arena_alloc(&req->arena, sizeof *fs);
    if (!fs) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    int err = cn_fetch_request_decode(body, &req->arena, h->api_version,
                                      &fs->rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    fs->h = *h;
    fs->wait.req = req;
    fs->wait.broker = b;
    /* A follower's fetch names itself (ReplicaState from v15, replica_id
     * before); only cluster mode has followers: a single node serves such
     * a fetch as a consumer's, as it always did. */
    fs->replica_id = h->api_version >= 15 ? fs->rq.replica_state.replica_id
                                          : fs->rq.replica_id;
    if (!b->cfg->cluster_mode)
        fs->replica_id = -1;
    if (fs->replica_id >= 0) {
        /* Kafka: a follower fetch needs CLUSTER_ACTION on the cluster. */
        if (!cn_authz_cluster(b, req, CN_ACL_OP_CLUSTER_ACTION)) {
            struct cn_fetch_response denied;
            cn_fetch_response_init(&denied);
            denied.error_code = KAFKA_CLUSTER_AUTHORIZATION_FAILED;
            cn_resp_begin(req, h);
            cn_fetch_response_encode(&req->resp, h->api_version, &denied);
            cn_req_done(req);
            return;
        }
        if (record_follower(b, req, fs) != 0) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
    }
    if (try_fetch(b, fs, false)) {
        cn_req_done(req);
        return;
    }
    /* Parked: it waits for the client's max_wait_ms or for data, so it
     * leaves the broker-wide request budget (net.h). */
    fs->parked = true;
    req->handler_state = fs;
    cn_req_park(req);
    uv_timer_init(b->loop, &fs->wait.timer);
    fs->wait.timer.data = &fs->wait;
    uv_timer_start(&fs->wait.timer, on_wait_timeout,
                   (uint64_t)fs->rq.max_wait_ms, 0);
    fs->wait.next = b->fetch_waits;
    if (b->fetch_waits)
        b->fetch_waits->prev = &fs->wait;
    b->fetch_waits = &fs->wait;
}
