/*
 * txn_int.h - what the transaction coordinator's files share: the table
 * and the durable-change path (txn_coord.c), the client APIs (h_txn.c),
 * the partition leaders' adds and checks (txn_verify.c), markers and the
 * coordinator's own aborts (txn_markers.c), and the read-only views
 * (h_txn_describe.c).  txn_coord.h stays the interface for everything
 * else; nothing outside src/broker includes this.
 *
 * Runs on: loop.
 */
#ifndef CN_BROKER_TXN_INT_H
#define CN_BROKER_TXN_INT_H

#include <uv.h>

#include "base/hist.h"
#include "broker_int.h"
#include "handlers.h"
#include "proto/gen/msgs.h"
#include "txn/txn_log.h"
#include "txn/txn_state.h"
#include "txn_coord.h"

struct cn_marker_channel;

struct txn_entry {
    struct cn_txn_meta meta;    /* as last made durable */
    bool busy;                  /* a change or markers in flight */
    bool writing;               /* a record appended, not yet durable */
    int32_t part;               /* its __transaction_state partition */
    struct txn_entry *next;     /* hash chain by id */
    struct txn_entry *pid_next; /* chain in the producer id index */
    int64_t indexed_pid;        /* producer id it is indexed under, or -1 */
    int64_t decide_us;          /* monotonic us the running commit/abort
                                   decision began, for the histograms */
    bool timeout_abort;         /* the abort in flight is the timeout's */
};

#define PID_BUCKETS 4096

struct cn_txnb {
    uv_timer_t expiry_timer;    /* unused transactional ids */
    struct txn_entry **table;   /* by transactional id */
    size_t buckets, count;
    struct txn_entry *by_pid[PID_BUCKETS]; /* by current producer id */
    int32_t nparts;             /* partitions of __transaction_state */
    size_t *part_ids;           /* ids per partition */
    size_t *part_writing;       /* ids with a record not yet durable */
    uv_timer_t timer;           /* timed-out transactions */
    bool timer_armed;
    struct txn_park *parked;    /* requests waiting for a busy entry */
    uv_timer_t park_timer;      /* gives up on those after PARK_MAX_MS */
    bool park_timer_on;
    bool no_park;               /* re-running a request that waited
                                   long enough: answer, do not park */
    bool no_add;                /* re-running a produce whose implicit
                                   add failed: verify only */
    uint64_t commits, aborts;   /* completed transactions */
    uint64_t timed_out_aborts;  /* aborts the timeout check started */
    uint64_t fenced;            /* open transactions fenced by an
                                   InitProducerId */
    uint64_t marker_retries;    /* marker_retry timers pending */
    /* Where markers go: the local partitions today (markers.h). */
    const struct cn_marker_channel *markers;
    struct cn_hist commit_ms;   /* decision -> CompleteCommit durable */
    struct cn_hist abort_ms;    /* decision -> CompleteAbort durable */
};

/*
 * A request that found its id busy (markers of the previous transaction
 * still being written).  Kafka answers CONCURRENT_TRANSACTIONS and the
 * client retries after a backoff (librdkafka: 100 ms or more), which
 * caps a producer committing often at a few transactions a second.
 * Holding the request until the entry is idle answers it as soon as that
 * is possible instead; after PARK_MAX_MS the client gets the error after
 * all.
 */
struct txn_park {
    struct cn_broker *b;
    struct txn_entry *e;        /* NULL once the entry was removed */
    struct cn_req *req;
    struct cn_req_header h;
    struct cn_rd body;          /* undecoded request body */
    cn_handler_fn fn;           /* the handler to run again */
    int64_t deadline_ms;        /* monotonic */
    struct txn_park *next;
};

/* A change being made durable, and what to do once it is. */
struct txn_write {
    struct cn_sync_waiter waiter; /* first: the sync module's handle */
    struct cn_broker *b;
    struct txn_entry *e;
    struct cn_txn_meta next;      /* the metadata to apply */
    void (*then)(struct txn_write *w, int16_t err);
    struct cn_req *req;           /* to answer, or NULL */
    struct cn_req_header h;
    bool commit;                  /* for marker phases */
    cn_handler_fn rerun;          /* request to run again once durable */
    struct cn_rd body;            /* its undecoded body */
    int32_t index;                /* transaction of a batched request */
};

/* ---- txn_coord.c: table, log topic, durable changes, parking -------- */

/* Transaction version 2 (KIP-890 part 2) is finalized. */
bool txn_tv2_on(const struct cn_broker *b);
/* The entry for a transactional id, or NULL. */
struct txn_entry *txn_entry_find(struct cn_txnb *c, const char *id);
/* Adds e (its meta.transactional_id set) to the table.  0 or CN_ENOMEM. */
int txn_entry_insert(struct cn_txnb *c, struct txn_entry *e);
/* The entry whose current producer id is pid, or NULL. */
struct txn_entry *txn_entry_by_pid(struct cn_txnb *c, int64_t pid);
/* __transaction_state, created first when create is set; NULL if absent
 * or it cannot be created. */
struct cn_topic *txn_log_topic(struct cn_broker *b, bool create);
/* Holds req until e is idle, then runs fn on it again.  False when it
 * cannot (the caller answers CONCURRENT_TRANSACTIONS). */
bool txn_park(struct cn_broker *b, struct txn_entry *e, struct cn_req *req,
              const struct cn_req_header *h, const struct cn_rd *body,
              cn_handler_fn fn);
/*
 * Appends next as the id's newest record, syncs it, applies it to e and
 * then calls then(w, err) (or calls it with an error at once).  Takes
 * ownership of next; e is busy until then() clears it.  req and h may be
 * NULL (no answer to give).  x, if not NULL, carries rerun, body and
 * index into the write.
 */
void txn_write_change_x(struct cn_broker *b, struct txn_entry *e,
                        struct cn_txn_meta *next,
                        void (*then)(struct txn_write *w, int16_t err),
                        struct cn_req *req, const struct cn_req_header *h,
                        bool commit, const struct txn_write *x);
void txn_write_change(struct cn_broker *b, struct txn_entry *e,
                      struct cn_txn_meta *next,
                      void (*then)(struct txn_write *w, int16_t err),
                      struct cn_req *req, const struct cn_req_header *h,
                      bool commit);

/* ---- txn_markers.c: finishing decided transactions, coordinator aborts */

/* Writes the commit or abort marker to every partition of e's
 * transaction, then records the completion; e stays busy until then. */
void txn_write_markers(struct cn_broker *b, struct txn_entry *e, bool commit);
/* The timeout check's timer callback (data: the broker). */
void txn_on_timeout_check(uv_timer_t *t);

/* ---- h_txn.c: client APIs -------------------------------------------- */

/* Bumps m's epoch, or moves it to a new producer id at epoch 0 when the
 * epoch ran out.  0 or the producer id allocator's error. */
int txn_next_epoch(struct cn_broker *b, struct cn_txn_meta *m);
/* Encodes and queues an AddPartitionsToTxn answer (any version). */
void txn_answer_add(struct cn_req *req, const struct cn_req_header *h,
                    struct cn_add_partitions_to_txn_response *rs);

/* ---- txn_verify.c: partition leaders --------------------------------- */

/* AddPartitionsToTxn v4-5 (batched, from a partition leader), decoded. */
void txn_add_batched(struct cn_broker *b, struct cn_req *req,
                     const struct cn_req_header *h,
                     const struct cn_add_partitions_to_txn_request *rq);

#endif
