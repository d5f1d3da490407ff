/* arena.c - request-scoped bump allocator; see arena.h. */
#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bytes.h"

struct cn_arena_chunk {
    struct cn_arena_chunk *next; /* older chunk */
    size_t used;                 /* bytes handed out from data */
    size_t cap;                  /* bytes in data */
    _Alignas(16) uint8_t data[];
};

#define ARENA_CHUNK_BYTES 8192

void cn_arena_init(struct cn_arena *a)
{
    a->head = NULL;
    a->total = 0;
}

void cn_arena_fini(struct cn_arena *a)
{
    struct cn_arena_chunk *c = a->head;
    while (c) {
        struct cn_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->total = 0;
}

void *cn_arena_alloc(struct cn_arena *a, size_t size)
{
    size = (size + 15) & ~(size_t)15;
    if (size == 0)
        size = 16;
    struct cn_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > ARENA_CHUNK_BYTES ? size : ARENA_CHUNK_BYTES;
        if (cap > SIZE_MAX - sizeof *c)
            return NULL;
        c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += size;
    a->total += size;
    memset(p, 0, size);
    return p;
}

void *cn_arena_calloc(struct cn_arena *a, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    return cn_arena_alloc(a, n * size);
}

char *cn_arena_strdup(struct cn_arena *a, struct cn_bytes b)
{
    if (b.len < 0)
        return NULL;
    char *s = cn_arena_alloc(a, (size_t)b.len + 1);
    if (s && b.len)
        memcpy(s, b.ptr, (size_t)b.len);
    return s;
}
