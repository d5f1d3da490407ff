/*
 * quota.h - client quotas with Kafka's semantics (KIP-13, KIP-55, KIP-124,
 * KIP-219): the configured values per entity, Kafka's eight-level
 * precedence, rates measured over sampled windows, and the throttle time.
 *
 * Pure: no I/O and no clock of its own; every call that measures takes
 * now_ms, so a unit test drives it with a fake clock.
 *
 * Entities.  A quota belongs to a user, a client id, or both; each part is
 * absent, the default ("<default>", null on the wire) or a name.  For a
 * request from (user u, client c), a key's limit is the first of these
 * that sets it:
 *     1 users/u/clients/c          5 users/<default>/clients/<default>
 *     2 users/u/clients/<default>  6 users/<default>
 *     3 users/u                    7 clients/c
 *     4 users/<default>/clients/c  8 clients/<default>
 * The level found also says which requests share one rate (Kafka's metric
 * tags): a level naming or defaulting a part measures per actual value of
 * that part, a level without it shares across all its values.  So
 * clients/<default> limits each client id on its own, users/u limits all
 * of u's client ids together.
 *
 * Rates (Kafka's Rate over a SampledStat): quota.window.num samples of
 * quota.window.size.seconds each; a value is recorded into the current
 * sample, a new sample starts once the current one is a window old, and
 * samples older than num * window count as empty.  The rate is the sum
 * over samples divided by the time since the oldest sample began, taken as
 * at least (num - 1) windows so a new client is not throttled on its
 * first bytes.
 *
 * Throttle time: over the limit, (rate - limit) / limit * that time, in ms.
 * Kafka bounds it for request_percentage only (at one window); byte rates
 * are unbounded.
 *
 * Runs on: loop (one owner; not thread-safe).
 */
#ifndef CN_QUOTA_QUOTA_H
#define CN_QUOTA_QUOTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cn_quota_key {
    CN_QK_PRODUCE,  /* producer_byte_rate, bytes/s */
    CN_QK_FETCH,    /* consumer_byte_rate, bytes/s */
    CN_QK_REQUEST,  /* request_percentage, % of one handler thread */
    CN_QK_MUTATION, /* controller_mutation_rate, partitions/s (stored and
                       described; not enforced) */
    CN_QK_COUNT
};

/* Kafka's key name, and the reverse (-1 for an unknown name). */
const char *cn_quota_key_name(enum cn_quota_key k);
int cn_quota_key_find(const char *name, size_t len);
/* producer_byte_rate, consumer_byte_rate are Kafka LONG keys (whole
 * numbers); the others are DOUBLE. */
bool cn_quota_key_is_long(enum cn_quota_key k);

enum cn_quota_part { CN_QP_NONE, CN_QP_DEFAULT, CN_QP_NAME };

#define CN_QUOTA_NAME_MAX 256

/* One entity: each part absent, default, or a name (NUL-terminated). */
struct cn_quota_entity {
    enum cn_quota_part user_part, client_part;
    char user[CN_QUOTA_NAME_MAX];
    char client[CN_QUOTA_NAME_MAX];
};

struct cn_quota_cfg {
    int window_num;        /* quota.window.num, Kafka 11 */
    int64_t window_ms;     /* quota.window.size.seconds * 1000, Kafka 1 s */
    size_t max_sensors;    /* rate trackers kept at most; the one unused
                              longest goes first.  0: 10000 */
};

struct cn_quota;

int cn_quota_new(const struct cn_quota_cfg *cfg, struct cn_quota **out);
void cn_quota_free(struct cn_quota *q);

/* ---- configured values ---------------------------------------------- */

/* Sets (value >= 0) or, with remove, clears key for e.  An entity left
 * with no key is forgotten.  0 or CN_ENOMEM / CN_EINVAL. */
int cn_quota_set(struct cn_quota *q, const struct cn_quota_entity *e,
                 enum cn_quota_key k, double value, bool remove);
/* The value set on exactly e. */
bool cn_quota_get(const struct cn_quota *q, const struct cn_quota_entity *e,
                  enum cn_quota_key k, double *out);
/* Entities with a value, in the order they were first set; i < count. */
size_t cn_quota_count(const struct cn_quota *q);
const struct cn_quota_entity *cn_quota_at(const struct cn_quota *q,
                                          size_t i, double vals[CN_QK_COUNT],
                                          bool has[CN_QK_COUNT]);
/* Forgets every value (and the rates). */
void cn_quota_clear(struct cn_quota *q);

/* ---- lookup and measurement ----------------------------------------- */

/* The limit that applies to (user, client_id) for k, by the precedence
 * above; false when none (unlimited).  level (1..8) when not NULL. */
bool cn_quota_limit(const struct cn_quota *q, enum cn_quota_key k,
                    const char *user, const char *client_id, double *limit,
                    int *level);

/* Records value (bytes, or % of a thread-second for request time) for
 * (user, client_id) at now_ms and returns the throttle time in ms, 0 when
 * within the limit or unlimited. */
int64_t cn_quota_record(struct cn_quota *q, enum cn_quota_key k,
                        const char *user, const char *client_id,
                        double value, int64_t now_ms);
/* Takes back a recorded value (a throttled fetch answers empty, so what it
 * would have sent is not counted: Kafka's unrecordQuotaSensor). */
void cn_quota_unrecord(struct cn_quota *q, enum cn_quota_key k,
                       const char *user, const char *client_id, double value,
                       int64_t now_ms);
/* Kafka's getMaxValueInQuotaWindow: limit * (num - 1) * window seconds,
 * or -1 when unlimited.  A fetch answer is never larger. */
double cn_quota_max_in_window(const struct cn_quota *q, enum cn_quota_key k,
                              const char *user, const char *client_id);
/* The measured rate for (user, client_id), 0 when never recorded. */
double cn_quota_rate(struct cn_quota *q, enum cn_quota_key k,
                     const char *user, const char *client_id, int64_t now_ms);

/* The throttle formula alone, for tests: rate over limit measured across
 * window_ms, bounded by max_ms when max_ms > 0. */
int64_t cn_quota_throttle_ms(double rate, double limit, int64_t window_ms,
                             int64_t max_ms);

/* Rate trackers alive, for metrics. */
size_t cn_quota_sensor_count(const struct cn_quota *q);

#endif
