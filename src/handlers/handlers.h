/*
 * handlers.h - one function per Kafka API, called by dispatch.c with the
 * request header decoded and `body` positioned at the request body.  Every
 * handler (cn_h_*) is declared here, the coordinators' included; the API
 * table in dispatch.c names their keys by enum cn_api_key (proto/gen/api.h).
 *
 * A handler decodes the body into req->arena, does the work, writes the
 * response (cn_resp_begin, then the generated encoder) and calls
 * cn_req_done(), now or when what it waits for has happened.  A body that
 * does not decode closes the connection, as Kafka does.
 */
#ifndef CN_HANDLERS_HANDLERS_H
#define CN_HANDLERS_HANDLERS_H

#include "base/rd.h"
#include "node/broker_int.h"

typedef void (*cn_handler_fn)(struct cn_broker *b, struct cn_req *req,
                              const struct cn_req_header *h,
                              struct cn_rd *body);

struct cn_handler {
    int16_t api_key;
    int16_t min_version; /* advertised in ApiVersions */
    int16_t max_version;
    int16_t decode_min; /* older versions still decoded and answered
                               with an error per partition */
    cn_handler_fn fn;
};

/* The table that drives both dispatch and ApiVersions. */
extern const struct cn_handler cn_handlers[];
extern const size_t cn_handler_count;

/* h_group.c: the group state machine's answers to parked JoinGroup and
 * SyncGroup requests (b->group_join_done, b->group_sync_done). */
void cn_gc_join_done(void *waiter, const struct cn_join_result *r);
void cn_gc_sync_done(void *waiter, const struct cn_sync_result *r);

/* delayed fetch (h_fetch.c) */
/* Called after data became visible (high watermark moved). */
void cn_broker_data_arrived(struct cn_broker *b);
void cn_fetch_wake_all(struct cn_broker *b);
void cn_fetch_cancel_all(struct cn_broker *b);
/* Ends req's long poll at once, answering nothing, if it is a parked
 * fetch (its connection has closed); otherwise does nothing. */
void cn_fetch_abandon(struct cn_broker *b, struct cn_req *req);
/* Ends the CreateTopics requests waiting for a deleted topic's logs to be
 * removed (h_topics.c), answering nothing: the broker stops. */
void cn_create_topics_cancel_all(struct cn_broker *b);

void cn_h_api_versions(struct cn_broker *b, struct cn_req *req,
                       const struct cn_req_header *h, struct cn_rd *body);

/* h_sasl.c: SASL served on a SASL_PLAINTEXT listener. */
int cn_sasl_open(struct cn_broker *b, char *err, size_t err_len);
void cn_sasl_close(struct cn_broker *b);
struct cn_scram_store *cn_sasl_store(struct cn_broker *b);
/* Authentications so far by mechanism (index 1 PLAIN, 2 SCRAM-SHA-256,
 * 3 SCRAM-SHA-512; cn_sasl_mech_name). */
void cn_sasl_metrics(struct cn_broker *b, uint64_t ok[4], uint64_t failed[4]);
const char *cn_sasl_mech_name(int m);
/* Before a request is handled: false when the connection may not send it
 * yet (the request is then finished and the connection closed). */
bool cn_sasl_gate(struct cn_broker *b, struct cn_req *req,
                  const struct cn_req_header *h);
/* A frame read as a bare SASL token (after SaslHandshake v0). */
void cn_sasl_raw_token(struct cn_broker *b, struct cn_req *req);
void cn_h_sasl_handshake(struct cn_broker *b, struct cn_req *req,
                         const struct cn_req_header *h, struct cn_rd *body);
void cn_h_sasl_authenticate(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h, struct cn_rd *body);
/* h_scram.c: KIP-554 credential management. */
void cn_h_describe_user_scram_credentials(struct cn_broker *b,
                                          struct cn_req *req,
                                          const struct cn_req_header *h,
                                          struct cn_rd *body);
void cn_h_alter_user_scram_credentials(struct cn_broker *b, struct cn_req *req,
                                       const struct cn_req_header *h,
                                       struct cn_rd *body);
void cn_h_metadata(struct cn_broker *b, struct cn_req *req,
                   const struct cn_req_header *h, struct cn_rd *body);
void cn_h_produce(struct cn_broker *b, struct cn_req *req,
                  const struct cn_req_header *h, struct cn_rd *body);
void cn_h_fetch(struct cn_broker *b, struct cn_req *req,
                const struct cn_req_header *h, struct cn_rd *body);
void cn_h_list_offsets(struct cn_broker *b, struct cn_req *req,
                       const struct cn_req_header *h, struct cn_rd *body);
void cn_h_delete_records(struct cn_broker *b, struct cn_req *req,
                         const struct cn_req_header *h, struct cn_rd *body);
void cn_h_offset_for_leader_epoch(struct cn_broker *b, struct cn_req *req,
                                  const struct cn_req_header *h,
                                  struct cn_rd *body);
void cn_h_create_topics(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body);
void cn_h_delete_topics(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body);
void cn_h_create_partitions(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h, struct cn_rd *body);
void cn_h_describe_configs(struct cn_broker *b, struct cn_req *req,
                           const struct cn_req_header *h, struct cn_rd *body);
void cn_h_alter_configs(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body);
void cn_h_incremental_alter_configs(struct cn_broker *b, struct cn_req *req,
                                    const struct cn_req_header *h,
                                    struct cn_rd *body);
void cn_h_describe_cluster(struct cn_broker *b, struct cn_req *req,
                           const struct cn_req_header *h, struct cn_rd *body);
/* The controller's APIs (h_controller.c). */
void cn_h_broker_registration(struct cn_broker *b, struct cn_req *req,
                              const struct cn_req_header *h,
                              struct cn_rd *body);
void cn_h_broker_heartbeat(struct cn_broker *b, struct cn_req *req,
                           const struct cn_req_header *h, struct cn_rd *body);
void cn_h_allocate_producer_ids(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h,
                                struct cn_rd *body);
void cn_h_alter_partition(struct cn_broker *b, struct cn_req *req,
                          const struct cn_req_header *h, struct cn_rd *body);
void cn_h_describe_quorum(struct cn_broker *b, struct cn_req *req,
                          const struct cn_req_header *h, struct cn_rd *body);

void cn_h_init_producer_id(struct cn_broker *b, struct cn_req *req,
                           const struct cn_req_header *h, struct cn_rd *body);
void cn_h_describe_producers(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             struct cn_rd *body);
/* WriteTxnMarkers (h_markers.c): coordinators' and operators' markers. */
void cn_h_write_txn_markers(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h, struct cn_rd *body);

/* The group coordinator's APIs (h_group.c, h_group_delete.c,
 * h_offset_commit.c, h_offset_fetch.c). */
void cn_h_join_group(struct cn_broker *b, struct cn_req *req,
                     const struct cn_req_header *h, struct cn_rd *body);
void cn_h_sync_group(struct cn_broker *b, struct cn_req *req,
                     const struct cn_req_header *h, struct cn_rd *body);
void cn_h_heartbeat(struct cn_broker *b, struct cn_req *req,
                    const struct cn_req_header *h, struct cn_rd *body);
void cn_h_leave_group(struct cn_broker *b, struct cn_req *req,
                      const struct cn_req_header *h, struct cn_rd *body);
void cn_h_describe_groups(struct cn_broker *b, struct cn_req *req,
                          const struct cn_req_header *h, struct cn_rd *body);
void cn_h_list_groups(struct cn_broker *b, struct cn_req *req,
                      const struct cn_req_header *h, struct cn_rd *body);
void cn_h_delete_groups(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body);
void cn_h_offset_commit(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body);
void cn_h_offset_fetch(struct cn_broker *b, struct cn_req *req,
                       const struct cn_req_header *h, struct cn_rd *body);
void cn_h_offset_delete(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body);
void cn_h_txn_offset_commit(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h, struct cn_rd *body);

/* The transaction coordinator's APIs (h_txn.c, h_txn_describe.c). */
void cn_h_find_coordinator(struct cn_broker *b, struct cn_req *req,
                           const struct cn_req_header *h, struct cn_rd *body);
void cn_h_add_partitions_to_txn(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h,
                                struct cn_rd *body);
void cn_h_add_offsets_to_txn(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             struct cn_rd *body);
void cn_h_describe_transactions(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h,
                                struct cn_rd *body);
void cn_h_list_transactions(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h, struct cn_rd *body);
void cn_h_end_txn(struct cn_broker *b, struct cn_req *req,
                  const struct cn_req_header *h, struct cn_rd *body);
/* InitProducerId with a transactional id (h_producers.c decodes and
 * authorizes it; the idempotent case stays there). */
void cn_txn_init_producer_id(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             struct cn_bytes transactional_id,
                             int32_t timeout_ms, int64_t producer_id,
                             int16_t producer_epoch);
/* The coordinator's answer to a request fed to it (txn_exec.h): encoded
 * by kind, or (PRODUCE_ADD) the request it held resumed. */
struct cn_txn_answer;
void cn_h_txn_answer(struct cn_broker *b, const struct cn_txn_answer *a);
/* A produce or TxnOffsetCommit whose implicit add (TV2) was taken goes
 * on; err is the add's outcome, which only the verification reads. */
void cn_h_produce_resume(struct cn_broker *b, struct cn_req *req, int16_t err);
void cn_h_txn_offset_commit_resume(struct cn_broker *b, struct cn_req *req,
                                   int16_t err);

/* The ACL APIs (h_acls.c, on the store in node/authz.c). */
void cn_h_create_acls(struct cn_broker *b, struct cn_req *req,
                      const struct cn_req_header *h, struct cn_rd *body);
void cn_h_describe_acls(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body);
void cn_h_delete_acls(struct cn_broker *b, struct cn_req *req,
                      const struct cn_req_header *h, struct cn_rd *body);

/* The client quota APIs (h_quotas.c). */
void cn_h_describe_client_quotas(struct cn_broker *b, struct cn_req *req,
                                 const struct cn_req_header *h,
                                 struct cn_rd *body);
void cn_h_alter_client_quotas(struct cn_broker *b, struct cn_req *req,
                              const struct cn_req_header *h,
                              struct cn_rd *body);

/* Topic auto-creation for Metadata and Produce: returns the topic, or NULL
 * with *kerr set. */
struct cn_topic *cn_topic_autocreate(struct cn_broker *b, struct cn_bytes name,
                                     int16_t *kerr);

#endif
