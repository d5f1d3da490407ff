/*
 * arena.h - request-scoped bump allocator.
 *
 * A decoded request's arrays live in an arena freed in one go when the
 * response is queued [nginx pools].  Memory comes back zeroed.
 */
#ifndef CN_BASE_ARENA_H
#define CN_BASE_ARENA_H

#include <stddef.h>

#include "bytes.h"

struct cn_arena_chunk;

struct cn_arena {
    struct cn_arena_chunk *head; /* newest chunk first */
    size_t total;                /* bytes handed out, for limits and stats */
};

void cn_arena_init(struct cn_arena *a);
void cn_arena_fini(struct cn_arena *a);
/* Zeroed memory aligned for any type, or NULL on allocation failure. */
void *cn_arena_alloc(struct cn_arena *a, size_t size);
/* n * size with overflow check. */
void *cn_arena_calloc(struct cn_arena *a, size_t n, size_t size);
/* A NUL-terminated copy of b (null becomes NULL). */
char *cn_arena_strdup(struct cn_arena *a, struct cn_bytes b);

#endif
