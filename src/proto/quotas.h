/*
 * quotas.h - hand-written codecs for DescribeClientQuotas (API 48) and
 * AlterClientQuotas (API 49), versions 0-1 (1 flexible: compact strings
 * and arrays, tagged fields), and for the metadata ClientQuotaRecord
 * (v0, flexible) the quota store is made of.  Kafka's schemas for the two
 * APIs are not among ../shared/kafka-protocol/messages, so protogen does
 * not make these; the layout follows Kafka's wire format field by field.
 *
 * As with the generated codecs: strings are views into the decoded buffer,
 * arrays live in the arena; decode returns 0 or a negative CN_E*, encode
 * leaves errors in wr->err.  An entity name of length -1 is null: the
 * default entity ("<default>").
 */
#ifndef CN_PROTO_QUOTAS_H
#define CN_PROTO_QUOTAS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/bytes.h"
#include "base/rd.h"
#include "base/wr.h"
#include "gen/api.h"

#define CN_CLIENT_QUOTAS_MAX_VERSION 1

/* DescribeClientQuotas match types. */
#define CN_CQ_MATCH_EXACT 0
#define CN_CQ_MATCH_DEFAULT 1
#define CN_CQ_MATCH_ANY 2

struct cn_cq_entity {
    struct cn_bytes type; /* "user", "client-id", "ip" */
    struct cn_bytes name; /* len -1: the default */
};

struct cn_dcq_component {
    struct cn_bytes entity_type;
    int8_t match_type;
    struct cn_bytes match; /* nullable */
};

struct cn_describe_client_quotas_request {
    struct cn_dcq_component *components;
    int32_t components_len;
    bool strict;
};

struct cn_dcq_value {
    struct cn_bytes key;
    double value;
};

struct cn_dcq_entry {
    struct cn_cq_entity *entity;
    int32_t entity_len;
    struct cn_dcq_value *values;
    int32_t values_len;
};

struct cn_describe_client_quotas_response {
    int32_t throttle_time_ms;
    int16_t error_code;
    struct cn_bytes error_message; /* nullable */
    struct cn_dcq_entry *entries;  /* entries_len -1: null (on error) */
    int32_t entries_len;
};

struct cn_acq_op {
    struct cn_bytes key;
    double value;
    bool remove;
};

struct cn_acq_entry {
    struct cn_cq_entity *entity;
    int32_t entity_len;
    struct cn_acq_op *ops;
    int32_t ops_len;
};

struct cn_alter_client_quotas_request {
    struct cn_acq_entry *entries;
    int32_t entries_len;
    bool validate_only;
};

struct cn_acq_result {
    int16_t error_code;
    struct cn_bytes error_message; /* nullable */
    struct cn_cq_entity *entity;
    int32_t entity_len;
};

struct cn_alter_client_quotas_response {
    int32_t throttle_time_ms;
    struct cn_acq_result *entries;
    int32_t entries_len;
};

/* ClientQuotaRecord v0 (metadata record 14): one key of one entity. */
struct cn_client_quota_record {
    struct cn_cq_entity *entity;
    int32_t entity_len;
    struct cn_bytes key;
    double value;
    bool remove;
};

int cn_dcq_request_decode(struct cn_rd *rd, struct cn_arena *arena,
                          int16_t version,
                          struct cn_describe_client_quotas_request *out);
void cn_dcq_request_encode(struct cn_wr *wr, int16_t version,
                           const struct cn_describe_client_quotas_request *in);
int cn_dcq_response_decode(struct cn_rd *rd, struct cn_arena *arena,
                           int16_t version,
                           struct cn_describe_client_quotas_response *out);
void cn_dcq_response_encode(
    struct cn_wr *wr, int16_t version,
    const struct cn_describe_client_quotas_response *in);

int cn_acq_request_decode(struct cn_rd *rd, struct cn_arena *arena,
                          int16_t version,
                          struct cn_alter_client_quotas_request *out);
void cn_acq_request_encode(struct cn_wr *wr, int16_t version,
                           const struct cn_alter_client_quotas_request *in);
int cn_acq_response_decode(struct cn_rd *rd, struct cn_arena *arena,
                           int16_t version,
                           struct cn_alter_client_quotas_response *out);
void cn_acq_response_encode(struct cn_wr *wr, int16_t version,
                            const struct cn_alter_client_quotas_response *in);

int cn_client_quota_record_decode(struct cn_rd *rd, struct cn_arena *arena,
                                  struct cn_client_quota_record *out);
void cn_client_quota_record_encode(struct cn_wr *wr,
                                   const struct cn_client_quota_record *in);

/* Rows for these APIs shaped as the generated table's, so code that walks
 * APIs generically (headers, cairnctl's client, fuzzers) finds them
 * through cn_api_find() (header.h). */
extern const struct cn_api_info cn_quota_api_infos[2];

#endif
