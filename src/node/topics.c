/*
 * topics.c - the topic table: create, delete, add partitions, persist, load.
 *
 * On disk, each partition is a directory <log.dirs>/<topic>-<partition>
 * owned by the log module; each topic's own metadata lives in
 * <log.dirs>/.topics/<topic>, a small properties text:
 *
 *     id=<32 hex digits>
 *     partitions=<count>
 *     config.<key>=<value>      (one line per topic override)
 *
 * written to a temporary file, fsynced, renamed into place and the
 * directory fsynced, so a crash leaves the old or the new version.  The
 * metadata file is written before partition directories are created and
 * removed before they are deleted: partition directories without a topic
 * file are leftovers of an interrupted deletion and are removed at load.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"
#include "base/fnv.h"
#include "base/rand.h"
#include "base/say.h"
#include "node/broker_int.h"
#include "node/replica.h"
#include "node/cleaner.h"
#include "node/ctlcall.h"
#include "proto/kerr.h"

#define TOPICS_SUBDIR ".topics"

static uint32_t name_hash(const uint8_t *p, size_t n)
{
    return cn_fnv1a(p, n);
}

struct cn_topic *cn_topic_find(struct cn_broker *b, struct cn_bytes name)
{
    if (name.len <= 0 || !b->topic_buckets)
        return NULL;
    uint32_t h = name_hash(name.ptr, (size_t)name.len);
    for (struct cn_topic *t = b->topic_table[h % b->topic_buckets]; t;
         t = t->hash_next)
        if (strlen(t->name) == (size_t)name.len &&
            memcmp(t->name, name.ptr, (size_t)name.len) == 0)
            return t;
    return NULL;
}

struct cn_topic *cn_topic_find_id(struct cn_broker *b,
                                  const struct cn_uuid *id)
{
    for (size_t i = 0; i < b->topic_buckets; i++)
        for (struct cn_topic *t = b->topic_table[i]; t; t = t->hash_next)
            if (memcmp(t->id.b, id->b, 16) == 0)
                return t;
    return NULL;
}

struct cn_partition *cn_partition_find(struct cn_broker *b,
                                       struct cn_bytes topic, int32_t part)
{
    struct cn_topic *t = cn_topic_find(b, topic);
    if (!t || part < 0 || part >= t->partition_count)
        return NULL;
    return t->partitions[part];
}

void cn_topics_foreach(struct cn_broker *b,
                       void (*fn)(struct cn_topic *t, void *arg), void *arg)
{
    for (size_t i = 0; i < b->topic_buckets; i++) {
        struct cn_topic *t = b->topic_table[i];
        while (t) {
            struct cn_topic *next = t->hash_next; /* fn may delete t */
            fn(t, arg);
            t = next;
        }
    }
}

static int table_grow(struct cn_broker *b)
{
    size_t nb = b->topic_buckets ? b->topic_buckets * 2 : 64;
    struct cn_topic **nt = calloc(nb, sizeof *nt);
    if (!nt)
        return CN_ENOMEM;
    for (size_t i = 0; i < b->topic_buckets; i++) {
        struct cn_topic *t = b->topic_table[i];
        while (t) {
            struct cn_topic *next = t->hash_next;
            uint32_t h = name_hash((const uint8_t *)t->name, strlen(t->name));
            t->hash_next = nt[h % nb];
            nt[h % nb] = t;
            t = next;
        }
    }
    free(b->topic_table);
    b->topic_table = nt;
    b->topic_buckets = nb;
    return 0;
}

static int table_insert(struct cn_broker *b, struct cn_topic *t)
{
    if (b->topic_count + 1 > b->topic_buckets) {
        int err = table_grow(b);
        if (err)
            return err;
    }
    uint32_t h = name_hash((const uint8_t *)t->name, strlen(t->name));
    t->hash_next = b->topic_table[h % b->topic_buckets];
    b->topic_table[h % b->topic_buckets] = t;
    b->topic_count++;
    return 0;
}

static void table_remove(struct cn_broker *b, struct cn_topic *t)
{
    uint32_t h = name_hash((const uint8_t *)t->name, strlen(t->name));
    struct cn_topic **pp = &b->topic_table[h % b->topic_buckets];
    while (*pp && *pp != t)
        pp = &(*pp)->hash_next;
    if (*pp) {
        *pp = t->hash_next;
        b->topic_count--;
    }
}

int16_t cn_topic_name_check(struct cn_bytes name)
{
    if (name.len <= 0 || name.len > CN_TOPIC_NAME_MAX)
        return KAFKA_INVALID_TOPIC_EXCEPTION;
    if ((name.len == 1 && name.ptr[0] == '.') ||
        (name.len == 2 && name.ptr[0] == '.' && name.ptr[1] == '.'))
        return KAFKA_INVALID_TOPIC_EXCEPTION;
    for (int32_t i = 0; i < name.len; i++) {
        uint8_t c = name.ptr[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                  (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
        if (!ok)
            return KAFKA_INVALID_TOPIC_EXCEPTION;
    }
    return KAFKA_NONE;
}

int16_t cn_topic_config_check(const struct cn_topic_config *tc, char *msg,
                              size_t msg_len)
{
    /* Everything is honoured now: compact and compact,delete are cleaned
     * by cleaner.c.  Kept as the place for the next such refusal. */
    (void)tc;
    (void)msg;
    (void)msg_len;
    return KAFKA_NONE;
}

static void log_config_from_topic(const struct cn_topic_config *tc,
                                  struct cn_log_config *lc)
{
    cn_log_config_default(lc);
    lc->segment_bytes = tc->segment_bytes;
    lc->segment_ms = tc->segment_ms;
    lc->retention_ms = tc->retention_ms;
    lc->retention_bytes = tc->retention_bytes;
    lc->index_interval_bytes = tc->index_interval_bytes;
    lc->flush_messages = tc->flush_messages;
    lc->flush_ms = tc->flush_ms;
}

void cn_topic_apply_config(struct cn_topic *t)
{
    struct cn_log_config lc;
    log_config_from_topic(&t->config, &lc);
    for (int32_t i = 0; i < t->partition_count; i++)
        if (t->partitions[i])
            cn_log_set_config(t->partitions[i]->log, &lc);
}

static int fsync_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

static void meta_path(struct cn_broker *b, const char *name, char *out,
                      size_t len)
{
    snprintf(out, len, "%s/%s/%s", b->data_dir, TOPICS_SUBDIR, name);
}

static void uuid_hex(const struct cn_uuid *u, char out[33])
{
    for (int i = 0; i < 16; i++)
        snprintf(out + 2 * i, 3, "%02x", u->b[i]);
}

int cn_topic_persist(struct cn_broker *b, const struct cn_topic *t)
{
    char dir[4200], path[4400], tmp[4500];
    snprintf(dir, sizeof dir, "%s/%s", b->data_dir, TOPICS_SUBDIR);
    meta_path(b, t->name, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    char *cfgtext = cn_topic_config_serialize(&t->config);
    if (!cfgtext)
        return CN_ENOMEM;
    char hex[33];
    uuid_hex(&t->id, hex);
    FILE *f = fopen(tmp, "w");
    if (!f) {
        free(cfgtext);
        return -errno;
    }
    fprintf(f, "id=%s\npartitions=%d\n", hex, t->partition_count);
    /* Prefix each override line so they cannot clash with our own keys. */
    for (char *line = cfgtext; *line;) {
        char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (n)
            fprintf(f, "config.%.*s\n", (int)n, line);
        line += n + (nl ? 1 : 0);
    }
    free(cfgtext);
    int rc = 0;
    if (fflush(f) != 0 || fsync(fileno(f)) != 0)
        rc = -errno;
    if (fclose(f) != 0 && !rc)
        rc = -errno;
    if (!rc && rename(tmp, path) != 0)
        rc = -errno;
    if (!rc)
        rc = fsync_dir(dir);
    if (rc)
        CN_ERROR("cannot write topic metadata %s: %s", path, cn_strerror(rc));
    return rc;
}

/* Opens partition `index` of t.  With `loading` (start-up) a user topic's
 * partition whose log cannot be opened (an unreadable segment; recovery
 * says which) is kept as an offline partition answering
 * KAFKA_STORAGE_ERROR, so one bad file does not stop the whole broker; a
 * coordinator's partition still refuses the start, since its coordinator
 * cannot work without every record of it. */
static int partition_open(struct cn_broker *b, struct cn_topic *t,
                          int32_t index, bool loading)
{
    char dir[4400];
    snprintf(dir, sizeof dir, "%s/%s-%d", b->data_dir, t->name, index);
    struct cn_log_config lc;
    log_config_from_topic(&t->config, &lc);
    struct cn_partition *p = calloc(1, sizeof *p);
    if (!p)
        return CN_ENOMEM;
    int err = cn_log_open(dir, &lc, &p->log);
    if (err && loading && !t->internal && err != CN_ENOMEM) {
        p->log = cn_log_new_offline(dir, &lc);
        p->pstate = p->log ? cn_pstate_new() : NULL;
        if (!p->pstate) {
            if (p->log)
                cn_log_close(p->log);
            free(p);
            return CN_ENOMEM;
        }
        CN_ERROR("partition %s-%d is offline: its log cannot be opened "
                 "(%s, see above); it answers KAFKA_STORAGE_ERROR while the "
                 "other partitions are served; nothing was deleted: fix the "
                 "file and restart",
                 t->name, index, cn_strerror(err));
        p->topic = t;
        p->index = index;
        p->leader = b->cfg->cluster_mode ? -1 : b->node_id;
        p->active_base = cn_log_active_base(p->log);
        t->partitions[index] = p;
        return 0;
    }
    if (err) {
        CN_ERROR("cannot open partition log %s: %s", dir, cn_strerror(err));
        free(p);
        return err;
    }
    p->topic = t;
    p->index = index;
    /* In cluster mode nothing is led before the image says so. */
    p->leader = b->cfg->cluster_mode ? -1 : b->node_id;
    /* In cluster mode what is committed is the ISR's business: nothing is
     * visible before the partition's leader (maybe this broker, once its
     * followers fetched) says how far, so a restarted broker never shows
     * a record its followers lack. */
    p->high_watermark = b->cfg->cluster_mode ? cn_log_start_offset(p->log)
                        : b->cfg->cairn_fsync_group_commit
                            ? cn_log_synced_offset(p->log)
                            : cn_log_end_offset(p->log);
    err = cn_partition_producers_load(p, dir + strlen(b->data_dir) + 1);
    if (!err) {
        err = cn_partition_epochs_load(p);
        if (err)
            CN_ERROR("cannot load the leader epochs of %s: %s", dir,
                     cn_strerror(err));
    } else {
        CN_ERROR("cannot load producer state of %s: %s", dir,
                 cn_strerror(err));
    }
    if (err) {
        if (p->pstate)
            cn_pstate_free(p->pstate);
        cn_log_close(p->log);
        free(p);
        return err;
    }
    t->partitions[index] = p;
    return 0;
}

static void topic_free(struct cn_topic *t)
{
    free(t->partitions);
    free(t->name);
    free(t);
}

static struct cn_topic *topic_alloc(const char *name, int32_t partitions)
{
    struct cn_topic *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->name = strdup(name);
    t->partitions = calloc((size_t)partitions, sizeof *t->partitions);
    if (!t->name || !t->partitions) {
        topic_free(t);
        return NULL;
    }
    t->partition_count = partitions;
    t->internal = name[0] == '_' && name[1] == '_';
    return t;
}

static void close_partitions(struct cn_topic *t)
{
    for (int32_t i = 0; i < t->partition_count; i++)
        if (t->partitions[i]) {
            cn_partition_producers_close(t->partitions[i]);
            cn_partition_epochs_close(t->partitions[i]);
            cn_log_close(t->partitions[i]->log);
            free(t->partitions[i]->isr);
            free(t->partitions[i]);
            t->partitions[i] = NULL;
        }
}

int16_t cn_topic_create(struct cn_broker *b, struct cn_bytes name,
                        int32_t partitions, const struct cn_topic_config *tc,
                        struct cn_topic **out, char *msg, size_t msg_len)
{
    return cn_topic_create_id(b, name, NULL, partitions, tc, out, msg,
                              msg_len);
}

int16_t cn_topic_create_id(struct cn_broker *b, struct cn_bytes name,
                           const struct cn_uuid *id, int32_t partitions,
                           const struct cn_topic_config *tc,
                           struct cn_topic **out, char *msg, size_t msg_len)
{
    int16_t kerr = cn_topic_name_check(name);
    if (kerr) {
        snprintf(msg, msg_len,
                 "Topic name is illegal: it must be 1-249 characters of "
                 "[a-zA-Z0-9._-] and not '.' or '..'");
        return kerr;
    }
    if (cn_topic_find(b, name)) {
        snprintf(msg, msg_len, "Topic '%.*s' already exists.", name.len,
                 (const char *)name.ptr);
        return KAFKA_TOPIC_ALREADY_EXISTS;
    }
    if (partitions <= 0 || partitions > 100000) {
        snprintf(msg, msg_len, "Number of partitions must be 1..100000.");
        return KAFKA_INVALID_PARTITIONS;
    }
    if (cn_topic_doomed(b, name)) {
        /* Its directories still hold the deleted topic's segments, and the
         * reap would delete them under the new topic.  Retriable: the
         * caller (CreateTopics) waits for the reap, a client retries. */
        snprintf(msg, msg_len,
                 "Topic '%.*s' is still being deleted; try again.", name.len,
                 (const char *)name.ptr);
        return KAFKA_LEADER_NOT_AVAILABLE;
    }
    char cname[CN_TOPIC_NAME_MAX + 1];
    memcpy(cname, name.ptr, (size_t)name.len);
    cname[name.len] = '\0';
    struct cn_topic *t = topic_alloc(cname, partitions);
    if (!t)
        return KAFKA_UNKNOWN_SERVER_ERROR;
    t->config = *tc;
    if (id) {
        if (cn_uuid_is_zero(id) || cn_topic_find_id(b, id)) {
            snprintf(msg, msg_len, "Topic id of '%s' is zero or taken.",
                     cname);
            topic_free(t);
            return KAFKA_TOPIC_ALREADY_EXISTS;
        }
        t->id = *id;
    }
    while (!id) {
        if (cn_rand_bytes(t->id.b, 16) != 0) {
            topic_free(t);
            return KAFKA_UNKNOWN_SERVER_ERROR;
        }
        t->id.b[6] = (uint8_t)((t->id.b[6] & 0x0f) | 0x40); /* version 4 */
        t->id.b[8] = (uint8_t)((t->id.b[8] & 0x3f) | 0x80);
        if (!cn_uuid_is_zero(&t->id) && !cn_topic_find_id(b, &t->id))
            break;
    }
    if (cn_topic_persist(b, t) != 0) {
        snprintf(msg, msg_len, "Cannot write topic metadata.");
        topic_free(t);
        return KAFKA_KAFKA_STORAGE_ERROR;
    }
    for (int32_t i = 0; i < partitions; i++) {
        if (partition_open(b, t, i, false) != 0) {
            close_partitions(t);
            char path[4400];
            meta_path(b, t->name, path, sizeof path);
            unlink(path);
            topic_free(t);
            snprintf(msg, msg_len, "Cannot create partition directories.");
            return KAFKA_KAFKA_STORAGE_ERROR;
        }
    }
    if (table_insert(b, t) != 0) {
        close_partitions(t);
        topic_free(t);
        return KAFKA_UNKNOWN_SERVER_ERROR;
    }
    CN_INFO("created topic %s with %d partitions", t->name, partitions);
    if (out)
        *out = t;
    return KAFKA_NONE;
}

int16_t cn_topic_delete(struct cn_broker *b, struct cn_topic *t)
{
    char path[4400], dir[4200];
    meta_path(b, t->name, path, sizeof path);
    snprintf(dir, sizeof dir, "%s/%s", b->data_dir, TOPICS_SUBDIR);
    if (unlink(path) != 0 && errno != ENOENT) {
        CN_ERROR("cannot remove %s: %s", path, strerror(errno));
        return KAFKA_KAFKA_STORAGE_ERROR;
    }
    fsync_dir(dir);
    table_remove(b, t);
    for (int32_t i = 0; i < t->partition_count; i++) {
        struct cn_partition *p = t->partitions[i];
        if (!p)
            continue;
        if (p->in_sync_list) {
            struct cn_partition **pp = &b->sync_list;
            while (*pp && *pp != p)
                pp = &(*pp)->sync_next;
            if (*pp)
                *pp = p->sync_next;
        }
        /* The topic is freed now; the partition's log may outlive it until
         * the sync round, cleaner pass or snapshot write using it ends. */
        cn_cleaner_forget(b, p);
        cn_replica_forget(b, p);
        cn_partition_snap_release(p);
        p->topic = NULL;
        p->sync_next = b->doomed;
        b->doomed = p;
        t->partitions[i] = NULL;
    }
    CN_INFO("deleted topic %s", t->name);
    topic_free(t);
    cn_topics_reap(b);
    return KAFKA_NONE;
}

void cn_topics_reap(struct cn_broker *b)
{
    if (b->sync_running || b->clean_running || b->part_work_running)
        return;
    while (b->doomed) {
        struct cn_partition *p = b->doomed;
        b->doomed = p->sync_next;
        cn_log_delete(p->log);
        if (p->pstate)
            cn_pstate_free(p->pstate);
        cn_partition_epochs_close(p);
        free(p->isr);
        free(p);
    }
    /* Taken whole first: a woken request may delete a topic and wait
     * again. */
    struct cn_reap_waiter *w = b->reap_waiters;
    b->reap_waiters = NULL;
    while (w) {
        struct cn_reap_waiter *next = w->next;
        w->prev = w->next = NULL;
        w->wake(b, w);
        w = next;
    }
}

bool cn_topic_doomed(const struct cn_broker *b, struct cn_bytes name)
{
    if (name.len <= 0 || !b->doomed)
        return false;
    size_t dlen = strlen(b->data_dir);
    for (const struct cn_partition *p = b->doomed; p; p = p->sync_next) {
        /* The directory is <data>/<name>-<index> (partition_open). */
        const char *dir = cn_log_dir(p->log);
        const char *s = dir + dlen + 1;
        if (strncmp(dir, b->data_dir, dlen) != 0 || dir[dlen] != '/' ||
            strncmp(s, (const char *)name.ptr, (size_t)name.len) != 0 ||
            s[name.len] != '-')
            continue;
        s += name.len + 1;
        if (*s && strspn(s, "0123456789") == strlen(s))
            return true;
    }
    return false;
}

void cn_reap_wait(struct cn_broker *b, struct cn_reap_waiter *w)
{
    w->prev = NULL;
    w->next = b->reap_waiters;
    if (w->next)
        w->next->prev = w;
    b->reap_waiters = w;
}

void cn_reap_wait_cancel(struct cn_broker *b, struct cn_reap_waiter *w)
{
    if (w->prev)
        w->prev->next = w->next;
    else if (b->reap_waiters == w)
        b->reap_waiters = w->next;
    if (w->next)
        w->next->prev = w->prev;
    w->prev = w->next = NULL;
}

struct part_work {
    uv_work_t work;
    struct cn_broker *b;
    struct cn_part_work *w;
};

static void part_work_run(uv_work_t *uw)
{
    struct part_work *pw = uw->data;
    pw->w->run(pw->w);
}

static void part_work_done(uv_work_t *uw, int status)
{
    struct part_work *pw = uw->data;
    struct cn_broker *b = pw->b;
    (void)status; /* never cancelled: nothing calls uv_cancel */
    pw->w->done(pw->w);
    free(pw);
    b->part_work_running--;
    /* A deleted topic's directory waits for the writes into it. */
    cn_topics_reap(b);
}

int cn_part_work_queue(void *ctx, struct cn_part_work *w)
{
    struct cn_broker *b = ctx;
    struct part_work *pw = calloc(1, sizeof *pw);
    if (!pw)
        return CN_ENOMEM;
    pw->work.data = pw;
    pw->b = b;
    pw->w = w;
    int rc = uv_queue_work(b->loop, &pw->work, part_work_run, part_work_done);
    if (rc) {
        free(pw);
        return rc;
    }
    b->part_work_running++;
    return 0;
}

int16_t cn_topic_add_partitions(struct cn_broker *b, struct cn_topic *t,
                                int32_t new_count)
{
    struct cn_partition **np = realloc(t->partitions,
                                       (size_t)new_count * sizeof *np);
    if (!np)
        return KAFKA_UNKNOWN_SERVER_ERROR;
    t->partitions = np;
    int32_t old = t->partition_count;
    for (int32_t i = old; i < new_count; i++)
        np[i] = NULL;
    t->partition_count = new_count;
    if (cn_topic_persist(b, t) != 0) {
        t->partition_count = old;
        return KAFKA_KAFKA_STORAGE_ERROR;
    }
    for (int32_t i = old; i < new_count; i++)
        if (partition_open(b, t, i, false) != 0)
            return KAFKA_KAFKA_STORAGE_ERROR;
    CN_INFO("topic %s now has %d partitions", t->name, new_count);
    return KAFKA_NONE;
}

static int hex_nibble(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Parses one .topics file.  Returns 0 or CN_ECORRUPT/CN_EINVAL. */
static int load_one(struct cn_broker *b, const char *name, char *err,
                    size_t err_len)
{
    char path[4400];
    meta_path(b, name, path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, err_len, "%s: %s", path, strerror(errno));
        return -errno;
    }
    char line[4096];
    struct cn_uuid id = {{0}};
    int32_t partitions = 0;
    bool have_id = false;
    struct cn_wr cfgtext;
    cn_wr_init(&cfgtext, 256);
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        if (strncmp(line, "id=", 3) == 0 && strlen(line) == 35) {
            have_id = true;
            for (int i = 0; i < 16; i++) {
                int hi = hex_nibble(line[3 + 2 * i]);
                int lo = hex_nibble(line[4 + 2 * i]);
                if (hi < 0 || lo < 0) {
                    have_id = false;
                    break;
                }
                id.b[i] = (uint8_t)((hi << 4) | lo);
            }
        } else if (strncmp(line, "partitions=", 11) == 0) {
            partitions = (int32_t)strtol(line + 11, NULL, 10);
        } else if (strncmp(line, "config.", 7) == 0) {
            cn_wr_raw(&cfgtext, line + 7, strlen(line + 7));
            cn_wr_raw(&cfgtext, "\n", 1);
        }
    }
    fclose(f);
    cn_wr_raw(&cfgtext, "", 1);
    if (!have_id || partitions <= 0 || cfgtext.err) {
        snprintf(err, err_len, "%s: corrupt topic metadata", path);
        cn_wr_fini(&cfgtext);
        return CN_ECORRUPT;
    }
    struct cn_topic *t = topic_alloc(name, partitions);
    if (!t) {
        cn_wr_fini(&cfgtext);
        return CN_ENOMEM;
    }
    t->id = id;
    cn_topic_config_init_defaults(&t->config, b->cfg);
    char cerr[512];
    if (cn_topic_config_parse(&t->config, (const char *)cfgtext.buf, path,
                              cerr, sizeof cerr) != 0)
        CN_WARN("topic %s: ignoring stored config: %s", name, cerr);
    cn_wr_fini(&cfgtext);
    for (int32_t i = 0; i < partitions; i++) {
        int rc = partition_open(b, t, i, true);
        if (rc) {
            snprintf(err, err_len, "cannot open %s/%s-%d: %s", b->data_dir,
                     name, i, cn_strerror(rc));
            close_partitions(t);
            topic_free(t);
            return rc;
        }
    }
    return table_insert(b, t);
}

static int rmtree(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    struct dirent *e;
    char sub[8192];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
        unlink(sub);
    }
    closedir(d);
    return rmdir(path) == 0 ? 0 : -errno;
}

/* A directory named <topic>-<n> whose topic has no metadata file. */
static void remove_orphans(struct cn_broker *b)
{
    DIR *d = opendir(b->data_dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *dash = strrchr(e->d_name, '-');
        if (e->d_name[0] == '.' || !dash || dash == e->d_name || !dash[1])
            continue;
        /* The metadata quorum's raft directory (metadata.log.dir's
         * default) looks like a partition of a topic that never exists. */
        if (!strncmp(e->d_name, "__cluster_metadata-", 19))
            continue;
        char *end;
        long idx = strtol(dash + 1, &end, 10);
        if (*end || idx < 0)
            continue;
        struct cn_bytes tn = {(const uint8_t *)e->d_name,
                              (int32_t)(dash - e->d_name)};
        struct cn_topic *t = cn_topic_find(b, tn);
        if (t && idx < t->partition_count)
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", b->data_dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        CN_WARN("removing %s: left over from a deleted topic", path);
        rmtree(path);
    }
    closedir(d);
}

int cn_topics_load(struct cn_broker *b, char *err, size_t err_len)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/%s", b->data_dir, TOPICS_SUBDIR);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, err_len, "log.dirs: cannot create %s: %s", dir,
                 strerror(errno));
        return -errno;
    }
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, err_len, "log.dirs: cannot read %s: %s", dir,
                 strerror(errno));
        return -errno;
    }
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d)) && !rc) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.')
            continue;
        if (n > 4 && strcmp(e->d_name + n - 4, ".tmp") == 0) {
            char tmp[4608];
            snprintf(tmp, sizeof tmp, "%s/%s", dir, e->d_name);
            unlink(tmp);
            continue;
        }
        rc = load_one(b, e->d_name, err, err_len);
    }
    closedir(d);
    if (!rc)
        remove_orphans(b);
    return rc;
}

void cn_topics_close_all(struct cn_broker *b)
{
    for (size_t i = 0; i < b->topic_buckets; i++) {
        struct cn_topic *t = b->topic_table[i];
        while (t) {
            struct cn_topic *next = t->hash_next;
            close_partitions(t);
            topic_free(t);
            t = next;
        }
    }
    free(b->topic_table);
    b->topic_table = NULL;
    b->topic_buckets = 0;
    b->topic_count = 0;
}

/* Kafka's settings for coordinator logs: the coordinator holds the newest
 * record per key and compacts by checkpoint; records leave by being
 * replaced or tombstoned, never by age or size. */
const char *const cn_internal_topic_configs[CN_INTERNAL_TOPIC_NCONFIGS][2] = {
    {"cleanup.policy", "compact"},
    {"segment.bytes", "104857600"},
    {"retention.ms", "-1"},
    {"retention.bytes", "-1"},
};

struct cn_topic *cn_topic_internal(struct cn_broker *b, const char *name,
                                   int32_t partitions, bool create)
{
    struct cn_bytes wire = cn_bytes_str(name);
    struct cn_topic *t = cn_topic_find(b, wire);
    if (t || !create)
        return t;
    if (b->cfg->cluster_mode) {
        /* The controller creates it for the whole cluster; publish.c makes
         * the local logs once the image has it.  Before the quorum runs
         * (start-up) there is no one to ask: a later call asks. */
        if (b->quorum) {
            bool txn = strcmp(name, "__transaction_state") == 0;
            int32_t rf = txn ? b->cfg->transaction_state_log_replication_factor
                             : b->cfg->offsets_topic_replication_factor;
            cn_ctlcall_ensure_topic(b, name, partitions, (int16_t)rf, true);
        }
        return NULL;
    }
    struct cn_topic_config tc;
    cn_topic_config_init_defaults(&tc, b->cfg);
    char msg[256];
    for (size_t i = 0; i < CN_INTERNAL_TOPIC_NCONFIGS; i++)
        cn_topic_config_set(&tc, cn_internal_topic_configs[i][0],
                            cn_internal_topic_configs[i][1], msg, sizeof msg);
    int16_t kerr = cn_topic_create(b, wire, partitions, &tc, &t, msg,
                                   sizeof msg);
    if (kerr) {
        CN_ERROR("cannot create %s: %s", name, msg);
        return NULL;
    }
    return t;
}

void cn_partition_expire_producers(struct cn_broker *b, struct cn_partition *p,
                                   int64_t now_ms)
{
    size_t n = cn_pstate_expire(p->pstate, now_ms,
                                b->cfg->producer_id_expiration_ms);
    if (n)
        CN_DEBUG("expired %zu producer ids in %s-%d", n,
                 p->topic ? p->topic->name : "?", p->index);
}
