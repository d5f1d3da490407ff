/*
 * cmd_cluster.c - `cairnctl cluster describe`: the brokers and the
 * controller (DescribeCluster), then the metadata quorum (DescribeQuorum,
 * as kafka-metadata-quorum.sh describe --status --replication shows it).
 *
 * The quorum is asked of the controller itself: only the raft leader knows
 * how far every voter's log has come, a follower reports -1 for the others.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "proto/gen/api.h"
#include "proto/kerr.h"

#define METADATA_TOPIC "__cluster_metadata"

static void
text_replicas(const struct cn_describe_quorum_response_partition_data *p,
              const struct cn_describe_quorum_response_replica_state *r,
              int32_t n, const char *role, struct table *t)
{
    for (int32_t i = 0; i < n; i++) {
        if (!cli_table_row(t))
            return;
        cli_table_set(t, 0, "%d", r[i].replica_id);
        cli_table_set(t, 1, "%lld", (long long)r[i].log_end_offset);
        if (r[i].log_end_offset >= 0 && p->high_watermark >= 0)
            cli_table_set(t, 2, "%lld",
                          (long long)(p->high_watermark > r[i].log_end_offset
                                          ? p->high_watermark -
                                                r[i].log_end_offset
                                          : 0));
        else
            cli_table_set(t, 2, "-");
        cli_table_set(t, 3, "%s",
                      r[i].replica_id == p->leader_id ? "Leader" : role);
    }
}

static void
json_replicas(const struct cn_describe_quorum_response_partition_data *p,
              const struct cn_describe_quorum_response_replica_state *r,
              int32_t n)
{
    putchar('[');
    for (int32_t i = 0; i < n; i++) {
        long long lag = -1;
        if (r[i].log_end_offset >= 0 && p->high_watermark >= 0)
            lag = p->high_watermark > r[i].log_end_offset
                      ? (long long)(p->high_watermark - r[i].log_end_offset)
                      : 0;
        printf("%s{\"id\":%d,\"log_end_offset\":%lld,\"lag\":%lld}",
               i ? "," : "", r[i].replica_id, (long long)r[i].log_end_offset,
               lag);
    }
    putchar(']');
}

/* DescribeQuorum on c; *out is the partition, NULL after printing why. */
static int
describe_quorum(struct ctx *x, struct cn_kclient *c,
                struct cn_describe_quorum_response *rs,
                const struct cn_describe_quorum_response_partition_data **out)
{
    *out = NULL;
    int16_t v = cn_kclient_version(c, CN_API_DESCRIBE_QUORUM);
    if (v < 0) {
        fprintf(stderr,
                "cairnctl: broker %s:%d does not support "
                "DescribeQuorum\n",
                c->host, c->port);
        return 0;
    }
    struct cn_describe_quorum_request rq;
    struct cn_describe_quorum_request_topic_data td;
    struct cn_describe_quorum_request_partition_data pd;
    cn_describe_quorum_request_init(&rq);
    cn_describe_quorum_request_topic_data_init(&td);
    cn_describe_quorum_request_partition_data_init(&pd);
    pd.partition_index = 0;
    td.topic_name = cn_bytes_str(METADATA_TOPIC);
    td.partitions = &pd;
    td.partitions_len = 1;
    rq.topics = &td;
    rq.topics_len = 1;
    if (cli_call(c, CN_API_DESCRIBE_QUORUM, v, &rq, rs, &x->arena))
        return EXIT_FAIL;
    if (rs->error_code) {
        fprintf(stderr, "cairnctl: DescribeQuorum: %s\n",
                cn_kerr_name(rs->error_code));
        return EXIT_FAIL;
    }
    if (rs->topics_len < 1 || rs->topics[0].partitions_len < 1) {
        fprintf(stderr, "cairnctl: DescribeQuorum: empty answer\n");
        return EXIT_FAIL;
    }
    const struct cn_describe_quorum_response_partition_data *p =
        &rs->topics[0].partitions[0];
    if (p->error_code) {
        fprintf(stderr, "cairnctl: DescribeQuorum: %s\n",
                cn_kerr_name(p->error_code));
        return EXIT_FAIL;
    }
    *out = p;
    return 0;
}

int cmd_cluster_describe(struct ctx *x)
{
    int16_t v = cli_need_version(&x->boot, CN_API_DESCRIBE_CLUSTER,
                                 "DescribeCluster");
    if (v < 0)
        return EXIT_FAIL;
    struct cn_describe_cluster_request rq;
    struct cn_describe_cluster_response rs;
    cn_describe_cluster_request_init(&rq);
    rq.endpoint_type = 1;
    if (cli_call(&x->boot, CN_API_DESCRIBE_CLUSTER, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.error_code) {
        fprintf(stderr, "cairnctl: DescribeCluster: %s\n",
                cn_kerr_name(rs.error_code));
        return EXIT_FAIL;
    }
    int32_t nb = rs.brokers_len > 0 ? rs.brokers_len : 0;
    /* By id: brokers come in the image's order, which need not be. */
    for (int32_t i = 1; i < nb; i++)
        for (int32_t j = i;
             j > 0 && rs.brokers[j - 1].broker_id > rs.brokers[j].broker_id;
             j--) {
            struct cn_describe_cluster_response_describe_cluster_broker t =
                rs.brokers[j];
            rs.brokers[j] = rs.brokers[j - 1];
            rs.brokers[j - 1] = t;
        }

    /* The quorum, from the controller when it is listed. */
    struct cn_kclient *qc = &x->boot;
    for (int32_t i = 0; i < nb; i++)
        if (rs.brokers[i].broker_id == rs.controller_id) {
            struct cn_kclient *c = cli_conn_to(x, rs.brokers[i].host,
                                               rs.brokers[i].port);
            if (c)
                qc = c;
            break;
        }
    struct cn_describe_quorum_response qr;
    const struct cn_describe_quorum_response_partition_data *p = NULL;
    int qerr = describe_quorum(x, qc, &qr, &p);

    if (x->o->json) {
        printf("{\"cluster_id\":");
        cli_json_bytes(stdout, rs.cluster_id);
        printf(",\"controller_id\":%d,\"brokers\":[", rs.controller_id);
        for (int32_t i = 0; i < nb; i++) {
            printf("%s{\"id\":%d,\"host\":", i ? "," : "",
                   rs.brokers[i].broker_id);
            cli_json_bytes(stdout, rs.brokers[i].host);
            printf(",\"port\":%d,\"rack\":", rs.brokers[i].port);
            if (rs.brokers[i].rack.len >= 0)
                cli_json_bytes(stdout, rs.brokers[i].rack);
            else
                printf("null");
            putchar('}');
        }
        printf("],\"quorum\":");
        if (!p) {
            printf("null");
        } else {
            printf("{\"leader_id\":%d,\"leader_epoch\":%d,"
                   "\"high_watermark\":%lld,\"voters\":",
                   p->leader_id, p->leader_epoch,
                   (long long)p->high_watermark);
            json_replicas(p, p->current_voters,
                          p->current_voters_len > 0 ? p->current_voters_len
                                                    : 0);
            printf(",\"observers\":");
            json_replicas(p, p->observers,
                          p->observers_len > 0 ? p->observers_len : 0);
            putchar('}');
        }
        puts("}");
        return qerr;
    }

    printf("Cluster id:  ");
    cli_put_bytes(rs.cluster_id);
    printf("\nController:  ");
    if (rs.controller_id >= 0)
        printf("%d\n", rs.controller_id);
    else
        printf("none\n");
    printf("\nBrokers:\n");
    struct table t;
    if (cli_table_init(&t, &x->arena, 3, nb + 1))
        return EXIT_FAIL;
    static const char *const bh[] = {"ID", "HOST:PORT", "RACK"};
    cli_table_header(&t, bh);
    for (int32_t i = 0; i < nb; i++) {
        if (!cli_table_row(&t))
            return EXIT_FAIL;
        cli_table_set(&t, 0, "%d%s", rs.brokers[i].broker_id,
                      rs.brokers[i].broker_id == rs.controller_id
                          ? " (controller)"
                          : "");
        cli_table_set(&t, 1, "%.*s:%d", (int)rs.brokers[i].host.len,
                      (const char *)rs.brokers[i].host.ptr,
                      rs.brokers[i].port);
        if (rs.brokers[i].rack.len >= 0)
            cli_table_set_bytes(&t, 2, rs.brokers[i].rack);
        else
            cli_table_set(&t, 2, "-");
    }
    cli_table_print(&t);
    if (!p)
        return qerr;
    printf("\nQuorum (%s-0):\n", METADATA_TOPIC);
    printf("Leader:          %d\n", p->leader_id);
    printf("Leader epoch:    %d\n", p->leader_epoch);
    printf("High watermark:  %lld\n\n", (long long)p->high_watermark);
    int32_t nv = p->current_voters_len > 0 ? p->current_voters_len : 0;
    int32_t no = p->observers_len > 0 ? p->observers_len : 0;
    struct table q;
    if (cli_table_init(&q, &x->arena, 4, nv + no + 1))
        return EXIT_FAIL;
    static const char *const qh[] = {"NODE", "LOG-END-OFFSET", "LAG",
                                     "STATUS"};
    cli_table_header(&q, qh);
    text_replicas(p, p->current_voters, nv, "Follower", &q);
    text_replicas(p, p->observers, no, "Observer", &q);
    cli_table_print(&q);
    return 0;
}
