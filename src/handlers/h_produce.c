/*
 * h_produce.c - Produce: validate each partition's batches, append them,
 * and answer by acks (0: no answer; 1: once appended; -1: once synced).
 *
 * A partition's records are validated whole before anything is appended,
 * so a bad batch anywhere leaves that partition untouched.  The batches
 * are appended straight from the request frame, which the request owns:
 * the base offset is patched into the frame's bytes, so no copy is made.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "node/authz.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/failpoint.h"
#include "base/say.h"
#include "handlers/handlers.h"
#include "handlers/quotas.h"
#include "proto/batch.h"
#include "proto/compress.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"
#include "node/replica.h"
#include "node/txn_exec.h"
#include "node/txn_remote.h"

/* An acks=-1 write to a partition with followers: answered once the
 * high watermark passes what it appended (cluster mode). */
struct isr_wait {
    struct cn_uuid topic_id;
    int32_t index;
    int64_t required; /* the log end after its append */
    int32_t min_isr;
    struct cn_produce_response_partition_produce_response *pr;
    bool resolved;
};

struct produce_state {
    struct cn_sync_waiter waiter;  /* for acks=-1 */
    struct cn_req_header h;        /* copy: the caller's is on stack */
    struct cn_produce_response rs; /* filled as partitions are done */
    bool appended;                 /* some partition was written */
    /* acks=-1 with followers: after the local sync, the ISR's. */
    struct cn_hw_wait hw;
    struct isr_wait *isr_waits;
    int32_t nisr_waits;
    int32_t timeout_ms;
    bool hw_waited;
};

static int16_t kerr_from_batch_err(int err, const struct cn_batch_hdr *hdr)
{
    switch (err) {
    case CN_ECORRUPT: return KAFKA_CORRUPT_MESSAGE;
    case CN_EINVAL: return KAFKA_INVALID_RECORD;
    case CN_ETOOBIG: return KAFKA_MESSAGE_TOO_LARGE;
    case CN_EUNSUPPORTED:
        if (hdr->magic == 2)
            return KAFKA_UNSUPPORTED_COMPRESSION_TYPE;
        return KAFKA_UNSUPPORTED_FOR_MESSAGE_FORMAT;
    default: return KAFKA_UNKNOWN_SERVER_ERROR;
    }
}

static int16_t kerr_from_log_err(int err)
{
    if (err == CN_EOFFLINE || err == -EIO || err == -ENOSPC)
        return KAFKA_KAFKA_STORAGE_ERROR;
    return KAFKA_UNKNOWN_SERVER_ERROR;
}

/*
 * CreateTime topics bound how far record timestamps may stray from the
 * broker's clock (message.timestamp.before.max.ms / .after.max.ms, and the
 * older message.timestamp.difference.max.ms for both sides).  Checked on
 * the batch's first and largest timestamps, which is where producers put
 * the extremes.
 */
static bool timestamps_ok(const struct cn_topic_config *tc,
                          const uint8_t *batch, size_t len)
{
    struct cn_batch_hdr hdr;
    if (cn_batch_hdr_parse(batch, len, &hdr) != 0)
        return true; /* validation already vouched for it */
    int64_t now = cn_clock_wall_ms();
    int64_t before = tc->message_timestamp_before_max_ms;
    int64_t after = tc->message_timestamp_after_max_ms;
    if (tc->message_timestamp_difference_max_ms < before)
        before = tc->message_timestamp_difference_max_ms;
    if (tc->message_timestamp_difference_max_ms < after)
        after = tc->message_timestamp_difference_max_ms;
    int64_t ts[2] = {hdr.base_timestamp, hdr.max_timestamp};
    for (int i = 0; i < 2; i++) {
        if (ts[i] < 0)
            continue; /* -1: no timestamp */
        if (ts[i] < now && now - ts[i] > before)
            return false;
        if (ts[i] > now && ts[i] - now > after)
            return false;
    }
    return true;
}

/* The codec compression.type asks for, or -1 for the producer's own. */
static int target_codec(int compression_type)
{
    switch (compression_type) {
    case CN_COMPRESSION_UNCOMPRESSED: return CN_CODEC_NONE;
    case CN_COMPRESSION_GZIP: return CN_CODEC_GZIP;
    case CN_COMPRESSION_SNAPPY: return CN_CODEC_SNAPPY;
    case CN_COMPRESSION_LZ4: return CN_CODEC_LZ4;
    case CN_COMPRESSION_ZSTD: return CN_CODEC_ZSTD;
    default: return -1;
    }
}

/* The topic's compression.<codec>.level for codec; -1 (gzip) is zlib's
 * own default. */
static int target_level(const struct cn_topic_config *tc, int codec)
{
    switch (codec) {
    case CN_CODEC_GZIP:
        return tc->compression_gzip_level == -1 ? CN_LEVEL_DEFAULT
                                                : tc->compression_gzip_level;
    case CN_CODEC_LZ4: return tc->compression_lz4_level;
    case CN_CODEC_ZSTD: return tc->compression_zstd_level;
    default: return CN_LEVEL_DEFAULT;
    }
}

/*
 * A batch whose codec is not the topic's compression.type is rebuilt in
 * that codec (Kafka's LogValidator), into out; out stays empty when the
 * batch is kept as sent.  The rebuilt batch may be larger, so
 * max.message.bytes is checked again on it (Kafka: RecordTooLarge,
 * MESSAGE_TOO_LARGE).  Exactly one validated batch is in batch[0..len).
 * The copy lives only until the append, one partition at a time, so a
 * request holds at most one rebuilt batch.
 */
static int16_t recompress(const struct cn_topic *t, const uint8_t *batch,
                          size_t len, struct cn_wr *scratch, struct cn_wr *out)
{
    int codec = target_codec(t->config.compression_type);
    struct cn_batch_hdr hdr;
    if (codec < 0 || cn_batch_hdr_parse(batch, len, &hdr) != 0 ||
        cn_batch_codec(&hdr) == codec || cn_batch_is_control(&hdr))
        return KAFKA_NONE;
    int rc = cn_batch_recompress(batch, len, codec,
                                 target_level(&t->config, codec), 0, scratch,
                                 out);
    if (rc == CN_ETOOBIG)
        return KAFKA_MESSAGE_TOO_LARGE;
    if (rc)
        return rc == CN_ENOMEM ? KAFKA_UNKNOWN_SERVER_ERROR
                               : kerr_from_batch_err(rc, &hdr);
    if (out->len > (size_t)t->config.max_message_bytes)
        return KAFKA_MESSAGE_TOO_LARGE;
    return KAFKA_NONE;
}

/* Kafka's RecordValidationException shows at most this many in the
 * partition's error message (all are in record_errors). */
#define SHOWN_RECORD_ERRORS 3

/*
 * A compacted topic keeps the latest record per key, so a record without
 * one could never be cleaned (Kafka's LogValidator.validateKey): the whole
 * batch is refused with INVALID_RECORD, each keyless record in
 * record_errors and Kafka 4.4's texts.  True when refused.
 */
static bool
keyless_refused(struct cn_req *req, const struct cn_topic *t,
                int32_t partition, const uint8_t *batch, size_t len,
                struct cn_wr *scratch,
                struct cn_produce_response_partition_produce_response *pr)
{
    if (!(t->config.cleanup_policy & CN_CLEANUP_COMPACT))
        return false;
    struct cn_batch_hdr hdr;
    struct cn_record_iter it;
    struct cn_record rec;
    if (cn_batch_records(batch, len, 0, scratch, &hdr, &it) != 0)
        return false; /* validated already: cannot happen */
    int32_t bad = 0;
    while (cn_record_iter_next(&it, &rec) == 1)
        bad += rec.key.len < 0;
    if (!bad)
        return false;
    char one[CN_TOPIC_NAME_MAX + 96];
    int one_len = snprintf(one, sizeof one,
                           "Compacted topic cannot accept message without key "
                           "in topic partition %s-%d",
                           t->name, (int)partition);
    struct cn_bytes msg = {
        (const uint8_t *)cn_arena_strdup(
            &req->arena, (struct cn_bytes){(const uint8_t *)one, one_len}),
        one_len};
    pr->record_errors = cn_arena_calloc(&req->arena, (size_t)bad,
                                        sizeof *pr->record_errors);
    char *text = cn_arena_alloc(&req->arena,
                                256 + SHOWN_RECORD_ERRORS * (sizeof one + 48));
    pr->error_code = KAFKA_INVALID_RECORD;
    if (!pr->record_errors || !text || !msg.ptr)
        return true; /* out of memory: the code alone */
    size_t used = (size_t)sprintf(
        text,
        "One or more records have been rejected due to %d record errors in "
        "total, and only showing the first three errors at most: [",
        (int)bad);
    cn_batch_records(batch, len, 0, scratch, &hdr, &it);
    int32_t n = 0;
    while (cn_record_iter_next(&it, &rec) == 1) {
        if (rec.key.len >= 0)
            continue;
        pr->record_errors[n].batch_index = it.index - 1;
        pr->record_errors[n].batch_index_error_message = msg;
        if (n < SHOWN_RECORD_ERRORS)
            used += (size_t)sprintf(text + used,
                                    "%sRecordError(batchIndex=%d, "
                                    "message='%s')",
                                    n ? ", " : "", (int)(it.index - 1), one);
        n++;
    }
    used += (size_t)sprintf(text + used, "]");
    pr->record_errors_len = n;
    pr->error_message = (struct cn_bytes){(const uint8_t *)text,
                                          (int32_t)used};
    return true;
}

/*
 * Cluster mode, a transactional produce whose coordinator is another
 * broker: the partitions that need its word were asked before anything
 * is appended (cn_txn_remote_check; req->handler_state while it is out),
 * and the append's verification answers from what it said.
 */
struct produce_remote {
    struct cn_req *req;
    struct cn_req_header h; /* as decoded (v12 as v11) */
    struct cn_produce_request rq;
    int16_t version; /* as sent: <= 10 knows no TRANSACTION_ABORTABLE */
    bool add;        /* TV2: asked to add, not only to verify */
    struct cn_txn_remote_tp *tps; /* one per partition of the request */
    /* Kafka's verification guard: the producer's marker count on each
     * partition when the coordinator was asked.  A marker between the
     * answer and the append ended the transaction the answer vouched
     * for; appending then would open one nobody will ever close. */
    uint32_t *guard;
    size_t n;
};

/* One partition's append, as the partition layer calls back into it. */
struct produce_prep {
    struct cn_broker *b;
    struct cn_bytes txn_id;              /* the request's transactional id */
    const struct produce_remote *remote; /* NULL: the coordinator is here */
    struct cn_partition *p;
    struct cn_req *req;
    struct cn_topic *t;
    int32_t partition;
    struct cn_wr *scratch;
    struct cn_wr recomp; /* the batch in the topic's codec, if rebuilt */
    struct cn_produce_response_partition_produce_response *pr;
};

/* KIP-890: the coordinator must hold the transaction Ongoing. */
static int16_t produce_verify(void *arg, int64_t producer_id, int16_t epoch)
{
    struct produce_prep *pp = arg;
    const struct produce_remote *pr = pp->remote;
    if (pr) {
        for (size_t i = 0; i < pr->n; i++) {
            if (pr->tps[i].partition != pp->p->index ||
                strcmp(pr->tps[i].topic, pp->p->topic->name) != 0)
                continue;
            struct cn_pentry_info pe;
            uint32_t markers = cn_pstate_get(pp->p->pstate, producer_id, &pe)
                                   ? pe.markers
                                   : 0;
            if (markers != pr->guard[i])
                return KAFKA_INVALID_TXN_STATE;
            return cn_txn_remote_produce_error(
                cn_txn_remote_coord_error(pr->tps[i].error, pr->version <= 10),
                pr->add);
        }
        /* Open when the coordinator was asked, closed since (a marker
         * came): as Kafka's log refuses an unverified transactional
         * batch. */
        return KAFKA_INVALID_TXN_STATE;
    }
    return cn_txn_exec_verify(pp->b, pp->txn_id, producer_id, epoch,
                              pp->p->topic->name, pp->p->index);
}

/* The topic-dependent checks of the batch, once the producer state has
 * accepted it, and the re-encoding into the topic's codec. */
static int16_t produce_prepare(void *arg, struct cn_part_append *a)
{
    struct produce_prep *pp = arg;
    const struct cn_topic *t = pp->t;
    if (keyless_refused(pp->req, t, pp->partition, a->batches, a->len,
                        pp->scratch, pp->pr))
        return pp->pr->error_code;
    if (t->config.message_timestamp_type == CN_TS_CREATE_TIME &&
        !timestamps_ok(&t->config, a->batches, a->len))
        return KAFKA_INVALID_TIMESTAMP;
    if (t->config.message_timestamp_type == CN_TS_LOG_APPEND_TIME)
        a->append_time = cn_clock_wall_ms();
    int16_t kerr = recompress(t, a->batches, a->len, pp->scratch, &pp->recomp);
    if (kerr)
        return kerr;
    if (pp->recomp.len > 0) {
        a->batches = pp->recomp.buf;
        a->len = pp->recomp.len;
    }
    return KAFKA_NONE;
}

/* Returns the partition appended to, or NULL when nothing was. */
static struct cn_partition *
produce_partition(struct cn_broker *b, struct cn_req *req, int16_t version,
                  struct cn_bytes txn_id, const struct produce_remote *remote,
                  struct cn_bytes topic, struct cn_topic *t,
                  const struct cn_produce_request_partition_produce_data *pd,
                  struct cn_produce_response_partition_produce_response *pr,
                  struct cn_wr *scratch)
{
    pr->index = pd->index;
    if (!t || pd->index < 0 || pd->index >= t->partition_count) {
        pr->error_code = cn_partition_missing(b, topic, pd->index);
        return NULL;
    }
    struct cn_partition *p = t->partitions[pd->index];
    if (!cn_partition_led(b, p)) {
        /* KIP-951: the leader as this broker knows it, so the client
         * need not wait for a Metadata round trip (v10+). */
        pr->error_code = KAFKA_NOT_LEADER_OR_FOLLOWER;
        pr->current_leader.leader_id = p->leader;
        pr->current_leader.leader_epoch = p->leader_epoch;
        return NULL;
    }
    if (cn_partition_offline(b, p)) {
        pr->error_code = KAFKA_KAFKA_STORAGE_ERROR;
        return NULL;
    }
    if (version < 3) {
        /* Magic 0/1 message sets: Cairn stores magic 2 only. */
        pr->error_code = KAFKA_UNSUPPORTED_VERSION;
        return NULL;
    }
    if (pd->records.len <= 0) {
        pr->error_code = KAFKA_CORRUPT_MESSAGE;
        return NULL;
    }
    struct cn_batch_limits lim = {
        .max_batch_bytes = (size_t)t->config.max_message_bytes,
        .max_uncompressed_bytes = 0,
        .allow_control = false,
    };
    int n = cn_batch_validate_set(pd->records.ptr, (size_t)pd->records.len,
                                  &lim, scratch, NULL, NULL);
    if (n < 0) {
        /* Find the header for the error mapping. */
        struct cn_batch_hdr hdr;
        memset(&hdr, 0, sizeof hdr);
        cn_batch_hdr_parse(pd->records.ptr, (size_t)pd->records.len, &hdr);
        pr->error_code = kerr_from_batch_err(n, &hdr);
        CN_DEBUG("rejected produce to %s-%d from %s: %s", t->name, pd->index,
                 cn_req_peer(req), cn_strerror(n));
        return NULL;
    }
    if (n != 1) {
        /* Produce v3+ carries exactly one batch per partition. */
        pr->error_code = KAFKA_INVALID_RECORD;
        return NULL;
    }
    struct produce_prep pp = {b, txn_id,    remote,  p,   req,
                              t, pd->index, scratch, {0}, pr};
    cn_wr_init(&pp.recomp, 0);
    struct cn_part_env env = cn_sync_part_env(b);
    /* The frame belongs to this request; writing into it is ours to do. */
    struct cn_part_append a = {
        .origin = CN_PART_CLIENT,
        .batches = (uint8_t *)(uintptr_t)pd->records.ptr,
        .len = (size_t)pd->records.len,
        .what = "a log write",
        .append_time = -1,
        .verify = produce_verify,
        .prepare = produce_prepare,
        .arg = &pp,
    };
    cn_part_append(p, &env, &a);
    /* A planted bug for the history checker's self-test (cairnctl verify
     * must catch it): retries get appended twice. */
    if (a.duplicate && CN_TEST_BUG("bug.duplicates_appended")) {
        a.allow_duplicate = true;
        cn_part_append(p, &env, &a);
    }
    cn_wr_fini(&pp.recomp);
    if (a.kerr) {
        pr->error_code = a.kerr;
        return NULL;
    }
    if (a.duplicate) {
        /* A retry of a batch already appended: answer as the original was
         * answered, write nothing. */
        pr->base_offset = a.base_offset;
        pr->log_append_time_ms = -1;
        pr->log_start_offset = cn_log_start_offset(p->log);
        return p;
    }
    if (a.err == -ENOSPC) {
        /* Undone by the log, which stays online: refuse, keep serving. */
        pr->error_code = KAFKA_KAFKA_STORAGE_ERROR;
    } else if (a.err) {
        pr->error_code = kerr_from_log_err(a.err);
        CN_ERROR("append to %s-%d failed: %s", t->name, pd->index,
                 cn_strerror(a.err));
    }
    if (a.base_offset < 0)
        return NULL;
    pr->base_offset = a.base_offset;
    pr->log_append_time_ms = a.append_time;
    pr->log_start_offset = cn_log_start_offset(p->log);
    return p;
}

/* Whether every partition waiting for the ISR has its answer: the high
 * watermark passed its data (NOT_ENOUGH_REPLICAS_AFTER_APPEND when the
 * ISR shrank below min.insync.replicas meanwhile, as Kafka answers),
 * leadership moved (NOT_LEADER_OR_FOLLOWER: the client retries, and the
 * producer state recognises the batch if it was kept), or the request's
 * timeout passed (REQUEST_TIMED_OUT). */
static bool isr_waits_done(struct cn_broker *b, struct produce_state *ps,
                           bool final)
{
    /* A planted bug for the history checker's self-test: acks=all
     * answered before the followers have the data. */
    if (CN_TEST_BUG("bug.acks_all_before_isr"))
        return true;
    bool done = true;
    for (int32_t i = 0; i < ps->nisr_waits; i++) {
        struct isr_wait *iw = &ps->isr_waits[i];
        if (iw->resolved)
            continue;
        struct cn_topic *t = cn_topic_find_id(b, &iw->topic_id);
        struct cn_partition *p = t && iw->index < t->partition_count
                                     ? t->partitions[iw->index]
                                     : NULL;
        if (!p || !p->isr || p->leader != b->node_id)
            iw->pr->error_code = KAFKA_NOT_LEADER_OR_FOLLOWER;
        else if (p->high_watermark >= iw->required)
            iw->pr->error_code = cn_replica_isr_size(p) < iw->min_isr
                                     ? KAFKA_NOT_ENOUGH_REPLICAS_AFTER_APPEND
                                     : KAFKA_NONE;
        else if (final)
            iw->pr->error_code = KAFKA_REQUEST_TIMED_OUT;
        else {
            done = false;
            continue;
        }
        iw->resolved = true;
    }
    return done;
}

static void produce_answer(struct cn_broker *b, struct produce_state *ps);

static bool produce_hw_check(struct cn_broker *b, struct cn_hw_wait *w,
                             bool final)
{
    struct produce_state *ps =
        (struct produce_state *)((char *)w -
                                 offsetof(struct produce_state, hw));
    if (!isr_waits_done(b, ps, final))
        return false;
    produce_answer(b, ps);
    return true;
}

static void produce_finish(struct cn_broker *b, struct cn_sync_waiter *w)
{
    struct produce_state *ps = (struct produce_state *)w;
    /* Synced here; with followers the ISR must have it too. */
    if (ps->nisr_waits > 0 && !ps->hw_waited && !b->log_dir_offline) {
        ps->hw_waited = true;
        ps->hw.check = produce_hw_check;
        ps->hw.deadline_ms = cn_clock_mono_ms() +
                             (ps->timeout_ms > 0 ? ps->timeout_ms : 0);
        cn_replica_hw_wait(b, &ps->hw);
        return;
    }
    produce_answer(b, ps);
}

static void produce_answer(struct cn_broker *b, struct produce_state *ps)
{
    struct cn_req *req = ps->waiter.req;
    /* A failed sync takes the log directory offline: what this request
     * appended is not known to be durable, so it is not acknowledged. */
    if (b->log_dir_offline && ps->appended) {
        for (int32_t i = 0; i < ps->rs.responses_len; i++) {
            struct cn_produce_response_topic_produce_response *tr =
                &ps->rs.responses[i];
            for (int32_t j = 0; j < tr->partition_responses_len; j++)
                if (!tr->partition_responses[j].error_code)
                    tr->partition_responses[j].error_code =
                        KAFKA_KAFKA_STORAGE_ERROR;
        }
    }
    /* A lost response after a durable append: the client must retry the
     * same batch, which the producer state then recognises.  Armed as
     * "produce.drop_response=error/N" by the history checker's tests. */
    if (ps->appended && CN_FAILPOINT("produce.drop_response"))
        cn_req_close_conn(req);
    /* KIP-219: the answer goes now with the time, the connection waits. */
    ps->rs.throttle_time_ms = cn_quota_produce_answer(b, req, &ps->h,
                                                      req->frame_len, false);
    cn_resp_begin(req, &ps->h);
    cn_produce_response_encode(&req->resp, ps->h.api_version, &ps->rs);
    cn_req_done(req);
}

#define IMPLICIT_ADD_MAX 64

/* A decoded produce waiting for its implicit add (req->handler_state);
 * its byte views point into the request's frame, kept until the answer. */
struct produce_wait {
    struct cn_req_header h;
    struct cn_produce_request rq;
};

/*
 * Transaction version 2: before anything is appended, the partitions
 * whose transactional batch would open a transaction are offered to the
 * coordinator, which adds them for a TV2 producer and then resumes this
 * request (cn_h_produce_resume; true: the request was taken).  Done first
 * so no partition is appended twice.
 */
static bool implicit_adds(struct cn_broker *b, struct cn_req *req,
                          const struct cn_req_header *h,
                          const struct cn_req_header *hv,
                          const struct cn_produce_request *rq, bool v12)
{
    struct cn_txn_tp tps[IMPLICIT_ADD_MAX];
    size_t n = 0;
    int64_t pid = -1;
    int16_t epoch = -1;
    for (int32_t i = 0; i < rq->topic_data_len && n < IMPLICIT_ADD_MAX; i++) {
        const struct cn_produce_request_topic_produce_data *td =
            &rq->topic_data[i];
        struct cn_topic *t = cn_topic_find(b, td->name);
        if (!t)
            continue;
        for (int32_t j = 0; j < td->partition_data_len && n < IMPLICIT_ADD_MAX;
             j++) {
            const struct cn_produce_request_partition_produce_data *pd =
                &td->partition_data[j];
            struct cn_batch_hdr hdr;
            if (pd->index < 0 || pd->index >= t->partition_count ||
                pd->records.len <= 0 ||
                cn_batch_hdr_parse(pd->records.ptr, (size_t)pd->records.len,
                                   &hdr) != 0 ||
                !cn_batch_has_producer_id(&hdr) ||
                !cn_batch_is_transactional(&hdr))
                continue;
            if (pid < 0) {
                pid = hdr.producer_id;
                epoch = hdr.producer_epoch;
            } else if (hdr.producer_id != pid || hdr.producer_epoch != epoch) {
                continue;
            }
            struct cn_partition *p = t->partitions[pd->index];
            struct cn_pentry_info pe;
            if (cn_pstate_get(p->pstate, pid, &pe) && pe.txn_first_offset >= 0)
                continue; /* already open here */
            tps[n].topic = (char *)t->name;
            tps[n].partition = pd->index;
            n++;
        }
    }
    if (n == 0)
        return false;
    struct cn_txn_request tr = {
        .kind = CN_TXN_REQ_PRODUCE_ADD,
        .token = req,
        .api_version = h->api_version,
        .producer_id = pid,
        .producer_epoch = epoch,
        .produce_v12 = v12,
        .tps = tps,
        .ntps = n,
    };
    /* Nothing to add (TV1, or every partition already in): no step. */
    const struct cn_txn_coord *c = cn_txn_exec_coord(b);
    if (!c || !cn_txn_produce_adds(c, &tr))
        return false;
    /* Only a request the coordinator may take keeps its decoded form. */
    struct produce_wait *pw = cn_arena_alloc(&req->arena, sizeof *pw);
    if (!pw)
        return false; /* unadded: the append's verification answers */
    pw->h = *hv;
    pw->rq = *rq;
    req->handler_state = pw;
    return cn_txn_exec_produce_add(b, &tr);
}

static void produce_run(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h,
                        const struct cn_produce_request *rq,
                        int16_t txn_denied,
                        const struct produce_remote *remote);

static void produce_remote_done(struct cn_broker *b, void *arg)
{
    struct produce_remote *pr = arg;
    produce_run(b, pr->req, &pr->h, &pr->rq, KAFKA_NONE, pr);
}

/*
 * Cluster mode: when the transactional id's coordinator is not this
 * broker, the partitions whose batch needs its word (not part of the
 * producer's open transaction here at that epoch) are asked of it in one
 * check before anything is appended, to add them when the producer uses
 * transaction version 2 (Produce v12; Kafka's ADD_PARTITION operation),
 * else to verify them.  True: the request was taken (it resumes in
 * produce_remote_done, or has been run).
 */
static bool remote_checks(struct cn_broker *b, struct cn_req *req,
                          const struct cn_req_header *h,
                          const struct cn_req_header *hv,
                          const struct cn_produce_request *rq, bool v12)
{
    int32_t node = -1;
    if (!b->cfg->transaction_partition_verification_enable ||
        (!cn_txn_remote_coordinator_is_remote(b, rq->transactional_id,
                                              &node) &&
         node == b->node_id))
        return false;
    size_t cap = 0;
    for (int32_t i = 0; i < rq->topic_data_len; i++)
        if (rq->topic_data[i].partition_data_len > 0)
            cap += (size_t)rq->topic_data[i].partition_data_len;
    struct produce_remote *pr = cn_arena_calloc(&req->arena, 1, sizeof *pr);
    if (pr && cap) {
        pr->tps = cn_arena_calloc(&req->arena, cap, sizeof *pr->tps);
        pr->guard = cn_arena_calloc(&req->arena, cap, sizeof *pr->guard);
    }
    if (!pr || !cap || !pr->tps || !pr->guard)
        return false; /* the local verifier refuses */
    int64_t pid = -1;
    int16_t epoch = -1;
    for (int32_t i = 0; i < rq->topic_data_len && pr->n < cap; i++) {
        const struct cn_produce_request_topic_produce_data *td =
            &rq->topic_data[i];
        struct cn_topic *t = cn_topic_find(b, td->name);
        if (!t)
            continue;
        for (int32_t j = 0; j < td->partition_data_len && pr->n < cap; j++) {
            const struct cn_produce_request_partition_produce_data *pd =
                &td->partition_data[j];
            struct cn_batch_hdr hdr;
            if (pd->index < 0 || pd->index >= t->partition_count ||
                pd->records.len <= 0 ||
                cn_batch_hdr_parse(pd->records.ptr, (size_t)pd->records.len,
                                   &hdr) != 0)
                continue;
            struct cn_partition *p = t->partitions[pd->index];
            if (!cn_partition_led(b, p))
                continue;
            struct cn_pentry_info pe;
            bool known = cn_batch_has_producer_id(&hdr) &&
                         cn_pstate_get(p->pstate, hdr.producer_id, &pe);
            if (!cn_txn_remote_batch_needs_check(&hdr, known ? &pe : NULL))
                continue;
            /* One producer per request (Kafka refuses more); another's
             * batch finds no answer and is refused. */
            if (pid < 0) {
                pid = hdr.producer_id;
                epoch = hdr.producer_epoch;
            } else if (hdr.producer_id != pid || hdr.producer_epoch != epoch) {
                continue;
            }
            pr->tps[pr->n].topic = t->name;
            pr->tps[pr->n].partition = pd->index;
            pr->tps[pr->n].error = KAFKA_NONE;
            pr->guard[pr->n] = known ? pe.markers : 0;
            pr->n++;
        }
    }
    if (pr->n == 0)
        return false; /* nothing to ask: the local path, no verification */
    pr->req = req;
    pr->h = *hv;
    pr->rq = *rq;
    pr->version = h->api_version;
    pr->add = v12 && b->cfg->cairn_transaction_version >= 2;
    req->handler_state = pr;
    if (!cn_txn_remote_check(b, rq->transactional_id, pid, epoch, pr->add,
                             pr->tps, pr->n, produce_remote_done, pr))
        produce_remote_done(b, pr); /* answered already */
    return true;
}

void cn_h_produce(struct cn_broker *b, struct cn_req *req,
                  const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_produce_request rq;
    /* Produce v12 (Kafka 4.x, KIP-890 part 2) is v11 on the wire; it only
     * says the client uses transaction version 2, so its partitions join
     * the transaction on produce.  The schemas here stop at v11, so the
     * header decoder left v12's header tag buffer in the body, and v12 is
     * decoded and answered as v11 (same bytes). */
    bool v12 = h->api_version >= 12;
    struct cn_req_header hv = *h;
    if (v12) {
        cn_rd_skip_tags(body);
        hv.api_version = 11;
    }
    int err = cn_produce_request_decode(body, &req->arena, hv.api_version,
                                        &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    /* Kafka: a transactional produce without WRITE on its id fails
     * whole; then each topic needs WRITE. */
    int16_t txn_denied = rq.transactional_id.len > 0 &&
                                 !cn_authz(b, req, CN_ACL_OP_WRITE,
                                           CN_ACL_RT_TXN_ID,
                                           rq.transactional_id)
                             ? KAFKA_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                             : KAFKA_NONE;
    /* Partitions of refused topics must not join the transaction
     * (TV2's implicit add); the request is then answered without adds. */
    bool topic_denied = false;
    for (int32_t i = 0; i < rq.topic_data_len && !topic_denied; i++)
        topic_denied = !cn_authz_quiet(b, req, CN_ACL_OP_WRITE,
                                       CN_ACL_RT_TOPIC, rq.topic_data[i].name);
    if (rq.transactional_id.len > 0 && !txn_denied && !topic_denied &&
        b->cfg->cluster_mode && remote_checks(b, req, h, &hv, &rq, v12))
        return; /* produce_remote_done goes on */
    if (rq.transactional_id.len > 0 && !txn_denied && !topic_denied &&
        implicit_adds(b, req, h, &hv, &rq, v12))
        return; /* cn_h_produce_resume goes on */
    produce_run(b, req, &hv, &rq, txn_denied, NULL);
}

/* The add was made durable (or failed, or was not needed after a wait):
 * the append's verification answers a partition that did not join. */
void cn_h_produce_resume(struct cn_broker *b, struct cn_req *req, int16_t err)
{
    struct produce_wait *pw = req->handler_state;
    (void)err;
    produce_run(b, req, &pw->h, &pw->rq, KAFKA_NONE,
                NULL); /* adds only when allowed */
}

static void produce_run(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h,
                        const struct cn_produce_request *rqp,
                        int16_t txn_denied,
                        const struct produce_remote *remote)
{
    const struct cn_produce_request rq = *rqp;
    struct produce_state *ps = cn_arena_alloc(&req->arena, sizeof *ps);
    int32_t nt = rq.topic_data_len > 0 ? rq.topic_data_len : 0;
    if (!ps)
        goto nomem;
    memset(ps, 0, sizeof *ps);
    ps->h = *h;
    ps->waiter.req = req;
    ps->waiter.finish = produce_finish;
    cn_produce_response_init(&ps->rs);
    ps->rs.responses = cn_arena_calloc(&req->arena, (size_t)nt + 1,
                                       sizeof *ps->rs.responses);
    if (!ps->rs.responses)
        goto nomem;
    ps->rs.responses_len = nt;
    bool bad_acks = rq.acks != 0 && rq.acks != 1 && rq.acks != -1;
    if (rq.acks == -1 && b->cfg->cluster_mode) {
        size_t np_total = 0;
        for (int32_t i = 0; i < nt; i++)
            np_total += rq.topic_data[i].partition_data_len > 0
                            ? (size_t)rq.topic_data[i].partition_data_len
                            : 0;
        ps->isr_waits = cn_arena_calloc(&req->arena, np_total + 1,
                                        sizeof *ps->isr_waits);
        if (!ps->isr_waits)
            goto nomem;
        ps->timeout_ms = rq.timeout_ms;
    }
    struct cn_wr scratch;
    cn_wr_init(&scratch, 0);
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_produce_request_topic_produce_data *td =
            &rq.topic_data[i];
        struct cn_produce_response_topic_produce_response *tr =
            &ps->rs.responses[i];
        cn_produce_response_topic_produce_response_init(tr);
        tr->name = td->name;
        int32_t np = td->partition_data_len > 0 ? td->partition_data_len : 0;
        tr->partition_responses = cn_arena_calloc(
            &req->arena, (size_t)np + 1, sizeof *tr->partition_responses);
        if (!tr->partition_responses) {
            cn_wr_fini(&scratch);
            goto nomem;
        }
        tr->partition_responses_len = np;
        struct cn_topic *t = cn_topic_find(b, td->name);
        int16_t denied = txn_denied ? txn_denied
                         : !cn_authz(b, req, CN_ACL_OP_WRITE, CN_ACL_RT_TOPIC,
                                     td->name)
                             ? KAFKA_TOPIC_AUTHORIZATION_FAILED
                             : KAFKA_NONE;
        for (int32_t j = 0; j < np; j++) {
            struct cn_produce_response_partition_produce_response *pr =
                &tr->partition_responses[j];
            cn_produce_response_partition_produce_response_init(pr);
            pr->index = td->partition_data[j].index;
            if (denied) {
                pr->error_code = denied;
                pr->base_offset = -1;
                continue;
            }
            if (bad_acks) {
                pr->error_code = KAFKA_INVALID_REQUIRED_ACKS;
                continue;
            }
            /* acks=all cannot be honoured by an ISR smaller than
             * min.insync.replicas (one broker alone is an ISR of one):
             * Kafka refuses before it appends. */
            int32_t idx = td->partition_data[j].index;
            struct cn_partition *tp = t && idx >= 0 && idx < t->partition_count
                                          ? t->partitions[idx]
                                          : NULL;
            if (rq.acks == -1 && tp && cn_partition_led(b, tp) &&
                cn_replica_isr_size(tp) < t->config.min_insync_replicas) {
                pr->error_code = KAFKA_NOT_ENOUGH_REPLICAS;
                continue;
            }
            pr->base_offset = -1;
            struct cn_partition *ap = produce_partition(b, req, h->api_version,
                                                        rq.transactional_id,
                                                        remote, td->name, t,
                                                        &td->partition_data[j],
                                                        pr, &scratch);
            if (!ap)
                continue;
            ps->appended = true;
            if (rq.acks == -1 && !pr->error_code && cn_replica_needs_wait(ap))
                ps->isr_waits[ps->nisr_waits++] = (struct isr_wait){
                    .topic_id = t->id,
                    .index = ap->index,
                    .required = cn_log_end_offset(ap->log),
                    .min_isr = t->config.min_insync_replicas,
                    .pr = pr,
                };
        }
    }
    cn_wr_fini(&scratch);
    if (rq.acks == 0) {
        cn_quota_produce_answer(b, req, h, req->frame_len, true);
        req->no_response = true;
        cn_req_done(req);
        return;
    }
    if (rq.acks == -1) {
        cn_sync_wait(b, &ps->waiter);
        return;
    }
    produce_finish(b, &ps->waiter);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}
