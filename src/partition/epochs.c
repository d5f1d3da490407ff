/*
 * epochs.c - the leader-epoch cache and its checkpoint file (see
 * epochs.h).  A few entries per partition (one per leader change that
 * wrote), so a sorted array and linear walks.
 */
#include "partition/epochs.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/say.h"
#include "log/file.h"

#define EPOCHS_VERSION 0
/* Digits of the largest int64. */
#define NUM_MAX_DIGITS 19

struct epoch_entry {
    int32_t epoch;
    int64_t start;
};

struct cn_epochs {
    char *dir;
    struct epoch_entry *v; /* by epoch, start offsets non-decreasing */
    size_t n, cap;
};

struct cn_epochs *cn_epochs_new_empty(const char *dir)
{
    struct cn_epochs *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->dir = strdup(dir ? dir : ".");
    if (!e->dir) {
        free(e);
        return NULL;
    }
    return e;
}

void cn_epochs_free(struct cn_epochs *e)
{
    if (!e)
        return;
    free(e->v);
    free(e->dir);
    free(e);
}

/* Kafka's assign in memory: false when nothing changed. */
static int assign_mem(struct cn_epochs *e, int32_t epoch, int64_t start,
                      bool *changed)
{
    *changed = false;
    if (epoch < 0 || start < 0)
        return 0;
    if (e->n > 0 && epoch <= e->v[e->n - 1].epoch)
        return 0;
    /* Newer epochs that began at or after this one's start wrote nothing
     * before it (or were cut): they cannot own offsets from here on. */
    while (e->n > 0 && e->v[e->n - 1].start >= start)
        e->n--;
    if (e->n == e->cap) {
        size_t ncap = e->cap ? e->cap * 2 : 4;
        struct epoch_entry *nv = realloc(e->v, ncap * sizeof *nv);
        if (!nv)
            return CN_ENOMEM;
        e->v = nv;
        e->cap = ncap;
    }
    e->v[e->n++] = (struct epoch_entry){epoch, start};
    *changed = true;
    return 0;
}

int cn_epochs_format(const struct cn_epochs *e, struct cn_wr *w)
{
    char line[64];
    int n = snprintf(line, sizeof line, "%d\n%zu\n", EPOCHS_VERSION, e->n);
    cn_wr_raw(w, line, (size_t)n);
    for (size_t i = 0; i < e->n; i++) {
        n = snprintf(line, sizeof line, "%" PRId32 " %" PRId64 "\n",
                     e->v[i].epoch, e->v[i].start);
        cn_wr_raw(w, line, (size_t)n);
    }
    return w->err ? CN_ENOMEM : 0;
}

/* Writes the checkpoint as the cache is now. */
static int store(const struct cn_epochs *e)
{
    struct cn_wr w;
    cn_wr_init(&w, 64 + e->n * 32);
    int err = cn_epochs_format(e, &w);
    if (!err)
        err = cn_file_write_atomic(e->dir, CN_EPOCHS_FILE, w.buf, w.len);
    cn_wr_fini(&w);
    if (err)
        CN_WARN("cannot write %s/%s: %s", e->dir, CN_EPOCHS_FILE,
                cn_strerror(err));
    return err;
}

/* One line of the file: [*pos, '\n' or end); false at the end. */
static bool next_line(const uint8_t *buf, size_t len, size_t *pos,
                      const char **line, size_t *n)
{
    if (*pos >= len)
        return false;
    const uint8_t *s = buf + *pos;
    const uint8_t *nl = memchr(s, '\n', len - *pos);
    *line = (const char *)s;
    *n = nl ? (size_t)(nl - s) : len - *pos;
    *pos += *n + (nl ? 1 : 0);
    return true;
}

/* A non-negative decimal of at most NUM_MAX_DIGITS digits at s[*i],
 * ending at a space or the end of the line. */
static bool parse_num(const char *s, size_t n, size_t *i, int64_t max,
                      int64_t *out)
{
    size_t start = *i;
    int64_t v = 0;
    while (*i < n && s[*i] >= '0' && s[*i] <= '9') {
        int d = s[*i] - '0';
        if (*i - start >= NUM_MAX_DIGITS || v > (INT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
        (*i)++;
    }
    if (*i == start || v > max)
        return false;
    *out = v;
    return true;
}

int cn_epochs_parse(struct cn_epochs *e, const uint8_t *buf, size_t len)
{
    size_t pos = 0, n, i;
    const char *line;
    int64_t version, count;
    e->n = 0;
    i = 0;
    if (!next_line(buf, len, &pos, &line, &n) ||
        !parse_num(line, n, &i, INT32_MAX, &version) || i != n ||
        version != EPOCHS_VERSION)
        return CN_ECORRUPT;
    i = 0;
    if (!next_line(buf, len, &pos, &line, &n) ||
        !parse_num(line, n, &i, INT32_MAX, &count) || i != n)
        return CN_ECORRUPT;
    for (int64_t k = 0; k < count; k++) {
        int64_t epoch, start;
        if (!next_line(buf, len, &pos, &line, &n))
            return CN_ECORRUPT;
        i = 0;
        if (!parse_num(line, n, &i, INT32_MAX, &epoch) || i >= n ||
            line[i] != ' ')
            return CN_ECORRUPT;
        while (i < n && line[i] == ' ')
            i++;
        if (!parse_num(line, n, &i, INT64_MAX, &start) || i != n)
            return CN_ECORRUPT;
        /* Loaded as Kafka loads it, through assign: an entry out of
         * order drops those it contradicts. */
        bool changed;
        int err = assign_mem(e, (int32_t)epoch, start, &changed);
        if (err)
            return err;
    }
    /* More lines than the count said: a file we do not understand. */
    if (next_line(buf, len, &pos, &line, &n))
        return CN_ECORRUPT;
    return 0;
}

int cn_epochs_open(const char *dir, struct cn_epochs **out)
{
    struct cn_epochs *e = cn_epochs_new_empty(dir);
    if (!e)
        return CN_ENOMEM;
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/%s", dir, CN_EPOCHS_FILE) >=
        (int)sizeof path) {
        cn_epochs_free(e);
        return -ENAMETOOLONG;
    }
    uint8_t *buf;
    size_t len;
    int err = cn_file_read_all(path, &buf, &len);
    if (err == -ENOENT) {
        *out = e;
        return 0;
    }
    if (!err) {
        err = cn_epochs_parse(e, buf, len);
        free(buf);
        if (err == CN_ECORRUPT)
            CN_WARN("%s is corrupt; the leader epochs are rebuilt from the "
                    "log",
                    path);
    }
    if (err) {
        cn_epochs_free(e);
        return err;
    }
    *out = e;
    return 0;
}

int cn_epochs_assign(struct cn_epochs *e, int32_t epoch, int64_t start_offset)
{
    bool changed;
    int err = assign_mem(e, epoch, start_offset, &changed);
    if (err || !changed)
        return err;
    return store(e);
}

int32_t cn_epochs_latest(const struct cn_epochs *e)
{
    return e->n ? e->v[e->n - 1].epoch : -1;
}

int64_t cn_epochs_start_of(const struct cn_epochs *e, int32_t epoch)
{
    for (size_t i = 0; i < e->n; i++)
        if (e->v[i].epoch == epoch)
            return e->v[i].start;
    return -1;
}

void cn_epochs_end_offset_for(const struct cn_epochs *e, int32_t epoch,
                              int64_t log_end, int32_t *out_epoch,
                              int64_t *out_end)
{
    *out_epoch = -1;
    *out_end = -1;
    if (epoch < 0 || e->n == 0)
        return;
    if (e->v[e->n - 1].epoch == epoch) {
        *out_epoch = epoch;
        *out_end = log_end;
        return;
    }
    size_t higher = 0; /* first entry above epoch */
    while (higher < e->n && e->v[higher].epoch <= epoch)
        higher++;
    if (higher == e->n)
        return; /* newer than anything this log saw */
    /* A leader that wrote nothing in some epochs (it failed at once)
     * left no entry for them: the answer is the newest epoch before. */
    *out_epoch = higher > 0 ? e->v[higher - 1].epoch : epoch;
    *out_end = e->v[higher].start;
}

int cn_epochs_truncate_from_end(struct cn_epochs *e, int64_t end_offset)
{
    size_t n = e->n;
    while (n > 0 && e->v[n - 1].start >= end_offset)
        n--;
    if (n == e->n)
        return 0;
    e->n = n;
    return store(e);
}

int cn_epochs_truncate_from_start(struct cn_epochs *e, int64_t start_offset)
{
    size_t k = 0; /* entries starting at or below start_offset */
    while (k < e->n && e->v[k].start <= start_offset)
        k++;
    if (k == 0 || (k == 1 && e->v[0].start == start_offset))
        return 0;
    /* The last of them spans the new start: it now begins there. */
    struct epoch_entry spanning = {e->v[k - 1].epoch, start_offset};
    memmove(e->v + 1, e->v + k, (e->n - k) * sizeof *e->v);
    e->n -= k - 1;
    e->v[0] = spanning;
    return store(e);
}

int cn_epochs_clear(struct cn_epochs *e)
{
    e->n = 0;
    return store(e);
}

size_t cn_epochs_count(const struct cn_epochs *e)
{
    return e->n;
}

void cn_epochs_entry(const struct cn_epochs *e, size_t i, int32_t *epoch,
                     int64_t *start_offset)
{
    *epoch = i < e->n ? e->v[i].epoch : -1;
    *start_offset = i < e->n ? e->v[i].start : -1;
}
