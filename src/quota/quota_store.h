/*
 * quota_store.h - the durable image of the configured client quotas
 * (<log.dirs>/client-quotas; the broker writes and reads the file).
 *
 * Layout, big-endian:
 *
 *   offset  size  field
 *   0       8     magic "CNQUOTA1"
 *   8       4     record count n
 *   12      ...   n times: int32 length, then one ClientQuotaRecord v0
 *                 (Kafka's metadata record 14, flexible: entity array of
 *                 (type, name or null for the default), key, value, remove
 *                 = false), one per entity and key
 *   end-4   4     CRC32C of everything before it
 *
 * Records are Kafka's so that the metadata quorum, once it exists, can
 * replay the file as the records it would have logged.
 */
#ifndef CN_QUOTA_QUOTA_STORE_H
#define CN_QUOTA_QUOTA_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "quota.h"

/* The image of every value in q; *out is malloc'd.  0 or CN_ENOMEM. */
int cn_quota_store_encode(const struct cn_quota *q, uint8_t **out,
                          size_t *len);
/* Adds the image's values to q.  CN_ECORRUPT for a damaged image (q may
 * then hold part of it), CN_ENOMEM. */
int cn_quota_store_decode(const uint8_t *buf, size_t len, struct cn_quota *q);

/* Entity type names on the wire and in the records. */
#define CN_QUOTA_TYPE_USER "user"
#define CN_QUOTA_TYPE_CLIENT "client-id"

#endif
