/*
 * ctl_int.h - what the controller's files share (ctl.c: the machine,
 * brokers and producer ids; ctl_topics.c: topics; ctl_isr.c: ISR changes
 * and controlled shutdown).  Not for other layers.
 */
#ifndef CN_META_CTL_INT_H
#define CN_META_CTL_INT_H

#include "meta/ctl.h"
#include "meta/elect.h"

struct qreq {
    struct cn_ctl_event ev; /* points into arena */
    struct cn_arena arena;
    struct qreq *next;
};

struct session {
    int32_t id;
    int64_t last_ms; /* the last valid heartbeat, or leadership start */
    int64_t metadata_offset; /* its last heartbeat's, -1: none yet */
    /* Controlled shutdown: the entry that began it (Kafka's
     * controlledShutdownOffset), -1 when unknown to this leader. */
    int64_t cs_offset;
};

enum flight_kind { FLIGHT_BOOT, FLIGHT_FENCE, FLIGHT_REQ };

struct flight {
    bool active;               /* a proposal awaits its outcome */
    uint64_t seq;              /* its CN_CTE_PROPOSED seq */
    enum flight_kind kind;     /* who waits for it */
    struct qreq *req;          /* FLIGHT_REQ: answered at the outcome */
    struct cn_ctl_answer done; /* the answer if it applies */
    char *standby_addr;        /* REGISTER: heap, the broker's address */
};

struct cn_ctl {
    struct cn_ctl_config cfg; /* cluster_id points at ours */
    char *cluster_id;         /* heap copy of cfg.cluster_id, "" for random */
    uint64_t rng;             /* splitmix64 state, from cfg.seed */
    bool leader;              /* between LEADER and UNLEADER */
    int64_t term;             /* the LEADER event's */
    struct qreq *qhead, *qtail; /* requests waiting for their turn, FIFO */
    size_t nqueued;
    struct flight flight;     /* the one proposal in flight */
    uint64_t next_seq;        /* the last proposal's seq */
    int64_t retry_ms;         /* own proposals wait until then */
    struct session *sessions; /* the leader's, by broker; heap */
    size_t nsessions, sessions_cap;
};

/* Records for one entry, growing in the actions' arena. */
struct recs {
    struct cn_arena *a; /* the actions' */
    struct cn_mrec *v;  /* in a */
    size_t n, cap;
    bool oom; /* a record or array was not allocated */
};

uint64_t ctl_rand(struct cn_ctl *c);
bool ctl_has_id(const int32_t *ids, int32_t n, int32_t id);
int32_t *ctl_copy_ids(struct cn_arena *a, const int32_t *ids, int32_t n);

/* Answers ev now; NULL when out of memory (the client times out). */
struct cn_ctl_answer *ctl_push_answer(struct cn_ctl_actions *a,
                                      const struct cn_ctl_event *ev,
                                      int16_t error);
/* Answers ev now with an error and Kafka's message (fmt may be NULL). */
void ctl_answer_error(struct cn_ctl_actions *a, const struct cn_ctl_event *ev,
                      int16_t error, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The brokers that may lead: registered, unfenced, not shutting down,
 * ascending; `except` (or -1) left out, `plus` (or -1) put in.  ids is
 * NULL when out of memory. */
struct cn_elect_usable ctl_usable(const struct cn_image *img,
                                  struct cn_arena *a, int32_t except,
                                  int32_t plus);

/* Broker id's session with this leader (a new one is whole), or NULL
 * when out of memory. */
struct session *ctl_session(struct cn_ctl *c, int32_t id, int64_t now_ms);

/*
 * Appends the PartitionChangeRecords that take broker `id` out of every
 * ISR (never the last member) and elect new leaders: Kafka's
 * handleBrokerFenced.  u must not hold id.
 */
void ctl_fence_changes(const struct cn_image *img, int32_t id,
                       const struct cn_elect_usable *u, struct recs *r);

struct cn_mrec *ctl_rec_add(struct recs *r, int16_t type);
/* Makes r the one proposal in flight, answered for req (or nobody). */
void ctl_propose(struct cn_ctl *c, struct cn_ctl_actions *acts, struct recs *r,
                 enum flight_kind kind, struct qreq *req);

/* Each returns true when it proposed (req is then the flight's) and false
 * when it answered at once. */
bool ctl_decide_create_topic(struct cn_ctl *c, const struct cn_image *img,
                             struct qreq *req, struct cn_ctl_actions *acts);
bool ctl_decide_delete_topic(struct cn_ctl *c, const struct cn_image *img,
                             struct qreq *req, struct cn_ctl_actions *acts);
bool ctl_decide_create_partitions(struct cn_ctl *c, const struct cn_image *img,
                                  struct qreq *req,
                                  struct cn_ctl_actions *acts);
bool ctl_decide_alter_configs(struct cn_ctl *c, const struct cn_image *img,
                              struct qreq *req, struct cn_ctl_actions *acts);
bool ctl_decide_alter_partition(struct cn_ctl *c, const struct cn_image *img,
                                struct qreq *req, struct cn_ctl_actions *acts);
/* A heartbeat of broker b asking to shut down (or of one already in
 * controlled shutdown); b's epoch is checked. */
bool ctl_decide_shutdown(struct cn_ctl *c, const struct cn_image *img,
                         int64_t now_ms, struct qreq *req,
                         const struct cn_image_broker *b,
                         struct cn_ctl_actions *acts);

/* The ALTER_PARTITION answer of an applied (or needless) change: the
 * partition as img has it; NEW_LEADER_ELECTED when the requester no
 * longer leads it. */
void ctl_answer_partition(const struct cn_image *img,
                          const struct cn_ctl_event *ev,
                          struct cn_ctl_actions *acts);
/* After a heartbeat's proposal applied at `offset`: the controlled
 * shutdown it began counts from there. */
void ctl_shutdown_applied(struct cn_ctl *c, const struct cn_image *img,
                          int64_t now_ms, const struct cn_ctl_event *ev,
                          int64_t offset);

#endif
