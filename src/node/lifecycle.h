/*
 * lifecycle.h - this broker's registration and heartbeats with the active
 * controller (Kafka's BrokerLifecycleManager), in cluster mode only.
 *
 * A broker registers (BrokerRegistration: node id, cluster id, a random
 * incarnation per process start, its broker listeners, supported
 * features, rack) and gets an epoch; then it heartbeats every
 * broker.heartbeat.interval.ms with the metadata offset it has applied.
 * The controller unfences it once that offset reaches its registration,
 * and fences it when heartbeats stop for broker.session.timeout.ms.
 *
 * Controlled shutdown (Kafka's PENDING_CONTROLLED_SHUTDOWN): once asked,
 * heartbeats carry want_shut_down, the controller moves this broker's
 * leaderships to other ISR members while it keeps serving, and the
 * broker may stop when a heartbeat answer says should_shut_down (or its
 * own deadline passes).
 *
 * The decisions (what to send next, when, after which answer) are a small
 * machine, struct cn_lc, with the clock as an argument so a unit test
 * drives it without sockets (tests/unit/test_lifecycle.c).  lifecycle.c
 * carries them out: in-process through cn_quorum_submit when this node's
 * controller leads, else over a cn_peer to the leader's CONTROLLER
 * listener (its host:port from controller.quorum.voters).  A node that
 * knows no controller or no cluster id yet (a new process.roles=broker
 * node is outside the raft configuration until it has registered) asks
 * the voters in turn with DescribeCluster.
 *
 * Runs on: loop.
 */
#ifndef CN_NODE_LIFECYCLE_H
#define CN_NODE_LIFECYCLE_H

#include <stdbool.h>
#include <stdint.h>

struct cn_broker;

/* ---- the machine ------------------------------------------------------ */

enum cn_lc_state {
    CN_LC_UNREGISTERED, /* register next */
    CN_LC_REGISTERED,   /* heartbeat next */
};

enum cn_lc_action {
    CN_LCA_NONE,      /* nothing to send before next_ms */
    CN_LCA_REGISTER,  /* send BrokerRegistration to `controller` */
    CN_LCA_HEARTBEAT, /* send BrokerHeartbeat with `epoch` */
};

/* An answer that never reached the controller, or came back from one that
 * no longer leads: find the controller again after a backoff. */
#define CN_LC_ERR_TRANSPORT (-1)

struct cn_lc {
    enum cn_lc_state state;
    bool in_flight;  /* a request awaits its answer */
    int64_t next_ms; /* do not send before this (monotonic ms) */
    int64_t epoch;   /* broker epoch, -1 until registered */
    bool fenced;     /* as the last heartbeat answer said */
    bool caught_up;
    bool want_shut_down; /* controlled shutdown asked for */
    bool shut_down;      /* ... and over: nothing more to send */
    int64_t interval_ms; /* broker.heartbeat.interval.ms */
    int64_t backoff_first_ms, backoff_max_ms, backoff_ms;
    uint64_t registrations; /* successful, for logs and tests */
};

void cn_lc_init(struct cn_lc *lc, int64_t interval_ms,
                int64_t backoff_first_ms, int64_t backoff_max_ms);

/*
 * What to send now, given whether a controller is known (leader_known):
 * CN_LCA_NONE while one is in flight, before next_ms, or with no
 * controller (then next_ms moves a backoff ahead).  Any other answer marks
 * a request in flight; the caller must report its outcome with
 * cn_lc_registered or cn_lc_heartbeat.
 */
enum cn_lc_action cn_lc_poll(struct cn_lc *lc, int64_t now_ms,
                             bool leader_known);

/* The registration's outcome: err 0 (epoch set), a Kafka code, or
 * CN_LC_ERR_TRANSPORT. */
void cn_lc_registered(struct cn_lc *lc, int64_t now_ms, int err,
                      int64_t epoch);

/* The heartbeat's outcome: err 0 (fenced, caught_up, should_shut_down as
 * answered), a Kafka code, or CN_LC_ERR_TRANSPORT. */
void cn_lc_heartbeat(struct cn_lc *lc, int64_t now_ms, int err, bool fenced,
                     bool caught_up, bool should_shut_down);

/*
 * Asks for controlled shutdown: the next heartbeat (at once) and every
 * one after carry want_shut_down, sooner than the interval.  A broker
 * that is not registered or is fenced leads nothing and is done at once
 * (Kafka skips controlled shutdown outside RUNNING).  Returns lc->shut_down.
 */
bool cn_lc_begin_shutdown(struct cn_lc *lc, int64_t now_ms);

/* ---- the broker's side ------------------------------------------------ */

/*
 * Starts registering b with the active controller (b->quorum must be
 * running); b->lifecycle is set.  Returns 0, or CN_EINVAL / CN_ENOMEM with
 * a message logged (controller.quorum.voters unreadable).
 */
int cn_lifecycle_start(struct cn_broker *b);

/* Stops: pending peer calls are cancelled, an in-process request still
 * with the quorum is orphaned (freed when its answer comes), and the rest
 * is freed once the timer has closed.  b->lifecycle is NULL after. */
void cn_lifecycle_stop(struct cn_broker *b);

/* Controlled shutdown's end: approved (the controller said
 * should_shut_down, or there was nothing to move) or not (the deadline
 * passed first). */
typedef void (*cn_lifecycle_shutdown_cb)(struct cn_broker *b, bool approved);

/* Kafka's broker gives controlled shutdown its whole shutdown deadline (5
 * minutes); Cairn caps it here: a supervisor's stop timeout (systemd's
 * default 90 s) must not run out first. */
#define CN_LIFECYCLE_SHUTDOWN_MS 30000

/*
 * Starts controlled shutdown (see above): cb runs exactly once, never
 * inside this call, when the controller approves or after timeout_ms;
 * not at all if cn_lifecycle_stop comes first.  The broker keeps serving
 * meanwhile.  Returns 0, or CN_EINVAL (no lifecycle: a single node, or
 * one already shutting down).
 */
int cn_lifecycle_shutdown(struct cn_broker *b, int64_t timeout_ms,
                          cn_lifecycle_shutdown_cb cb);

/* The broker epoch, -1 until registered; whether the controller last said
 * this broker is fenced. */
int64_t cn_lifecycle_epoch(const struct cn_broker *b);
bool cn_lifecycle_fenced(const struct cn_broker *b);

#endif
