/* test_pid.c - producer id blocks survive restarts and corruption is
 * refused. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "producer/pid.h"
#include "unit.h"

/* Takes an id as the broker does, with the worker's write done inline. */
static int next_id(struct cn_pidalloc *pa, int64_t *pid)
{
    int64_t end = cn_pidalloc_refill(pa);
    if (end)
        cn_pidalloc_written(pa, cn_pidalloc_write(pa->dir, end));
    return cn_pidalloc_take(pa, pid);
}

UNIT_TEST(ids_unique_across_reopen)
{
    char *dir = unit_tmpdir("pid");
    struct cn_pidalloc pa;
    CHECK_EQ(cn_pidalloc_open(&pa, dir), 0);
    int64_t last = -1, pid;
    for (int i = 0; i < 2500; i++) {
        CHECK_EQ(next_id(&pa, &pid), 0);
        CHECK(pid > last);
        last = pid;
    }
    /* A "crash" here: reopen without any shutdown step. */
    struct cn_pidalloc pb;
    CHECK_EQ(cn_pidalloc_open(&pb, dir), 0);
    CHECK_EQ(next_id(&pb, &pid), 0);
    CHECK(pid > last);
    CHECK(cn_pidalloc_issued(&pb, last));
    CHECK(!cn_pidalloc_issued(&pb, pid + 1));
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(corrupt_block_file_refused)
{
    char *dir = unit_tmpdir("pid");
    struct cn_pidalloc pa;
    int64_t pid;
    CHECK_EQ(cn_pidalloc_open(&pa, dir), 0);
    CHECK_EQ(next_id(&pa, &pid), 0);
    char path[4200];
    snprintf(path, sizeof path, "%s/producer-id-block", dir);
    FILE *f = fopen(path, "r+");
    CHECK(f != NULL);
    if (f) {
        fseek(f, 17, SEEK_SET); /* a digit of the block start */
        fputc('9', f);
        fclose(f);
    }
    CHECK_EQ(cn_pidalloc_open(&pa, dir), CN_ECORRUPT);
    unit_rmtree(dir);
    free(dir);
}

/* Ids come only from a reservation reported durable: none while the write
 * is in flight, its failure reported until a new try, and the next write is
 * asked for half a block ahead, while ids are still left. */
UNIT_TEST(ids_only_from_durable_block)
{
    char *dir = unit_tmpdir("pid");
    struct cn_pidalloc pa;
    int64_t pid = -7;
    CHECK_EQ(cn_pidalloc_open(&pa, dir), 0);
    CHECK_EQ(cn_pidalloc_take(&pa, &pid), -EAGAIN);
    int64_t end = cn_pidalloc_refill(&pa);
    CHECK_EQ(end, CN_PID_BLOCK);
    CHECK_EQ(cn_pidalloc_refill(&pa), 0); /* one write at a time */
    CHECK_EQ(cn_pidalloc_take(&pa, &pid), -EAGAIN);
    CHECK_EQ(pid, -7);
    cn_pidalloc_written(&pa, CN_EOFFLINE);
    CHECK_EQ(cn_pidalloc_take(&pa, &pid), CN_EOFFLINE);
    CHECK_EQ(cn_pidalloc_take(&pa, &pid), CN_EOFFLINE);
    end = cn_pidalloc_refill(&pa); /* a new try */
    CHECK_EQ(end, CN_PID_BLOCK);
    CHECK_EQ(cn_pidalloc_take(&pa, &pid), -EAGAIN);
    CHECK_EQ(cn_pidalloc_write(dir, end), 0);
    cn_pidalloc_written(&pa, 0);
    for (int i = 0; i < CN_PID_BLOCK / 2; i++) {
        CHECK_EQ(cn_pidalloc_take(&pa, &pid), 0);
        CHECK_EQ(pid, i);
    }
    /* Half a block left: the next reservation is due. */
    CHECK_EQ(cn_pidalloc_refill(&pa), 2 * CN_PID_BLOCK);
    for (int i = CN_PID_BLOCK / 2; i < CN_PID_BLOCK; i++)
        CHECK_EQ(cn_pidalloc_take(&pa, &pid), 0);
    CHECK_EQ(cn_pidalloc_take(&pa, &pid), -EAGAIN);
    cn_pidalloc_written(&pa, cn_pidalloc_write(dir, 2 * CN_PID_BLOCK));
    CHECK_EQ(cn_pidalloc_take(&pa, &pid), 0);
    CHECK_EQ(pid, CN_PID_BLOCK);
    /* A restart resumes past the durable reservation. */
    struct cn_pidalloc pb;
    CHECK_EQ(cn_pidalloc_open(&pb, dir), 0);
    CHECK_EQ(next_id(&pb, &pid), 0);
    CHECK_EQ(pid, 2 * CN_PID_BLOCK);
    unit_rmtree(dir);
    free(dir);
}

/* Cluster mode: blocks from the controller land anywhere in the id space;
 * the next one is asked for at half a block and used only once the
 * current one is spent, and a refused ask is reported by take. */
UNIT_TEST(controller_blocks_in_order_of_grant)
{
    struct cn_pidalloc pa;
    memset(&pa, 0, sizeof pa);
    int64_t pid;
    CHECK_EQ(cn_pidalloc_take(&pa, &pid), -EAGAIN);
    CHECK_EQ(cn_pidalloc_due(&pa), 1);
    CHECK_EQ(cn_pidalloc_due(&pa), 0); /* one ask at a time */
    cn_pidalloc_granted(&pa, 0, 5000, 5000 + CN_PID_BLOCK);
    CHECK_EQ(cn_pidalloc_take(&pa, &pid), 0);
    CHECK_EQ(pid, 5000);
    CHECK_EQ(cn_pidalloc_due(&pa), 0); /* most of the block is left */
    for (int i = 1; i <= CN_PID_BLOCK / 2; i++)
        CHECK_EQ(cn_pidalloc_take(&pa, &pid), 0);
    CHECK_EQ(pid, 5000 + CN_PID_BLOCK / 2);
    CHECK_EQ(cn_pidalloc_due(&pa), 1);
    /* Another broker took the blocks between: this one is below. */
    cn_pidalloc_granted(&pa, 0, 1000, 1000 + CN_PID_BLOCK);
    CHECK_EQ(cn_pidalloc_due(&pa), 0); /* a spare is held */
    while (pid < 5000 + CN_PID_BLOCK - 1)
        CHECK_EQ(cn_pidalloc_take(&pa, &pid), 0);
    CHECK_EQ(cn_pidalloc_take(&pa, &pid), 0);
    CHECK_EQ(pid, 1000);
    /* Spent down to half again: a refused ask shows once the block is
     * gone, and the next ask clears it. */
    while (pid < 1000 + CN_PID_BLOCK / 2)
        CHECK_EQ(cn_pidalloc_take(&pa, &pid), 0);
    CHECK_EQ(cn_pidalloc_due(&pa), 1);
    cn_pidalloc_granted(&pa, -EIO, 0, 0);
    while (pid < 1000 + CN_PID_BLOCK - 1)
        CHECK_EQ(cn_pidalloc_take(&pa, &pid), 0);
    CHECK_EQ(cn_pidalloc_take(&pa, &pid), -EIO);
    CHECK_EQ(cn_pidalloc_due(&pa), 1);
    CHECK_EQ(cn_pidalloc_take(&pa, &pid), -EAGAIN);
}

UNIT_MAIN(ids_unique_across_reopen, corrupt_block_file_refused,
          ids_only_from_durable_block, controller_blocks_in_order_of_grant)
