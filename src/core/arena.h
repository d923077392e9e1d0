/* arena.h - bump allocator for data that lives and dies together.
 *
 * A snapshot of one collection cycle allocates thousands of small strings and
 * samples; they are all released at once when the snapshot is dropped. An
 * arena makes that one free() per block instead of one per object. */
#ifndef MW_ARENA_H
#define MW_ARENA_H

#include <stddef.h>

typedef struct mw_arena_block mw_arena_block;

typedef struct mw_arena {
    mw_arena_block *head;
    size_t block_size; /* size of the next ordinary block */
    size_t used_bytes; /* total bytes handed out, for accounting */
} mw_arena;

void mw_arena_init(mw_arena *a, size_t block_size);
/* Aligned to 16 bytes. Aborts on out-of-memory: an agent that cannot allocate
 * a few KiB cannot report anything truthful either. */
void *mw_arena_alloc(mw_arena *a, size_t n);
char *mw_arena_strdup(mw_arena *a, const char *s);
char *mw_arena_strndup(mw_arena *a, const char *s, size_t n);
void mw_arena_reset(mw_arena *a); /* keep the first block, drop the rest */
void mw_arena_free(mw_arena *a);

#endif
