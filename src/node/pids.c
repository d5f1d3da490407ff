/*
 * pids.c - producer ids for the handlers, with the reservation's fsync on
 * a worker (pid.h).  A request that finds no durable id left is held and
 * run again once the reservation being written is durable; the
 * transaction coordinator's wait inside it and hear of it too.  In cluster
 * mode the reservation is a block the controller hands out (ctlcall.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/say.h"
#include "node/broker_int.h"
#include "node/ctlcall.h"
#include "node/txn_exec.h"

/* A request waiting for the next durable reservation. */
struct pid_wait {
    struct cn_req *req;
    struct cn_req_header h;
    struct cn_rd body;    /* undecoded request body */
    cn_pid_handler_fn fn; /* the handler to run again */
    struct pid_wait *next;
};

struct pid_work {
    uv_work_t work;
    struct cn_broker *b;
    char dir[sizeof((struct cn_pidalloc *)0)->dir];
    int64_t end;
    int rc;
};

static void write_work(uv_work_t *w)
{
    struct pid_work *pw = w->data;
    /* The fail point stands for a reservation write that fails. */
    pw->rc = CN_FAILPOINT("pid.write");
    if (!pw->rc)
        pw->rc = cn_pidalloc_write(pw->dir, pw->end);
}

/* A reservation ended with rc (cn_pidalloc_written or _granted done). */
static void pids_ready(struct cn_broker *b, int rc)
{
    /* Those that wait run again, in arrival order.  After a success those
     * that find the ids gone again wait for the next write, which their
     * take starts; after a failure all of them answer with it, and the
     * next request tries again. */
    struct pid_wait *ready = b->pid_waits;
    b->pid_waits = NULL;
    b->pid_failed_rerun = rc != 0;
    while (ready) {
        struct pid_wait *w2 = ready;
        ready = w2->next;
        struct cn_rd body = w2->body;
        w2->fn(b, w2->req, &w2->h, &body);
    }
    /* The transaction coordinator's waiters (parked inside it) too. */
    cn_txn_exec_pids_ready(b);
    b->pid_failed_rerun = false;
    if (!rc)
        cn_pids_refill(b);
}

static void write_done(uv_work_t *w, int status)
{
    struct pid_work *pw = w->data;
    struct cn_broker *b = pw->b;
    int rc = status < 0 ? status : pw->rc;
    free(pw);
    if (rc)
        CN_ERROR("cannot reserve producer ids: %s", cn_strerror(rc));
    cn_pidalloc_written(&b->pids, rc);
    pids_ready(b, rc);
}

static void on_granted(struct cn_broker *b, void *arg, int err, int64_t start,
                       int32_t len)
{
    (void)arg;
    if (err && err != -ECANCELED)
        CN_ERROR("cannot get producer ids from the controller: %s",
                 cn_strerror(err));
    cn_pidalloc_granted(&b->pids, err, start, start + len);
    pids_ready(b, err);
}

/* Cluster mode: the block comes from the controller, so that no two
 * brokers ever hand out the same id. */
static void refill_from_controller(struct cn_broker *b)
{
    /* Before the quorum runs there is no one to ask (the first take
     * asks). */
    if (b->stopping || !b->quorum || !cn_pidalloc_due(&b->pids))
        return;
    int rc = cn_ctlcall_alloc_pids(b, on_granted, NULL);
    if (rc) {
        CN_ERROR("cannot ask the controller for producer ids: %s",
                 cn_strerror(rc));
        cn_pidalloc_granted(&b->pids, rc, 0, 0);
    }
}

void cn_pids_refill(struct cn_broker *b)
{
    if (b->cfg->cluster_mode) {
        refill_from_controller(b);
        return;
    }
    int64_t end = cn_pidalloc_refill(&b->pids);
    if (!end)
        return;
    struct pid_work *pw = calloc(1, sizeof *pw);
    int rc = pw ? 0 : CN_ENOMEM;
    if (pw) {
        pw->work.data = pw;
        pw->b = b;
        memcpy(pw->dir, b->pids.dir, sizeof pw->dir);
        pw->end = end;
        rc = uv_queue_work(b->loop, &pw->work, write_work, write_done);
    }
    if (rc) {
        free(pw);
        CN_ERROR("cannot reserve producer ids: %s", cn_strerror(rc));
        /* Waiters hear of it at their next take; none is left waiting
         * for a write that never comes. */
        cn_pidalloc_written(&b->pids, rc);
    }
}

int cn_pids_take(struct cn_broker *b, struct cn_req *req,
                 const struct cn_req_header *h, const struct cn_rd *body,
                 cn_pid_handler_fn fn, int64_t *pid)
{
    if (!b->pid_failed_rerun)
        cn_pids_refill(b);
    int rc = cn_pidalloc_take(&b->pids, pid);
    if (rc != -EAGAIN || !req)
        return rc;
    struct pid_wait *w = cn_arena_calloc(&req->arena, 1, sizeof *w);
    if (!w)
        return CN_ENOMEM;
    w->req = req;
    w->h = *h;
    w->body = *body;
    w->fn = fn;
    struct pid_wait **pp = &b->pid_waits;
    while (*pp)
        pp = &(*pp)->next;
    *pp = w;
    return -EAGAIN;
}
