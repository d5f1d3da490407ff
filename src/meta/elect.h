/*
 * elect.h - Kafka's partition leader rule, as pure functions.
 *
 * The controller decides a partition's leader and ISR the way Kafka's
 * PartitionChangeBuilder does (KIP-631; research §2.3):
 *  - the current leader stays while it is still eligible (in the ISR,
 *    registered, unfenced, not in controlled shutdown);
 *  - else the first replica in assignment order that is eligible leads;
 *  - else there is no leader (-1) and the ISR is left as it is: no unclean
 *    election, the last in-sync replica must come back;
 *  - taking a fenced broker out of an ISR never empties it: the last member
 *    stays, so the partition knows whom to wait for.
 *
 * "Usable" brokers are given as a plain array of ids (registered, unfenced,
 * not in controlled shutdown), in any order; the functions read no image so
 * tables test them.  Pure; no allocation.  Runs on: any thread.
 */
#ifndef CN_META_ELECT_H
#define CN_META_ELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The brokers that may lead or stay in an ISR. */
struct cn_elect_usable {
    const int32_t *ids; /* any order */
    size_t n;
};

/* One partition's leader and ISR, before or after a change. */
struct cn_elect_part {
    const int32_t *replicas; /* assignment order */
    int32_t nreplicas;
    const int32_t *isr;
    int32_t nisr;
    int32_t leader; /* -1: none */
};

bool cn_elect_is_usable(const struct cn_elect_usable *u, int32_t id);

/*
 * The leader the partition should have: the current one if it is in the
 * ISR and usable, else the first usable ISR member in assignment order,
 * else -1.
 */
int32_t cn_elect_leader(const struct cn_elect_part *p,
                        const struct cn_elect_usable *u);

/*
 * Writes to out (room for nisr ids) the ISR without `id`, keeping the
 * order; when id is the only member it stays.  Returns the new count.
 */
int32_t cn_elect_isr_without(const int32_t *isr, int32_t nisr, int32_t id,
                             int32_t *out);

/*
 * The partition after broker `id` is fenced (id must not be in u): id
 * leaves the ISR unless it is the last member, then the leader is chosen
 * again.  out_isr needs room for p->nisr ids.  Returns true when the
 * leader or the ISR changes (a PartitionChangeRecord is due).
 */
bool cn_elect_on_fence(const struct cn_elect_part *p, int32_t id,
                       const struct cn_elect_usable *u, int32_t *out_isr,
                       int32_t *out_nisr, int32_t *out_leader);

/*
 * The leader after some broker became usable: a partition without a
 * leader gets one if an ISR member is now usable; a led partition keeps
 * its leader.  Returns true when the leader changes.
 */
bool cn_elect_on_unfence(const struct cn_elect_part *p,
                         const struct cn_elect_usable *u, int32_t *out_leader);

#endif
