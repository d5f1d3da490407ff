/*
 * image_int.h - the image's private layout, shared by image.c (apply and
 * look-ups) and image_snap.c (snapshots).
 *
 * Atomic entries: every change an entry makes leaves an undo record (its
 * slot reserved before the change, so recording cannot fail) that owns
 * what the change replaced (a broker, a partition, a config value, an
 * unlinked topic).  A failed record rolls the undo log back in
 * reverse order, so each undo step sees the image exactly as its change
 * left it; success frees what the undo records own.  Arrays never shrink,
 * so a rollback re-inserts without allocating and cannot fail.  The cost of
 * an entry is that of what it changes, not of the image.
 */
#ifndef CN_META_IMAGE_INT_H
#define CN_META_IMAGE_INT_H

#include <stddef.h>

#include "meta/image.h"

/* A topic and its links; pub is what look-ups hand out. */
struct itopic {
    struct cn_image_topic pub;
    struct itopic *name_next; /* chain in cn_image.by_name */
    struct itopic *id_next;   /* chain in cn_image.by_id */
    struct itopic *prev;      /* insertion order, for topic_next; kept */
    struct itopic *next;      /* while unlinked, so an undo relinks */
    int32_t parts_cap;
    size_t configs_cap;
};

/* The configs of one broker ("0", "1", ...) or of all ("" = default). */
struct bconfigs {
    char *resource;
    struct cn_image_config *configs; /* sorted by name */
    size_t nconfigs, cap;
};

struct ifeature {
    char *name;
    int16_t level; /* > 0 */
};

enum undo_kind {
    UNDO_BROKER,        /* broker `id` was `broker` (or absent) */
    UNDO_BROKER_FLAGS,  /* broker `id` had `fenced`, `ics` */
    UNDO_TOPIC_ADDED,   /* t was linked */
    UNDO_TOPIC_REMOVED, /* t was unlinked (freed at commit) */
    UNDO_PART,          /* t's partition `idx` was `part` */
    UNDO_PARTS_GROWN,   /* t had `idx` partitions */
    UNDO_CONFIG,        /* config (t or `resource`, `name`) was `value` */
    UNDO_FEATURE,       /* feature `name` was at `level` (0: absent) */
};

struct undo {
    enum undo_kind kind;
    struct itopic *t;
    int32_t id;  /* UNDO_BROKER*: the broker id */
    int32_t idx; /* UNDO_PART: partition; UNDO_PARTS_GROWN: old count */
    bool had;    /* UNDO_BROKER: `broker` holds the old registration */
    bool fenced, ics;
    int16_t level;
    struct cn_image_broker broker; /* owned */
    struct cn_image_part part;     /* owned */
    char *resource, *name, *value; /* owned; resource NULL for a topic */
};

struct cn_image {
    int64_t offset; /* of the last applied entry, -1 when none */
    char cluster_id[CN_META_CLUSTER_ID_MAX + 1];
    int64_t next_pid;

    struct cn_image_broker *brokers; /* sorted by id */
    size_t nbrokers, brokers_cap;

    struct itopic **by_name, **by_id; /* chained hash tables */
    size_t nbuckets;                  /* a power of two */
    size_t ntopics;
    struct itopic *head, *tail;

    struct ifeature *features; /* sorted by name */
    size_t nfeatures, features_cap;

    struct bconfigs *bconfigs; /* sorted by resource; never removed */
    size_t nbconfigs, bconfigs_cap;

    struct undo *undo; /* the current entry's; empty between entries */
    size_t nundo, undo_cap;
};

/* Applies recs[0..n) all or none, whatever the image's offset, which it
 * does not change.  Returns 0, CN_ECORRUPT or CN_ENOMEM. */
int cn_image_apply_recs(struct cn_image *img, const struct cn_mrec *recs,
                        size_t n);

/* The topic whose public part t is. */
static inline struct itopic *itopic_of(const struct cn_image_topic *t)
{
    return (struct itopic *)((char *)t - offsetof(struct itopic, pub));
}

#endif
