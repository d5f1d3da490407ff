/*
 * fdcache.c - one bounded set of descriptors for every partition log's
 * segment files.
 *
 * Why: a partition holds three or four files per segment for as long as
 * the broker runs, so keeping them all open capped the partition count at
 * about a third of RLIMIT_NOFILE (300 under the default 1,024), and the
 * next partition failed with KAFKA_STORAGE_ERROR.  Here a file is opened
 * when first used and kept on an LRU list; once `budget` are open, opening
 * another closes the least recently used one (a later use reopens it by
 * name, O_RDWR, never creating it).  Active segments are not special: an
 * idle partition's active segment goes too, which is what lets 100,000
 * partitions live under a 20,000-descriptor limit; a busy one stays near
 * the head of the list.
 *
 * Closing a descriptor keeps its data: dirty pages belong to the file, and
 * an fdatasync through a descriptor opened later writes them and reports
 * a writeback error no one has seen yet (Linux 4.16 and later), so a sync
 * may use a new descriptor for data written through an old one.  Not
 * quite always: if background writeback fails while no descriptor is
 * open, the kernel may drop the inode, and its error with it, before the
 * sync reopens the file.  So eviction prefers files with nothing unsynced
 * and closes one with unsynced data only when the oldest files all have
 * some.
 *
 * What may not close: a descriptor a worker is fdatasyncing (pinned by
 * the sync snapshot; off the list until unpinned), the .log of a segment
 * a cleaner swap is replacing on a worker (held: its name may already
 * be another file's, or gone, so it could not be reopened), and, when
 * making room,
 * files of the segment being opened (its caller may hold their fds) and
 * the few most recently used files (so an EMFILE retry from anywhere
 * cannot close what the current operation is using).
 *
 * A segment a worker opened outside the cache (the cleaner's new ones)
 * has slots with no owner; log_fd_close closes those directly and
 * log_fd_adopt hands them to the cache on the loop.
 *
 * Runs on: loop, all of it; workers only see descriptors pinned here,
 * and close only detached ones (log_fd_take, unowned slots).
 */
#include "log_int.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sys/resource.h>

#include "base/say.h"
#include "file.h"

/* Files at the head of the list a reclaim never closes: one segment's. */
#define RECLAIM_SPARE LOG_FILES
/* The smallest budget: below it the log cannot work on one segment. */
#define BUDGET_MIN 16

const char *const log_file_ext[LOG_FILES] = {"log", "index", "timeindex",
                                             "txnindex"};

static struct {
    struct log_fdslot *newest, *oldest; /* open, unpinned */
    size_t open;                        /* descriptors open */
    size_t pinned;                      /* of which pinned */
    size_t budget;                      /* 0 until derived */
    uint64_t opens, evictions, emfile;  /* counters */
    pthread_t owner;                    /* the loop: may close slots */
} cache;

size_t cn_log_fd_budget_for_limit(uint64_t nofile)
{
    uint64_t reserve = nofile / 4;
    if (reserve < 32)
        reserve = 32;
    if (reserve > 4096)
        reserve = 4096;
    if (nofile < reserve + BUDGET_MIN)
        return BUDGET_MIN;
    uint64_t b = nofile - reserve;
    return b > SIZE_MAX / 2 ? SIZE_MAX / 2 : (size_t)b;
}

static size_t reclaim(void);

static size_t budget(void)
{
    if (cache.budget == 0) {
        struct rlimit rl;
        uint64_t lim = 1024;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
            lim = rl.rlim_cur == RLIM_INFINITY ? 1u << 20
                                               : (uint64_t)rl.rlim_cur;
        cache.budget = cn_log_fd_budget_for_limit(lim);
    }
    /* Installed here, not only when the budget is derived: the broker
     * sets its budget at start (cn_log_set_fd_budget), on the loop. */
    if (cn_file_reclaim != reclaim) {
        cache.owner = pthread_self();
        cn_file_reclaim = reclaim;
    }
    return cache.budget;
}

void cn_log_set_fd_budget(size_t n)
{
    cache.budget = n == 0 ? 0 : n < BUDGET_MIN ? BUDGET_MIN : n;
    (void)budget();
}

void cn_log_fd_stats(struct cn_log_fd_stats *out)
{
    out->open = cache.open;
    out->pinned = cache.pinned;
    out->budget = budget();
    out->opens = cache.opens;
    out->evictions = cache.evictions;
    out->emfile = cache.emfile;
}

static int *fd_of(struct cn_segment *seg, enum log_file which)
{
    switch (which) {
    case LOG_FILE_LOG: return &seg->log_fd;
    case LOG_FILE_INDEX: return &seg->idx_fd;
    case LOG_FILE_TIMEINDEX: return &seg->tidx_fd;
    default: return &seg->txn_fd;
    }
}

static enum log_file which_of(const struct log_fdslot *s)
{
    return (enum log_file)(s - s->seg->slot);
}

/* On the LRU list: an open descriptor of the cache's that no sync pins
 * and no cleaner swap holds (those are counted in cache.pinned). */
static bool listed(const struct log_fdslot *s)
{
    return s->seg && *fd_of(s->seg, which_of(s)) >= 0 && s->pins == 0 &&
           !s->held;
}

static void lru_remove(struct log_fdslot *s)
{
    if (s->newer)
        s->newer->older = s->older;
    else
        cache.newest = s->older;
    if (s->older)
        s->older->newer = s->newer;
    else
        cache.oldest = s->newer;
    s->newer = s->older = NULL;
}

static void lru_push(struct log_fdslot *s)
{
    s->older = cache.newest;
    s->newer = NULL;
    if (cache.newest)
        cache.newest->newer = s;
    else
        cache.oldest = s;
    cache.newest = s;
}

/* After a pin or hold changed: on or off the list as listed() says,
 * was_listed being what it said before. */
static void relist(struct log_fdslot *s, bool was_listed)
{
    bool now = listed(s);
    if (was_listed && !now) {
        lru_remove(s);
        cache.pinned++;
    } else if (!was_listed && now) {
        cache.pinned--;
        lru_push(s);
    }
}

/* Closes an open, unpinned slot's descriptor. */
static void close_slot(struct log_fdslot *s)
{
    int *fd = fd_of(s->seg, which_of(s));
    assert(*fd >= 0 && s->pins == 0 && !s->held);
    lru_remove(s);
    cn_file_ops->close(*fd);
    *fd = -1;
    cache.open--;
}

/* True when nothing written through the file is waiting for a sync. */
static bool slot_synced(const struct log_fdslot *s)
{
    const struct cn_segment *seg = s->seg;
    const struct cn_log *log = seg->log;
    if (seg->durable)
        return true;
    return log->nsegs > 0 && log->segs[log->nsegs - 1] == seg &&
           seg->next_offset <= log->synced_offset;
}

/* How far from the old end of the list eviction looks for a synced file
 * before it settles for the oldest one. */
#define EVICT_LOOK 64

/* Closes the least recently used descriptor not of keep, preferring one
 * with nothing unsynced; false if there is none (all are keep's, or
 * pinned). */
static bool evict_one(const struct cn_segment *keep)
{
    int looked = 0;
    for (struct log_fdslot *s = cache.oldest; s && looked < EVICT_LOOK;
         s = s->newer, looked++) {
        if (s->seg == keep || !slot_synced(s))
            continue;
        close_slot(s);
        cache.evictions++;
        return true;
    }
    for (struct log_fdslot *s = cache.oldest; s; s = s->newer) {
        if (s->seg == keep)
            continue;
        close_slot(s);
        cache.evictions++;
        return true;
    }
    return false;
}

/* The descriptor limit was hit (by us or by sockets): close an eighth of
 * what is cached, at least 8, sparing the head of the list.  Returns how
 * many were closed. */
static size_t reclaim(void)
{
    /* Workers (a cleaner's swap, a sync by path, a producer-id block) open
     * through cn_file_open too; the list is the loop's alone, so theirs
     * fail with EMFILE and their pass or write is tried again later. */
    if (!pthread_equal(pthread_self(), cache.owner))
        return 0;
    size_t want = cache.open / 8 < 8 ? 8 : cache.open / 8, n = 0;
    size_t unpinned = cache.open - cache.pinned;
    while (n < want && unpinned > RECLAIM_SPARE) {
        close_slot(cache.oldest);
        cache.evictions++;
        unpinned--;
        n++;
    }
    cache.emfile++;
    static bool warned;
    if (!warned) {
        warned = true;
        CN_WARN("the open-file limit was reached with %zu log files open "
                "(budget %zu); closed %zu of them (raise ulimit -n if "
                "this repeats)",
                cache.open + n, cache.budget, n);
    }
    return n;
}

static int open_slot(struct cn_segment *seg, enum log_file which, int flags)
{
    char path[PATH_MAX];
    int err = log_seg_path(path, sizeof path, seg->log, seg->base,
                           log_file_ext[which]);
    if (err)
        return err;
    size_t max = budget();
    while (cache.open >= max && evict_one(seg))
        ;
    int fd = cn_file_ops->open(path, O_RDWR | flags, 0644);
    /* Over the process limit although within the budget (sockets took
     * the reserve): make room, sparing this segment's files. */
    for (int i = 0; i < 4 && (fd == -EMFILE || fd == -ENFILE); i++) {
        cache.emfile++;
        size_t want = cache.open / 8 < 8 ? 8 : cache.open / 8, n = 0;
        while (n < want && evict_one(seg))
            n++;
        if (n == 0)
            break;
        fd = cn_file_ops->open(path, O_RDWR | flags, 0644);
    }
    if (fd < 0)
        return fd;
    *fd_of(seg, which) = fd;
    struct log_fdslot *s = &seg->slot[which];
    s->seg = seg;
    lru_push(s);
    cache.open++;
    cache.opens++;
    return 0;
}

int log_fd_get(struct cn_segment *seg, enum log_file which, int *fd_out)
{
    int *fd = fd_of(seg, which);
    struct log_fdslot *s = &seg->slot[which];
    if (*fd < 0) {
        int err = open_slot(seg, which, 0);
        if (err)
            return err;
    } else if (listed(s) && cache.newest != s) {
        /* (A slot with no segment holds a descriptor opened outside the
         * cache, as cn_log_verify does: nothing to reorder.) */
        lru_remove(s);
        lru_push(s);
    }
    *fd_out = *fd;
    return 0;
}

int log_fd_open(struct cn_segment *seg, enum log_file which, int flags)
{
    log_fd_close(seg, which);
    return open_slot(seg, which, flags);
}

void log_fd_close(struct cn_segment *seg, enum log_file which)
{
    int *fd = fd_of(seg, which);
    if (*fd < 0)
        return;
    if (!seg->slot[which].seg) {
        /* Opened outside the cache: not counted, on no list. */
        cn_file_ops->close(*fd);
        *fd = -1;
        return;
    }
    close_slot(&seg->slot[which]);
}

bool log_fd_pin(struct cn_segment *seg, enum log_file which, int *fd_out)
{
    struct log_fdslot *s = &seg->slot[which];
    /* One sync per open file at a time: Linux reports a writeback error
     * once per open file, so two rounds sharing a descriptor could hand
     * the error to the later round while the earlier one counts its data
     * durable.  A second sync opens the file by name and sees it too. */
    if (s->pins > 0)
        return false;
    int fd;
    /* Reopened here rather than on the worker: here an EMFILE can make
     * room. */
    if (cache.pinned >= budget() / 2 || log_fd_get(seg, which, &fd))
        return false;
    bool was = listed(s);
    s->pins = 1;
    relist(s, was);
    *fd_out = fd;
    return true;
}

void log_fd_unpin(struct cn_segment *seg, enum log_file which)
{
    struct log_fdslot *s = &seg->slot[which];
    assert(s->pins > 0 && *fd_of(seg, which) >= 0);
    bool was = listed(s);
    s->pins--;
    relist(s, was);
}

int log_fd_hold(struct cn_segment *seg, enum log_file which)
{
    struct log_fdslot *s = &seg->slot[which];
    if (s->held)
        return 0;
    int fd, err = log_fd_get(seg, which, &fd);
    if (err)
        return err;
    bool was = listed(s);
    s->held = true;
    relist(s, was);
    return 0;
}

void log_fd_unhold(struct cn_segment *seg, enum log_file which)
{
    struct log_fdslot *s = &seg->slot[which];
    bool was = listed(s);
    s->held = false;
    if (*fd_of(seg, which) >= 0 && s->seg)
        relist(s, was);
}

int log_fd_take(struct cn_segment *seg, enum log_file which)
{
    struct log_fdslot *s = &seg->slot[which];
    int *fd = fd_of(seg, which), taken = *fd;
    bool was = listed(s);
    s->held = false;
    if (taken < 0)
        return -1;
    if (!s->seg) {
        *fd = -1;
        return taken;
    }
    if (s->pins > 0)
        return -1; /* the sync's end closes it, with the segment */
    if (was)
        lru_remove(s);
    else
        cache.pinned--; /* it was held */
    cache.open--;
    s->seg = NULL;
    *fd = -1;
    return taken;
}

void log_fd_adopt(struct cn_segment *seg)
{
    for (int i = 0; i < LOG_FILES; i++) {
        struct log_fdslot *s = &seg->slot[i];
        if (*fd_of(seg, (enum log_file)i) < 0 || s->seg)
            continue;
        s->seg = seg;
        s->pins = 0;
        s->held = false;
        lru_push(s);
        cache.open++;
    }
}
