/*
 * coord.c - placeholder until the state machine lands: links, does
 * nothing (every step returns no actions).  Replaced by the machine.
 */
#include "txn/coord.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

struct cn_txn_coord {
    struct cn_txn_config cfg;
};

void cn_txn_actions_init(struct cn_txn_actions *a)
{
    memset(a, 0, sizeof *a);
    cn_arena_init(&a->arena);
    a->timer_mono_ms = INT64_MAX;
}

void cn_txn_actions_reset(struct cn_txn_actions *a)
{
    cn_arena_fini(&a->arena);
    cn_arena_init(&a->arena);
    a->n = 0;
    a->timer_mono_ms = INT64_MAX;
    a->taken = false;
    a->result = 0;
    a->op_taken = false;
    a->resumed = 0;
}

void cn_txn_actions_fini(struct cn_txn_actions *a)
{
    cn_arena_fini(&a->arena);
    free(a->v);
    memset(a, 0, sizeof *a);
}

int cn_txn_new(const struct cn_txn_config *cfg, const struct cn_txn_pids *pids,
               struct cn_txn_coord **out)
{
    (void)pids;
    if (cfg->nparts <= 0)
        return CN_EINVAL;
    struct cn_txn_coord *c = calloc(1, sizeof *c);
    if (!c)
        return CN_ENOMEM;
    c->cfg = *cfg;
    *out = c;
    return 0;
}

void cn_txn_free(struct cn_txn_coord *c)
{
    free(c);
}

void cn_txn_set_config(struct cn_txn_coord *c, const struct cn_txn_config *cfg)
{
    int32_t nparts = c->cfg.nparts;
    c->cfg = *cfg;
    c->cfg.nparts = nparts;
}

int cn_txn_load_record(struct cn_txn_coord *c, int32_t part,
                       struct cn_bytes key, struct cn_bytes value)
{
    (void)c, (void)part, (void)key, (void)value;
    return 0;
}

int cn_txn_step(struct cn_txn_coord *c, const struct cn_txn_event *ev,
                struct cn_txn_actions *acts)
{
    (void)c, (void)ev, (void)acts;
    return 0;
}

const struct cn_txn_meta *cn_txn_find(const struct cn_txn_coord *c,
                                      const char *id)
{
    (void)c, (void)id;
    return NULL;
}

const struct cn_txn_meta *cn_txn_find_pid(const struct cn_txn_coord *c,
                                          int64_t pid)
{
    (void)c, (void)pid;
    return NULL;
}

bool cn_txn_busy(const struct cn_txn_coord *c, const char *id)
{
    (void)c, (void)id;
    return false;
}

int16_t cn_txn_verify(const struct cn_txn_coord *c, const char *id,
                      int64_t producer_id, int16_t producer_epoch,
                      const char *topic, int32_t partition)
{
    (void)c, (void)id, (void)producer_id, (void)producer_epoch, (void)topic,
        (void)partition;
    return 0;
}

int16_t cn_txn_check_batched(const struct cn_txn_coord *c, const char *id,
                             int64_t producer_id, int16_t producer_epoch)
{
    (void)c, (void)id, (void)producer_id, (void)producer_epoch;
    return 0;
}

int cn_txn_foreach(const struct cn_txn_coord *c, int32_t part,
                   int (*fn)(void *arg, const struct cn_txn_meta *m),
                   void *arg)
{
    (void)c, (void)part, (void)fn, (void)arg;
    return 0;
}

size_t cn_txn_count(const struct cn_txn_coord *c, int32_t part)
{
    (void)c, (void)part;
    return 0;
}

void cn_txn_get_stats(const struct cn_txn_coord *c, struct cn_txn_stats *out)
{
    (void)c;
    memset(out, 0, sizeof *out);
}
