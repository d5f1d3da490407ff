/*
 * pid.h - producer id allocation that never hands out an id twice.
 *
 * Ids are reserved in blocks: the end of the current block is written
 * durably to <dir>/producer-id-block before any id from it is used, so
 * after a crash allocation resumes past everything that may have been
 * handed out.  A crash wastes at most the rest of one block, as Kafka's
 * controller-allocated blocks do.
 *
 * The file is a text line "next_block_start=N crc=C" with C the CRC32C of
 * the text before " crc=", so a torn or edited file is detected.
 *
 * Runs on: loop.
 */
#ifndef CN_PRODUCER_PID_H
#define CN_PRODUCER_PID_H

#include <stdint.h>

#define CN_PID_BLOCK 1000 /* ids reserved per durable write */

struct cn_pidalloc {
    char dir[4096];     /* where producer-id-block lives */
    int64_t next;       /* next id to hand out */
    int64_t block_end;  /* first id not covered by the durable reservation */
};

/* Reads the reservation (creating it on first use).  A corrupt file is
 * CN_ECORRUPT: refusing to start beats handing out an id twice. */
int cn_pidalloc_open(struct cn_pidalloc *pa, const char *dir);
/* Hands out the next id, reserving a new block first when needed.
 * Returns 0 or a negative error (the reservation could not be written). */
int cn_pidalloc_next(struct cn_pidalloc *pa, int64_t *pid);
/* True when pid was handed out by this allocator (some time in the past). */
static inline int cn_pidalloc_issued(const struct cn_pidalloc *pa,
                                     int64_t pid)
{
    return pid >= 0 && pid < pa->next;
}

#endif
