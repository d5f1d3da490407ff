/*
 * fsm.h - the metadata quorum's glue to libraft, for any raft_io.
 *
 * One struct cn_mfsm per node: it owns the node's image (image.h) and its
 * controller machine (ctl.h), gives libraft the struct raft_fsm that
 * applies committed entries to the image, snapshots it and restores it,
 * and carries out the controller's actions on the raft instance:
 *  - PROPOSE: the records are encoded as one entry (records.h) into a
 *    raft_malloc'd buffer and raft_apply'd; its callback becomes a
 *    CN_CTE_PROPOSED event: 0 once the entry is applied here,
 *    NOT_CONTROLLER when raft refused it (RAFT_NOTLEADER), and
 *    REQUEST_TIMED_OUT when the outcome is unknown (RAFT_LEADERSHIPLOST:
 *    the entry may still commit under the next leader);
 *  - answers go to the owner's answer callback (the broker sends them on
 *    the wire; a test records them);
 *  - ADD_STANDBY: raft_add then raft_assign(RAFT_STANDBY), one change at a
 *    time, skipped for servers already in the configuration.
 * Leadership: libraft has no leadership callback, so cn_mfsm_poll watches
 * raft_state() and raft_current_term().  A node that becomes leader first
 * commits a barrier, so its image holds every entry committed before its
 * term, and only then feeds CN_CTE_LEADER; losing the lead (or the term)
 * feeds CN_CTE_UNLEADER.
 *
 * Nothing here depends on the I/O backend: src/node/quorum.c runs it on
 * raft_uv, tests/unit/test_ctl.c on raft/fixture.h.  Raft's callbacks only
 * queue events; the machine runs from cn_mfsm_poll and cn_mfsm_feed,
 * never inside a raft callback, so every raft call it makes is a fresh
 * one.  The owner calls cn_mfsm_poll after raft did work (each loop
 * iteration that ran raft callbacks, or at least when the wake hook
 * fires) and when cn_mfsm_timer_ms comes due.
 *
 * Runs on: the loop that runs the raft instance.  Not re-entrant: the
 * answer callback must not call cn_mfsm_feed or cn_mfsm_poll.
 */
#ifndef CN_META_FSM_H
#define CN_META_FSM_H

#include <raft.h>
#include <stdint.h>

#include "meta/ctl.h"
#include "meta/image.h"

struct cn_mfsm; /* opaque */

struct cn_mfsm_hooks {
    /* An answer to a request fed with cn_mfsm_feed; the answer and what
     * it points to live during the call only. */
    void (*answer)(void *ctx, const struct cn_ctl_answer *ans);
    /* Optional: an entry was applied to the image at `offset`.  Runs
     * inside raft's apply: read the image, call no raft function. */
    void (*applied)(void *ctx, int64_t offset);
    /* Optional: raft queued an event; call cn_mfsm_poll soon (not from
     * inside this hook). */
    void (*wake)(void *ctx);
    void *ctx;
};

/* *out is set only on success.  Returns 0 or CN_ENOMEM. */
int cn_mfsm_new(const struct cn_ctl_config *cfg,
                const struct cn_mfsm_hooks *hooks, struct cn_mfsm **out);

/* Frees the machine and the image; only after raft_close's callback (raft
 * still calls back into it while closing). */
void cn_mfsm_free(struct cn_mfsm *m);

/* The struct raft_fsm to give raft_init (or raft_fixture_grow). */
struct raft_fsm *cn_mfsm_raft_fsm(struct cn_mfsm *m);

/* Binds the raft instance, after raft_init and before raft_start; turns
 * pre-vote on (a rejoining server must not disrupt a working leader). */
void cn_mfsm_attach(struct cn_mfsm *m, struct raft *r);

/*
 * Feeds a request (CN_CTE_REGISTER .. CN_CTE_ALLOC_PIDS) to the
 * controller; its answer comes through hooks.answer, now or later.
 */
void cn_mfsm_feed(struct cn_mfsm *m, int64_t now_ms,
                  const struct cn_ctl_event *ev);

/* Runs what raft queued (applies, proposal outcomes, leadership) and a
 * tick of the controller. */
void cn_mfsm_poll(struct cn_mfsm *m, int64_t now_ms);

/* When the controller wants the next cn_mfsm_poll; -1: no need. */
int64_t cn_mfsm_timer_ms(const struct cn_mfsm *m);

/* The node's image, as applied so far; valid until the next poll, feed or
 * snapshot restore. */
const struct cn_image *cn_mfsm_image(struct cn_mfsm *m);

/* True once this node's controller leads (after its barrier). */
bool cn_mfsm_leads(const struct cn_mfsm *m);

#endif
