/*
 * test_api_keys.c - enum cn_api_key (proto/gen/api.h) against the schemas.
 *
 * The enum is generated, so comparing it with other generated tables
 * alone would only show protogen agreeing with itself.  The rows below are
 * written by hand: every API Cairn knows, by enum constant and Kafka's
 * name.  Each row must name the API the tables hold at that key, and,
 * when ../shared/kafka-protocol is beside the repository (as in CI and
 * `make check-gen`), the apiKey that <Name>Request.json says, read here
 * with a plain text scan instead of protogen's parser.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "proto/gen/api.h"
#include "proto/header.h"
#include "unit.h"

#define SCHEMA_ROOT "../shared/kafka-protocol"

struct api_row {
    int key;
    const char *name;
};

static const struct api_row rows[] = {
    {CN_API_PRODUCE, "Produce"},
    {CN_API_FETCH, "Fetch"},
    {CN_API_LIST_OFFSETS, "ListOffsets"},
    {CN_API_METADATA, "Metadata"},
    {CN_API_OFFSET_COMMIT, "OffsetCommit"},
    {CN_API_OFFSET_FETCH, "OffsetFetch"},
    {CN_API_FIND_COORDINATOR, "FindCoordinator"},
    {CN_API_JOIN_GROUP, "JoinGroup"},
    {CN_API_HEARTBEAT, "Heartbeat"},
    {CN_API_LEAVE_GROUP, "LeaveGroup"},
    {CN_API_SYNC_GROUP, "SyncGroup"},
    {CN_API_DESCRIBE_GROUPS, "DescribeGroups"},
    {CN_API_LIST_GROUPS, "ListGroups"},
    {CN_API_SASL_HANDSHAKE, "SaslHandshake"},
    {CN_API_API_VERSIONS, "ApiVersions"},
    {CN_API_CREATE_TOPICS, "CreateTopics"},
    {CN_API_DELETE_TOPICS, "DeleteTopics"},
    {CN_API_DELETE_RECORDS, "DeleteRecords"},
    {CN_API_INIT_PRODUCER_ID, "InitProducerId"},
    {CN_API_OFFSET_FOR_LEADER_EPOCH, "OffsetForLeaderEpoch"},
    {CN_API_ADD_PARTITIONS_TO_TXN, "AddPartitionsToTxn"},
    {CN_API_ADD_OFFSETS_TO_TXN, "AddOffsetsToTxn"},
    {CN_API_END_TXN, "EndTxn"},
    {CN_API_WRITE_TXN_MARKERS, "WriteTxnMarkers"},
    {CN_API_TXN_OFFSET_COMMIT, "TxnOffsetCommit"},
    {CN_API_DESCRIBE_ACLS, "DescribeAcls"},
    {CN_API_CREATE_ACLS, "CreateAcls"},
    {CN_API_DELETE_ACLS, "DeleteAcls"},
    {CN_API_DESCRIBE_CONFIGS, "DescribeConfigs"},
    {CN_API_ALTER_CONFIGS, "AlterConfigs"},
    {CN_API_SASL_AUTHENTICATE, "SaslAuthenticate"},
    {CN_API_CREATE_PARTITIONS, "CreatePartitions"},
    {CN_API_DELETE_GROUPS, "DeleteGroups"},
    {CN_API_INCREMENTAL_ALTER_CONFIGS, "IncrementalAlterConfigs"},
    {CN_API_OFFSET_DELETE, "OffsetDelete"},
    {CN_API_DESCRIBE_CLIENT_QUOTAS, "DescribeClientQuotas"},
    {CN_API_ALTER_CLIENT_QUOTAS, "AlterClientQuotas"},
    {CN_API_DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials"},
    {CN_API_ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials"},
    {CN_API_DESCRIBE_QUORUM, "DescribeQuorum"},
    {CN_API_DESCRIBE_CLUSTER, "DescribeCluster"},
    {CN_API_DESCRIBE_PRODUCERS, "DescribeProducers"},
    {CN_API_BROKER_REGISTRATION, "BrokerRegistration"},
    {CN_API_BROKER_HEARTBEAT, "BrokerHeartbeat"},
    {CN_API_UNREGISTER_BROKER, "UnregisterBroker"},
    {CN_API_DESCRIBE_TRANSACTIONS, "DescribeTransactions"},
    {CN_API_LIST_TRANSACTIONS, "ListTransactions"},
    {CN_API_ALLOCATE_PRODUCER_IDS, "AllocateProducerIds"},
    {CN_API_ALTER_PARTITION, "AlterPartition"},
    {CN_API_CONSUMER_GROUP_HEARTBEAT, "ConsumerGroupHeartbeat"},
    {CN_API_CONSUMER_GROUP_DESCRIBE, "ConsumerGroupDescribe"},
};
#define NROWS (sizeof rows / sizeof rows[0])
#define HAND_WRITTEN 4 /* client quotas and SCRAM: no schema */

static const struct api_row *row_named(const char *name)
{
    for (size_t i = 0; i < NROWS; i++)
        if (strcmp(rows[i].name, name) == 0)
            return &rows[i];
    return NULL;
}

UNIT_TEST(rows_name_the_api_tables)
{
    for (size_t i = 0; i < NROWS; i++) {
        const struct cn_api_info *a = cn_api_find((int16_t)rows[i].key);
        if (!a || strcmp(a->name, rows[i].name) != 0) {
            fprintf(stderr, "  key %d: want %s, tables have %s\n",
                    rows[i].key, rows[i].name, a ? a->name : "nothing");
            unit_fail(__FILE__, __LINE__, "enum names the API at its key");
        }
        CHECK(rows[i].key >= 0 && rows[i].key <= CN_API_KEY_MAX);
        for (size_t j = 0; j < i; j++)
            CHECK(rows[j].key != rows[i].key);
    }
    /* Every API in the tables has a row, so a new schema needs one. */
    CHECK_EQ(NROWS, CN_API_COUNT + HAND_WRITTEN);
    for (size_t i = 0; i < CN_API_COUNT; i++) {
        const struct api_row *r = row_named(cn_api_infos[i].name);
        CHECK(r && r->key == cn_api_infos[i].api_key);
    }
}

/* Kafka's ApiKeys numbers for the APIs whose schemas are not in
 * ../shared (their codecs are in src/proto/quotas.c and scram_msgs.c). */
UNIT_TEST(hand_written_keys_are_kafkas)
{
    CHECK_EQ(CN_API_DESCRIBE_CLIENT_QUOTAS, 48);
    CHECK_EQ(CN_API_ALTER_CLIENT_QUOTAS, 49);
    CHECK_EQ(CN_API_DESCRIBE_USER_SCRAM_CREDENTIALS, 50);
    CHECK_EQ(CN_API_ALTER_USER_SCRAM_CREDENTIALS, 51);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char chunk[4096];
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n + 1 > cap) {
            cap = (len + n + 1) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = nb;
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    if (buf)
        buf[len] = '\0';
    return buf;
}

/* The value after the first `"field": ` in a schema: an integer, or a
 * string copied to out.  False when the field is missing. */
static bool schema_field(const char *text, const char *field, long *num,
                         char *out, size_t out_len)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\"", field);
    const char *p = strstr(text, pat);
    if (!p)
        return false;
    p += strlen(pat);
    while (*p == ' ' || *p == ':')
        p++;
    if (num) {
        char *end;
        *num = strtol(p, &end, 10);
        return end != p;
    }
    if (*p++ != '"')
        return false;
    const char *q = strchr(p, '"');
    if (!q || (size_t)(q - p) >= out_len)
        return false;
    memcpy(out, p, (size_t)(q - p));
    out[q - p] = '\0';
    return true;
}

/* The controller APIs protogen takes from cluster/ (its CLUSTER_MSGS);
 * the rest of that folder are client APIs covered elsewhere. */
static const char *const cluster_apis[] = {
    "AllocateProducerIds", "AlterPartition", "BrokerHeartbeat",
    "BrokerRegistration",  "DescribeQuorum", "UnregisterBroker"};

static bool wanted_in(const char *sub, const char *api)
{
    if (strcmp(sub, "messages") == 0)
        return true;
    for (size_t i = 0; i < sizeof cluster_apis / sizeof cluster_apis[0]; i++)
        if (strcmp(cluster_apis[i], api) == 0)
            return true;
    return false;
}

/* Checks the request schemas of SCHEMA_ROOT/sub against the rows; returns
 * how many it checked, -1 when the folder is not there. */
static int check_schema_dir(const char *sub)
{
    char dir[256];
    snprintf(dir, sizeof dir, "%s/%s", SCHEMA_ROOT, sub);
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int seen = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        const char *suffix = "Request.json";
        if (n <= strlen(suffix) ||
            strcmp(de->d_name + n - strlen(suffix), suffix) != 0)
            continue;
        char path[512], name[128];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        char api[128];
        snprintf(api, sizeof api, "%.*s", (int)(n - strlen(suffix)),
                 de->d_name);
        if (!wanted_in(sub, api))
            continue;
        char *text = slurp(path);
        long key = -1;
        CHECK(text != NULL);
        if (!text)
            continue;
        CHECK(schema_field(text, "apiKey", &key, NULL, 0));
        CHECK(schema_field(text, "name", NULL, name, sizeof name));
        free(text);
        size_t nl = strlen(name);
        CHECK(nl > strlen("Request"));
        if (nl <= strlen("Request"))
            continue;
        name[nl - strlen("Request")] = '\0';
        const struct api_row *r = row_named(name);
        if (!r || r->key != key) {
            fprintf(stderr, "  %s: schema apiKey %ld, enum %d\n", name, key,
                    r ? r->key : -1);
            unit_fail(__FILE__, __LINE__, "enum agrees with the schema");
        }
        seen++;
    }
    closedir(d);
    return seen;
}

UNIT_TEST(keys_match_request_schemas)
{
    int messages = check_schema_dir("messages");
    if (messages < 0) {
        fprintf(stderr, "  %s not present; schema check skipped\n",
                SCHEMA_ROOT);
        return;
    }
    int cluster = check_schema_dir("cluster");
    CHECK_EQ(cluster, (int)(sizeof cluster_apis / sizeof cluster_apis[0]));
    /* Every generated API came from one of these files. */
    CHECK_EQ(messages + cluster, CN_API_COUNT);
}

UNIT_MAIN(rows_name_the_api_tables, hand_written_keys_are_kafkas,
          keys_match_request_schemas)
