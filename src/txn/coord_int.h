/*
 * coord_int.h - what the transaction coordinator's files share: the
 * table, the one write path and parking (coord.c), the client APIs
 * (coord_client.c), the partition leaders' adds and checks
 * (coord_leader.c), and finishing decided transactions plus the
 * coordinator's own aborts and expiry (coord_finish.c).  coord.h stays
 * the interface; nothing outside src/txn includes this.
 *
 * Runs on: the caller of cn_txn_step (one thread at a time).
 */
#ifndef CN_TXN_COORD_INT_H
#define CN_TXN_COORD_INT_H

#include "txn/coord.h"

#define TXN_PID_BUCKETS 4096

/* What to do once an entry's record is durable (or failed). */
enum txn_then {
    THEN_ANSWER,      /* idle again; answer the waiter (InitProducerId, the
                         adds, AddOffsetsToTxn, a TV2 EndTxn retry's
                         rotation) with the durable id and epoch */
    THEN_FENCE,       /* InitProducerId over Ongoing: abort markers */
    THEN_END,         /* answer EndTxn, then the markers */
    THEN_COORD_ABORT, /* timeout or operator abort: markers */
    THEN_COMPLETE,    /* Complete* is durable: idle again */
    THEN_EXPIRE,      /* Dead is durable: forget the id */
};

struct txn_entry {
    struct cn_txn_meta meta;    /* as last made durable */
    struct cn_txn_meta pending; /* being written (valid while writing) */
    enum txn_then then;
    bool has_waiter;              /* waiter is to be answered */
    struct cn_txn_answer waiter;  /* kind, token, index, api_version */
    bool busy;                    /* a change or markers in flight */
    bool writing;                 /* an APPEND not yet WRITTEN */
    bool commit;                  /* the decision in flight */
    bool timeout_abort;           /* the abort in flight is the timeout's */
    uint64_t write_seq;           /* the APPEND in flight */
    uint64_t marker_seq;          /* the SEND_MARKERS in flight, 0 none */
    size_t markers_pending;       /* results not yet in */
    bool markers_failed;          /* some partition's marker failed */
    int64_t marker_retry_mono_ms; /* markers go again then; 0: none */
    bool complete_retry;          /* ...or, with every marker in, only the
                                     Complete record is written again */
    int32_t part;                 /* its __transaction_state partition */
    int64_t decide_us;            /* mono us the decision began, or 0 */
    struct txn_entry *next;       /* hash chain by id */
    struct txn_entry *pid_next;   /* chain in the producer id index */
    int64_t indexed_pid;          /* producer id indexed under, or -1 */
};

enum txn_park_reason { PARK_BUSY, PARK_PIDS };

/* A request waiting for its busy id (or for producer ids), deep-copied. */
struct txn_parked {
    struct cn_txn_request rq; /* transactional_id and tps owned */
    enum txn_park_reason reason;
    int64_t deadline_mono_ms; /* BUSY: answered late then */
    struct txn_entry *e;      /* BUSY: NULL once the entry went */
    struct txn_parked *next;
};

enum txn_part_state { PART_NONE, PART_LOADING, PART_LED };

struct cn_txn_coord {
    struct cn_txn_config cfg;
    struct cn_txn_pids pids;
    struct txn_entry **table; /* by transactional id */
    size_t buckets, count;
    struct txn_entry *by_pid[TXN_PID_BUCKETS]; /* by current producer id */
    size_t *part_ids;                          /* ids per partition */
    uint8_t *part_state;        /* enum txn_part_state per partition */
    int32_t *coordinator_epoch; /* per partition, from CN_TXE_LEADER */
    uint64_t next_seq;
    struct txn_parked *parked; /* arrival order */
    bool pids_wanted;          /* WANT_PIDS emitted, no PIDS_READY yet */
    bool checks_on;            /* the periodic checks are scheduled */
    int64_t next_abort_check_mono_ms, next_expiry_check_mono_ms;
    bool stopping;
    size_t retries; /* entries with marker_retry_mono_ms */
    /* No marker retry is due before this (exact after each retry round,
     * maybe early after a retrying entry went), so a step looks at the
     * table only when one may be due; INT64_MAX: none */
    int64_t retry_due_mono_ms;
    /* Answers to taken PRODUCE_ADDs that could not be recorded (out of
     * memory; the produce waits for its answer): they go out first at
     * the next step, which the timer asks for.  Room for each is reserved
     * when the request is taken, so owing one cannot fail. */
    struct cn_txn_answer *owed;
    size_t nowed, owed_cap;
    int64_t owed_retry_ms; /* the step asked for while they stay owed */
    size_t produce_taken;  /* PRODUCE_ADDs taken, not answered yet */
    uint64_t commits, aborts, timed_out_aborts, fenced;
    struct cn_hist commit_ms, abort_ms;
};

/* One step's context. */
struct txn_ctx {
    struct cn_txn_coord *c;
    const struct cn_txn_now *now;
    struct cn_txn_actions *acts;
    int rc; /* first CN_ENOMEM */
};

/* ---- coord.c -------------------------------------------------------- */

bool cn_tc_tv2_on(const struct cn_txn_coord *c);
struct txn_entry *cn_tc_entry_find(const struct cn_txn_coord *c,
                                   const char *id);
struct txn_entry *cn_tc_entry_by_pid(const struct cn_txn_coord *c,
                                     int64_t pid);
/* A new Empty entry for id (not durable yet), or NULL (no memory). */
struct txn_entry *cn_tc_entry_new(struct cn_txn_coord *c, const char *id);
void cn_tc_entry_remove(struct cn_txn_coord *c, struct txn_entry *e);
/* The partition of an id is coordinated here. */
bool cn_tc_part_led(const struct cn_txn_coord *c, int32_t part);
/* In a Prepare state or busy: requests wait. */
bool cn_tc_entry_waits(const struct txn_entry *e);

struct cn_txn_action *cn_tc_push(struct txn_ctx *x,
                                 enum cn_txn_action_kind kind);
/* Answers a (copy of a) request: kind, token, index, version. */
void cn_tc_answer(struct txn_ctx *x, const struct cn_txn_request *rq,
                  int16_t err, int64_t pid, int16_t epoch);
void cn_tc_answer_to(struct txn_ctx *x, const struct cn_txn_answer *a,
                     int16_t err, int64_t pid, int16_t epoch);
/* A new PRODUCE_ADD is taken (its answer comes now or later): true, or
 * false when its answer could not be promised (out of memory; the
 * produce goes on unadded). */
bool cn_tc_take_produce(struct txn_ctx *x);
/* Parks rq on e (BUSY) or on the producer-id seam (e NULL: PIDS).  False
 * when it cannot (stopping; the caller answers). */
bool cn_tc_park(struct txn_ctx *x, const struct cn_txn_request *rq,
                struct txn_entry *e, enum txn_park_reason reason);
/*
 * Appends next (taken over) as e's newest record; once WRITTEN the entry
 * takes it and `then` runs.  waiter (may be NULL) is answered by then.
 * Stopping, or a record that cannot be encoded: then runs at once with
 * COORDINATOR_NOT_AVAILABLE.
 */
void cn_tc_write(struct txn_ctx *x, struct txn_entry *e,
                 struct cn_txn_meta *next, enum txn_then then,
                 const struct cn_txn_request *waiter,
                 enum cn_txn_write_role role);
/* The producer-id seam: 0, -EAGAIN (WANT_PIDS emitted once) or an error. */
int cn_tc_take_pid(struct txn_ctx *x, int64_t *pid);

/* ---- coord_client.c --------------------------------------------------- */

void cn_tc_init_pid(struct txn_ctx *x, const struct cn_txn_request *rq,
                    bool late);
void cn_tc_add_parts(struct txn_ctx *x, const struct cn_txn_request *rq,
                     bool late);
void cn_tc_add_offsets(struct txn_ctx *x, const struct cn_txn_request *rq,
                       bool late);
void cn_tc_end(struct txn_ctx *x, const struct cn_txn_request *rq, bool late);
/* Bumps m's epoch, or moves it to a new producer id at epoch 0 when the
 * epoch ran out.  0, -EAGAIN or the seam's error. */
int cn_tc_next_epoch(struct txn_ctx *x, struct cn_txn_meta *m);
/* Kafka's error for a fenced epoch in this request's version. */
int16_t cn_tc_fenced_error(enum cn_txn_req_kind kind, int16_t version);

/* ---- coord_leader.c --------------------------------------------------- */

/* Builds in *next e's metadata with tps added, opening a transaction if
 * none is.  *changed says whether anything differs.  0 or CN_ENOMEM. */
int cn_tc_build_add(const struct txn_entry *e, const struct cn_txn_tp *tps,
                    size_t n, int64_t wall_ms, struct cn_txn_meta *next,
                    bool *changed);
/* The add of rq's partitions to e's transaction, answered once durable
 * (then), or at once when nothing changes or a partition is unknown;
 * client_tv >= 0 is stored. */
void cn_tc_add_write(struct txn_ctx *x, struct txn_entry *e,
                     const struct cn_txn_request *rq, int client_tv);
void cn_tc_add_batched(struct txn_ctx *x, const struct cn_txn_request *rq);
/* resumed: the request was parked (taken): every outcome answers. */
void cn_tc_produce_add(struct txn_ctx *x, const struct cn_txn_request *rq,
                       bool resumed, bool late);

/* ---- coord_finish.c --------------------------------------------------- */

/* Sends e's markers (first: right after the decision became durable). */
void cn_tc_send_markers(struct txn_ctx *x, struct txn_entry *e, bool commit,
                        bool first);
void cn_tc_marker_result(struct txn_ctx *x, const char *id, uint64_t seq,
                         size_t i, int16_t err);
/* The retries now due. */
void cn_tc_retry_markers(struct txn_ctx *x);
/* The epoch for a coordinator-made abort: one bump, the same producer id
 * even at the last usable epoch.  0 or the seam's error. */
int cn_tc_abort_epoch(struct txn_ctx *x, struct cn_txn_meta *m);
void cn_tc_check_timeouts(struct txn_ctx *x);
void cn_tc_check_expiry(struct txn_ctx *x);
void cn_tc_operator_abort(struct txn_ctx *x, int64_t pid, const char *topic,
                          int32_t partition);
/* The then of a decision-finishing write: COMPLETE, FENCE, COORD_ABORT,
 * EXPIRE. */
void cn_tc_finish_written(struct txn_ctx *x, struct txn_entry *e,
                          enum txn_then then, int16_t err);

#endif
