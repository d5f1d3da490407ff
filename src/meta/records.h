/*
 * records.h - the metadata log's entries: KRaft's records, framed.
 *
 * One raft entry carries one or more metadata records that must apply
 * together (a topic and its partitions; a fence and the partition changes it
 * causes).  A record is framed as Kafka frames ApiMessageAndVersion in the
 * metadata log (MetadataRecordSerde): frame version, record type and record
 * version as unsigned varints, then the record's own encoding
 * (../shared/kafka-protocol/metadata/, codecs in src/proto/gen).
 *
 * An entry, as stored in the raft log and in snapshots:
 *
 *   offset  size  field
 *   0       4     magic "CNM1"
 *   4       4     record count n (big-endian u32, >= 1)
 *   8       ...   n times: u32 length L (big-endian), then L bytes:
 *                   uvarint frame version (1), uvarint type, uvarint version,
 *                   the record
 *   ...     0-7   zero padding to a multiple of 8 bytes (libraft asks for it)
 *
 * CN_MREC_CLUSTER_ID has no Kafka schema (Kafka writes the cluster id into
 * meta.properties when formatting); its record is the id as a compact
 * string then empty tagged fields.
 */
#ifndef CN_META_RECORDS_H
#define CN_META_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/wr.h"
#include "proto/gen/msgs.h"

/* Record types: Kafka's metadata apiKeys, and one of Cairn's own. */
enum cn_mrec_type {
    CN_MREC_REGISTER_BROKER = 0,
    CN_MREC_UNREGISTER_BROKER = 1,
    CN_MREC_TOPIC = 2,
    CN_MREC_PARTITION = 3,
    CN_MREC_CONFIG = 4,
    CN_MREC_PARTITION_CHANGE = 5,
    CN_MREC_FENCE_BROKER = 7,
    CN_MREC_UNFENCE_BROKER = 8,
    CN_MREC_REMOVE_TOPIC = 9,
    CN_MREC_FEATURE_LEVEL = 12,
    CN_MREC_PRODUCER_IDS = 15,
    CN_MREC_BROKER_REGISTRATION_CHANGE = 17,
    CN_MREC_NO_OP = 20,
    CN_MREC_CLUSTER_ID = 10000, /* Cairn's: the cluster's id, written first */
};

/* The longest cluster id accepted (Kafka's are 22 base64 characters). */
#define CN_META_CLUSTER_ID_MAX 64

/* One decoded record.  Its strings and arrays point into the entry's buffer
 * and the arena given to decode. */
struct cn_mrec {
    int16_t type;    /* enum cn_mrec_type */
    int16_t version; /* the record's schema version */
    union {
        struct cn_register_broker_record register_broker;
        struct cn_unregister_broker_record unregister_broker;
        struct cn_topic_record topic;
        struct cn_partition_record partition;
        struct cn_config_record config;
        struct cn_partition_change_record partition_change;
        struct cn_fence_broker_record fence_broker;
        struct cn_unfence_broker_record unfence_broker;
        struct cn_remove_topic_record remove_topic;
        struct cn_feature_level_record feature_level;
        struct cn_producer_ids_record producer_ids;
        struct cn_broker_registration_change_record registration_change;
        struct cn_no_op_record no_op;
        struct {
            struct cn_bytes id; /* 1..CN_META_CLUSTER_ID_MAX bytes */
        } cluster_id;
    } u;
};

/* The version Cairn writes of each type (the newest it understands). */
int16_t cn_mrec_version(int16_t type);

/* "TopicRecord", ...; "unknown" for a type not listed above. */
const char *cn_mrec_name(int16_t type);

/*
 * Appends one entry holding recs[0..n) to wr, padded to 8 bytes; n >= 1.
 * Each record is written at its own `version`.  Errors land in wr->err.
 */
void cn_meta_entry_encode(struct cn_wr *wr, const struct cn_mrec *recs,
                          size_t n);

/*
 * Decodes one whole entry of `len` bytes.  On success *out is an array of
 * *n records in `arena`, pointing into buf.  An unknown type or version, a
 * bad frame, trailing bytes inside a record or non-zero padding is
 * CN_ECORRUPT: a node must never apply a log it does not understand.
 * Returns 0 or a negative CN_E*.
 */
int cn_meta_entry_decode(const uint8_t *buf, size_t len,
                         struct cn_arena *arena, struct cn_mrec **out,
                         size_t *n);

#endif
