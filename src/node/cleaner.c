/*
 * cleaner.c - the log cleaner manager; see cleaner.h.
 */
#include "node/cleaner.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "base/clock.h"
#include "base/say.h"
#include "log/log_clean.h"

/* Kafka's Throttler checks the rate every 300 ms of I/O. */
#define THROTTLE_CHECK_MS 300
/* A sleeping worker looks at the stop flag this often. */
#define THROTTLE_SLICE_MS 50
/* A log whose pass failed (a corrupt batch, a key map too small for one
 * batch) waits this long, at least, before the next try: Kafka marks it
 * uncleanable until a restart; here an operator's fix is picked up. */
#define RETRY_FAILED_MS 60000
/* Kafka refuses less than 1 MiB of dedupe buffer per thread; Cairn takes
 * at least that much instead of refusing to start. */
#define DEDUPE_MIN ((int64_t)1 << 20)

/* What a worker does with a job next. */
enum phase {
    PH_RUN,  /* cn_log_clean_run, then the loop commits (or ends) */
    PH_SWAP, /* cn_log_clean_swap, then the loop ends */
    PH_FREE, /* cn_log_clean_free: close the old descriptors; no return */
};

struct job {
    struct cn_cleaner *c;
    enum phase phase;
    struct cn_partition *p; /* NULL once its topic was deleted */
    struct cn_log *log;     /* p's log, kept for end */
    struct cn_log_clean_job *lj;
    struct cn_clean_producer *producers;
    int err;            /* run's (or swap's) result */
    int64_t swap_us;    /* the swap's time on the worker */
    int64_t loop_us;    /* its longest step on the loop */
    bool ran;           /* a worker ran it (else abandon) */
    atomic_bool cancel; /* its topic was deleted: give up */
    struct job *next;   /* loop: in-flight list */
    struct job *qnext;  /* under mu: queue or done list */
};

struct cn_cleaner {
    struct cn_broker *b;
    uv_timer_t timer;
    uv_async_t async;
    int handles_open; /* timer and async not yet closed */
    bool stopping;
    bool async_closing;
    atomic_bool cancel; /* workers: give up the pass */
    /* log.cleaner.io.max.bytes.per.second for the workers: a dynamic key,
     * and the loop rewrites the config's field in place. */
    _Atomic double rate;

    int nthreads;
    uv_thread_t *threads;
    uv_mutex_t mu; /* guards queue, done, quit, throttle */
    uv_cond_t cond;
    struct job *queue; /* begun, waiting for a worker */
    struct job *done;  /* run, waiting for end on the loop */
    bool quit;

    struct job *inflight; /* loop: every begun job, until end */

    /* Throttler, shared by the workers (under mu). */
    int64_t thr_start_ms;
    uint64_t thr_bytes;

    /* Statistics (loop). */
    double max_dirty_percent;
    int64_t last_run_end_ms;
    uint64_t passes, passes_failed, bytes_read, bytes_written, records_removed;
    int64_t last_pass_ms;
    int last_error;
    int64_t swap_loop_us_max;    /* longest loop-side swap step */
    int64_t swap_worker_us_last; /* the swap's disk work (worker) */
};

/* ---- worker side --------------------------------------------------------- */

static void job_free(struct job *j)
{
    free(j->producers);
    free(j);
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/*
 * Kafka's Throttler: after every THROTTLE_CHECK_MS of I/O the observed
 * rate is compared with the desired one and the worker sleeps long enough
 * to bring it back.  The rate is read each time: the key is dynamic.
 * Unlike Kafka's, the check also runs once the bytes done would take
 * THROTTLE_CHECK_MS at the rate: otherwise a burst of passes each shorter
 * than the interval (small partitions, a fast disk) is never limited.
 */
static bool cancelled(const struct job *j)
{
    return atomic_load(&j->c->cancel) || atomic_load(&j->cancel);
}

static int throttle(void *arg, size_t bytes)
{
    struct job *j = arg;
    struct cn_cleaner *c = j->c;
    if (cancelled(j))
        return -ECANCELED;
    double rate = atomic_load(&c->rate);
    if (!(rate > 0) || rate >= 1e300)
        return 0;
    int64_t sleep_for = 0;
    uv_mutex_lock(&c->mu);
    int64_t now = cn_clock_mono_ms();
    c->thr_bytes += bytes;
    int64_t elapsed = now - c->thr_start_ms;
    double want_ms = (double)c->thr_bytes * 1000.0 / rate;
    if (elapsed >= THROTTLE_CHECK_MS || want_ms >= THROTTLE_CHECK_MS) {
        if (want_ms > (double)elapsed)
            sleep_for = (int64_t)want_ms - elapsed;
        c->thr_start_ms = now + (sleep_for > 0 ? sleep_for : 0);
        c->thr_bytes = 0;
    }
    uv_mutex_unlock(&c->mu);
    while (sleep_for > 0) {
        if (cancelled(j))
            return -ECANCELED;
        int64_t step = sleep_for < THROTTLE_SLICE_MS ? sleep_for
                                                     : THROTTLE_SLICE_MS;
        sleep_ms(step);
        sleep_for -= step;
    }
    return cancelled(j) ? -ECANCELED : 0;
}

static void worker(void *arg)
{
    struct cn_cleaner *c = arg;
    uv_mutex_lock(&c->mu);
    for (;;) {
        while (!c->queue && !c->quit)
            uv_cond_wait(&c->cond, &c->mu);
        /* Only closes can be left once quitting: done before the exit. */
        if (!c->queue)
            break;
        struct job *j = c->queue;
        c->queue = j->qnext;
        uv_mutex_unlock(&c->mu);
        if (j->phase == PH_FREE) {
            cn_log_clean_free(j->lj);
            job_free(j);
            uv_mutex_lock(&c->mu);
            continue;
        }
        if (j->phase == PH_RUN) {
            j->ran = !cancelled(j);
            j->err = j->ran ? cn_log_clean_run(j->lj) : -ECANCELED;
        } else {
            int64_t t0 = cn_clock_mono_us();
            j->err = cn_log_clean_swap(j->lj);
            j->swap_us = cn_clock_mono_us() - t0;
        }
        uv_mutex_lock(&c->mu);
        j->qnext = c->done;
        c->done = j;
        uv_async_send(&c->async);
    }
    uv_mutex_unlock(&c->mu);
}

/* ---- loop side ----------------------------------------------------------- */

static bool cleanable_topic(const struct cn_topic *t)
{
    return t && !t->internal &&
           (t->config.cleanup_policy & CN_CLEANUP_COMPACT);
}

static struct job *inflight_find(const struct cn_cleaner *c,
                                 const struct cn_partition *p)
{
    for (struct job *j = c ? c->inflight : NULL; j; j = j->next)
        if (j->p == p)
            return j;
    return NULL;
}

static void inflight_remove(struct cn_cleaner *c, struct job *j)
{
    struct job **pp = &c->inflight;
    while (*pp && *pp != j)
        pp = &(*pp)->next;
    if (*pp)
        *pp = j->next;
}

struct pcollect {
    struct cn_clean_producer *v;
    size_t n, cap;
    bool oom;
};

static int collect_producer(void *arg, const struct cn_pentry_info *e)
{
    struct pcollect *pc = arg;
    if (pc->n == pc->cap) {
        size_t cap = pc->cap ? 2 * pc->cap : 16;
        struct cn_clean_producer *v = realloc(pc->v, cap * sizeof *v);
        if (!v) {
            pc->oom = true;
            return 1;
        }
        pc->v = v;
        pc->cap = cap;
    }
    /* Kafka's lastDataOffset: markers add no batch to the entry, so the
     * newest remembered batch is the last data batch; -1 when the entry
     * holds only a marker (then the marker of its epoch is kept). */
    pc->v[pc->n++] = (struct cn_clean_producer){
        .producer_id = e->producer_id,
        .epoch = e->epoch,
        .last_data_offset = e->last_offset,
    };
    return 0;
}

/* The pass's parameters for p; producers are the caller's to free. */
static int pass_params(struct cn_cleaner *c, struct cn_partition *p,
                       int64_t now_ms, struct cn_log_clean_params *out)
{
    const struct cn_config *cfg = c->b->cfg;
    const struct cn_topic_config *tc = &p->topic->config;
    struct pcollect pc = {0};
    cn_pstate_foreach(p->pstate, collect_producer, &pc);
    if (pc.oom) {
        free(pc.v);
        return CN_ENOMEM;
    }
    int64_t dedupe = cfg->log_cleaner_dedupe_buffer_size / c->nthreads;
    memset(out, 0, sizeof *out);
    out->now_ms = now_ms;
    out->min_compaction_lag_ms = tc->min_compaction_lag_ms;
    out->delete_retention_ms = tc->delete_retention_ms;
    out->lso = cn_partition_lso(p);
    out->dedupe_bytes = (size_t)(dedupe < DEDUPE_MIN ? DEDUPE_MIN : dedupe);
    out->producers = pc.v;
    out->n_producers = pc.n;
    out->throttle = throttle;
    return 0;
}

struct pick {
    struct cn_cleaner *c;
    int64_t now_ms;
    double max_ratio;
    struct cn_partition *best;
    double best_ratio;
    bool best_forced;
};

static void pick_topic(struct cn_topic *t, void *arg)
{
    struct pick *pk = arg;
    if (!cleanable_topic(t))
        return;
    for (int32_t i = 0; i < t->partition_count; i++) {
        struct cn_partition *p = t->partitions[i];
        struct cn_log_clean_state st;
        if (!p || cn_partition_offline(pk->c->b, p) ||
            cn_log_clean_state(p->log, pk->now_ms,
                               t->config.min_compaction_lag_ms,
                               cn_partition_lso(p), &st) != 0)
            continue;
        if (st.dirty_ratio > pk->max_ratio)
            pk->max_ratio = st.dirty_ratio;
        if (inflight_find(pk->c, p) || st.dirty_bytes <= 0 ||
            cn_clock_mono_ms() < p->clean_retry_ms)
            continue;
        /* KIP-354: a dirty record older than max.compaction.lag.ms makes
         * the log due whatever its ratio. */
        bool forced = st.dirty_earliest_ts >= 0 &&
                      pk->now_ms - st.dirty_earliest_ts >
                          t->config.max_compaction_lag_ms;
        if (!forced && !(st.dirty_ratio > t->config.min_cleanable_dirty_ratio))
            continue;
        if (!pk->best || st.dirty_ratio > pk->best_ratio) {
            pk->best = p;
            pk->best_ratio = st.dirty_ratio;
            pk->best_forced = forced;
        }
    }
}

static void enqueue(struct cn_cleaner *c, struct job *j, enum phase ph)
{
    j->phase = ph;
    uv_mutex_lock(&c->mu);
    j->qnext = c->queue;
    c->queue = j;
    uv_cond_signal(&c->cond);
    uv_mutex_unlock(&c->mu);
}

static void on_timer(uv_timer_t *t);

static void arm(struct cn_cleaner *c, uint64_t ms)
{
    if (!c->stopping)
        uv_timer_start(&c->timer, on_timer, ms, 0);
}

/* Begins passes while workers are free and logs are due, then waits the
 * backoff (a pass ending scans again at once). */
static void scan(struct cn_cleaner *c)
{
    struct cn_broker *b = c->b;
    if (c->stopping || b->stopping)
        return;
    while (b->clean_running < c->nthreads && !b->log_dir_offline) {
        struct pick pk = {.c = c, .now_ms = cn_clock_wall_ms()};
        cn_topics_foreach(b, pick_topic, &pk);
        c->max_dirty_percent = pk.max_ratio * 100.0;
        if (!pk.best)
            break;
        struct cn_partition *p = pk.best;
        struct job *j = calloc(1, sizeof *j);
        struct cn_log_clean_params prm;
        if (!j || pass_params(c, p, pk.now_ms, &prm) != 0) {
            free(j);
            CN_WARN("log cleaner: out of memory; retrying after the "
                    "backoff");
            break;
        }
        j->c = c;
        j->p = p;
        j->log = p->log;
        j->producers = (struct cn_clean_producer *)prm.producers;
        atomic_init(&j->cancel, false);
        prm.throttle_arg = j;
        int rc = cn_log_clean_begin(p->log, &prm, &j->lj);
        if (rc) {
            if (rc != -EAGAIN && rc != -EBUSY)
                CN_WARN("log cleaner: cannot begin a pass over %s-%d: %s",
                        p->topic->name, p->index, cn_strerror(rc));
            job_free(j);
            /* Not picked again before the backoff, so the other logs get
             * their turn now. */
            p->clean_retry_ms = cn_clock_mono_ms() +
                                b->cfg->log_cleaner_backoff_ms;
            continue;
        }
        CN_DEBUG("log cleaner: cleaning %s-%d (dirty ratio %.3f%s)",
                 p->topic->name, p->index, pk.best_ratio,
                 pk.best_forced ? ", max.compaction.lag.ms passed" : "");
        j->next = c->inflight;
        c->inflight = j;
        b->clean_running++;
        enqueue(c, j, PH_RUN);
    }
    arm(c, (uint64_t)b->cfg->log_cleaner_backoff_ms);
}

static void on_timer(uv_timer_t *t)
{
    scan(t->data);
}

/* The longest loop-side step of a swap is what it costs the loop: a
 * produce or fetch waits that long. */
static void note_loop(struct cn_cleaner *c, struct job *j, int64_t t0_us)
{
    int64_t us = cn_clock_mono_us() - t0_us;
    if (us > j->loop_us)
        j->loop_us = us;
    if (us > c->swap_loop_us_max)
        c->swap_loop_us_max = us;
}

/* A run or a swap is done: commit and send the swap to a worker, or end
 * the pass on the loop (statistics) and send the job to be freed. */
static void finish(struct cn_cleaner *c, struct job *j)
{
    struct cn_broker *b = c->b;
    int err = j->err;
    if (j->p && !j->p->topic)
        j->p = NULL; /* its topic was deleted meanwhile */
    const char *topic = j->p ? j->p->topic->name : NULL;
    if (j->phase == PH_RUN && j->ran && !err) {
        if (!topic || c->stopping) {
            err = -ECANCELED; /* nothing to swap into, or no time */
        } else {
            int64_t t0 = cn_clock_mono_us();
            err = cn_log_clean_commit(j->log, j->lj);
            note_loop(c, j, t0);
            if (!err) {
                enqueue(c, j, PH_SWAP);
                return;
            }
        }
    }
    if (j->phase == PH_SWAP && j->swap_us > 0)
        c->swap_worker_us_last = j->swap_us;
    inflight_remove(c, j);
    struct cn_log_clean_stats st;
    memset(&st, 0, sizeof st);
    int rc = -ECANCELED;
    if (j->ran) {
        int64_t t0 = cn_clock_mono_us();
        rc = cn_log_clean_end(j->log, j->lj, err, &st);
        note_loop(c, j, t0);
    } else {
        (void)cn_log_clean_end(j->log, j->lj, -ECANCELED, NULL);
    }
    b->clean_running--;
    c->last_run_end_ms = cn_clock_mono_ms();
    c->last_pass_ms = st.run_ms;
    c->bytes_read += (uint64_t)(st.bytes_read > 0 ? st.bytes_read : 0);
    if (j->p && (rc == 0 || (rc != -ECANCELED && rc != -EAGAIN))) {
        j->p->clean_last_end_ms = c->last_run_end_ms;
        j->p->clean_last_error = rc;
    }
    if (rc == 0) {
        c->passes++;
        c->bytes_written += (uint64_t)(st.bytes_written > 0 ? st.bytes_written
                                                            : 0);
        c->records_removed += (uint64_t)(st.records_removed > 0
                                             ? st.records_removed
                                             : 0);
        CN_INFO("log cleaner: cleaned %s-%d [%" PRId64 ", %" PRId64
                "): %d segments into %d, %" PRId64 " of %" PRId64
                " records removed, %" PRId64 " bytes read, %" PRId64
                " written, %" PRId64 " ms; swap %.1f ms on a worker, "
                "%.3f ms on the loop",
                topic, j->p->index, st.first_dirty, st.cleaned_to,
                st.segments_before, st.segments_after, st.records_removed,
                st.records_read, st.bytes_read, st.bytes_written, st.run_ms,
                (double)j->swap_us / 1000.0, (double)j->loop_us / 1000.0);
    } else if (rc != -ECANCELED && rc != -EAGAIN) {
        c->passes_failed++;
        c->last_error = rc;
        int64_t wait = b->cfg->log_cleaner_backoff_ms;
        if (wait < RETRY_FAILED_MS)
            wait = RETRY_FAILED_MS;
        if (j->p)
            j->p->clean_retry_ms = cn_clock_mono_ms() + wait;
        CN_WARN("log cleaner: pass over %s-%d failed: %s; not retried for "
                "%" PRId64 " ms",
                topic ? topic : "(deleted topic)", j->p ? j->p->index : -1,
                cn_strerror(rc), wait);
    }
    /* The old segments' last descriptors close on a worker: their files
     * are unlinked, so the close frees their blocks. */
    enqueue(c, j, PH_FREE);
    /* A deleted topic's log may be waiting for this pass to end. */
    cn_topics_reap(b);
}

static void on_handle_closed(uv_handle_t *h);

static void on_async(uv_async_t *a)
{
    struct cn_cleaner *c = a->data;
    uv_mutex_lock(&c->mu);
    struct job *done = c->done;
    c->done = NULL;
    uv_mutex_unlock(&c->mu);
    while (done) {
        struct job *next = done->qnext;
        finish(c, done);
        done = next;
    }
    if (c->stopping) {
        if (!c->b->clean_running && !c->async_closing) {
            c->async_closing = true;
            uv_close((uv_handle_t *)&c->async, on_handle_closed);
        }
        return;
    }
    /* Straight on: the log just cleaned may not be the only one due. */
    scan(c);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct cn_cleaner *c = h->data;
    if (--c->handles_open > 0)
        return;
    uv_mutex_lock(&c->mu);
    c->quit = true;
    uv_cond_broadcast(&c->cond);
    uv_mutex_unlock(&c->mu);
    for (int i = 0; i < c->nthreads; i++)
        uv_thread_join(&c->threads[i]);
    uv_cond_destroy(&c->cond);
    uv_mutex_destroy(&c->mu);
    free(c->threads);
    free(c);
}

int cn_cleaner_start(struct cn_broker *b, struct cn_cleaner **out)
{
    const struct cn_config *cfg = b->cfg;
    *out = NULL;
    if (!cfg->log_cleaner_enable || cfg->log_cleaner_threads <= 0) {
        CN_INFO("log cleaner off (log.cleaner.enable=%s, "
                "log.cleaner.threads=%d): compacted topics are not cleaned",
                cfg->log_cleaner_enable ? "true" : "false",
                (int)cfg->log_cleaner_threads);
        return 0;
    }
    struct cn_cleaner *c = calloc(1, sizeof *c);
    if (!c)
        return CN_ENOMEM;
    c->b = b;
    c->nthreads = cfg->log_cleaner_threads;
    c->threads = calloc((size_t)c->nthreads, sizeof *c->threads);
    if (!c->threads || uv_mutex_init(&c->mu) != 0) {
        free(c->threads);
        free(c);
        return CN_ENOMEM;
    }
    if (uv_cond_init(&c->cond) != 0) {
        uv_mutex_destroy(&c->mu);
        free(c->threads);
        free(c);
        return CN_ENOMEM;
    }
    atomic_init(&c->cancel, false);
    atomic_init(&c->rate, cfg->log_cleaner_io_max_bytes_per_second);
    c->thr_start_ms = cn_clock_mono_ms();
    c->last_run_end_ms = cn_clock_mono_ms();
    int started = 0;
    for (; started < c->nthreads; started++)
        if (uv_thread_create(&c->threads[started], worker, c) != 0)
            break;
    if (started < c->nthreads) {
        uv_mutex_lock(&c->mu);
        c->quit = true;
        uv_cond_broadcast(&c->cond);
        uv_mutex_unlock(&c->mu);
        for (int i = 0; i < started; i++)
            uv_thread_join(&c->threads[i]);
        uv_cond_destroy(&c->cond);
        uv_mutex_destroy(&c->mu);
        free(c->threads);
        free(c);
        return CN_ENOMEM;
    }
    uv_timer_init(b->loop, &c->timer);
    c->timer.data = c;
    uv_async_init(b->loop, &c->async, on_async);
    c->async.data = c;
    c->handles_open = 2;
    b->cleaner = c;
    /* The first scan waits the backoff too: start-up has enough to do. */
    uv_timer_start(&c->timer, on_timer, (uint64_t)cfg->log_cleaner_backoff_ms,
                   0);
    *out = c;
    return 0;
}

void cn_cleaner_stop(struct cn_cleaner *c)
{
    if (!c)
        return;
    c->stopping = true;
    atomic_store(&c->cancel, true);
    uv_timer_stop(&c->timer);
    /* Jobs no worker has taken yet end now; the rest end as their run
     * sees the cancel flag. */
    uv_mutex_lock(&c->mu);
    struct job *q = c->queue, **keep = &c->queue;
    c->queue = NULL;
    while (q) {
        struct job *next = q->qnext;
        if (q->phase == PH_FREE) {
            /* Closes: the workers do them before they exit. */
            *keep = q;
            keep = &q->qnext;
        } else {
            q->err = -ECANCELED;
            q->qnext = c->done;
            c->done = q;
        }
        q = next;
    }
    *keep = NULL;
    uv_mutex_unlock(&c->mu);
    uv_close((uv_handle_t *)&c->timer, on_handle_closed);
    /* Drain what is done now; on_async ends the rest and closes the async
     * handle after the last; c is freed once both handles closed. */
    on_async(&c->async);
    c->b->cleaner = NULL;
}

void cn_cleaner_config_changed(struct cn_broker *b)
{
    if (b->cleaner)
        atomic_store(&b->cleaner->rate,
                     b->cfg->log_cleaner_io_max_bytes_per_second);
}

void cn_cleaner_forget(struct cn_broker *b, const struct cn_partition *p)
{
    struct job *j = inflight_find(b->cleaner, p);
    if (j)
        atomic_store(&j->cancel, true);
}

void cn_cleaner_get_stats(const struct cn_broker *b,
                          struct cn_cleaner_stats *out)
{
    const struct cn_cleaner *c = b->cleaner;
    memset(out, 0, sizeof *out);
    out->running = b->clean_running;
    if (!c)
        return;
    out->enabled = true;
    out->threads = c->nthreads;
    out->max_dirty_percent = c->max_dirty_percent;
    out->since_last_run_ms = cn_clock_mono_ms() - c->last_run_end_ms;
    out->passes = c->passes;
    out->passes_failed = c->passes_failed;
    out->bytes_read = c->bytes_read;
    out->bytes_written = c->bytes_written;
    out->records_removed = c->records_removed;
    out->last_pass_ms = c->last_pass_ms;
    out->last_error = c->last_error;
    out->swap_loop_ms_max = (double)c->swap_loop_us_max / 1000.0;
    out->swap_worker_ms_last = (double)c->swap_worker_us_last / 1000.0;
}

bool cn_cleaner_partition_state(const struct cn_broker *b,
                                const struct cn_partition *p,
                                struct cn_cleaner_pstate *out)
{
    if (!p || !cleanable_topic(p->topic) || cn_partition_offline(b, p))
        return false;
    struct cn_log_clean_state st;
    if (cn_log_clean_state(p->log, cn_clock_wall_ms(),
                           p->topic->config.min_compaction_lag_ms,
                           cn_partition_lso(p), &st) != 0)
        return false;
    out->dirty_ratio = st.dirty_ratio;
    out->first_dirty = st.first_dirty;
    out->first_uncleanable = st.first_uncleanable;
    out->dirty_bytes = st.dirty_bytes;
    out->cleaning = inflight_find(b->cleaner, p) != NULL;
    out->since_last_pass_ms = p->clean_last_end_ms
                                  ? cn_clock_mono_ms() - p->clean_last_end_ms
                                  : -1;
    out->last_error = p->clean_last_error;
    return true;
}
