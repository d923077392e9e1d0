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

/* Keep freed heap memory for reuse instead of returning it to the kernel
 * after every snapshot (each cycle frees and re-allocates about the same few
 * hundred KiB; trimming and re-faulting it cost ~0.3 ms a cycle), one malloc
 * arena for all threads, and blocks of 128 KiB and more in their own
 * mappings (see util.c). */
void mw_tune_allocator(void);

/* strlcpy semantics: always terminates, returns strlen(src). */
size_t mw_strlcpy(char *dst, const char *src, size_t size);

#endif
