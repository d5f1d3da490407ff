/*
 * coord.h - the transaction coordinator, as a state machine.
 *
 * Every transactional id lives in one partition of __transaction_state
 * (txn_state.h: Java's String.hashCode rule).  The machine owns the table
 * of ids and decides every transition; it does no I/O, reads no clock and
 * calls nobody but the producer-id seam.  It takes events (a decoded
 * request, a durable write completed, a marker result, a tick of the
 * clock, a partition's leadership gained or lost) and returns actions
 * (append this record to __transaction_state partition P, send these
 * markers to these partitions' leaders, answer this request, arm the
 * timer for T).  The broker's executor (node/txn_exec.c) carries them
 * out and feeds the outcomes back as events; tests do the same with a
 * fake clock, fake durability and a fake marker channel
 * (tests/unit/test_txn_coord*.c: the specification to read first).
 *
 * Rules the machine keeps, as Kafka's coordinator does:
 *  - a change is applied only once its record is durable (CN_TXE_WRITTEN
 *    with NONE); the client hears of it after that;
 *  - an id with a change or markers in flight is busy: a request for it
 *    is parked (answered when the id is idle, or CONCURRENT_TRANSACTIONS
 *    after park_max_ms), never processed concurrently;
 *  - EndTxn writes PrepareCommit/PrepareAbort (the decision), answers,
 *    sends the markers and, once every partition has its marker, writes
 *    CompleteCommit/CompleteAbort; failed markers are all sent again after
 *    marker_retry_ms;
 *  - coordinator-made aborts (InitProducerId fence, timeout, operator)
 *    bump the epoch once (KAFKA-19367), with the same producer id even at
 *    the last usable epoch: the abort markers must carry the producer id
 *    whose batches are open (rotation to a new id happens on the next
 *    bump);
 *  - transaction version 2 (KIP-890 part 2): EndTxn v5 bumps the epoch
 *    in the PrepareX record; at the last usable epoch it hands out a new
 *    producer id (NextProducerId), taken on at completion (KAFKA-18660).
 *
 * Ownership: strings in an event are read only during cn_txn_step; the
 * machine copies what it keeps.  Everything an action points to lives in
 * the actions' arena until cn_txn_actions_reset.
 *
 * Runs on: one thread at a time (the broker's loop); not re-entrant: never
 * call cn_txn_step from inside the carrying out of its own actions (queue
 * the event instead).
 */
#ifndef CN_TXN_COORD_H
#define CN_TXN_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/bytes.h"
#include "base/hist.h"
#include "txn/txn_log.h"
#include "txn/txn_state.h"

#define CN_TXN_TOPIC "__transaction_state"
/* The last epoch a bump may hand a client; a bump past it moves to a new
 * producer id at epoch 0.  A coordinator abort may still use
 * CN_TXN_EPOCH_LAST_USABLE + 1 (INT16_MAX) for its markers. */
#define CN_TXN_EPOCH_LAST_USABLE (INT16_MAX - 1)

struct cn_txn_coord; /* opaque */

/* Copied from the broker's config by the executor (cn_txn_set_config). */
struct cn_txn_config {
    int32_t nparts;              /* partitions of __transaction_state */
    int16_t transaction_version; /* cairn.transaction.version; >= 2: TV2 */
    bool verification_enable; /* transaction.partition.verification.enable */
    int32_t max_timeout_ms;   /* transaction.max.timeout.ms */
    int64_t id_expiration_ms; /* transactional.id.expiration.ms */
    int64_t abort_check_interval_ms;  /* transaction.abort.timed.out.
                                         transaction.cleanup.interval.ms */
    int64_t expiry_check_interval_ms; /* transaction.remove.expired.
                                         transaction.cleanup.interval.ms */
    int64_t park_max_ms;     /* a parked request's longest wait (1000) */
    int64_t marker_retry_ms; /* failed markers are sent again (1000) */
};

/* The clocks, read once per event by the executor: time is an argument. */
struct cn_txn_now {
    int64_t wall_ms; /* what records and expiry use */
    int64_t mono_ms; /* what deadlines and timers use */
    int64_t mono_us; /* what the latency histograms use */
};

/*
 * Producer ids behind a seam.  take() returns 0 and sets *pid; -EAGAIN
 * while no durable id is left (the request parks, CN_TXA_WANT_PIDS is
 * emitted once, and CN_TXE_PIDS_READY resumes it); or another negative
 * error (the request is answered COORDINATOR_NOT_AVAILABLE).  Tests pass a
 * counter.
 */
struct cn_txn_pids {
    int (*take)(void *ctx, int64_t *pid);
    void *ctx;
};

/* ---- events ---------------------------------------------------------- */

enum cn_txn_req_kind {
    CN_TXN_REQ_INIT_PID,    /* InitProducerId with a transactional id */
    CN_TXN_REQ_ADD_PARTS,   /* AddPartitionsToTxn v0-3 */
    CN_TXN_REQ_ADD_BATCHED, /* one transaction of AddPartitionsToTxn v4-5
                               that is not VerifyOnly */
    CN_TXN_REQ_ADD_OFFSETS, /* AddOffsetsToTxn; tps[0] is the group's
                               __consumer_offsets partition (topic NULL:
                               it is missing; none: no group) */
    CN_TXN_REQ_END,         /* EndTxn */
    CN_TXN_REQ_PRODUCE_ADD, /* TV2 implicit add: Produce, TxnOffsetCommit v5 */
};

/* A decoded, authorized request, its fields checked for form by the
 * handler. */
struct cn_txn_request {
    enum cn_txn_req_kind kind;
    void *token;                  /* the caller's, echoed in the answer */
    int32_t index;                /* ADD_BATCHED: transaction index */
    int16_t api_version;          /* decides the TV2 EndTxn rules and
                                     PRODUCER_FENCED vs INVALID_PRODUCER_EPOCH */
    const char *transactional_id; /* NUL-terminated; NULL only for
                                     PRODUCE_ADD (found by producer id) */
    int64_t producer_id;          /* -1 when the request has none */
    int16_t producer_epoch;
    int32_t timeout_ms;          /* INIT_PID */
    bool commit;                 /* END */
    bool produce_v12;            /* PRODUCE_ADD: Produce v12 or
                                     TxnOffsetCommit v5 (always adds) */
    bool has_unknown;            /* ADD_PARTS/ADD_BATCHED: the request also
                                     named partitions that do not exist: the
                                     producer is checked, then the answer is
                                     OPERATION_NOT_ATTEMPTED */
    const struct cn_txn_tp *tps; /* the partitions to add (known ones) */
    size_t ntps;
};

enum cn_txn_event_kind {
    CN_TXE_REQUEST,        /* u.request */
    CN_TXE_WRITTEN,        /* an APPEND is durable (err NONE) or failed */
    CN_TXE_MARKER_RESULT,  /* one partition's marker result */
    CN_TXE_TICK,           /* the time asked for in timer_mono_ms came */
    CN_TXE_PIDS_READY,     /* the producer-id seam has ids again */
    CN_TXE_LEADER,         /* u.leader.part is replayed: coordinate it and
                              finish its decided transactions */
    CN_TXE_UNLEADER,       /* u.leader.part is lost: forget its ids,
                              answer its parked requests NOT_COORDINATOR */
    CN_TXE_OPERATOR_ABORT, /* WriteTxnMarkers abort or the hanging check
                              (u.op); result in the actions */
    CN_TXE_STOP,           /* shutting down: answer parked requests, write
                              nothing more */
};

struct cn_txn_event {
    enum cn_txn_event_kind kind;
    struct cn_txn_now now;
    union {
        struct cn_txn_request request;
        struct {
            const char *id; /* the APPEND's */
            uint64_t seq;   /* the APPEND's */
            int16_t err;    /* KAFKA_NONE or the error to report */
        } written;
        struct {
            const char *id; /* the SEND_MARKERS' */
            uint64_t seq;   /* the SEND_MARKERS' */
            size_t i;       /* index into its tps */
            int16_t err;
        } marker;
        struct {
            int32_t part;
            int32_t coordinator_epoch;
        } leader; /* also CN_TXE_UNLEADER */
        struct {
            int64_t producer_id;
            const char *topic;
            int32_t partition;
        } op;
    } u;
};

/* ---- actions --------------------------------------------------------- */

enum cn_txn_action_kind {
    CN_TXA_APPEND,       /* one record to __transaction_state-part, synced;
                            a CN_TXE_WRITTEN must follow */
    CN_TXA_SEND_MARKERS, /* one marker per partition, to its leader; one
                            CN_TXE_MARKER_RESULT per partition must follow */
    CN_TXA_ANSWER,       /* answer (or resume) a request */
    CN_TXA_WANT_PIDS,    /* refill the producer-id reservation */
};

/* Which write of a transaction an APPEND is: fail points key on it. */
enum cn_txn_write_role {
    CN_TXN_WRITE_CHANGE,   /* InitProducerId, adds, expiry */
    CN_TXN_WRITE_DECISION, /* PrepareCommit/PrepareAbort */
    CN_TXN_WRITE_COMPLETE, /* CompleteCommit/CompleteAbort */
};

struct cn_txn_answer {
    enum cn_txn_req_kind kind; /* the request's */
    void *token;               /* the request's */
    int32_t index;             /* the request's */
    int16_t api_version;       /* the request's */
    int16_t error;             /* KAFKA_*; PRODUCE_ADD: NONE = added (or
                                  nothing to add), else go on unadded and
                                  let verification answer */
    int64_t producer_id;       /* INIT_PID, END v5 (after a rotation, the
                                  new id) */
    int16_t producer_epoch;
};

struct cn_txn_action {
    enum cn_txn_action_kind kind;
    union {
        struct {
            int32_t part;
            const char *id;
            uint64_t seq;
            enum cn_txn_write_role role;
            struct cn_bytes key;
            struct cn_bytes value; /* null (len -1): a tombstone */
        } append;
        struct {
            const char *id;
            uint64_t seq;
            int64_t producer_id;
            int16_t producer_epoch;
            bool commit;
            bool first_after_decision; /* the first send after the decision
                                          became durable (not a retry) */
            int32_t coordinator_epoch;
            const struct cn_txn_tp *tps;
            size_t n;
        } markers;
        struct cn_txn_answer answer;
    } u;
};

/* Filled by cn_txn_step, carried out in order. */
struct cn_txn_actions {
    struct cn_txn_action *v;
    size_t n, cap;
    struct cn_arena arena; /* what the actions point to */
    int64_t timer_mono_ms; /* when the machine next wants a CN_TXE_TICK
                               (always set after a step); INT64_MAX: never */
    bool taken;            /* PRODUCE_ADD: taken, an ANSWER follows, now or
                               later; false: go on now, no ANSWER comes */
    int16_t result;        /* OPERATOR_ABORT: NONE, INVALID_TXN_STATE or
                               CONCURRENT_TRANSACTIONS */
    bool op_taken;         /* OPERATOR_ABORT: the coordinator aborts the
                               whole transaction itself; false: the caller
                               writes the marker to the partition */
    size_t resumed;        /* LEADER: decided transactions being finished */
    bool fail_push;        /* tests: recording an action fails as when out
                               of memory (the machine takes no fail points) */
};

void cn_txn_actions_init(struct cn_txn_actions *a);
/* Empties a for the next step (keeps its allocations). */
void cn_txn_actions_reset(struct cn_txn_actions *a);
void cn_txn_actions_fini(struct cn_txn_actions *a);

/* 0, CN_EINVAL (nparts <= 0) or CN_ENOMEM. */
int cn_txn_new(const struct cn_txn_config *cfg, const struct cn_txn_pids *pids,
               struct cn_txn_coord **out);
void cn_txn_free(struct cn_txn_coord *c);
/* Hands every PRODUCE_ADD answer still owed (a step could not record it:
 * out of memory) to pay, in order, and forgets them: at stop, when no
 * step will pay them, so that no produce waits forever. */
void cn_txn_pay_owed(struct cn_txn_coord *c,
                     void (*pay)(void *ctx, const struct cn_txn_answer *a),
                     void *ctx);
/* Takes a changed configuration (dynamic configs); nparts is kept. */
void cn_txn_set_config(struct cn_txn_coord *c,
                       const struct cn_txn_config *cfg);

/*
 * Replays one record of part's log, in log order, before part's
 * CN_TXE_LEADER; the last record of an id wins, a tombstone removes it.
 * Records that do not decode are skipped (logged).  0 or CN_ENOMEM.
 */
int cn_txn_load_record(struct cn_txn_coord *c, int32_t part,
                       struct cn_bytes key, struct cn_bytes value);

/* The only way state changes.  Appends to acts (reset it between steps).
 * 0, or CN_ENOMEM: an allocation failed part way; the machine's state
 * matches the actions that are in acts, so carry them out (and arm the
 * timer) as after 0; what could not be recorded is lost (an id may stay
 * busy until the next start). */
int cn_txn_step(struct cn_txn_coord *c, const struct cn_txn_event *ev,
                struct cn_txn_actions *acts);

/* ---- queries: read-only, any time outside cn_txn_step ---------------- */

/* The durable metadata of an id, or NULL (unknown or its part not led). */
const struct cn_txn_meta *cn_txn_find(const struct cn_txn_coord *c,
                                      const char *id);
/* ... of the id whose current producer id is pid, or NULL. */
const struct cn_txn_meta *cn_txn_find_pid(const struct cn_txn_coord *c,
                                          int64_t pid);
/* True while a change or markers of id are in flight. */
bool cn_txn_busy(const struct cn_txn_coord *c, const char *id);

/*
 * What a partition leader asks before a transactional batch opens a
 * transaction on it (KIP-890 part 1): is this id's producer, at this
 * epoch, in an Ongoing transaction that includes the partition?  NONE if
 * so (and always while verification is disabled); as Kafka answers, by
 * id, producer id, epoch, then state: INVALID_PRODUCER_ID_MAPPING (unknown
 * id, other producer id), INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE.  A
 * NULL id finds the transaction by producer id.
 */
int16_t cn_txn_verify(const struct cn_txn_coord *c, const char *id,
                      int64_t producer_id, int16_t producer_epoch,
                      const char *topic, int32_t partition);
/* AddPartitionsToTxn v4 VerifyOnly, for one transaction: the producer
 * check without the partitions (CONCURRENT_TRANSACTIONS while busy). */
int16_t cn_txn_check_batched(const struct cn_txn_coord *c, const char *id,
                             int64_t producer_id, int16_t producer_epoch);

/* False when a PRODUCE_ADD rq (its partitions as given) would not be
 * taken: TV2 off, no TV2 transaction of that producer at that epoch
 * here, or every partition already in its Ongoing transaction.  The
 * produce then goes on without a step (TV1 clients always). */
bool cn_txn_produce_adds(const struct cn_txn_coord *c,
                         const struct cn_txn_request *rq);

/* Calls fn for every live id of part (-1: every part); stops at fn's
 * non-zero return, which it returns. */
int cn_txn_foreach(const struct cn_txn_coord *c, int32_t part,
                   int (*fn)(void *arg, const struct cn_txn_meta *m),
                   void *arg);
/* Live ids of part (-1: all). */
size_t cn_txn_count(const struct cn_txn_coord *c, int32_t part);

/* What the metrics endpoint shows about the coordinator. */
struct cn_txn_stats {
    uint64_t ids_by_state[CN_TXN_NSTATES]; /* gauge, per state */
    uint64_t commits;            /* transactions completed as committed */
    uint64_t aborts;             /* ... as aborted (any reason) */
    uint64_t timed_out_aborts;   /* aborted by the coordinator's timeout */
    uint64_t fenced;             /* epoch fences (InitProducerId while a
                                    transaction was open) */
    uint64_t marker_retry_queue; /* gauge: transactions whose markers wait
                                    for a retry (LogAppendRetryQueueSize) */
    uint64_t parked_requests;    /* gauge: requests waiting for a busy id */
    struct cn_hist commit_ms;    /* EndTxn received -> CompleteCommit */
    struct cn_hist abort_ms;     /* EndTxn/abort start -> CompleteAbort */
};
void cn_txn_get_stats(const struct cn_txn_coord *c, struct cn_txn_stats *out);

#endif
