/* arena.c - bump allocator, see arena.h. */
#include "arena.h"
#include "util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct mw_arena_block {
    mw_arena_block *next;
    size_t cap, off;
    _Alignas(16) unsigned char data[];
};

void mw_arena_init(mw_arena *a, size_t block_size)
{
    a->head = NULL;
    a->block_size = block_size ? block_size : 16384;
    a->used_bytes = 0;
}

static mw_arena_block *block_new(size_t cap)
{
    mw_arena_block *b = mw_xmalloc(sizeof(*b) + cap);
    b->next = NULL;
    b->cap = cap;
    b->off = 0;
    return b;
}

void *mw_arena_alloc(mw_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    mw_arena_block *b = a->head;
    if (!b || b->cap - b->off < n) {
        size_t cap = n > a->block_size ? n : a->block_size;
        b = block_new(cap);
        b->next = a->head;
        a->head = b;
    }
    void *p = b->data + b->off;
    b->off += n;
    a->used_bytes += n;
    return p;
}

char *mw_arena_strndup(mw_arena *a, const char *s, size_t n)
{
    char *p = mw_arena_alloc(a, n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *mw_arena_strdup(mw_arena *a, const char *s)
{
    return mw_arena_strndup(a, s, strlen(s));
}

void mw_arena_reset(mw_arena *a)
{
    mw_arena_block *b = a->head;
    if (!b) return;
    /* Keep the oldest block (the tail), which is block_size or larger. */
    while (b->next) {
        mw_arena_block *next = b->next;
        free(b);
        b = next;
    }
    b->off = 0;
    a->head = b;
    a->used_bytes = 0;
}

void mw_arena_free(mw_arena *a)
{
    mw_arena_block *b = a->head;
    while (b) {
        mw_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->used_bytes = 0;
}
