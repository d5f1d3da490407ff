/*
 * log_int.h - internals of the partition log, for the files of src/log only.
 *
 * A struct cn_log owns an array of segments sorted by base offset; the last
 * one is active (appended to).  Each segment keeps its offset and time index
 * in memory as well as on disk, so lookups are a binary search with no I/O;
 * the files exist so a restart need not rescan trusted segments.
 */
#ifndef CN_LOG_LOG_INT_H
#define CN_LOG_LOG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

/* Record batch v2 header bytes the log looks at (offsets into a batch). */
#define LOG_BATCH_HDR_BYTES 61      /* fixed header, records follow */
#define LOG_BATCH_LENGTH_OFF 8      /* int32 bytes after this field */
#define LOG_BATCH_MAGIC_OFF 16      /* int8, must be 2 */
#define LOG_BATCH_CRC_OFF 17        /* uint32 CRC-32C of bytes 21.. */
#define LOG_BATCH_CRC_FROM 21       /* attributes: first CRC'd byte */
#define LOG_BATCH_LAST_DELTA_OFF 23 /* int32 last offset delta */
#define LOG_BATCH_BASE_TS_OFF 27    /* int64 base timestamp */
#define LOG_BATCH_MAX_TS_OFF 35     /* int64 max timestamp */
#define LOG_BATCH_COUNT_OFF 57      /* int32 records count */
#define LOG_BATCH_OVERHEAD 12       /* base offset + batch length */

#define LOG_IDX_ENTRY 8   /* .index entry bytes */
#define LOG_TIDX_ENTRY 12 /* .timeindex entry bytes */
#define LOG_TXN_ENTRY 34  /* .txnindex entry bytes */

/* The few batch header fields the log needs. */
struct log_bhdr {
    int64_t base_offset;       /* first offset in the batch */
    int64_t total_bytes;       /* 12 + batchLength: bytes on disk */
    int32_t last_offset_delta; /* last offset - base offset */
    int8_t magic;              /* 2 */
    uint32_t crc;              /* stored CRC-32C */
    int64_t max_timestamp;     /* ms; -1 if none */
};

struct log_idx_entry {
    uint32_t rel; /* batch base offset - segment base */
    uint32_t pos; /* byte position of the batch in .log */
};

struct log_tidx_entry {
    int64_t ts;   /* segment max timestamp so far, ms */
    uint32_t rel; /* offset - segment base of the batch that raised it */
};

/* A segment's files, as the descriptor cache (fdcache.c) names them. */
enum log_file {
    LOG_FILE_LOG,       /* .log */
    LOG_FILE_INDEX,     /* .index */
    LOG_FILE_TIMEINDEX, /* .timeindex */
    LOG_FILE_TXNINDEX,  /* .txnindex */
    LOG_FILES           /* how many */
};

/* One segment file's entry in the descriptor cache: on its LRU list while
 * open and unpinned, on no list while closed or pinned. */
struct log_fdslot {
    struct log_fdslot *newer, *older; /* LRU neighbours */
    struct cn_segment *seg;           /* owner */
    int pins;                         /* syncs in flight using the fd */
    bool held;                        /* a cleaner swap needs it open */
};

struct cn_segment {
    int64_t base;        /* base offset, also the file name */
    int64_t next_offset; /* last offset in the segment + 1 */
    int64_t size;        /* bytes in .log */
    struct cn_log *log;  /* owner: its dir names the files to reopen */
    /* Descriptors, -1 while closed: the cache closes files of segments
     * not used lately, so read them through log_fd_get() (except right
     * after opening the segment, as recovery does). */
    int log_fd;          /* .log, read/write */
    int idx_fd;          /* .index */
    int tidx_fd;         /* .timeindex */
    int txn_fd;          /* .txnindex */
    bool txn_file;       /* .txnindex exists (made at the first abort) */
    struct log_fdslot slot[LOG_FILES]; /* cache entries, by enum log_file */
    int refs;            /* sync snapshots holding the segment */
    bool durable;        /* rolled, and data + indexes fdatasynced */
    bool dead;           /* unlinked; freed when refs drop to 0 */
    bool replaced;       /* a cleaner swap on a worker is renaming or
                          * unlinking its files (only its held .log
                          * still reads as it was) */
    int64_t created_ms;  /* segment.ms age origin, ms */
    int64_t max_ts;      /* largest batch max timestamp, -1 if none */
    int64_t max_ts_offset; /* last offset of the batch that had max_ts */
    int64_t last_write_ms; /* retention.ms fallback without timestamps */
    int64_t idx_bytes;   /* .log bytes since the last offset index entry */
    int64_t tidx_bytes;  /* .log bytes since the last time index entry */
    struct log_idx_entry *idx;   /* offset index, in memory */
    size_t idx_n, idx_cap;       /* entries used / allocated */
    struct log_tidx_entry *tidx; /* time index, in memory */
    size_t tidx_n, tidx_cap;     /* entries used / allocated */
    struct cn_aborted_txn *txn;  /* aborted txns, by last_offset */
    size_t txn_n, txn_cap;       /* entries used / allocated */
    int64_t txn_min_first;       /* least first_offset; INT64_MAX if none */
};

struct cn_log {
    char *dir;                   /* partition directory, owned */
    struct cn_log_config cfg;    /* copy */
    struct cn_segment **segs;    /* sorted by base; last is active */
    size_t nsegs, segs_cap;      /* used / allocated */
    int64_t start_offset;        /* log start offset */
    int64_t end_offset;          /* next offset to assign */
    int64_t synced_offset;       /* all below durable */
    int64_t ckpt_start;          /* log start in the checkpoint on disk */
    int64_t ckpt_rp;             /* recovery point in the checkpoint */
    int64_t max_ts;              /* largest batch max timestamp, -1 none */
    int64_t max_ts_offset;       /* last offset of that batch */
    int64_t last_sync_ms;        /* clock at the last completed sync */
    int syncs_in_flight;         /* begun, not yet ended */
    bool offline;                /* after a write or sync error */
    struct cn_log_stats stats;   /* recovery figures; rest computed */
    int64_t clean_first_dirty;   /* cleaner checkpoint, -1 never cleaned */
    bool clean_busy;             /* a cleaning job is in flight */
    bool clean_swapping;         /* its swap runs on a worker: no segment
                                  * may be deleted until it ended */
    struct cn_log_sync *syncs;   /* in flight, so a truncation can cap what
                                  * they will claim synced */
};

/* Big-endian helpers. */
static inline uint32_t log_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
           (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t log_be64(const uint8_t *p)
{
    return (uint64_t)log_be32(p) << 32 | log_be32(p + 4);
}

static inline void log_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void log_put64(uint8_t *p, uint64_t v)
{
    log_put32(p, (uint32_t)(v >> 32));
    log_put32(p + 4, (uint32_t)v);
}

/* segment.c */

/* Parses the header fields above from the 61 header bytes alone: disk walks
 * read headers without their records, and proto's cn_batch_hdr_parse()
 * wants the whole batch in memory.
 * Checks only what is needed to walk: magic 2, batchLength large enough,
 * last offset delta >= 0.  Returns 0 or CN_ECORRUPT. */
int log_bhdr_parse(const uint8_t *p, size_t len, struct log_bhdr *h);

/* dir/<20-digit base>.<ext> into buf; 0 or -ENAMETOOLONG. */
int log_seg_path(char *buf, size_t n, const struct cn_log *log, int64_t base,
                 const char *ext);
/* Creates an empty segment at base (files truncated), fsyncs the dir. */
int log_seg_create(struct cn_log *log, int64_t base, struct cn_segment **out);
/* Opens an existing segment's files without reading them. */
int log_seg_open_files(struct cn_log *log, int64_t base,
                       struct cn_segment **out);
/* Opens an existing segment's .log, .index and .timeindex (and its
 * .txnindex when txn) outside the descriptor cache, so a worker may; the
 * segment reads as usual (log_fd_get returns those descriptors) but is
 * the opener's alone until log_fd_adopt.  Returns 0 or -errno. */
int log_seg_open_detached(struct cn_log *log, int64_t base, bool txn,
                          struct cn_segment **out);
/* Closes fds and frees (no unlink); any thread for a detached segment. */
void log_seg_free(struct cn_segment *seg);
/* Unlinks the four files (no dir fsync); returns the first -errno. */
int log_seg_unlink(struct cn_log *log, int64_t base);
/* Appends index entries (memory and file) for a batch just written at pos.
 * Returns 0 or -errno. */
int log_seg_index_batch(struct cn_log *log, struct cn_segment *seg,
                        const struct log_bhdr *h, int64_t pos);
/* Appends a final time index entry holding the segment's max timestamp if
 * the sparse entries missed it (before a roll or a clean close), so the
 * last entry is the max when the segment is next loaded. */
int log_seg_seal_timeindex(struct cn_segment *seg);
/* Position of the batch to start scanning from for offset: the largest
 * indexed batch with base <= offset (0 if none). */
int64_t log_seg_lookup(const struct cn_segment *seg, int64_t offset);
/* What a walk of one segment's batches found. */
struct log_scan {
    int64_t good_bytes;  /* length of the valid prefix of .log */
    int64_t next_offset; /* offset after the last valid batch */
    int64_t batches;     /* valid batches */
    const char *why;     /* first bad batch's fault (static), NULL if none */
};

/* The base offsets of dir's .log files, sorted; *bases_out is the
 * caller's to free.  Returns 0, -errno or CN_ENOMEM. */
int log_list_bases(const char *dir, int64_t **bases_out, size_t *n_out);
/* Walks seg's .log (seg->size bytes, from byte 0) and stops at the first
 * batch that does not parse, chain from seg->base, fit in the file or match
 * its CRC-32C.  fn (may be NULL) sees each valid batch whole; its
 * CN_ECORRUPT marks that batch bad (cn_corrupt_last() is the why), another
 * non-zero return stops the walk and is returned.  Reads only; hushes
 * cn_corrupt() meanwhile.  Returns 0 (look at out->why) or -errno /
 * CN_ENOMEM. */
int log_seg_scan(struct cn_segment *seg,
                 int (*fn)(void *arg, const struct log_bhdr *h,
                           const uint8_t *batch, int64_t pos),
                 void *arg, struct log_scan *out);
/* Scans the whole .log checking every batch (lengths, magic, offsets, CRC);
 * truncates at the first bad one, rebuilds both indexes in memory and on
 * disk.  *scanned gets the bytes examined, *truncated what was cut.  The
 * first batch must have offset seg->base. */
int log_seg_recover(struct cn_log *log, struct cn_segment *seg,
                    int64_t *scanned, int64_t *truncated);
/* Trusts the .log but validates the index files against it; sets size,
 * next_offset, max_ts.  Returns 0, or CN_ECORRUPT if the caller must fall
 * back to log_seg_recover(). */
int log_seg_load_trusted(struct cn_log *log, struct cn_segment *seg);
/* The same with the index interval given, reading nothing of seg->log
 * but its dir: a worker's check of a detached segment. */
int log_seg_load_at(struct cn_segment *seg, int64_t index_interval);
/* Cuts seg so that no batch holding an offset >= offset stays: .log at
 * that batch's position, offset/time index entries of removed batches,
 * .txnindex entries of markers removed; recomputes size, next_offset and
 * the max timestamp from what is kept (reading only headers) and marks
 * it not durable.  Does not sync.  Returns 0 or -errno (the files are
 * then in doubt). */
int log_seg_truncate(struct cn_log *log, struct cn_segment *seg,
                     int64_t offset);
/* Reads the header at pos; returns 0, CN_ETRUNC at/after end, or an error. */
int log_seg_read_hdr(struct cn_segment *seg, int64_t pos,
                     struct log_bhdr *h);

/* The in-memory index state of a segment before an append, so a write
 * that ran out of space can be undone (log_seg_undo). */
struct log_seg_mark {
    int64_t size;                  /* .log bytes */
    size_t idx_n, tidx_n;          /* index entries */
    int64_t idx_bytes, tidx_bytes; /* bytes since the last entries */
    int64_t max_ts, max_ts_offset; /* segment max timestamp */
};
void log_seg_mark(const struct cn_segment *seg, struct log_seg_mark *m);
/* Cuts the segment's three files back to the marked sizes and restores
 * the in-memory indexes (what a failed append may have added).  Needs no
 * free space.  Returns 0 or -errno (then the files are in doubt). */
int log_seg_undo(struct cn_segment *seg, const struct log_seg_mark *m);

int64_t log_now_ms(const struct cn_log *log);

/* Growable array helper: makes room for need elements of elem bytes. */
bool log_grow(void **arr, size_t *cap, size_t need, size_t elem);

/* fdcache.c: every partition log's segment files share one bounded set
 * of descriptors (the budget, from RLIMIT_NOFILE), least recently used
 * closed first.  Loop thread only. */

/* File name extensions, by enum log_file. */
extern const char *const log_file_ext[LOG_FILES];
/* seg's descriptor for file `which`, reopening it (O_RDWR, never
 * creating) if the cache closed it, and marking it most recently used.
 * The descriptor stays valid until seg is freed or the file closed with
 * log_fd_close: making room only ever closes files of other segments,
 * and not the most recently used few.  Returns 0 or -errno (-ENOENT if
 * the file is gone, -EMFILE if nothing could be closed to make room). */
int log_fd_get(struct cn_segment *seg, enum log_file which, int *fd_out);
/* Opens seg's file `which` with flags (O_CREAT, O_TRUNC as wanted; O_RDWR
 * is implied), as log_fd_get would but creating it.  Returns 0 or
 * -errno. */
int log_fd_open(struct cn_segment *seg, enum log_file which, int flags);
/* Closes seg's file `which` if open; it must not be pinned. */
void log_fd_close(struct cn_segment *seg, enum log_file which);
/* Holds seg's file `which` open for a worker's fdatasync, reopening it if
 * need be: the cache does not close a pinned descriptor.  *fd_out gets it.
 * False (nothing pinned) when another sync holds it pinned, half the
 * budget is pinned already or the file cannot be opened; the caller then
 * has the worker open it by name. */
bool log_fd_pin(struct cn_segment *seg, enum log_file which, int *fd_out);
void log_fd_unpin(struct cn_segment *seg, enum log_file which);
/* Holds seg's file `which` open (opening it now if the cache closed it)
 * until log_fd_unhold or log_fd_take: a worker is about to rename or
 * unlink it, and reads through the cache must go on seeing the old
 * bytes.  A sync may still pin it.  Returns 0 or -errno. */
int log_fd_hold(struct cn_segment *seg, enum log_file which);
void log_fd_unhold(struct cn_segment *seg, enum log_file which);
/* Takes seg's descriptor `which` out of the cache (dropping a hold) and
 * returns it for the caller to close, off the loop if its file was
 * unlinked (the last close frees the blocks); -1 when it is closed, or
 * pinned by a sync (whose end closes it with the segment). */
int log_fd_take(struct cn_segment *seg, enum log_file which);
/* Hands the cache the descriptors of a segment opened outside it (a
 * worker's, as log_seg_open_detached does). */
void log_fd_adopt(struct cn_segment *seg);

/* txnindex.c */

/* Opens an existing .txnindex (none is not an error: txn_fd stays -1),
 * loads its entries and cuts a torn tail or entries that do not belong to
 * [base, next_offset), truncating the file to the good prefix.  Call once
 * next_offset is known.  Returns 0 or -errno / CN_ENOMEM. */
int log_seg_load_txnindex(struct cn_log *log, struct cn_segment *seg);

/* log_clean.c */

/* Before the segments are listed: finishes a cleaning swap whose manifest
 * is intact, else removes what a pass left (.cleaned files), and reads the
 * partition's cleaner checkpoint into log->clean_first_dirty.  Returns 0
 * or -errno. */
int log_clean_recover(struct cn_log *log);
/* The partition directory's cleaner checkpoint, -1 if it has none. */
int64_t log_clean_ckpt_lookup(const char *partition_dir);

/* log.c */

/* Removes segs[i..i+n) from the list without touching files, releasing
 * each (freed now or when the last sync holding it ends). */
void log_segs_remove(struct cn_log *log, size_t i, size_t n);
/* Inserts seg at index i. */
int log_segs_insert(struct cn_log *log, size_t i, struct cn_segment *seg);
/* Recomputes the log's max timestamp from its segments. */
void log_recompute_max_ts(struct cn_log *log);

/* "<20 digits>.<ext>" -> base offset, or -1. */
int64_t log_parse_seg_name(const char *name, const char *ext);

/* Marks the log offline after a failed write or sync (logs once). */
void log_go_offline(struct cn_log *log, const char *what, int err);
/* Index of the segment holding offset: the last with base <= offset. */
size_t log_find_seg(const struct cn_log *log, int64_t offset);

/* log.c, shared with log_trunc.c. */
/* The newest segment, the one appended to. */
struct cn_segment *log_active(const struct cn_log *log);
/* Appends seg to the segment array; 0 or CN_ENOMEM. */
int log_push_seg(struct cn_log *log, struct cn_segment *seg);
/* Drops a segment the array no longer holds (its files stay). */
void log_seg_release(struct cn_segment *seg);
/* fdatasyncs a segment's log and index files. */
int log_seg_sync_all(struct cn_segment *seg);
/* Writes the checkpoint: log start, recovery point, clean close. */
int log_ckpt_write(struct cn_log *log, int64_t start, int64_t rp, bool clean);
/* The log now ends at end: syncs in flight cover no more, cut (if any) is
 * no longer synced whole. */
void log_syncs_cap(struct cn_log *log, int64_t end,
                   const struct cn_segment *cut);

#endif
