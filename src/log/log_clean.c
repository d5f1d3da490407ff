/*
 * log_clean.c - one cleaning pass over a partition log on disk, its
 * crash-safe swap, its recovery, and the cleaner offset checkpoint (see
 * log_clean.h).  The record decisions are src/clean/clean.c.
 */
#include "log_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/crc32c.h"
#include "base/err.h"
#include "base/failpoint.h"
#include "base/say.h"
#include "file.h"
#include "log_clean.h"
#include "proto/batch.h"

#define MANIFEST "cleaner.swap"
#define MANIFEST_MAGIC "cn-cleaner-swap 1\n"
#define CKPT_FILE "cleaner-offset-checkpoint"
#define OUT_FLUSH (1u << 20) /* cleaned bytes buffered before a write */

/* ---- the job ------------------------------------------------------------ */

struct job_seg {
    struct cn_segment *seg; /* held (refs) until end */
    int64_t base, end;      /* end: the next segment's base */
    int64_t next_offset;    /* its last batch's last offset + 1 */
    int64_t size;
    size_t txn_n;           /* .txnindex entries at begin */
    int64_t created_ms, last_write_ms; /* ages, for the cleaned segment */
};

struct job_group {
    size_t first, n;        /* job segments */
    int64_t base, end;      /* offsets the group covered */
    bool has_txn;           /* the cleaned group has a .txnindex */
    bool written;           /* its .cleaned files exist */
    struct cn_segment *fresh; /* swap: the cleaned segment, loaded and
                               * detached until end lists it */
};

struct cn_log_clean_job {
    struct cn_log *log;     /* only its dir is read off the loop */
    char *dir;
    struct cn_log_clean_params p;
    struct cn_clean_producer *producers;
    int64_t segment_bytes, index_interval;
    struct job_seg *segs;
    size_t nsegs;
    struct cn_aborted_txn *aborted; /* by first_offset */
    size_t naborted;
    int64_t first_dirty, bound, cleaned_to;
    struct job_group *groups;
    size_t ngroups;
    struct cn_log_clean_stats st;
    /* The swap's steps (see log_clean.h): */
    size_t nheld;           /* commit: group segments whose .log is held */
    bool held;              /* commit ran: the swap may go on */
    bool committed;         /* swap: the manifest may be on disk */
    bool swapped;           /* swap: files final, groups loaded */
    bool ckpt_stored;       /* swap: the cleaner checkpoint written */
    int swap_err, ckpt_err; /* swap: its file step's error, the ckpt's */
    int *close_fds;         /* end: old descriptors free closes */
    size_t nclose;
};

static int cmp_first(const void *a, const void *b)
{
    const struct cn_aborted_txn *x = a, *y = b;
    if (x->first_offset != y->first_offset)
        return x->first_offset < y->first_offset ? -1 : 1;
    return (x->last_offset > y->last_offset) -
           (x->last_offset < y->last_offset);
}

static void segs_view(const struct cn_log *log, struct cn_clean_seg **out)
{
    struct cn_clean_seg *v = calloc(log->nsegs, sizeof *v);
    if (v)
        for (size_t i = 0; i < log->nsegs; i++) {
            v[i].base_offset = log->segs[i]->base;
            v[i].max_timestamp = log->segs[i]->max_ts;
            v[i].bytes = log->segs[i]->size;
        }
    *out = v;
}

static int64_t first_dirty_of(const struct cn_log *log)
{
    int64_t fd = log->clean_first_dirty;
    if (fd < log->start_offset)
        fd = log->start_offset;
    if (fd < log->segs[0]->base)
        fd = log->segs[0]->base;
    if (fd > log->end_offset)
        fd = log->end_offset;
    return fd;
}

int cn_log_clean_state(const struct cn_log *log, int64_t now_ms,
                       int64_t min_compaction_lag_ms, int64_t lso,
                       struct cn_log_clean_state *out)
{
    memset(out, 0, sizeof *out);
    out->dirty_earliest_ts = -1;
    if (log->offline || log->nsegs == 0)
        return CN_EOFFLINE;
    struct cn_clean_seg *v;
    segs_view(log, &v);
    if (!v)
        return CN_ENOMEM;
    out->first_dirty = first_dirty_of(log);
    out->first_uncleanable = cn_clean_first_uncleanable(
        v, log->nsegs, out->first_dirty, lso, now_ms, min_compaction_lag_ms);
    out->dirty_ratio = cn_clean_dirty_ratio(v, log->nsegs, out->first_dirty,
                                            out->first_uncleanable);
    for (size_t i = 0; i < log->nsegs; i++) {
        if (v[i].base_offset >= out->first_uncleanable)
            break;
        out->cleanable_bytes += v[i].bytes;
        bool clean = i + 1 < log->nsegs &&
                     v[i + 1].base_offset <= out->first_dirty;
        if (clean)
            continue;
        out->dirty_bytes += v[i].bytes;
    }
    for (size_t i = 0; i + 1 < log->nsegs; i++) {
        if (v[i + 1].base_offset <= out->first_dirty || v[i].max_timestamp < 0)
            continue;
        if (out->dirty_earliest_ts < 0 ||
            v[i].max_timestamp < out->dirty_earliest_ts)
            out->dirty_earliest_ts = v[i].max_timestamp;
    }
    free(v);
    return 0;
}

int64_t cn_log_clean_checkpoint(const struct cn_log *log)
{
    return log->nsegs ? first_dirty_of(log) : 0;
}

static void job_free(struct cn_log_clean_job *j)
{
    if (!j)
        return;
    free(j->dir);
    free(j->producers);
    free(j->segs);
    free(j->aborted);
    free(j->groups);
    free(j->close_fds);
    free(j);
}

int cn_log_clean_begin(struct cn_log *log, const struct cn_log_clean_params *p,
                       struct cn_log_clean_job **out)
{
    if (log->offline)
        return CN_EOFFLINE;
    if (log->clean_busy)
        return -EBUSY;
    struct cn_log_clean_state st;
    int err = cn_log_clean_state(log, p->now_ms, p->min_compaction_lag_ms,
                                 p->lso, &st);
    if (err)
        return err;
    if (st.first_dirty >= st.first_uncleanable)
        return -EAGAIN;
    struct cn_log_clean_job *j = calloc(1, sizeof *j);
    if (!j)
        return CN_ENOMEM;
    j->log = log;
    j->dir = strdup(log->dir);
    j->p = *p;
    j->segment_bytes = log->cfg.segment_bytes;
    j->index_interval = log->cfg.index_interval_bytes;
    j->first_dirty = st.first_dirty;
    j->bound = st.first_uncleanable;
    j->cleaned_to = st.first_dirty;
    j->st.first_dirty = st.first_dirty;
    j->st.cleaned_to = st.first_dirty;
    if (p->n_producers) {
        j->producers = malloc(p->n_producers * sizeof *j->producers);
        if (j->producers)
            memcpy(j->producers, p->producers,
                   p->n_producers * sizeof *j->producers);
    }
    j->p.producers = j->producers;
    size_t n = 0;
    while (n + 1 < log->nsegs && log->segs[n]->base < j->bound)
        n++;
    j->segs = calloc(n ? n : 1, sizeof *j->segs);
    size_t na = 0;
    for (size_t i = 0; i < log->nsegs; i++)
        na += log->segs[i]->txn_n;
    j->aborted = calloc(na ? na : 1, sizeof *j->aborted);
    if (!j->dir || !j->segs || !j->aborted ||
        (p->n_producers && !j->producers)) {
        job_free(j);
        return CN_ENOMEM;
    }
    if (n == 0) {
        job_free(j);
        return -EAGAIN;
    }
    for (size_t i = 0; i < n; i++) {
        struct cn_segment *s = log->segs[i];
        j->segs[i] = (struct job_seg){s,
                                      s->base,
                                      log->segs[i + 1]->base,
                                      s->next_offset,
                                      s->size,
                                      s->txn_n,
                                      s->created_ms,
                                      s->last_write_ms};
        s->refs++;
    }
    j->nsegs = n;
    /* Every aborted transaction with data in the job's segments: its
     * marker may be in a later one, the active one included.  Not only
     * below the bound: a segment holding the LSO is rewritten whole, as
     * Kafka does, and an aborted transaction past the LSO in it must
     * still lose its data and keep its entry. */
    int64_t limit = n ? j->segs[n - 1].end : j->bound;
    for (size_t i = 0; i < log->nsegs; i++)
        for (size_t k = 0; k < log->segs[i]->txn_n; k++)
            if (log->segs[i]->txn[k].first_offset < limit)
                j->aborted[j->naborted++] = log->segs[i]->txn[k];
    qsort(j->aborted, j->naborted, sizeof *j->aborted, cmp_first);
    log->clean_busy = true;
    *out = j;
    return 0;
}

/* ---- run: reading ------------------------------------------------------- */

struct reader {
    int fd;
    int64_t pos, size;
    uint8_t *buf;
    size_t cap;
};

/* Next batch of the segment into r->buf; 1 with *len, 0 at the end. */
static int read_batch(struct cn_log_clean_job *j, struct reader *r,
                      struct log_bhdr *h)
{
    if (r->pos >= r->size)
        return 0;
    uint8_t hb[LOG_BATCH_HDR_BYTES];
    if (r->size - r->pos < LOG_BATCH_HDR_BYTES)
        return cn_corrupt("cleaner: torn batch header");
    ssize_t got = cn_file_pread_all(r->fd, hb, sizeof hb, r->pos);
    if (got < 0)
        return (int)got;
    if ((size_t)got < sizeof hb)
        return cn_corrupt("cleaner: short header read");
    int err = log_bhdr_parse(hb, sizeof hb, h);
    if (err)
        return err;
    if (h->total_bytes > r->size - r->pos)
        return cn_corrupt("cleaner: batch past segment end");
    if (r->cap < (size_t)h->total_bytes) {
        uint8_t *nb = realloc(r->buf, (size_t)h->total_bytes);
        if (!nb)
            return CN_ENOMEM;
        r->buf = nb;
        r->cap = (size_t)h->total_bytes;
    }
    got = cn_file_pread_all(r->fd, r->buf, (size_t)h->total_bytes, r->pos);
    if (got < 0)
        return (int)got;
    if (got < h->total_bytes)
        return cn_corrupt("cleaner: short batch read");
    /* A rewritten batch gets a fresh CRC: checked first, so bit rot is
     * never laundered into a valid-looking batch. */
    if (cn_crc32c(0, r->buf + LOG_BATCH_CRC_FROM,
                  (size_t)h->total_bytes - LOG_BATCH_CRC_FROM) != h->crc)
        return cn_corrupt("cleaner: batch CRC mismatch");
    r->pos += h->total_bytes;
    j->st.bytes_read += h->total_bytes;
    if (j->p.throttle && (err = j->p.throttle(j->p.throttle_arg,
                                              (size_t)h->total_bytes)))
        return err;
    return 1;
}

static int reader_open(struct cn_log_clean_job *j, size_t i, struct reader *r)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%020lld.log", j->dir,
                 (long long)j->segs[i].base) >= (int)sizeof path)
        return -ENAMETOOLONG;
    r->fd = cn_file_ops->open(path, O_RDONLY, 0);
    if (r->fd < 0)
        return r->fd;
    r->pos = 0;
    /* Only what was there at begin: nothing is appended to a rolled
     * segment, but a size read now would be no safer. */
    r->size = j->segs[i].size;
    return 0;
}

static void reader_close(struct reader *r)
{
    if (r->fd >= 0)
        cn_file_ops->close(r->fd);
    r->fd = -1;
}

/* The key map over [first_dirty, bound); sets j->cleaned_to. */
static int build_map(struct cn_log_clean_job *j, struct cn_clean_map *m,
                     struct cn_wr *scratch)
{
    struct cn_clean_txns *t;
    int err = cn_clean_txns_new(&t);
    if (err)
        return err;
    /* Transactions ended below the dirty range would look ongoing
     * forever: the map sees none of their markers. */
    for (size_t k = 0; !err && k < j->naborted; k++) {
        const struct cn_aborted_txn *a = &j->aborted[k];
        if (a->last_offset < j->first_dirty)
            continue;
        struct cn_clean_aborted ca = {a->producer_id, a->first_offset,
                                      a->last_offset};
        err = cn_clean_txns_add_aborted(t, &ca, 1);
    }
    struct reader r = {.fd = -1};
    bool full = false;
    for (size_t i = 0; !err && !full && i < j->nsegs; i++) {
        if (j->segs[i].end <= j->first_dirty)
            continue;
        if ((err = reader_open(j, i, &r)))
            break;
        struct log_bhdr h;
        int rc;
        while ((rc = read_batch(j, &r, &h)) == 1) {
            if (h.base_offset + h.last_offset_delta < j->first_dirty)
                continue;
            if (h.base_offset >= j->bound)
                break;
            cn_wr_reset(scratch);
            rc = cn_clean_map_add(m, t, r.buf, (size_t)h.total_bytes,
                                  scratch);
            if (rc == CN_ETOOBIG) {
                full = true;
                rc = 0;
                break;
            }
            if (rc)
                break;
        }
        if (rc < 0)
            err = rc;
        reader_close(&r);
    }
    free(r.buf);
    cn_clean_txns_free(t);
    if (err)
        return err;
    int64_t latest = cn_clean_map_latest(m);
    /* Not even one batch's keys fit: the pass could never move on.
     * Kafka fails the same way (raise log.cleaner.dedupe.buffer.size). */
    if (full && latest < 0)
        return CN_ETOOBIG;
    /* No batch at all in the dirty range: all of it is clean. */
    j->cleaned_to = latest >= 0 ? latest + 1 : j->bound;
    j->st.keys_mapped = (int64_t)cn_clean_map_count(m);
    return 0;
}

/* ---- run: writing ------------------------------------------------------- */

static int cleaned_path(char *buf, size_t n, const char *dir, int64_t base,
                        const char *ext)
{
    int r = snprintf(buf, n, "%s/%020lld.%s.cleaned", dir, (long long)base,
                     ext);
    return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}

/* One cleaned segment being written. */
struct writer {
    int fd[LOG_FILES];
    int64_t base;
    int64_t size;            /* .log bytes written or buffered */
    int64_t flushed;         /* .log bytes written */
    struct cn_wr out;        /* .log bytes not yet written */
    struct cn_wr idx, tidx, txn;
    int64_t idx_bytes, tidx_bytes, max_ts, max_ts_offset;
    int64_t last_tidx_ts;
    bool any_tidx;
};

static void put_tidx(struct writer *w, int64_t ts, int64_t off)
{
    uint8_t b[LOG_TIDX_ENTRY];
    log_put64(b, (uint64_t)ts);
    log_put32(b + 8, (uint32_t)(off - w->base));
    cn_wr_raw(&w->tidx, b, sizeof b);
    w->last_tidx_ts = ts;
    w->any_tidx = true;
    w->tidx_bytes = 0;
}

/* The index entries of a batch written at pos, by segment.c's rules (a
 * sparse entry every index interval, the time index on a new max). */
static void index_batch(struct cn_log_clean_job *j, struct writer *w,
                        const struct log_bhdr *h, int64_t pos)
{
    if (w->idx_bytes >= j->index_interval && pos > 0) {
        uint8_t b[LOG_IDX_ENTRY];
        log_put32(b, (uint32_t)(h->base_offset - w->base));
        log_put32(b + 4, (uint32_t)pos);
        cn_wr_raw(&w->idx, b, sizeof b);
        w->idx_bytes = 0;
    }
    w->idx_bytes += h->total_bytes;
    if (h->max_timestamp > w->max_ts) {
        w->max_ts = h->max_timestamp;
        w->max_ts_offset = h->base_offset + h->last_offset_delta;
        if (!w->any_tidx || w->tidx_bytes >= j->index_interval)
            put_tidx(w, w->max_ts, w->max_ts_offset);
    }
    w->tidx_bytes += h->total_bytes;
}

static int writer_open(struct cn_log_clean_job *j, int64_t base,
                       struct writer *w)
{
    memset(w, 0, sizeof *w);
    for (int i = 0; i < LOG_FILES; i++)
        w->fd[i] = -1;
    w->base = base;
    w->max_ts = w->max_ts_offset = -1;
    cn_wr_init(&w->out, OUT_FLUSH + 65536);
    cn_wr_init(&w->idx, 4096);
    cn_wr_init(&w->tidx, 4096);
    cn_wr_init(&w->txn, 256);
    for (int i = 0; i < LOG_FILES; i++) {
        char path[PATH_MAX];
        int err = cleaned_path(path, sizeof path, j->dir, base,
                               log_file_ext[i]);
        if (err)
            return err;
        if (i == LOG_FILE_TXNINDEX) {
            /* Made only when needed; none left from an older pass. */
            err = cn_file_ops->unlink(path);
            if (err && err != -ENOENT)
                return err;
            continue;
        }
        w->fd[i] = cn_file_ops->open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (w->fd[i] < 0)
            return w->fd[i];
    }
    return 0;
}

static int writer_flush(struct cn_log_clean_job *j, struct writer *w)
{
    if (w->out.len == 0)
        return 0;
    int err = cn_file_pwrite_all(w->fd[LOG_FILE_LOG], w->out.buf, w->out.len,
                                 w->flushed);
    if (err)
        return err;
    w->flushed += (int64_t)w->out.len;
    j->st.bytes_written += (int64_t)w->out.len;
    size_t n = w->out.len;
    cn_wr_reset(&w->out);
    return j->p.throttle ? j->p.throttle(j->p.throttle_arg, n) : 0;
}

/* Writes the indexes, syncs every file. */
static int writer_finish(struct cn_log_clean_job *j, struct writer *w,
                         bool *has_txn)
{
    int err = writer_flush(j, w);
    if (err)
        return err;
    /* Sealed, as load_trusted expects: the last entry holds the max. */
    if (w->max_ts >= 0 && (!w->any_tidx || w->last_tidx_ts < w->max_ts))
        put_tidx(w, w->max_ts, w->max_ts_offset);
    if (w->idx.err || w->tidx.err || w->txn.err)
        return CN_ENOMEM;
    *has_txn = w->txn.len > 0;
    if (*has_txn) {
        char path[PATH_MAX];
        if ((err = cleaned_path(path, sizeof path, j->dir, w->base,
                                "txnindex")))
            return err;
        w->fd[LOG_FILE_TXNINDEX] =
            cn_file_ops->open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
        if (w->fd[LOG_FILE_TXNINDEX] < 0)
            return w->fd[LOG_FILE_TXNINDEX];
    }
    struct cn_wr *bufs[LOG_FILES] = {NULL, &w->idx, &w->tidx, &w->txn};
    for (int i = LOG_FILE_INDEX; i < LOG_FILES; i++)
        if (w->fd[i] >= 0 && bufs[i]->len &&
            (err = cn_file_pwrite_all(w->fd[i], bufs[i]->buf, bufs[i]->len,
                                      0)))
            return err;
    for (int i = 0; i < LOG_FILES; i++)
        if (w->fd[i] >= 0 && (err = cn_file_ops->fdatasync(w->fd[i])))
            return err;
    return 0;
}

static void writer_close(struct writer *w)
{
    for (int i = 0; i < LOG_FILES; i++)
        if (w->fd[i] >= 0)
            cn_file_ops->close(w->fd[i]);
    cn_wr_fini(&w->out);
    cn_wr_fini(&w->idx);
    cn_wr_fini(&w->tidx);
    cn_wr_fini(&w->txn);
}

/* The original .txnindex entry of the ABORT marker at offset, if any. */
static const struct cn_aborted_txn *
find_abort(const struct cn_log_clean_job *j, int64_t pid, int64_t marker)
{
    for (size_t k = 0; k < j->naborted; k++)
        if (j->aborted[k].last_offset == marker &&
            j->aborted[k].producer_id == pid)
            return &j->aborted[k];
    return NULL;
}

static void put_txn(struct writer *w, const struct cn_aborted_txn *a)
{
    uint8_t b[LOG_TXN_ENTRY] = {0};
    log_put64(b + 2, (uint64_t)a->producer_id);
    log_put64(b + 10, (uint64_t)a->first_offset);
    log_put64(b + 18, (uint64_t)a->last_offset);
    log_put64(b + 26, (uint64_t)a->lso);
    cn_wr_raw(&w->txn, b, sizeof b);
}

/* Groups the segments below cleaned_to by size, as Kafka's
 * groupSegmentsBySize: each group becomes one segment no larger than
 * segment.bytes, its offsets within the index's 32-bit reach. */
static int make_groups(struct cn_log_clean_job *j)
{
    size_t n = 0;
    while (n < j->nsegs && j->segs[n].base < j->cleaned_to)
        n++;
    j->groups = calloc(n ? n : 1, sizeof *j->groups);
    if (!j->groups)
        return CN_ENOMEM;
    for (size_t i = 0; i < n;) {
        struct job_group *g = &j->groups[j->ngroups++];
        g->first = i;
        g->base = j->segs[i].base;
        int64_t bytes = j->segs[i].size;
        i++;
        while (i < n && bytes + j->segs[i].size <= j->segment_bytes &&
               j->segs[i].end - g->base <= INT32_MAX) {
            bytes += j->segs[i].size;
            i++;
        }
        g->n = i - g->first;
        g->end = j->segs[i - 1].end;
    }
    return 0;
}

static int clean_group(struct cn_log_clean_job *j, struct job_group *g,
                       struct cn_clean_pass *pass, struct cn_clean_txns *t,
                       struct cn_wr *scratch)
{
    /* Each aborted transaction is added once, with the group holding its
     * first offset (or the first group, for one begun below the log). */
    for (size_t k = 0; k < j->naborted; k++) {
        const struct cn_aborted_txn *a = &j->aborted[k];
        bool mine = a->first_offset < g->end &&
                    (g == j->groups ? true : a->first_offset >= g->base);
        if (!mine)
            continue;
        struct cn_clean_aborted ca = {a->producer_id, a->first_offset,
                                      a->last_offset};
        int err = cn_clean_txns_add_aborted(t, &ca, 1);
        if (err)
            return err;
    }
    struct writer w;
    struct reader r = {.fd = -1};
    int err = writer_open(j, g->base, &w);
    g->written = true;
    /* The group's last batch stays, emptied if need be: the cleaned
     * segment then ends where the group did (no new gap between segments)
     * and is never empty (recovery takes an empty segment before others
     * for a torn write). */
    cn_clean_pass_retain(pass, j->segs[g->first + g->n - 1].next_offset - 1);
    for (size_t i = g->first; !err && i < g->first + g->n; i++) {
        if ((err = reader_open(j, i, &r)))
            break;
        struct log_bhdr h;
        int rc;
        while ((rc = read_batch(j, &r, &h)) == 1) {
            struct cn_clean_result res;
            size_t before = w.out.len;
            cn_wr_reset(scratch);
            rc = cn_clean_batch(pass, r.buf, (size_t)h.total_bytes, scratch,
                                &w.out, &res);
            if (rc)
                break;
            j->st.records_read += res.records_kept + res.records_dropped;
            j->st.records_removed += res.records_dropped;
            if (!res.kept)
                continue;
            struct log_bhdr nh;
            if ((rc = log_bhdr_parse(w.out.buf + before, w.out.len - before,
                                     &nh)))
                break;
            if (res.records_kept == 0)
                j->st.batches_emptied++;
            index_batch(j, &w, &nh, w.size);
            w.size += nh.total_bytes;
            /* An ABORT marker kept keeps its entry, whatever happened to
             * its data; it goes with the marker. */
            uint8_t attr = r.buf[LOG_BATCH_CRC_FROM + 1];
            if (attr & CN_BATCH_ATTR_CONTROL) {
                int64_t pid = (int64_t)log_be64(r.buf + 43);
                const struct cn_aborted_txn *a =
                    find_abort(j, pid, nh.base_offset);
                if (a)
                    put_txn(&w, a);
            }
            if (w.out.len >= OUT_FLUSH && (rc = writer_flush(j, &w)))
                break;
        }
        if (rc < 0)
            err = rc;
        reader_close(&r);
    }
    free(r.buf);
    if (!err)
        err = writer_finish(j, &w, &g->has_txn);
    writer_close(&w);
    return err;
}

int cn_log_clean_run(struct cn_log_clean_job *j)
{
    int64_t t0 = cn_clock_mono_ms();
    struct cn_clean_map *m = NULL;
    struct cn_clean_txns *t = NULL;
    struct cn_clean_pass *pass = NULL;
    struct cn_wr scratch;
    cn_wr_init(&scratch, 65536);
    int err = cn_clean_map_new(j->p.dedupe_bytes, &m);
    if (!err)
        err = build_map(j, m, &scratch);
    if (!err)
        err = make_groups(j);
    if (!err)
        err = cn_clean_txns_new(&t);
    struct cn_clean_params cp = {j->p.now_ms, j->p.delete_retention_ms};
    if (!err)
        err = cn_clean_pass_new(m, t, j->producers, j->p.n_producers, &cp,
                                &pass);
    for (size_t i = 0; !err && i < j->ngroups; i++)
        err = clean_group(j, &j->groups[i], pass, t, &scratch);
    if (!err && j->ngroups) {
        /* The new directory entries, before anything may rely on them. */
        err = cn_file_sync_dir(j->dir);
        if (!err)
            err = CN_FAILPOINT("clean.written");
    }
    cn_clean_pass_free(pass);
    cn_clean_txns_free(t);
    cn_clean_map_free(m);
    cn_wr_fini(&scratch);
    j->st.run_ms = cn_clock_mono_ms() - t0;
    return err;
}

/* ---- end: the swap ------------------------------------------------------ */

static int unlink_cleaned(const char *dir, int64_t base)
{
    int first = 0;
    for (int i = 0; i < LOG_FILES; i++) {
        char path[PATH_MAX];
        int err = cleaned_path(path, sizeof path, dir, base, log_file_ext[i]);
        if (!err)
            err = cn_file_ops->unlink(path);
        if (err && err != -ENOENT && !first)
            first = err;
    }
    return first;
}

/* The manifest: magic, one "group <base> <end> <has_txn>" line per group,
 * then "crc <hex>" over the lines before it. */
static int manifest_write(const struct cn_log_clean_job *j)
{
    struct cn_wr b;
    cn_wr_init(&b, 256);
    cn_wr_raw(&b, MANIFEST_MAGIC, strlen(MANIFEST_MAGIC));
    for (size_t i = 0; i < j->ngroups; i++) {
        char line[96];
        int n = snprintf(line, sizeof line, "group %" PRId64 " %" PRId64
                                            " %d\n",
                         j->groups[i].base, j->groups[i].end,
                         j->groups[i].has_txn ? 1 : 0);
        cn_wr_raw(&b, line, (size_t)n);
    }
    char line[32];
    int n = snprintf(line, sizeof line, "crc %08" PRIx32 "\n",
                     cn_crc32c(0, b.buf, b.len));
    cn_wr_raw(&b, line, (size_t)n);
    int err = b.err ? CN_ENOMEM
                    : cn_file_write_atomic(j->dir, MANIFEST, b.buf, b.len);
    cn_wr_fini(&b);
    return err;
}

struct mgroup {
    int64_t base, end;
    int has_txn;
};

/* Reads dir's manifest: 1 and the groups when intact, 0 when absent or
 * damaged (a crash before its rename: nothing was swapped). */
static int manifest_read(const char *dir, struct mgroup **out, size_t *n_out)
{
    char path[PATH_MAX];
    *out = NULL;
    *n_out = 0;
    if (snprintf(path, sizeof path, "%s/" MANIFEST, dir) >= (int)sizeof path)
        return -ENAMETOOLONG;
    int fd = cn_file_open(path, O_RDONLY, 0);
    if (fd == -ENOENT)
        return 0;
    if (fd < 0)
        return fd;
    int64_t size;
    int err = cn_file_ops->fsize(fd, &size);
    char *buf = NULL;
    if (!err && (size <= 0 || size > (1 << 24)))
        err = 1;
    if (!err && !(buf = malloc((size_t)size + 1)))
        err = CN_ENOMEM;
    if (!err && cn_file_pread_all(fd, buf, (size_t)size, 0) != size)
        err = 1;
    cn_file_ops->close(fd);
    if (err) {
        free(buf);
        return err == 1 ? 0 : err;
    }
    buf[size] = '\0';
    char *crc_line = strstr(buf, "\ncrc ");
    unsigned int crc;
    if (!crc_line || sscanf(crc_line + 1, "crc %8x", &crc) != 1 ||
        cn_crc32c(0, buf, (size_t)(crc_line + 1 - buf)) != crc ||
        strncmp(buf, MANIFEST_MAGIC, strlen(MANIFEST_MAGIC)) != 0) {
        free(buf);
        return 0;
    }
    struct mgroup *g = NULL;
    size_t n = 0, cap = 0;
    char *p = buf + strlen(MANIFEST_MAGIC);
    while (p < crc_line + 1) {
        long long b, e;
        int t;
        if (sscanf(p, "group %lld %lld %d", &b, &e, &t) != 3 || b < 0 ||
            e < b) {
            free(g);
            free(buf);
            return 0;
        }
        if (!log_grow((void **)&g, &cap, n + 1, sizeof *g)) {
            free(g);
            free(buf);
            return CN_ENOMEM;
        }
        g[n++] = (struct mgroup){b, e, t};
        p = strchr(p, '\n') + 1;
    }
    free(buf);
    *out = g;
    *n_out = n;
    return 1;
}

/* Makes the files of one committed group final: the old segments after
 * its first gone, the .cleaned files over the first's.  Idempotent, so
 * recovery can run it again over a half-done swap. */
static int finish_group(const char *dir, const struct mgroup *g,
                        const int64_t *bases, size_t nb)
{
    char from[PATH_MAX], to[PATH_MAX];
    int err = 0;
    for (size_t i = 0; i < nb && !err; i++) {
        if (bases[i] <= g->base || bases[i] >= g->end)
            continue;
        for (int k = 0; k < LOG_FILES && !err; k++) {
            if (snprintf(to, sizeof to, "%s/%020lld.%s", dir,
                         (long long)bases[i], log_file_ext[k]) >=
                (int)sizeof to)
                return -ENAMETOOLONG;
            err = cn_file_ops->unlink(to);
            if (err == -ENOENT)
                err = 0;
        }
    }
    /* The .log last: until it is renamed the group's first segment still
     * looks old to anyone listing the directory. */
    static const int order[LOG_FILES] = {LOG_FILE_INDEX, LOG_FILE_TIMEINDEX,
                                         LOG_FILE_TXNINDEX, LOG_FILE_LOG};
    for (int o = 0; o < LOG_FILES && !err; o++) {
        int k = order[o];
        if ((err = cleaned_path(from, sizeof from, dir, g->base,
                                log_file_ext[k])))
            break;
        if (snprintf(to, sizeof to, "%s/%020lld.%s", dir, (long long)g->base,
                     log_file_ext[k]) >= (int)sizeof to)
            return -ENAMETOOLONG;
        err = cn_file_ops->rename(from, to);
        if (err == -ENOENT) {
            err = 0;
            /* No cleaned .txnindex: the group's new segment has none. */
            if (k == LOG_FILE_TXNINDEX && !g->has_txn) {
                err = cn_file_ops->unlink(to);
                if (err == -ENOENT)
                    err = 0;
            }
        }
    }
    return err;
}

static int remove_manifest(const char *dir)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/" MANIFEST, dir) >= (int)sizeof path)
        return -ENAMETOOLONG;
    int err = cn_file_ops->unlink(path);
    if (err == -ENOENT)
        err = 0;
    return err ? err : cn_file_sync_dir(dir);
}


int log_clean_recover(struct cn_log *log)
{
    struct mgroup *g;
    size_t ng;
    int err = manifest_read(log->dir, &g, &ng);
    if (err < 0)
        return err;
    if (err == 1) {
        int64_t *bases = NULL;
        size_t nb = 0;
        CN_WARN("log %s: finishing a cleaning swap a stop interrupted "
                "(%zu segment group(s))",
                log->dir, ng);
        err = log_list_bases(log->dir, &bases, &nb);
        for (size_t i = 0; !err && i < ng; i++)
            err = finish_group(log->dir, &g[i], bases, nb);
        free(bases);
        free(g);
        if (!err)
            err = cn_file_sync_dir(log->dir);
        if (!err)
            err = remove_manifest(log->dir);
        if (err)
            return err;
    }
    /* Whatever is left of a pass that did not commit. */
    DIR *d = opendir(log->dir);
    bool removed = false;
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            size_t l = strlen(de->d_name);
            if (l > 8 && strcmp(de->d_name + l - 8, ".cleaned") == 0) {
                char path[PATH_MAX];
                if (snprintf(path, sizeof path, "%s/%s", log->dir,
                             de->d_name) < (int)sizeof path &&
                    cn_file_ops->unlink(path) == 0)
                    removed = true;
            }
        }
        closedir(d);
    }
    if (removed)
        CN_INFO("log %s: removed the files of an unfinished cleaning pass",
                log->dir);
    log->clean_first_dirty = log_clean_ckpt_lookup(log->dir);
    return 0;
}

/* Drops the job's hold on its segments.  Those the swap took out of the
 * list give their descriptors to j->close_fds: their files are unlinked
 * and the last close frees the blocks, which free does off the loop. */
static void release_job(struct cn_log *log, struct cn_log_clean_job *j)
{
    for (size_t i = 0; i < j->nsegs; i++) {
        struct cn_segment *s = j->segs[i].seg;
        if (i < j->nheld) {
            s->replaced = false;
            if (!s->dead) {
                log_fd_unhold(s, LOG_FILE_LOG);
            } else {
                for (int k = 0; k < LOG_FILES; k++) {
                    int fd = log_fd_take(s, (enum log_file)k);
                    if (fd >= 0)
                        j->close_fds[j->nclose++] = fd;
                }
            }
        }
        s->refs--;
        if (s->dead && s->refs == 0)
            log_seg_free(s);
    }
    log->clean_busy = false;
    log->clean_swapping = false;
}

/* True when every segment of the job is still listed, unchanged. */
static bool job_still_valid(const struct cn_log *log,
                            const struct cn_log_clean_job *j, size_t *at)
{
    if (j->nsegs == 0)
        return false;
    size_t i = 0;
    while (i < log->nsegs && log->segs[i] != j->segs[0].seg)
        i++;
    if (i == log->nsegs || log->nsegs - i <= j->nsegs)
        return false;
    for (size_t k = 0; k < j->nsegs; k++) {
        const struct cn_segment *s = log->segs[i + k];
        if (s != j->segs[k].seg || s->dead || s->size != j->segs[k].size ||
            s->txn_n != j->segs[k].txn_n)
            return false;
    }
    *at = i;
    return true;
}

int cn_log_clean_commit(struct cn_log *log, struct cn_log_clean_job *j)
{
    size_t at;
    if (j->held)
        return CN_EINVAL;
    if (log->offline)
        return CN_EOFFLINE;
    if (!job_still_valid(log, j, &at))
        return -EAGAIN;
    size_t n = 0;
    for (size_t i = 0; i < j->ngroups; i++)
        n += j->groups[i].n;
    j->close_fds = malloc((n ? n : 1) * LOG_FILES * sizeof *j->close_fds);
    if (!j->close_fds)
        return CN_ENOMEM;
    /* Reads go on through these descriptors while the worker renames
     * and unlinks the names: opened now (if the cache had closed them)
     * the old bytes stay readable whatever the names become. */
    for (size_t i = 0; i < n; i++) {
        int err = log_fd_hold(j->segs[i].seg, LOG_FILE_LOG);
        if (err) {
            while (i-- > 0)
                log_fd_unhold(j->segs[i].seg, LOG_FILE_LOG);
            return err;
        }
    }
    for (size_t i = 0; i < n; i++)
        j->segs[i].seg->replaced = true;
    j->nheld = n;
    j->held = true;
    log->clean_swapping = true;
    return 0;
}

static int ckpt_store(const char *partition_dir, int64_t offset);

/* The files of the swap: manifest, every group renamed in and loaded
 * (detached), directory synced, manifest removed.  Sets committed once
 * the manifest may exist, swapped when all of it is done. */
static int swap_files(struct cn_log_clean_job *j)
{
    int64_t *bases = malloc(j->nsegs * sizeof *bases);
    if (!bases)
        return CN_ENOMEM;
    for (size_t i = 0; i < j->nsegs; i++)
        bases[i] = j->segs[i].base;
    int err = manifest_write(j);
    /* Not written after all only if it is surely gone: recovery would
     * finish a manifest it finds, over .cleaned files end removes. */
    if (err && remove_manifest(j->dir) != 0)
        j->committed = true;
    if (err) {
        free(bases);
        return err;
    }
    j->committed = true;
    for (size_t gi = 0; gi < j->ngroups; gi++) {
        struct job_group *g = &j->groups[gi];
        struct mgroup mg = {g->base, g->end, g->has_txn};
        err = finish_group(j->dir, &mg, bases, j->nsegs);
        if (!err && gi == 0)
            err = CN_FAILPOINT("clean.swap");
        struct cn_segment *seg = NULL;
        if (!err)
            err = log_seg_open_detached(j->log, g->base, g->has_txn, &seg);
        if (!err) {
            err = log_seg_load_at(seg, j->index_interval);
            if (!err && g->has_txn)
                err = log_seg_load_txnindex(j->log, seg);
            if (err)
                log_seg_free(seg);
            else
                g->fresh = seg;
        }
        if (err)
            break;
    }
    free(bases);
    if (!err)
        err = cn_file_sync_dir(j->dir);
    if (!err)
        err = CN_FAILPOINT("clean.index");
    if (!err)
        err = remove_manifest(j->dir);
    return err;
}

int cn_log_clean_swap(struct cn_log_clean_job *j)
{
    if (!j->held)
        return CN_EINVAL;
    /* The last moment a deletion or a stop can still call it off. */
    int err = j->p.throttle ? j->p.throttle(j->p.throttle_arg, 0) : 0;
    if (!err && j->ngroups)
        err = swap_files(j);
    if (err) {
        j->swap_err = err;
        return err;
    }
    j->swapped = true;
    err = CN_FAILPOINT("clean.ckpt.before");
    if (!err)
        err = ckpt_store(j->dir, j->cleaned_to);
    if (!err) {
        j->ckpt_stored = true;
        err = CN_FAILPOINT("clean.ckpt.after");
    }
    j->ckpt_err = err;
    return err;
}

/* The loop's part of a swap the worker finished: the cleaned segments
 * replace their groups in the list.  Memory only; no call here blocks. */
static void swap_list(struct cn_log *log, struct cn_log_clean_job *j)
{
    size_t idx;
    /* Nothing deletes or appends to the job's segments while it swaps;
     * a list that changed anyway no longer matches the directory. */
    if (!job_still_valid(log, j, &idx)) {
        log_go_offline(log, "cleaner swap", CN_ECORRUPT);
        return;
    }
    for (size_t gi = 0; gi < j->ngroups; gi++) {
        struct job_group *g = &j->groups[gi];
        struct cn_segment *seg = g->fresh;
        log_segs_remove(log, idx, g->n);
        seg->durable = true;
        /* The ages retention and segment.ms go by are the old ones'. */
        seg->created_ms = j->segs[g->first].created_ms;
        seg->last_write_ms = j->segs[g->first + g->n - 1].last_write_ms;
        log_fd_adopt(seg);
        /* Never grows the array: g->n >= 1 segments just left it. */
        int err = log_segs_insert(log, idx, seg);
        if (err) {
            log_seg_free(seg);
            log_go_offline(log, "cleaner swap", err);
            return;
        }
        g->fresh = NULL;
        idx++;
        j->st.segments_after++;
    }
    log_recompute_max_ts(log);
}

int cn_log_clean_end(struct cn_log *log, struct cn_log_clean_job *j, int err,
                     struct cn_log_clean_stats *stats)
{
    /* Not handed to a worker's swap: the whole of it here. */
    if (!err && !j->held) {
        err = cn_log_clean_commit(log, j);
        if (!err)
            err = cn_log_clean_swap(j);
    }
    if (j->committed && !j->swapped) {
        /* Half swapped: the directory is finished by the next open, and
         * until then the list no longer matches it. */
        err = j->swap_err ? j->swap_err : err;
        log_go_offline(log, "cleaner swap", err);
    } else if (j->swapped) {
        for (size_t i = 0; i < j->ngroups; i++)
            j->st.segments_before += (int32_t)j->groups[i].n;
        if (!log->offline)
            swap_list(log, j);
        if (j->ckpt_stored)
            log->clean_first_dirty = j->cleaned_to;
        err = j->ckpt_err;
        /* A checkpoint not written costs only a pass over clean data. */
        if (err)
            CN_WARN("log %s: cleaner checkpoint not written: %s", log->dir,
                    cn_strerror(err));
        j->st.cleaned_to = j->cleaned_to;
    } else {
        if (!err)
            err = -EAGAIN;
        for (size_t i = 0; i < j->ngroups; i++)
            if (j->groups[i].written)
                unlink_cleaned(j->dir, j->groups[i].base);
    }
    if (!log->offline) {
        struct cn_log_clean_state cs;
        if (cn_log_clean_state(log, j->p.now_ms, j->p.min_compaction_lag_ms,
                               j->p.lso, &cs) == 0)
            j->st.dirty_ratio_after = cs.dirty_ratio;
    }
    if (stats)
        *stats = j->st;
    release_job(log, j);
    return err;
}

void cn_log_clean_free(struct cn_log_clean_job *j)
{
    if (!j)
        return;
    for (size_t i = 0; i < j->nclose; i++)
        cn_file_ops->close(j->close_fds[i]);
    for (size_t i = 0; i < j->ngroups; i++)
        log_seg_free(j->groups[i].fresh);
    job_free(j);
}

void cn_log_clean_abandon(struct cn_log *log, struct cn_log_clean_job *j)
{
    (void)cn_log_clean_end(log, j, CN_EFAILPOINT, NULL);
    cn_log_clean_free(j);
}

int cn_log_clean_now(struct cn_log *log, const struct cn_log_clean_params *p,
                     struct cn_log_clean_stats *stats)
{
    struct cn_log_clean_job *j;
    int err = cn_log_clean_begin(log, p, &j);
    if (err)
        return err;
    err = cn_log_clean_end(log, j, cn_log_clean_run(j), stats);
    cn_log_clean_free(j);
    return err;
}

/* ---- cleaner-offset-checkpoint ------------------------------------------ */

/* [p, end) is one or more decimal digits. */
static bool digits(const char *p, const char *end)
{
    if (p >= end)
        return false;
    for (; p < end; p++)
        if (*p < '0' || *p > '9')
            return false;
    return true;
}

int cn_clean_ckpt_parse(const char *buf, size_t len,
                        struct cn_clean_ckpt_entry **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    size_t pos = 0;
    /* One line into line[]; false at the end or for an over-long line. */
    char line[512];
    long long count = -1;
    struct cn_clean_ckpt_entry *e = NULL;
    size_t n = 0;
    for (int ln = 0; pos < len; ln++) {
        size_t l = 0;
        while (pos < len && buf[pos] != '\n') {
            if (l + 1 >= sizeof line || buf[pos] == '\0')
                goto bad;
            line[l++] = buf[pos++];
        }
        if (pos >= len)
            goto bad; /* every line ends with a newline */
        pos++;
        line[l] = '\0';
        char *end;
        if (ln == 0) {
            if (strcmp(line, "0") != 0)
                goto bad;
            continue;
        }
        if (ln == 1) {
            if (!digits(line, line + l) || l > 7)
                goto bad;
            count = strtoll(line, &end, 10);
            if (count > 1000000)
                goto bad;
            e = calloc(count ? (size_t)count : 1, sizeof *e);
            if (!e)
                return CN_ENOMEM;
            continue;
        }
        if ((long long)n >= count)
            goto bad;
        /* "<topic> <partition> <offset>"; topics hold no spaces. */
        char *sp1 = strchr(line, ' ');
        if (!sp1 || sp1 == line || (size_t)(sp1 - line) >= sizeof e->topic)
            goto bad;
        char *sp2 = strchr(sp1 + 1, ' ');
        if (!sp2)
            goto bad;
        /* Digits only: strtoll alone would take signs, blanks and
         * out-of-range values. */
        if (!digits(sp1 + 1, sp2) || !digits(sp2 + 1, line + l))
            goto bad;
        errno = 0;
        long long part = strtoll(sp1 + 1, &end, 10);
        if (part > INT32_MAX)
            goto bad;
        long long off = strtoll(sp2 + 1, &end, 10);
        if (errno)
            goto bad;
        memcpy(e[n].topic, line, (size_t)(sp1 - line));
        e[n].topic[sp1 - line] = '\0';
        e[n].partition = (int32_t)part;
        e[n].offset = off;
        n++;
    }
    if (count < 0 || (long long)n != count)
        goto bad;
    *out = e;
    *n_out = n;
    return 0;
bad:
    free(e);
    return cn_corrupt("cleaner-offset-checkpoint");
}

int cn_clean_ckpt_format(const struct cn_clean_ckpt_entry *e, size_t n,
                         struct cn_wr *out)
{
    char line[320];
    int l = snprintf(line, sizeof line, "0\n%zu\n", n);
    cn_wr_raw(out, line, (size_t)l);
    for (size_t i = 0; i < n; i++) {
        l = snprintf(line, sizeof line, "%s %" PRId32 " %" PRId64 "\n",
                     e[i].topic, e[i].partition, e[i].offset);
        cn_wr_raw(out, line, (size_t)l);
    }
    return out->err ? CN_ENOMEM : 0;
}

/* Partitions of one log dir may be cleaned by several workers' ends on
 * different loops; the file is theirs together. */
static pthread_mutex_t ckpt_lock = PTHREAD_MUTEX_INITIALIZER;

/* "<log dir>/<topic>-<partition>" into its parts; false if not so. */
static bool split_dir(const char *pdir, char *logdir, size_t ln, char *topic,
                      size_t tn, int32_t *part)
{
    const char *slash = strrchr(pdir, '/');
    const char *name = slash ? slash + 1 : pdir;
    const char *dash = strrchr(name, '-');
    if (!dash || dash == name || !dash[1])
        return false;
    char *end;
    long long p = strtoll(dash + 1, &end, 10);
    if (*end || p < 0 || p > INT32_MAX)
        return false;
    size_t tl = (size_t)(dash - name);
    size_t dl = slash ? (size_t)(slash - pdir) : 1;
    if (tl >= tn || dl >= ln)
        return false;
    memcpy(topic, name, tl);
    topic[tl] = '\0';
    if (slash) {
        memcpy(logdir, pdir, dl);
        logdir[dl] = '\0';
        if (dl == 0)
            snprintf(logdir, ln, "/");
    } else {
        snprintf(logdir, ln, ".");
    }
    *part = (int32_t)p;
    return true;
}

/* Loads the log dir's file; a missing one is empty, a damaged one too
 * (said once: every partition is then cleaned again from its start). */
static int ckpt_load(const char *logdir, struct cn_clean_ckpt_entry **e,
                     size_t *n)
{
    char path[PATH_MAX];
    *e = NULL;
    *n = 0;
    if (snprintf(path, sizeof path, "%s/" CKPT_FILE, logdir) >=
        (int)sizeof path)
        return -ENAMETOOLONG;
    int fd = cn_file_open(path, O_RDONLY, 0);
    if (fd == -ENOENT)
        return 0;
    if (fd < 0)
        return fd;
    int64_t size;
    int err = cn_file_ops->fsize(fd, &size);
    char *buf = NULL;
    if (!err && size > (64 << 20))
        err = CN_ECORRUPT;
    if (!err && !(buf = malloc((size_t)size + 1)))
        err = CN_ENOMEM;
    if (!err && cn_file_pread_all(fd, buf, (size_t)size, 0) != size)
        err = -EIO;
    cn_file_ops->close(fd);
    if (!err) {
        cn_corrupt_hush();
        err = cn_clean_ckpt_parse(buf, (size_t)size, e, n);
        cn_corrupt_unhush();
        if (err == CN_ECORRUPT) {
            CN_WARN("%s is damaged; ignoring it (compacted partitions are "
                    "cleaned again from their start)",
                    path);
            err = 0;
        }
    }
    free(buf);
    return err;
}

int64_t log_clean_ckpt_lookup(const char *pdir)
{
    char logdir[PATH_MAX], topic[256];
    int32_t part;
    if (!split_dir(pdir, logdir, sizeof logdir, topic, sizeof topic, &part))
        return -1;
    pthread_mutex_lock(&ckpt_lock);
    struct cn_clean_ckpt_entry *e;
    size_t n;
    int64_t off = -1;
    if (ckpt_load(logdir, &e, &n) == 0) {
        for (size_t i = 0; i < n; i++)
            if (e[i].partition == part && strcmp(e[i].topic, topic) == 0)
                off = e[i].offset;
        free(e);
    }
    pthread_mutex_unlock(&ckpt_lock);
    return off;
}

/* Sets (offset >= 0) or drops (offset < 0) the partition's line. */
static int ckpt_update(const char *pdir, int64_t offset)
{
    char logdir[PATH_MAX], topic[256];
    int32_t part;
    if (!split_dir(pdir, logdir, sizeof logdir, topic, sizeof topic, &part))
        return 0; /* not a partition directory: nothing to keep */
    pthread_mutex_lock(&ckpt_lock);
    struct cn_clean_ckpt_entry *e;
    size_t n;
    int err = ckpt_load(logdir, &e, &n);
    if (err) {
        pthread_mutex_unlock(&ckpt_lock);
        return err;
    }
    size_t i = 0;
    while (i < n && !(e[i].partition == part && !strcmp(e[i].topic, topic)))
        i++;
    bool changed = true;
    if (offset >= 0) {
        if (i == n) {
            struct cn_clean_ckpt_entry *ne = realloc(e, (n + 1) * sizeof *e);
            if (!ne) {
                free(e);
                pthread_mutex_unlock(&ckpt_lock);
                return CN_ENOMEM;
            }
            e = ne;
            memset(&e[n], 0, sizeof *e);
            snprintf(e[n].topic, sizeof e[n].topic, "%s", topic);
            e[n].partition = part;
            n++;
        }
        e[i].offset = offset;
    } else if (i < n) {
        e[i] = e[n - 1];
        n--;
    } else {
        changed = false;
    }
    if (changed) {
        struct cn_wr b;
        cn_wr_init(&b, 64 + n * 64);
        err = cn_clean_ckpt_format(e, n, &b);
        if (!err)
            err = cn_file_write_atomic(logdir, CKPT_FILE, b.buf, b.len);
        cn_wr_fini(&b);
    }
    free(e);
    pthread_mutex_unlock(&ckpt_lock);
    return err;
}

static int ckpt_store(const char *pdir, int64_t offset)
{
    return ckpt_update(pdir, offset);
}

int cn_log_clean_forget(const char *partition_dir)
{
    return ckpt_update(partition_dir, -1);
}
