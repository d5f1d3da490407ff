/*
 * verify.h - the history checker behind `cairnctl verify` (issue #7).
 *
 * Pure: no network.  The caller feeds it the workers' history lines and the
 * final reads, then asks for a report.  Every value a worker produces is
 * unique and names its transaction:
 *
 *   <producer>.<incarnation>.<txn>.<index>[:<payload>]
 *
 * e.g. "w1.0.17.3", or "r0.2.5.1:w1.0.17.3" for the read-process-write
 * output of input value "w1.0.17.3".  The transaction key is the text up
 * to the third dot ("w1.0.17"); the producer is the text up to the first.
 *
 * History lines (one event each; a torn or unknown line is ignored):
 *
 *   W <txn> <topic> <partition> <offset> <value>   produce acknowledged
 *   S <txn>                                        commit requested
 *   C <txn>                                        commit returned success
 *   A <txn>                                        abort returned success
 *
 * A transaction with C is committed, with A aborted, with S alone unknown
 * (either outcome is allowed, but all or nothing), and otherwise was never
 * committed, so it must end aborted.
 *
 * An idempotent (non-transactional) writer, as in cluster mode, names
 * each record its own transaction ("w1.0.17.0"): S before it sends it,
 * W and C once acknowledged.  So an acknowledged record must be read, and
 * one whose send failed may or may not be.
 *
 * Every read during the run (the tailing reader) and every acknowledged
 * offset must match the final log: the final read_uncommitted pass must
 * hold the same value at that offset, else the record vanished (a leader
 * showed or acknowledged what a failover later truncated).
 */
#ifndef CN_CLI_VERIFY_H
#define CN_CLI_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

enum cn_vc_kind {
    CN_VC_LOST,      /* committed write missing from read_committed */
    CN_VC_ABORTED,   /* aborted or uncommitted write read_committed */
    CN_VC_DUPLICATE, /* a value read twice in one isolation level */
    CN_VC_ORDER,     /* one producer's records out of order in a partition */
    CN_VC_TORN,      /* part of a transaction visible read_committed */
    CN_VC_RPW,       /* input not processed exactly once, or offsets off */
    CN_VC_STALL,     /* read_committed end or acks stuck past the bound */
    CN_VC_VANISHED,  /* a record read or acked at an offset later lost */
    CN_VC_NKINDS,
};

#define CN_VC_EXAMPLES 5  /* examples kept per kind */
#define CN_VC_EXAMPLE_LEN 200

struct cn_vc_report {
    int64_t count[CN_VC_NKINDS];                 /* anomalies per kind */
    int nexamples[CN_VC_NKINDS];                 /* examples kept */
    char example[CN_VC_NKINDS][CN_VC_EXAMPLES][CN_VC_EXAMPLE_LEN];
    int64_t writes_acked;  /* W lines */
    int64_t txn_committed; /* transactions with C */
    int64_t txn_aborted;   /* with A */
    int64_t txn_unknown;   /* with S only */
    int64_t txn_open;      /* with none of them (killed or fenced) */
    int64_t reads_rc;      /* records read read_committed at the end */
    int64_t reads_ru;      /* records read read_uncommitted at the end */
    int64_t reads_tail;    /* records read by the tailing reader */
    int64_t anomalies;     /* sum of count[] */
};

struct cn_vcheck;

/* A new empty checker, or NULL when out of memory; free with
 * cn_vcheck_free (NULL is fine). */
struct cn_vcheck *cn_vcheck_new(void);
void cn_vcheck_free(struct cn_vcheck *vc);

/* Names the read-process-write topics, so outputs are matched to inputs.
 * The strings must outlive the checker. */
void cn_vcheck_set_rpw(struct cn_vcheck *vc, const char *in_topic,
                       const char *out_topic);

/* One history line, ending in its newline.  Returns 0, CN_EINVAL for a
 * line it does not understand (the caller ignores it: a worker killed
 * mid-write leaves a torn last line), or CN_ENOMEM. */
int cn_vcheck_history(struct cn_vcheck *vc, const char *line);

/* Who read a record: the final read_uncommitted and read_committed
 * passes, or the read_committed reader tailing the topics during the run
 * (checked only for aborted_visible and duplicate, since it may stop
 * part-way through a transaction). */
enum cn_vc_source {
    CN_VC_FINAL_RU,
    CN_VC_FINAL_RC,
    CN_VC_TAIL_RC,
    CN_VC_TAIL_RU, /* the tailing reader in cluster mode: no transactions,
                      checked for duplicates and vanished records */
    CN_VC_NSOURCES,
};

/* One record read, in offset order per partition and source. */
int cn_vcheck_read(struct cn_vcheck *vc, enum cn_vc_source src,
                   const char *topic, int32_t partition, int64_t offset,
                   const char *value);

/* The group's committed offset for an input partition after the final
 * drain; it must lie in [lo, hi]: lo is one past the last record read
 * read_committed (a commit marker may follow it), hi the end offset. */
void cn_vcheck_group_offset(struct cn_vcheck *vc, const char *topic,
                            int32_t partition, int64_t committed, int64_t lo,
                            int64_t hi);

/* How long read_committed end offsets took to reach the high watermarks
 * after the faults ended, and the bound (ms). */
void cn_vcheck_stall(struct cn_vcheck *vc, int64_t stall_ms,
                     int64_t bound_ms);

/* The longest time one partition went without an acknowledged write while
 * the writers ran (cluster mode: a leader failover must end within the
 * bound), and the bound (ms). */
void cn_vcheck_ack_stall(struct cn_vcheck *vc, const char *topic,
                         int32_t partition, int64_t stall_ms,
                         int64_t bound_ms);

/* Runs every check and fills *rep.  Call once. */
int cn_vcheck_run(struct cn_vcheck *vc, struct cn_vc_report *rep);

/* "lost_committed_write", "aborted_visible", ... */
const char *cn_vc_kind_name(enum cn_vc_kind k);

#endif
