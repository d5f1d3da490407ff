/*
 * producers.c - each partition's producer state, kept in step with its
 * log: loaded at open (newest snapshot, then the log after it), updated on
 * every append, snapshotted at segment roll and clean shutdown, expired on
 * a timer.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/rd.h"
#include "base/say.h"
#include "partition/partition.h"
#include "proto/batch.h"

/* Snapshots kept per partition: the newest is what a restart uses; one
 * older is a fallback should the newest turn out corrupt. */
#define SNAPSHOTS_KEPT 2
#define REPLAY_CHUNK_BYTES (1024 * 1024)

int cn_batch_marker(const uint8_t *batch, size_t len, int *type,
                    int32_t *coordinator_epoch)
{
    struct cn_batch_hdr hdr;
    struct cn_record_iter it;
    struct cn_record rec;
    if (cn_batch_records(batch, len, 0, NULL, &hdr, &it) != 0 ||
        cn_record_iter_next(&it, &rec) != 1)
        return CN_ECORRUPT;
    int16_t t;
    if (cn_control_key_parse(rec.key, &t) != 0)
        return CN_ECORRUPT;
    struct cn_rd rd;
    cn_rd_init(&rd, rec.value.ptr,
               rec.value.len > 0 ? (size_t)rec.value.len : 0);
    (void)cn_rd_i16(&rd); /* marker value version */
    int32_t epoch = cn_rd_i32(&rd);
    if (rd.err)
        return CN_ECORRUPT;
    *type = t;
    *coordinator_epoch = epoch;
    return 0;
}

int cn_partition_record_batch(struct cn_partition *p, const uint8_t *batch,
                              size_t len, const struct cn_batch_hdr *hdr)
{
    if (hdr->producer_id < 0)
        return 0;
    int type = -1;
    int32_t coord_epoch = -1;
    if (cn_batch_is_control(hdr) &&
        cn_batch_marker(batch, len, &type, &coord_epoch) != 0)
        return 0; /* not a marker Kafka would write: nothing to track */
    int64_t closed = -1;
    int rc = cn_pstate_update(p->pstate, hdr, type, coord_epoch, &closed);
    if (rc || type != CN_CONTROL_ABORT || closed < 0)
        return rc;
    /* The read path finds aborted ranges here instead of scanning data.
     * The entry's LSO is where the partition becomes stable once this
     * transaction is out of the way, as Kafka records it.  Replay at
     * start-up re-adds entries; the index ignores ones it has. */
    int64_t next_open = cn_pstate_first_open_offset(p->pstate);
    struct cn_aborted_txn at = {
        .producer_id = hdr->producer_id,
        .first_offset = closed,
        .last_offset = hdr->base_offset,
        .lso = next_open >= 0 ? next_open : hdr->base_offset + 1,
    };
    return cn_log_txnindex_add(p->log, &at);
}

int cn_partition_scan(struct cn_partition *p, int64_t from,
                      int (*fn)(void *arg, const uint8_t *batch, size_t len,
                                const struct cn_batch_hdr *hdr),
                      void *arg)
{
    struct cn_wr buf;
    cn_wr_init(&buf, REPLAY_CHUNK_BYTES);
    int64_t end = cn_log_end_offset(p->log);
    int64_t at = from;
    int rc = 0;
    while (at < end && !rc) {
        cn_wr_reset(&buf);
        size_t got = 0;
        rc = cn_log_read(p->log, at, end, REPLAY_CHUNK_BYTES, true, &buf,
                         &got);
        if (rc || got == 0)
            break;
        for (size_t pos = 0; pos < got && !rc;) {
            struct cn_batch_hdr hdr;
            rc = cn_batch_hdr_parse(buf.buf + pos, got - pos, &hdr);
            if (rc)
                break;
            size_t len = cn_batch_size(&hdr);
            if (cn_batch_last_offset(&hdr) >= at)
                rc = fn(arg, buf.buf + pos, len, &hdr);
            at = cn_batch_last_offset(&hdr) + 1;
            pos += len;
        }
    }
    cn_wr_fini(&buf);
    return rc;
}

struct replay_ctx {
    struct cn_partition *p;
    int64_t batches;
};

static int replay_one(void *arg, const uint8_t *batch, size_t len,
                      const struct cn_batch_hdr *hdr)
{
    struct replay_ctx *rc = arg;
    rc->batches++;
    return cn_partition_record_batch(rc->p, batch, len, hdr);
}

/* Replays the log from `from` to its end through the producer table. */
static int replay(struct cn_partition *p, int64_t from, int64_t *batches)
{
    struct replay_ctx ctx = {p, 0};
    int rc = cn_partition_scan(p, from, replay_one, &ctx);
    *batches = ctx.batches;
    return rc;
}

int cn_partition_producers_load(struct cn_partition *p, const char *name)
{
    p->pstate = cn_pstate_new();
    if (!p->pstate)
        return CN_ENOMEM;
    const char *dir = cn_log_dir(p->log);
    int64_t end = cn_log_end_offset(p->log);
    int64_t snap = -1;
    int rc = cn_pstate_snapshot_load(p->pstate, dir, end, &snap);
    if (rc)
        return rc;
    int64_t from = snap >= 0 ? snap : cn_log_oldest_base(p->log);
    if (from < cn_log_start_offset(p->log))
        from = cn_log_start_offset(p->log);
    int64_t batches = 0;
    rc = replay(p, from, &batches);
    if (rc)
        return rc;
    p->active_base = cn_log_active_base(p->log);
    if (batches > 0 || cn_pstate_count(p->pstate) > 0)
        CN_INFO("producer state for %s: snapshot at offset %" PRId64
                ", replayed %" PRId64 " batches from the log, %zu producers",
                name, snap, batches, cn_pstate_count(p->pstate));
    return 0;
}

static void snapshot(struct cn_partition *p, int64_t offset)
{
    const char *dir = cn_log_dir(p->log);
    int rc = cn_pstate_snapshot_write(p->pstate, dir, offset);
    if (rc) {
        CN_WARN("cannot write producer snapshot in %s: %s", dir,
                cn_strerror(rc));
        return;
    }
    cn_pstate_snapshot_prune(dir, cn_log_oldest_base(p->log), SNAPSHOTS_KEPT);
}

void cn_partition_check_roll(struct cn_partition *p)
{
    int64_t base = cn_log_active_base(p->log);
    if (base != p->active_base) {
        /* A new segment began at `base`: the table now describes exactly
         * the log below it. */
        p->active_base = base;
        snapshot(p, base);
    }
}

void cn_partition_producers_close(struct cn_partition *p)
{
    if (!p->pstate)
        return;
    if (!cn_log_is_offline(p->log))
        snapshot(p, cn_log_end_offset(p->log));
    cn_pstate_free(p->pstate);
    p->pstate = NULL;
}

void cn_partition_after_retention(struct cn_partition *p)
{
    cn_pstate_snapshot_prune(cn_log_dir(p->log), cn_log_oldest_base(p->log),
                             SNAPSHOTS_KEPT);
}
