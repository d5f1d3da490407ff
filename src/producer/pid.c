/* pid.c - durable producer id blocks; see pid.h. */
#include "pid.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/err.h"
#include "log/file.h"

#define PID_FILE "producer-id-block"

int cn_pidalloc_write(const char *dir, int64_t end)
{
    char text[128];
    int n = snprintf(text, sizeof text, "next_block_start=%" PRId64, end);
    uint32_t crc = cn_crc32c(0, text, (size_t)n);
    n += snprintf(text + n, sizeof text - (size_t)n, " crc=%08" PRIx32 "\n",
                  crc);
    return cn_file_write_atomic(dir, PID_FILE, text, (size_t)n);
}

int cn_pidalloc_open(struct cn_pidalloc *pa, const char *dir)
{
    memset(pa, 0, sizeof *pa);
    snprintf(pa->dir, sizeof pa->dir, "%s", dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, PID_FILE);
    uint8_t *raw;
    size_t n;
    int rc = cn_file_read_all(path, &raw, &n);
    if (rc == -ENOENT) {
        /* First start: nothing was ever handed out. */
        pa->next = 0;
        pa->block_end = 0;
        return 0;
    }
    if (rc)
        return rc;
    char text[128];
    if (n > sizeof text - 1)
        n = sizeof text - 1; /* longer than any we write: corrupt below */
    memcpy(text, raw ? (const char *)raw : "", n);
    free(raw);
    text[n] = '\0';
    int64_t start;
    uint32_t crc;
    char *sep = strstr(text, " crc=");
    if (!sep || sscanf(text, "next_block_start=%" SCNd64, &start) != 1 ||
        sscanf(sep, " crc=%" SCNx32, &crc) != 1 || start < 0 ||
        cn_crc32c(0, text, (size_t)(sep - text)) != crc)
        return cn_corrupt("producer-id-block");
    /* Everything below the durable reservation may have been used. */
    pa->next = start;
    pa->block_end = start;
    return 0;
}

int cn_pidalloc_take(struct cn_pidalloc *pa, int64_t *pid)
{
    if (pa->next >= pa->block_end && pa->spare_end > pa->spare_start) {
        pa->next = pa->spare_start;
        pa->block_end = pa->spare_end;
        pa->spare_start = pa->spare_end = 0;
    }
    if (pa->next >= pa->block_end)
        return pa->err && !pa->writing ? pa->err : -EAGAIN;
    *pid = pa->next++;
    return 0;
}

int64_t cn_pidalloc_refill(struct cn_pidalloc *pa)
{
    if (pa->writing || pa->block_end - pa->next > CN_PID_BLOCK / 2)
        return 0;
    pa->writing = pa->block_end + CN_PID_BLOCK;
    pa->err = 0;
    return pa->writing;
}

void cn_pidalloc_written(struct cn_pidalloc *pa, int rc)
{
    if (rc == 0)
        pa->block_end = pa->writing;
    pa->err = rc;
    pa->writing = 0;
}

int cn_pidalloc_due(struct cn_pidalloc *pa)
{
    if (pa->writing || pa->spare_end > pa->spare_start ||
        pa->block_end - pa->next > CN_PID_BLOCK / 2)
        return 0;
    pa->writing = 1;
    pa->err = 0;
    return 1;
}

void cn_pidalloc_granted(struct cn_pidalloc *pa, int rc, int64_t start,
                         int64_t end)
{
    pa->writing = 0;
    pa->err = rc;
    if (rc)
        return;
    if (pa->next >= pa->block_end) {
        pa->next = start;
        pa->block_end = end;
    } else {
        pa->spare_start = start;
        pa->spare_end = end;
    }
}
