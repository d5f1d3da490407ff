/*
 * image.h - the cluster's metadata as every broker holds it.
 *
 * The image is what the metadata log says after its entries up to `offset`
 * are applied: brokers (registration, epoch, fenced), topics and their
 * partitions (replicas, ISR, leader, epochs), features, configs, the next
 * producer-id block and the cluster id.  Every broker applies the same
 * committed entries in the same order, so every image agrees at the same
 * offset.  Brokers serve Metadata, DescribeCluster and FindCoordinator from
 * it; the controller decides from it.
 *
 * Apply is total and idempotent by offset: an entry at an offset <= the
 * image's is skipped, so a replay after a restart or a snapshot restore ends
 * in the same image.  A record the image cannot take (an unknown topic id in
 * a PartitionRecord, a change to an unregistered broker) is CN_ECORRUPT and
 * leaves the image as it was before the entry: a node stops rather than
 * apply what it does not understand.
 *
 * A snapshot is the image as records: cn_image_encode writes entries that
 * rebuild it (ClusterId, FeatureLevel, RegisterBroker with its epoch and
 * fence state, Topic, Partition with its epochs, Config, ProducerIds), and
 * cn_image_decode applies them into an empty image.  Two images that encode
 * to the same bytes are the same image.
 *
 * Pure data: no clock, no I/O.  Runs on: loop.
 */
#ifndef CN_META_IMAGE_H
#define CN_META_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bytes.h"
#include "base/wr.h"
#include "meta/records.h"

struct cn_image;

struct cn_image_endpoint {
    char *name; /* listener name, "PLAINTEXT" */
    char *host;
    int32_t port;
    int16_t security_protocol; /* Kafka's SecurityProtocol id */
};

struct cn_image_broker {
    int32_t id;
    int64_t epoch;              /* the offset of its registration record */
    struct cn_uuid incarnation; /* changes at every process start */
    struct cn_image_endpoint *eps;
    size_t neps;
    char *rack; /* NULL when none */
    bool fenced;
    bool in_controlled_shutdown;
};

struct cn_image_part {
    int32_t *replicas; /* assignment order; the first is preferred */
    int32_t nreplicas;
    int32_t *isr;
    int32_t nisr;
    int32_t leader;       /* broker id, or -1 when none */
    int32_t leader_epoch; /* +1 at every leader change */
    int32_t part_epoch;   /* +1 at every change of the partition */
};

struct cn_image_config {
    char *name;
    char *value;
};

struct cn_image_topic {
    char *name;
    struct cn_uuid id;
    struct cn_image_part *parts; /* index = partition id */
    int32_t nparts;
    struct cn_image_config *configs; /* ConfigRecords of this topic */
    size_t nconfigs;
};

/* An empty image (offset -1, no cluster id); NULL when out of memory. */
struct cn_image *cn_image_new(void);
void cn_image_free(struct cn_image *img);

/*
 * Applies one decoded entry's records, all or none, as the entry committed
 * at `offset`.  Skips (returns 0) when offset <= the image's offset.
 * Returns 0, CN_ECORRUPT (the image is unchanged) or CN_ENOMEM (unchanged).
 */
int cn_image_apply(struct cn_image *img, int64_t offset,
                   const struct cn_mrec *recs, size_t n);

/* cn_meta_entry_decode then cn_image_apply. */
int cn_image_apply_entry(struct cn_image *img, int64_t offset,
                         const uint8_t *buf, size_t len);

/* The offset of the last applied entry, -1 when none. */
int64_t cn_image_offset(const struct cn_image *img);

/* The cluster id, "" until the ClusterId record is applied. */
const char *cn_image_cluster_id(const struct cn_image *img);

/* Brokers, by ascending id; i < cn_image_broker_count. */
size_t cn_image_broker_count(const struct cn_image *img);
const struct cn_image_broker *cn_image_broker_at(const struct cn_image *img,
                                                 size_t i);
/* The registered broker `id`, or NULL. */
const struct cn_image_broker *cn_image_broker_find(const struct cn_image *img,
                                                   int32_t id);

/* Topics, in no particular order but stable between applies: start with
 * prev = NULL, NULL at the end. */
const struct cn_image_topic *
cn_image_topic_next(const struct cn_image *img,
                    const struct cn_image_topic *prev);
size_t cn_image_topic_count(const struct cn_image *img);
const struct cn_image_topic *cn_image_topic_find(const struct cn_image *img,
                                                 struct cn_bytes name);
const struct cn_image_topic *cn_image_topic_find_id(const struct cn_image *img,
                                                    const struct cn_uuid *id);

/* A finalized feature level ("metadata.version", "transaction.version"),
 * 0 when the feature has no record. */
int16_t cn_image_feature(const struct cn_image *img, const char *name);

/* The first producer id of the next block the controller hands out. */
int64_t cn_image_next_producer_id(const struct cn_image *img);

/* A config of topic t (ConfigRecord, resource type 2), or NULL. */
const char *cn_image_topic_config(const struct cn_image_topic *t,
                                  const char *name);

/* A config of broker `resource` ("0", "1", ...; "" for the cluster-wide
 * default) from ConfigRecords of resource type 4, or NULL. */
const char *cn_image_broker_config(const struct cn_image *img,
                                   const char *resource, const char *name);

/*
 * Appends the snapshot of img to wr: a u32 entry count (big-endian), then
 * each entry as a u32 length and the entry (records.h).  Errors land in
 * wr->err.
 */
void cn_image_encode(const struct cn_image *img, struct cn_wr *wr);

/*
 * Rebuilds an image from cn_image_encode's bytes, as of `offset` (the
 * snapshot's last included index).  *out is set only on success.
 * Returns 0, CN_ECORRUPT or CN_ENOMEM.
 */
int cn_image_decode(const uint8_t *buf, size_t len, int64_t offset,
                    struct cn_image **out);

/*
 * A deep copy of img in *out (set only on success), for a caller that
 * wants to apply entries it has not committed yet.  O(image): it goes
 * through the snapshot.  Returns 0 or CN_ENOMEM.
 */
int cn_image_copy(const struct cn_image *img, struct cn_image **out);

#endif
