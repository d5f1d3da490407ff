/*
 * log.c - the partition log: open and recovery, append, read, roll, sync,
 * retention, DeleteRecords.  See log.h for the files and the threading.
 */
#include "log_int.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/crc32c.h"
#include "base/err.h"
#include "base/failpoint.h"
#include "base/say.h"
#include "file.h"
#include "log_clean.h"
#include "proto/batch.h"

#define CKPT_NAME "partition.checkpoint"
#define CKPT_MAGIC "cn-partition-checkpoint 1\n"
#define CKPT_MAX 512

void cn_log_config_default(struct cn_log_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->segment_bytes = 1LL << 30;
    cfg->segment_ms = 7LL * 24 * 3600 * 1000;
    cfg->retention_ms = 7LL * 24 * 3600 * 1000;
    cfg->retention_bytes = -1;
    cfg->index_interval_bytes = 4096;
    cfg->flush_messages = INT64_MAX;
    cfg->flush_ms = INT64_MAX;
}

static void set_cfg(struct cn_log *log, const struct cn_log_config *cfg)
{
    log->cfg = *cfg;
    /* Positions in .index are uint32; Kafka caps segment.bytes likewise. */
    if (log->cfg.segment_bytes > INT32_MAX || log->cfg.segment_bytes <= 0)
        log->cfg.segment_bytes = INT32_MAX;
    if (log->cfg.segment_ms <= 0)
        log->cfg.segment_ms = INT64_MAX;
    if (log->cfg.index_interval_bytes < 0)
        log->cfg.index_interval_bytes = 0;
    if (log->cfg.flush_messages <= 0)
        log->cfg.flush_messages = 1;
}

void cn_log_set_config(struct cn_log *log, const struct cn_log_config *cfg)
{
    set_cfg(log, cfg);
}

struct cn_segment *log_active(const struct cn_log *log)
{
    return log->segs[log->nsegs - 1];
}

void log_go_offline(struct cn_log *log, const char *what, int err)
{
    if (!log->offline)
        CN_ERROR("log %s: %s failed: %s; taking the log offline", log->dir,
                 what, cn_strerror(err));
    log->offline = true;
}

int log_push_seg(struct cn_log *log, struct cn_segment *seg)
{
    if (log->nsegs == log->segs_cap) {
        size_t ncap = log->segs_cap ? log->segs_cap * 2 : 8;
        void *p = realloc(log->segs, ncap * sizeof *log->segs);
        if (!p)
            return CN_ENOMEM;
        log->segs = p;
        log->segs_cap = ncap;
    }
    log->segs[log->nsegs++] = seg;
    return 0;
}

/* Drops a segment the log no longer lists; a sync holding its fds frees it
 * when it ends. */
void log_seg_release(struct cn_segment *seg)
{
    seg->dead = true;
    if (seg->refs == 0)
        log_seg_free(seg);
}

void log_segs_remove(struct cn_log *log, size_t i, size_t n)
{
    for (size_t j = i; j < i + n; j++)
        log_seg_release(log->segs[j]);
    memmove(log->segs + i, log->segs + i + n,
            (log->nsegs - i - n) * sizeof *log->segs);
    log->nsegs -= n;
}

int log_segs_insert(struct cn_log *log, size_t i, struct cn_segment *seg)
{
    int err = log_push_seg(log, seg);
    if (err)
        return err;
    memmove(log->segs + i + 1, log->segs + i,
            (log->nsegs - 1 - i) * sizeof *log->segs);
    log->segs[i] = seg;
    return 0;
}

void log_recompute_max_ts(struct cn_log *log)
{
    log->max_ts = log->max_ts_offset = -1;
    for (size_t i = 0; i < log->nsegs; i++) {
        struct cn_segment *seg = log->segs[i];
        if (seg->max_ts > log->max_ts) {
            log->max_ts = seg->max_ts;
            log->max_ts_offset = seg->max_ts_offset;
        }
    }
}

/* Removes segs[0], unlinking its files (the caller fsyncs the dir). */
static int drop_first(struct cn_log *log)
{
    struct cn_segment *seg = log->segs[0];
    memmove(log->segs, log->segs + 1, (log->nsegs - 1) * sizeof *log->segs);
    log->nsegs--;
    int err = log_seg_unlink(log, seg->base);
    log_seg_release(seg);
    return err;
}

/* --- checkpoint --------------------------------------------------------- */

int log_ckpt_write(struct cn_log *log, int64_t start, int64_t rp, bool clean)
{
    char buf[CKPT_MAX];
    int n = snprintf(buf, sizeof buf,
                     CKPT_MAGIC "log_start_offset %" PRId64
                                "\nrecovery_point %" PRId64
                                "\nclean_shutdown %d\n",
                     start, rp, clean ? 1 : 0);
    uint32_t crc = cn_crc32c(0, buf, (size_t)n);
    n += snprintf(buf + n, sizeof buf - (size_t)n, "crc %08" PRIx32 "\n", crc);
    int err = cn_file_write_atomic(log->dir, CKPT_NAME, buf, (size_t)n);
    if (err)
        return err;
    log->ckpt_start = start;
    log->ckpt_rp = rp;
    return 0;
}

/* Reads the checkpoint; a missing or damaged one leaves the defaults (start
 * unknown, recovery point 0: scan everything). */
static void ckpt_read(struct cn_log *log, int64_t *start, int64_t *rp,
                      bool *clean)
{
    char path[PATH_MAX], buf[CKPT_MAX + 1];
    *start = -1;
    *rp = 0;
    *clean = false;
    if (snprintf(path, sizeof path, "%s/" CKPT_NAME, log->dir) >=
        (int)sizeof path)
        return;
    int fd = cn_file_open(path, O_RDONLY, 0);
    if (fd < 0) {
        if (fd != -ENOENT)
            CN_WARN("log %s: cannot open checkpoint: %s", log->dir,
                    cn_strerror(fd));
        return;
    }
    ssize_t n = cn_file_pread_all(fd, buf, CKPT_MAX, 0);
    cn_file_ops->close(fd);
    if (n <= 0)
        goto bad;
    buf[n] = '\0';
    char *crc_line = strstr(buf, "crc ");
    long long s, r;
    int c;
    unsigned int crc;
    if (!crc_line || sscanf(crc_line, "crc %8x", &crc) != 1 ||
        cn_crc32c(0, buf, (size_t)(crc_line - buf)) != crc ||
        sscanf(buf, CKPT_MAGIC "log_start_offset %lld recovery_point %lld "
                               "clean_shutdown %d",
               &s, &r, &c) != 3 ||
        s < 0 || r < 0)
        goto bad;
    *start = s;
    *rp = r;
    *clean = c == 1;
    return;
bad:
    CN_WARN("log %s: checkpoint damaged; recovering every segment",
            log->dir);
}

/* --- open and recovery -------------------------------------------------- */

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int64_t log_parse_seg_name(const char *name, const char *ext)
{
    size_t el = strlen(ext);
    if (strlen(name) != 21 + el || name[20] != '.' ||
        strcmp(name + 21, ext) != 0)
        return -1;
    int64_t v = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        if (v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (name[i] - '0');
    }
    return v;
}

static bool has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

static int unlink_in(const struct cn_log *log, const char *name)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", log->dir, name) >=
        (int)sizeof path)
        return -ENAMETOOLONG;
    return cn_file_ops->unlink(path);
}

int log_list_bases(const char *dir, int64_t **bases_out, size_t *n_out)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    int64_t *bases = NULL;
    size_t n = 0, cap = 0;
    int err = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int64_t b = log_parse_seg_name(de->d_name, "log");
        if (b < 0)
            continue;
        if (!log_grow((void **)&bases, &cap, n + 1, sizeof *bases)) {
            err = CN_ENOMEM;
            break;
        }
        bases[n++] = b;
    }
    closedir(d);
    if (err) {
        free(bases);
        return err;
    }
    if (n > 1)
        qsort(bases, n, sizeof *bases, cmp_i64);
    *bases_out = bases;
    *n_out = n;
    return 0;
}

/* Lists segment bases (sorted) and removes temp files and index files whose
 * .log is gone. */
static int list_dir(struct cn_log *log, int64_t **bases_out, size_t *n_out)
{
    int64_t *bases;
    size_t n;
    int err = log_list_bases(log->dir, &bases, &n);
    if (err)
        return err;

    /* Stray temp files, and orphan index files: a crash between unlinking
     * a .log and its indexes. */
    DIR *d = opendir(log->dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (has_suffix(de->d_name, ".tmp")) {
                CN_INFO("log %s: removing stray %s", log->dir, de->d_name);
                unlink_in(log, de->d_name);
                continue;
            }
            int64_t b = log_parse_seg_name(de->d_name, "index");
            if (b < 0)
                b = log_parse_seg_name(de->d_name, "timeindex");
            if (b < 0)
                b = log_parse_seg_name(de->d_name, "txnindex");
            if (b >= 0 &&
                (n == 0 || !bsearch(&b, bases, n, sizeof *bases, cmp_i64))) {
                /* Below the first segment it is a deletion a crash cut
                 * short; above, the .log went missing (see recover()). */
                if (n > 0 && b > bases[0])
                    CN_WARN("log %s: %020lld.log is missing but %s is still "
                            "there; removing the orphan",
                            log->dir, (long long)b, de->d_name);
                unlink_in(log, de->d_name);
            }
        }
        closedir(d);
    }
    *bases_out = bases;
    *n_out = n;
    return 0;
}

static int mkdir_synced(const char *dir)
{
    int err = cn_file_ops->mkdir(dir, 0755);
    if (err == -EEXIST)
        return 0;
    if (err)
        return err;
    char parent[PATH_MAX];
    if (snprintf(parent, sizeof parent, "%s", dir) >= (int)sizeof parent)
        return -ENAMETOOLONG;
    char *slash = strrchr(parent, '/');
    if (slash == parent)
        slash[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(parent, sizeof parent, ".");
    return cn_file_sync_dir(parent);
}

/* Deletes segs[from..]: recovery found them empty or below the log start. */
static void drop_tail(struct cn_log *log, size_t from, const char *why)
{
    while (log->nsegs > from) {
        struct cn_segment *seg = log->segs[--log->nsegs];
        CN_WARN("log %s: deleting segment %020lld: %s", log->dir,
                (long long)seg->base, why);
        log->stats.recovery_truncated_bytes += seg->size;
        log_seg_unlink(log, seg->base);
        log_seg_free(seg);
    }
}

/* fdatasyncs every file of seg, on the loop (recovery, clean close). */
int log_seg_sync_all(struct cn_segment *seg)
{
    int err = 0;
    for (int i = 0; !err && i < LOG_FILES; i++) {
        int fd;
        if (i == LOG_FILE_TXNINDEX && !seg->txn_file)
            break;
        err = log_fd_get(seg, (enum log_file)i, &fd);
        if (!err)
            err = cn_file_ops->fdatasync(fd);
    }
    return err;
}

/* First batch's max timestamp as the segment's age origin, else now. */
static void set_created(struct cn_log *log, struct cn_segment *seg)
{
    struct log_bhdr h;
    seg->created_ms = log_now_ms(log);
    seg->last_write_ms = seg->created_ms;
    if (log_seg_read_hdr(seg, 0, &h) == 0 && h.max_timestamp >= 0 &&
        h.max_timestamp < seg->created_ms)
        seg->created_ms = h.max_timestamp;
}

/* Reports what lies between segs[i-1] and segs[i] once both are loaded.
 * Kafka logs may have offset gaps (compaction, transactions), and the
 * segments after a gap hold intact data consumers may already have read,
 * so a gap is never a reason to delete anything: it is only said, loudly
 * when no crash explains it. */
static void report_gap(const struct cn_log *log, size_t i, bool prev_cut)
{
    const struct cn_segment *prev = log->segs[i - 1], *seg = log->segs[i];
    if (seg->base == prev->next_offset)
        return;
    /* The cleaner removes batches, so a cleaned segment may end before the
     * next one starts: expected below the cleaner checkpoint. */
    if (seg->base > prev->next_offset && seg->base <= log->clean_first_dirty)
        return;
    if (seg->base < prev->next_offset) {
        CN_ERROR("log %s: segment %020lld.log starts at offset %lld, inside "
                 "%020lld.log (which ends at %lld): offsets %lld..%lld are "
                 "stored twice; both files kept, reads take the later one",
                 log->dir, (long long)seg->base, (long long)seg->base,
                 (long long)prev->base, (long long)prev->next_offset - 1,
                 (long long)seg->base, (long long)prev->next_offset - 1);
    } else if (prev_cut) {
        CN_WARN("log %s: offsets %lld..%lld went with the torn tail of "
                "segment %020lld.log; %020lld.log and later segments are "
                "intact and kept",
                log->dir, (long long)prev->next_offset,
                (long long)seg->base - 1, (long long)prev->base,
                (long long)seg->base);
    } else {
        CN_ERROR("log %s: offsets %lld..%lld are missing: no segment file "
                 "holds them (a .log between %020lld.log and %020lld.log "
                 "was removed or lost?); serving the gap as empty, later "
                 "segments and the log end are unchanged",
                 log->dir, (long long)prev->next_offset,
                 (long long)seg->base - 1, (long long)prev->base,
                 (long long)seg->base);
    }
}

/* A trusted segment's data was synced before the crash (or the stop), so
 * consumers may have read all of it: a bad batch there is damage, not a
 * torn write, and cutting at it would delete the intact batches after it.
 * Checked read-only before the index rebuild may cut anything; a bad
 * batch refuses the partition (CN_ECORRUPT) with the file, byte and
 * offset, for an operator to restore or remove the file. */
static int check_synced_seg(struct cn_log *log, struct cn_segment *seg)
{
    int fd, err = log_fd_get(seg, LOG_FILE_LOG, &fd);
    if (!err)
        err = cn_file_ops->fsize(fd, &seg->size);
    struct log_scan sc;
    if (!err)
        err = log_seg_scan(seg, NULL, NULL, &sc);
    if (err)
        return err;
    if (!sc.why)
        return 0;
    CN_ERROR("log %s: segment %020lld.log: %s at byte %lld (offset %lld) "
             "in data synced before the last stop; not cutting synced "
             "data (cairn --verify-logs shows the damage; restore the file "
             "or move it away to serve the rest as a gap)",
             log->dir, (long long)seg->base, sc.why,
             (long long)sc.good_bytes, (long long)sc.next_offset);
    return CN_ECORRUPT;
}

/* Cleaning leaves a segment named after the first offset of the segments
 * it replaced, which its first batch may lie above (that batch was
 * removed), so a gap at the start of a file is no sign of a misnamed one.
 * A name inside the previous segment's offsets is: the open is refused
 * then, nothing cut, for an operator to rename or move the file. */
static int check_name(struct cn_log *log, struct cn_segment *seg)
{
    const struct cn_segment *prev = log->segs[log->nsegs - 2];
    struct log_bhdr h;
    if (seg->base >= prev->next_offset)
        return 0;
    int err = log_seg_read_hdr(seg, 0, &h);
    if (err || h.base_offset == seg->base)
        return 0;
    CN_ERROR("log %s: segment %020lld.log holds a valid batch at offset "
             "%lld where offset %lld should start: the file does not belong "
             "under this name; not cutting it",
             log->dir, (long long)seg->base, (long long)h.base_offset,
             (long long)seg->base);
    return CN_ECORRUPT;
}

/* Opens and checks one segment: trusted ones by their indexes, the rest
 * (and trusted ones whose indexes disagree) by a full scan that cuts a torn
 * or corrupt tail.  *cut tells whether bytes were cut. */
static int load_seg(struct cn_log *log, struct cn_segment *seg, bool trusted,
                    bool *cut)
{
    int err;
    *cut = false;
    if (trusted) {
        cn_corrupt_hush();
        err = log_seg_load_trusted(log, seg);
        cn_corrupt_unhush();
        if (err == CN_ECORRUPT) {
            CN_WARN("log %s: segment %020lld: %s; rebuilding its indexes "
                    "from the log",
                    log->dir, (long long)seg->base, cn_corrupt_last());
            err = check_synced_seg(log, seg);
            if (err)
                return err;
        } else if (err) {
            return err;
        } else {
            return log_seg_load_txnindex(log, seg);
        }
    }
    int64_t scanned = 0, truncated = 0;
    err = log_seg_recover(log, seg, &scanned, &truncated);
    if (!err)
        err = log_seg_load_txnindex(log, seg);
    /* Sealed now, so its last time index entry holds its max timestamp
     * as load_trusted() expects when it is next opened. */
    if (!err)
        err = log_seg_seal_timeindex(seg);
    if (err)
        return err;
    log->stats.recovery_scanned_bytes += scanned;
    log->stats.recovery_truncated_bytes += truncated;
    *cut = truncated > 0;
    return log_seg_sync_all(seg);
}

static int recover(struct cn_log *log)
{
    int64_t *bases = NULL, start, rp;
    size_t n = 0;
    bool clean;
    int err = log_clean_recover(log);
    if (!err)
        err = list_dir(log, &bases, &n);
    if (err)
        return err;
    ckpt_read(log, &start, &rp, &clean);

    bool prev_cut = false;
    for (size_t i = 0; i < n; i++) {
        struct cn_segment *seg;
        err = log_seg_open_files(log, bases[i], &seg);
        if (!err) {
            err = log_push_seg(log, seg);
            if (err)
                log_seg_free(seg);
        }
        bool cut = false;
        bool trusted = clean || (i + 1 < n && bases[i + 1] <= rp);
        if (!err)
            err = load_seg(log, seg, trusted, &cut);
        if (err) {
            /* Unreadable is not missing: the bytes may come back once the
             * disk or the permissions are fixed, so refuse rather than
             * serve around them. */
            CN_ERROR("log %s: cannot read segment %020lld.log: %s; not "
                     "opening the partition (nothing deleted)",
                     log->dir, (long long)bases[i], cn_strerror(err));
            goto out_free;
        }
        seg->durable = true;
        if (log->nsegs > 1 && seg->size > 0 &&
            (err = check_name(log, seg)) != 0)
            goto out_free;
        /* Rolls happen only after an append, so an empty segment before
         * others past the recovery point lost its writes to the crash. */
        bool torn = !trusted && i + 1 < n && (cut || seg->size == 0);
        if (seg->size == 0 && i + 1 < n) {
            /* An empty segment before others holds nothing. */
            drop_tail(log, log->nsegs - 1, "empty, not last");
        } else {
            if (log->nsegs > 1)
                report_gap(log, log->nsegs - 1, prev_cut);
            prev_cut = cut;
        }
        if (torn) {
            /* A write torn by the crash, above the recovery point.  The
             * high watermark follows whole sync rounds, so nothing written
             * after the tear was answered to an acks=all producer or seen
             * by a consumer; keeping it would put a hole inside producers'
             * sequences and transactions (a retried batch would then be
             * out of order).  Kafka's recovery drops it the same way.  (A
             * bad batch in a trusted segment is damage to synced data
             * instead: see check_synced_seg().) */
            for (size_t j = i + 1; j < n; j++) {
                CN_WARN("log %s: deleting segment %020lld: written after "
                        "the torn write in %020lld.log, never acknowledged "
                        "(acks=all) nor read",
                        log->dir, (long long)bases[j],
                        (long long)bases[i]);
                log_seg_unlink(log, bases[j]);
            }
            break;
        }
    }

    /* The log end never moves back below what the checkpoint knew was on
     * disk (the recovery point: everything below it was synced, so
     * consumers may have read it; after a clean stop it is the end).  Only
     * files removed behind our back get here: start the next offset at
     * the known end rather than hand out offsets a second time. */
    int64_t known_end = start > rp ? start : rp;
    if (log->nsegs > 0 && log_active(log)->next_offset < known_end) {
        if (start > log_active(log)->next_offset) {
            /* DeleteRecords raised the start past data then lost. */
            CN_WARN("log %s: log start %lld past recovered end %lld; "
                    "emptying",
                    log->dir, (long long)start,
                    (long long)log_active(log)->next_offset);
            drop_tail(log, 0, "below the log start offset");
        } else {
            CN_ERROR("log %s: the segments end at offset %lld but offsets "
                     "below %lld were on disk (checkpoint): the newest "
                     "segment file is missing; offsets %lld..%lld are "
                     "lost and new records start at %lld, reusing none",
                     log->dir, (long long)log_active(log)->next_offset,
                     (long long)known_end,
                     (long long)log_active(log)->next_offset,
                     (long long)known_end - 1, (long long)known_end);
            if (log_active(log)->size == 0)
                drop_tail(log, log->nsegs - 1, "empty, below the log end");
        }
    }
    if (log->nsegs == 0 || log_active(log)->next_offset < known_end) {
        struct cn_segment *seg;
        err = log_seg_create(log, known_end > 0 ? known_end : 0, &seg);
        if (err)
            goto out_free;
        seg->durable = true;
        err = log_push_seg(log, seg);
        if (err) {
            log_seg_free(seg);
            goto out_free;
        }
    }
    err = cn_file_sync_dir(log->dir);
    if (err)
        goto out_free;
    if (start < log->segs[0]->base)
        start = log->segs[0]->base;
    log->start_offset = start;
    log->end_offset = log_active(log)->next_offset;
    log->synced_offset = log->end_offset;
    /* A line left by an earlier partition of the same name (its directory
     * removed without cn_log_delete) would leave this one uncleaned. */
    if (log->clean_first_dirty > log->end_offset) {
        CN_WARN("log %s: cleaner checkpoint %lld is past the log end %lld; "
                "cleaning from the start",
                log->dir, (long long)log->clean_first_dirty,
                (long long)log->end_offset);
        log->clean_first_dirty = -1;
    }
    log->max_ts = log->max_ts_offset = -1;
    for (size_t i = 0; i < log->nsegs; i++) {
        struct cn_segment *seg = log->segs[i];
        if (seg->max_ts > log->max_ts) {
            log->max_ts = seg->max_ts;
            log->max_ts_offset = seg->max_ts_offset;
        }
        set_created(log, seg);
    }
    log->last_sync_ms = log_now_ms(log);
    /* Not clean from here on: a crash must not be taken for a clean stop. */
    err = log_ckpt_write(log, log->start_offset, log->end_offset, false);
out_free:
    free(bases);
    return err;
}

static void free_log(struct cn_log *log)
{
    for (size_t i = 0; i < log->nsegs; i++)
        log_seg_release(log->segs[i]);
    free(log->segs);
    free(log->dir);
    free(log);
}

int cn_log_open(const char *dir, const struct cn_log_config *cfg,
                struct cn_log **out)
{
    struct cn_log *log = calloc(1, sizeof *log);
    if (!log)
        return CN_ENOMEM;
    log->dir = strdup(dir);
    if (!log->dir) {
        free(log);
        return CN_ENOMEM;
    }
    size_t dl = strlen(log->dir);
    while (dl > 1 && log->dir[dl - 1] == '/')
        log->dir[--dl] = '\0';
    set_cfg(log, cfg);
    log->clean_first_dirty = -1;
    int err = mkdir_synced(log->dir);
    if (!err)
        err = recover(log);
    if (err) {
        CN_ERROR("log %s: open failed: %s", log->dir, cn_strerror(err));
        free_log(log);
        return err;
    }
    *out = log;
    return 0;
}

struct cn_log *cn_log_new_offline(const char *dir,
                                  const struct cn_log_config *cfg)
{
    struct cn_log *log = calloc(1, sizeof *log);
    if (!log)
        return NULL;
    log->dir = strdup(dir);
    if (!log->dir) {
        free(log);
        return NULL;
    }
    set_cfg(log, cfg);
    log->max_ts = log->max_ts_offset = -1;
    log->offline = true;
    log->clean_first_dirty = -1;
    return log;
}

void cn_log_close(struct cn_log *log)
{
    if (!log)
        return;
    assert(log->syncs_in_flight == 0 && !log->clean_busy);
    if (!log->offline) {
        int err = log_seg_seal_timeindex(log_active(log));
        log_active(log)->durable = false; /* the seal may have written */
        for (size_t i = 0; !err && i < log->nsegs; i++)
            if (!log->segs[i]->durable)
                err = log_seg_sync_all(log->segs[i]);
        if (!err)
            err = log_ckpt_write(log, log->start_offset, log->end_offset,
                                 true);
        if (err)
            CN_ERROR("log %s: clean close failed: %s", log->dir,
                     cn_strerror(err));
    }
    free_log(log);
}

int cn_log_delete(struct cn_log *log)
{
    assert(log->syncs_in_flight == 0 && !log->clean_busy);
    int first = 0;
    if (!log->offline && log->clean_first_dirty >= 0)
        first = cn_log_clean_forget(log->dir);
    /* Close first, then remove everything in the directory, including files
     * other modules keep there (producer snapshots). */
    for (size_t i = 0; i < log->nsegs; i++)
        log_seg_release(log->segs[i]);
    log->nsegs = 0;
    DIR *d = opendir(log->dir);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            int err = unlink_in(log, de->d_name);
            if (err && !first)
                first = err;
        }
        closedir(d);
    } else {
        first = -errno;
    }
    int err = cn_file_ops->rmdir(log->dir);
    if (err && !first)
        first = err;
    if (!err) {
        char parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%s", log->dir);
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent) {
            *slash = '\0';
            cn_file_sync_dir(parent);
        }
    }
    free_log(log);
    return first;
}

int64_t cn_log_start_offset(const struct cn_log *log)
{
    return log->start_offset;
}

int64_t cn_log_end_offset(const struct cn_log *log)
{
    return log->end_offset;
}

int64_t cn_log_active_base(const struct cn_log *log)
{
    return log->nsegs ? log->segs[log->nsegs - 1]->base : log->end_offset;
}

int64_t cn_log_oldest_base(const struct cn_log *log)
{
    return log->nsegs ? log->segs[0]->base : log->end_offset;
}

const char *cn_log_dir(const struct cn_log *log)
{
    return log->dir;
}

int64_t cn_log_synced_offset(const struct cn_log *log)
{
    return log->synced_offset;
}

bool cn_log_is_offline(const struct cn_log *log)
{
    return log->offline;
}

void cn_log_stats(const struct cn_log *log, struct cn_log_stats *out)
{
    *out = log->stats;
    out->segments = (int32_t)log->nsegs;
    out->bytes = 0;
    for (size_t i = 0; i < log->nsegs; i++)
        out->bytes += log->segs[i]->size;
}

/* --- append ------------------------------------------------------------- */

/* A write that failed for want of space: undone, it leaves the log
 * consistent, so the log stays online and the write may be tried again
 * once space is freed.  (A failed fsync is another matter: see
 * cn_log_sync_end.) */
static bool out_of_space(int err)
{
    return err == -ENOSPC || err == -EDQUOT;
}

/* Starts a new active segment at base (the end offset, or above it for a
 * follower's batch past a gap). */
static int roll_at(struct cn_log *log, int64_t base)
{
    struct cn_segment *seg, *old = log_active(log);
    struct log_seg_mark mark;
    log_seg_mark(old, &mark);
    int err = log_seg_seal_timeindex(old);
    /* Rolled segments are synced whole (data and indexes) by the next sync,
     * even one untouched since open: the seal may just have written. */
    old->durable = false;
    if (!err)
        err = log_seg_create(log, base, &seg);
    if (out_of_space(err)) {
        /* The active segment is not empty, so nothing of it has this
         * base; a later roll seals again. */
        log_seg_unlink(log, base);
        if (log_seg_undo(old, &mark) == 0)
            return -ENOSPC;
    }
    if (err) {
        log_go_offline(log, "segment roll", err);
        return CN_EOFFLINE;
    }
    err = log_push_seg(log, seg);
    if (err) {
        log_seg_unlink(log, seg->base);
        log_seg_free(seg);
        return err;
    }
    CN_DEBUG("log %s: rolled to segment %020lld", log->dir,
             (long long)seg->base);
    return 0;
}

static int roll(struct cn_log *log)
{
    return roll_at(log, log->end_offset);
}

/* The append proper: batch is written at base (the end offset, or a
 * follower's batch's own, >= it), with the roll, indexes and undo on a
 * full disk. */
static int append_batch(struct cn_log *log, const uint8_t *batch, size_t len,
                        struct log_bhdr h, int64_t base)
{
    if (base > INT64_MAX - 1 - h.last_offset_delta)
        return CN_EINVAL;
    struct cn_segment *seg = log_active(log);
    int64_t now = log_now_ms(log);
    if (seg->size > 0 &&
        ((int64_t)len > log->cfg.segment_bytes - seg->size ||
         now - seg->created_ms >= log->cfg.segment_ms ||
         base + h.last_offset_delta - seg->base > INT32_MAX)) {
        /* At the end offset, so a gap before a follower's batch stays
         * inside a segment (as a cleaned one has), unless the new
         * segment's index could not address it from there either. */
        int64_t at = log->end_offset;
        if (base + h.last_offset_delta - at > INT32_MAX)
            at = base;
        int err = roll_at(log, at);
        if (err)
            return err;
        seg = log_active(log);
    }
    if (base + h.last_offset_delta - seg->base > INT32_MAX)
        return CN_ERANGE; /* an empty segment too far below the batch */
    h.base_offset = base;

    int64_t pos = seg->size;
    struct log_seg_mark mark;
    log_seg_mark(seg, &mark);
    size_t first = len;
    if (cn_failpoints_armed)
        first = len / 2; /* lets a crash point leave a torn batch */
    int fd;
    int err = log_fd_get(seg, LOG_FILE_LOG, &fd);
    if (!err)
        err = cn_file_pwrite_all(fd, batch, first, pos);
    if (!err && first < len) {
        err = CN_FAILPOINT("log.mid_append");
        if (!err)
            err = cn_file_pwrite_all(fd, batch + first, len - first,
                                     pos + (int64_t)first);
    }
    if (!err)
        err = log_seg_index_batch(log, seg, &h, pos);
    if (out_of_space(err)) {
        /* Cut what part of the batch and its index entries made it, so
         * the files end where the log says they do. */
        int e = log_seg_undo(seg, &mark);
        if (!e) {
            CN_DEBUG("log %s: append of %zu bytes: no space left; undone",
                     log->dir, len);
            return -ENOSPC;
        }
        CN_ERROR("log %s: cannot cut a failed append back: %s", log->dir,
                 cn_strerror(e));
    }
    if (err) {
        log_go_offline(log, "append", err);
        return CN_EOFFLINE;
    }
    seg->size += (int64_t)len;
    seg->next_offset = base + h.last_offset_delta + 1;
    seg->durable = false;
    seg->last_write_ms = now;
    log->end_offset = seg->next_offset;
    if (h.max_timestamp > log->max_ts) {
        log->max_ts = h.max_timestamp;
        log->max_ts_offset = base + h.last_offset_delta;
    }
    (void)CN_FAILPOINT("log.after_append_before_sync");
    return 0;
}

int cn_log_append(struct cn_log *log, uint8_t *batch, size_t len,
                  int64_t *base_offset_out)
{
    struct cn_batch_hdr bh;
    struct log_bhdr h;
    if (log->offline)
        return CN_EOFFLINE;
    if (cn_batch_hdr_parse(batch, len, &bh) || cn_batch_size(&bh) != len ||
        log_bhdr_parse(batch, len, &h))
        return CN_EINVAL;
    int64_t base = log->end_offset;
    if (base > INT64_MAX - 1 - h.last_offset_delta)
        return CN_EINVAL;
    /* Patched before the write: the bytes on disk carry it. */
    cn_batch_set_base_offset(batch, base);
    int err = append_batch(log, batch, len, h, base);
    if (err)
        return err;
    if (base_offset_out)
        *base_offset_out = base;
    return 0;
}

int cn_log_append_at(struct cn_log *log, const uint8_t *batch, size_t len)
{
    struct cn_batch_hdr bh;
    struct log_bhdr h;
    if (log->offline)
        return CN_EOFFLINE;
    if (cn_batch_hdr_parse(batch, len, &bh) || cn_batch_size(&bh) != len ||
        log_bhdr_parse(batch, len, &h))
        return CN_EINVAL;
    if (h.base_offset < log->end_offset)
        return CN_ERANGE;
    return append_batch(log, batch, len, h, h.base_offset);
}

/* --- read --------------------------------------------------------------- */

size_t log_find_seg(const struct cn_log *log, int64_t offset)
{
    size_t lo = 0, hi = log->nsegs;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (log->segs[mid]->base <= offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo == 0 ? 0 : lo - 1;
}

static int copy_run(struct cn_segment *seg, int64_t from, int64_t to,
                    struct cn_wr *out)
{
    size_t n = (size_t)(to - from);
    if (n == 0)
        return 0;
    if (!cn_wr_ensure(out, n))
        return CN_ENOMEM;
    int fd, err = log_fd_get(seg, LOG_FILE_LOG, &fd);
    if (err)
        return err;
    ssize_t r = cn_file_pread_all(fd, out->buf + out->len, n, from);
    if (r < 0)
        return (int)r;
    if ((size_t)r != n)
        return cn_corrupt("segment shorter than its size");
    out->len += n;
    return 0;
}

int cn_log_read(struct cn_log *log, int64_t offset, int64_t max_offset,
                size_t max_bytes, bool min_one, struct cn_wr *out,
                size_t *bytes_read)
{
    if (bytes_read)
        *bytes_read = 0;
    if (log->offline)
        return CN_EOFFLINE;
    if (offset < log->start_offset || offset > log->end_offset)
        return CN_ERANGE;
    size_t done = 0;
    bool stop = false;
    for (size_t si = log_find_seg(log, offset); si < log->nsegs && !stop;
         si++) {
        struct cn_segment *seg = log->segs[si];
        int64_t pos = log_seg_lookup(seg, offset);
        int64_t run_start = -1, run_end = -1;
        while (pos < seg->size) {
            struct log_bhdr h;
            int err = log_seg_read_hdr(seg, pos, &h);
            if (err)
                return err;
            if (h.base_offset + h.last_offset_delta < offset) {
                pos += h.total_bytes;
                continue;
            }
            if (h.base_offset >= max_offset ||
                (done + (size_t)h.total_bytes > max_bytes &&
                 !(min_one && done == 0))) {
                stop = true;
                break;
            }
            if (run_start < 0)
                run_start = pos;
            pos += h.total_bytes;
            run_end = pos;
            done += (size_t)h.total_bytes;
            if (done >= max_bytes) {
                stop = true;
                break;
            }
        }
        if (run_start >= 0) {
            int err = copy_run(seg, run_start, run_end, out);
            if (err)
                return err;
        }
    }
    if (bytes_read)
        *bytes_read = done;
    return 0;
}

/* --- timestamps --------------------------------------------------------- */

int cn_log_offset_for_time(struct cn_log *log, int64_t ts_ms,
                           int64_t *offset_out, int64_t *timestamp_out)
{
    *offset_out = -1;
    if (timestamp_out)
        *timestamp_out = -1;
    if (log->offline)
        return CN_EOFFLINE;
    for (size_t si = 0; si < log->nsegs; si++) {
        struct cn_segment *seg = log->segs[si];
        if (seg->max_ts < ts_ms || seg->next_offset <= log->start_offset)
            continue;
        /* Batches up to the last entry below ts all have smaller maxima. */
        int64_t from = log->start_offset;
        size_t lo = 0, hi = seg->tidx_n;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (seg->tidx[mid].ts < ts_ms)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0 && seg->base + seg->tidx[lo - 1].rel + 1 > from)
            from = seg->base + seg->tidx[lo - 1].rel + 1;
        int64_t pos = log_seg_lookup(seg, from);
        while (pos < seg->size) {
            struct log_bhdr h;
            int err = log_seg_read_hdr(seg, pos, &h);
            if (err)
                return err;
            pos += h.total_bytes;
            if (h.base_offset + h.last_offset_delta < from)
                continue;
            if (h.max_timestamp >= ts_ms) {
                *offset_out = h.base_offset > log->start_offset
                                  ? h.base_offset
                                  : log->start_offset;
                if (timestamp_out)
                    *timestamp_out = h.max_timestamp;
                return 0;
            }
        }
    }
    return 0;
}

void cn_log_max_timestamp(const struct cn_log *log, int64_t *ts_out,
                          int64_t *offset_out)
{
    *ts_out = log->max_ts;
    *offset_out = log->max_ts_offset;
}

/* --- durability --------------------------------------------------------- */

/* One file a sync covers: a descriptor pinned in the cache, or, beyond
 * the cache's pin limit (a round may cover every partition of the broker,
 * more files than the budget), a name the worker opens. */
struct sync_file {
    struct cn_segment *seg; /* held by a reference */
    int fd;                 /* pinned descriptor, or -1: open by path */
    uint8_t which;          /* enum log_file */
    int err;                /* run's result for this file */
};

struct cn_log_sync {
    struct cn_log_sync *next;  /* the log's syncs in flight */
    int64_t end_offset;        /* synced offset once this succeeds; a
                                * truncation meanwhile lowers it (loop) */
    size_t nsegs;              /* segments referenced */
    struct cn_segment **segs;  /* referenced segments */
    bool *full;                /* per segment: indexes synced too */
    size_t nfiles;             /* files to fdatasync */
    struct sync_file *files;   /* the worker reads only these */
};

int64_t cn_log_sync_target(const struct cn_log *log)
{
    return log->end_offset;
}

static void sync_add(struct cn_log_sync *s, struct cn_segment *seg,
                     enum log_file which)
{
    struct sync_file *f = &s->files[s->nfiles++];
    f->seg = seg;
    f->which = (uint8_t)which;
    f->err = 0;
    if (!log_fd_pin(seg, which, &f->fd))
        f->fd = -1;
}

struct cn_log_sync *cn_log_sync_begin(struct cn_log *log)
{
    if (log->offline)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < log->nsegs; i++) {
        const struct cn_segment *seg = log->segs[i];
        if (i + 1 == log->nsegs ? seg->next_offset > log->synced_offset
                                : !seg->durable)
            n++;
    }
    if (n == 0)
        return NULL;
    struct cn_log_sync *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->segs = calloc(n, sizeof *s->segs);
    s->full = calloc(n, sizeof *s->full);
    s->files = calloc(LOG_FILES * n, sizeof *s->files);
    if (!s->segs || !s->full || !s->files) {
        free(s->segs);
        free(s->full);
        free(s->files);
        free(s);
        return NULL;
    }
    for (size_t i = 0; i < log->nsegs; i++) {
        struct cn_segment *seg = log->segs[i];
        bool is_active = i + 1 == log->nsegs;
        if (is_active ? seg->next_offset <= log->synced_offset
                      : seg->durable)
            continue;
        seg->refs++;
        s->segs[s->nsegs] = seg;
        s->full[s->nsegs] = !is_active;
        s->nsegs++;
        sync_add(s, seg, LOG_FILE_LOG);
        if (!is_active) {
            sync_add(s, seg, LOG_FILE_INDEX);
            sync_add(s, seg, LOG_FILE_TIMEINDEX);
            if (seg->txn_file)
                sync_add(s, seg, LOG_FILE_TXNINDEX);
        }
    }
    s->end_offset = log->end_offset;
    s->next = log->syncs;
    log->syncs = s;
    log->syncs_in_flight++;
    return s;
}

/* Opens, fdatasyncs and closes a file by name.  Runs on: worker (so no
 * cache: the loop owns it; seg->log->dir and seg->base never change). */
static int sync_by_path(const struct sync_file *f)
{
    char path[PATH_MAX];
    int err = log_seg_path(path, sizeof path, f->seg->log, f->seg->base,
                           log_file_ext[f->which]);
    if (err)
        return err;
    int fd = cn_file_ops->open(path, O_RDWR, 0);
    /* At the process limit the loop could close cached files, but this is
     * not the loop: wait a little for a socket to go instead. */
    for (int i = 0; i < 20 && (fd == -EMFILE || fd == -ENFILE); i++) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
        fd = cn_file_ops->open(path, O_RDWR, 0);
    }
    if (fd < 0)
        return fd;
    err = cn_file_ops->fdatasync(fd);
    cn_file_ops->close(fd);
    return err;
}

int cn_log_sync_run(struct cn_log_sync *s)
{
    int first = 0;
    for (size_t i = 0; i < s->nfiles; i++) {
        struct sync_file *f = &s->files[i];
        int err = CN_FAILPOINT("log.fsync");
        if (!err)
            err = f->fd >= 0 ? cn_file_ops->fdatasync(f->fd)
                             : sync_by_path(f);
        f->err = err;
        if (err && !first)
            first = err;
        /* A file opened by name may be gone because retention deleted its
         * segment meanwhile (sync_end tells); anything else ends the run. */
        if (err && !(err == -ENOENT && f->fd < 0))
            break;
    }
    return first;
}

/* What a sync's failure means once the loop can look: a file missing
 * only because its segment was deleted during the sync is no failure. */
static int sync_outcome(const struct cn_log_sync *s, int err)
{
    if (!err)
        return 0;
    bool seen = false;
    for (size_t i = 0; i < s->nfiles; i++) {
        const struct sync_file *f = &s->files[i];
        if (!f->err)
            continue;
        seen = true;
        /* Or being replaced by a cleaner swap: its data is in the
         * cleaned segment, synced before the swap began. */
        if (!(f->err == -ENOENT && f->fd < 0 &&
              (f->seg->dead || f->seg->replaced)))
            return f->err;
    }
    return seen ? 0 : err;
}

int cn_log_sync_end(struct cn_log *log, struct cn_log_sync *s, int err)
{
    log->syncs_in_flight--;
    for (struct cn_log_sync **pp = &log->syncs; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    err = sync_outcome(s, err);
    if (err) {
        log_go_offline(log, "fdatasync", err);
    } else if (!log->offline) {
        if (s->end_offset > log->synced_offset)
            log->synced_offset = s->end_offset;
        log->last_sync_ms = log_now_ms(log);
        for (size_t i = 0; i < s->nsegs; i++)
            if (s->full[i] && !s->segs[i]->dead)
                s->segs[i]->durable = true;
        /* Recovery point: base of the first segment not fully durable.
         * It moves only when a rolled segment became durable, so the
         * checkpoint is rewritten about once per roll. */
        int64_t rp = log->end_offset;
        for (size_t i = 0; i < log->nsegs; i++)
            if (!log->segs[i]->durable) {
                rp = log->segs[i]->base;
                break;
            }
        if (rp > log->ckpt_rp && rp <= log->synced_offset) {
            int e = log_ckpt_write(log, log->start_offset, rp, false);
            /* On a full disk the old checkpoint stands (an older recovery
             * point only means more to scan after a crash); a later sync
             * tries again. */
            if (e && !out_of_space(e))
                log_go_offline(log, "checkpoint write", e);
        }
    }
    for (size_t i = 0; i < s->nfiles; i++)
        if (s->files[i].fd >= 0)
            log_fd_unpin(s->files[i].seg, (enum log_file)s->files[i].which);
    for (size_t i = 0; i < s->nsegs; i++) {
        s->segs[i]->refs--;
        if (s->segs[i]->dead && s->segs[i]->refs == 0)
            log_seg_free(s->segs[i]);
    }
    free(s->segs);
    free(s->full);
    free(s->files);
    free(s);
    return err;
}

bool cn_log_needs_flush(const struct cn_log *log, int64_t now_ms)
{
    int64_t unsynced = log->end_offset - log->synced_offset;
    if (log->offline || unsynced <= 0)
        return false;
    if (unsynced >= log->cfg.flush_messages)
        return true;
    return log->cfg.flush_ms != INT64_MAX &&
           now_ms - log->last_sync_ms >= log->cfg.flush_ms;
}

/* --- retention and DeleteRecords ---------------------------------------- */

static int after_delete(struct cn_log *log, int deleted)
{
    if (log->segs[0]->base > log->start_offset)
        log->start_offset = log->segs[0]->base;
    if (deleted == 0 && log->ckpt_start == log->start_offset)
        return 0;
    int err = cn_file_sync_dir(log->dir);
    if (!err && log->ckpt_start != log->start_offset) {
        err = log_ckpt_write(log, log->start_offset, log->ckpt_rp, false);
        /* Only whole segments went (DeleteRecords checkpointed its own
         * start already), and recovery starts the log at its first
         * segment anyway: a full disk can wait for the next pass. */
        if (out_of_space(err))
            err = 0;
    }
    if (err) {
        log_go_offline(log, "segment deletion", err);
        return CN_EOFFLINE;
    }
    return 0;
}

int cn_log_enforce_retention(struct cn_log *log, int64_t now_ms)
{
    if (log->offline)
        return CN_EOFFLINE;
    /* A cleaner swap is renaming the oldest segments' files: the next
     * run deletes what is due. */
    if (log->clean_swapping)
        return 0;
    int64_t total = 0;
    for (size_t i = 0; i < log->nsegs; i++)
        total += log->segs[i]->size;
    int deleted = 0;
    while (log->nsegs > 1) {
        const struct cn_segment *seg = log->segs[0];
        int64_t age_ref = seg->max_ts >= 0 ? seg->max_ts : seg->last_write_ms;
        bool by_time = log->cfg.retention_ms >= 0 &&
                       now_ms - age_ref > log->cfg.retention_ms;
        bool by_bytes = log->cfg.retention_bytes >= 0 &&
                        total - seg->size >= log->cfg.retention_bytes;
        bool below = log->segs[1]->base <= log->start_offset;
        if (!by_time && !by_bytes && !below)
            break;
        CN_INFO("log %s: deleting segment %020lld (%s)", log->dir,
                (long long)seg->base,
                by_time ? "retention.ms" : by_bytes ? "retention.bytes"
                                                    : "below log start");
        total -= seg->size;
        int err = drop_first(log);
        deleted++;
        if (err) {
            log_go_offline(log, "segment unlink", err);
            return CN_EOFFLINE;
        }
    }
    int err = after_delete(log, deleted);
    return err ? err : deleted;
}

int cn_log_delete_records(struct cn_log *log, int64_t offset)
{
    if (log->offline)
        return CN_EOFFLINE;
    if (offset > log->end_offset || offset < 0)
        return CN_ERANGE;
    if (offset <= log->start_offset)
        return 0;
    int64_t old_start = log->start_offset;
    log->start_offset = offset;
    int err = log_ckpt_write(log, log->start_offset, log->ckpt_rp, false);
    if (out_of_space(err)) {
        log->start_offset = old_start; /* refused, as if never asked */
        return -ENOSPC;
    }
    if (err) {
        log_go_offline(log, "checkpoint write", err);
        return CN_EOFFLINE;
    }
    /* Everything deleted: roll so the old active segment can go too. */
    if (offset == log->end_offset && log_active(log)->size > 0) {
        err = roll(log);
        if (err)
            return err;
    }
    int deleted = 0;
    /* During a cleaner swap the segments wait for retention's next run
     * (it deletes those below the log start); reads honour the start. */
    while (!log->clean_swapping && log->nsegs > 1 &&
           log->segs[1]->base <= log->start_offset) {
        err = drop_first(log);
        deleted++;
        if (err) {
            log_go_offline(log, "segment unlink", err);
            return CN_EOFFLINE;
        }
    }
    return after_delete(log, deleted);
}

/* The log now ends at end: nothing above it is synced, whatever a sync in
 * flight covered when it began, and cut (if any) lost its rolled,
 * synced-whole state. */
void log_syncs_cap(struct cn_log *log, int64_t end,
                   const struct cn_segment *cut)
{
    for (struct cn_log_sync *s = log->syncs; s; s = s->next) {
        if (s->end_offset > end)
            s->end_offset = end;
        for (size_t i = 0; i < s->nsegs; i++)
            if (s->segs[i] == cut)
                s->full[i] = false;
    }
    if (log->synced_offset > end)
        log->synced_offset = end;
}
