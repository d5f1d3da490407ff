/*
 * metrics.c - Prometheus exposition of the broker's state; see metrics.h.
 *
 * Each metric family is written whole (HELP, TYPE, then every sample), as
 * the text format asks, so partitions are collected and sorted once per
 * scrape and then walked once per family.
 */
#include "broker/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/hist.h"
#include "base/say.h"
#include "node/cleaner.h"
#include "handlers/handlers.h"
#include "net/http.h"
#include "proto/gen/api.h"
#include "node/markers.h"
#include "node/replica.h"
#include "node/txn_exec.h"
#include "partition/isr.h"

/* Kafka's highest version of any API is below 20 (Fetch 17 in 4.x). */
#define VERSION_SLOTS 32

struct cn_metrics {
    struct cn_http_server *http;                /* NULL when off */
    uint64_t requests[CN_API_KEY_MAX + 1];      /* finished, per API key */
    /* finished, per API key and header version: which versions clients
     * actually send (a version outside 0..VERSION_SLOTS-1 is counted only
     * in requests) */
    uint64_t by_version[CN_API_KEY_MAX + 1][VERSION_SLOTS];
    struct cn_hist latency[CN_API_KEY_MAX + 1]; /* frame -> done, ms */
};

/* One partition's numbers, taken once per scrape. */
struct prow {
    const struct cn_partition *p;
    const char *topic;
    int32_t partition;
    bool internal;
    int64_t hw, lso, leo, log_start;
    double oldest_age_s;  /* 0 when no transaction is open */
    uint64_t open_txns;
    uint64_t pids;
};

struct rows {
    struct prow *v;
    size_t n, cap;
    bool oom;
};

__attribute__((format(printf, 2, 3))) static void out(struct cn_wr *w,
                                                      const char *fmt, ...)
{
    va_list ap;
    for (size_t want = 256;;) {
        if (!cn_wr_ensure(w, want))
            return;
        size_t room = w->cap - w->len;
        va_start(ap, fmt);
        int n = vsnprintf((char *)w->buf + w->len, room, fmt, ap);
        va_end(ap);
        if (n < 0)
            return;
        if ((size_t)n < room) {
            w->len += (size_t)n;
            return;
        }
        want = (size_t)n + 1;
    }
}

/* HELP and TYPE lines of a family. */
static void family(struct cn_wr *w, const char *name, const char *type,
                   const char *help)
{
    out(w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value with \, " and newline escaped, as the format requires. */
static void label_value(struct cn_wr *w, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            out(w, "\\%c", *s);
        else if (*s == '\n')
            out(w, "\\n");
        else
            cn_wr_raw(w, s, 1);
    }
}

static int oldest_open(void *arg, int64_t producer_id, int64_t first_offset,
                       int64_t start_ms)
{
    (void)producer_id;
    (void)first_offset;
    *(int64_t *)arg = start_ms;
    return 1; /* the first one is the oldest */
}

static void collect_topic(struct cn_topic *t, void *arg)
{
    struct rows *r = arg;
    int64_t now_ms = cn_clock_wall_ms();
    for (int32_t i = 0; i < t->partition_count && !r->oom; i++) {
        if (r->n == r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 64;
            struct prow *v = realloc(r->v, cap * sizeof *v);
            if (!v) {
                r->oom = true;
                return;
            }
            r->v = v;
            r->cap = cap;
        }
        struct cn_partition *p = t->partitions[i];
        struct prow *row = &r->v[r->n++];
        row->p = p;
        row->topic = t->name;
        row->partition = p->index;
        row->internal = t->internal;
        row->hw = p->high_watermark;
        row->lso = cn_partition_lso(p);
        row->leo = cn_log_end_offset(p->log);
        row->log_start = cn_log_start_offset(p->log);
        row->open_txns = cn_pstate_open_count(p->pstate);
        row->pids = cn_pstate_count(p->pstate);
        int64_t start_ms = -1;
        row->oldest_age_s = 0;
        if (cn_pstate_foreach_open(p->pstate, oldest_open, &start_ms) &&
            start_ms >= 0 && now_ms > start_ms)
            row->oldest_age_s = (double)(now_ms - start_ms) / 1000.0;
    }
}

static int prow_cmp(const void *a, const void *b)
{
    const struct prow *x = a, *y = b;
    int c = strcmp(x->topic, y->topic);
    if (c)
        return c;
    return (x->partition > y->partition) - (x->partition < y->partition);
}

static void prow_labels(struct cn_wr *w, const struct prow *row)
{
    out(w, "{topic=\"");
    label_value(w, row->topic);
    out(w, "\",partition=\"%d\"%s}", row->partition,
        row->internal ? ",internal=\"true\"" : "");
}

enum pfield { P_HW, P_LSO, P_LAG, P_AGE, P_OPEN, P_PIDS, P_LEO, P_START };

static void partition_family(struct cn_wr *w, const struct rows *r,
                             enum pfield f, const char *name,
                             const char *help)
{
    family(w, name, "gauge", help);
    for (size_t i = 0; i < r->n; i++) {
        const struct prow *row = &r->v[i];
        out(w, "%s", name);
        prow_labels(w, row);
        switch (f) {
        case P_HW: out(w, " %lld\n", (long long)row->hw); break;
        case P_LSO: out(w, " %lld\n", (long long)row->lso); break;
        case P_LAG: out(w, " %lld\n", (long long)(row->hw - row->lso)); break;
        case P_AGE: out(w, " %.3f\n", row->oldest_age_s); break;
        case P_OPEN:
            out(w, " %llu\n", (unsigned long long)row->open_txns);
            break;
        case P_PIDS: out(w, " %llu\n", (unsigned long long)row->pids); break;
        case P_LEO: out(w, " %lld\n", (long long)row->leo); break;
        case P_START: out(w, " %lld\n", (long long)row->log_start); break;
        }
    }
}

/* The cleaner state per compacted user partition (what `cairnctl topics
 * describe` shows); other partitions have no series here. */
static void render_cleaner_partitions(struct cn_broker *b, struct cn_wr *w,
                                      const struct rows *r)
{
    struct cn_cleaner_pstate *ps = calloc(r->n ? r->n : 1, sizeof *ps);
    bool *have = calloc(r->n ? r->n : 1, sizeof *have);
    if (!ps || !have) {
        free(ps);
        free(have);
        w->err = CN_ENOMEM;
        return;
    }
    for (size_t i = 0; i < r->n; i++)
        have[i] = cn_cleaner_partition_state(b, r->v[i].p, &ps[i]);
    family(w, "cairn_cleaner_partition_dirty_ratio", "gauge",
           "Dirty bytes over cleanable bytes of a compacted partition "
           "(Kafka's max-dirty-percent / 100, for this log).");
    for (size_t i = 0; i < r->n; i++) {
        if (!have[i])
            continue;
        out(w, "cairn_cleaner_partition_dirty_ratio");
        prow_labels(w, &r->v[i]);
        out(w, " %.6f\n", ps[i].dirty_ratio);
    }
    family(w, "cairn_cleaner_partition_first_dirty_offset", "gauge",
           "The cleaner checkpoint of a compacted partition: records below "
           "were cleaned.");
    for (size_t i = 0; i < r->n; i++) {
        if (!have[i])
            continue;
        out(w, "cairn_cleaner_partition_first_dirty_offset");
        prow_labels(w, &r->v[i]);
        out(w, " %lld\n", (long long)ps[i].first_dirty);
    }
    /* Absent until a pass over the partition ended since the start. */
    family(w, "cairn_cleaner_partition_time_since_last_pass_ms", "gauge",
           "Since the last cleaning pass over a compacted partition ended "
           "(swapped or failed).");
    for (size_t i = 0; i < r->n; i++) {
        if (!have[i] || ps[i].since_last_pass_ms < 0)
            continue;
        out(w, "cairn_cleaner_partition_time_since_last_pass_ms");
        prow_labels(w, &r->v[i]);
        out(w, " %lld\n", (long long)ps[i].since_last_pass_ms);
    }
    family(w, "cairn_cleaner_partition_last_error", "gauge",
           "1 with the error of the partition's last pass when it failed, "
           "0 (error=\"\") when it swapped or none ran.");
    for (size_t i = 0; i < r->n; i++) {
        if (!have[i])
            continue;
        out(w, "cairn_cleaner_partition_last_error{topic=\"");
        label_value(w, r->v[i].topic);
        out(w, "\",partition=\"%d\",error=\"", r->v[i].partition);
        label_value(w, ps[i].last_error ? cn_strerror(ps[i].last_error) : "");
        out(w, "\"} %d\n", ps[i].last_error ? 1 : 0);
    }
    free(ps);
    free(have);
}

static void render_partitions(struct cn_broker *b, struct cn_wr *w)
{
    struct rows r = {0};
    cn_topics_foreach(b, collect_topic, &r);
    if (r.oom) {
        free(r.v);
        w->err = CN_ENOMEM;
        return;
    }
    if (r.n)
        qsort(r.v, r.n, sizeof *r.v, prow_cmp);
    partition_family(w, &r, P_HW, "cairn_partition_high_watermark",
                     "Offset below which records are visible to "
                     "read_uncommitted consumers.");
    partition_family(w, &r, P_LSO, "cairn_partition_last_stable_offset",
                     "First offset of the oldest open transaction, capped "
                     "at the high watermark; read_committed consumers stop "
                     "here.");
    partition_family(w, &r, P_LAG, "cairn_partition_lso_lag",
                     "LastStableOffsetLag: high watermark minus last stable "
                     "offset, in records.");
    partition_family(w, &r, P_AGE,
                     "cairn_partition_oldest_open_txn_age_seconds",
                     "Age of the oldest open transaction on the partition "
                     "(from its first batch's timestamp), 0 when none.");
    partition_family(w, &r, P_OPEN, "cairn_partition_open_transactions",
                     "Transactions open on the partition (no marker yet).");
    partition_family(w, &r, P_PIDS, "cairn_partition_producer_ids",
                     "Producer ids in the partition's producer state.");
    partition_family(w, &r, P_LEO, "cairn_partition_log_end_offset",
                     "Offset the next appended record will get.");
    partition_family(w, &r, P_START, "cairn_partition_log_start_offset",
                     "First offset still in the log.");
    /* Compacted user partitions only: the cardinality stays that of the
     * topics an operator made compacted. */
    render_cleaner_partitions(b, w, &r);
    free(r.v);
}


/* A ms histogram as Prometheus cumulative buckets in seconds. */
static void histogram(struct cn_wr *w, const char *name, const char *labels,
                      const struct cn_hist *h)
{
    uint64_t cum = 0;
    const char *sep = labels[0] ? "," : "";
    for (int i = 0; i < CN_HIST_BUCKETS; i++) {
        cum += h->buckets[i];
        if (i == CN_HIST_BUCKETS - 1)
            out(w, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels, sep,
                (unsigned long long)cum);
        else
            out(w, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep,
                cn_hist_bounds_ms[i] / 1000.0, (unsigned long long)cum);
    }
    const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
    out(w, "%s_sum%s%s%s %.6f\n", name, open, labels, close,
        h->sum_ms / 1000.0);
    out(w, "%s_count%s%s%s %llu\n", name, open, labels, close,
        (unsigned long long)h->count);
}

static void counter(struct cn_wr *w, const char *name, const char *help,
                    uint64_t v)
{
    family(w, name, "counter", help);
    out(w, "%s %llu\n", name, (unsigned long long)v);
}

static void gauge(struct cn_wr *w, const char *name, const char *help,
                  double v)
{
    family(w, name, "gauge", help);
    out(w, "%s %.17g\n", name, v);
}

/* Replication (cluster mode), under the names Kafka's JMX exporter gives
 * its ReplicaManager metrics where Kafka has one. */
struct repl_sum {
    struct cn_broker *b;
    uint64_t led, under_replicated, under_min_isr;
};

static void sum_topic(struct cn_topic *t, void *arg)
{
    struct repl_sum *rs = arg;
    for (int32_t i = 0; i < t->partition_count; i++) {
        const struct cn_partition *p = t->partitions[i];
        if (!p || !cn_partition_led(rs->b, p))
            continue;
        rs->led++;
        if (p->isr && cn_isr_under_replicated(p->isr))
            rs->under_replicated++;
        if (cn_replica_isr_size(p) < t->config.min_insync_replicas)
            rs->under_min_isr++;
    }
}

static void lag_topic(struct cn_topic *t, void *arg)
{
    struct cn_wr *w = arg;
    for (int32_t i = 0; i < t->partition_count; i++) {
        const struct cn_partition *p = t->partitions[i];
        if (!p || !p->isr)
            continue;
        int64_t leo = cn_log_end_offset(p->log);
        for (int32_t k = 0; k < p->isr->nf; k++) {
            out(w, "cairn_partition_follower_lag{topic=\"");
            label_value(w, t->name);
            out(w, "\",partition=\"%d\",replica=\"%d\"} %lld\n", p->index,
                p->isr->f[k].id,
                (long long)cn_isr_follower_lag(p->isr, p->isr->f[k].id, leo));
        }
    }
}

static void render_replication(struct cn_broker *b, struct cn_wr *w)
{
    if (!b->cfg->cluster_mode)
        return;
    struct repl_sum rs = {.b = b};
    cn_topics_foreach(b, sum_topic, &rs);
    struct cn_replica_stats st;
    cn_replica_stats(b, &st);
    gauge(w, "kafka_server_replicamanager_leadercount",
          "Partitions this broker leads.", (double)rs.led);
    gauge(w, "kafka_server_replicamanager_underreplicatedpartitions",
          "Partitions this broker leads whose ISR is smaller than their "
          "replica set.",
          (double)rs.under_replicated);
    gauge(w, "kafka_server_replicamanager_underminisrpartitioncount",
          "Partitions this broker leads whose ISR is below "
          "min.insync.replicas: acks=all writes to them are refused.",
          (double)rs.under_min_isr);
    counter(w, "kafka_server_replicamanager_isrshrinks_total",
            "ISR shrinks this broker had committed as a leader.",
            st.isr_shrinks);
    counter(w, "kafka_server_replicamanager_isrexpands_total",
            "ISR expansions this broker had committed as a leader.",
            st.isr_expands);
    counter(w, "cairn_replica_leader_elections_total",
            "Times this broker started leading a partition (a new leader "
            "epoch).",
            st.leader_elections);
    counter(w, "cairn_replica_truncations_total",
            "Follower log truncations where a log diverged from its "
            "leader's.",
            st.truncations);
    counter(w, "cairn_replica_fetch_errors_total",
            "Follower fetches (or their partitions) that failed.",
            st.fetch_errors);
    family(w, "cairn_partition_follower_lag", "gauge",
           "Offsets a follower's log end is behind its leader's (on the "
           "leader; the whole log while the follower has not fetched).");
    cn_topics_foreach(b, lag_topic, w);
}

static void render_txn(struct cn_broker *b, struct cn_wr *w)
{
    struct cn_txn_stats st;
    memset(&st, 0, sizeof st);
    const struct cn_txn_coord *c = cn_txn_exec_coord(b);
    if (c)
        cn_txn_get_stats(c, &st);
    family(w, "cairn_txn_ids", "gauge",
           "Transactional ids the coordinator holds, by state.");
    for (int s = 0; s < CN_TXN_NSTATES; s++)
        out(w, "cairn_txn_ids{state=\"%s\"} %llu\n",
            cn_txn_state_name((enum cn_txn_state)s),
            (unsigned long long)st.ids_by_state[s]);
    counter(w, "cairn_txn_commits_total",
            "Transactions completed as committed.", st.commits);
    counter(w, "cairn_txn_aborts_total",
            "Transactions completed as aborted, for any reason.", st.aborts);
    counter(w, "cairn_txn_timed_out_aborts_total",
            "Transactions aborted by the coordinator because they passed "
            "their transaction.timeout.ms.",
            st.timed_out_aborts);
    counter(w, "cairn_txn_fenced_producers_total",
            "Producer epochs fenced by InitProducerId while a transaction "
            "was open.",
            st.fenced);
    gauge(w, "cairn_txn_marker_retry_queue_size",
          "Transactions whose markers wait for a retry after a failed "
          "append (Kafka's LogAppendRetryQueueSize).",
          (double)st.marker_retry_queue);
    struct cn_markers_remote_counts mc;
    cn_markers_remote_counts(b, &mc);
    gauge(w, "cairn_txn_marker_unknown_destination_queue_size",
          "Markers waiting for an unknown partition leader (Kafka's "
          "UnknownDestinationQueueSize); always 0 on one node, where this "
          "broker leads every partition.",
          (double)mc.unknown_destination);
    /* Kafka's TransactionMarkerChannelManager gauges under the names its
     * JMX exporter gives them. */
    gauge(w,
          "kafka_coordinator_transaction_transactionmarkerchannelmanager_"
          "unknowndestinationqueuesize",
          "Markers the coordinator's channel holds for partitions with no "
          "leader in this broker's image (cluster mode).",
          (double)mc.unknown_destination);
    gauge(w,
          "kafka_coordinator_transaction_transactionmarkerchannelmanager_"
          "logappendretryqueuesize",
          "Markers waiting for a retry to a known leader after a retriable "
          "error (cluster mode).  Cairn retries a failed Complete record "
          "append in the coordinator, not in a queue, so this counts what "
          "the channel retries instead.",
          (double)mc.retry_waiting);
    counter(w, "cairn_txn_marker_requests_total",
            "WriteTxnMarkers requests the coordinator's channel sent to "
            "other brokers' leaders.",
            mc.requests);
    counter(w, "cairn_txn_marker_retries_total",
            "Markers the coordinator's channel sent again after a "
            "retriable error (NOT_LEADER_OR_FOLLOWER, a timeout...).",
            mc.retries);
    gauge(w, "cairn_txn_parked_requests",
          "Coordinator requests waiting for a busy transactional id.",
          (double)st.parked_requests);
    family(w, "cairn_txn_commit_latency_seconds", "histogram",
           "EndTxn(commit) received to CompleteCommit written.");
    histogram(w, "cairn_txn_commit_latency_seconds", "", &st.commit_ms);
    family(w, "cairn_txn_abort_latency_seconds", "histogram",
           "Abort started (EndTxn or timeout) to CompleteAbort written.");
    histogram(w, "cairn_txn_abort_latency_seconds", "", &st.abort_ms);
    counter(w, "cairn_txn_hanging_transactions_found_total",
            "Hanging transactions (open on a partition, unknown to or "
            "ended at the coordinator) found by the periodic check.",
            b->counters.hanging_found);
    gauge(w, "cairn_txn_hanging_transactions",
          "Hanging transactions the last check saw.",
          (double)b->counters.hanging_now);
    counter(w, "cairn_txn_client_markers_refused_total",
            "WriteTxnMarkers markers from clients refused: commits without "
            "cairn.transaction.operator.commit.enable or for a producer id "
            "the coordinator knows, aborts while it commits.",
            b->counters.client_markers_refused);
    counter(w, "cairn_txn_operator_commit_markers_total",
            "COMMIT markers written for clients under "
            "cairn.transaction.operator.commit.enable (audited repairs).",
            b->counters.operator_commit_markers);
}

static void render_cleaner(struct cn_broker *b, struct cn_wr *w)
{
    struct cn_cleaner_stats st;
    cn_cleaner_get_stats(b, &st);
    gauge(w, "cairn_cleaner_threads",
          "Log cleaner worker threads (0: log.cleaner.enable=false or no "
          "threads).",
          st.enabled ? st.threads : 0);
    gauge(w, "cairn_cleaner_max_dirty_percent",
          "Kafka's max-dirty-percent: the highest dirty ratio of the "
          "compacted partitions at the cleaner's last scan, x100.",
          st.max_dirty_percent);
    gauge(w, "cairn_cleaner_time_since_last_run_ms",
          "Kafka's time-since-last-run-ms: since the last cleaning pass "
          "ended (or the cleaner started).",
          (double)st.since_last_run_ms);
    gauge(w, "cairn_cleaner_running_passes", "Cleaning passes in flight.",
          st.running);
    counter(w, "cairn_cleaner_passes_total",
            "Cleaning passes that swapped cleaned segments in.", st.passes);
    counter(w, "cairn_cleaner_passes_failed_total",
            "Cleaning passes that failed (shutdown and deletion excepted).",
            st.passes_failed);
    counter(w, "cairn_cleaner_bytes_read_total",
            "Log bytes the cleaner read (key map and rewrite).",
            st.bytes_read);
    counter(w, "cairn_cleaner_bytes_written_total",
            "Log bytes of the cleaned segments written.", st.bytes_written);
    counter(w, "cairn_cleaner_records_removed_total",
            "Records the cleaner removed (superseded, aborted, expired "
            "tombstones).",
            st.records_removed);
    gauge(w, "cairn_cleaner_last_pass_duration_seconds",
          "Run time of the last cleaning pass.", st.last_pass_ms / 1000.0);
    gauge(w, "cairn_cleaner_swap_loop_ms_max",
          "Longest time the loop thread spent in one step of a pass's "
          "swap (commit or the segment list swap), since the start, ms.",
          st.swap_loop_ms_max);
    gauge(w, "cairn_cleaner_swap_worker_ms_last",
          "The last pass's swap of files (renames, fsyncs, loads, "
          "checkpoint) on a cleaner worker, ms.",
          st.swap_worker_ms_last);
    family(w, "cairn_cleaner_last_error", "gauge",
           "1 with the error of the last failed pass, 0 when none failed.");
    out(w, "cairn_cleaner_last_error{error=\"");
    label_value(w, st.last_error ? cn_strerror(st.last_error) : "");
    out(w, "\"} %d\n", st.last_error ? 1 : 0);
}

static void render_requests(struct cn_broker *b, struct cn_wr *w)
{
    struct cn_metrics *m = b->metrics;
    if (!m)
        return;
    family(w, "cairn_requests_total", "counter",
           "Kafka requests finished, by API.");
    for (int k = 0; k <= CN_API_KEY_MAX; k++) {
        const struct cn_api_info *ai = cn_api_find((int16_t)k);
        if (ai && m->requests[k])
            out(w, "cairn_requests_total{api=\"%s\"} %llu\n", ai->name,
                (unsigned long long)m->requests[k]);
    }
    family(w, "cairn_requests_by_version_total", "counter",
           "Kafka requests finished, by API and the version its header "
           "names: which versions the clients send.");
    for (int k = 0; k <= CN_API_KEY_MAX; k++) {
        const struct cn_api_info *ai = cn_api_find((int16_t)k);
        for (int v = 0; ai && m->requests[k] && v < VERSION_SLOTS; v++)
            if (m->by_version[k][v])
                out(w, "cairn_requests_by_version_total{api=\"%s\","
                       "version=\"%d\"} %llu\n",
                    ai->name, v, (unsigned long long)m->by_version[k][v]);
    }
    family(w, "cairn_request_latency_seconds", "histogram",
           "Time from a request's complete frame to its response being "
           "queued, by API (parked fetches and produce syncs included).");
    for (int k = 0; k <= CN_API_KEY_MAX; k++) {
        const struct cn_api_info *ai = cn_api_find((int16_t)k);
        if (!ai || !m->requests[k])
            continue;
        char labels[96];
        snprintf(labels, sizeof labels, "api=\"%s\"", ai->name);
        histogram(w, "cairn_request_latency_seconds", labels,
                  &m->latency[k]);
    }
    /* Every listener's servers, summed. */
    size_t conns = 0;
    struct cn_server_stats st = {0};
    for (int i = 0; i < b->nservers && !b->stopping; i++) {
        struct cn_server_stats one;
        conns += cn_server_conn_count(b->servers[i]);
        cn_server_get_stats(b->servers[i], &one);
        /* The listeners share one budget. */
        st.queued = one.queued;
        st.queued_bytes = one.queued_bytes;
        st.held_bytes += one.held_bytes;
        st.muted += one.muted;
        st.mutes_total += one.mutes_total;
        st.throttled += one.throttled;
    }
    gauge(w, "cairn_connections", "Open Kafka client connections.",
          (double)conns);
    size_t fetch_waits = 0;
    for (const struct cn_fetch_wait *fw = b->fetch_waits; fw; fw = fw->next)
        fetch_waits++;
    gauge(w, "cairn_fetch_parked_requests",
          "Long-poll fetches waiting for data or their max_wait_ms.",
          (double)fetch_waits);
    gauge(w, "cairn_net_queued_requests",
          "Requests read and not yet handled, parked ones excepted "
          "(against queued.max.requests).",
          (double)st.queued);
    gauge(w, "cairn_net_queued_request_bytes",
          "Frame bytes of those requests (against queued.max.request.bytes).",
          (double)st.queued_bytes);
    gauge(w, "cairn_net_held_bytes",
          "Request and unwritten response bytes held for all connections.",
          (double)st.held_bytes);
    gauge(w, "cairn_net_muted_connections",
          "Connections not being read because a limit is reached.",
          (double)st.muted);
    counter(w, "cairn_net_mutes_total",
            "Times a connection stopped being read because of a limit.",
            st.mutes_total);
    gauge(w, "cairn_net_throttled_connections",
          "Connections not being read while a client quota throttle runs.",
          (double)st.throttled);
    /* Client quotas: by key only, so the cardinality stays four. */
    family(w, "cairn_quota_throttled_total", "counter",
           "Answers throttled by a client quota, by quota key.");
    for (int k = 0; k < CN_QK_COUNT; k++)
        out(w, "cairn_quota_throttled_total{quota=\"%s\"} %llu\n",
            cn_quota_key_name(k), (unsigned long long)b->quota_throttled[k]);
    family(w, "cairn_quota_throttle_ms_total", "counter",
           "Throttle time given to clients, ms, by quota key.");
    for (int k = 0; k < CN_QK_COUNT; k++)
        out(w, "cairn_quota_throttle_ms_total{quota=\"%s\"} %llu\n",
            cn_quota_key_name(k), (unsigned long long)b->quota_throttle_ms[k]);
    gauge(w, "cairn_quota_entities", "Entities with a client quota set.",
          b->quota ? (double)cn_quota_count(b->quota) : 0);
    gauge(w, "cairn_quota_rate_trackers",
          "Rates measured for client quotas (one per key and entity).",
          b->quota ? (double)cn_quota_sensor_count(b->quota) : 0);
}

/* SASL logins by mechanism and outcome (h_sasl.c keeps the counts). */
static void render_sasl(struct cn_broker *b, struct cn_wr *w)
{
    uint64_t ok[4], failed[4];
    cn_sasl_metrics(b, ok, failed);
    family(w, "cairn_sasl_authentications_total", "counter",
           "SASL authentications (re-authentications included), by "
           "mechanism and result.");
    for (int mch = 1; mch <= 3; mch++) {
        out(w, "cairn_sasl_authentications_total{mechanism=\"%s\","
               "result=\"ok\"} %llu\n",
            cn_sasl_mech_name(mch), (unsigned long long)ok[mch]);
        out(w, "cairn_sasl_authentications_total{mechanism=\"%s\","
               "result=\"failed\"} %llu\n",
            cn_sasl_mech_name(mch), (unsigned long long)failed[mch]);
    }
}

static double resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    unsigned long long size = 0, rss = 0;
    int n = fscanf(f, "%llu %llu", &size, &rss);
    fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return n == 2 && page > 0 ? (double)rss * (double)page : 0;
}

void cn_metrics_render(struct cn_broker *b, struct cn_wr *w)
{
    gauge(w, "cairn_up", "1 while the broker runs.", 1);
    gauge(w, "cairn_log_dir_offline",
          "1 when the log directory went offline after an I/O error.",
          b->log_dir_offline ? 1 : 0);
    gauge(w, "cairn_log_dir_full",
          "1 while appends find the log directory full (writes refused).",
          b->log_dir_full ? 1 : 0);
    struct cn_log_fd_stats fs;
    cn_log_fd_stats(&fs);
    gauge(w, "cairn_log_open_files", "Segment files open (descriptor cache).",
          (double)fs.open);
    gauge(w, "cairn_log_open_files_budget",
          "Most segment files kept open, from RLIMIT_NOFILE.",
          (double)fs.budget);
    counter(w, "cairn_log_file_opens_total",
            "Segment file opens, reopens after eviction included.", fs.opens);
    counter(w, "cairn_log_file_evictions_total",
            "Segment files closed to stay within the budget.", fs.evictions);
    render_partitions(b, w);
    render_replication(b, w);
    render_cleaner(b, w);
    render_txn(b, w);
    render_requests(b, w);
    render_sasl(b, w);
    gauge(w, "cairn_process_resident_memory_bytes",
          "Resident set size (from /proc/self/statm).", resident_bytes());
}

static void on_http(const struct cn_http_req *req, struct cn_http_resp *resp,
                    void *opaque)
{
    struct cn_broker *b = opaque;
    if (strcmp(req->path, "/metrics") == 0) {
        resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
        cn_metrics_render(b, &resp->body);
    } else if (strcmp(req->path, "/healthz") == 0) {
        const char *why = NULL;
        if (b->log_dir_offline)
            why = "log directory offline\n";
        else if (b->stopping)
            why = "shutting down\n";
        resp->status = why ? 503 : 200;
        why = why ? why : "ok\n";
        cn_wr_raw(&resp->body, why, strlen(why));
    } else {
        resp->status = 404;
    }
}

int cn_metrics_init(struct cn_broker *b)
{
    b->metrics = calloc(1, sizeof *b->metrics);
    return b->metrics ? 0 : CN_ENOMEM;
}

void cn_metrics_start_http(struct cn_broker *b)
{
    struct cn_metrics *m = b->metrics;
    const struct cn_config *cfg = b->cfg;
    if (!m || !cfg->http_listener || !cfg->http_listener[0])
        return;
    struct cn_http_config hc = {
        .host = cfg->http_host,
        .port = cfg->http_port,
        .max_conns = 64,
        .idle_ms = 5000,
    };
    int rc = cn_http_start(b->loop, &hc, on_http, b, &m->http);
    if (rc) {
        m->http = NULL;
        CN_ERROR("http.listener: cannot listen on %s:%d (%s); the metrics "
                 "endpoint is off",
                 cfg->http_host, cfg->http_port, uv_strerror(rc));
        return;
    }
    CN_INFO("metrics on http://%s:%d/metrics", cfg->http_host,
            cn_http_port(m->http));
}

void cn_metrics_stop(struct cn_broker *b)
{
    if (!b->metrics)
        return;
    cn_http_stop(b->metrics->http);
    b->metrics->http = NULL;
}

void cn_metrics_free(struct cn_broker *b)
{
    free(b->metrics);
    b->metrics = NULL;
}

int cn_metrics_http_port(const struct cn_broker *b)
{
    if (!b->metrics || !b->metrics->http)
        return -1;
    return cn_http_port(b->metrics->http);
}

void cn_metrics_request_done(struct cn_req *req, void *opaque)
{
    struct cn_broker *b = opaque;
    struct cn_metrics *m = b->metrics;
    if (!m || req->api_key < 0 || req->api_key > CN_API_KEY_MAX)
        return;
    m->requests[req->api_key]++;
    if (req->api_version >= 0 && req->api_version < VERSION_SLOTS)
        m->by_version[req->api_key][req->api_version]++;
    double ms = (double)(cn_clock_mono_us() - req->start_us) / 1000.0;
    cn_hist_record(&m->latency[req->api_key], ms < 0 ? 0 : ms);
}
