/*
 * h_offsets.c - ListOffsets, DeleteRecords and OffsetForLeaderEpoch.
 *
 * Every partition has had one leader, this broker, at leader epoch 0, so
 * epoch questions have simple answers: epoch 0 ends at the log end offset.
 * In cluster mode only the partition's leader answers, and its current
 * epoch (the image's) is the only one it knows.
 */
#include <string.h>

#include "node/authz.h"
#include "base/err.h"
#include "handlers/handlers.h"
#include "proto/batch.h"
#include "proto/gen/msgs.h"
#include "partition/epochs.h"
#include "proto/kerr.h"

#define LIST_OFFSETS_LATEST (-1)
#define LIST_OFFSETS_EARLIEST (-2)
#define LIST_OFFSETS_MAX_TIMESTAMP (-3)
#define LIST_OFFSETS_EARLIEST_LOCAL (-4)
#define LIST_OFFSETS_LATEST_TIERED (-5)

static struct cn_partition *lookup(struct cn_broker *b, struct cn_bytes topic,
                                   int32_t part, int16_t *kerr)
{
    struct cn_partition *p = cn_partition_find(b, topic, part);
    if (!p) {
        *kerr = cn_partition_missing(b, topic, part);
        return NULL;
    }
    if (!cn_partition_led(b, p)) {
        *kerr = KAFKA_NOT_LEADER_OR_FOLLOWER;
        return NULL;
    }
    if (cn_partition_offline(b, p)) {
        *kerr = KAFKA_KAFKA_STORAGE_ERROR;
        return NULL;
    }
    *kerr = KAFKA_NONE;
    return p;
}

/* A client's current_leader_epoch (-1: not checked) against p's. */
static int16_t epoch_check(const struct cn_partition *p, int32_t current)
{
    if (current < 0 || current == p->leader_epoch)
        return KAFKA_NONE;
    return current > p->leader_epoch ? KAFKA_UNKNOWN_LEADER_EPOCH
                                     : KAFKA_FENCED_LEADER_EPOCH;
}

/*
 * The log indexes batches; Kafka answers with a record.  Reads the batch
 * holding `batch_offset` and finds the first record whose timestamp is at
 * least ts (want_max: equal to ts).  Leaves *offset_out alone when the
 * batch cannot be read.
 */
static void exact_record(struct cn_partition *p, int64_t batch_offset,
                         int64_t ts, bool want_max, int64_t *offset_out,
                         int64_t *ts_out)
{
    struct cn_wr buf, scratch;
    cn_wr_init(&buf, 0);
    cn_wr_init(&scratch, 0);
    size_t got = 0;
    if (cn_log_read(p->log, batch_offset, p->high_watermark, 1, true, &buf,
                    &got) != 0 ||
        got == 0)
        goto out;
    struct cn_batch_hdr hdr;
    struct cn_record_iter it;
    if (cn_batch_records(buf.buf, got, 0, &scratch, &hdr, &it) != 0)
        goto out;
    struct cn_record rec;
    while (cn_record_iter_next(&it, &rec) == 1) {
        if (rec.offset < batch_offset && !want_max)
            continue;
        if (want_max ? rec.timestamp == ts : rec.timestamp >= ts) {
            *offset_out = rec.offset;
            *ts_out = rec.timestamp;
            break;
        }
    }
out:
    cn_wr_fini(&buf);
    cn_wr_fini(&scratch);
}

static void
list_one(struct cn_broker *b, struct cn_req *req, int16_t v, int8_t isolation,
         struct cn_bytes topic,
         const struct cn_list_offsets_request_list_offsets_partition *qp,
         struct cn_list_offsets_response_list_offsets_partition_response *rp)
{
    int16_t kerr;
    rp->partition_index = qp->partition_index;
    rp->timestamp = -1;
    rp->offset = -1;
    rp->leader_epoch = -1;
    struct cn_partition *p = lookup(b, topic, qp->partition_index, &kerr);
    if (!p) {
        rp->error_code = kerr;
        rp->old_style_offsets_len = 0;
        return;
    }
    int16_t eerr = epoch_check(p, qp->current_leader_epoch);
    if (eerr) {
        rp->error_code = eerr;
        return;
    }
    /* A read_committed consumer cannot see past the last stable offset,
     * so nothing it is told to seek to lies beyond it. */
    int64_t fetchable = isolation == 1 ? cn_partition_lso(p)
                                       : p->high_watermark;
    int64_t offset = -1, ts = -1;
    switch (qp->timestamp) {
    case LIST_OFFSETS_LATEST: offset = fetchable; break;
    case LIST_OFFSETS_EARLIEST:
    case LIST_OFFSETS_EARLIEST_LOCAL:
        offset = cn_log_start_offset(p->log);
        break;
    case LIST_OFFSETS_LATEST_TIERED:
        /* No tiered storage: nothing is tiered. */
        offset = -1;
        break;
    case LIST_OFFSETS_MAX_TIMESTAMP:
        cn_log_max_timestamp(p->log, &ts, &offset);
        if (offset >= fetchable || offset < 0) {
            offset = -1;
            ts = -1;
        } else {
            exact_record(p, offset, ts, true, &offset, &ts);
        }
        break;
    default:
        if (qp->timestamp < 0) {
            rp->error_code = KAFKA_INVALID_REQUEST;
            return;
        }
        if (cn_log_offset_for_time(p->log, qp->timestamp, &offset, &ts) != 0 ||
            offset < 0 || offset >= fetchable) {
            offset = -1;
            ts = -1;
        } else {
            exact_record(p, offset, qp->timestamp, false, &offset, &ts);
        }
        break;
    }
    rp->offset = offset;
    rp->timestamp = ts;
    rp->leader_epoch = offset >= 0 ? p->leader_epoch : -1;
    if (v == 0) {
        /* v0 answers a list of offsets (max_num_offsets); one is enough
         * to say where the log starts or ends. */
        int64_t *arr = cn_arena_alloc(&req->arena, sizeof *arr);
        if (arr && offset >= 0 && qp->max_num_offsets > 0) {
            arr[0] = offset;
            rp->old_style_offsets = arr;
            rp->old_style_offsets_len = 1;
        } else {
            rp->old_style_offsets_len = 0;
        }
    }
}

void cn_h_list_offsets(struct cn_broker *b, struct cn_req *req,
                       const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_list_offsets_request rq;
    int err = cn_list_offsets_request_decode(body, &req->arena, h->api_version,
                                             &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_list_offsets_response rs;
    cn_list_offsets_response_init(&rs);
    int32_t nt = rq.topics_len > 0 ? rq.topics_len : 0;
    rs.topics = cn_arena_calloc(&req->arena, (size_t)nt + 1,
                                sizeof *rs.topics);
    if (!rs.topics)
        goto nomem;
    rs.topics_len = nt;
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_list_offsets_request_list_offsets_topic *qt =
            &rq.topics[i];
        struct cn_list_offsets_response_list_offsets_topic_response *rt =
            &rs.topics[i];
        cn_list_offsets_response_list_offsets_topic_response_init(rt);
        rt->name = qt->name;
        int32_t np = qt->partitions_len > 0 ? qt->partitions_len : 0;
        rt->partitions = cn_arena_calloc(&req->arena, (size_t)np + 1,
                                         sizeof *rt->partitions);
        if (!rt->partitions)
            goto nomem;
        rt->partitions_len = np;
        bool denied = !cn_authz(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_TOPIC,
                                qt->name);
        for (int32_t j = 0; j < np; j++) {
            cn_list_offsets_response_list_offsets_partition_response_init(
                &rt->partitions[j]);
            if (denied) {
                rt->partitions[j].partition_index =
                    qt->partitions[j].partition_index;
                rt->partitions[j].error_code =
                    KAFKA_TOPIC_AUTHORIZATION_FAILED;
                rt->partitions[j].timestamp = -1;
                rt->partitions[j].offset = -1;
                continue;
            }
            list_one(b, req, h->api_version, rq.isolation_level, qt->name,
                     &qt->partitions[j], &rt->partitions[j]);
        }
    }
    cn_resp_begin(req, h);
    cn_list_offsets_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}

void cn_h_delete_records(struct cn_broker *b, struct cn_req *req,
                         const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_delete_records_request rq;
    int err = cn_delete_records_request_decode(body, &req->arena,
                                               h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_delete_records_response resp, *rs = &resp;
    cn_delete_records_response_init(rs);
    int32_t nt = rq.topics_len > 0 ? rq.topics_len : 0;
    rs->topics = cn_arena_calloc(&req->arena, (size_t)nt + 1,
                                 sizeof *rs->topics);
    if (!rs->topics)
        goto nomem;
    rs->topics_len = nt;
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_delete_records_request_delete_records_topic *qt =
            &rq.topics[i];
        struct cn_delete_records_response_delete_records_topic_result *rt =
            &rs->topics[i];
        cn_delete_records_response_delete_records_topic_result_init(rt);
        rt->name = qt->name;
        int32_t np = qt->partitions_len > 0 ? qt->partitions_len : 0;
        rt->partitions = cn_arena_calloc(&req->arena, (size_t)np + 1,
                                         sizeof *rt->partitions);
        if (!rt->partitions)
            goto nomem;
        rt->partitions_len = np;
        bool denied = !cn_authz(b, req, CN_ACL_OP_DELETE, CN_ACL_RT_TOPIC,
                                qt->name);
        for (int32_t j = 0; j < np; j++) {
            const struct cn_delete_records_request_delete_records_partition
                *qp = &qt->partitions[j];
            struct cn_delete_records_response_delete_records_partition_result
                *rp = &rt->partitions[j];
            cn_delete_records_response_delete_records_partition_result_init(
                rp);
            rp->partition_index = qp->partition_index;
            rp->low_watermark = -1;
            int16_t kerr;
            struct cn_partition *p = denied
                                         ? NULL
                                         : lookup(b, qt->name,
                                                  qp->partition_index, &kerr);
            if (denied)
                kerr = KAFKA_TOPIC_AUTHORIZATION_FAILED;
            if (!p) {
                rp->error_code = kerr;
                continue;
            }
            /* -1 means "up to the high watermark" (Kafka's
             * DeleteRecordsRequest.HIGH_WATERMARK). */
            int64_t off = qp->offset == -1 ? p->high_watermark : qp->offset;
            if (off < 0 || off > p->high_watermark) {
                rp->error_code = KAFKA_OFFSET_OUT_OF_RANGE;
                continue;
            }
            int rc = cn_log_delete_records(p->log, off);
            if (rc) {
                rp->error_code = rc == CN_ERANGE ? KAFKA_OFFSET_OUT_OF_RANGE
                                                 : KAFKA_KAFKA_STORAGE_ERROR;
                continue;
            }
            rp->low_watermark = cn_log_start_offset(p->log);
            cn_partition_after_retention(p);
        }
    }
    /* The log start offset is durable (checkpointed) already: answer now. */
    cn_resp_begin(req, h);
    cn_delete_records_response_encode(&req->resp, h->api_version, rs);
    cn_req_done(req);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}

void cn_h_offset_for_leader_epoch(struct cn_broker *b, struct cn_req *req,
                                  const struct cn_req_header *h,
                                  struct cn_rd *body)
{
    struct cn_offset_for_leader_epoch_request rq;
    int err = cn_offset_for_leader_epoch_request_decode(body, &req->arena,
                                                        h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_offset_for_leader_epoch_response rs;
    cn_offset_for_leader_epoch_response_init(&rs);
    int32_t nt = rq.topics_len > 0 ? rq.topics_len : 0;
    rs.topics = cn_arena_calloc(&req->arena, (size_t)nt + 1,
                                sizeof *rs.topics);
    if (!rs.topics)
        goto nomem;
    rs.topics_len = nt;
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_offset_for_leader_epoch_request_offset_for_leader_topic
            *qt = &rq.topics[i];
        struct
            cn_offset_for_leader_epoch_response_offset_for_leader_topic_result
                *rt = &rs.topics[i];
        cn_offset_for_leader_epoch_response_offset_for_leader_topic_result_init(
            rt);
        rt->topic = qt->topic;
        int32_t np = qt->partitions_len > 0 ? qt->partitions_len : 0;
        rt->partitions = cn_arena_calloc(&req->arena, (size_t)np + 1,
                                         sizeof *rt->partitions);
        if (!rt->partitions)
            goto nomem;
        rt->partitions_len = np;
        bool denied = !cn_authz(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_TOPIC,
                                qt->topic);
        for (int32_t j = 0; j < np; j++) {
            const struct
                cn_offset_for_leader_epoch_request_offset_for_leader_partition
                    *qp = &qt->partitions[j];
            struct cn_offset_for_leader_epoch_response_epoch_end_offset *rp =
                &rt->partitions[j];
            cn_offset_for_leader_epoch_response_epoch_end_offset_init(rp);
            rp->partition = qp->partition;
            rp->leader_epoch = -1;
            rp->end_offset = -1;
            int16_t kerr;
            struct cn_partition *p = denied ? NULL
                                            : lookup(b, qt->topic,
                                                     qp->partition, &kerr);
            if (denied)
                kerr = KAFKA_TOPIC_AUTHORIZATION_FAILED;
            if (!p) {
                rp->error_code = kerr;
                continue;
            }
            int16_t eerr = epoch_check(p, qp->current_leader_epoch);
            if (eerr) {
                rp->error_code = eerr;
                continue;
            }
            if (qp->leader_epoch > p->leader_epoch) {
                /* An epoch after ours: undefined, as Kafka answers. */
                continue;
            }
            /* KIP-101/279 from the leader-epoch cache: the largest epoch
             * at or below the one asked and where it ends.  An empty log
             * has no entries yet; its current epoch ends at its end, as
             * Kafka's (which records the epoch when leadership starts)
             * answers. */
            int64_t leo = cn_log_end_offset(p->log);
            if (!p->epochs || cn_epochs_count(p->epochs) == 0) {
                rp->leader_epoch = p->leader_epoch < 0 ? 0 : p->leader_epoch;
                rp->end_offset = leo;
                continue;
            }
            cn_epochs_end_offset_for(p->epochs, qp->leader_epoch, leo,
                                     &rp->leader_epoch, &rp->end_offset);
        }
    }
    cn_resp_begin(req, h);
    cn_offset_for_leader_epoch_response_encode(&req->resp, h->api_version,
                                               &rs);
    cn_req_done(req);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}
