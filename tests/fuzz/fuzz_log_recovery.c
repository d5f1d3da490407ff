/* fuzz_log_recovery.c - segment recovery on arbitrary bytes.
 *
 * The input becomes 00000000000000000000.log in a fresh directory; the log
 * is opened (recovery scans it, truncating at the first bad batch), every
 * offset is read back, one batch appended, and the log closed and reopened
 * clean.  Nothing may crash, leak or read out of bounds; recovered data must
 * chain and the reopen must agree on the end offset. */
#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/say.h"
#include "base/wr.h"
#include "log/file.h"
#include "log/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Empties dir (segments, indexes, checkpoint; a roll may add segments). */
static void empty_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char p[512];
    if (!d)
        abort();
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    closedir(d);
}

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* One valid batch: one record with null key and empty value, timestamp 1.
 * Returns its size (68). */
static size_t tiny_batch(uint8_t *b)
{
    memset(b, 0, 68);
    put32(b + 8, 68 - 12);        /* batch length */
    put32(b + 12, 0xffffffffu);   /* leader epoch -1 */
    b[16] = 2;                    /* magic */
    b[34] = 1;                    /* base timestamp 1 */
    b[42] = 1;                    /* max timestamp 1 */
    memset(b + 43, 0xff, 14);     /* producer id, epoch, sequence: -1 */
    put32(b + 57, 1);             /* records count */
    /* record: length 6, attrs, ts delta 0, offset delta 0, key -1,
     * value length 0, no headers (varints zig-zag encoded) */
    static const uint8_t rec[7] = {12, 0, 0, 0, 1, 0, 0};
    memcpy(b + 61, rec, 7);
    put32(b + 17, cn_crc32c(0, b + 21, 68 - 21));
    return 68;
}

/* fsync only slows fuzzing down; durability is not what is tested here. */
static int no_sync(int fd)
{
    (void)fd;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char dir[64];
    static struct cn_file_ops ops;
    if (!dir[0]) {
        ops = cn_file_ops_real;
        ops.fdatasync = no_sync;
        ops.fsync = no_sync;
        cn_file_ops = &ops;
        snprintf(dir, sizeof dir, "/tmp/cn-fuzzlog-XXXXXX");
        if (!mkdtemp(dir))
            abort();
        cn_say_max_level = CN_SAY_ERROR;
    }
    char path[128];
    snprintf(path, sizeof path, "%s/00000000000000000000.log", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        abort();
    if (size && write(fd, data, size) != (ssize_t)size)
        abort();
    close(fd);

    struct cn_log_config cfg;
    cn_log_config_default(&cfg);
    cfg.index_interval_bytes = 64;
    struct cn_log *log;
    if (cn_log_open(dir, &cfg, &log) == 0) {
        struct cn_wr w;
        cn_wr_init(&w, 0);
        int64_t end = cn_log_end_offset(log);
        for (int64_t off = 0; off < end && off < 4096; off++) {
            size_t n;
            cn_wr_reset(&w);
            if (cn_log_read(log, off, INT64_MAX, 1, true, &w, &n) != 0 ||
                n < 61)
                abort();
        }
        uint8_t b[68];
        int64_t base;
        if (cn_log_append(log, b, tiny_batch(b), &base) != 0 || base != end)
            abort();
        cn_log_close(log);
        if (cn_log_open(dir, &cfg, &log) != 0)
            abort();
        if (cn_log_end_offset(log) != end + 1)
            abort();
        cn_log_close(log);
        cn_wr_fini(&w);
    }
    empty_dir(dir);
    return 0;
}
