/*
 * segment.c - one segment: its files, its in-memory indexes, scanning.
 *
 * The offset index gets an entry for a batch when at least
 * index.interval.bytes of log lie between the previous entry's batch and
 * this one, so a lookup scans at most one interval of headers.  The time
 * index gets an entry when the segment's max timestamp grows and an interval
 * has passed, plus a final one when the segment rolls or the log closes, so
 * its last entry always holds the segment's max timestamp once durable.
 */
#include "log_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/crc32c.h"
#include "base/err.h"
#include "base/say.h"
#include "file.h"

int64_t log_now_ms(const struct cn_log *log)
{
    return log->cfg.now_ms ? log->cfg.now_ms() : cn_clock_wall_ms();
}

int log_bhdr_parse(const uint8_t *p, size_t len, struct log_bhdr *h)
{
    if (len < LOG_BATCH_HDR_BYTES)
        return CN_ETRUNC;
    int32_t blen = (int32_t)log_be32(p + LOG_BATCH_LENGTH_OFF);
    if (blen < LOG_BATCH_HDR_BYTES - LOG_BATCH_OVERHEAD)
        return cn_corrupt("batch length too small");
    if (p[LOG_BATCH_MAGIC_OFF] != 2)
        return cn_corrupt("batch magic not 2");
    h->base_offset = (int64_t)log_be64(p);
    h->total_bytes = (int64_t)blen + LOG_BATCH_OVERHEAD;
    h->magic = (int8_t)p[LOG_BATCH_MAGIC_OFF];
    h->crc = log_be32(p + LOG_BATCH_CRC_OFF);
    h->last_offset_delta = (int32_t)log_be32(p + LOG_BATCH_LAST_DELTA_OFF);
    h->max_timestamp = (int64_t)log_be64(p + LOG_BATCH_MAX_TS_OFF);
    if (h->last_offset_delta < 0)
        return cn_corrupt("negative last offset delta");
    if (h->base_offset < 0 ||
        h->base_offset > INT64_MAX - 1 - h->last_offset_delta)
        return cn_corrupt("batch base offset out of range");
    return 0;
}

int log_seg_path(char *buf, size_t n, const struct cn_log *log, int64_t base,
                 const char *ext)
{
    int r = snprintf(buf, n, "%s/%020lld.%s", log->dir, (long long)base, ext);
    return r < 0 || (size_t)r >= n ? -ENAMETOOLONG : 0;
}

static struct cn_segment *seg_alloc(struct cn_log *log, int64_t base)
{
    struct cn_segment *seg = calloc(1, sizeof *seg);
    if (!seg)
        return NULL;
    seg->log = log;
    seg->base = base;
    seg->next_offset = base;
    seg->log_fd = seg->idx_fd = seg->tidx_fd = seg->txn_fd = -1;
    seg->max_ts = -1;
    seg->max_ts_offset = -1;
    seg->txn_min_first = INT64_MAX;
    return seg;
}

void log_seg_free(struct cn_segment *seg)
{
    if (!seg)
        return;
    for (int i = 0; i < LOG_FILES; i++)
        log_fd_close(seg, (enum log_file)i);
    free(seg->idx);
    free(seg->tidx);
    free(seg->txn);
    free(seg);
}

/* Opens .log, .index and .timeindex through the descriptor cache, which
 * keeps all three open until another segment's files are opened. */
static int seg_open_all(struct cn_segment *seg, int flags)
{
    for (int i = LOG_FILE_LOG; i <= LOG_FILE_TIMEINDEX; i++) {
        int err = log_fd_open(seg, (enum log_file)i, flags);
        if (err)
            return err;
    }
    return 0;
}

int log_seg_create(struct cn_log *log, int64_t base, struct cn_segment **out)
{
    struct cn_segment *seg = seg_alloc(log, base);
    if (!seg)
        return CN_ENOMEM;
    int err = seg_open_all(seg, O_RDWR | O_CREAT | O_TRUNC);
    if (!err) {
        /* A .txnindex left at this base by an older segment (a deletion
         * cut short) would be loaded as ours at the next open. */
        char path[PATH_MAX];
        err = log_seg_path(path, sizeof path, log, base, "txnindex");
        if (!err)
            err = cn_file_ops->unlink(path);
        if (err == -ENOENT)
            err = 0;
    }
    if (!err)
        err = cn_file_sync_dir(log->dir);
    if (err) {
        log_seg_free(seg);
        return err;
    }
    seg->created_ms = log_now_ms(log);
    seg->last_write_ms = seg->created_ms;
    *out = seg;
    return 0;
}

int log_seg_open_files(struct cn_log *log, int64_t base,
                       struct cn_segment **out)
{
    struct cn_segment *seg = seg_alloc(log, base);
    if (!seg)
        return CN_ENOMEM;
    int err = seg_open_all(seg, O_RDWR | O_CREAT);
    if (err) {
        log_seg_free(seg);
        return err;
    }
    *out = seg;
    return 0;
}

int log_seg_open_detached(struct cn_log *log, int64_t base, bool txn,
                          struct cn_segment **out)
{
    struct cn_segment *seg = seg_alloc(log, base);
    if (!seg)
        return CN_ENOMEM;
    int *fds[LOG_FILES] = {&seg->log_fd, &seg->idx_fd, &seg->tidx_fd,
                           &seg->txn_fd};
    int err = 0;
    for (int i = 0; !err && i < (txn ? LOG_FILES : LOG_FILE_TXNINDEX); i++) {
        char path[PATH_MAX];
        err = log_seg_path(path, sizeof path, log, base, log_file_ext[i]);
        if (!err && (*fds[i] = cn_file_ops->open(path, O_RDWR, 0)) < 0) {
            err = *fds[i];
            *fds[i] = -1;
        }
    }
    seg->txn_file = txn && !err;
    if (err) {
        log_seg_free(seg);
        return err;
    }
    *out = seg;
    return 0;
}

int log_seg_unlink(struct cn_log *log, int64_t base)
{
    static const char *const ext[4] = {"log", "index", "timeindex",
                                       "txnindex"};
    char path[PATH_MAX];
    int first = 0;
    for (int i = 0; i < 4; i++) {
        int err = log_seg_path(path, sizeof path, log, base, ext[i]);
        if (!err)
            err = cn_file_ops->unlink(path);
        if (err && err != -ENOENT && !first)
            first = err;
    }
    return first;
}

bool log_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 16;
    while (ncap < need)
        ncap *= 2;
    void *p = realloc(*arr, ncap * elem);
    if (!p)
        return false;
    *arr = p;
    *cap = ncap;
    return true;
}

/* Memory side of indexing a batch at pos; tells which entries it added. */
static int index_mem(const struct cn_log *log, struct cn_segment *seg,
                     const struct log_bhdr *h, int64_t pos, bool *added_idx,
                     bool *added_tidx)
{
    int64_t interval = log->cfg.index_interval_bytes;
    int64_t last = h->base_offset + h->last_offset_delta;
    *added_idx = *added_tidx = false;
    if (seg->idx_bytes >= interval && pos > 0) {
        if (!log_grow((void **)&seg->idx, &seg->idx_cap, seg->idx_n + 1,
                      sizeof *seg->idx))
            return CN_ENOMEM;
        seg->idx[seg->idx_n].rel = (uint32_t)(h->base_offset - seg->base);
        seg->idx[seg->idx_n].pos = (uint32_t)pos;
        seg->idx_n++;
        seg->idx_bytes = 0;
        *added_idx = true;
    }
    seg->idx_bytes += h->total_bytes;
    if (h->max_timestamp > seg->max_ts) {
        seg->max_ts = h->max_timestamp;
        seg->max_ts_offset = last;
        if (seg->tidx_n == 0 || seg->tidx_bytes >= interval) {
            if (!log_grow((void **)&seg->tidx, &seg->tidx_cap,
                          seg->tidx_n + 1, sizeof *seg->tidx))
                return CN_ENOMEM;
            seg->tidx[seg->tidx_n].ts = h->max_timestamp;
            seg->tidx[seg->tidx_n].rel = (uint32_t)(last - seg->base);
            seg->tidx_n++;
            seg->tidx_bytes = 0;
            *added_tidx = true;
        }
    }
    seg->tidx_bytes += h->total_bytes;
    return 0;
}

static int write_idx_entry(struct cn_segment *seg, size_t i)
{
    uint8_t b[LOG_IDX_ENTRY];
    int fd, err = log_fd_get(seg, LOG_FILE_INDEX, &fd);
    if (err)
        return err;
    log_put32(b, seg->idx[i].rel);
    log_put32(b + 4, seg->idx[i].pos);
    return cn_file_pwrite_all(fd, b, sizeof b, (int64_t)i * LOG_IDX_ENTRY);
}

static int write_tidx_entry(struct cn_segment *seg, size_t i)
{
    uint8_t b[LOG_TIDX_ENTRY];
    int fd, err = log_fd_get(seg, LOG_FILE_TIMEINDEX, &fd);
    if (err)
        return err;
    log_put64(b, (uint64_t)seg->tidx[i].ts);
    log_put32(b + 8, seg->tidx[i].rel);
    return cn_file_pwrite_all(fd, b, sizeof b, (int64_t)i * LOG_TIDX_ENTRY);
}

int log_seg_index_batch(struct cn_log *log, struct cn_segment *seg,
                        const struct log_bhdr *h, int64_t pos)
{
    bool ai, at;
    int err = index_mem(log, seg, h, pos, &ai, &at);
    if (!err && ai)
        err = write_idx_entry(seg, seg->idx_n - 1);
    if (!err && at)
        err = write_tidx_entry(seg, seg->tidx_n - 1);
    return err;
}

int log_seg_seal_timeindex(struct cn_segment *seg)
{
    if (seg->max_ts < 0 ||
        (seg->tidx_n > 0 && seg->tidx[seg->tidx_n - 1].ts >= seg->max_ts))
        return 0;
    if (!log_grow((void **)&seg->tidx, &seg->tidx_cap, seg->tidx_n + 1,
                  sizeof *seg->tidx))
        return CN_ENOMEM;
    seg->tidx[seg->tidx_n].ts = seg->max_ts;
    seg->tidx[seg->tidx_n].rel = (uint32_t)(seg->max_ts_offset - seg->base);
    seg->tidx_n++;
    seg->tidx_bytes = 0;
    return write_tidx_entry(seg, seg->tidx_n - 1);
}

int64_t log_seg_lookup(const struct cn_segment *seg, int64_t offset)
{
    if (offset < seg->base || seg->idx_n == 0)
        return 0;
    int64_t rel = offset - seg->base;
    size_t lo = 0, hi = seg->idx_n; /* first entry with rel > target */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((int64_t)seg->idx[mid].rel <= rel)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? 0 : seg->idx[lo - 1].pos;
}

int log_seg_read_hdr(struct cn_segment *seg, int64_t pos,
                     struct log_bhdr *h)
{
    uint8_t b[LOG_BATCH_HDR_BYTES];
    if (pos >= seg->size)
        return CN_ETRUNC;
    if (seg->size - pos < LOG_BATCH_HDR_BYTES)
        return cn_corrupt("torn batch header");
    int fd, err = log_fd_get(seg, LOG_FILE_LOG, &fd);
    if (err)
        return err;
    ssize_t r = cn_file_pread_all(fd, b, sizeof b, pos);
    if (r < 0)
        return (int)r;
    if ((size_t)r < sizeof b)
        return cn_corrupt("short batch header read");
    err = log_bhdr_parse(b, sizeof b, h);
    if (err)
        return err;
    if (h->total_bytes > seg->size - pos)
        return cn_corrupt("batch runs past segment end");
    return 0;
}

void log_seg_mark(const struct cn_segment *seg, struct log_seg_mark *m)
{
    m->size = seg->size;
    m->idx_n = seg->idx_n;
    m->tidx_n = seg->tidx_n;
    m->idx_bytes = seg->idx_bytes;
    m->tidx_bytes = seg->tidx_bytes;
    m->max_ts = seg->max_ts;
    m->max_ts_offset = seg->max_ts_offset;
}

int log_seg_undo(struct cn_segment *seg, const struct log_seg_mark *m)
{
    /* Shrinking frees blocks, so this works on a full disk; the sizes
     * are those the files had (index files hold exactly their entries). */
    int fd, err = log_fd_get(seg, LOG_FILE_LOG, &fd);
    if (!err)
        err = cn_file_ops->ftruncate(fd, m->size);
    if (!err && seg->idx_n != m->idx_n) {
        err = log_fd_get(seg, LOG_FILE_INDEX, &fd);
        if (!err)
            err = cn_file_ops->ftruncate(
                fd, (off_t)(m->idx_n * LOG_IDX_ENTRY));
    }
    if (!err && seg->tidx_n != m->tidx_n) {
        err = log_fd_get(seg, LOG_FILE_TIMEINDEX, &fd);
        if (!err)
            err = cn_file_ops->ftruncate(
                fd, (off_t)(m->tidx_n * LOG_TIDX_ENTRY));
    }
    seg->size = m->size;
    seg->idx_n = m->idx_n;
    seg->tidx_n = m->tidx_n;
    seg->idx_bytes = m->idx_bytes;
    seg->tidx_bytes = m->tidx_bytes;
    seg->max_ts = m->max_ts;
    seg->max_ts_offset = m->max_ts_offset;
    return err;
}

/* Replaces both index files with the in-memory entries. */
static int rewrite_indexes(struct cn_segment *seg)
{
    int err = cn_file_ops->ftruncate(seg->idx_fd, 0);
    if (!err)
        err = cn_file_ops->ftruncate(seg->tidx_fd, 0);
    for (size_t i = 0; !err && i < seg->idx_n; i++)
        err = write_idx_entry(seg, i);
    for (size_t i = 0; !err && i < seg->tidx_n; i++)
        err = write_tidx_entry(seg, i);
    return err;
}

static void reset_mem(struct cn_segment *seg)
{
    seg->idx_n = seg->tidx_n = 0;
    seg->idx_bytes = seg->tidx_bytes = 0;
    seg->max_ts = seg->max_ts_offset = -1;
    seg->next_offset = seg->base;
}

int log_seg_scan(struct cn_segment *seg,
                 int (*fn)(void *arg, const struct log_bhdr *h,
                           const uint8_t *batch, int64_t pos),
                 void *arg, struct log_scan *out)
{
    int64_t pos = 0, expect = seg->base;
    uint8_t *buf = NULL;
    size_t cap = 0;
    int err = 0;
    memset(out, 0, sizeof *out);
    /* Faults found here are reported by the caller, once, with the file
     * and offset; the funnel only records them. */
    cn_corrupt_hush();
    while (pos < seg->size) {
        struct log_bhdr h;
        err = log_seg_read_hdr(seg, pos, &h);
        if (err == CN_ECORRUPT) {
            out->why = cn_corrupt_last();
            err = 0;
            break;
        }
        if (err)
            break;
        if (h.base_offset < expect) {
            /* Before reading the batch: the bound below needs it. */
            out->why = "batch base offset not contiguous";
            break;
        }
        if (h.last_offset_delta > INT32_MAX - 1 - (h.base_offset - seg->base) ||
            pos > (int64_t)UINT32_MAX) {
            out->why = "segment too large for its index";
            break;
        }
        if (cap < (size_t)h.total_bytes) {
            uint8_t *nb = realloc(buf, (size_t)h.total_bytes);
            if (!nb) {
                err = CN_ENOMEM;
                break;
            }
            buf = nb;
            cap = (size_t)h.total_bytes;
        }
        /* Through the cache: the callback may have opened other files
         * and so closed this one. */
        int fd;
        err = log_fd_get(seg, LOG_FILE_LOG, &fd);
        if (err)
            break;
        ssize_t r = cn_file_pread_all(fd, buf, (size_t)h.total_bytes, pos);
        if (r < 0) {
            err = (int)r;
            break;
        }
        if (r < h.total_bytes) {
            out->why = "short read";
            break;
        }
        uint32_t crc = cn_crc32c(0, buf + LOG_BATCH_CRC_FROM,
                                 (size_t)h.total_bytes - LOG_BATCH_CRC_FROM);
        if (crc != h.crc) {
            out->why = "batch CRC mismatch";
            break;
        }
        /* A base above the expected offset is a gap the cleaner left
         * (batches removed), as Kafka allows; below was refused above. */
        if (fn) {
            err = fn(arg, &h, buf, pos);
            if (err) {
                if (err == CN_ECORRUPT) {
                    out->why = cn_corrupt_last();
                    err = 0;
                }
                break;
            }
        }
        pos += h.total_bytes;
        expect = h.base_offset + h.last_offset_delta + 1;
        out->batches++;
    }
    cn_corrupt_unhush();
    free(buf);
    out->good_bytes = pos;
    out->next_offset = expect;
    return err;
}

struct recover_ctx {
    const struct cn_log *log;
    struct cn_segment *seg;
};

static int recover_index(void *arg, const struct log_bhdr *h,
                         const uint8_t *batch, int64_t pos)
{
    struct recover_ctx *rc = arg;
    bool ai, at;
    (void)batch;
    return index_mem(rc->log, rc->seg, h, pos, &ai, &at);
}

int log_seg_recover(struct cn_log *log, struct cn_segment *seg,
                    int64_t *scanned, int64_t *truncated)
{
    int64_t size;
    int err = cn_file_ops->fsize(seg->log_fd, &size);
    if (err)
        return err;
    reset_mem(seg);
    seg->size = size;
    struct recover_ctx rc = {log, seg};
    struct log_scan sc;
    err = log_seg_scan(seg, recover_index, &rc, &sc);
    if (err)
        return err;
    int64_t pos = sc.good_bytes;
    *scanned = size;
    *truncated = size - pos;
    if (pos < size) {
        /* The one line an operator sees for a torn or corrupt tail:
         * partition directory, segment, byte and the first offset cut. */
        CN_WARN("log %s: segment %020lld: %s at byte %lld (offset %lld); "
                "truncating %lld bytes",
                log->dir, (long long)seg->base, sc.why ? sc.why : "?",
                (long long)pos, (long long)sc.next_offset,
                (long long)(size - pos));
        err = cn_file_ops->ftruncate(seg->log_fd, pos);
        if (err)
            return err;
        seg->size = pos;
    }
    seg->next_offset = sc.next_offset;
    return rewrite_indexes(seg);
}

/* Reads a whole index file into a fresh buffer; *n gets its byte size. */
static int slurp(int fd, uint8_t **out, int64_t *n)
{
    int err = cn_file_ops->fsize(fd, n);
    if (err)
        return err;
    *out = NULL;
    if (*n == 0)
        return 0;
    uint8_t *b = malloc((size_t)*n);
    if (!b)
        return CN_ENOMEM;
    ssize_t r = cn_file_pread_all(fd, b, (size_t)*n, 0);
    if (r != *n) {
        free(b);
        return r < 0 ? (int)r : cn_corrupt("index file shrank");
    }
    *out = b;
    return 0;
}

int log_seg_load_trusted(struct cn_log *log, struct cn_segment *seg)
{
    return log_seg_load_at(seg, log->cfg.index_interval_bytes);
}

int log_seg_load_at(struct cn_segment *seg, int64_t index_interval)
{
    uint8_t *b = NULL;
    int64_t n;
    int err = cn_file_ops->fsize(seg->log_fd, &seg->size);
    if (err)
        return err;
    reset_mem(seg);
    if (seg->size > (int64_t)UINT32_MAX)
        return cn_corrupt("segment larger than its index can address");

    /* Offset index: whole entries, strictly increasing, inside the log. */
    err = slurp(seg->idx_fd, &b, &n);
    if (err)
        return err;
    if (n % LOG_IDX_ENTRY) {
        free(b);
        return cn_corrupt("offset index size not a multiple of 8");
    }
    size_t cnt = (size_t)(n / LOG_IDX_ENTRY);
    if (!log_grow((void **)&seg->idx, &seg->idx_cap, cnt, sizeof *seg->idx)) {
        free(b);
        return CN_ENOMEM;
    }
    for (size_t i = 0; i < cnt; i++) {
        struct log_idx_entry e = {log_be32(b + i * LOG_IDX_ENTRY),
                                  log_be32(b + i * LOG_IDX_ENTRY + 4)};
        if ((i > 0 && (e.rel <= seg->idx[i - 1].rel ||
                       e.pos <= seg->idx[i - 1].pos)) ||
            e.pos == 0 || (int64_t)e.pos >= seg->size) {
            free(b);
            return cn_corrupt("offset index entries out of order");
        }
        seg->idx[i] = e;
    }
    seg->idx_n = cnt;
    free(b);

    /* Time index: whole entries, non-decreasing. */
    err = slurp(seg->tidx_fd, &b, &n);
    if (err)
        return err;
    if (n % LOG_TIDX_ENTRY) {
        free(b);
        return cn_corrupt("time index size not a multiple of 12");
    }
    cnt = (size_t)(n / LOG_TIDX_ENTRY);
    if (!log_grow((void **)&seg->tidx, &seg->tidx_cap, cnt,
                  sizeof *seg->tidx)) {
        free(b);
        return CN_ENOMEM;
    }
    for (size_t i = 0; i < cnt; i++) {
        struct log_tidx_entry e = {
            (int64_t)log_be64(b + i * LOG_TIDX_ENTRY),
            log_be32(b + i * LOG_TIDX_ENTRY + 8)};
        if (i > 0 && (e.ts <= seg->tidx[i - 1].ts ||
                      e.rel < seg->tidx[i - 1].rel)) {
            free(b);
            return cn_corrupt("time index entries out of order");
        }
        seg->tidx[i] = e;
    }
    seg->tidx_n = cnt;
    free(b);

    /* Walk headers from the last indexed batch to the end of the log: the
     * entry must name a real batch, batches must chain, and no interval may
     * pass without an entry (else the index lost its tail). */
    int64_t pos = 0, expect = seg->base;
    if (seg->idx_n) {
        pos = seg->idx[seg->idx_n - 1].pos;
        expect = seg->base + seg->idx[seg->idx_n - 1].rel;
    }
    int64_t from = pos;
    while (pos < seg->size) {
        struct log_bhdr h;
        err = log_seg_read_hdr(seg, pos, &h);
        if (err)
            return err == CN_ETRUNC ? cn_corrupt("torn batch") : err;
        /* The indexed batch is exactly where the entry says; after it
         * the cleaner may have left gaps. */
        if (pos == from && seg->idx_n ? h.base_offset != expect
                                      : h.base_offset < expect)
            return cn_corrupt("index entry does not match log");
        if (pos - from >= index_interval && pos > 0 &&
            pos != from)
            return cn_corrupt("offset index lost entries");
        if (h.max_timestamp > seg->max_ts) {
            seg->max_ts = h.max_timestamp;
            seg->max_ts_offset = h.base_offset + h.last_offset_delta;
        }
        pos += h.total_bytes;
        expect = h.base_offset + h.last_offset_delta + 1;
    }
    seg->next_offset = expect;
    seg->idx_bytes = seg->size - from;
    if (seg->tidx_n == 0 && seg->max_ts >= 0)
        return cn_corrupt("time index lost its entries");
    if (seg->tidx_n) {
        struct log_tidx_entry *t = &seg->tidx[seg->tidx_n - 1];
        if ((int64_t)t->rel >= seg->next_offset - seg->base)
            return cn_corrupt("time index points past the log");
        /* A trusted segment was sealed (roll, clean close, recovery), so
         * its last entry holds its max; a later batch above it means the
         * file lost entries from its end. */
        if (seg->max_ts > t->ts)
            return cn_corrupt("time index lost its last entries");
        if (t->ts >= seg->max_ts) {
            seg->max_ts = t->ts;
            seg->max_ts_offset = seg->base + t->rel;
        }
    }
    /* The time index entry spacing restarts here; at worst one entry more. */
    seg->tidx_bytes = index_interval;
    return 0;
}

int log_seg_truncate(struct cn_log *log, struct cn_segment *seg,
                     int64_t offset)
{
    /* Walk from the index entry before the one at or below offset, so the
     * batch before the cut is seen (its end is the segment's new end). */
    size_t k = 0;
    while (k < seg->idx_n && seg->base + (int64_t)seg->idx[k].rel <= offset)
        k++;
    int64_t pos = k >= 2 ? seg->idx[k - 2].pos : 0;
    int64_t next = k >= 2 ? seg->base + seg->idx[k - 2].rel : seg->base;
    while (pos < seg->size) {
        struct log_bhdr h;
        int err = log_seg_read_hdr(seg, pos, &h);
        if (err)
            return err;
        /* A batch holding offset goes whole: a log never ends inside a
         * batch (Kafka's LogSegment.truncateTo does the same). */
        if (h.base_offset + h.last_offset_delta >= offset)
            break;
        pos += h.total_bytes;
        next = h.base_offset + h.last_offset_delta + 1;
    }
    if (pos >= seg->size)
        return 0; /* nothing at or past offset here */

    /* Index entries of batches that go: the offset index names batches by
     * position, the time index by the last offset of the batch. */
    size_t idx_n = seg->idx_n, tidx_n = seg->tidx_n, txn_n = seg->txn_n;
    while (idx_n > 0 && (int64_t)seg->idx[idx_n - 1].pos >= pos)
        idx_n--;
    while (tidx_n > 0 &&
           seg->base + (int64_t)seg->tidx[tidx_n - 1].rel >= next)
        tidx_n--;
    while (txn_n > 0 && seg->txn[txn_n - 1].last_offset >= next)
        txn_n--;

    /* The max timestamp of what is kept: the last time index entry kept
     * is a lower bound; batches after it may have raised it without an
     * entry (the index is sparse), so walk them. */
    int64_t max_ts = -1, max_ts_offset = -1, from = 0;
    if (tidx_n > 0) {
        max_ts = seg->tidx[tidx_n - 1].ts;
        max_ts_offset = seg->base + seg->tidx[tidx_n - 1].rel;
        from = log_seg_lookup(seg, max_ts_offset);
    }
    while (from < pos) {
        struct log_bhdr h;
        int err = log_seg_read_hdr(seg, from, &h);
        if (err)
            return err;
        if (h.max_timestamp > max_ts) {
            max_ts = h.max_timestamp;
            max_ts_offset = h.base_offset + h.last_offset_delta;
        }
        from += h.total_bytes;
    }

    int fd, err = log_fd_get(seg, LOG_FILE_LOG, &fd);
    if (!err)
        err = cn_file_ops->ftruncate(fd, pos);
    if (!err)
        err = log_fd_get(seg, LOG_FILE_INDEX, &fd);
    if (!err)
        err = cn_file_ops->ftruncate(fd, (off_t)(idx_n * LOG_IDX_ENTRY));
    if (!err)
        err = log_fd_get(seg, LOG_FILE_TIMEINDEX, &fd);
    if (!err)
        err = cn_file_ops->ftruncate(fd, (off_t)(tidx_n * LOG_TIDX_ENTRY));
    if (!err && seg->txn_file) {
        err = log_fd_get(seg, LOG_FILE_TXNINDEX, &fd);
        if (!err)
            err = cn_file_ops->ftruncate(fd, (off_t)(txn_n * LOG_TXN_ENTRY));
    }
    if (err)
        return err;
    seg->size = pos;
    seg->next_offset = next;
    seg->idx_n = idx_n;
    seg->tidx_n = tidx_n;
    seg->txn_n = txn_n;
    seg->txn_min_first = INT64_MAX;
    for (size_t i = 0; i < txn_n; i++)
        if (seg->txn[i].first_offset < seg->txn_min_first)
            seg->txn_min_first = seg->txn[i].first_offset;
    seg->idx_bytes = pos - (idx_n > 0 ? (int64_t)seg->idx[idx_n - 1].pos : 0);
    /* At worst one time index entry more, as after a load. */
    seg->tidx_bytes = log->cfg.index_interval_bytes;
    seg->max_ts = max_ts;
    seg->max_ts_offset = max_ts_offset;
    seg->durable = false;
    return 0;
}
