/*
 * broker.c - start-up, timers and clean shutdown.
 *
 * Start: validate and lock the data directory, read or create its
 * meta.properties (cluster id and node id, as Kafka's), load every topic
 * (each partition log recovers itself), then listen.  Shutdown on SIGTERM
 * or SIGINT: stop accepting and close connections, let the sync round in
 * flight finish, then close every log (sync + checkpoint) and let the loop
 * end.  In cluster mode a controlled shutdown comes first (lifecycle.h):
 * the broker keeps serving while the controller moves its leaderships
 * away; a second signal skips the wait.
 */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "node/authz.h"
#include "handlers/quotas.h"
#include "handlers/handlers.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/rand.h"
#include "base/say.h"
#include "broker/broker.h"
#include "broker/wiring.h"
#include "node/broker_int.h"
#include "node/cleaner.h"
#include "node/group_coord.h"
#include "broker/metrics.h"
#include "node/hanging.h"
#include "node/ctlcall.h"
#include "node/lifecycle.h"
#include "node/markers.h"
#include "node/publish.h"
#include "node/replica.h"
#include "node/quorum.h"
#include "node/txn_exec.h"
#include "node/txn_remote.h"
#include "proto/gen/api.h"
#include "proto/kerr.h"

struct cn_broker_priv {
    struct cn_broker b;
    int lock_fd; /* flock on <data>/.lock: one broker per directory */
    struct cn_hanging *hanging; /* periodic hanging-transaction check */
    struct cn_cleaner *cleaner; /* log cleaner; NULL when off */
    uv_timer_t trim_timer;      /* gives malloc's idle memory back */
    size_t free_after_trim;     /* heap bytes free after the last trim */
    bool fatal;                 /* stopping because the quorum cannot go
                                   on: exit non-zero */
};

/* Free heap memory kept for reuse before the rest goes back to the OS. */
#define TRIM_FREE_BYTES ((size_t)64 << 20)
#define TRIM_EVERY_MS 1000

static int mkdirs(const char *path)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static int meta_properties_write(struct cn_broker *b, char *err,
                                 size_t err_len);

/* Reads or writes <data>/meta.properties: cluster.id and node.id.  In
 * cluster mode a new directory takes the quorum's cluster id when its
 * ClusterId record is applied (on_quorum_applied), never a new one. */
static int meta_properties(struct cn_broker *b, char *err, size_t err_len)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/meta.properties", b->data_dir);
    FILE *f = fopen(path, "r");
    if (f) {
        char line[512];
        int32_t stored_node = -1;
        while (fgets(line, sizeof line, f)) {
            line[strcspn(line, "\r\n")] = '\0';
            if (strncmp(line, "cluster.id=", 11) == 0 &&
                strlen(line + 11) < sizeof b->cluster_id)
                memcpy(b->cluster_id, line + 11, strlen(line + 11) + 1);
            else if (strncmp(line, "node.id=", 8) == 0)
                stored_node = (int32_t)strtol(line + 8, NULL, 10);
        }
        fclose(f);
        if (stored_node >= 0 && stored_node != b->node_id) {
            snprintf(err, err_len,
                     "node.id: configured %d but %s was written by node %d",
                     b->node_id, path, stored_node);
            return CN_EINVAL;
        }
        if (b->cluster_id[0])
            return 0;
    }
    if (b->cfg->cluster_mode)
        return 0;
    /* A new directory gets a random cluster id: 16 bytes, base64url
     * without padding (22 characters), the form Kafka uses. */
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t raw[16];
    int rrc = cn_rand_bytes(raw, sizeof raw);
    if (rrc)
        return rrc;
    uint32_t acc = 0;
    int bits = 0, n = 0;
    for (int i = 0; i < 16; i++) {
        acc = (acc << 8) | raw[i];
        bits += 8;
        while (bits >= 6) {
            b->cluster_id[n++] = b64[(acc >> (bits - 6)) & 63];
            bits -= 6;
        }
    }
    if (bits)
        b->cluster_id[n++] = b64[(acc << (6 - bits)) & 63];
    b->cluster_id[n] = '\0';
    return meta_properties_write(b, err, err_len);
}

static int meta_properties_write(struct cn_broker *b, char *err,
                                 size_t err_len)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/meta.properties", b->data_dir);
    FILE *f;
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    f = fopen(tmp, "w");
    if (!f) {
        snprintf(err, err_len, "log.dirs: cannot write %s: %s", tmp,
                 strerror(errno));
        return -errno;
    }
    fprintf(f, "version=1\ncluster.id=%s\nnode.id=%d\n", b->cluster_id,
            b->node_id);
    int rc = (fflush(f) || fsync(fileno(f))) ? -errno : 0;
    fclose(f);
    if (!rc && rename(tmp, path) != 0)
        rc = -errno;
    if (rc)
        snprintf(err, err_len, "log.dirs: cannot write %s: %s", path,
                 strerror(-rc));
    return rc;
}

static void on_retention(uv_timer_t *t)
{
    struct cn_broker *b = t->data;
    int64_t now = cn_clock_wall_ms();
    for (size_t i = 0; i < b->topic_buckets; i++)
        for (struct cn_topic *tp = b->topic_table[i]; tp; tp = tp->hash_next)
            for (int32_t p = 0; p < tp->partition_count; p++)
                if (cn_log_enforce_retention(tp->partitions[p]->log, now) > 0)
                    cn_partition_after_retention(tp->partitions[p]);
}

static void on_expiry(uv_timer_t *t)
{
    struct cn_broker *b = t->data;
    int64_t now = cn_clock_wall_ms();
    for (size_t i = 0; i < b->topic_buckets; i++)
        for (struct cn_topic *tp = b->topic_table[i]; tp; tp = tp->hash_next)
            for (int32_t p = 0; p < tp->partition_count; p++)
                cn_partition_expire_producers(b, tp->partitions[p], now);
}

/* Kafka's flush.messages / flush.ms: with group commit on, every append
 * is synced anyway; otherwise this is the only thing that syncs. */
static void on_flush(uv_timer_t *t)
{
    struct cn_broker *b = t->data;
    if (b->cfg->cairn_fsync_group_commit)
        return;
    int64_t now = cn_clock_wall_ms();
    for (size_t i = 0; i < b->topic_buckets; i++)
        for (struct cn_topic *tp = b->topic_table[i]; tp; tp = tp->hash_next)
            for (int32_t p = 0; p < tp->partition_count; p++) {
                struct cn_log *log = tp->partitions[p]->log;
                if (!cn_log_needs_flush(log, now))
                    continue;
                cn_sync_flush(b, tp->partitions[p]);
            }
}

/* net's abandon_cb: a request whose connection closed while its handler
 * had it.  Only a long-poll fetch waits long enough to matter (up to its
 * client's max_wait_ms); the rest finish on their own soon. */
/* As each answer is finished, before it is written. */
static void on_req_done(struct cn_req *req, void *opaque)
{
    cn_quota_request_done(opaque, req);
    cn_metrics_request_done(req, opaque);
}

static void on_req_abandoned(struct cn_req *req, void *opaque)
{
    if (req->api_key == CN_API_FETCH)
        cn_fetch_abandon(opaque, req);
    else if (req->api_key == CN_API_OFFSET_COMMIT ||
             req->api_key == CN_API_TXN_OFFSET_COMMIT)
        cn_offset_commit_abandon(opaque, req);
}

/*
 * main.c keeps freed memory in malloc's heap (high mmap and trim
 * thresholds) so the megabyte buffers of produce and fetch are reused
 * without page faults.  The cost is that after a burst (many connections'
 * queued answers, a flood of big fetches) the heap keeps its peak size:
 * glibc trims only a free top of the heap larger than the trim threshold,
 * never free pages below a live allocation.  So once a second, if more
 * than TRIM_FREE_BYTES of the heap is free, malloc_trim() gives back every
 * free page (it also madvises free chunks inside the heap); the steady
 * working set stays under the bound and keeps its warm pages.
 */
static void on_trim(uv_timer_t *t)
{
    struct cn_broker_priv *bp = t->data;
    /* Free memory left after the last trim is in pieces malloc_trim()
     * could not return: walking the heap again for it every second would
     * cost the loop and gain nothing, so only new free memory counts. */
    struct mallinfo2 mi = mallinfo2();
    if (mi.fordblks < bp->free_after_trim)
        bp->free_after_trim = mi.fordblks;
    if (mi.fordblks > bp->free_after_trim + TRIM_FREE_BYTES) {
        malloc_trim(0);
        bp->free_after_trim = mallinfo2().fordblks;
    }
}

static void on_controlled_shutdown(struct cn_broker *b, bool approved)
{
    (void)approved; /* lifecycle.c logged it; stopping either way */
    cn_broker_stop(b);
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct cn_broker *b = s->data;
    /* Only a cluster node has a lifecycle; the first signal waits for the
     * controller, a second one (or a node with no registration left to
     * shut down) stops now. */
    if (!b->stopping && b->lifecycle &&
        cn_lifecycle_shutdown(b, CN_LIFECYCLE_SHUTDOWN_MS,
                              on_controlled_shutdown) == 0) {
        CN_INFO("received signal %d: controlled shutdown", signum);
        return;
    }
    CN_INFO("received signal %d: shutting down", signum);
    cn_broker_stop(b);
}

/* ---- cluster mode: the metadata quorum ---- */

/* A new data directory learns its cluster id from the quorum: written
 * into meta.properties once, when the ClusterId record is applied. */
static void quorum_learn_cluster_id(struct cn_broker *b)
{
    if (b->cluster_id[0] || !b->quorum)
        return;
    const char *cid = cn_image_cluster_id(cn_quorum_image(b->quorum));
    if (!cid[0] || strlen(cid) >= sizeof b->cluster_id)
        return;
    memcpy(b->cluster_id, cid, strlen(cid) + 1);
    char err[512];
    if (meta_properties_write(b, err, sizeof err) != 0) {
        /* Kept in memory: the next start learns it again. */
        CN_ERROR("%s", err);
        return;
    }
    CN_INFO("joined cluster %s: written to %s/meta.properties", cid,
            b->data_dir);
}

static void on_quorum_applied(void *ctx, int64_t offset)
{
    quorum_learn_cluster_id(ctx);
    cn_publish_applied(ctx, offset);
}

static void on_quorum_fatal(void *ctx, const char *why)
{
    struct cn_broker *b = ctx;
    struct cn_broker_priv *bp = (struct cn_broker_priv *)b;
    if (!strncmp(why, "belongs to cluster", 18))
        CN_ERROR("log.dirs: %s %s; stopping", b->data_dir, why);
    else
        CN_ERROR("metadata quorum: %s; stopping", why);
    bp->fatal = true;
    cn_broker_stop(b);
}

static int quorum_start(struct cn_broker *b, char *err, size_t err_len)
{
    const struct cn_config *cfg = b->cfg;
    struct cn_quorum_voter voters[CN_VOTERS_MAX];
    const struct cn_quorum_voter *self = NULL;
    for (int i = 0; i < cfg->nvoters; i++) {
        voters[i].id = cfg->voters[i].id;
        snprintf(voters[i].host, sizeof voters[i].host, "%s",
                 cfg->voters[i].host);
        voters[i].port = cfg->voters[i].port;
        if (voters[i].id == b->node_id)
            self = &voters[i];
    }
    uint64_t seed = 0;
    cn_rand_bytes((uint8_t *)&seed, sizeof seed);
    struct cn_quorum_config qc = {
        .node_id = b->node_id,
        .voter = cfg->controller_role,
        .voters = voters,
        .nvoters = (size_t)cfg->nvoters,
        /* A standby is reached on its first broker listener. */
        .self_host = self ? self->host : b->adv_hosts[0],
        .self_port = self ? self->port : b->adv_ports[0],
        .dir = cfg->metadata_log_dir,
        .cluster_id = b->cluster_id,
        .election_timeout_ms = cfg->controller_quorum_election_timeout_ms,
        .heartbeat_timeout_ms = cfg->controller_quorum_election_timeout_ms /
                                10,
        .ctl =
            {
                .cluster_id = b->cluster_id,
                .metadata_version = 21,
                .transaction_version = (int16_t)cfg->cairn_transaction_version,
                .session_timeout_ms = cfg->broker_session_timeout_ms,
                .default_partitions = cfg->num_partitions,
                .default_rf = (int16_t)cfg->default_replication_factor,
                .pid_block = 1000,
                .seed = seed,
            },
    };
    struct cn_quorum_hooks hooks = {
        .applied = on_quorum_applied,
        .fatal = on_quorum_fatal,
        .ctx = b,
    };
    struct cn_quorum *q = NULL;
    int rc = cn_quorum_start(b->loop, &qc, &hooks, &q, err, err_len);
    if (rc)
        return rc;
    b->quorum = q;
    quorum_learn_cluster_id(b);
    return 0;
}

int cn_broker_start(uv_loop_t *loop, struct cn_config *cfg,
                    struct cn_broker **out, char *err, size_t err_len)
{
    struct cn_broker_priv *bp = calloc(1, sizeof *bp);
    if (!bp) {
        cn_config_fini(cfg);
        free(cfg);
        return CN_ENOMEM;
    }
    struct cn_broker *b = &bp->b;
    bp->lock_fd = -1;
    b->loop = loop;
    b->cfg = cfg;
    b->node_id = cfg->node_id;
    b->sync_next_round = 1;
    b->data_visible = cn_broker_data_arrived;
    b->txn_answer = cn_h_txn_answer;
    b->group_join_done = cn_gc_join_done;
    b->group_sync_done = cn_gc_sync_done;
    snprintf(b->adv_host, sizeof b->adv_host, "%s",
             cfg->advertised_host[0] ? cfg->advertised_host : "127.0.0.1");
    b->adv_port = cfg->advertised_port;

    struct cn_topic_config defaults;
    cn_topic_config_init_defaults(&defaults, cfg);
    char why[256];
    if (cn_topic_config_check(&defaults, why, sizeof why) != KAFKA_NONE) {
        snprintf(err, err_len, "topic defaults (log.cleanup.policy, "
                 "compression.type): %s", why);
        goto out_free;
    }
    /* Only the first of log.dirs is used: one directory per broker. */
    size_t n = strcspn(cfg->log_dirs, ",");
    if (n == 0 || n >= sizeof b->data_dir) {
        snprintf(err, err_len, "log.dirs: '%s' is not a usable directory",
                 cfg->log_dirs);
        goto out_free;
    }
    memcpy(b->data_dir, cfg->log_dirs, n);
    b->data_dir[n] = '\0';
    int rc = mkdirs(b->data_dir);
    if (rc) {
        snprintf(err, err_len, "log.dirs: cannot create '%s': %s",
                 b->data_dir, strerror(-rc));
        goto out_free;
    }
    /* mkdir takes an existing file for a directory (EEXIST), and access
     * would then blame permissions. */
    struct stat st;
    if (stat(b->data_dir, &st) != 0) {
        snprintf(err, err_len, "log.dirs: cannot use '%s': %s", b->data_dir,
                 strerror(errno));
        goto out_free;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, err_len, "log.dirs: '%s' is %s, not a directory",
                 b->data_dir,
                 S_ISREG(st.st_mode) ? "a regular file" : "not a directory");
        goto out_free;
    }
    if (access(b->data_dir, R_OK | W_OK | X_OK) != 0) {
        snprintf(err, err_len, "log.dirs: '%s' is not writable: %s",
                 b->data_dir, strerror(errno));
        goto out_free;
    }
    char lock_path[4200];
    snprintf(lock_path, sizeof lock_path, "%s/.lock", b->data_dir);
    bp->lock_fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (bp->lock_fd < 0 || flock(bp->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, err_len,
                 "log.dirs: '%s' is in use by another broker (cannot lock "
                 "%s)",
                 b->data_dir, lock_path);
        goto out_free;
    }
    if (meta_properties(b, err, err_len) != 0)
        goto out_free;
    /* Before the topics load, so they start with the dynamic defaults. */
    if (cn_broker_dynconf_load(b, err, err_len) != 0)
        goto out_free;
    if (cn_authz_open(b, err, err_len) != 0)
        goto out_free;
    if (cn_quotas_open(b, err, err_len) != 0)
        goto out_free;
    if (cn_sasl_open(b, err, err_len) != 0)
        goto out_free;
    cn_broker_warn_config(cfg);
    rc = cn_pidalloc_open(&b->pids, b->data_dir);
    if (rc) {
        snprintf(err, err_len,
                 "log.dirs: cannot read %s/producer-id-block (%s); refusing "
                 "to start rather than risk reusing producer ids",
                 b->data_dir, cn_strerror(rc));
        goto out_free;
    }
    /* The first block is written while the logs load, so the first
     * InitProducerId rarely waits for it. */
    cn_pids_refill(b);
    int64_t t0 = cn_clock_mono_ms();
    if (cn_topics_load(b, err, err_len) != 0)
        goto out_topics;
    CN_INFO("loaded %zu topics from %s in %lld ms", b->topic_count,
            b->data_dir, (long long)(cn_clock_mono_ms() - t0));
    rc = cn_txn_exec_start(b);
    if (rc) {
        snprintf(err, err_len, "cannot load the transaction log: %s",
                 cn_strerror(rc));
        goto out_topics;
    }
    rc = cn_group_coord_start(b);
    if (rc) {
        snprintf(err, err_len, "cannot load %s: %s", CN_OFFSETS_TOPIC,
                 cn_strerror(rc));
        goto out_topics;
    }

    if (cn_metrics_init(b) != 0) {
        snprintf(err, err_len, "out of memory");
        goto out_topics;
    }
    struct cn_server_config sc = {
        .max_request_bytes = (size_t)cfg->socket_request_max_bytes,
        .idle_ms = cfg->connections_max_idle_ms,
        .max_inflight = cfg->cairn_connection_max_inflight_requests,
        .max_conn_bytes = (size_t)cfg->cairn_connection_max_queued_bytes,
        .max_queued = cfg->queued_max_requests,
        .max_queued_bytes = cfg->queued_max_request_bytes,
        .done_cb = on_req_done,
        .abandon_cb = on_req_abandoned,
    };
    if (cn_broker_listen(b, &sc, err, err_len) != 0)
        goto out_topics;
    /* The first listener's, for what has no request to go by. */
    snprintf(b->adv_host, sizeof b->adv_host, "%s", b->adv_hosts[0]);
    b->adv_port = b->adv_ports[0];
    /* Raft's peers reach it on the listeners, so they come first. */
    if (cfg->cluster_mode && quorum_start(b, err, err_len) != 0) {
        cn_broker_unlisten(b);
        goto out_topics;
    }
    if (b->quorum && cn_lifecycle_start(b) != 0)
        CN_ERROR("out of memory: this broker will not register");
    cn_metrics_start_http(b);

    uv_timer_init(loop, &b->retention_timer);
    b->retention_timer.data = b;
    uint64_t every = (uint64_t)cfg->log_retention_check_interval_ms;
    uv_timer_start(&b->retention_timer, on_retention, every, every);
    uv_timer_init(loop, &b->expiry_timer);
    b->expiry_timer.data = b;
    uint64_t expiry_every =
        (uint64_t)cfg->producer_id_expiration_check_interval_ms;
    uv_timer_start(&b->expiry_timer, on_expiry, expiry_every, expiry_every);
    uv_timer_init(loop, &b->flush_timer);
    b->flush_timer.data = b;
    uint64_t flush_every = (uint64_t)cfg->log_flush_scheduler_interval_ms;
    if (flush_every == 0 || flush_every > 1000)
        flush_every = 1000;
    uv_timer_start(&b->flush_timer, on_flush, flush_every, flush_every);
    uv_timer_init(loop, &bp->trim_timer);
    bp->trim_timer.data = bp;
    uv_timer_start(&bp->trim_timer, on_trim, TRIM_EVERY_MS, TRIM_EVERY_MS);
    if (cn_hanging_start(b, &bp->hanging) != 0)
        CN_WARN("no memory for the hanging-transaction check; it is off");
    rc = cn_cleaner_start(b, &bp->cleaner);
    if (rc)
        CN_ERROR("cannot start the log cleaner (%s); compacted topics are "
                 "not cleaned",
                 cn_strerror(rc));
    uv_signal_init(loop, &b->sig_term);
    uv_signal_init(loop, &b->sig_int);
    b->sig_term.data = b->sig_int.data = b;
    uv_signal_start(&b->sig_term, on_signal, SIGTERM);
    uv_signal_start(&b->sig_int, on_signal, SIGINT);
    CN_INFO("cairn node %d (cluster %s) listening on %s:%d, data in %s",
            b->node_id, b->cluster_id,
            cfg->listen_host[0] ? cfg->listen_host : "*",
            cn_server_port(b->server), b->data_dir);
    *out = b;
    return 0;

out_topics:
    cn_publish_stop(b);
    cn_replica_stop(b);
    cn_group_coord_stop(b);
    cn_txn_exec_stop(b);
    cn_markers_remote_stop(b);
    cn_txn_remote_stop(b);
    /* Their timers live inside them, and the producer-id write's callback
     * uses b, as do the sync rounds the coordinators' start-up writes
     * began (their workers use the logs, their waiters the coordinators),
     * and a roll snapshot's end its partition: the loop runs until the
     * closes, that write and those rounds are done, so nothing is freed
     * under libuv (or a listener that did start). */
    while (b->pids.writing || b->sync_running || b->part_work_running)
        uv_run(loop, UV_RUN_ONCE);
    uv_run(loop, UV_RUN_NOWAIT);
    cn_group_coord_free(b);
    cn_txn_exec_free(b);
    cn_topics_close_all(b);
out_free:
    cn_quotas_close(b);
    cn_sasl_close(b);
    cn_authz_close(b);
    cn_metrics_free(b);
    if (bp->lock_fd >= 0)
        close(bp->lock_fd);
    cn_config_fini(cfg);
    free(cfg);
    free(bp);
    return CN_EINVAL;
}

int cn_broker_port(const struct cn_broker *b)
{
    return cn_server_port(b->server);
}

static void on_stop_poll(uv_timer_t *t)
{
    struct cn_broker *b = t->data;
    /* Wait for the sync round, cleaner passes and roll snapshots in
     * flight: their workers use the logs; and for a producer-id write,
     * whose waiting requests run again when it ends. */
    if (b->sync_running || b->clean_running || b->pids.writing ||
        b->part_work_running)
        return;
    uv_timer_stop(t);
    uv_close((uv_handle_t *)t, NULL);
    cn_topics_close_all(b);
    CN_INFO("shutdown complete: logs synced and checkpointed");
}

void cn_broker_stop(struct cn_broker *b)
{
    if (b->stopping)
        return;
    b->stopping = true;
    cn_metrics_stop(b);
    cn_fetch_cancel_all(b);
    cn_create_topics_cancel_all(b);
    cn_hanging_stop(((struct cn_broker_priv *)b)->hanging);
    ((struct cn_broker_priv *)b)->hanging = NULL;
    cn_cleaner_stop(((struct cn_broker_priv *)b)->cleaner);
    ((struct cn_broker_priv *)b)->cleaner = NULL;
    cn_publish_stop(b);
    cn_replica_stop(b);
    cn_txn_exec_stop(b);
    cn_group_coord_stop(b);
    cn_markers_remote_stop(b);
    cn_txn_remote_stop(b);
    /* Before the loop ends: raft's handles and its disk work must close;
     * cn_broker_free frees it once uv_run has returned. */
    cn_lifecycle_stop(b);
    cn_ctlcall_stop(b);
    if (b->quorum)
        cn_quorum_stop(b->quorum, NULL, NULL);
    cn_broker_unlisten(b);
    uv_timer_stop(&b->retention_timer);
    uv_timer_stop(&b->flush_timer);
    uv_timer_stop(&b->expiry_timer);
    uv_timer_stop(&((struct cn_broker_priv *)b)->trim_timer);
    uv_close((uv_handle_t *)&((struct cn_broker_priv *)b)->trim_timer, NULL);
    uv_close((uv_handle_t *)&b->expiry_timer, NULL);
    uv_close((uv_handle_t *)&b->retention_timer, NULL);
    uv_close((uv_handle_t *)&b->flush_timer, NULL);
    uv_signal_stop(&b->sig_term);
    uv_signal_stop(&b->sig_int);
    uv_close((uv_handle_t *)&b->sig_term, NULL);
    uv_close((uv_handle_t *)&b->sig_int, NULL);
    static uv_timer_t stop_poll;
    uv_timer_init(b->loop, &stop_poll);
    stop_poll.data = b;
    uv_timer_start(&stop_poll, on_stop_poll, 0, 5);
}

int cn_broker_free(struct cn_broker *b)
{
    struct cn_broker_priv *bp = (struct cn_broker_priv *)b;
    cn_topics_close_all(b);
    cn_txn_exec_free(b);
    cn_group_coord_free(b);
    cn_quotas_close(b);
    cn_sasl_close(b);
    cn_authz_close(b);
    cn_metrics_free(b);
    cn_broker_listeners_free(b);
    if (b->quorum)
        cn_quorum_free(b->quorum);
    b->quorum = NULL;
    if (bp->lock_fd >= 0)
        close(bp->lock_fd);
    bool fatal = bp->fatal;
    cn_config_fini(b->cfg);
    free(b->cfg);
    free(bp);
    return fatal ? 2 : 0;
}
