/* util.h - small helpers every module uses: checked allocation, time,
 * bounded string copies. */
#ifndef MW_UTIL_H
#define MW_UTIL_H

#include <stddef.h>
#include <stdint.h>

#define MW_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

void *mw_xmalloc(size_t n);
void *mw_xcalloc(size_t n, size_t size);
void *mw_xrealloc(void *p, size_t n);
char *mw_xstrdup(const char *s);

/* Wall-clock milliseconds since the epoch (sample timestamps). */
int64_t mw_now_ms(void);
/* Monotonic nanoseconds (durations, scheduling). */
int64_t mw_mono_ns(void);
/* CPU time consumed by the calling thread, nanoseconds. */
int64_t mw_thread_cpu_ns(void);

/* One malloc arena for all threads, blocks of 128 KiB and more in their own
 * mappings, and the heap's top trimmed only past 2 MiB (see util.c). */
void mw_tune_allocator(void);
/* Return the heap's free pages to the kernel: the agent calls it once a
 * collection cycle, after the previous cycle's snapshot is released. */
void mw_release_free_memory(void);

/* memcpy(dst, src, n), or memset(dst, 0, n) when src is NULL, that writes
 * only the 8-byte words that change: pages of dst that already hold the
 * value are only read, and a page of zeros never written (a static's, or
 * fresh memory from the kernel) stays off the resident set. For large
 * structs that are mostly zero (mw_config, ~100 KB of mostly empty path
 * and list buffers). */
void mw_assign_sparse(void *dst, const void *src, size_t n);

/* Make *dst (a heap string, or NULL) a copy of src cut to size - 1 bytes,
 * reallocating only when it differs: for labels set again every cycle. */
void mw_set_string(char **dst, const char *src, size_t size);

/* strlcpy semantics: always terminates, returns strlen(src). */
size_t mw_strlcpy(char *dst, const char *src, size_t size);

/* The length of s when it is valid UTF-8 (no overlong forms, surrogates
 * or code points past U+10FFFF), else -1. */
ptrdiff_t mw_utf8_len(const char *s);

/* Writes code point cp as UTF-8 into out (room for 4 bytes) and returns
 * its length, 1 to 4; 0 for a surrogate or a value past U+10FFFF. */
int mw_utf8_put(unsigned long cp, char out[4]);

/* A secret (password, token) from a file into out, trailing whitespace and
 * newlines cut off. Returns 0; -1 when the file cannot be read (why: "PATH:
 * strerror"); -2 when it holds more than size - 1 bytes (why: "PATH: longer
 * than N bytes"). The secret never goes into why. */
int mw_read_secret_file(const char *path, char *out, size_t size, char *why, size_t whysize);
/* The start of a small file (a /proc or cgroup file of one read) into buf:
 * at most size - 1 bytes, NUL-terminated. 0, or -1 when it cannot be
 * opened or read. */
int mw_read_small_file(const char *path, char *buf, size_t size);

/* fsync a folder, so that the names created, renamed or removed in it are on
 * disk (a rename is durable only once its folder is synced). 0 or -errno. */
int mw_sync_folder(const char *dir);

/* mw_sync_folder of the folder that holds path ("." when path has no '/'). */
int mw_sync_parent_folder(const char *path);

#endif
