/*
 * fuzz_meta_entry.c - libFuzzer target for metadata log entries and image
 * snapshots (meta/records.h, meta/image.h).
 *
 * The input is tried twice.  As one entry, applied at offset 10 to a small
 * image (brokers 1-3 at epoch 2, topic "a" of id 5a00..0001 with three
 * partitions and a config, topic "b" of id 5a00..0002): it applies, or it
 * fails and the image's snapshot is what it was.  As a snapshot, decoded
 * into an image.  Whatever image comes out must snapshot, decode and
 * snapshot again to the same bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/wr.h"
#include "meta/image.h"
#include "meta/records.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_at(int cond, int line)
{
    if (!cond) {
        fprintf(stderr, "fuzz_meta_entry.c:%d: check failed\n", line);
        abort();
    }
}
#define check(cond) check_at((cond), __LINE__)

static struct cn_uuid uid(uint8_t x)
{
    struct cn_uuid u = {{0}};
    u.b[0] = 0x5a;
    u.b[15] = x;
    return u;
}

static struct cn_image *base_image(void)
{
    static int32_t reps[] = {1, 2, 3};
    struct cn_image *img = cn_image_new();
    struct cn_mrec r[10];

    check(img != NULL);
    memset(r, 0, sizeof r);
    r[0].type = CN_MREC_CLUSTER_ID;
    r[0].u.cluster_id.id = cn_bytes_str("MkU3OEVBNTcwNTJENDM2Qk");
    for (int i = 0; i < 3; i++) {
        struct cn_register_broker_record *b = &r[1 + i].u.register_broker;
        r[1 + i].type = CN_MREC_REGISTER_BROKER;
        cn_register_broker_record_init(b);
        b->broker_id = 1 + i;
        b->broker_epoch = 2;
        b->fenced = i == 2;
    }
    r[4].type = CN_MREC_TOPIC;
    r[4].u.topic.name = cn_bytes_str("a");
    r[4].u.topic.topic_id = uid(1);
    r[5].type = CN_MREC_TOPIC;
    r[5].u.topic.name = cn_bytes_str("b");
    r[5].u.topic.topic_id = uid(2);
    for (int i = 0; i < 3; i++) {
        struct cn_partition_record *p = &r[6 + i].u.partition;
        r[6 + i].type = CN_MREC_PARTITION;
        cn_partition_record_init(p);
        p->topic_id = uid(1);
        p->partition_id = i;
        p->replicas = reps;
        p->replicas_len = 3;
        p->isr = reps;
        p->isr_len = 3;
        p->leader = 1;
        p->leader_epoch = 0;
        p->partition_epoch = 0;
    }
    r[9].type = CN_MREC_CONFIG;
    cn_config_record_init(&r[9].u.config);
    r[9].u.config.resource_type = 2;
    r[9].u.config.resource_name = cn_bytes_str("a");
    r[9].u.config.name = cn_bytes_str("retention.ms");
    r[9].u.config.value = cn_bytes_str("1000");
    check(cn_image_apply(img, 1, r, 10) == 0);
    return img;
}

/* The snapshot of img; the caller frees it. */
static uint8_t *snap(const struct cn_image *img, size_t *len)
{
    struct cn_wr wr;

    cn_wr_init(&wr, 256);
    cn_image_encode(img, &wr);
    check(wr.err == 0);
    return cn_wr_steal(&wr, len);
}

/* img snapshots, decodes and snapshots again to the same bytes. */
static void check_snapshot(const struct cn_image *img)
{
    struct cn_image *back = NULL;
    uint8_t *s1, *s2;
    size_t l1, l2;

    s1 = snap(img, &l1);
    check(cn_image_decode(s1, l1, cn_image_offset(img), &back) == 0);
    s2 = snap(back, &l2);
    check(l1 == l2 && memcmp(s1, s2, l1) == 0);
    check(cn_image_topic_count(back) == cn_image_topic_count(img));
    check(cn_image_broker_count(back) == cn_image_broker_count(img));
    free(s2);
    free(s1);
    cn_image_free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cn_image *img = base_image(), *dec = NULL;
    uint8_t *before, *after;
    size_t lb, la;
    int err;

    cn_corrupt_hush();
    before = snap(img, &lb);
    err = cn_image_apply_entry(img, 10, data, size);
    check(err == 0 || err == CN_ECORRUPT || err == CN_ENOMEM);
    if (err) {
        after = snap(img, &la);
        check(la == lb && memcmp(before, after, lb) == 0);
        check(cn_image_offset(img) == 1);
        free(after);
    } else {
        check(cn_image_offset(img) == 10);
        check_snapshot(img);
    }
    free(before);
    cn_image_free(img);

    err = cn_image_decode(data, size, 7, &dec);
    check(err == 0 || err == CN_ECORRUPT || err == CN_ENOMEM);
    if (!err) {
        check(cn_image_offset(dec) == 7);
        check_snapshot(dec);
        cn_image_free(dec);
    }
    cn_corrupt_unhush();
    return 0;
}
