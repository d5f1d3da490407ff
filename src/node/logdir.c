/*
 * logdir.c - the log directory's health: failed (offline until a restart)
 * or full (writes refused until space is freed).  The partition layer and
 * group commit report here; every write path asks cn_partition_offline.
 */
#include "base/clock.h"
#include "base/say.h"
#include "node/broker_int.h"

void cn_broker_log_dir_failed(struct cn_broker *b, const char *what, int err)
{
    if (b->log_dir_offline)
        return;
    b->log_dir_offline = true;
    CN_ERROR("log directory %s is offline after %s failed (%s); every "
             "partition now answers KAFKA_STORAGE_ERROR; restart the broker "
             "once the disk is healthy",
             b->data_dir, what, cn_strerror(err));
}

void cn_broker_disk_full(struct cn_broker *b, const struct cn_partition *p,
                         bool full)
{
    if (full == b->log_dir_full)
        return;
    b->log_dir_full = full;
    const char *topic = p->topic ? p->topic->name : "(deleted topic)";
    int64_t now = cn_clock_mono_ms();
    bool quiet = b->log_dir_full_log_ms != 0 &&
                 now - b->log_dir_full_log_ms < 10000;
    if (full && !b->log_dir_full_logged && !quiet) {
        b->log_dir_full_logged = true;
        b->log_dir_full_log_ms = now;
        CN_WARN("log directory %s is full (an append to %s-%d found no "
                "space); writes are refused with KAFKA_STORAGE_ERROR until "
                "space is freed, reads go on",
                b->data_dir, topic, p->index);
    } else if (!full && b->log_dir_full_logged) {
        b->log_dir_full_logged = false;
        CN_INFO("log directory %s has space again (an append to %s-%d "
                "succeeded); writes are accepted",
                b->data_dir, topic, p->index);
    }
}
