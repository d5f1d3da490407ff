/*
 * quorum.h - this node's part in the metadata quorum (libraft on the loop).
 *
 * In cluster mode (process.roles set) every node runs a raft server on the
 * broker's loop: voters (process.roles=broker,controller, listed in
 * controller.quorum.voters) vote and may lead; brokers alone
 * (process.roles=broker) are libraft standbys that replicate and apply the
 * log but never vote (docs/cluster-plan.md §6).  The raft leader's
 * controller machine (meta/ctl.h) is the cluster's active controller.
 * Every node applies the committed entries to its image (meta/image.h),
 * from which it serves Metadata, DescribeCluster and FindCoordinator.
 *
 * Raft's traffic uses the listeners Kafka uses: a voter's raft address is
 * its CONTROLLER listener, a standby's its first broker listener.  Raft
 * connections start with a handshake (magic "CNRAFT01", the cluster id,
 * the sender's id and address); the listener that accepts a connection
 * whose first bytes are the magic hands it to cn_quorum_accept, and a
 * connection whose handshake names another cluster id is refused.
 *
 * Requests for the controller (BrokerRegistration, BrokerHeartbeat,
 * AllocateProducerIds, forwarded admin requests) reach it as
 * cn_quorum_submit with a waiter; the waiter's done runs with the answer,
 * now or later, exactly once (NOT_CONTROLLER when this node does not lead
 * or stops leading before deciding).
 *
 * Runs on: loop, everything here.
 */
#ifndef CN_NODE_QUORUM_H
#define CN_NODE_QUORUM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "meta/ctl.h"
#include "meta/image.h"

struct cn_quorum;

/* One entry of controller.quorum.voters: "id@host:port". */
struct cn_quorum_voter {
    int32_t id;
    char host[256];
    int port;
};

struct cn_quorum_config {
    int32_t node_id;
    bool voter; /* process.roles has controller */
    const struct cn_quorum_voter *voters;
    size_t nvoters;
    /* This node's raft address as others reach it: its voter entry, or
     * for a standby its first broker listener's advertised address. */
    const char *self_host;
    int self_port;
    const char *dir;              /* the raft directory (metadata.log.dir) */
    const char *cluster_id;       /* this node's meta.properties id, "" if none
                               yet: it then takes the quorum's */
    int64_t election_timeout_ms;  /* controller.quorum.election.timeout.ms */
    int64_t heartbeat_timeout_ms; /* raft's; election_timeout / 10 */
    struct cn_ctl_config ctl;     /* the controller machine's */
};

/* A request to the controller, and what to do with its answer.  The
 * waiter must stay valid until done runs. */
struct cn_quorum_waiter {
    void (*done)(struct cn_quorum_waiter *w, const struct cn_ctl_answer *ans);
};

struct cn_quorum_hooks {
    /* An entry was applied to the image at offset (publish it: local
     * partitions, leadership, coordinators).  Must not call back into
     * the quorum. */
    void (*applied)(void *ctx, int64_t offset);
    /* This node's controller started (true) or stopped (false) leading. */
    void (*leading)(void *ctx, bool leads);
    /* The quorum cannot go on (a corrupt raft directory, an entry the
     * image refuses, another cluster's data): the node must stop.  why
     * names the cause. */
    void (*fatal)(void *ctx, const char *why);
    void *ctx;
};

/*
 * Opens the raft directory (creating it) and starts raft on loop.  A voter
 * whose directory is new bootstraps it with the configuration of
 * controller.quorum.voters (every voter writes the same first entry, so
 * they agree); a standby never bootstraps and learns the configuration
 * from the leader.  The cluster id: the first leader proposes
 * cfg->cluster_id (or a random one); a node learns it by applying that
 * record, and stops (hooks.fatal) when its own meta.properties names
 * another.  Handshakes carry the id once known; a peer naming a different
 * one is refused.  Returns 0, or a negative CN_E* or -errno with a
 * message in err naming what is wrong.  *out is set only on success.
 */
int cn_quorum_start(uv_loop_t *loop, const struct cn_quorum_config *cfg,
                    const struct cn_quorum_hooks *hooks,
                    struct cn_quorum **out, char *err, size_t err_len);

/* Stops raft; done(arg) runs once every handle is closed, after which
 * cn_quorum_free may be called. */
void cn_quorum_stop(struct cn_quorum *q, void (*done)(void *arg), void *arg);
void cn_quorum_free(struct cn_quorum *q);

/*
 * A connection a listener accepted whose first bytes are the raft magic:
 * read (n bytes of it already read, at bytes) and the stream (reading
 * stopped) now belong to the quorum.  Returns 0, or an error after which
 * the caller still owns and closes the stream.  The stream must be a
 * uv_tcp_t of its own from malloc (raft frees the handles it is given with
 * raft_free, which is free), and at most the 24-byte fixed part of the
 * handshake may have been read (net.c reads exactly 8).
 */
int cn_quorum_accept(struct cn_quorum *q, uv_stream_t *stream,
                     const uint8_t *bytes, size_t n);

/* True when bytes (at least 8) start a raft handshake. */
bool cn_quorum_is_handshake(const uint8_t *bytes, size_t n);

/* The node's image as applied so far. */
const struct cn_image *cn_quorum_image(struct cn_quorum *q);

/* The raft leader's id, -1 when none is known.  This is the active
 * controller. */
int32_t cn_quorum_leader(const struct cn_quorum *q);

/* True when this node's controller leads (after its barrier). */
bool cn_quorum_leads(const struct cn_quorum *q);

/*
 * Hands a controller request (ev->kind CN_CTE_REGISTER .. ALLOC_PIDS) to
 * this node's controller; ev->token is set by the quorum.  w->done runs
 * with the answer, never inside this call (except after cn_quorum_stop,
 * when it runs at once with NOT_CONTROLLER).  cn_quorum_stop answers
 * every request still waiting with NOT_CONTROLLER.
 */
void cn_quorum_submit(struct cn_quorum *q, const struct cn_ctl_event *ev,
                      struct cn_quorum_waiter *w);

/* What DescribeQuorum reports. */
struct cn_quorum_replica {
    int32_t id;
    int64_t log_end_offset;  /* match index as the leader knows it, -1 */
    int64_t last_contact_ms; /* -1 when unknown */
    bool voter;
};

struct cn_quorum_state {
    int32_t leader_id;      /* -1 none */
    int64_t term;           /* Kafka's leader epoch */
    int64_t high_watermark; /* raft commit index */
    struct cn_quorum_replica replicas[64];
    size_t nreplicas;
};

void cn_quorum_describe(const struct cn_quorum *q,
                        struct cn_quorum_state *out);

#endif
