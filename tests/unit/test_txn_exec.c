/* test_txn_exec.c - the transaction coordinator's executor on a broker
 * with only what it uses (a libuv loop, real logs in a temp directory,
 * producer ids): events that arrive while a step's actions are carried
 * out. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/config.h"
#include "base/failpoint.h"
#include "node/broker_int.h"
#include "node/txn_exec.h"
#include "proto/kerr.h"
#include "unit.h"

struct fixture {
    struct cn_broker b;
    struct cn_config cfg;
    uv_loop_t loop;
    char *dir;
    int answers;
    struct cn_txn_answer last;
};

static struct fixture *the;

static void got_answer(struct cn_broker *b, const struct cn_txn_answer *a)
{
    (void)b;
    the->answers++;
    the->last = *a;
}

static void no_fetches(struct cn_broker *b)
{
    (void)b;
}

static void fx_start(struct fixture *x)
{
    memset(x, 0, sizeof *x);
    the = x;
    x->dir = unit_tmpdir("txnexec");
    char err[256];
    CHECK_EQ(cn_config_init(&x->cfg), 0);
    /* Without group commit a write is durable before its append returns:
     * its WRITTEN arrives inside the step that wrote it. */
    CHECK_EQ(cn_config_set(&x->cfg, "cairn.fsync.group.commit", "false", err,
                           sizeof err),
             0);
    CHECK_EQ(cn_config_set(&x->cfg, "transaction.state.log.num.partitions",
                           "1", err, sizeof err),
             0);
    CHECK_EQ(uv_loop_init(&x->loop), 0);
    x->b.loop = &x->loop;
    x->b.cfg = &x->cfg;
    x->b.data_visible = no_fetches;
    x->b.txn_answer = got_answer;
    snprintf(x->b.data_dir, sizeof x->b.data_dir, "%s", x->dir);
    CHECK_EQ(cn_topics_load(&x->b, err, sizeof err), 0);
    CHECK_EQ(cn_pidalloc_open(&x->b.pids, x->dir), 0);
    CHECK_EQ(cn_txn_exec_start(&x->b), 0);
}

static void fx_end(struct fixture *x)
{
    cn_txn_exec_stop(&x->b);
    while (x->b.sync_running && uv_run(&x->loop, UV_RUN_ONCE))
        ;
    cn_txn_exec_free(&x->b);
    cn_topics_close_all(&x->b);
    free(x->b.topic_table);
    uv_run(&x->loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&x->loop), 0);
    cn_config_fini(&x->cfg);
    unit_rmtree(x->dir);
    free(x->dir);
}

/* The WRITTEN of a durable record arriving mid-step waits in the write
 * itself: out of memory for the queue cannot lose it (a lost one left the
 * id busy and let a checkpoint replace the record with older state). */
UNIT_TEST(test_written_mid_step_survives_out_of_memory)
{
    struct fixture x;
    fx_start(&x);
    /* A round run inside the append: the WRITTEN comes mid-step. */
    CHECK_EQ(cn_failpoint_set("sync.on_loop", "error"), 0);
    CHECK_EQ(cn_failpoint_set("txn.enqueue", "error"), 0);
    struct cn_txn_request rq = {.kind = CN_TXN_REQ_INIT_PID,
                                .token = &x,
                                .api_version = 4,
                                .transactional_id = "t1",
                                .producer_id = -1,
                                .producer_epoch = -1,
                                .timeout_ms = 60000};
    cn_txn_exec_request(&x.b, &rq);
    /* The coordinator's timer keeps the loop alive: a lost answer must
     * not block the test, so poll, for up to a generous minute. */
    for (int i = 0; i < 60000 && !x.answers; i++) {
        uv_run(&x.loop, UV_RUN_NOWAIT);
        if (!x.answers)
            usleep(1000);
    }
    CHECK_EQ(cn_failpoint_set("txn.enqueue", NULL), 0);
    CHECK_EQ(cn_failpoint_set("sync.on_loop", NULL), 0);
    CHECK_EQ(x.answers, 1);
    CHECK_EQ(x.last.error, KAFKA_NONE);
    CHECK(x.last.producer_id >= 0);
    fx_end(&x);
}

UNIT_MAIN(test_written_mid_step_survives_out_of_memory)
