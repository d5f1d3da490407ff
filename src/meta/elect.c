/*
 * elect.c - Kafka's partition leader rule (see elect.h).
 */
#include "meta/elect.h"

static bool contains(const int32_t *ids, size_t n, int32_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

bool cn_elect_is_usable(const struct cn_elect_usable *u, int32_t id)
{
    return id >= 0 && contains(u->ids, u->n, id);
}

static bool eligible(const struct cn_elect_part *p,
                     const struct cn_elect_usable *u, int32_t id)
{
    return contains(p->isr, (size_t)p->nisr, id) && cn_elect_is_usable(u, id);
}

int32_t cn_elect_leader(const struct cn_elect_part *p,
                        const struct cn_elect_usable *u)
{
    /* Keeping a working leader avoids a leader epoch bump for nothing. */
    if (p->leader >= 0 && eligible(p, u, p->leader))
        return p->leader;
    for (int32_t i = 0; i < p->nreplicas; i++)
        if (eligible(p, u, p->replicas[i]))
            return p->replicas[i];
    return -1;
}

int32_t cn_elect_isr_without(const int32_t *isr, int32_t nisr, int32_t id,
                             int32_t *out)
{
    int32_t n = 0;
    for (int32_t i = 0; i < nisr; i++)
        if (isr[i] != id)
            out[n++] = isr[i];
    if (n == 0 && nisr > 0) {
        /* The last in-sync replica holds every committed record: without
         * it in the ISR nobody would know whom to wait for. */
        for (int32_t i = 0; i < nisr; i++)
            out[i] = isr[i];
        return nisr;
    }
    return n;
}

bool cn_elect_on_fence(const struct cn_elect_part *p, int32_t id,
                       const struct cn_elect_usable *u, int32_t *out_isr,
                       int32_t *out_nisr, int32_t *out_leader)
{
    int32_t nisr = cn_elect_isr_without(p->isr, p->nisr, id, out_isr);
    struct cn_elect_part after = *p;
    after.isr = out_isr;
    after.nisr = nisr;
    *out_nisr = nisr;
    *out_leader = cn_elect_leader(&after, u);
    return nisr != p->nisr || *out_leader != p->leader;
}

bool cn_elect_on_unfence(const struct cn_elect_part *p,
                         const struct cn_elect_usable *u, int32_t *out_leader)
{
    *out_leader = p->leader;
    if (p->leader >= 0)
        return false;
    *out_leader = cn_elect_leader(p, u);
    return *out_leader != p->leader;
}
