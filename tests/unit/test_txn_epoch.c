/*
 * test_txn_epoch.c - the coordinator's own aborts at the last usable
 * epoch (txn/coord.h): they keep the producer id and abort at INT16_MAX,
 * so the abort markers close the batches that producer id left open; the
 * next bump (InitProducerId, or the TV2 EndTxn retry) moves to a new id.
 * Kafka: TransactionMetadata.prepareFenceProducerEpoch.  The full
 * specification of the machine is test_txn_coord.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/wr.h"
#include "proto/kerr.h"
#include "txn/coord.h"
#include "unit.h"

#define P 7
#define LAST CN_TXN_EPOCH_LAST_USABLE

static struct cn_txn_coord *c;
static struct cn_txn_actions acts;
static struct cn_txn_now now = {1000000, 1000000, 1000000000};
static int64_t next_pid = 1000;

static int take(void *ctx, int64_t *pid)
{
    (void)ctx;
    *pid = next_pid++;
    return 0;
}

static void step(struct cn_txn_event ev)
{
    ev.now = now;
    cn_txn_actions_reset(&acts);
    CHECK_EQ(cn_txn_step(c, &ev, &acts), 0);
}

static const struct cn_txn_action *find(enum cn_txn_action_kind kind)
{
    for (size_t i = 0; i < acts.n; i++)
        if (acts.v[i].kind == kind)
            return &acts.v[i];
    return NULL;
}

/* The meta of this step's APPEND, decoded into *m (caller finis it). */
static bool appended(struct cn_txn_meta *m, uint64_t *seq)
{
    const struct cn_txn_action *a = find(CN_TXA_APPEND);
    cn_txn_meta_init(m);
    bool tomb = false;
    if (!a ||
        cn_txn_log_decode(a->u.append.key, a->u.append.value, m, &tomb) != 0)
        return false;
    *seq = a->u.append.seq;
    return true;
}

static void written(uint64_t seq)
{
    struct cn_txn_event ev = {.kind = CN_TXE_WRITTEN};
    ev.u.written.id = "tx";
    ev.u.written.seq = seq;
    step(ev);
}

/* Every partition of this step's SEND_MARKERS answers NONE. */
static void markers_ok(void)
{
    const struct cn_txn_action *a = find(CN_TXA_SEND_MARKERS);
    CHECK(a != NULL);
    if (!a)
        return;
    uint64_t seq = a->u.markers.seq;
    size_t n = a->u.markers.n;
    for (size_t i = 0; i < n; i++) {
        struct cn_txn_event ev = {.kind = CN_TXE_MARKER_RESULT};
        ev.u.marker.id = "tx";
        ev.u.marker.seq = seq;
        ev.u.marker.i = i;
        step(ev);
    }
}

/* A TV2 transaction of P at LAST, open on t-0, led. */
static void setup(void)
{
    struct cn_txn_config cfg = {
        .nparts = 1,
        .transaction_version = 2,
        .verification_enable = true,
        .max_timeout_ms = 900000,
        .id_expiration_ms = 7 * 86400000LL,
        .abort_check_interval_ms = 10000,
        .expiry_check_interval_ms = 3600000,
        .park_max_ms = 1000,
        .marker_retry_ms = 1000,
    };
    struct cn_txn_pids pids = {take, NULL};
    next_pid = 1000;
    CHECK_EQ(cn_txn_new(&cfg, &pids, &c), 0);
    cn_txn_actions_init(&acts);
    struct cn_txn_meta m;
    cn_txn_meta_init(&m);
    cn_txn_meta_set_id(&m, "tx");
    m.producer_id = P;
    m.producer_epoch = LAST;
    m.timeout_ms = 60000;
    m.state = CN_TXN_ONGOING;
    m.client_tv = 2;
    m.txn_start_ms = now.wall_ms;
    m.last_update_ms = now.wall_ms;
    cn_txn_meta_add_partition(&m, "t", 0);
    struct cn_wr k, v;
    cn_wr_init(&k, 64);
    cn_wr_init(&v, 64);
    bool tomb = false;
    CHECK_EQ(cn_txn_log_encode(&m, &k, &v, &tomb), 0);
    CHECK_EQ(cn_txn_load_record(c, 0, cn_bytes_of(k.buf, (int32_t)k.len),
                                cn_bytes_of(v.buf, (int32_t)v.len)),
             0);
    cn_wr_fini(&k);
    cn_wr_fini(&v);
    cn_txn_meta_fini(&m);
    struct cn_txn_event ev = {.kind = CN_TXE_LEADER};
    step(ev);
}

static void teardown(void)
{
    cn_txn_actions_fini(&acts);
    cn_txn_free(c);
    c = NULL;
}

/* The decided abort is at (P, INT16_MAX): its markers go out for P and,
 * once all are in, CompleteAbort keeps P. */
static void abort_goes_out_for_p(void)
{
    struct cn_txn_meta m;
    uint64_t seq = 0;
    CHECK(appended(&m, &seq));
    CHECK_EQ(m.state, CN_TXN_PREPARE_ABORT);
    CHECK_EQ(m.producer_id, P);
    CHECK_EQ(m.producer_epoch, INT16_MAX);
    cn_txn_meta_fini(&m);
    written(seq);
    const struct cn_txn_action *k = find(CN_TXA_SEND_MARKERS);
    CHECK(k && !k->u.markers.commit && k->u.markers.producer_id == P &&
          k->u.markers.producer_epoch == INT16_MAX);
    markers_ok();
    CHECK(appended(&m, &seq));
    CHECK_EQ(m.state, CN_TXN_COMPLETE_ABORT);
    CHECK_EQ(m.producer_id, P);
    cn_txn_meta_fini(&m);
    written(seq);
}

/* This step's APPEND moves to (1000, 0) with P as the previous id; once
 * durable, the answer of token says so. */
static void rotates_then_answers(void *token)
{
    struct cn_txn_meta m;
    uint64_t seq = 0;
    CHECK(appended(&m, &seq));
    CHECK_EQ(m.producer_id, 1000);
    CHECK_EQ(m.producer_epoch, 0);
    CHECK_EQ(m.prev_producer_id, P);
    cn_txn_meta_fini(&m);
    CHECK(find(CN_TXA_ANSWER) == NULL);
    written(seq);
    const struct cn_txn_action *a = find(CN_TXA_ANSWER);
    CHECK(a && a->u.answer.token == token && a->u.answer.error == KAFKA_NONE &&
          a->u.answer.producer_id == 1000 && a->u.answer.producer_epoch == 0);
}

static int tok;

/* An EndTxn v5 of "tx" at (pid, epoch), token &tok. */
static void end_req(int64_t pid, int16_t epoch, bool commit)
{
    struct cn_txn_event ev = {.kind = CN_TXE_REQUEST};
    ev.u.request = (struct cn_txn_request){.kind = CN_TXN_REQ_END,
                                           .token = &tok,
                                           .api_version = 5,
                                           .transactional_id = "tx",
                                           .producer_id = pid,
                                           .producer_epoch = epoch,
                                           .commit = commit};
    step(ev);
}

/* end_req's answer error in the same step, or -1 (*wrote: it appended). */
static int end_v5(int64_t pid, int16_t epoch, bool commit, bool *wrote)
{
    end_req(pid, epoch, commit);
    *wrote = find(CN_TXA_APPEND) != NULL;
    const struct cn_txn_action *a = find(CN_TXA_ANSWER);
    return a ? a->u.answer.error : -1;
}

/* An InitProducerId v4 of "tx" with no producer id. */
static void init_pid(void *token)
{
    struct cn_txn_event ev = {.kind = CN_TXE_REQUEST};
    ev.u.request = (struct cn_txn_request){.kind = CN_TXN_REQ_INIT_PID,
                                           .token = token,
                                           .api_version = 4,
                                           .transactional_id = "tx",
                                           .producer_id = -1,
                                           .producer_epoch = -1,
                                           .timeout_ms = 60000};
    step(ev);
}

/* The clock past the transaction's timeout, and the check's tick. */
static void time_out(void)
{
    now.mono_ms += 70000;
    now.wall_ms += 70000;
    struct cn_txn_event tick = {.kind = CN_TXE_TICK};
    step(tick);
}

/* The fence at LAST aborts at (P, INT16_MAX); the retry moves to
 * (1000, 0); the fenced instance's EndTxn at (P, LAST) stays fenced. */
UNIT_TEST(test_fence_at_last_epoch_keeps_pid)
{
    setup();
    int t1, t2;
    init_pid(&t1);
    const struct cn_txn_action *a = find(CN_TXA_ANSWER);
    CHECK(a && a->u.answer.error == KAFKA_CONCURRENT_TRANSACTIONS);
    abort_goes_out_for_p();
    init_pid(&t2);
    rotates_then_answers(&t2);
    bool wrote = true;
    CHECK_EQ(end_v5(P, LAST, false, &wrote), KAFKA_PRODUCER_FENCED);
    CHECK(!wrote);
    teardown();
}

UNIT_TEST(test_timeout_at_last_epoch_then_tv2_retry)
{
    setup();
    time_out();
    abort_goes_out_for_p();
    /* The Java client's recovery: EndTxn(abort) v5 at the epoch it has. */
    end_req(P, LAST, false);
    rotates_then_answers(&tok);
    /* The same retry again (its answer lost): the same answer, no write. */
    bool wrote = true;
    CHECK_EQ(end_v5(P, LAST, false, &wrote), KAFKA_NONE);
    CHECK(!wrote);
    const struct cn_txn_action *a = find(CN_TXA_ANSWER);
    CHECK(a && a->u.answer.producer_id == 1000 &&
          a->u.answer.producer_epoch == 0);
    CHECK_EQ(end_v5(P, LAST, true, &wrote), KAFKA_PRODUCER_FENCED);
    CHECK(!wrote);
    teardown();
}

/* Nobody holds INT16_MAX: an EndTxn v5 at it is fenced, not bumped into a
 * negative epoch. */
UNIT_TEST(test_end_at_abort_epoch_fenced)
{
    setup();
    time_out();
    abort_goes_out_for_p();
    bool wrote = true;
    CHECK_EQ(end_v5(P, INT16_MAX, false, &wrote), KAFKA_PRODUCER_FENCED);
    CHECK(!wrote);
    teardown();
}

UNIT_MAIN(test_fence_at_last_epoch_keeps_pid,
          test_timeout_at_last_epoch_then_tv2_retry,
          test_end_at_abort_epoch_fenced)
