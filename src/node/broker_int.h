/*
 * broker_int.h - the node: struct cn_broker (the state one broker process
 * owns) and the node's services the handlers and the process use (topics
 * and partitions, group commit, the log directory's health, request
 * helpers, producer-id reservations).  Included by src/node, src/handlers
 * and src/broker only.
 *
 * Everything here is owned by the loop thread.
 */
#ifndef CN_NODE_BROKER_INT_H
#define CN_NODE_BROKER_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "acl/acl.h"
#include "quota/quota.h"
#include "base/arena.h"
#include "base/bytes.h"
#include "base/config.h"
#include "base/err.h"
#include "base/failpoint.h"
#include "base/wr.h"
#include "log/log.h"
#include "net/net.h"
#include "partition/partition.h"
#include "producer/pid.h"
#include "producer/pstate.h"
#include "proto/header.h"

struct cn_topic;
struct cn_broker;
struct cn_txn_exec;
struct cn_markers_remote;
struct cn_txn_remote;
struct cn_group_coord;
struct cn_sync_round;
struct cn_txn_answer;
struct cn_join_result;
struct cn_sync_result;
struct cn_cleaner;
struct cn_quorum;
struct cn_lifecycle;
struct cn_ctlcall;
struct cn_publish;

struct cn_topic {
    char *name;                       /* owned, NUL-terminated */
    struct cn_uuid id;                /* topic id (KIP-516) */
    int32_t partition_count;          /* entries in partitions */
    struct cn_partition **partitions; /* owned */
    struct cn_topic_config config;    /* retention, segment size, ... */
    bool internal;                    /* __consumer_offsets and friends */
    struct cn_topic *hash_next;       /* chain in the name table */
};

/* Produce responses that wait for their data to be synced. */
struct cn_sync_waiter {
    struct cn_req *req;
    uint64_t round; /* done when this sync round has completed */
    void (*finish)(struct cn_broker *b, struct cn_sync_waiter *w);
    struct cn_sync_waiter *next;
    int err; /* a coordinator's write (cn_gc_write): 0 or how it failed */
};

/* A request that creates a topic whose name a deleted topic's logs still
 * hold: woken (removed from the list first) once they are deleted. */
struct cn_reap_waiter {
    void (*wake)(struct cn_broker *b, struct cn_reap_waiter *w);
    struct cn_reap_waiter *prev, *next;
};

/* Fetch requests parked until data arrives or max wait passes. */
struct cn_fetch_wait {
    struct cn_req *req;
    uv_timer_t timer;
    struct cn_broker *broker;
    struct cn_fetch_wait *prev, *next;
};

/* The names a request is measured under for request_percentage, copied
 * (a handler may free the request); see quotas.h. */
struct cn_quota_ids {
    char user[CN_QUOTA_NAME_MAX];
    char client[CN_QUOTA_NAME_MAX];
};

struct cn_broker {
    uv_loop_t *loop;
    struct cn_config *cfg; /* owned */
    struct cn_server *server;
    char cluster_id[32]; /* persisted in meta.properties */
    char data_dir[4096]; /* first of log.dirs */
    char adv_host[256];  /* what Metadata tells clients */
    int adv_port;        /* (first listener; see cn_broker_
                                       advertised for a request's own) */
    /* One server per listener (listeners.c); server is servers[0]. */
    struct cn_server *servers[CN_LISTENERS_MAX];
    struct ssl_ctx_st *tls_ctx[CN_LISTENERS_MAX]; /* SSL listeners */
    char adv_hosts[CN_LISTENERS_MAX][CN_CONFIG_HOST_MAX];
    int adv_ports[CN_LISTENERS_MAX];
    int nservers;
    int32_t node_id;
    /* Cluster mode (process.roles set): this node's part in the metadata
     * quorum (quorum.h) and its registration with the controller
     * (lifecycle.c).  NULL on a single node. */
    struct cn_quorum *quorum;
    struct cn_lifecycle *lifecycle;
    struct cn_ctlcall *ctlcall; /* calls to the controller (ctlcall.h) */
    struct cn_publish *publish; /* the image made local (publish.h) */
    struct cn_replica *replica; /* leaders' ISRs, followers' fetchers
                                   (replica.h) */
    /* Markers for partitions other brokers lead (markers.h) and KIP-890
     * checks asked of other brokers' coordinators (txn_remote.h); NULL
     * until first used. */
    struct cn_markers_remote *markers_remote;
    struct cn_txn_remote *txn_remote;
    bool stopping;
    bool log_dir_offline;        /* a write or sync failed: see below */
    bool log_dir_full;           /* the last append found no space */
    bool log_dir_full_logged;    /* "full" logged, "space again" not */
    int64_t log_dir_full_log_ms; /* monotonic ms of that "full" line */

    struct cn_topic **topic_table; /* hash by name */
    size_t topic_buckets;
    size_t topic_count;

    /* Group commit: partitions appended to since the last round started
     * are listed; one fdatasync round runs at a time on a worker. */
    struct cn_partition *sync_list;
    uint64_t sync_next_round;            /* number the next round will get */
    uint64_t sync_done_round;            /* last completed round */
    int sync_running;                    /* rounds in flight */
    struct cn_sync_round *sync_inflight; /* those, oldest first */
    struct cn_sync_waiter *sync_waiters; /* in arrival order */
    /* Its last next field when the list is not empty: one waiter per
     * acks=-1 produce request in flight, too many to walk per append. */
    struct cn_sync_waiter **sync_waiters_tail;
    /* Called when data became visible (a round moved high watermarks):
     * wakes parked fetches.  Set at start, so sync.c needs no handler. */
    void (*data_visible)(struct cn_broker *b);
    /* The other answers the node gives back to the layer above it, set at
     * start the same way (the node never names a handler): a transaction
     * coordinator's answer (handlers' cn_h_txn_answer), a group's JoinGroup
     * and SyncGroup results (cn_gc_join_done, cn_gc_sync_done). */
    void (*txn_answer)(struct cn_broker *b, const struct cn_txn_answer *a);
    void (*group_join_done)(void *waiter, const struct cn_join_result *r);
    void (*group_sync_done)(void *waiter, const struct cn_sync_result *r);
    /* What the node's parts and the handlers count and metrics.c shows. */
    struct {
        uint64_t hanging_found;           /* hanging transactions found */
        uint64_t hanging_now;             /* gauge: seen by the last check */
        uint64_t client_markers_refused;  /* WriteTxnMarkers refused */
        uint64_t operator_commit_markers; /* commit markers as repairs */
    } counters;

    struct cn_cleaner *cleaner; /* cleaner.h; NULL when off */
    int clean_running;          /* cleaner passes begun, not ended */
    int part_work_running;      /* partitions' disk work on workers (roll
                                 * snapshots), queued, not done */

    struct cn_fetch_wait *fetch_waits;
    /* Partitions of deleted topics whose logs a sync round may still be
     * using; freed when no round runs. */
    struct cn_partition *doomed;
    /* Requests waiting for doomed to be reaped (topics.c). */
    struct cn_reap_waiter *reap_waiters;

    struct cn_pidalloc pids;        /* producer ids, idempotent or not */
    struct pid_wait *pid_waits;     /* requests waiting for them (pids.c) */
    bool pid_failed_rerun;          /* answering those after a failed write */
    struct cn_txn_exec *txn;        /* transaction coordinator (txn_exec.h) */
    struct cn_group_coord *gc;      /* consumer groups and offsets */
    struct cn_metrics *metrics;     /* counters and the HTTP endpoint */
    struct cn_acl_authorizer authz; /* ACLs and the decision's settings */
    int64_t authz_log_ms;           /* window of the audit rate limit */
    int authz_log_n;                /* refusal lines in that window */
    long authz_log_hushed;          /* refusals not logged since */
    struct cn_quota *quota;         /* client quotas (h_quotas.c) */
    uint64_t quota_throttled[CN_QK_COUNT];   /* throttled answers, by key */
    uint64_t quota_throttle_ms[CN_QK_COUNT]; /* their throttle time */
    /* request_percentage: the request whose handler the dispatcher is
     * running, so its time can be recorded as its answer is finished
     * (h_quotas.c).  req is only compared, never followed. */
    struct {
        const struct cn_req *req; /* NULL: none measured */
        bool answered;            /* its time so far is recorded */
        int64_t since_us;         /* handler start, or the answer */
        struct cn_quota_ids id;
    } quota_cur;
    struct cn_sasl_srv *sasl; /* SASL settings, SCRAM credentials
                                       (h_sasl.c) */

    uv_timer_t retention_timer;
    uv_timer_t expiry_timer;
    uv_timer_t flush_timer;
    uv_signal_t sig_term, sig_int;
    int stop_stage;
};

/* Kafka's limits on topic names. */
#define CN_TOPIC_NAME_MAX 249

/* topics.c */
struct cn_topic *cn_topic_find(struct cn_broker *b, struct cn_bytes name);
struct cn_topic *cn_topic_find_id(struct cn_broker *b,
                                  const struct cn_uuid *id);
struct cn_partition *cn_partition_find(struct cn_broker *b,
                                       struct cn_bytes topic, int32_t part);
/* 0 or a Kafka error code (INVALID_TOPIC_EXCEPTION...) for the name. */
int16_t cn_topic_name_check(struct cn_bytes name);
/* Creates a topic with its partition logs and persists its metadata.
 * Returns a Kafka error code; *out set on success. */
int16_t cn_topic_create(struct cn_broker *b, struct cn_bytes name,
                        int32_t partitions, const struct cn_topic_config *tc,
                        struct cn_topic **out, char *msg, size_t msg_len);
/* The same with the topic id given (cluster mode: the image's), not
 * invented; id NULL invents one as cn_topic_create. */
int16_t cn_topic_create_id(struct cn_broker *b, struct cn_bytes name,
                           const struct cn_uuid *id, int32_t partitions,
                           const struct cn_topic_config *tc,
                           struct cn_topic **out, char *msg, size_t msg_len);
int16_t cn_topic_delete(struct cn_broker *b, struct cn_topic *t);
int16_t cn_topic_add_partitions(struct cn_broker *b, struct cn_topic *t,
                                int32_t new_count);
int cn_topic_persist(struct cn_broker *b, const struct cn_topic *t);
/* A coordinator's internal topic (__transaction_state,
 * __consumer_offsets): found, or with create made with Kafka's settings
 * for it.  NULL when missing (and not created) or creation failed. */
struct cn_topic *cn_topic_internal(struct cn_broker *b, const char *name,
                                   int32_t partitions, bool create);
/* The topic configs (name, value) every internal topic is made with. */
#define CN_INTERNAL_TOPIC_NCONFIGS 4
extern const char
    *const cn_internal_topic_configs[CN_INTERNAL_TOPIC_NCONFIGS][2];
/* Refuses settings Cairn accepts by name but cannot honour yet, with a
 * message naming the key.  Returns a Kafka error code. */
int16_t cn_topic_config_check(const struct cn_topic_config *tc, char *msg,
                              size_t msg_len);
/*
 * Changes one dynamic layer of the broker's config (dynconf.c): checks the
 * whole change, then (unless validate_only) persists both layers to
 * <data>/dynamic-configs and applies them, rebasing every topic without
 * its own override.  Returns a Kafka error code with msg.
 */
int16_t cn_broker_alter_dynamic(struct cn_broker *b,
                                enum cn_config_layer layer,
                                const struct cn_config_change *ch, size_t n,
                                bool replace_all, bool validate_only,
                                char *msg, size_t msg_len);
/* Warns about settings that parse but leave part of a single broker
 * unable to work (min.insync.replicas > 1, ...). */
void cn_broker_warn_config(const struct cn_config *cfg);
/* Reads <data>/dynamic-configs at start, if there is one. */
int cn_broker_dynconf_load(struct cn_broker *b, char *err, size_t err_len);
/* Applies the topic's configuration to its partition logs. */
void cn_topic_apply_config(struct cn_topic *t);
int cn_topics_load(struct cn_broker *b, char *err, size_t err_len);
void cn_topics_close_all(struct cn_broker *b);
/* Deletes the logs of deleted topics once no sync round, cleaner pass or
 * partition work (a roll snapshot's write) uses them. */
void cn_topics_reap(struct cn_broker *b);
/* Whether a deleted topic of this name still has logs waiting for the
 * reap: their directories are the ones a new topic of the name would use,
 * so it must not be created before (cn_topic_create refuses). */
bool cn_topic_doomed(const struct cn_broker *b, struct cn_bytes name);
void cn_reap_wait(struct cn_broker *b, struct cn_reap_waiter *w);
void cn_reap_wait_cancel(struct cn_broker *b, struct cn_reap_waiter *w);
/* cn_part_env's queue: runs a partition's disk work on a libuv worker,
 * counted in part_work_running until its done has run. */
int cn_part_work_queue(void *ctx, struct cn_part_work *w);
/* Calls fn for every topic (order unspecified). */
void cn_topics_foreach(struct cn_broker *b,
                       void (*fn)(struct cn_topic *t, void *arg), void *arg);

/*
 * Kafka's rule for a failed write or fsync: the log directory goes offline
 * and is not retried, because after a failed fsync the page cache no
 * longer says what is on disk.  Cairn has one directory, so every
 * partition then answers KAFKA_STORAGE_ERROR until the broker is
 * restarted (and recovers from what is really on disk).
 */
void cn_broker_log_dir_failed(struct cn_broker *b, const char *what, int err);

/*
 * A full disk is not a failed disk: an append that found no space was
 * undone by the log, which stays online.  Writes are refused with
 * KAFKA_STORAGE_ERROR while it lasts, reads go on, and the first append
 * that succeeds ends it, with no restart.  Called after every append with
 * whether it ran out of space; logs the changes, a pair at most every 10 s
 * (a nearly full disk takes small appends and refuses large ones).
 */
void cn_broker_disk_full(struct cn_broker *b, const struct cn_partition *p,
                         bool full);

static inline bool cn_partition_offline(const struct cn_broker *b,
                                        const struct cn_partition *p)
{
    return b->log_dir_offline || cn_log_is_offline(p->log);
}

/* Whether this broker leads p: always on a single node; in cluster mode
 * when the metadata image names it (publish.c keeps p->leader, -1 until
 * the first publish). */
static inline bool cn_partition_led(const struct cn_broker *b,
                                    const struct cn_partition *p)
{
    return !b->cfg->cluster_mode || p->leader == b->node_id;
}

/* What a request for a partition this broker has no log of gets:
 * NOT_LEADER_OR_FOLLOWER when the cluster's image has it (this broker
 * has not published it yet, or it is being deleted here: the client
 * asks Metadata again, as Kafka's brokers answer while their replica
 * manager catches up with the metadata cache), else
 * UNKNOWN_TOPIC_OR_PARTITION.  publish.c. */
int16_t cn_partition_missing(struct cn_broker *b, struct cn_bytes topic,
                             int32_t part);

/* sync.c: group commit and the high watermark. */
void cn_sync_appended(struct cn_broker *b, struct cn_partition *p);
void cn_sync_wait(struct cn_broker *b, struct cn_sync_waiter *w);
/* Syncs p in the next round (on a worker) whatever the group-commit
 * setting: Kafka's flush.messages / flush.ms with group commit off. */
void cn_sync_flush(struct cn_broker *b, struct cn_partition *p);
/* The partition layer's view of the broker: group commit, a full disk,
 * a failed log directory. */
struct cn_part_env cn_sync_part_env(struct cn_broker *b);
/* Appends a batch a coordinator wrote to an internal partition and
 * records it in the producer table; w->finish runs once it is durable,
 * whatever the flush policy (coordinators act only on durable state).
 * Returns 0, or an error with w not called (CN_EOFFLINE, CN_ENOMEM...). */
int cn_sync_append_internal(struct cn_broker *b, struct cn_partition *p,
                            uint8_t *batch, size_t len,
                            struct cn_sync_waiter *w);
/* Compaction by checkpoint for internal topics: a checkpoint in flight.
 * Embed it (first member, so done can cast back) and keep it alive until
 * done runs. */
struct cn_sync_checkpoint {
    struct cn_sync_waiter waiter; /* private to sync.c */
    struct cn_partition *p;       /* private */
    int64_t first;                /* private: the checkpoint's offset */
    /* The checkpoint is durable and the records before it are gone (err
     * 0); or it is not, and nothing was deleted (CN_EOFFLINE: the sync
     * failed and took the log directory offline), or the deletion failed.
     * Runs on the loop, in the round's completion; may free c. */
    void (*done)(struct cn_sync_checkpoint *c, int err);
};
/* Appends batch (the live state of the partition's keys) on the loop; it
 * joins a sync round on a worker whatever the flush policy, and once that
 * round made it durable the log start moves to its first offset so the
 * older records go (records appended after it stay).  Only call when
 * every record of p is durable and applied.  Returns 0, or an error with
 * c->done not called; done may run before this returns. */
int cn_sync_append_checkpoint(struct cn_broker *b, struct cn_partition *p,
                              uint8_t *batch, size_t len,
                              struct cn_sync_checkpoint *c);

/* topics.c: producer ids idle past producer.id.expiration.ms go. */
void cn_partition_expire_producers(struct cn_broker *b, struct cn_partition *p,
                                   int64_t now_ms);

/* request.c: what every layer that answers a request needs. */
/* The advertised address of the listener req came in on, as Kafka answers
 * Metadata, FindCoordinator and DescribeCluster. */
void cn_broker_advertised(const struct cn_broker *b, const struct cn_req *req,
                          const char **host, int *port);
/* Writes the response header for req's API and version into req->resp. */
void cn_resp_begin(struct cn_req *req, const struct cn_req_header *h);
/* A NUL-terminated copy of a wire string; false if null or too long. */
bool cn_wire_cstr(struct cn_bytes b, char *out, size_t out_len);
/* A copy of s in the request's arena as a wire string (NULL: null). */
struct cn_bytes cn_req_str(struct cn_req *req, const char *s);
/* True when req came in on this node's CONTROLLER listener (cluster mode,
 * process.roles with controller): a request there may be a forwarded one
 * and is never forwarded again. */
bool cn_req_on_controller_listener(const struct cn_broker *b,
                                   const struct cn_req *req);
/* A decode failure: log, close the connection, finish the request. */
void cn_req_bad(struct cn_req *req, const struct cn_req_header *h, int err);

/* producer ids (pids.c) */
struct cn_rd;
typedef void (*cn_pid_handler_fn)(struct cn_broker *b, struct cn_req *req,
                                  const struct cn_req_header *h,
                                  struct cn_rd *body);
/* Starts writing the next reservation when one is due (pid.h). */
void cn_pids_refill(struct cn_broker *b);
/* A producer id from a durable reservation: 0, or a negative error, or
 * -EAGAIN when none is durable yet: req (if not NULL) is then held and
 * fn(b, req, h, body) runs again once the reservation being written is
 * durable; the caller returns without answering. */
int cn_pids_take(struct cn_broker *b, struct cn_req *req,
                 const struct cn_req_header *h, const struct cn_rd *body,
                 cn_pid_handler_fn fn, int64_t *pid);

#endif
