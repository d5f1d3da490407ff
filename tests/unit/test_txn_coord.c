/*
 * test_txn_coord.c - the transaction coordinator's rules for clients and
 * partition leaders (txn/coord.h), as a specification: the transition
 * table from every state, InitProducerId fencing, KIP-890 verification
 * and the implicit adds, and the TV2 epoch bump with its overflow traps.
 *
 * Expected values are what the broker's coordinator before the state
 * machine did (src/broker/h_txn.c, txn_verify.c, txn_markers.c,
 * txn_coord.c at 1ba53e9); cited where the rule is not obvious.  Time,
 * durability, markers and producer ids are faked by txn_fake.h, which
 * also checks every record written against cn_txn_transition_ok.
 */
#include "txn_fake.h"

#define P 7 /* the producer id of replayed transactions */
#define E 5 /* ... and its epoch */
#define LAST CN_TXN_EPOCH_LAST_USABLE

/* ---- 1. the transition table ------------------------------------------ */

enum ev {
    EV_INIT_NEW,  /* InitProducerId v4, no producer named */
    EV_INIT_SAME, /* InitProducerId v3 naming (P, E) (KIP-360) */
    EV_ADD,       /* AddPartitionsToTxn v3 t:1 */
    EV_OFFSETS,   /* AddOffsetsToTxn, group partition __consumer_offsets:3 */
    EV_END4C,
    EV_END4A, /* EndTxn v4 commit / abort at (P, E) */
    EV_END5C,
    EV_END5A,   /* EndTxn v5 (TV2) commit / abort at (P, E) */
    EV_PRODUCE, /* Produce v12 implicit add of t:1 */
    EV_BATCHED, /* AddPartitionsToTxn v5 (a leader's add) of t:1 */
    EV_OP,      /* operator abort of P on t:0 */
    EV_TIMEOUT, /* time passes the transaction timeout */
    EV_EXPIRY,  /* time passes transactional.id.expiration.ms */
    EV_N
};

enum st {
    ST_EMPTY,
    ST_ONGOING,
    ST_PC,
    ST_PA,
    ST_CC,
    ST_CA,
    ST_FENCE,
    ST_DEAD_FLIGHT, /* its expiry tombstone is being written */
    ST_ABSENT,      /* its tombstone is in the log */
    ST_N
};

static const char *const st_name[ST_N] = {
    "Empty",          "Ongoing",       "PrepareCommit",     "PrepareAbort",
    "CompleteCommit", "CompleteAbort", "PrepareEpochFence", "Dead in flight",
    "absent"};
static const char *const ev_name[EV_N] = {"InitPid",        "InitPid(P,E)v3",
                                          "AddParts",       "AddOffsets",
                                          "EndTxn4 commit", "EndTxn4 abort",
                                          "EndTxn5 commit", "EndTxn5 abort",
                                          "ProduceAdd",     "Batched v5",
                                          "operator abort", "timeout",
                                          "expiry"};

#define PK -2 /* parked: no answer yet */
#define NA -3 /* no answer is due (ticks; a produce add not taken) */
#define X -1  /* no record */
#define N KAFKA_NONE
#define CT KAFKA_CONCURRENT_TRANSACTIONS
#define ITS KAFKA_INVALID_TXN_STATE
#define IPIM KAFKA_INVALID_PRODUCER_ID_MAPPING
#define EM CN_TXN_EMPTY
#define ON CN_TXN_ONGOING
#define PC CN_TXN_PREPARE_COMMIT
#define PA CN_TXN_PREPARE_ABORT
#define DE CN_TXN_DEAD

struct cell {
    int ans;   /* answer error (operator abort: acts.result), PK or NA */
    int rec;   /* the state the event's record writes, or X */
    int mk;    /* markers sent once that record is durable */
    int taken; /* PRODUCE_ADD: acts.taken; operator abort: op_taken */
};

/* Rows: h_txn.c:160-219 (InitPid), 226-245 (check_producer), 572-648
 * (EndTxn v5), 682-715 (v4); txn_verify.c:105-113 (batched), 254-276
 * (produce add); txn_markers.c:241 (timeout), 287-311 (operator);
 * txn_coord.c:492 (expiry). */
static const struct cell table[ST_N][EV_N] =
    {
        [ST_EMPTY] =
            {
                [EV_INIT_NEW] = {N, EM, 0, 0},
                [EV_INIT_SAME] = {N, EM, 0, 0},
                [EV_ADD] = {N, ON, 0, 0},
                [EV_OFFSETS] = {N, ON, 0, 0},
                [EV_END4C] = {ITS, X, 0, 0},
                [EV_END4A] = {ITS, X, 0, 0},
                [EV_END5C] = {ITS, X, 0, 0},
                /* TV2 abort with nothing open: decided, no partitions */
                [EV_END5A] = {N, PA, 0, 0},
                [EV_PRODUCE] = {N, ON, 0, 1},
                [EV_BATCHED] = {N, ON, 0, 0},
                [EV_OP] = {N, X, 0, 0},
                [EV_TIMEOUT] = {NA, X, 0, 0},
                [EV_EXPIRY] = {NA, DE, 0, 0},
            },
        [ST_ONGOING] =
            {
                [EV_INIT_NEW] = {CT, PA, 1, 0},
                [EV_INIT_SAME] = {CT, PA, 1, 0},
                [EV_ADD] = {N, ON, 0, 0},
                [EV_OFFSETS] = {N, ON, 0, 0},
                [EV_END4C] = {N, PC, 1, 0},
                [EV_END4A] = {N, PA, 1, 0},
                [EV_END5C] = {N, PC, 1, 0},
                [EV_END5A] = {N, PA, 1, 0},
                [EV_PRODUCE] = {N, ON, 0, 1},
                [EV_BATCHED] = {N, ON, 0, 0},
                [EV_OP] = {N, PA, 1, 1},
                [EV_TIMEOUT] = {NA, PA, 1, 0},
                [EV_EXPIRY] = {NA, X, 0, 0},
            },
        [ST_PC] =
            {
                [EV_INIT_NEW] = {PK, X, 0, 0},
                [EV_INIT_SAME] = {PK, X, 0, 0},
                [EV_ADD] = {PK, X, 0, 0},
                [EV_OFFSETS] = {PK, X, 0, 0},
                [EV_END4C] = {PK, X, 0, 0},
                [EV_END4A] = {PK, X, 0, 0},
                [EV_END5C] = {PK, X, 0, 0},
                [EV_END5A] = {PK, X, 0, 0},
                [EV_PRODUCE] = {PK, X, 0, 1},
                [EV_BATCHED] = {CT, X, 0, 0},
                [EV_OP] = {ITS, X, 0, 0},
                [EV_TIMEOUT] = {NA, X, 0, 0},
                [EV_EXPIRY] = {NA, X, 0, 0},
            },
        [ST_PA] =
            {
                [EV_INIT_NEW] = {PK, X, 0, 0},
                [EV_INIT_SAME] = {PK, X, 0, 0},
                [EV_ADD] = {PK, X, 0, 0},
                [EV_OFFSETS] = {PK, X, 0, 0},
                [EV_END4C] = {PK, X, 0, 0},
                [EV_END4A] = {PK, X, 0, 0},
                [EV_END5C] = {PK, X, 0, 0},
                [EV_END5A] = {PK, X, 0, 0},
                [EV_PRODUCE] = {PK, X, 0, 1},
                [EV_BATCHED] = {CT, X, 0, 0},
                [EV_OP] = {N, X, 0, 1},
                [EV_TIMEOUT] = {NA, X, 0, 0},
                [EV_EXPIRY] = {NA, X, 0, 0},
            },
        [ST_CC] =
            {
                [EV_INIT_NEW] = {N, EM, 0, 0},
                [EV_INIT_SAME] = {N, EM, 0, 0},
                [EV_ADD] = {N, ON, 0, 0},
                [EV_OFFSETS] = {N, ON, 0, 0},
                [EV_END4C] = {N, X, 0, 0},
                [EV_END4A] = {ITS, X, 0, 0},
                [EV_END5C] = {ITS, X, 0, 0},
                [EV_END5A] = {N, PA, 0, 0},
                [EV_PRODUCE] = {N, ON, 0, 1},
                [EV_BATCHED] = {N, ON, 0, 0},
                [EV_OP] = {N, X, 0, 0},
                [EV_TIMEOUT] = {NA, X, 0, 0},
                [EV_EXPIRY] = {NA, DE, 0, 0},
            },
        [ST_CA] =
            {
                [EV_INIT_NEW] = {N, EM, 0, 0},
                [EV_INIT_SAME] = {N, EM, 0, 0},
                [EV_ADD] = {N, ON, 0, 0},
                [EV_OFFSETS] = {N, ON, 0, 0},
                [EV_END4C] = {ITS, X, 0, 0},
                [EV_END4A] = {N, X, 0, 0},
                [EV_END5C] = {ITS, X, 0, 0},
                [EV_END5A] = {N, PA, 0, 0},
                [EV_PRODUCE] = {N, ON, 0, 1},
                [EV_BATCHED] = {N, ON, 0, 0},
                [EV_OP] = {N, X, 0, 0},
                [EV_TIMEOUT] = {NA, X, 0, 0},
                [EV_EXPIRY] = {NA, DE, 0, 0},
            },
        /* Replayed only (nobody writes it): treated as a Prepare state
         * but not resumed at load, so its requests wait out park_max_ms
         * (plan 11.7: flagged, kept as today). */
        [ST_FENCE] =
            {
                [EV_INIT_NEW] = {PK, X, 0, 0},
                [EV_INIT_SAME] = {PK, X, 0, 0},
                [EV_ADD] = {PK, X, 0, 0},
                [EV_OFFSETS] = {PK, X, 0, 0},
                [EV_END4C] = {PK, X, 0, 0},
                [EV_END4A] = {PK, X, 0, 0},
                [EV_END5C] = {PK, X, 0, 0},
                [EV_END5A] = {PK, X, 0, 0},
                [EV_PRODUCE] = {PK, X, 0, 1},
                [EV_BATCHED] = {CT, X, 0, 0},
                [EV_OP] = {N, X, 0, 1},
                [EV_TIMEOUT] = {NA, X, 0, 0},
                [EV_EXPIRY] = {NA, X, 0, 0},
            },
        [ST_DEAD_FLIGHT] =
            {
                [EV_INIT_NEW] = {PK, X, 0, 0},
                [EV_INIT_SAME] = {PK, X, 0, 0},
                [EV_ADD] = {PK, X, 0, 0},
                [EV_OFFSETS] = {PK, X, 0, 0},
                [EV_END4C] = {PK, X, 0, 0},
                [EV_END4A] = {PK, X, 0, 0},
                [EV_END5C] = {PK, X, 0, 0},
                [EV_END5A] = {PK, X, 0, 0},
                [EV_PRODUCE] = {PK, X, 0, 1},
                [EV_BATCHED] = {CT, X, 0, 0},
                [EV_OP] = {N, X, 0, 0},
                [EV_TIMEOUT] = {NA, X, 0, 0},
                [EV_EXPIRY] = {NA, X, 0, 0},
            },
        /* A new InitPid starts afresh; the old producer is unknown. */
        [ST_ABSENT] =
            {
                [EV_INIT_NEW] = {N, EM, 0, 0},
                [EV_INIT_SAME] = {N, EM, 0, 0},
                [EV_ADD] = {IPIM, X, 0, 0},
                [EV_OFFSETS] = {IPIM, X, 0, 0},
                [EV_END4C] = {IPIM, X, 0, 0},
                [EV_END4A] = {IPIM, X, 0, 0},
                [EV_END5C] = {IPIM, X, 0, 0},
                [EV_END5A] = {IPIM, X, 0, 0},
                [EV_PRODUCE] = {NA, X, 0, 0},
                [EV_BATCHED] = {IPIM, X, 0, 0},
                [EV_OP] = {N, X, 0, 0},
                [EV_TIMEOUT] = {NA, X, 0, 0},
                [EV_EXPIRY] = {NA, X, 0, 0},
            },
};

#define ID "txn-a"
#define EXPIRE_MS 100000

static void table_setup(enum st s, enum ev e)
{
    struct cn_txn_config cfg = fk_config();
    cfg.expiry_check_interval_ms = 1000;
    if (e != EV_TIMEOUT || s == ST_DEAD_FLIGHT)
        cfg.id_expiration_ms = EXPIRE_MS;
    fk_init_loading(&cfg);
    static const enum cn_txn_state replayed[ST_N] = {
        CN_TXN_EMPTY,
        CN_TXN_ONGOING,
        CN_TXN_PREPARE_COMMIT,
        CN_TXN_PREPARE_ABORT,
        CN_TXN_COMPLETE_COMMIT,
        CN_TXN_COMPLETE_ABORT,
        CN_TXN_PREPARE_EPOCH_FENCE,
        CN_TXN_EMPTY,
        CN_TXN_EMPTY};
    enum cn_txn_state rs = replayed[s];
    bool open = rs == CN_TXN_ONGOING || rs == CN_TXN_PREPARE_COMMIT ||
                rs == CN_TXN_PREPARE_ABORT || rs == CN_TXN_PREPARE_EPOCH_FENCE;
    struct cn_txn_meta m;
    fk_meta(&m, ID, P, E, rs, open ? "t:0" : NULL);
    if (e == EV_EXPIRY)
        m.timeout_ms = 900000; /* so the Ongoing row does not time out */
    fk_replay(&m);
    if (s == ST_ABSENT) {
        m.state = CN_TXN_DEAD;
        fk_replay(&m);
    }
    cn_txn_meta_fini(&m);
    fk_lead_all();
    if (s == ST_DEAD_FLIGHT) {
        fk_advance(EXPIRE_MS + 2000);
        CHECK_EQ(fk_pending_appends(), 1);
        CHECK(fk_last_append() && fk_last_append()->tombstone);
    }
}

/* Feeds the event; returns its token (0 for events without one). */
static int table_event(enum ev e)
{
    struct cn_txn_request r;
    switch (e) {
    case EV_INIT_NEW: return fk_init_pid(ID);
    case EV_INIT_SAME: return fk_init_pid_v(ID, P, E, 3);
    case EV_ADD: return fk_add(ID, P, E, "t:1");
    case EV_OFFSETS: return fk_add_offsets(ID, P, E, "__consumer_offsets:3");
    case EV_END4C:
    case EV_END4A: return fk_end(ID, P, E, e == EV_END4C, 4);
    case EV_END5C:
    case EV_END5A: return fk_end(ID, P, E, e == EV_END5C, 5);
    case EV_PRODUCE: return fk_produce_add(P, E, "t:1", true);
    case EV_BATCHED:
        r = fk_rq(CN_TXN_REQ_ADD_BATCHED, ID, P, E);
        r.api_version = 5;
        return fk_send(&r, "t:1");
    case EV_OP: fk_op_abort(P, "t", 0); return 0;
    case EV_TIMEOUT: fk_advance(60000 + 10000 + 1); return 0;
    case EV_EXPIRY: fk_advance(EXPIRE_MS + 2000); return 0;
    default: return 0;
    }
}

static void table_cell(enum st s, enum ev e)
{
    const struct cell *want = &table[s][e];
    int fails0 = unit_failures;
    table_setup(s, e);
    size_t app0 = F.napp, mk0 = F.nmk;
    int tok = table_event(e);
    bool taken = e == EV_OP ? F.op_taken : F.taken;
    int result = F.result;
    int rec = X;
    if (F.napp > app0) {
        rec = (int)F.app[app0].m.state;
        if (!F.app[app0].done)
            fk_durable_this(&F.app[app0], KAFKA_NONE);
    }
    int ans = e == EV_OP ? result
              : tok ? fk_err(tok) == -1 ? (e == EV_PRODUCE && !taken ? NA : PK)
                                        : fk_err(tok)
                    : NA;
    int mk = F.nmk > mk0;
    CHECK_EQ(ans, want->ans);
    CHECK_EQ(rec, want->rec);
    CHECK_EQ(mk, want->mk);
    if (e == EV_OP || e == EV_PRODUCE)
        CHECK_EQ(taken, want->taken);
    if (unit_failures != fails0)
        fprintf(stderr, "  ^ row %s x %s: ans %d rec %d mk %d taken %d\n",
                st_name[s], ev_name[e], ans, rec, mk, taken);
    /* Let everything finish so every request is answered. */
    for (int i = 0; i < 3; i++) {
        fk_settle();
        fk_advance(F.cfg.park_max_ms + 1);
    }
    fk_settle();
    fk_fini();
}

/* Every (state x event) answers, writes and sends what today's
 * coordinator did; the harness checks each record against
 * cn_txn_transition_ok. */
UNIT_TEST(test_transition_table)
{
    for (int s = 0; s < ST_N; s++)
        for (int e = 0; e < EV_N; e++)
            table_cell((enum st)s, (enum ev)e);
}

/* A whole life, TV1: each record is the next legal state (the harness
 * checks cn_txn_transition_ok on every APPEND of every test), and the
 * log holds exactly the decisions (no record for a no-op). */
UNIT_TEST(test_records_pass_transition_ok)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    CHECK_EQ(p.pid, 1000);
    CHECK_EQ(p.epoch, 0);
    size_t a0 = F.napp;
    fk_add(ID, p.pid, p.epoch, "t:0 t:1");
    fk_settle();
    fk_add(ID, p.pid, p.epoch, "t:1"); /* already in: no record */
    CHECK_EQ(fk_nnew_appends(), 0);
    fk_settle();
    fk_end(ID, p.pid, p.epoch, true, 4);
    fk_settle();
    fk_add_offsets(ID, p.pid, p.epoch, "__consumer_offsets:3");
    fk_settle();
    fk_end(ID, p.pid, p.epoch, false, 4);
    fk_settle();
    static const enum cn_txn_state want[] = {
        CN_TXN_ONGOING, CN_TXN_PREPARE_COMMIT, CN_TXN_COMPLETE_COMMIT,
        CN_TXN_ONGOING, CN_TXN_PREPARE_ABORT,  CN_TXN_COMPLETE_ABORT};
    CHECK_EQ(F.napp - a0, sizeof want / sizeof want[0]);
    for (size_t i = 0; i < sizeof want / sizeof want[0] && a0 + i < F.napp;
         i++) {
        CHECK_EQ(F.app[a0 + i].m.state, want[i]);
        CHECK_EQ(F.app[a0 + i].m.producer_epoch, 0); /* TV1: no bumps */
    }
    /* Roles, for the fail points: change, decision, complete. */
    CHECK_EQ(F.app[a0].role, CN_TXN_WRITE_CHANGE);
    CHECK_EQ(F.app[a0 + 1].role, CN_TXN_WRITE_DECISION);
    CHECK_EQ(F.app[a0 + 2].role, CN_TXN_WRITE_COMPLETE);
    /* Complete clears the partitions (txn_markers.c:88). */
    CHECK_EQ(F.app[a0 + 2].m.npartitions, 0);
    struct cn_txn_stats st = fk_stats();
    CHECK_EQ(st.commits, 1);
    CHECK_EQ(st.aborts, 1);
    fk_fini();
}

/* A change is applied only once durable: until WRITTEN the query shows
 * the old state and the client has no answer. */
UNIT_TEST(test_change_applied_when_durable)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    int t = fk_add(ID, p.pid, p.epoch, "t:0");
    CHECK_EQ(fk_nnew_appends(), 1);
    CHECK_EQ(fk_nnew_answers(), 0);
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_EMPTY);
    CHECK(cn_txn_busy(F.c, ID));
    fk_durable(KAFKA_NONE);
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_ONGOING);
    CHECK(!cn_txn_busy(F.c, ID));
    fk_fini();
}

/* ---- 2. InitProducerId fencing --------------------------------------- */

/* InitPid over an Ongoing transaction: the old instance's transaction is
 * aborted under E+1, the new instance hears CONCURRENT_TRANSACTIONS at
 * once and its retry gets E+2 (h_txn.c:198-209, fence_written :86-96). */
UNIT_TEST(test_fence_ongoing)
{
    fk_init();
    struct fk_producer p = fk_ongoing(ID, "t:0");
    int t = fk_init_pid(ID);
    CHECK_EQ(fk_err(t), KAFKA_CONCURRENT_TRANSACTIONS);
    CHECK_EQ(fk_nnew_appends(), 1);
    CHECK_EQ(fk_nnew_markers(), 0); /* not before the decision is durable */
    const struct fk_app *r = fk_new_append(0);
    if (r) {
        CHECK_EQ(r->m.state, CN_TXN_PREPARE_ABORT);
        CHECK_EQ(r->m.producer_id, p.pid);
        CHECK_EQ(r->m.producer_epoch, p.epoch + 1);
    }
    fk_durable(KAFKA_NONE);
    CHECK_EQ(fk_stats().fenced, 1);
    const struct fk_mk *k = fk_new_markers(0);
    if (k) {
        CHECK(!k->commit);
        CHECK_EQ(k->producer_id, p.pid);
        CHECK_EQ(k->producer_epoch, p.epoch + 1);
        CHECK_EQ(k->n, 1);
        CHECK(k->first_after_decision);
    }
    fk_markers(-1);
    CHECK(fk_last_append() &&
          fk_last_append()->m.state == CN_TXN_COMPLETE_ABORT);
    fk_durable(KAFKA_NONE);
    int t2 = fk_init_pid(ID);
    fk_settle();
    const struct cn_txn_answer *a = fk_answer_for(t2);
    CHECK(a && a->error == KAFKA_NONE);
    if (a) {
        CHECK_EQ(a->producer_id, p.pid);
        CHECK_EQ(a->producer_epoch, p.epoch + 2);
    }
    fk_fini();
}

static void fence_decided(bool commit)
{
    fk_init();
    struct fk_producer p = fk_decided(ID, "t:0", commit);
    int t = fk_init_pid(ID);
    CHECK(fk_no_actions()); /* parked: no answer, no record */
    CHECK_EQ(fk_stats().parked_requests, 1);
    fk_markers(-1);
    fk_durable(KAFKA_NONE); /* the Complete */
    fk_settle();            /* the parked InitPid runs, one bump */
    const struct cn_txn_answer *a = fk_answer_for(t);
    CHECK(a && a->error == KAFKA_NONE);
    if (a)
        CHECK_EQ(a->producer_epoch, p.epoch + 1);
    CHECK_EQ(fk_stats().parked_requests, 0);
    CHECK_EQ(fk_stats().fenced, 0);
    fk_fini();
}

/* InitPid while a commit's markers are out waits for the Complete, then
 * bumps once (h_txn.c:160-166). */
UNIT_TEST(test_fence_prepare_commit)
{
    fence_decided(true);
}

UNIT_TEST(test_fence_prepare_abort)
{
    fence_decided(false);
}

/* A parked request still waiting after park_max_ms hears
 * CONCURRENT_TRANSACTIONS (txn_coord.c:208, 232). */
UNIT_TEST(test_fence_parked_past_deadline)
{
    fk_init();
    fk_decided(ID, "t:0", true);
    int t = fk_init_pid(ID);
    fk_advance(F.cfg.park_max_ms - 1);
    CHECK_EQ(fk_err(t), -1);
    fk_advance(1);
    CHECK_EQ(fk_err(t), KAFKA_CONCURRENT_TRANSACTIONS);
    CHECK_EQ(fk_nnew_appends(), 0);
    fk_settle();
    fk_fini();
}

/* KIP-360: a client naming a producer must be the current instance:
 * another id is INVALID_PRODUCER_ID_MAPPING, another epoch fenced
 * (INVALID_PRODUCER_EPOCH before v4, PRODUCER_FENCED from v4,
 * h_txn.c:67-72, 169-183). */
UNIT_TEST(test_init_pid_kip360)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    fk_init_pid_v(ID, p.pid + 1, p.epoch, 4);
    CHECK_EQ(fk_new_answer(0) ? fk_new_answer(0)->error : -1,
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
    int t3 = fk_init_pid_v(ID, p.pid, (int16_t)(p.epoch + 1), 3);
    CHECK_EQ(fk_err(t3), KAFKA_INVALID_PRODUCER_EPOCH);
    int t4 = fk_init_pid_v(ID, p.pid, (int16_t)(p.epoch + 1), 4);
    CHECK_EQ(fk_err(t4), KAFKA_PRODUCER_FENCED);
    CHECK_EQ(fk_nnew_appends(), 0);
    int ok = fk_init_pid_v(ID, p.pid, p.epoch, 4);
    fk_settle();
    CHECK_EQ(fk_err(ok), KAFKA_NONE);
    fk_fini();
}

/* InitPid at the last usable epoch moves to a new producer id at 0; the
 * old id is still accepted as the previous one (h_txn.c:104-117,
 * 170-171). */
UNIT_TEST(test_init_pid_rotates_and_accepts_previous)
{
    struct cn_txn_config cfg = fk_config();
    fk_init_loading(&cfg);
    fk_replay_state(ID, P, LAST, CN_TXN_EMPTY, NULL);
    fk_lead_all();
    int t = fk_init_pid_v(ID, P, LAST, 4);
    fk_settle();
    const struct cn_txn_answer *a = fk_answer_for(t);
    CHECK(a && a->error == KAFKA_NONE);
    if (a) {
        CHECK_EQ(a->producer_id, 1000);
        CHECK_EQ(a->producer_epoch, 0);
    }
    const struct cn_txn_meta *m = fk_find(ID);
    CHECK(m && m->prev_producer_id == P);
    int t2 = fk_init_pid_v(ID, P, LAST, 3); /* the previous id */
    fk_settle();
    a = fk_answer_for(t2);
    CHECK(a && a->error == KAFKA_NONE);
    if (a) {
        CHECK_EQ(a->producer_id, 1000);
        CHECK_EQ(a->producer_epoch, 1);
    }
    fk_fini();
}

/* The transaction timeout is checked against the maximum; an empty id
 * is refused (h_txn.c:133-140). */
UNIT_TEST(test_init_pid_bad_timeout)
{
    fk_init();
    struct cn_txn_request r = fk_rq(CN_TXN_REQ_INIT_PID, ID, -1, -1);
    r.timeout_ms = F.cfg.max_timeout_ms + 1;
    int t = fk_send(&r, NULL);
    CHECK_EQ(fk_err(t), KAFKA_INVALID_TRANSACTION_TIMEOUT);
    r.timeout_ms = 0;
    t = fk_send(&r, NULL);
    CHECK_EQ(fk_err(t), KAFKA_INVALID_TRANSACTION_TIMEOUT);
    r = fk_rq(CN_TXN_REQ_INIT_PID, "", -1, -1);
    t = fk_send(&r, NULL);
    CHECK_EQ(fk_err(t), KAFKA_INVALID_REQUEST);
    CHECK_EQ(F.napp, 0);
    fk_fini();
}

/* ---- 7. KIP-890: verification and the adds of partition leaders ------ */

/* cn_txn_verify answers by id, producer id, epoch, then state and
 * partition (txn_verify.c:301-328). */
UNIT_TEST(test_verify)
{
    fk_init();
    struct fk_producer p = fk_ongoing(ID, "t:0");
    CHECK_EQ(cn_txn_verify(F.c, ID, p.pid, p.epoch, "t", 0), KAFKA_NONE);
    CHECK_EQ(cn_txn_verify(F.c, "nobody", p.pid, p.epoch, "t", 0),
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
    CHECK_EQ(cn_txn_verify(F.c, ID, p.pid + 1, p.epoch, "t", 0),
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
    CHECK_EQ(cn_txn_verify(F.c, ID, p.pid, (int16_t)(p.epoch + 1), "t", 0),
             KAFKA_INVALID_PRODUCER_EPOCH);
    CHECK_EQ(cn_txn_verify(F.c, ID, p.pid, p.epoch, "t", 1),
             KAFKA_INVALID_TXN_STATE);
    CHECK_EQ(cn_txn_verify(F.c, ID, p.pid, p.epoch, "u", 0),
             KAFKA_INVALID_TXN_STATE);
    /* No id: found by producer id; an unknown one is INVALID_TXN_STATE
     * (txn_verify.c:315-317). */
    CHECK_EQ(cn_txn_verify(F.c, NULL, p.pid, p.epoch, "t", 0), KAFKA_NONE);
    CHECK_EQ(cn_txn_verify(F.c, NULL, p.pid + 9, p.epoch, "t", 0),
             KAFKA_INVALID_TXN_STATE);
    fk_end(ID, p.pid, p.epoch, true, 4);
    fk_settle();
    CHECK_EQ(cn_txn_verify(F.c, ID, p.pid, p.epoch, "t", 0),
             KAFKA_INVALID_TXN_STATE); /* not Ongoing any more */
    fk_fini();
}

/* With verification disabled every question is answered NONE. */
UNIT_TEST(test_verify_disabled)
{
    struct cn_txn_config cfg = fk_config();
    cfg.verification_enable = false;
    fk_init_cfg(&cfg);
    CHECK_EQ(cn_txn_verify(F.c, "nobody", 1, 0, "t", 0), KAFKA_NONE);
    CHECK_EQ(cn_txn_verify(F.c, NULL, 1, 0, "t", 0), KAFKA_NONE);
    fk_fini();
}

/* AddPartitionsToTxn v4 VerifyOnly: the producer check alone; another
 * epoch is PRODUCER_FENCED, busy CONCURRENT_TRANSACTIONS
 * (txn_verify.c:105-113). */
UNIT_TEST(test_check_batched)
{
    fk_init();
    struct fk_producer p = fk_ongoing(ID, "t:0");
    CHECK_EQ(cn_txn_check_batched(F.c, ID, p.pid, p.epoch), KAFKA_NONE);
    CHECK_EQ(cn_txn_check_batched(F.c, "nobody", p.pid, p.epoch),
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
    CHECK_EQ(cn_txn_check_batched(F.c, ID, p.pid + 1, p.epoch),
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
    CHECK_EQ(cn_txn_check_batched(F.c, ID, p.pid, (int16_t)(p.epoch + 1)),
             KAFKA_PRODUCER_FENCED);
    fk_add(ID, p.pid, p.epoch, "t:1"); /* in flight: busy */
    CHECK_EQ(cn_txn_check_batched(F.c, ID, p.pid, p.epoch),
             KAFKA_CONCURRENT_TRANSACTIONS);
    fk_settle();
    fk_fini();
}

/* AddPartitionsToTxn v5 is a TV2 client's add: it marks client_tv 2;
 * v4 leaves it (txn_verify.c:171-173). */
UNIT_TEST(test_batched_add_v5_sets_tv2)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    int t = fk_batched(ID, p.pid, p.epoch, "t:0", 4);
    CHECK(fk_last_append() && fk_last_append()->m.client_tv != 2);
    fk_settle();
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    t = fk_batched(ID, p.pid, p.epoch, "t:1", 5);
    CHECK(fk_last_append() && fk_last_append()->m.client_tv == 2 &&
          fk_last_append()->m.state == CN_TXN_ONGOING);
    fk_settle();
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    t = fk_batched(ID, p.pid, p.epoch, "t:1", 5); /* nothing new */
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    CHECK_EQ(fk_nnew_appends(), 0);
    fk_fini();
}

/* A group whose __consumer_offsets partition is missing (the handler
 * passes a partition without a topic): the producer's own errors first,
 * as Kafka checks id, producer id, epoch before anything else
 * (TransactionCoordinator.handleAddPartitionsToTransaction), then
 * COORDINATOR_NOT_AVAILABLE, which the client retries. */
UNIT_TEST(test_add_offsets_group_partition_missing)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    struct cn_txn_tp tp = {.topic = NULL, .partition = 3};
    struct cn_txn_request r = fk_rq(CN_TXN_REQ_ADD_OFFSETS, ID, p.pid,
                                    (int16_t)(p.epoch - 1));
    r.tps = &tp;
    r.ntps = 1;
    CHECK_EQ(fk_err(fk_send(&r, NULL)), KAFKA_PRODUCER_FENCED);
    r.producer_epoch = p.epoch;
    r.producer_id = p.pid + 1;
    CHECK_EQ(fk_err(fk_send(&r, NULL)), KAFKA_INVALID_PRODUCER_ID_MAPPING);
    r.producer_id = p.pid;
    CHECK_EQ(fk_err(fk_send(&r, NULL)), KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK_EQ(fk_nnew_appends(), 0);
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_EMPTY);
    fk_fini();
}

/* A batched add naming an unknown partition adds nothing:
 * OPERATION_NOT_ATTEMPTED, after the producer check (txn_verify.c:
 * 114-117, 157-160). */
UNIT_TEST(test_batched_add_unknown_not_attempted)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    struct cn_txn_request r = fk_rq(CN_TXN_REQ_ADD_BATCHED, ID, p.pid,
                                    p.epoch);
    r.api_version = 5;
    r.has_unknown = true;
    int t = fk_send(&r, "t:0");
    CHECK_EQ(fk_err(t), KAFKA_OPERATION_NOT_ATTEMPTED);
    CHECK_EQ(fk_nnew_appends(), 0);
    r.producer_epoch = (int16_t)(p.epoch + 1);
    t = fk_send(&r, "t:0");
    CHECK_EQ(fk_err(t), KAFKA_PRODUCER_FENCED);
    fk_fini();
}

/* A batched add never parks: busy is CONCURRENT_TRANSACTIONS at once. */
UNIT_TEST(test_batched_add_busy_concurrent)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    fk_add(ID, p.pid, p.epoch, "t:0");
    int t = fk_batched(ID, p.pid, p.epoch, "t:1", 5);
    CHECK_EQ(fk_err(t), KAFKA_CONCURRENT_TRANSACTIONS);
    fk_settle();
    fk_fini();
}

/* AddPartitionsToTxn v3 with an unknown partition: the producer is
 * checked, then nothing is added (h_txn.c:374-393). */
UNIT_TEST(test_add_parts_unknown_not_attempted)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    struct cn_txn_request r = fk_rq(CN_TXN_REQ_ADD_PARTS, ID, p.pid, p.epoch);
    r.has_unknown = true;
    int t = fk_send(&r, "t:0");
    CHECK_EQ(fk_err(t), KAFKA_OPERATION_NOT_ATTEMPTED);
    CHECK_EQ(fk_nnew_appends(), 0);
    r.producer_id = p.pid + 1;
    t = fk_send(&r, "t:0");
    CHECK_EQ(fk_err(t), KAFKA_INVALID_PRODUCER_ID_MAPPING);
    fk_fini();
}

/* Produce v12 adds its partitions itself: taken, Ongoing with client_tv
 * 2, answered NONE once durable (txn_verify.c:246-297). */
UNIT_TEST(test_produce_add_v12_taken)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    int t = fk_produce_add(p.pid, p.epoch, "t:0 t:1", true);
    CHECK(F.taken);
    CHECK_EQ(fk_nnew_answers(), 0);
    const struct fk_app *r = fk_new_append(0);
    if (r) {
        CHECK_EQ(r->m.state, CN_TXN_ONGOING);
        CHECK_EQ(r->m.client_tv, 2);
        CHECK_EQ(r->m.npartitions, 2);
    }
    fk_durable(KAFKA_NONE);
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    CHECK_EQ(cn_txn_verify(F.c, ID, p.pid, p.epoch, "t", 1), KAFKA_NONE);
    fk_fini();
}

/* Not taken (go on, the verification answers): an older produce from a
 * client not seen on TV2, another epoch, an unknown producer, nothing
 * missing, no partitions, TV2 off (txn_verify.c:254-272); the query
 * cn_txn_produce_adds says so first, so the handler takes no step. */
UNIT_TEST(test_produce_add_not_taken)
{
    fk_init();
    struct fk_producer p = fk_ongoing(ID, "t:0");
    fk_produce_add(p.pid, p.epoch, "t:1", false); /* client_tv 1 */
    CHECK(!F.taken && !F.adds);
    fk_produce_add(p.pid, (int16_t)(p.epoch + 1), "t:1", true);
    CHECK(!F.taken && !F.adds);
    fk_produce_add(p.pid + 5, p.epoch, "t:1", true);
    CHECK(!F.taken && !F.adds);
    fk_produce_add(p.pid, p.epoch, "t:0", true); /* already in */
    CHECK(!F.taken && !F.adds);
    fk_produce_add(p.pid, p.epoch, NULL, true);
    CHECK(!F.taken && !F.adds);
    CHECK_EQ(F.napp, 2); /* InitPid and the add only */
    fk_fini();
    struct cn_txn_config cfg = fk_config();
    cfg.transaction_version = 1;
    fk_init_cfg(&cfg);
    p = fk_new_producer(ID);
    fk_produce_add(p.pid, p.epoch, "t:1", true);
    CHECK(!F.taken && !F.adds);
    fk_fini();
}

/* Once a producer has used TV2 (client_tv 2), its older produce
 * requests add implicitly too. */
UNIT_TEST(test_produce_add_tv2_client_any_version)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    fk_produce_add(p.pid, p.epoch, "t:0", true);
    fk_settle();
    int t = fk_produce_add(p.pid, p.epoch, "t:1", false);
    CHECK(F.taken);
    fk_settle();
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    fk_fini();
}

/* A produce add for a busy id waits inside the machine, then adds
 * (txn_verify.c:273-276). */
UNIT_TEST(test_produce_add_parked_then_added)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    fk_add(ID, p.pid, p.epoch, "t:0"); /* in flight */
    int t = fk_produce_add(p.pid, p.epoch, "t:1", true);
    CHECK(F.taken);
    CHECK_EQ(fk_nnew_appends(), 0);
    fk_durable(KAFKA_NONE); /* t:0 in; the parked add runs */
    fk_settle();
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    const struct cn_txn_meta *m = fk_find(ID);
    CHECK(m && cn_txn_meta_has_partition(m, "t", 1));
    fk_fini();
}

/* Still busy after park_max_ms: CONCURRENT_TRANSACTIONS, which the
 * produce takes as "go on unadded" (txn_coord.c:242-249). */
UNIT_TEST(test_produce_add_late_concurrent)
{
    fk_init();
    struct fk_producer p = fk_decided(ID, "t:0", true);
    int t = fk_produce_add(p.pid, p.epoch, "t:1", true);
    CHECK(F.taken);
    fk_advance(F.cfg.park_max_ms);
    CHECK_EQ(fk_err(t), KAFKA_CONCURRENT_TRANSACTIONS);
    fk_settle();
    fk_fini();
}

/* A failed add write answers an error (the produce goes on unadded and
 * its verification fails it, txn_verify.c:238-243). */
UNIT_TEST(test_produce_add_write_failed)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    int t = fk_produce_add(p.pid, p.epoch, "t:0", true);
    CHECK(F.taken);
    CHECK_EQ(fk_nnew_appends(), 1);
    fk_durable(KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK_EQ(fk_err(t), KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_EMPTY &&
          fk_find(ID)->npartitions == 0);
    CHECK(!cn_txn_busy(F.c, ID));
    /* Not counted as added: the next produce writes the add again. */
    int t2 = fk_produce_add(p.pid, p.epoch, "t:0", true);
    CHECK(F.taken);
    CHECK_EQ(fk_nnew_appends(), 1);
    fk_durable(KAFKA_NONE);
    CHECK_EQ(fk_err(t2), KAFKA_NONE);
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_ONGOING &&
          fk_find(ID)->npartitions == 1);
    fk_fini();
}

/* A fresh machine owing the answer to a taken add, out of memory on;
 * returns the request. */
static int owe_an_add(void)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    int t = fk_produce_add(p.pid, p.epoch, "t:0", true);
    CHECK(F.taken);
    F.nomem = true;
    fk_durable(KAFKA_NONE);
    CHECK_EQ(fk_err(t), -1);
    return t;
}

/* A taken add whose answer cannot be recorded (out of memory) is owed,
 * not lost: the timer asks for a step 10 ms on and the answer goes out
 * first, once (the produce would wait for it forever). */
UNIT_TEST(test_produce_add_answer_owed)
{
    int t = owe_an_add();
    CHECK_EQ(F.timer, F.now.mono_ms + 10);
    fk_advance(10); /* still failing: owed again, asked for later */
    CHECK_EQ(fk_err(t), -1);
    CHECK_EQ(F.timer, F.now.mono_ms + 20);
    F.nomem = false;
    fk_advance(20);
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    CHECK(F.timer > F.now.mono_ms + 1);
    fk_advance(10); /* answered once (the harness counts) */
    CHECK(fk_find(ID) && fk_find(ID)->npartitions == 1);
    fk_fini();
}

static void pay_to_fake(void *ctx, const struct cn_txn_answer *a)
{
    (void)ctx;
    struct cn_txn_action act = {.kind = CN_TXA_ANSWER};
    act.u.answer = *a;
    fk_record_answer(&act);
}

/* Out of memory that lasts: the retry backs off to 1 s, and an answer
 * still owed at stop is handed over once (no later step pays it). */
UNIT_TEST(test_produce_add_answer_owed_at_stop)
{
    int t = owe_an_add();
    int steps = F.steps;
    fk_advance(10000);
    CHECK(F.steps - steps < 20);
    CHECK_EQ(F.timer, F.now.mono_ms + 1000);
    fk_stop();
    CHECK_EQ(fk_err(t), -1);
    cn_txn_pay_owed(F.c, pay_to_fake, NULL);
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    cn_txn_pay_owed(F.c, pay_to_fake, NULL); /* once (the harness counts) */
    F.nomem = false;
    fk_fini();
}

/* ---- 8. TV2: the bump in EndTxn and its overflow --------------------- */

/* A TV2 Ongoing transaction of id at (pid, epoch) on t:0, replayed. */
static void tv2_ongoing(int64_t pid, int16_t epoch)
{
    struct cn_txn_meta m;
    fk_meta(&m, ID, pid, epoch, CN_TXN_ONGOING, "t:0");
    m.client_tv = 2;
    fk_init_replayed(&m);
}

/* EndTxn v5 bumps the epoch in the decision record and answers with the
 * bumped epoch; below the last usable epoch no new id
 * (h_txn.c:529-560). */
UNIT_TEST(test_tv2_end_bumps_once)
{
    tv2_ongoing(P, LAST - 1);
    int t = fk_end(ID, P, LAST - 1, true, 5);
    const struct fk_app *r = fk_new_append(0);
    if (r) {
        CHECK_EQ(r->m.state, CN_TXN_PREPARE_COMMIT);
        CHECK_EQ(r->m.producer_epoch, LAST);
        CHECK_EQ(r->m.next_producer_id, -1);
        CHECK_EQ(r->m.client_tv, 2);
    }
    fk_durable(KAFKA_NONE);
    const struct cn_txn_answer *a = fk_answer_for(t);
    CHECK(a && a->error == KAFKA_NONE);
    if (a) {
        CHECK_EQ(a->producer_id, P);
        CHECK_EQ(a->producer_epoch, LAST);
    }
    fk_settle();
    CHECK_EQ(F.pids_taken, 0);
    fk_fini();
}

/* KAFKA-18660: at the last usable epoch EndTxn v5 decides at (P, 32767)
 * with NextProducerId Q, answers (Q, 0) before the markers, sends the
 * markers as (P, 32767) and completes onto (Q, 0, prev P); Q is then
 * accepted everywhere, not fenced by itself (h_txn.c:536-541, :56-58,
 * txn_markers.c:80-87). */
UNIT_TEST(test_tv2_overflow)
{
    tv2_ongoing(P, LAST);
    int t = fk_end(ID, P, LAST, true, 5);
    const struct fk_app *r = fk_new_append(0);
    if (r) {
        CHECK_EQ(r->m.state, CN_TXN_PREPARE_COMMIT);
        CHECK_EQ(r->m.producer_id, P);
        CHECK_EQ(r->m.producer_epoch, INT16_MAX);
        CHECK_EQ(r->m.next_producer_id, 1000);
    }
    fk_durable(KAFKA_NONE);
    const struct cn_txn_answer *a = fk_answer_for(t);
    CHECK(a && a->error == KAFKA_NONE);
    if (a) {
        CHECK_EQ(a->producer_id, 1000);
        CHECK_EQ(a->producer_epoch, 0);
    }
    const struct fk_mk *k = fk_last_markers();
    CHECK(k && k->commit && k->producer_id == P &&
          k->producer_epoch == INT16_MAX);
    fk_markers(-1);
    r = fk_last_append();
    if (r) {
        CHECK_EQ(r->m.state, CN_TXN_COMPLETE_COMMIT);
        CHECK_EQ(r->m.producer_id, 1000);
        CHECK_EQ(r->m.producer_epoch, 0);
        CHECK_EQ(r->m.prev_producer_id, P);
        CHECK_EQ(r->m.next_producer_id, -1);
    }
    fk_durable(KAFKA_NONE);
    CHECK(cn_txn_find_pid(F.c, P) == NULL);
    CHECK(cn_txn_find_pid(F.c, 1000) != NULL);
    /* The client's EndTxn retry from before the rotation: success with
     * the new producer (h_txn.c:597-600). */
    int tr = fk_end(ID, P, LAST, true, 5);
    a = fk_answer_for(tr);
    CHECK(a && a->error == KAFKA_NONE);
    if (a) {
        CHECK_EQ(a->producer_id, 1000);
        CHECK_EQ(a->producer_epoch, 0);
    }
    /* The new producer's first produce adds, and verifies. */
    int tp = fk_produce_add(1000, 0, "t:1", true);
    CHECK(F.taken);
    fk_settle();
    CHECK_EQ(fk_err(tp), KAFKA_NONE);
    CHECK_EQ(cn_txn_verify(F.c, ID, 1000, 0, "t", 1), KAFKA_NONE);
    int ta = fk_add(ID, 1000, 0, "t:2");
    fk_settle();
    CHECK_EQ(fk_err(ta), KAFKA_NONE);
    fk_fini();
}

/* A TV2 EndTxn retry after completion is success with the current
 * producer; a different decision is INVALID_TXN_STATE; an older epoch
 * PRODUCER_FENCED (h_txn.c:597-647). */
UNIT_TEST(test_tv2_end_retry)
{
    tv2_ongoing(P, E);
    fk_end(ID, P, E, true, 5);
    fk_settle();
    int t = fk_end(ID, P, E, true, 5);
    const struct cn_txn_answer *a = fk_answer_for(t);
    CHECK(a && a->error == KAFKA_NONE && a->producer_epoch == E + 1);
    CHECK_EQ(fk_err(fk_end(ID, P, E, false, 5)), KAFKA_INVALID_TXN_STATE);
    CHECK_EQ(fk_err(fk_end(ID, P, E - 1, true, 5)), KAFKA_PRODUCER_FENCED);
    CHECK_EQ(fk_err(fk_end(ID, P + 1, E + 1, true, 5)),
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
    CHECK_EQ(F.napp, 2);
    fk_fini();
}

/* With TV2 off EndTxn v5 follows the v4 rules: no bump. */
UNIT_TEST(test_end_v5_without_tv2_no_bump)
{
    struct cn_txn_config cfg = fk_config();
    cfg.transaction_version = 1;
    fk_init_cfg(&cfg);
    struct fk_producer p = fk_ongoing(ID, "t:0");
    int t = fk_end(ID, p.pid, p.epoch, true, 5);
    CHECK_EQ(fk_nnew_appends(), 1);
    const struct fk_app *r = fk_last_append();
    CHECK(r && r->m.state == CN_TXN_PREPARE_COMMIT &&
          r->m.producer_id == p.pid && r->m.producer_epoch == p.epoch);
    fk_durable(KAFKA_NONE);
    const struct cn_txn_answer *a = fk_answer_for(t);
    CHECK(a && a->error == KAFKA_NONE && a->producer_id == p.pid &&
          a->producer_epoch == p.epoch);
    CHECK(fk_last_markers() && fk_last_markers()->producer_epoch == p.epoch);
    fk_settle();
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_COMPLETE_COMMIT &&
          fk_find(ID)->producer_epoch == p.epoch);
    fk_fini();
}

/* KAFKA-19367: InitPid over an Ongoing TV2 transaction bumps once: the
 * abort is at exactly E+1, the retry gets E+2 (h_txn.c:196-197). */
UNIT_TEST(test_fence_tv2_single_bump)
{
    tv2_ongoing(P, E);
    fk_init_pid(ID);
    CHECK(fk_last_append() && fk_last_append()->m.producer_epoch == E + 1);
    fk_durable(KAFKA_NONE);
    CHECK(fk_last_markers() && fk_last_markers()->producer_epoch == E + 1);
    fk_settle();
    int t = fk_init_pid(ID);
    fk_settle();
    const struct cn_txn_answer *a = fk_answer_for(t);
    CHECK(a && a->error == KAFKA_NONE && a->producer_epoch == E + 2);
    fk_fini();
}

/* At 32765 the fence goes to 32766 and the retry rotates to (Q, 0). */
UNIT_TEST(test_fence_tv2_near_last_epoch_rotates_on_retry)
{
    tv2_ongoing(P, LAST - 1);
    fk_init_pid(ID);
    CHECK(fk_last_append() && fk_last_append()->m.producer_epoch == LAST);
    fk_settle();
    CHECK(fk_last_markers() && fk_last_markers()->producer_epoch == LAST);
    int t = fk_init_pid(ID);
    fk_settle();
    const struct cn_txn_answer *a = fk_answer_for(t);
    CHECK(a && a->error == KAFKA_NONE && a->producer_id == 1000 &&
          a->producer_epoch == 0);
    fk_fini();
}

/* The deliberate change (coord.h): a coordinator abort at the last
 * usable epoch keeps the producer id and aborts at (P, 32767), so the
 * markers close P's open batches; the next bump rotates.  Today
 * (h_txn.c:104-117, txn_markers.c:169) the abort went out for a new id.
 * Kafka: TransactionMetadata.prepareFenceProducerEpoch. */
UNIT_TEST(test_fence_at_last_usable_epoch)
{
    tv2_ongoing(P, LAST);
    int t = fk_init_pid(ID);
    CHECK_EQ(fk_err(t), KAFKA_CONCURRENT_TRANSACTIONS);
    const struct fk_app *r = fk_last_append();
    CHECK(r && r->m.state == CN_TXN_PREPARE_ABORT && r->m.producer_id == P &&
          r->m.producer_epoch == INT16_MAX);
    fk_durable(KAFKA_NONE);
    const struct fk_mk *k = fk_last_markers();
    CHECK(k && !k->commit && k->producer_id == P &&
          k->producer_epoch == INT16_MAX);
    fk_settle();
    int t2 = fk_init_pid(ID);
    fk_settle();
    const struct cn_txn_answer *a = fk_answer_for(t2);
    CHECK(a && a->error == KAFKA_NONE && a->producer_id == 1000 &&
          a->producer_epoch == 0);
    const struct cn_txn_meta *m = fk_find(ID);
    CHECK(m && m->prev_producer_id == P);
    fk_fini();
}

/* The same for the timeout abort at the last usable epoch. */
UNIT_TEST(test_timeout_at_last_usable_epoch)
{
    tv2_ongoing(P, LAST);
    fk_advance(60000 + F.cfg.abort_check_interval_ms + 1);
    const struct fk_app *r = fk_last_append();
    CHECK(r && r->m.state == CN_TXN_PREPARE_ABORT && r->m.producer_id == P &&
          r->m.producer_epoch == INT16_MAX);
    fk_durable(KAFKA_NONE);
    const struct fk_mk *k = fk_last_markers();
    CHECK(k && k->producer_id == P && k->producer_epoch == INT16_MAX);
    fk_settle();
    fk_fini();
}

/* An operator abort bumps once too, and at the last epoch keeps P. */
UNIT_TEST(test_operator_abort_single_bump)
{
    tv2_ongoing(P, E);
    fk_op_abort(P, "t", 0);
    CHECK(F.op_taken);
    CHECK_EQ(F.result, KAFKA_NONE);
    CHECK(fk_last_append() && fk_last_append()->m.producer_epoch == E + 1);
    fk_settle();
    fk_fini();
    tv2_ongoing(P, LAST);
    fk_op_abort(P, "t", 0);
    const struct fk_app *r = fk_last_append();
    CHECK(r && r->m.producer_id == P && r->m.producer_epoch == INT16_MAX);
    fk_settle();
    CHECK(fk_last_markers() && fk_last_markers()->producer_id == P);
    fk_fini();
}

/* An operator abort of a partition the transaction does not hold, or of
 * an unknown producer, is the caller's to write (txn_markers.c:272-281);
 * while a change is in flight CONCURRENT_TRANSACTIONS (:307-312). */
UNIT_TEST(test_operator_abort_not_ours)
{
    fk_init();
    struct fk_producer p = fk_ongoing(ID, "t:0");
    fk_op_abort(p.pid, "t", 1);
    CHECK(!F.op_taken && F.result == KAFKA_NONE);
    fk_op_abort(p.pid + 3, "t", 0);
    CHECK(!F.op_taken && F.result == KAFKA_NONE);
    CHECK_EQ(F.napp, 2);
    fk_add(ID, p.pid, p.epoch, "t:1");
    fk_op_abort(p.pid, "t", 0);
    CHECK(!F.op_taken);
    CHECK_EQ(F.result, KAFKA_CONCURRENT_TRANSACTIONS);
    fk_settle();
    fk_fini();
}

/* AddOffsetsToTxn without a group (the handler passes no partition):
 * INVALID_GROUP_ID, after the producer check (h_txn.c:476-489). */
UNIT_TEST(test_add_offsets_no_group)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    CHECK_EQ(fk_err(fk_add_offsets(ID, p.pid, p.epoch, NULL)),
             KAFKA_INVALID_GROUP_ID);
    CHECK_EQ(fk_err(fk_add_offsets(ID, p.pid + 1, p.epoch, NULL)),
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
    CHECK_EQ(fk_nnew_appends(), 0);
    fk_fini();
}

/* InitPid starts a new instance: partitions and start time cleared, the
 * request's timeout, client_tv 0; AddPartitions v3 and EndTxn v4 mark a
 * TV1 client (h_txn.c:211-218, 427, 713). */
UNIT_TEST(test_init_pid_resets_instance)
{
    struct cn_txn_meta m;
    fk_meta(&m, ID, P, E, CN_TXN_COMPLETE_COMMIT, NULL);
    m.client_tv = 2;
    fk_init_replayed(&m);
    struct cn_txn_request r = fk_rq(CN_TXN_REQ_INIT_PID, ID, -1, -1);
    r.timeout_ms = 12345;
    fk_send(&r, NULL);
    const struct fk_app *a = fk_last_append();
    CHECK(a && a->m.state == CN_TXN_EMPTY && a->m.timeout_ms == 12345 &&
          a->m.txn_start_ms == -1 && a->m.client_tv == 0 &&
          a->m.npartitions == 0 && a->m.producer_epoch == E + 1);
    fk_settle();
    fk_add(ID, P, E + 1, "t:0");
    CHECK(fk_last_append() && fk_last_append()->m.client_tv == 1 &&
          fk_last_append()->m.txn_start_ms == F.now.wall_ms);
    fk_settle();
    fk_fini();
}

/* A TV2 abort with nothing open (Empty) is decided and completed
 * without markers: PrepareAbort at E+1 with no partitions, then
 * CompleteAbort; the answer carries E+1 (h_txn.c:554-557). */
UNIT_TEST(test_tv2_bare_abort_completes_without_markers)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    int t = fk_end(ID, p.pid, p.epoch, false, 5);
    CHECK(fk_last_append() &&
          fk_last_append()->m.state == CN_TXN_PREPARE_ABORT &&
          fk_last_append()->m.npartitions == 0);
    fk_durable(KAFKA_NONE);
    const struct cn_txn_answer *a = fk_answer_for(t);
    CHECK(a && a->error == KAFKA_NONE && a->producer_epoch == p.epoch + 1);
    CHECK_EQ(fk_nnew_markers(), 0);
    CHECK(fk_last_append() &&
          fk_last_append()->m.state == CN_TXN_COMPLETE_ABORT);
    fk_durable(KAFKA_NONE);
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_COMPLETE_ABORT);
    fk_fini();
}

/* Stats: ids per state, and the decision-to-Complete latency recorded
 * once per transaction (txn_markers.c:41-49). */
UNIT_TEST(test_stats)
{
    fk_init();
    fk_ongoing(ID, "t:0");
    fk_new_producer("other");
    struct cn_txn_stats st = fk_stats();
    CHECK_EQ(st.ids_by_state[CN_TXN_ONGOING], 1);
    CHECK_EQ(st.ids_by_state[CN_TXN_EMPTY], 1);
    CHECK_EQ(cn_txn_count(F.c, -1), 2);
    const struct cn_txn_meta *m = fk_find(ID);
    fk_end(ID, m->producer_id, m->producer_epoch, true, 4);
    fk_settle();
    st = fk_stats();
    CHECK_EQ(st.commits, 1);
    CHECK_EQ(st.commit_ms.count, 1);
    CHECK_EQ(st.abort_ms.count, 0);
    CHECK_EQ(st.ids_by_state[CN_TXN_COMPLETE_COMMIT], 1);
    fk_fini();
}

/* An empty id is not found by the producer checks: INVALID_PRODUCER_ID_
 * MAPPING (check_producer, h_txn.c:231-235; txn_verify.c:101-107); only
 * InitPid and the TV2 EndTxn refuse it as INVALID_REQUEST (h_txn.c:133,
 * 578). */
UNIT_TEST(test_empty_id)
{
    fk_init();
    CHECK_EQ(fk_err(fk_add("", 1, 0, "t:0")),
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
    CHECK_EQ(fk_err(fk_add_offsets("", 1, 0, "__consumer_offsets:3")),
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
    CHECK_EQ(fk_err(fk_end("", 1, 0, true, 3)),
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
    CHECK_EQ(fk_err(fk_batched("", 1, 0, "t:0", 4)),
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
    CHECK_EQ(fk_err(fk_end("", 1, 0, true, 5)), KAFKA_INVALID_REQUEST);
    CHECK_EQ(fk_err(fk_init_pid("")), KAFKA_INVALID_REQUEST);
    CHECK_EQ(F.napp, 0);
    fk_fini();
}

/* After a coordinator abort at the last usable epoch the id rests at
 * 32767; a TV2 EndTxn or produce at 32767 (never handed to a client) must
 * not wrap the epoch: no record, marker or answer with a negative epoch
 * (the harness checks every one). */
UNIT_TEST(test_tv2_epoch_never_wraps)
{
    tv2_ongoing(P, LAST);
    fk_advance(60000 + F.cfg.abort_check_interval_ms);
    fk_settle();
    const struct cn_txn_meta *m = fk_find(ID);
    CHECK(m && m->state == CN_TXN_COMPLETE_ABORT &&
          m->producer_epoch == INT16_MAX);
    fk_end(ID, P, INT16_MAX, false, 5);
    fk_settle();
    fk_produce_add(P, INT16_MAX, "t:1", true);
    fk_settle();
    fk_end(ID, P, INT16_MAX, true, 5);
    fk_settle();
    for (size_t i = 0; i < F.napp; i++)
        CHECK(F.app[i].tombstone || F.app[i].m.producer_epoch >= 0);
    fk_fini();
}

/* The TV2 EndTxn(abort) retry after a coordinator abort at 32766 is
 * answered (Q, 0) however often it is repeated (its answer may be lost
 * with the connection): before, every repeat found CompleteAbort (Q, 0,
 * prev P) and matched retry_overflow (h_txn.c:597-600, 630-634). */
UNIT_TEST(test_tv2_overflow_retry_repeated)
{
    tv2_ongoing(P, LAST);
    fk_advance(60000 + F.cfg.abort_check_interval_ms);
    fk_settle();
    for (int i = 0; i < 3; i++) {
        int t = fk_end(ID, P, LAST, false, 5);
        fk_settle();
        const struct cn_txn_answer *a = fk_answer_for(t);
        CHECK(a && a->error == KAFKA_NONE && a->producer_id == 1000 &&
              a->producer_epoch == 0);
    }
    CHECK_EQ(F.pids_taken, 1);
    fk_fini();
}

/* A partition already in the Ongoing transaction is answered NONE with
 * no record, for AddOffsets (h_txn.c:496-500) as for AddPartitions
 * (:417-421). */
UNIT_TEST(test_add_known_partition_no_record)
{
    fk_init();
    struct fk_producer p = fk_ongoing(ID, "t:0 __consumer_offsets:3");
    CHECK_EQ(fk_err(
                 fk_add_offsets(ID, p.pid, p.epoch, "__consumer_offsets:3")),
             KAFKA_NONE);
    CHECK_EQ(fk_nnew_appends(), 0);
    CHECK_EQ(fk_err(fk_add(ID, p.pid, p.epoch, "t:0")), KAFKA_NONE);
    CHECK_EQ(fk_nnew_appends(), 0);
    fk_fini();
}

/* A parked produce add whose partition got in meanwhile is answered
 * NONE with no record (section 6: "adds, or NONE: not needed"). */
UNIT_TEST(test_produce_add_parked_not_needed)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    fk_add(ID, p.pid, p.epoch, "t:0"); /* in flight */
    int t = fk_produce_add(p.pid, p.epoch, "t:0", true);
    CHECK(F.taken);
    size_t n0 = F.napp;
    fk_settle();
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    CHECK_EQ(F.napp, n0);
    fk_fini();
}

/* cn_txn_set_config takes a new transaction version (dynamic config):
 * TV2 off, EndTxn v5 no longer bumps; the partition count stays. */
UNIT_TEST(test_set_config_transaction_version)
{
    fk_init();
    struct fk_producer p = fk_ongoing(ID, "t:0");
    struct cn_txn_config cfg = F.cfg;
    cfg.transaction_version = 1;
    cfg.nparts = 50;
    cn_txn_set_config(F.c, &cfg);
    fk_end(ID, p.pid, p.epoch, true, 5);
    CHECK(fk_last_append() && fk_last_append()->m.producer_epoch == p.epoch &&
          fk_last_append()->part == fk_part(ID));
    fk_settle();
    char other[32]; /* an id whose part would differ with 50 parts */
    for (int n = 0;; n++) {
        snprintf(other, sizeof other, "o-%d", n);
        if (cn_txn_partition_for((const uint8_t *)other, strlen(other), 50) >=
            F.cfg.nparts)
            break;
    }
    int t = fk_init_pid(other);
    CHECK(fk_last_append() && fk_last_append()->part == fk_part(other));
    fk_settle();
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    fk_fini();
}

UNIT_MAIN(test_transition_table, test_records_pass_transition_ok,
          test_change_applied_when_durable, test_fence_ongoing,
          test_fence_prepare_commit, test_fence_prepare_abort,
          test_fence_parked_past_deadline, test_init_pid_kip360,
          test_init_pid_rotates_and_accepts_previous,
          test_init_pid_bad_timeout, test_verify, test_verify_disabled,
          test_check_batched, test_batched_add_v5_sets_tv2,
          test_batched_add_unknown_not_attempted,
          test_batched_add_busy_concurrent,
          test_add_parts_unknown_not_attempted, test_produce_add_v12_taken,
          test_produce_add_not_taken, test_produce_add_tv2_client_any_version,
          test_produce_add_parked_then_added, test_produce_add_late_concurrent,
          test_produce_add_write_failed, test_produce_add_answer_owed,
          test_produce_add_answer_owed_at_stop, test_tv2_end_bumps_once,
          test_tv2_overflow, test_tv2_end_retry,
          test_end_v5_without_tv2_no_bump, test_fence_tv2_single_bump,
          test_fence_tv2_near_last_epoch_rotates_on_retry,
          test_fence_at_last_usable_epoch, test_timeout_at_last_usable_epoch,
          test_operator_abort_single_bump, test_operator_abort_not_ours,
          test_add_offsets_no_group, test_add_offsets_group_partition_missing,
          test_init_pid_resets_instance,
          test_tv2_bare_abort_completes_without_markers, test_stats,
          test_empty_id, test_tv2_epoch_never_wraps,
          test_tv2_overflow_retry_repeated, test_add_known_partition_no_record,
          test_produce_add_parked_not_needed,
          test_set_config_transaction_version)
