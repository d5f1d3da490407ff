/*
 * image_snap.c - the image as a snapshot, and back (image.h).
 *
 * A snapshot is a list of ordinary entries (records.h) that rebuild the
 * image when applied in order to an empty one:
 *
 *   offset  size  field
 *   0       4     entry count n (big-endian u32)
 *   4       ...   n times: u32 length L (big-endian), then an entry of
 *                 L bytes
 *
 * The records, in this order: ClusterId, FeatureLevel by name,
 * RegisterBroker by id (with epoch and fence state), ProducerIds, broker
 * Configs by (broker, name), then each topic by name: Topic, Partition by
 * id (with the image's leader and partition epochs), Config by name.  The
 * stream is cut into entries of at most SNAP_ENTRY_RECS records, so a big
 * topic does not make one huge entry; since apply is sequential the cuts
 * change nothing.  Every order is by key, so the same image always gives
 * the same bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/rd.h"
#include "meta/image_int.h"

#define SNAP_ENTRY_RECS 256

struct snap {
    struct cn_wr *wr;
    struct cn_mrec *recs; /* SNAP_ENTRY_RECS of them */
    size_t n;
    uint32_t entries;
    struct cn_arena arena; /* the current entry's arrays */
};

static void snap_flush(struct snap *s)
{
    size_t at, start;

    if (s->n == 0)
        return;
    at = cn_wr_reserve(s->wr, 4);
    start = s->wr->len;
    cn_meta_entry_encode(s->wr, s->recs, s->n);
    cn_wr_patch_u32(s->wr, at, (uint32_t)(s->wr->len - start));
    s->entries++;
    s->n = 0;
    cn_arena_fini(&s->arena);
    cn_arena_init(&s->arena);
}

/* The next record slot, of `type` at the version Cairn writes; the caller
 * runs the record's _init and fills it. */
static struct cn_mrec *snap_rec(struct snap *s, int16_t type)
{
    struct cn_mrec *r;

    if (s->n == SNAP_ENTRY_RECS)
        snap_flush(s);
    r = &s->recs[s->n++];
    memset(r, 0, sizeof *r);
    r->type = type;
    r->version = cn_mrec_version(type);
    return r;
}

static void snap_broker(struct snap *s, const struct cn_image_broker *b)
{
    struct cn_register_broker_record *rb =
        &snap_rec(s, CN_MREC_REGISTER_BROKER)->u.register_broker;

    cn_register_broker_record_init(rb);
    rb->broker_id = b->id;
    rb->incarnation_id = b->incarnation;
    rb->broker_epoch = b->epoch;
    rb->end_points_len = (int32_t)b->neps;
    if (b->neps) {
        rb->end_points = cn_arena_calloc(&s->arena, b->neps,
                                         sizeof *rb->end_points);
        if (!rb->end_points) {
            s->wr->err = CN_ENOMEM;
            rb->end_points_len = 0;
        }
    }
    for (int32_t i = 0; i < rb->end_points_len; i++) {
        struct cn_register_broker_record_broker_endpoint *e =
            &rb->end_points[i];
        cn_register_broker_record_broker_endpoint_init(e);
        e->name = cn_bytes_str(b->eps[i].name);
        e->host = cn_bytes_str(b->eps[i].host);
        e->port = (uint16_t)b->eps[i].port;
        e->security_protocol = b->eps[i].security_protocol;
    }
    rb->features_len = 0;
    rb->rack = cn_bytes_str(b->rack);
    rb->fenced = b->fenced;
    rb->in_controlled_shutdown = b->in_controlled_shutdown;
    rb->log_dirs_len = 0;
}

static void snap_config(struct snap *s, int8_t type, const char *resource,
                        const struct cn_image_config *c)
{
    struct cn_config_record *rc = &snap_rec(s, CN_MREC_CONFIG)->u.config;

    cn_config_record_init(rc);
    rc->resource_type = type;
    rc->resource_name = cn_bytes_str(resource);
    rc->name = cn_bytes_str(c->name);
    rc->value = cn_bytes_str(c->value);
}

static void snap_topic(struct snap *s, const struct cn_image_topic *t)
{
    struct cn_topic_record *rt = &snap_rec(s, CN_MREC_TOPIC)->u.topic;

    cn_topic_record_init(rt);
    rt->name = cn_bytes_str(t->name);
    rt->topic_id = t->id;
    for (int32_t i = 0; i < t->nparts; i++) {
        const struct cn_image_part *p = &t->parts[i];
        struct cn_partition_record *rp =
            &snap_rec(s, CN_MREC_PARTITION)->u.partition;

        cn_partition_record_init(rp);
        rp->partition_id = i;
        rp->topic_id = t->id;
        rp->replicas = p->replicas;
        rp->replicas_len = p->nreplicas;
        rp->isr = p->isr;
        rp->isr_len = p->nisr;
        rp->removing_replicas_len = 0;
        rp->adding_replicas_len = 0;
        rp->leader = p->leader;
        rp->leader_epoch = p->leader_epoch;
        rp->partition_epoch = p->part_epoch;
        rp->directories_len = 0;
    }
    for (size_t i = 0; i < t->nconfigs; i++)
        snap_config(s, 2, t->name, &t->configs[i]);
}

static int topic_cmp(const void *a, const void *b)
{
    const struct cn_image_topic *x = *(const struct cn_image_topic *const *)a;
    const struct cn_image_topic *y = *(const struct cn_image_topic *const *)b;
    return strcmp(x->name, y->name);
}

void cn_image_encode(const struct cn_image *img, struct cn_wr *wr)
{
    const struct cn_image_topic **topics = NULL;
    struct snap s = {.wr = wr};
    size_t count_at, nt = 0;

    if (wr->err)
        return;
    count_at = cn_wr_reserve(wr, 4);
    s.recs = malloc(SNAP_ENTRY_RECS * sizeof *s.recs);
    if (img->ntopics)
        topics = malloc(img->ntopics * sizeof *topics);
    if (!s.recs || (img->ntopics && !topics)) {
        free(s.recs);
        free(topics);
        wr->err = CN_ENOMEM;
        return;
    }
    cn_arena_init(&s.arena);

    if (img->cluster_id[0])
        snap_rec(&s, CN_MREC_CLUSTER_ID)->u.cluster_id.id = cn_bytes_str(
            img->cluster_id);
    for (size_t i = 0; i < img->nfeatures; i++) {
        struct cn_feature_level_record *rf =
            &snap_rec(&s, CN_MREC_FEATURE_LEVEL)->u.feature_level;
        cn_feature_level_record_init(rf);
        rf->name = cn_bytes_str(img->features[i].name);
        rf->feature_level = img->features[i].level;
    }
    for (size_t i = 0; i < img->nbrokers; i++)
        snap_broker(&s, &img->brokers[i]);
    if (img->next_pid > 0) {
        struct cn_producer_ids_record *rp =
            &snap_rec(&s, CN_MREC_PRODUCER_IDS)->u.producer_ids;
        cn_producer_ids_record_init(rp);
        rp->broker_id = -1;
        rp->broker_epoch = -1;
        rp->next_producer_id = img->next_pid;
    }
    for (size_t i = 0; i < img->nbconfigs; i++)
        for (size_t j = 0; j < img->bconfigs[i].nconfigs; j++)
            snap_config(&s, 4, img->bconfigs[i].resource,
                        &img->bconfigs[i].configs[j]);

    for (const struct itopic *t = img->head; t; t = t->next)
        topics[nt++] = &t->pub;
    if (nt)
        qsort(topics, nt, sizeof *topics, topic_cmp);
    for (size_t i = 0; i < nt; i++)
        snap_topic(&s, topics[i]);
    snap_flush(&s);

    cn_wr_patch_u32(wr, count_at, s.entries);
    cn_arena_fini(&s.arena);
    free(s.recs);
    free(topics);
}

int cn_image_decode(const uint8_t *buf, size_t len, int64_t offset,
                    struct cn_image **out)
{
    struct cn_image *img = cn_image_new();
    struct cn_rd rd;
    uint32_t count;
    int err = 0;

    if (!img)
        return CN_ENOMEM;
    cn_rd_init(&rd, buf, len);
    count = cn_rd_u32(&rd);
    if (rd.err)
        err = cn_corrupt("metadata snapshot: header");
    /* Each entry is at least 8 bytes, so a lying count ends at the first
     * entry that is not there. */
    for (uint32_t i = 0; i < count && !err; i++) {
        uint32_t elen = cn_rd_u32(&rd);
        struct cn_arena arena;
        struct cn_mrec *recs;
        const uint8_t *entry = rd.pos;
        size_t n;

        if (rd.err || elen > cn_rd_left(&rd)) {
            err = cn_corrupt("metadata snapshot: entry length");
            break;
        }
        cn_rd_skip(&rd, elen);
        cn_arena_init(&arena);
        err = cn_meta_entry_decode(entry, elen, &arena, &recs, &n);
        if (!err)
            err = cn_image_apply_recs(img, recs, n);
        cn_arena_fini(&arena);
    }
    if (!err && cn_rd_left(&rd) != 0)
        err = cn_corrupt("metadata snapshot: trailing bytes");
    if (err) {
        cn_image_free(img);
        return err;
    }
    img->offset = offset;
    *out = img;
    return 0;
}

int cn_image_copy(const struct cn_image *img, struct cn_image **out)
{
    struct cn_wr wr;
    int err;

    cn_wr_init(&wr, 4096);
    cn_image_encode(img, &wr);
    err = wr.err;
    /* The image's own snapshot always decodes; only memory can fail. */
    if (!err)
        err = cn_image_decode(wr.buf, wr.len, img->offset, out);
    cn_wr_fini(&wr);
    return err;
}
