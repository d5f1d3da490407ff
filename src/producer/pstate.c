/*
 * pstate.c - producer state table and its snapshot files; see pstate.h.
 *
 * Memory: entries live in one dense array (struct pentry, 112 bytes) and a
 * power-of-two open-addressing index of uint32 slots (entry index + 1, 0 =
 * empty, linear probing) points into it.  Keeping the index apart from the
 * entries lets the index stay sparse (load <= 3/4, 4 bytes a slot) while
 * the entries stay dense; the dense array grows by 1/8 once large, so an
 * idle producer costs about 112-126 bytes plus 5-11 bytes of index.  There
 * is no single-entry delete: expiry compacts the array and rebuilds the
 * index, so the index never needs tombstones.
 *
 * Snapshot file <dir>/<offset %020lld>.snapshot, big-endian, modelled on
 * Kafka's ProducerSnapshot v1 but keeping all five remembered batches so
 * duplicate detection survives a restart:
 *
 *   0   4  magic "CNPS"
 *   4   2  version (1)
 *   6   4  crc: CRC-32C of bytes 10..end
 *   10  4  entry count
 *   14  ... entries, each:
 *     0   8  producer id
 *     8   2  epoch
 *     10  4  coordinator epoch (-1 none)
 *     14  8  open transaction's first offset (-1 none)
 *     22  8  last timestamp (ms)
 *     30  1  batch count (0..5)
 *     31  ... batches, oldest first, 16 bytes each:
 *       0   4  last sequence
 *       4   4  offset delta (last sequence - first sequence)
 *       8   8  last offset
 *
 * A file whose length does not match its count exactly is corrupt.
 */
#include "producer/pstate.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/err.h"
#include "base/rd.h"
#include "base/say.h"
#include "base/wr.h"
#include "log/file.h"

#define SNAP_MAGIC "CNPS"
#define SNAP_VERSION 1
#define SNAP_HDR_BYTES 14
#define SNAP_CRC_OFF 6
#define SNAP_CRC_FROM 10
#define SNAP_ENTRY_BYTES 31
#define SNAP_BATCH_BYTES 16
#define SNAP_SUFFIX ".snapshot"
#define SNAP_NAME_DIGITS 20
/* Far more than any real table; bounds a read of a lying file. */
#define SNAP_MAX_BYTES ((int64_t)1 << 32)

struct pbatch {
    int32_t last_seq;     /* sequence of the batch's last record */
    int32_t offset_delta; /* last_seq - first seq = records - 1 */
    int64_t last_offset;  /* offset of the batch's last record */
};

struct pentry {
    int64_t producer_id;
    int64_t txn_first_offset;  /* open transaction's first offset, -1 */
    int64_t last_timestamp;    /* ms; max timestamp of the last batch */
    int32_t coordinator_epoch; /* from the last marker, -1 none */
    int16_t epoch;             /* -1 = no epoch yet */
    uint8_t nbatches;          /* remembered batches, 0..5 */
    uint8_t head;              /* ring index of the oldest batch */
    uint32_t markers;          /* markers taken (cn_pentry_info) */
    struct pbatch batches[CN_PSTATE_BATCHES]; /* ring */
};

/* An open transaction in the partition's ordered set (see open_add). */
struct open_txn {
    int64_t first_offset; /* its first offset */
    int64_t producer_id;  /* -1 once closed (lazily removed) */
    int64_t start_ms;     /* max timestamp of its first batch */
};

struct unrepl_txn {
    int64_t first_offset;  /* the transaction's first offset */
    int64_t marker_offset; /* where its marker is */
};

struct cn_pstate {
    struct pentry *entries; /* dense, [0..count) used */
    size_t count;           /* entries in use */
    size_t cap;             /* entries allocated */
    uint32_t *slots;        /* index: entry index + 1, 0 empty */
    size_t nslots;          /* power of two, or 0 before the first insert */
    /* Open transactions ordered by first offset: [open_head, open_n) of
     * open; closed ones stay as holes until the head passes them. */
    struct open_txn *open;
    size_t open_head, open_n, open_cap;
    size_t open_live;       /* open transactions (holes not counted) */
    /* Transactions closed by a marker the high watermark has not passed
     * yet, in marker order: [unrepl_head, unrepl_n) of unrepl.  Still
     * unstable (Kafka's unreplicatedTxns): a new leader without the
     * marker would hold them open again. */
    struct unrepl_txn *unrepl;
    size_t unrepl_head, unrepl_n, unrepl_cap;
};

static uint64_t hash_pid(int64_t pid)
{
    /* splitmix64 finalizer: producer ids are sequential, so mix them. */
    uint64_t x = (uint64_t)pid;
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static struct pentry *find(const struct cn_pstate *ps, int64_t pid)
{
    if (ps->nslots == 0)
        return NULL;
    size_t mask = ps->nslots - 1;
    for (size_t i = hash_pid(pid) & mask;; i = (i + 1) & mask) {
        uint32_t s = ps->slots[i];
        if (s == 0)
            return NULL;
        if (ps->entries[s - 1].producer_id == pid)
            return &ps->entries[s - 1];
    }
}

static void index_put(uint32_t *slots, size_t nslots, int64_t pid,
                      uint32_t idx)
{
    size_t mask = nslots - 1;
    size_t i = hash_pid(pid) & mask;
    while (slots[i] != 0)
        i = (i + 1) & mask;
    slots[i] = idx + 1;
}

/* Replaces the index with one of nslots slots built from the entries. */
static int index_rebuild(struct cn_pstate *ps, size_t nslots)
{
    uint32_t *slots = NULL;
    if (nslots) {
        slots = calloc(nslots, sizeof *slots);
        if (!slots)
            return CN_ENOMEM;
        for (size_t i = 0; i < ps->count; i++)
            index_put(slots, nslots, ps->entries[i].producer_id,
                      (uint32_t)i);
    }
    free(ps->slots);
    ps->slots = slots;
    ps->nslots = nslots;
    return 0;
}

/* Smallest power of two >= 16 that holds n entries at load <= 3/4. */
static size_t slots_for(size_t n)
{
    size_t s = 16;
    while (n * 4 > s * 3)
        s *= 2;
    return s;
}

/* Adds a fresh entry for pid (not present); NULL when out of memory. */
static struct pentry *insert(struct cn_pstate *ps, int64_t pid)
{
    if (ps->count >= UINT32_MAX - 1)
        return NULL;
    if (ps->count == ps->cap) {
        /* Double while small, then grow by 1/8: the array is most of the
         * table's memory and realloc of a large block is cheap. */
        size_t cap = ps->cap < 1024 ? (ps->cap ? ps->cap * 2 : 4)
                                    : ps->cap + ps->cap / 8;
        struct pentry *e = realloc(ps->entries, cap * sizeof *e);
        if (!e)
            return NULL;
        ps->entries = e;
        ps->cap = cap;
    }
    if ((ps->count + 1) * 4 > ps->nslots * 3) {
        if (index_rebuild(ps, slots_for(ps->count + 1)) != 0)
            return NULL;
    }
    struct pentry *e = &ps->entries[ps->count];
    memset(e, 0, sizeof *e);
    e->producer_id = pid;
    e->txn_first_offset = -1;
    e->last_timestamp = -1;
    e->coordinator_epoch = -1;
    e->epoch = -1;
    index_put(ps->slots, ps->nslots, pid, (uint32_t)ps->count);
    ps->count++;
    return e;
}

static const struct pbatch *batch_at(const struct pentry *e, int i)
{
    return &e->batches[(e->head + i) % CN_PSTATE_BATCHES];
}

static const struct pbatch *newest(const struct pentry *e)
{
    return e->nbatches ? batch_at(e, e->nbatches - 1) : NULL;
}

static void push_batch(struct pentry *e, const struct pbatch *b)
{
    if (e->nbatches == CN_PSTATE_BATCHES) {
        e->batches[e->head] = *b;
        e->head = (uint8_t)((e->head + 1) % CN_PSTATE_BATCHES);
    } else {
        e->batches[(e->head + e->nbatches) % CN_PSTATE_BATCHES] = *b;
        e->nbatches++;
    }
}

/* Kafka's DefaultRecordBatch.decrementSequence: wraps below 0 to
 * INT32_MAX. */
static int32_t first_seq(const struct pbatch *b)
{
    if (b->last_seq < b->offset_delta)
        return INT32_MAX - (b->offset_delta - b->last_seq) + 1;
    return b->last_seq - b->offset_delta;
}

static bool in_sequence(int32_t last, int32_t next)
{
    return (int64_t)next == (int64_t)last + 1 ||
           (next == 0 && last == INT32_MAX);
}

/* A marker or data batch with another epoch starts that epoch's memory
 * afresh, as Kafka's ProducerStateEntry.maybeUpdateProducerEpoch. */
static void set_epoch(struct pentry *e, int16_t epoch)
{
    if (e->epoch != epoch) {
        e->epoch = epoch;
        e->nbatches = 0;
        e->head = 0;
    }
}

/*
 * The open-transaction set.  A transaction opens at the offset its first
 * batch is appended at, and offsets only grow, so live appends always go at
 * the tail; only a snapshot load inserts out of order (it sorts first).
 * Closing leaves a hole found by binary search; the head skips holes, so
 * the oldest open transaction (the LSO's holder) is always at open_head.
 */
static size_t open_find(const struct cn_pstate *ps, int64_t first_offset)
{
    size_t lo = ps->open_head, hi = ps->open_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ps->open[mid].first_offset < first_offset)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int open_add(struct cn_pstate *ps, int64_t first_offset, int64_t pid,
                    int64_t start_ms)
{
    if (ps->open_head > 0 && ps->open_n == ps->open_cap) {
        memmove(ps->open, ps->open + ps->open_head,
                (ps->open_n - ps->open_head) * sizeof *ps->open);
        ps->open_n -= ps->open_head;
        ps->open_head = 0;
    }
    if (ps->open_n == ps->open_cap) {
        size_t cap = ps->open_cap ? ps->open_cap * 2 : 8;
        struct open_txn *n = realloc(ps->open, cap * sizeof *n);
        if (!n)
            return CN_ENOMEM;
        ps->open = n;
        ps->open_cap = cap;
    }
    size_t at = ps->open_n;
    if (at > ps->open_head && ps->open[at - 1].first_offset > first_offset) {
        at = open_find(ps, first_offset);
        memmove(ps->open + at + 1, ps->open + at,
                (ps->open_n - at) * sizeof *ps->open);
    }
    ps->open[at].first_offset = first_offset;
    ps->open[at].producer_id = pid;
    ps->open[at].start_ms = start_ms;
    ps->open_n++;
    ps->open_live++;
    return 0;
}

static void open_remove(struct cn_pstate *ps, int64_t first_offset)
{
    size_t at = open_find(ps, first_offset);
    if (at >= ps->open_n || ps->open[at].first_offset != first_offset ||
        ps->open[at].producer_id < 0)
        return;
    ps->open[at].producer_id = -1;
    ps->open_live--;
    while (ps->open_head < ps->open_n && ps->open[ps->open_head].producer_id < 0)
        ps->open_head++;
    if (ps->open_head == ps->open_n)
        ps->open_head = ps->open_n = 0;
}

struct cn_pstate *cn_pstate_new(void)
{
    return calloc(1, sizeof(struct cn_pstate));
}

void cn_pstate_free(struct cn_pstate *ps)
{
    if (!ps)
        return;
    free(ps->entries);
    free(ps->slots);
    free(ps->open);
    free(ps->unrepl);
    free(ps);
}

void cn_pstate_clear(struct cn_pstate *ps)
{
    free(ps->entries);
    free(ps->slots);
    free(ps->open);
    free(ps->unrepl);
    memset(ps, 0, sizeof *ps);
}

enum cn_pcheck cn_pstate_check(const struct cn_pstate *ps,
                               const struct cn_batch_hdr *hdr,
                               int64_t *dup_offset)
{
    const struct pentry *e = find(ps, hdr->producer_id);
    if (!e)
        return CN_PCHECK_APPEND;
    if (hdr->producer_epoch < e->epoch)
        return CN_PCHECK_FENCED;
    int32_t first = hdr->base_sequence;
    if (hdr->producer_epoch != e->epoch) {
        /* New epoch: sequences restart at 0, unless the entry never had
         * an epoch (state rebuilt without one). */
        if (first != 0 && e->epoch != -1)
            return CN_PCHECK_OUT_OF_ORDER;
        return CN_PCHECK_APPEND;
    }
    int32_t last = cn_batch_last_sequence(hdr);
    for (int i = 0; i < e->nbatches; i++) {
        const struct pbatch *b = batch_at(e, i);
        if (b->last_seq == last && first_seq(b) == first) {
            if (dup_offset)
                *dup_offset = b->last_offset - b->offset_delta;
            return CN_PCHECK_DUPLICATE;
        }
    }
    if (e->epoch == -1)
        return CN_PCHECK_APPEND;
    /* With nothing remembered for this epoch (only markers so far, or a
     * bumped epoch) Kafka compares against NO_SEQUENCE (-1), so the
     * producer must start at 0. */
    const struct pbatch *nb = newest(e);
    if (!in_sequence(nb ? nb->last_seq : -1, first))
        return CN_PCHECK_OUT_OF_ORDER;
    return CN_PCHECK_APPEND;
}

static int unrepl_push(struct cn_pstate *ps, int64_t first, int64_t marker);

int cn_pstate_update(struct cn_pstate *ps, const struct cn_batch_hdr *hdr,
                     int control_type, int32_t coordinator_epoch,
                     int64_t *closed_first_offset)
{
    if (closed_first_offset)
        *closed_first_offset = -1;
    if (hdr->producer_id < 0)
        return 0;
    struct pentry *e = find(ps, hdr->producer_id);
    if (!e) {
        e = insert(ps, hdr->producer_id);
        if (!e)
            return CN_ENOMEM;
    }
    set_epoch(e, hdr->producer_epoch);
    e->last_timestamp = hdr->max_timestamp;
    if (control_type >= 0) {
        /* Markers close the transaction but leave sequences alone: they
         * carry no producer sequence. */
        if (closed_first_offset)
            *closed_first_offset = e->txn_first_offset;
        if (e->txn_first_offset >= 0) {
            open_remove(ps, e->txn_first_offset);
            if (unrepl_push(ps, e->txn_first_offset, hdr->base_offset) != 0)
                return CN_ENOMEM;
        }
        e->txn_first_offset = -1;
        e->coordinator_epoch = coordinator_epoch;
        e->markers++;
        return 0;
    }
    struct pbatch b = {
        .last_seq = cn_batch_last_sequence(hdr),
        .offset_delta = hdr->last_offset_delta,
        .last_offset = cn_batch_last_offset(hdr),
    };
    if (cn_batch_is_transactional(hdr) && e->txn_first_offset == -1) {
        if (open_add(ps, hdr->base_offset, hdr->producer_id,
                     hdr->max_timestamp) != 0)
            return CN_ENOMEM;
        e->txn_first_offset = hdr->base_offset;
    }
    push_batch(e, &b);
    return 0;
}

static int unrepl_push(struct cn_pstate *ps, int64_t first, int64_t marker)
{
    if (ps->unrepl_head > 0 && ps->unrepl_n == ps->unrepl_cap) {
        memmove(ps->unrepl, ps->unrepl + ps->unrepl_head,
                (ps->unrepl_n - ps->unrepl_head) * sizeof *ps->unrepl);
        ps->unrepl_n -= ps->unrepl_head;
        ps->unrepl_head = 0;
    }
    if (ps->unrepl_n == ps->unrepl_cap) {
        size_t cap = ps->unrepl_cap ? ps->unrepl_cap * 2 : 8;
        struct unrepl_txn *v = realloc(ps->unrepl, cap * sizeof *v);
        if (!v)
            return CN_ENOMEM;
        ps->unrepl = v;
        ps->unrepl_cap = cap;
    }
    ps->unrepl[ps->unrepl_n++] = (struct unrepl_txn){first, marker};
    return 0;
}

void cn_pstate_stable_at(struct cn_pstate *ps, int64_t high_watermark)
{
    while (ps->unrepl_head < ps->unrepl_n &&
           ps->unrepl[ps->unrepl_head].marker_offset < high_watermark)
        ps->unrepl_head++;
    if (ps->unrepl_head == ps->unrepl_n)
        ps->unrepl_head = ps->unrepl_n = 0;
}

int64_t cn_pstate_first_unstable_offset(const struct cn_pstate *ps,
                                        int64_t high_watermark)
{
    int64_t first = cn_pstate_first_open_offset(ps);
    /* Markers are in offset order: skip those below the high watermark
     * (not pruned yet), then the oldest transaction among the rest. */
    size_t lo = ps->unrepl_head, hi = ps->unrepl_n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ps->unrepl[mid].marker_offset < high_watermark)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < ps->unrepl_n; i++)
        if (first < 0 || ps->unrepl[i].first_offset < first)
            first = ps->unrepl[i].first_offset;
    return first;
}

int64_t cn_pstate_first_open_offset(const struct cn_pstate *ps)
{
    return ps->open_live ? ps->open[ps->open_head].first_offset : -1;
}

size_t cn_pstate_open_count(const struct cn_pstate *ps)
{
    return ps->open_live;
}

int cn_pstate_foreach_open(const struct cn_pstate *ps,
                           int (*fn)(void *arg, int64_t producer_id,
                                     int64_t first_offset, int64_t start_ms),
                           void *arg)
{
    for (size_t i = ps->open_head; i < ps->open_n; i++) {
        if (ps->open[i].producer_id < 0)
            continue;
        int r = fn(arg, ps->open[i].producer_id, ps->open[i].first_offset,
                   ps->open[i].start_ms);
        if (r)
            return r;
    }
    return 0;
}

size_t cn_pstate_count(const struct cn_pstate *ps)
{
    return ps->count;
}

static void fill_info(const struct pentry *e, struct cn_pentry_info *out)
{
    const struct pbatch *nb = newest(e);
    out->producer_id = e->producer_id;
    out->epoch = e->epoch;
    out->last_sequence = nb ? nb->last_seq : -1;
    out->last_offset = nb ? nb->last_offset : -1;
    out->last_timestamp = e->last_timestamp;
    out->coordinator_epoch = e->coordinator_epoch;
    out->txn_first_offset = e->txn_first_offset;
    out->batches = e->nbatches;
    out->markers = e->markers;
}

bool cn_pstate_get(const struct cn_pstate *ps, int64_t producer_id,
                   struct cn_pentry_info *out)
{
    const struct pentry *e = find(ps, producer_id);
    if (!e)
        return false;
    fill_info(e, out);
    return true;
}

int cn_pstate_foreach(const struct cn_pstate *ps,
                      int (*fn)(void *arg, const struct cn_pentry_info *e),
                      void *arg)
{
    for (size_t i = 0; i < ps->count; i++) {
        struct cn_pentry_info info;
        fill_info(&ps->entries[i], &info);
        int r = fn(arg, &info);
        if (r)
            return r;
    }
    return 0;
}

size_t cn_pstate_expire(struct cn_pstate *ps, int64_t now_ms,
                        int64_t expiration_ms)
{
    size_t kept = 0;
    for (size_t i = 0; i < ps->count; i++) {
        const struct pentry *e = &ps->entries[i];
        if (e->txn_first_offset == -1 &&
            now_ms - e->last_timestamp >= expiration_ms)
            continue;
        if (kept != i)
            ps->entries[kept] = *e;
        kept++;
    }
    size_t removed = ps->count - kept;
    if (removed == 0)
        return 0;
    ps->count = kept;
    /* Give memory back after a mass expiry; failing to shrink is fine. */
    if (ps->cap > 64 && kept < ps->cap / 4) {
        size_t cap = kept < 16 ? 16 : kept * 2;
        struct pentry *ne = realloc(ps->entries, cap * sizeof *ne);
        if (ne) {
            ps->entries = ne;
            ps->cap = cap;
        }
    }
    size_t nslots = kept ? slots_for(kept) : 0;
    if (nslots > ps->nslots)
        nslots = ps->nslots;
    if (index_rebuild(ps, nslots) != 0) {
        /* Cannot allocate a smaller index: reuse the old one in place. */
        memset(ps->slots, 0, ps->nslots * sizeof *ps->slots);
        for (size_t i = 0; i < ps->count; i++)
            index_put(ps->slots, ps->nslots, ps->entries[i].producer_id,
                      (uint32_t)i);
    }
    return removed;
}

size_t cn_pstate_memory(const struct cn_pstate *ps)
{
    return sizeof *ps + ps->cap * sizeof(struct pentry) +
           ps->nslots * sizeof(uint32_t);
}

/* ---- snapshots ---- */

/* Offset from "<20 digits>.snapshot", or -1 if name is not one. */
static int64_t parse_snap_name(const char *name, const char *suffix)
{
    size_t n = strlen(name);
    size_t sl = strlen(suffix);
    if (n != SNAP_NAME_DIGITS + sl || strcmp(name + SNAP_NAME_DIGITS, suffix))
        return -1;
    int64_t v = 0;
    for (int i = 0; i < SNAP_NAME_DIGITS; i++) {
        if (name[i] < '0' || name[i] > '9')
            return -1;
        if (v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (name[i] - '0');
    }
    return v;
}

static int snap_path(char *buf, size_t n, const char *dir, int64_t offset)
{
    if (snprintf(buf, n, "%s/%020lld" SNAP_SUFFIX, dir, (long long)offset) >=
        (int)n)
        return -ENAMETOOLONG;
    return 0;
}

static int unlink_snap(const char *dir, int64_t offset)
{
    char path[PATH_MAX];
    int err = snap_path(path, sizeof path, dir, offset);
    return err ? err : cn_file_ops->unlink(path);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorted offsets of the snapshots in dir; removes leftover temp files when
 * clean_tmp. */
static int list_snaps(const char *dir, bool clean_tmp, int64_t **out,
                      size_t *n_out)
{
    DIR *d = opendir(dir);
    if (!d)
        return -errno;
    int64_t *offs = NULL;
    size_t n = 0, cap = 0;
    int err = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int64_t off = parse_snap_name(de->d_name, SNAP_SUFFIX);
        if (off >= 0) {
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                int64_t *no = realloc(offs, cap * sizeof *no);
                if (!no) {
                    err = CN_ENOMEM;
                    break;
                }
                offs = no;
            }
            offs[n++] = off;
        } else if (clean_tmp &&
                   parse_snap_name(de->d_name, SNAP_SUFFIX ".tmp") >= 0) {
            char path[PATH_MAX];
            if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) <
                (int)sizeof path) {
                CN_INFO("producer state %s: removing stray %s", dir,
                        de->d_name);
                cn_file_ops->unlink(path);
            }
        }
    }
    closedir(d);
    if (err) {
        free(offs);
        return err;
    }
    if (n > 1)
        qsort(offs, n, sizeof *offs, cmp_i64);
    *out = offs;
    *n_out = n;
    return 0;
}

int cn_pstate_snapshot_encode(const struct cn_pstate *ps, struct cn_wr *w)
{
    if (ps->count > INT32_MAX)
        return CN_EINVAL;
    cn_wr_init(w, SNAP_HDR_BYTES +
                      ps->count * (SNAP_ENTRY_BYTES + 2 * SNAP_BATCH_BYTES));
    cn_wr_raw(w, SNAP_MAGIC, 4);
    cn_wr_i16(w, SNAP_VERSION);
    size_t crc_slot = cn_wr_reserve(w, 4);
    cn_wr_i32(w, (int32_t)ps->count);
    for (size_t i = 0; i < ps->count; i++) {
        const struct pentry *e = &ps->entries[i];
        cn_wr_i64(w, e->producer_id);
        cn_wr_i16(w, e->epoch);
        cn_wr_i32(w, e->coordinator_epoch);
        cn_wr_i64(w, e->txn_first_offset);
        cn_wr_i64(w, e->last_timestamp);
        cn_wr_i8(w, (int8_t)e->nbatches);
        for (int j = 0; j < e->nbatches; j++) {
            const struct pbatch *b = batch_at(e, j);
            cn_wr_i32(w, b->last_seq);
            cn_wr_i32(w, b->offset_delta);
            cn_wr_i64(w, b->last_offset);
        }
    }
    if (!w->err)
        cn_wr_patch_u32(w, crc_slot,
                        cn_crc32c(0, w->buf + SNAP_CRC_FROM,
                                  w->len - SNAP_CRC_FROM));
    int err = w->err;
    if (err)
        cn_wr_fini(w);
    return err;
}

int cn_pstate_snapshot_store(const char *dir, int64_t offset,
                             const uint8_t *buf, size_t len)
{
    if (offset < 0)
        return CN_EINVAL;
    char name[64];
    snprintf(name, sizeof name, "%020lld" SNAP_SUFFIX, (long long)offset);
    return cn_file_write_atomic(dir, name, buf, len);
}

int cn_pstate_snapshot_write(const struct cn_pstate *ps, const char *dir,
                             int64_t offset)
{
    if (offset < 0)
        return CN_EINVAL;
    struct cn_wr w;
    int err = cn_pstate_snapshot_encode(ps, &w);
    if (err)
        return err;
    err = cn_pstate_snapshot_store(dir, offset, w.buf, w.len);
    cn_wr_fini(&w);
    return err;
}

/* Parses a whole snapshot file image into ps (which must be empty).
 * Returns 0, CN_ECORRUPT with *why set, or CN_ENOMEM. */
/* Records where a snapshot failed to parse (cn_corrupt) and why. */
#define BAD(what) (*why = (what), cn_corrupt(what))

static int snap_parse(struct cn_pstate *ps, const uint8_t *buf, size_t len,
                      const char **why)
{
    struct cn_rd rd;
    cn_rd_init(&rd, buf, len);
    struct cn_bytes magic = cn_rd_raw(&rd, 4);
    int16_t version = cn_rd_i16(&rd);
    uint32_t crc = cn_rd_u32(&rd);
    int32_t count = cn_rd_i32(&rd);
    if (rd.err)
        return BAD("shorter than its header");
    if (memcmp(magic.ptr, SNAP_MAGIC, 4) != 0)
        return BAD("bad magic");
    if (version != SNAP_VERSION)
        return BAD("unknown version");
    if (cn_crc32c(0, buf + SNAP_CRC_FROM, len - SNAP_CRC_FROM) != crc)
        return BAD("CRC mismatch");
    if (count < 0 || (size_t)count > cn_rd_left(&rd) / SNAP_ENTRY_BYTES)
        return BAD("entry count does not fit the file");
    for (int32_t i = 0; i < count; i++) {
        int64_t pid = cn_rd_i64(&rd);
        int16_t epoch = cn_rd_i16(&rd);
        int32_t coord = cn_rd_i32(&rd);
        int64_t txn = cn_rd_i64(&rd);
        int64_t ts = cn_rd_i64(&rd);
        int8_t nb = cn_rd_i8(&rd);
        if (rd.err)
            return BAD("truncated entry");
        if (pid < 0 || nb < 0 || nb > CN_PSTATE_BATCHES || txn < -1 ||
            find(ps, pid))
            return BAD("invalid entry");
        struct pentry *e = insert(ps, pid);
        if (!e)
            return CN_ENOMEM;
        e->epoch = epoch;
        e->coordinator_epoch = coord;
        e->txn_first_offset = txn;
        e->last_timestamp = ts;
        for (int j = 0; j < nb; j++) {
            struct pbatch b;
            b.last_seq = cn_rd_i32(&rd);
            b.offset_delta = cn_rd_i32(&rd);
            b.last_offset = cn_rd_i64(&rd);
            if (rd.err)
                return BAD("truncated batch");
            push_batch(e, &b);
        }
    }
    if (cn_rd_left(&rd) != 0)
        return BAD("bytes after the last entry");
    for (size_t i = 0; i < ps->count; i++) {
        const struct pentry *e = &ps->entries[i];
        /* The snapshot keeps no start time: the producer's last batch
         * is the closest it has (later than the real start). */
        if (e->txn_first_offset >= 0 &&
            open_add(ps, e->txn_first_offset, e->producer_id,
                     e->last_timestamp) != 0)
            return CN_ENOMEM;
    }
    return 0;
}

#undef BAD

/* Reads and parses one snapshot into ps.  CN_ECORRUPT (with *why) means the
 * file should go; other errors are I/O or memory. */
static int snap_load_one(struct cn_pstate *ps, const char *path,
                         const char **why)
{
    int fd = cn_file_open(path, O_RDONLY, 0);
    if (fd < 0) {
        *why = "cannot open";
        return fd;
    }
    int64_t size;
    int err = cn_file_ops->fsize(fd, &size);
    if (err) {
        cn_file_ops->close(fd);
        *why = "cannot stat";
        return err;
    }
    if (size < SNAP_HDR_BYTES || size > SNAP_MAX_BYTES) {
        cn_file_ops->close(fd);
        *why = "impossible size";
        return CN_ECORRUPT;
    }
    uint8_t *buf = malloc((size_t)size);
    if (!buf) {
        cn_file_ops->close(fd);
        return CN_ENOMEM;
    }
    ssize_t got = cn_file_pread_all(fd, buf, (size_t)size, 0);
    cn_file_ops->close(fd);
    if (got < 0) {
        *why = "read failed";
        err = (int)got;
    } else if (got != size) {
        *why = "shrank while read";
        err = CN_ECORRUPT;
    } else {
        err = snap_parse(ps, buf, (size_t)size, why);
    }
    free(buf);
    if (err)
        cn_pstate_clear(ps);
    return err;
}

int cn_pstate_snapshot_load(struct cn_pstate *ps, const char *dir,
                            int64_t max_offset, int64_t *offset_out)
{
    *offset_out = -1;
    cn_pstate_clear(ps);
    int64_t *offs;
    size_t n;
    int err = list_snaps(dir, true, &offs, &n);
    if (err)
        return err;
    bool deleted = false;
    while (n > 0 && offs[n - 1] > max_offset) {
        CN_INFO("producer state %s: deleting snapshot %020lld past log end "
                "%lld", dir, (long long)offs[n - 1], (long long)max_offset);
        unlink_snap(dir, offs[--n]);
        deleted = true;
    }
    while (n > 0) {
        int64_t off = offs[--n];
        char path[PATH_MAX];
        const char *why = "";
        err = snap_path(path, sizeof path, dir, off);
        /* A bad snapshot is reported below, once, with its file. */
        cn_corrupt_hush();
        if (!err)
            err = snap_load_one(ps, path, &why);
        cn_corrupt_unhush();
        if (err == 0) {
            *offset_out = off;
            break;
        }
        if (err == CN_ENOMEM)
            break;
        /* Corrupt or unreadable: an older snapshot plus more replay gives
         * the same table, so fall back rather than fail start-up. */
        CN_WARN("producer state: deleting snapshot %s: %s (%s)", path, why,
                cn_strerror(err));
        cn_file_ops->unlink(path);
        deleted = true;
        err = 0;
    }
    free(offs);
    /* Make the deletions stick: a snapshot past a truncation that came
     * back after a crash would be trusted once the log grew past it. */
    if (deleted) {
        int serr = cn_file_sync_dir(dir);
        if (!err)
            err = serr;
    }
    return err;
}

int cn_pstate_snapshot_prune(const char *dir, int64_t min_offset,
                             int keep_newest)
{
    int64_t *offs;
    size_t n;
    int err = list_snaps(dir, false, &offs, &n);
    if (err)
        return err;
    size_t i = 0;
    while (i < n && offs[i] < min_offset)
        i++;
    if (keep_newest >= 0 && n - i > (size_t)keep_newest)
        i = n - (size_t)keep_newest;
    for (size_t j = 0; j < i; j++) {
        int r = unlink_snap(dir, offs[j]);
        if (r && r != -ENOENT && !err)
            err = r;
    }
    free(offs);
    if (i > 0) {
        int serr = cn_file_sync_dir(dir);
        if (!err)
            err = serr;
    }
    return err;
}
