/*
 * scram_msgs.h - DescribeUserScramCredentials (API 50) and
 * AlterUserScramCredentials (API 51), KIP-554, written by hand (Kafka's
 * schemas for them are not among the generated ones).  Version 0 only,
 * flexible: compact strings, bytes and arrays, a tag section per struct.
 *
 *   DescribeUserScramCredentials request
 *     users            compact nullable array (null: every user) of
 *       name           compact string, tags
 *     tags
 *   DescribeUserScramCredentials response
 *     throttle_time_ms int32, error_code int16, error_message compact
 *     nullable string, results compact array of
 *       user           compact string, error_code int16, error_message
 *                      compact nullable string, credential_infos compact
 *                      array of (mechanism int8, iterations int32, tags),
 *                      tags
 *     tags
 *   AlterUserScramCredentials request
 *     deletions        compact array of (name compact string,
 *                      mechanism int8, tags)
 *     upsertions       compact array of (name compact string,
 *                      mechanism int8, iterations int32, salt compact
 *                      bytes, salted_password compact bytes, tags)
 *     tags
 *   AlterUserScramCredentials response
 *     throttle_time_ms int32, results compact array of (user compact
 *     string, error_code int16, error_message compact nullable string,
 *     tags), tags
 *
 * Decoded strings and bytes are views into the input; arrays live in the
 * arena.  Decoders return 0 or a negative CN_E*; encoders leave errors
 * in wr->err.
 */
#ifndef CN_PROTO_SCRAM_MSGS_H
#define CN_PROTO_SCRAM_MSGS_H

#include <stdint.h>

#include "base/arena.h"
#include "base/bytes.h"
#include "base/rd.h"
#include "base/wr.h"
#include "gen/api.h"

struct cn_describe_scram_req {
    int32_t users_len;       /* -1: null (every user) */
    struct cn_bytes *users;
};

struct cn_scram_cred_info {
    int8_t mechanism;        /* enum cn_scram_mech */
    int32_t iterations;
};

struct cn_describe_scram_result {
    struct cn_bytes user;
    int16_t error_code;
    struct cn_bytes error_message;  /* null when none */
    int32_t infos_len;
    struct cn_scram_cred_info *infos;
};

struct cn_describe_scram_resp {
    int32_t throttle_time_ms;
    int16_t error_code;
    struct cn_bytes error_message;
    int32_t results_len;
    struct cn_describe_scram_result *results;
};

struct cn_scram_deletion {
    struct cn_bytes name;
    int8_t mechanism;
};

struct cn_scram_upsertion {
    struct cn_bytes name;
    int8_t mechanism;
    int32_t iterations;
    struct cn_bytes salt;
    struct cn_bytes salted_password;
};

struct cn_alter_scram_req {
    int32_t deletions_len;
    struct cn_scram_deletion *deletions;
    int32_t upsertions_len;
    struct cn_scram_upsertion *upsertions;
};

struct cn_alter_scram_result {
    struct cn_bytes user;
    int16_t error_code;
    struct cn_bytes error_message;
};

struct cn_alter_scram_resp {
    int32_t throttle_time_ms;
    int32_t results_len;
    struct cn_alter_scram_result *results;
};

int cn_describe_scram_req_decode(struct cn_rd *rd, struct cn_arena *a,
                                 struct cn_describe_scram_req *out);
void cn_describe_scram_req_encode(struct cn_wr *wr,
                                  const struct cn_describe_scram_req *in);
int cn_describe_scram_resp_decode(struct cn_rd *rd, struct cn_arena *a,
                                  struct cn_describe_scram_resp *out);
void cn_describe_scram_resp_encode(struct cn_wr *wr,
                                   const struct cn_describe_scram_resp *in);
int cn_alter_scram_req_decode(struct cn_rd *rd, struct cn_arena *a,
                              struct cn_alter_scram_req *out);
void cn_alter_scram_req_encode(struct cn_wr *wr,
                               const struct cn_alter_scram_req *in);
int cn_alter_scram_resp_decode(struct cn_rd *rd, struct cn_arena *a,
                               struct cn_alter_scram_resp *out);
void cn_alter_scram_resp_encode(struct cn_wr *wr,
                                const struct cn_alter_scram_resp *in);

/* The table rows of DescribeUserScramCredentials (50) and
 * AlterUserScramCredentials (51), v0 only and flexible, shaped like the
 * generated cn_api_infos (found through cn_api_find). */
extern const struct cn_api_info cn_scram_api_infos[2];

#endif
