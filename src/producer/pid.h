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
 * The write fsyncs, so it is kept off the loop: the owner asks
 * cn_pidalloc_refill for the next reservation when half a block is left,
 * writes it on a worker with cn_pidalloc_write and reports the result with
 * cn_pidalloc_written.  Only ids below the durable end are ever taken; a
 * burst that outruns the worker waits for it (cn_pidalloc_take: -EAGAIN).
 *
 * In cluster mode the blocks come from the controller instead
 * (AllocateProducerIds; cn_pidalloc_due and cn_pidalloc_granted), and the
 * file is not used: the controller's ProducerIdsRecord is what makes a
 * block durable, for every broker at once.
 *
 * Runs on: loop, except cn_pidalloc_write (a worker).
 */
#ifndef CN_PRODUCER_PID_H
#define CN_PRODUCER_PID_H

#include <stdint.h>

#define CN_PID_BLOCK 1000 /* ids reserved per durable write */

struct cn_pidalloc {
    char dir[4096];     /* where producer-id-block lives */
    int64_t next;       /* next id to hand out */
    int64_t block_end;  /* first id not covered by the durable reservation */
    int64_t writing;    /* reservation a worker is writing, or 0 */
    int err;            /* the last write's failure, until the next one */
    /* Cluster mode: the controller hands out blocks anywhere in the id
     * space (other brokers hold the ones between), so the next block is
     * asked for ahead and kept here until the current one runs out;
     * spare_start == spare_end: none. */
    int64_t spare_start, spare_end;
};

/* Reads the reservation (creating it on first use).  A corrupt file is
 * CN_ECORRUPT: refusing to start beats handing out an id twice. */
int cn_pidalloc_open(struct cn_pidalloc *pa, const char *dir);
/* Hands out the next id from the durable reservation.  When none is left:
 * -EAGAIN while a reservation is being written (or none was asked for),
 * else the failure of the last write, until a new write starts. */
int cn_pidalloc_take(struct cn_pidalloc *pa, int64_t *pid);
/* The end of the reservation to write now, or 0 when none is due (one is
 * in flight, or more than half a block is left).  Marks it in flight and
 * forgets the last failure. */
int64_t cn_pidalloc_refill(struct cn_pidalloc *pa);
/* Writes the reservation `end` under dir durably.  Blocks (fdatasync and
 * a directory fsync): call it on a worker.  0 or a negative error. */
int cn_pidalloc_write(const char *dir, int64_t end);
/* The write cn_pidalloc_refill started finished with rc. */
void cn_pidalloc_written(struct cn_pidalloc *pa, int rc);
/*
 * Cluster mode's refill: true when a block should be asked of the
 * controller now (none asked, none spare, at most half a block left),
 * which then counts as in flight (writing) until cn_pidalloc_granted.
 */
int cn_pidalloc_due(struct cn_pidalloc *pa);
/* The controller's answer to that ask: rc 0 and the block [start, end),
 * which follows the current one once it is used up; or rc, reported by
 * take as a write's failure is. */
void cn_pidalloc_granted(struct cn_pidalloc *pa, int rc, int64_t start,
                         int64_t end);
/* True when pid was handed out by this allocator (some time in the past);
 * single-node mode only (controller blocks are not contiguous). */
static inline int cn_pidalloc_issued(const struct cn_pidalloc *pa,
                                     int64_t pid)
{
    return pid >= 0 && pid < pa->next;
}

#endif
