/* test_pid.c - producer id blocks survive restarts and corruption is
 * refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "producer/pid.h"
#include "unit.h"

UNIT_TEST(ids_unique_across_reopen)
{
    char *dir = unit_tmpdir("pid");
    struct cn_pidalloc pa;
    CHECK_EQ(cn_pidalloc_open(&pa, dir), 0);
    int64_t last = -1, pid;
    for (int i = 0; i < 2500; i++) {
        CHECK_EQ(cn_pidalloc_next(&pa, &pid), 0);
        CHECK(pid > last);
        last = pid;
    }
    /* A "crash" here: reopen without any shutdown step. */
    struct cn_pidalloc pb;
    CHECK_EQ(cn_pidalloc_open(&pb, dir), 0);
    CHECK_EQ(cn_pidalloc_next(&pb, &pid), 0);
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
    CHECK_EQ(cn_pidalloc_next(&pa, &pid), 0);
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

UNIT_MAIN(ids_unique_across_reopen, corrupt_block_file_refused)
