/*
 * ctlcall.h - requests from this broker to the active controller, in
 * cluster mode: forwarded admin requests (CreateTopics, DeleteTopics,
 * CreatePartitions), topics a broker needs created (auto-creation by
 * Metadata, the coordinators' internal topics), producer-id blocks
 * (AllocateProducerIds), a partition leader's ISR changes
 * (AlterPartition).
 *
 * Every call goes over a cn_peer to the active controller's CONTROLLER
 * listener (its address from controller.quorum.voters), also when the
 * controller is this node: one path, as Kafka's brokers forward to the
 * controller even in combined mode.  The controller is the raft leader as
 * this node's quorum knows it.  A call that finds no controller, loses
 * its connection before an answer, or is answered NOT_CONTROLLER (the
 * caller's `not_controller` predicate says so for its API) is sent again
 * after a backoff, to whichever node leads then, until its deadline; then
 * cb gets -ETIMEDOUT.  A call still waiting on one controller's peer moves
 * to another at once when the quorum names another leader (or, with none
 * known, when the voter asked has been unreachable for a second): a peer
 * keeps what it could not send until the call's deadline, and a dead
 * controller must not hold the call that long.  While no leader is known
 * (a new broker-only node) the voters are asked in turn.  A client's
 * admin request is forwarded without its principal, with only the topics
 * that passed the checks of the broker it connected to (ACLs among them):
 * the controller trusts its CONTROLLER listener.  A retry can repeat a
 * request the controller carried out: every request sent here is one
 * whose repetition is harmless or detected (a topic that exists answers
 * TOPIC_ALREADY_EXISTS; a second producer-id block only skips ids).
 *
 * Runs on: loop.
 */
#ifndef CN_NODE_CTLCALL_H
#define CN_NODE_CTLCALL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/bytes.h"
#include "node/peer.h"

struct cn_broker;

/* True when the decoded response says the node asked is not the
 * controller (the call is then sent again); NULL: never. */
typedef bool (*cn_ctlcall_retry_fn)(const void *response);

/*
 * Sends request (api_key's generated request struct, encoded at
 * api_version) to the active controller; cb(arg, ...) runs exactly once,
 * never inside this call, with the response or an error as cn_peer_cb
 * describes (-ETIMEDOUT when timeout_ms passed without an answer that is
 * not a retry, -ECANCELED when the broker stops).  request must stay
 * valid until cb runs (it is encoded again for a retry).  Returns 0, or
 * CN_EINVAL when this node is not in cluster mode, its quorum is not
 * running (yet, or any more) or it stops, CN_ENOMEM (cb will not run).
 */
int cn_ctlcall(struct cn_broker *b, int16_t api_key, int16_t api_version,
               const void *request, int64_t timeout_ms,
               cn_ctlcall_retry_fn not_controller, cn_peer_cb cb, void *arg);

/*
 * Asks the controller to create topic `name` unless the image has it or a
 * request for it is already in flight; fire and forget (failures are
 * logged, a later call asks again).  nparts -1 and rf -1 take the
 * controller's defaults.  internal: a coordinator's topic, created with
 * cn_internal_topic_configs and a replication factor capped at the number
 * of unfenced brokers (Kafka's rule for offsets.topic.replication.factor
 * on a cluster smaller than it), with a warning when capped.
 */
void cn_ctlcall_ensure_topic(struct cn_broker *b, const char *name,
                             int32_t nparts, int16_t rf, bool internal);

/* The not_controller predicate for CreateTopics: any topic answered
 * NOT_CONTROLLER. */
bool cn_ctlcall_create_topics_retry(const void *response);

/* A producer-id block's outcome: err 0 and [start, start + len), or an
 * error (-ETIMEDOUT, -ECANCELED, -EIO when the controller refused). */
typedef void (*cn_ctlcall_pids_cb)(struct cn_broker *b, void *arg, int err,
                                   int64_t start, int32_t len);

/*
 * Asks the controller for a block of producer ids (AllocateProducerIds
 * with this broker's id and epoch).  Until this broker is registered, and
 * while the answer is NOT_CONTROLLER, STALE_BROKER_EPOCH,
 * BROKER_ID_NOT_REGISTERED or REQUEST_TIMED_OUT, it asks again (with the
 * epoch of the moment).  cb runs exactly once, never inside this call.
 * Returns 0, or CN_EINVAL (not in cluster mode, or stopping) / CN_ENOMEM
 * (cb will not run).
 */
int cn_ctlcall_alloc_pids(struct cn_broker *b, cn_ctlcall_pids_cb cb,
                          void *arg);

/* The most ISR members cn_ctlcall_alter_partition sends or reports (as
 * the controller's CN_CTL_ISR_MAX). */
#define CN_CTLCALL_ISR_MAX 32

/* An AlterPartition's outcome for its partition.  error: the partition's
 * Kafka code, or the response's top-level one (STALE_BROKER_EPOCH...), or
 * REQUEST_TIMED_OUT when no controller answered in time or the broker
 * stops, UNKNOWN_SERVER_ERROR for an answer without the partition; with
 * error 0, the partition as the controller committed it (else leader and
 * epochs -1, no ISR). */
struct cn_ctlcall_alter_result {
    int16_t error;
    int32_t leader_id, leader_epoch, partition_epoch;
    int32_t isr[CN_CTLCALL_ISR_MAX];
    int32_t nisr;
};

typedef void (*cn_ctlcall_alter_cb)(void *arg,
                                    const struct cn_ctlcall_alter_result *r);

/*
 * Sends AlterPartition (v3) for one partition this broker leads: its
 * leader and partition epochs as this broker knows them and the ISR it
 * wants, each member with its broker epoch (-1: not checked), with this
 * broker's id and epoch (taken at each attempt; until registered it
 * waits).  Sent again on NOT_CONTROLLER (top-level or the partition's:
 * the controller is behind the leader, Kafka's sign of a stale
 * controller) and on lost connections, to whichever node leads, until
 * timeout_ms.  Any other error is the caller's: FENCED_LEADER_EPOCH and
 * INVALID_UPDATE_VERSION mean newer metadata is on its way;
 * INELIGIBLE_REPLICA, retry later; NEW_LEADER_ELECTED, this broker does
 * not lead any more.  isr_broker_epochs may be NULL (all -1).  The
 * arguments are copied.  cb runs exactly once,
 * never inside this call.  Returns 0, or CN_EINVAL (not in cluster mode,
 * stopping, nisr outside 1..CN_CTLCALL_ISR_MAX) / CN_ENOMEM (cb will not
 * run).
 */
int cn_ctlcall_alter_partition(struct cn_broker *b,
                               const struct cn_uuid *topic_id,
                               int32_t partition, int32_t leader_epoch,
                               int32_t partition_epoch, const int32_t *isr,
                               const int64_t *isr_broker_epochs, int32_t nisr,
                               int64_t timeout_ms, cn_ctlcall_alter_cb cb,
                               void *arg);

/* What a forwarded call that got no answer (err from its callback) tells
 * the client: a Kafka code, and the message in *msg. */
int16_t cn_ctlcall_error(int err, const char **msg);

/* Cancels every call (cb gets -ECANCELED) and frees what ctlcall keeps;
 * at broker stop, before the loop closes. */
void cn_ctlcall_stop(struct cn_broker *b);

#endif
