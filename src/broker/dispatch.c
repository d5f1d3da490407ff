/*
 * dispatch.c - request header, the API table, and ApiVersions.
 *
 * One table (cn_handlers) says which APIs and versions Cairn serves; the
 * ApiVersions answer is built from it, so the broker never advertises what
 * it does not implement.  Versions below a table row's minimum exist in
 * Kafka's schemas but need message formats Cairn does not store (magic 0
 * and 1 record sets), so they are not advertised.
 */
#include <string.h>

#include "node/authz.h"
#include "base/clock.h"
#include "handlers/quotas.h"
#include "base/say.h"
#include "broker/wiring.h"
#include "handlers/handlers.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

const struct cn_handler cn_handlers[] = {
    /* v12 is v11 on the wire (KIP-890: the client uses transaction
     * version 2); h_produce reads it as v11.  Advertised from v0 although
     * v0-2 (magic 0/1 message sets) get UNSUPPORTED_VERSION: librdkafka
     * before 2.8 compresses with gzip/snappy/lz4 only if the broker lists
     * Produce v0 (librdkafka#4956), and Kafka 4.x advertises v0 for the
     * same reason (KAFKA-18659). */
    {CN_API_PRODUCE, 0, 12, 0, cn_h_produce},
    {CN_API_FETCH, 4, 17, 0, cn_h_fetch},
    {CN_API_LIST_OFFSETS, 0, 10, 0, cn_h_list_offsets},
    {CN_API_METADATA, 0, 12, 0, cn_h_metadata},
    {CN_API_OFFSET_COMMIT, 0, 9, 0, cn_h_offset_commit},
    {CN_API_OFFSET_FETCH, 0, 9, 0, cn_h_offset_fetch},
    {CN_API_FIND_COORDINATOR, 0, 6, 0, cn_h_find_coordinator},
    {CN_API_JOIN_GROUP, 0, 9, 0, cn_h_join_group},
    {CN_API_HEARTBEAT, 0, 4, 0, cn_h_heartbeat},
    {CN_API_LEAVE_GROUP, 0, 5, 0, cn_h_leave_group},
    {CN_API_SYNC_GROUP, 0, 5, 0, cn_h_sync_group},
    {CN_API_DESCRIBE_GROUPS, 0, 5, 0, cn_h_describe_groups},
    {CN_API_LIST_GROUPS, 0, 5, 0, cn_h_list_groups},
    {CN_API_SASL_HANDSHAKE, 0, 1, 0, cn_h_sasl_handshake},
    {CN_API_API_VERSIONS, 0, 4, 0, cn_h_api_versions},
    {CN_API_CREATE_TOPICS, 0, 7, 0, cn_h_create_topics},
    {CN_API_DELETE_TOPICS, 0, 6, 0, cn_h_delete_topics},
    {CN_API_DELETE_RECORDS, 0, 2, 0, cn_h_delete_records},
    {CN_API_INIT_PRODUCER_ID, 0, 5, 0, cn_h_init_producer_id},
    {CN_API_OFFSET_FOR_LEADER_EPOCH, 0, 4, 0, cn_h_offset_for_leader_epoch},
    /* v4+ are broker-to-broker (KIP-890 verification, batched, VerifyOnly);
     * clients use 0-3. */
    {CN_API_ADD_PARTITIONS_TO_TXN, 0, 5, 0, cn_h_add_partitions_to_txn},
    {CN_API_ADD_OFFSETS_TO_TXN, 0, 4, 0, cn_h_add_offsets_to_txn},
    /* v5 is transaction version 2 (KIP-890): every EndTxn bumps the epoch
     * while the finalized transaction.version is 2. */
    {CN_API_END_TXN, 0, 5, 0, cn_h_end_txn},
    {CN_API_WRITE_TXN_MARKERS, 0, 1, 0, cn_h_write_txn_markers},
    /* v5 is v4 on the wire (KIP-890: transaction version 2, the group's
     * partition joins the transaction without AddOffsetsToTxn). */
    {CN_API_TXN_OFFSET_COMMIT, 0, 5, 0, cn_h_txn_offset_commit},
    {CN_API_DESCRIBE_ACLS, 0, 3, 0, cn_h_describe_acls},
    {CN_API_CREATE_ACLS, 0, 3, 0, cn_h_create_acls},
    {CN_API_DELETE_ACLS, 0, 3, 0, cn_h_delete_acls},
    {CN_API_DESCRIBE_CONFIGS, 0, 4, 0, cn_h_describe_configs},
    {CN_API_ALTER_CONFIGS, 0, 2, 0, cn_h_alter_configs},
    {CN_API_SASL_AUTHENTICATE, 0, 2, 0, cn_h_sasl_authenticate},
    {CN_API_CREATE_PARTITIONS, 0, 3, 0, cn_h_create_partitions},
    {CN_API_DELETE_GROUPS, 0, 2, 0, cn_h_delete_groups},
    {CN_API_INCREMENTAL_ALTER_CONFIGS, 0, 1, 0,
     cn_h_incremental_alter_configs},
    {CN_API_OFFSET_DELETE, 0, 0, 0, cn_h_offset_delete},
    /* Hand-written codecs (src/proto/quotas.c, scram_msgs.c). */
    {CN_API_DESCRIBE_CLIENT_QUOTAS, 0, 1, 0, cn_h_describe_client_quotas},
    {CN_API_ALTER_CLIENT_QUOTAS, 0, 1, 0, cn_h_alter_client_quotas},
    {CN_API_DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0, 0,
     cn_h_describe_user_scram_credentials},
    {CN_API_ALTER_USER_SCRAM_CREDENTIALS, 0, 0, 0,
     cn_h_alter_user_scram_credentials},
    {CN_API_DESCRIBE_CLUSTER, 0, 1, 0, cn_h_describe_cluster},
    {CN_API_DESCRIBE_PRODUCERS, 0, 0, 0, cn_h_describe_producers},
    {CN_API_DESCRIBE_TRANSACTIONS, 0, 0, 0, cn_h_describe_transactions},
    {CN_API_LIST_TRANSACTIONS, 0, 1, 0, cn_h_list_transactions},
    /* Kafka 4.x offers DescribeQuorum on broker listeners too (forwarded
     * to the controller there; answered from this node's view here). */
    {CN_API_DESCRIBE_QUORUM, 0, 2, 0, cn_h_describe_quorum},
    {CN_API_BROKER_REGISTRATION, 0, 4, 0, cn_h_broker_registration},
    {CN_API_BROKER_HEARTBEAT, 0, 1, 0, cn_h_broker_heartbeat},
    {CN_API_ALLOCATE_PRODUCER_IDS, 0, 0, 0, cn_h_allocate_producer_ids},
    /* v3 names ISR members with their broker epochs (Kafka 4.x sends it);
     * v2 has topic ids and plain ISRs. */
    {CN_API_ALTER_PARTITION, 2, 3, 2, cn_h_alter_partition},
};
const size_t cn_handler_count = sizeof cn_handlers / sizeof cn_handlers[0];

/* APIs whose handlers do Kafka's authorization checks themselves (or,
 * like ApiVersions and DescribeCluster, need none): today every handler.
 * With the authorizer on, an API added to cn_handlers but not here is
 * served to super users only; for anyone else the connection is closed
 * with an audit line (fail closed: an API whose checks are not written
 * yet must not be open to everyone). */
static bool authz_checked(int16_t key)
{
    static const int16_t keys[] = {
        CN_API_PRODUCE,
        CN_API_FETCH,
        CN_API_LIST_OFFSETS,
        CN_API_METADATA,
        CN_API_OFFSET_COMMIT,
        CN_API_OFFSET_FETCH,
        CN_API_FIND_COORDINATOR,
        CN_API_JOIN_GROUP,
        CN_API_HEARTBEAT,
        CN_API_LEAVE_GROUP,
        CN_API_SYNC_GROUP,
        CN_API_DESCRIBE_GROUPS,
        CN_API_LIST_GROUPS,
        CN_API_SASL_HANDSHAKE,
        CN_API_API_VERSIONS,
        CN_API_CREATE_TOPICS,
        CN_API_DELETE_TOPICS,
        CN_API_DELETE_RECORDS,
        CN_API_INIT_PRODUCER_ID,
        CN_API_OFFSET_FOR_LEADER_EPOCH,
        CN_API_ADD_PARTITIONS_TO_TXN,
        CN_API_ADD_OFFSETS_TO_TXN,
        CN_API_END_TXN,
        CN_API_WRITE_TXN_MARKERS,
        CN_API_TXN_OFFSET_COMMIT,
        CN_API_DESCRIBE_ACLS,
        CN_API_CREATE_ACLS,
        CN_API_DELETE_ACLS,
        CN_API_DESCRIBE_CONFIGS,
        CN_API_ALTER_CONFIGS,
        CN_API_SASL_AUTHENTICATE,
        CN_API_CREATE_PARTITIONS,
        CN_API_DELETE_GROUPS,
        CN_API_INCREMENTAL_ALTER_CONFIGS,
        CN_API_OFFSET_DELETE,
        CN_API_DESCRIBE_CLIENT_QUOTAS,
        CN_API_ALTER_CLIENT_QUOTAS,
        CN_API_DESCRIBE_USER_SCRAM_CREDENTIALS,
        CN_API_ALTER_USER_SCRAM_CREDENTIALS,
        CN_API_DESCRIBE_CLUSTER,
        CN_API_DESCRIBE_PRODUCERS,
        CN_API_DESCRIBE_TRANSACTIONS,
        CN_API_LIST_TRANSACTIONS,
        CN_API_DESCRIBE_QUORUM,
    };
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (keys[i] == key)
            return true;
    return false;
}

/* The APIs a CONTROLLER listener serves, as a Kafka controller's: the
 * brokers' registration, heartbeats, producer-id blocks and ISR changes
 * (AlterPartition), the topic
 * changes brokers forward, and what finds and describes the quorum. */
static bool controller_api(int16_t key)
{
    switch (key) {
    case CN_API_API_VERSIONS:
    case CN_API_SASL_HANDSHAKE:
    case CN_API_SASL_AUTHENTICATE:
    case CN_API_BROKER_REGISTRATION:
    case CN_API_BROKER_HEARTBEAT:
    case CN_API_ALLOCATE_PRODUCER_IDS:
    case CN_API_ALTER_PARTITION:
    case CN_API_CREATE_TOPICS:
    case CN_API_DELETE_TOPICS:
    case CN_API_CREATE_PARTITIONS:
    case CN_API_ALTER_CONFIGS:
    case CN_API_INCREMENTAL_ALTER_CONFIGS:
    case CN_API_DESCRIBE_CLUSTER:
    case CN_API_DESCRIBE_QUORUM: return true;
    default: return false;
    }
}

/* Whether this broker serves row h on listener `listener` (an index in
 * cfg->listener; -1: any).  A single node's listeners do not offer the
 * controller's own APIs, as a Kafka broker listener does not (it closes
 * the connection for them); in cluster mode only the CONTROLLER listener
 * offers them, and it offers nothing a client needs from a broker. */
static bool handler_on(const struct cn_broker *b, const struct cn_handler *h,
                       int listener)
{
    bool on_controller = b->quorum != NULL && listener >= 0 &&
                         listener == b->cfg->controller_listener;
    if (on_controller)
        return controller_api(h->api_key);
    switch (h->api_key) {
    case CN_API_BROKER_REGISTRATION:
    case CN_API_BROKER_HEARTBEAT:
    case CN_API_ALLOCATE_PRODUCER_IDS:
    case CN_API_ALTER_PARTITION: return false;
    default: return true;
    }
}

static const struct cn_handler *handler_find(const struct cn_broker *b,
                                             int16_t key, int listener)
{
    for (size_t i = 0; i < cn_handler_count; i++)
        if (cn_handlers[i].api_key == key)
            return handler_on(b, &cn_handlers[i], listener) ? &cn_handlers[i]
                                                            : NULL;
    return NULL;
}

/* KIP-511: an ApiVersions request of a version we do not know is answered
 * in the v0 layout with UNSUPPORTED_VERSION and our own range, so that a
 * newer client can retry with a version we speak. */
#define TXN_VERSION_FEATURE "transaction.version"
#define TXN_VERSION_MAX 2

/*
 * KIP-584 features (v3+): transaction.version, supported 0..2 and
 * finalized at cairn.transaction.version.  A Java 4.x client uses
 * transaction version 2 (KIP-890 part 2) only when the finalized level is
 * 2; librdkafka ignores the tagged fields.  Before v4 a supported minimum
 * of 0 is shown as 1: older Java clients reject a 0 (KAFKA-17011), as
 * Kafka does.  A level of 0 is not finalized, so it is left out.
 */
static int features_fill(struct cn_broker *b, struct cn_req *req,
                         int16_t version,
                         struct cn_api_versions_response *resp)
{
    if (version < 3)
        return 0;
    resp->supported_features =
        cn_arena_calloc(&req->arena, 1, sizeof *resp->supported_features);
    resp->finalized_features =
        cn_arena_calloc(&req->arena, 1, sizeof *resp->finalized_features);
    if (!resp->supported_features || !resp->finalized_features)
        return CN_ENOMEM;
    struct cn_api_versions_response_supported_feature_key *sf =
        &resp->supported_features[0];
    cn_api_versions_response_supported_feature_key_init(sf);
    sf->name = cn_bytes_str(TXN_VERSION_FEATURE);
    sf->min_version = version >= 4 ? 0 : 1;
    sf->max_version = TXN_VERSION_MAX;
    resp->supported_features_len = 1;
    int16_t level = (int16_t)b->cfg->cairn_transaction_version;
    /* One node, configured at start: the finalized set never changes
     * while the broker runs, so its epoch is constant. */
    resp->finalized_features_epoch = 1;
    resp->finalized_features_len = 0;
    if (level > 0) {
        struct cn_api_versions_response_finalized_feature_key *ff =
            &resp->finalized_features[0];
        cn_api_versions_response_finalized_feature_key_init(ff);
        ff->name = cn_bytes_str(TXN_VERSION_FEATURE);
        ff->max_version_level = level;
        ff->min_version_level = level;
        resp->finalized_features_len = 1;
    }
    return 0;
}

static void api_versions_answer(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h, int16_t version,
                                int16_t error)
{
    struct cn_api_versions_response resp;
    cn_api_versions_response_init(&resp);
    resp.error_code = error;
    size_t n = error ? 1 : cn_handler_count;
    resp.api_keys = cn_arena_calloc(&req->arena, n, sizeof *resp.api_keys);
    if (!resp.api_keys) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    if (error) {
        const struct cn_handler *av = handler_find(b, CN_API_API_VERSIONS,
                                                   cn_req_listener(req));
        resp.api_keys[0].api_key = CN_API_API_VERSIONS;
        resp.api_keys[0].min_version = av->min_version;
        resp.api_keys[0].max_version = av->max_version;
    } else {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (!handler_on(b, &cn_handlers[i], cn_req_listener(req)))
                continue;
            resp.api_keys[k].api_key = cn_handlers[i].api_key;
            resp.api_keys[k].min_version = cn_handlers[i].min_version;
            resp.api_keys[k].max_version = cn_handlers[i].max_version;
            k++;
        }
        n = k;
    }
    resp.api_keys_len = (int32_t)n;
    resp.throttle_time_ms = cn_quota_request_answer(b, req, h);
    if (!error && features_fill(b, req, version, &resp) != 0) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    /* ApiVersions responses always use response header v0 (KIP-511). */
    cn_wr_i32(&req->resp, h->correlation_id);
    cn_api_versions_response_encode(&req->resp, version, &resp);
    cn_req_done(req);
}

void cn_h_api_versions(struct cn_broker *b, struct cn_req *req,
                       const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_api_versions_request rq;
    int err = cn_api_versions_request_decode(body, &req->arena, h->api_version,
                                             &rq);
    if (err) {
        /* Kafka answers INVALID_REQUEST for a v3+ body it cannot read. */
        api_versions_answer(b, req, h, 0, KAFKA_INVALID_REQUEST);
        return;
    }
    api_versions_answer(b, req, h, h->api_version, KAFKA_NONE);
}

void cn_dispatch(struct cn_req *req, void *opaque)
{
    struct cn_broker *b = opaque;
    if (req->raw_token) {
        cn_sasl_raw_token(b, req);
        return;
    }
    struct cn_rd rd;
    cn_rd_init(&rd, req->frame, req->frame_len);
    struct cn_req_header h;
    int rc = cn_req_header_decode(&rd, &h);
    if (rc < 0) {
        CN_WARN("closing %s: unreadable request header", cn_req_peer(req));
        cn_req_close_conn(req);
        req->no_response = true;
        cn_req_done(req);
        return;
    }
    req->api_key = h.api_key; /* for the metrics done hook */
    req->api_version = h.api_version;
    const struct cn_handler *hd = handler_find(b, h.api_key,
                                               cn_req_listener(req));
    if (h.api_key == CN_API_API_VERSIONS &&
        (!hd || h.api_version < hd->min_version ||
         h.api_version > hd->max_version)) {
        api_versions_answer(b, req, &h, 0, KAFKA_UNSUPPORTED_VERSION);
        return;
    }
    if (!hd || h.api_version < hd->decode_min ||
        h.api_version > hd->max_version) {
        /* Without a schema for this key/version there is no correct error
         * body to send; Kafka closes the connection too. */
        CN_WARN("closing %s: unsupported API key %d version %d from "
                "client '%.*s'",
                cn_req_peer(req), h.api_key, h.api_version,
                h.client_id.len > 0 ? h.client_id.len : 0,
                h.client_id.len > 0 ? (const char *)h.client_id.ptr : "");
        cn_req_close_conn(req);
        req->no_response = true;
        cn_req_done(req);
        return;
    }
    if (b->stopping) {
        req->no_response = true;
        cn_req_done(req);
        return;
    }
    if (!cn_sasl_gate(b, req, &h))
        return;
    if (cn_authz_enabled(b) && !authz_checked(h.api_key) &&
        !cn_acl_is_super(&b->authz, cn_req_principal(req))) {
        const struct cn_api_info *ai = cn_api_find(h.api_key);
        CN_WARN("authorization: DENIED principal=%s peer=%s api=%s (served "
                "to super.users only while the authorizer is on); closing",
                cn_req_principal(req), cn_req_peer(req), ai ? ai->name : "?");
        cn_req_close_conn(req);
        req->no_response = true;
        cn_req_done(req);
        return;
    }
    /* request_percentage (Kafka's request-thread time): what handlers
     * spend on the loop thread, the one request thread here, measured
     * around the handler call and recorded as the answer is finished, so
     * the answer that crosses the quota carries the throttle (a parked
     * request's later work, a long-poll fetch answered on data, is not
     * counted; its first pass is).  See quotas.h. */
    cn_quota_request_begin(b, req, &h);
    hd->fn(b, req, &h, &rd);
    cn_quota_request_end(b);
}
