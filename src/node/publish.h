/*
 * publish.h - the metadata image made local, in cluster mode: this
 * broker's topics, partitions, leadership and coordinators follow what
 * the image (meta/image.h) says.
 *
 * The quorum's applied hook runs inside raft's apply and must not do the
 * work there (creating a log writes and fsyncs; a coordinator's replay
 * reads a whole partition): it only schedules a publish, which runs once
 * on the loop after the entries applied so far, however many there were.
 * A publish whose image offset did not move since the last one does
 * nothing (unless the last one left work for later).  Each publish:
 *
 *  - gives every image topic a local cn_topic with all its partitions,
 *    made with the image's topic id and its ConfigRecords.  #13
 *    simplification: every broker holds a (possibly empty) local log of
 *    every partition and only the leader takes data; #14 narrows this to
 *    the partition's replicas;
 *  - adds the partitions the image grew;
 *  - deletes the local topic of a name the image dropped (it was in the
 *    last published view) or now gives another id.  A recreated name
 *    waits for the reap of the old logs (their directories are the new
 *    ones'): a reap waiter publishes again once they are gone;
 *  - once, after this broker's registration was unfenced in the image
 *    (the controller saw it caught up), deletes the local topics no image
 *    has (left from before): never on an empty image, never during the
 *    replay at start, when the image is not yet the cluster's;
 *  - sets each partition's leader and leader epoch from the image
 *    (cn_partition_led);
 *  - makes this broker the transaction coordinator of the
 *    __transaction_state partitions it leads, at their leader epoch, and
 *    not of the others.  The group coordinator asks cn_partition_led per
 *    request instead.
 *
 * Internal topics (names starting "__") are never deleted here: the
 * coordinators' stores hold them from start-up.  A local one the image
 * gives another id is kept with a warning (it comes from before cluster
 * mode).
 *
 * Runs on: loop.
 */
#ifndef CN_NODE_PUBLISH_H
#define CN_NODE_PUBLISH_H

#include <stdint.h>

struct cn_broker;

/* The quorum applied an entry at offset: schedules a publish (made at
 * the first call).  Cheap, and safe inside raft's apply. */
void cn_publish_applied(struct cn_broker *b, int64_t offset);

/* At broker stop, before the topics close: no publish runs after this;
 * what it holds is freed once its timer has closed. */
void cn_publish_stop(struct cn_broker *b);

#endif
