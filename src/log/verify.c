/*
 * verify.c - on-demand check of every batch of a partition log, read-only.
 *
 * Fetch serves batches of rolled segments without a CRC check (as Kafka
 * does), and recovery scans only what a crash could have torn, so bit rot
 * in an old segment would go unseen until a client rejects the batch.
 * `cairn --verify-logs` walks each segment with the scanner recovery uses
 * (lengths, magic, offsets chaining, CRC-32C) and then decodes the records
 * with the produce path's validator, reporting the first bad batch of each
 * segment and every offset gap or overlap between segments.  It opens files
 * read-only and writes nothing, so it may run beside a broker (whose
 * active segment's last batch may then be caught mid-write).
 */
#include "log_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/wr.h"
#include "file.h"
#include "proto/batch.h"

struct verify_ctx {
    struct cn_wr scratch; /* decompressed records, reused */
    int deep_err;         /* cn_batch_validate's code for the bad batch */
};

static int deep_check(void *arg, const struct log_bhdr *h,
                      const uint8_t *batch, int64_t pos)
{
    struct verify_ctx *vc = arg;
    /* Stored batches include markers and coordinator records; sizes were
     * limited when they were written. */
    struct cn_batch_limits lim = {0, 0, true};
    (void)pos;
    /* The cleaner keeps an emptied batch (no records, its offsets and
     * producer fields intact) where producer state needs it, as Kafka
     * does; produce refuses such a batch, but on disk it is sound.  The
     * scan checked its CRC already. */
    if (h->total_bytes == LOG_BATCH_HDR_BYTES &&
        log_be32(batch + LOG_BATCH_COUNT_OFF) == 0)
        return 0;
    cn_wr_reset(&vc->scratch);
    int rc = cn_batch_validate(batch, (size_t)h->total_bytes, &lim, NULL,
                               &vc->scratch);
    if (rc == CN_ENOMEM)
        return rc;
    if (rc) {
        vc->deep_err = rc;
        return cn_corrupt("records do not decode");
    }
    return 0;
}

static void say(void (*report)(void *arg, const char *line), void *arg,
                const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void say(void (*report)(void *arg, const char *line), void *arg,
                const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    report(arg, line);
}

int cn_log_verify(const char *dir,
                  void (*report)(void *arg, const char *line), void *arg,
                  struct cn_log_verify *out)
{
    memset(out, 0, sizeof *out);
    int64_t *bases = NULL;
    size_t n = 0;
    int err = log_list_bases(dir, &bases, &n);
    if (err)
        return err;
    struct verify_ctx vc;
    cn_wr_init(&vc.scratch, 0);
    int64_t prev_base = -1, prev_end = -1;
    int64_t cleaned_to = log_clean_ckpt_lookup(dir);
    for (size_t i = 0; i < n && !err; i++) {
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%020lld.log", dir,
                     (long long)bases[i]) >= (int)sizeof path) {
            err = -ENAMETOOLONG;
            break;
        }
        /* A segment value on the stack: the scanner reads only these. */
        struct cn_segment seg;
        memset(&seg, 0, sizeof seg);
        seg.base = bases[i];
        seg.idx_fd = seg.tidx_fd = seg.txn_fd = -1;
        seg.log_fd = cn_file_ops->open(path, O_RDONLY, 0);
        if (seg.log_fd < 0) {
            err = seg.log_fd;
            say(report, arg, "%s: cannot open: %s", path, cn_strerror(err));
            break;
        }
        err = cn_file_ops->fsize(seg.log_fd, &seg.size);
        struct log_scan sc;
        vc.deep_err = 0;
        if (!err)
            err = log_seg_scan(&seg, deep_check, &vc, &sc);
        cn_file_ops->close(seg.log_fd);
        if (err) {
            say(report, arg, "%s: cannot read: %s", path, cn_strerror(err));
            break;
        }
        out->segments++;
        out->batches += sc.batches;
        out->bytes += sc.good_bytes;
        if (sc.why) {
            out->bad_segments++;
            say(report, arg,
                "%s: bad batch at byte %lld (offset %lld): %s%s%s%s; "
                "%lld of %lld bytes before it are good",
                path, (long long)sc.good_bytes, (long long)sc.next_offset,
                sc.why, vc.deep_err ? " (" : "",
                vc.deep_err ? cn_strerror(vc.deep_err) : "",
                vc.deep_err ? ")" : "", (long long)sc.good_bytes,
                (long long)seg.size);
        }
        /* Below the cleaner checkpoint a gap is what cleaning left. */
        bool cleaned_gap = seg.base > prev_end && seg.base <= cleaned_to;
        if (i > 0 && sc.batches + (sc.why ? 1 : 0) > 0 && prev_end >= 0 &&
            seg.base != prev_end && !cleaned_gap) {
            out->gaps++;
            if (seg.base > prev_end)
                say(report, arg,
                    "%s/%020lld.log: offsets %lld..%lld are in no segment "
                    "(gap before it)",
                    dir, (long long)seg.base, (long long)prev_end,
                    (long long)seg.base - 1);
            else
                say(report, arg,
                    "%s/%020lld.log: starts at %lld, inside %020lld.log "
                    "(which ends at %lld)",
                    dir, (long long)seg.base, (long long)seg.base,
                    (long long)prev_base, (long long)prev_end - 1);
        }
        if (sc.batches > 0 || sc.why) {
            prev_base = seg.base;
            /* Past a bad batch the segment's end is unknown. */
            prev_end = sc.why ? -1 : sc.next_offset;
        }
    }
    cn_wr_fini(&vc.scratch);
    free(bases);
    return err;
}
