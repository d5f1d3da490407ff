/*
 * records.c - encode and decode the metadata log's entries (records.h).
 */
#include "meta/records.h"

#include <string.h>

#include "base/err.h"
#include "base/rd.h"

struct mrec_kind {
    int16_t type;
    int16_t version; /* the one Cairn writes */
    const char *name;
};

static const struct mrec_kind mrec_kinds[] = {
    {CN_MREC_REGISTER_BROKER, 3, "RegisterBrokerRecord"},
    {CN_MREC_UNREGISTER_BROKER, 0, "UnregisterBrokerRecord"},
    {CN_MREC_TOPIC, 0, "TopicRecord"},
    {CN_MREC_PARTITION, 2, "PartitionRecord"},
    {CN_MREC_CONFIG, 0, "ConfigRecord"},
    {CN_MREC_PARTITION_CHANGE, 2, "PartitionChangeRecord"},
    {CN_MREC_FENCE_BROKER, 0, "FenceBrokerRecord"},
    {CN_MREC_UNFENCE_BROKER, 0, "UnfenceBrokerRecord"},
    {CN_MREC_REMOVE_TOPIC, 0, "RemoveTopicRecord"},
    {CN_MREC_FEATURE_LEVEL, 0, "FeatureLevelRecord"},
    {CN_MREC_PRODUCER_IDS, 0, "ProducerIdsRecord"},
    {CN_MREC_BROKER_REGISTRATION_CHANGE, 2, "BrokerRegistrationChangeRecord"},
    {CN_MREC_NO_OP, 0, "NoOpRecord"},
    {CN_MREC_CLUSTER_ID, 0, "CairnClusterIdRecord"},
};

static const struct mrec_kind *mrec_kind_find(int16_t type)
{
    for (size_t i = 0; i < sizeof mrec_kinds / sizeof mrec_kinds[0]; i++)
        if (mrec_kinds[i].type == type)
            return &mrec_kinds[i];
    return NULL;
}

int16_t cn_mrec_version(int16_t type)
{
    const struct mrec_kind *k = mrec_kind_find(type);
    return k ? k->version : -1;
}

const char *cn_mrec_name(int16_t type)
{
    const struct mrec_kind *k = mrec_kind_find(type);
    return k ? k->name : "unknown";
}

/* The frame version of MetadataRecordSerde's ApiMessageAndVersion. */
#define FRAME_VERSION 1
static const uint8_t entry_magic[4] = {'C', 'N', 'M', '1'};

static void encode_body(struct cn_wr *wr, const struct cn_mrec *r)
{
    int16_t v = r->version;

    switch (r->type) {
    case CN_MREC_REGISTER_BROKER:
        cn_register_broker_record_encode(wr, v, &r->u.register_broker);
        break;
    case CN_MREC_UNREGISTER_BROKER:
        cn_unregister_broker_record_encode(wr, v, &r->u.unregister_broker);
        break;
    case CN_MREC_TOPIC: cn_topic_record_encode(wr, v, &r->u.topic); break;
    case CN_MREC_PARTITION:
        cn_partition_record_encode(wr, v, &r->u.partition);
        break;
    case CN_MREC_CONFIG: cn_config_record_encode(wr, v, &r->u.config); break;
    case CN_MREC_PARTITION_CHANGE:
        cn_partition_change_record_encode(wr, v, &r->u.partition_change);
        break;
    case CN_MREC_FENCE_BROKER:
        cn_fence_broker_record_encode(wr, v, &r->u.fence_broker);
        break;
    case CN_MREC_UNFENCE_BROKER:
        cn_unfence_broker_record_encode(wr, v, &r->u.unfence_broker);
        break;
    case CN_MREC_REMOVE_TOPIC:
        cn_remove_topic_record_encode(wr, v, &r->u.remove_topic);
        break;
    case CN_MREC_FEATURE_LEVEL:
        cn_feature_level_record_encode(wr, v, &r->u.feature_level);
        break;
    case CN_MREC_PRODUCER_IDS:
        cn_producer_ids_record_encode(wr, v, &r->u.producer_ids);
        break;
    case CN_MREC_BROKER_REGISTRATION_CHANGE:
        cn_broker_registration_change_record_encode(wr, v,
                                                    &r->u.registration_change);
        break;
    case CN_MREC_NO_OP: cn_no_op_record_encode(wr, v, &r->u.no_op); break;
    case CN_MREC_CLUSTER_ID:
        cn_wr_str(wr, true, r->u.cluster_id.id);
        cn_wr_empty_tags(wr);
        break;
    }
}

/* A type Cairn does not know, or a version newer than it writes, would
 * decode as something else on every node: refuse to write it. */
static bool mrec_known(int16_t type, int16_t version)
{
    return version >= 0 && version <= cn_mrec_version(type);
}

void cn_meta_entry_encode(struct cn_wr *wr, const struct cn_mrec *recs,
                          size_t n)
{
    size_t start = wr->len;

    if (wr->err)
        return;
    if (n == 0 || n > UINT32_MAX) {
        wr->err = CN_EINVAL;
        return;
    }
    cn_wr_raw(wr, entry_magic, sizeof entry_magic);
    cn_wr_u32(wr, (uint32_t)n);
    for (size_t i = 0; i < n && !wr->err; i++) {
        const struct cn_mrec *r = &recs[i];
        size_t len_at;

        if (!mrec_known(r->type, r->version)) {
            wr->err = CN_EINVAL;
            return;
        }
        len_at = cn_wr_reserve(wr, 4);
        cn_wr_uvarint(wr, FRAME_VERSION);
        cn_wr_uvarint(wr, (uint32_t)r->type);
        cn_wr_uvarint(wr, (uint32_t)r->version);
        encode_body(wr, r);
        if (!wr->err)
            cn_wr_patch_u32(wr, len_at, (uint32_t)(wr->len - len_at - 4));
    }
    if (!wr->err && (wr->len - start) % 8 != 0) {
        static const uint8_t zeros[8];
        cn_wr_raw(wr, zeros, 8 - (wr->len - start) % 8);
    }
}

/* Decodes the body of one record (rd spans exactly its bytes). */
static int decode_body(struct cn_rd *rd, struct cn_arena *arena,
                       struct cn_mrec *r)
{
    int16_t v = r->version;

    switch (r->type) {
    case CN_MREC_REGISTER_BROKER:
        return cn_register_broker_record_decode(rd, arena, v,
                                                &r->u.register_broker);
    case CN_MREC_UNREGISTER_BROKER:
        return cn_unregister_broker_record_decode(rd, arena, v,
                                                  &r->u.unregister_broker);
    case CN_MREC_TOPIC:
        return cn_topic_record_decode(rd, arena, v, &r->u.topic);
    case CN_MREC_PARTITION:
        return cn_partition_record_decode(rd, arena, v, &r->u.partition);
    case CN_MREC_CONFIG:
        return cn_config_record_decode(rd, arena, v, &r->u.config);
    case CN_MREC_PARTITION_CHANGE:
        return cn_partition_change_record_decode(rd, arena, v,
                                                 &r->u.partition_change);
    case CN_MREC_FENCE_BROKER:
        return cn_fence_broker_record_decode(rd, arena, v, &r->u.fence_broker);
    case CN_MREC_UNFENCE_BROKER:
        return cn_unfence_broker_record_decode(rd, arena, v,
                                               &r->u.unfence_broker);
    case CN_MREC_REMOVE_TOPIC:
        return cn_remove_topic_record_decode(rd, arena, v, &r->u.remove_topic);
    case CN_MREC_FEATURE_LEVEL:
        return cn_feature_level_record_decode(rd, arena, v,
                                              &r->u.feature_level);
    case CN_MREC_PRODUCER_IDS:
        return cn_producer_ids_record_decode(rd, arena, v, &r->u.producer_ids);
    case CN_MREC_BROKER_REGISTRATION_CHANGE:
        return cn_broker_registration_change_record_decode(
            rd, arena, v, &r->u.registration_change);
    case CN_MREC_NO_OP:
        return cn_no_op_record_decode(rd, arena, v, &r->u.no_op);
    case CN_MREC_CLUSTER_ID:
        r->u.cluster_id.id = cn_rd_str(rd, true);
        cn_rd_skip_tags(rd);
        if (!rd->err && (r->u.cluster_id.id.len <= 0 ||
                         r->u.cluster_id.id.len > CN_META_CLUSTER_ID_MAX))
            return cn_corrupt("metadata: cluster id length");
        return rd->err;
    }
    return cn_corrupt("metadata: record type");
}

/* The smallest framed record: a length and three one-byte varints. */
#define REC_MIN_BYTES 7

int cn_meta_entry_decode(const uint8_t *buf, size_t len,
                         struct cn_arena *arena, struct cn_mrec **out,
                         size_t *n)
{
    struct cn_rd rd;
    struct cn_mrec *recs;
    uint32_t count;
    int err;

    if (len < 8 || len % 8 != 0 || memcmp(buf, entry_magic, 4) != 0)
        return cn_corrupt("metadata entry: header");
    cn_rd_init(&rd, buf + 4, len - 4);
    count = cn_rd_u32(&rd);
    if (count == 0 || count > cn_rd_left(&rd) / REC_MIN_BYTES)
        return cn_corrupt("metadata entry: record count");
    recs = cn_arena_calloc(arena, count, sizeof *recs);
    if (!recs)
        return CN_ENOMEM;
    for (uint32_t i = 0; i < count; i++) {
        struct cn_mrec *r = &recs[i];
        uint32_t rlen = cn_rd_u32(&rd), frame, type, version;
        struct cn_rd sub;

        if (rd.err || rlen > cn_rd_left(&rd))
            return cn_corrupt("metadata entry: record length");
        cn_rd_init(&sub, rd.pos, rlen);
        cn_rd_skip(&rd, rlen);
        frame = cn_rd_uvarint(&sub);
        type = cn_rd_uvarint(&sub);
        version = cn_rd_uvarint(&sub);
        if (sub.err || frame != FRAME_VERSION || type > INT16_MAX ||
            version > INT16_MAX ||
            !mrec_known((int16_t)type, (int16_t)version))
            return cn_corrupt("metadata entry: record type or version");
        r->type = (int16_t)type;
        r->version = (int16_t)version;
        err = decode_body(&sub, arena, r);
        if (err == CN_ENOMEM)
            return err;
        if (err || sub.err || cn_rd_left(&sub) != 0)
            return cn_corrupt("metadata entry: record body");
    }
    /* What is left is libraft's padding, so fewer than 8 zero bytes. */
    if (cn_rd_left(&rd) >= 8)
        return cn_corrupt("metadata entry: trailing bytes");
    while (cn_rd_left(&rd) > 0)
        if (cn_rd_i8(&rd) != 0)
            return cn_corrupt("metadata entry: padding");
    *out = recs;
    *n = count;
    return 0;
}
