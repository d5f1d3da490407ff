/*
 * txnindex.c - the per-segment aborted-transaction index (.txnindex).
 *
 * Fetch in read_committed must tell the consumer which aborted
 * transactions overlap the batches it returns, without reading the log:
 * every ABORT marker adds an entry to the index of the segment it lands in,
 * and a lookup walks only the segments the fetched range touches.
 *
 * File: a sequence of 34-byte big-endian entries, as Kafka writes them
 *
 *    0  int16  version, 0
 *    2  int64  producer id
 *   10  int64  first offset of the aborted transaction (may lie in an
 *              older segment)
 *   18  int64  offset of the abort marker, in this segment
 *   26  int64  last stable offset when the marker was written
 *
 * Entries are in marker order, so last_offset strictly increases.  The file
 * is created at the segment's first abort and appended to, one pwrite per
 * entry; a crash may leave it short or torn, which the load cuts off (the
 * producer-state replay then adds the missing entries again).
 */
#include "log_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>

#include "base/err.h"
#include "base/say.h"
#include "file.h"

#define TXN_VERSION 0

static void txn_encode(uint8_t *b, const struct cn_aborted_txn *t)
{
    b[0] = 0;
    b[1] = TXN_VERSION;
    log_put64(b + 2, (uint64_t)t->producer_id);
    log_put64(b + 10, (uint64_t)t->first_offset);
    log_put64(b + 18, (uint64_t)t->last_offset);
    log_put64(b + 26, (uint64_t)t->lso);
}

/* Decodes one entry; false if it cannot belong to seg after prev_last
 * (the last_offset of the entry before it, or -1). */
static bool txn_decode(const uint8_t *b, const struct cn_segment *seg,
                       int64_t prev_last, struct cn_aborted_txn *t)
{
    int16_t version = (int16_t)((uint16_t)b[0] << 8 | b[1]);
    t->producer_id = (int64_t)log_be64(b + 2);
    t->first_offset = (int64_t)log_be64(b + 10);
    t->last_offset = (int64_t)log_be64(b + 18);
    t->lso = (int64_t)log_be64(b + 26);
    return version == TXN_VERSION && t->last_offset >= seg->base &&
           t->last_offset < seg->next_offset && t->last_offset > prev_last &&
           t->first_offset >= 0 && t->first_offset <= t->last_offset;
}

int log_seg_load_txnindex(struct cn_log *log, struct cn_segment *seg)
{
    seg->txn_n = 0;
    seg->txn_min_first = INT64_MAX;
    int fd, err;
    if (!seg->txn_file) {
        err = log_fd_open(seg, LOG_FILE_TXNINDEX, 0);
        if (err == -ENOENT)
            return 0; /* no abort in this segment (or not re-added yet) */
        if (err)
            return err;
        seg->txn_file = true;
    }
    err = log_fd_get(seg, LOG_FILE_TXNINDEX, &fd);
    if (err)
        return err;
    int64_t size;
    err = cn_file_ops->fsize(fd, &size);
    if (err)
        return err;
    size_t cnt = (size_t)(size / LOG_TXN_ENTRY);
    uint8_t *b = NULL;
    if (cnt > 0) {
        b = malloc(cnt * LOG_TXN_ENTRY);
        if (!b)
            return CN_ENOMEM;
        ssize_t r = cn_file_pread_all(fd, b, cnt * LOG_TXN_ENTRY, 0);
        if (r < 0) {
            err = (int)r;
            goto out_free;
        }
        cnt = (size_t)r / LOG_TXN_ENTRY; /* shrank meanwhile: keep less */
        if (!log_grow((void **)&seg->txn, &seg->txn_cap, cnt,
                      sizeof *seg->txn)) {
            err = CN_ENOMEM;
            goto out_free;
        }
    }
    size_t good = 0;
    int64_t prev = -1;
    while (good < cnt &&
           txn_decode(b + good * LOG_TXN_ENTRY, seg, prev, &seg->txn[good])) {
        prev = seg->txn[good].last_offset;
        if (seg->txn[good].first_offset < seg->txn_min_first)
            seg->txn_min_first = seg->txn[good].first_offset;
        good++;
    }
    seg->txn_n = good;
    int64_t keep = (int64_t)good * LOG_TXN_ENTRY;
    if (keep < size) {
        /* A torn append, or markers the log recovery cut off: what follows
         * the first bad entry cannot be trusted either. */
        CN_WARN("log %s: segment %020lld: .txnindex keeps %zu of %lld "
                "bytes' entries; truncating %lld bytes",
                log->dir, (long long)seg->base, good, (long long)size,
                (long long)(size - keep));
        err = cn_file_ops->ftruncate(fd, keep);
        if (!err)
            err = cn_file_ops->fdatasync(fd);
    }
out_free:
    free(b);
    return err;
}

int cn_log_txnindex_add(struct cn_log *log, const struct cn_aborted_txn *t)
{
    if (log->offline)
        return CN_EOFFLINE;
    /* The load would drop such an entry and every one after it. */
    if (t->first_offset < 0 || t->first_offset > t->last_offset)
        return CN_EINVAL;
    if (t->last_offset < log->segs[0]->base ||
        t->last_offset >= log->end_offset)
        return CN_ERANGE;
    size_t si = log_find_seg(log, t->last_offset);
    struct cn_segment *seg = log->segs[si];
    if (t->last_offset < seg->base || t->last_offset >= seg->next_offset)
        return CN_ERANGE;
    if (seg->txn_n > 0 &&
        seg->txn[seg->txn_n - 1].last_offset >= t->last_offset)
        return 0; /* already indexed (start-up replay) */
    if (!log_grow((void **)&seg->txn, &seg->txn_cap, seg->txn_n + 1,
                  sizeof *seg->txn))
        return CN_ENOMEM;

    /* Only the start-up replay adds to a rolled segment, which the log may
     * already count as durable: sync such an entry (and a new file's
     * directory entry) now.  The active segment's are synced when it
     * rolls; the roll's directory fsync covers the file's creation. */
    bool rolled = si + 1 < log->nsegs;
    const char *what = "txnindex write";
    int err = 0, fd = -1;
    if (!seg->txn_file) {
        err = log_fd_open(seg, LOG_FILE_TXNINDEX, O_CREAT | O_TRUNC);
        if (!err)
            seg->txn_file = true;
        if (!err && rolled)
            err = cn_file_sync_dir(log->dir);
        what = "txnindex create";
    }
    if (!err)
        err = log_fd_get(seg, LOG_FILE_TXNINDEX, &fd);
    if (!err) {
        uint8_t b[LOG_TXN_ENTRY];
        txn_encode(b, t);
        err = cn_file_pwrite_all(fd, b, sizeof b,
                                 (int64_t)seg->txn_n * LOG_TXN_ENTRY);
        what = "txnindex write";
    }
    if (!err && rolled) {
        err = cn_file_ops->fdatasync(fd);
        what = "txnindex fdatasync";
    }
    if (err) {
        log_go_offline(log, what, err);
        return CN_EOFFLINE;
    }
    seg->txn[seg->txn_n++] = *t;
    if (t->first_offset < seg->txn_min_first)
        seg->txn_min_first = t->first_offset;
    return 0;
}

int cn_log_aborted_txns(const struct cn_log *log, int64_t from, int64_t to,
                        int (*fn)(void *arg, const struct cn_aborted_txn *t),
                        void *arg)
{
    if (from >= to || log->nsegs == 0)
        return 0;
    size_t si = log_find_seg(log, from);
    for (bool first = true; si < log->nsegs; si++, first = false) {
        const struct cn_segment *seg = log->segs[si];
        /* No early stop at a segment whose base is >= to: a transaction
         * that began below to may have been aborted much later.  Its
         * first_offset is what tells. */
        if (seg->txn_min_first >= to)
            continue;
        /* last_offset increases within a segment: skip to the first entry
         * at or after from (only the first segment can hold smaller). */
        size_t lo = 0, hi = seg->txn_n;
        while (first && lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (seg->txn[mid].last_offset < from)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (size_t i = lo; i < seg->txn_n; i++) {
            const struct cn_aborted_txn *t = &seg->txn[i];
            if (t->last_offset < from || t->first_offset >= to)
                continue;
            int r = fn(arg, t);
            if (r)
                return r;
        }
    }
    return 0;
}
