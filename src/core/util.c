/* util.c - checked allocation, clocks and bounded copies. */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void oom(size_t n)
{
    fprintf(stderr, "mlwatch: out of memory allocating %zu bytes\n", n);
    abort();
}

void *mw_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *mw_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom(n * size);
    return p;
}

void *mw_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

char *mw_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = mw_xmalloc(n);
    memcpy(p, s, n);
    return p;
}

int64_t mw_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t mw_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t mw_thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void mw_assign_sparse(void *dst, const void *src, size_t n)
{
    static const unsigned char zero[8];
    unsigned char *d = dst;
    const unsigned char *s = src;
    for (size_t i = 0; i < n; i += 8) {
        size_t k = n - i < 8 ? n - i : 8;
        const unsigned char *from = s ? s + i : zero;
        if (memcmp(d + i, from, k) != 0) memcpy(d + i, from, k);
    }
}

void mw_set_string(char **dst, const char *src, size_t size)
{
    size_t len = strnlen(src, size - 1);
    if (*dst && strlen(*dst) == len && memcmp(*dst, src, len) == 0) return;
    char *s = mw_xmalloc(len + 1);
    memcpy(s, src, len);
    s[len] = '\0';
    free(*dst);
    *dst = s;
}

size_t mw_strlcpy(char *dst, const char *src, size_t size)
{
    size_t n = strlen(src);
    if (size) {
        size_t c = n < size - 1 ? n : size - 1;
        memcpy(dst, src, c);
        dst[c] = '\0';
    }
    return n;
}

void mw_tune_allocator(void)
{
    /* One malloc arena for every thread: the HTTP, GPU and store threads
     * allocate little, and a per-thread arena each keeps its own free
     * memory resident (0.6 MiB on a 100-pod node); the store set this too,
     * but only after the GPU thread had made its arena. */
    mallopt(M_ARENA_MAX, 1);
    mallopt(M_TRIM_THRESHOLD, 2 << 20);
    /* Blocks of 128 KiB and more (a cycle's larger short-lived buffers) get
     * their own mapping, returned when freed: carved from the heap between
     * long-lived allocations (the doctor's history frames) they left holes
     * that stayed resident, 2.7 MiB on a 100-pod node once the history is
     * full. The store sets the same threshold. */
    mallopt(M_MMAP_THRESHOLD, 128 << 10);
}

void mw_release_free_memory(void)
{
    /* malloc_trim(0) also gives back the whole free pages inside the heap,
     * not only its top: the holes that a cycle leaves and the next does not
     * fill. Trimming at every cycle costs about 0.4 ms (the walk of the free
     * lists and the page faults that refill what is reused) and saves
     * 0.5-0.6 MiB on a 100-pod node with 8 GPUs; trimming every tenth cycle
     * saved almost nothing, the holes being refilled in between. */
    malloc_trim(0);
}

int mw_read_small_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n < 0) return -1;
    buf[n] = '\0';
    return 0;
}

int mw_read_secret_file(const char *path, char *out, size_t size, char *why, size_t whysize)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(why, whysize, "%s: %s", path, strerror(errno));
        return -1;
    }
    size_t len = fread(out, 1, size - 1, f);
    int toolong = len == size - 1 && fgetc(f) != EOF;
    fclose(f);
    out[len] = '\0';
    if (toolong) {
        snprintf(why, whysize, "%s: longer than %zu bytes", path, size - 1);
        return -2;
    }
    while (len && isspace((unsigned char)out[len - 1]))
        out[--len] = '\0';
    return 0;
}

int mw_sync_folder(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -errno;
    int rc = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return rc;
}

int mw_sync_parent_folder(const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash) return mw_sync_folder(".");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    if (n >= sizeof(dir)) return -ENAMETOOLONG;
    memcpy(dir, path, n);
    dir[n] = 0;
    return mw_sync_folder(dir);
}

ptrdiff_t mw_utf8_len(const char *text)
{
    const unsigned char *str = (const unsigned char *)text, *s = str;
    while (*s) {
        unsigned c = *s;
        if (c < 0x80) {
            s++;
            continue;
        }
        int n = (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
        if (n < 0 || (n == 1 && c < 0xc2) || (n == 3 && c > 0xf4)) return -1;
        for (int i = 1; i <= n; i++)
            if ((s[i] & 0xc0) != 0x80) return -1;
        if (n == 2 && ((c == 0xe0 && s[1] < 0xa0) || (c == 0xed && s[1] >= 0xa0))) return -1;
        if (n == 3 && ((c == 0xf0 && s[1] < 0x90) || (c == 0xf4 && s[1] >= 0x90))) return -1;
        s += n + 1;
    }
    return s - str;
}

int mw_utf8_put(unsigned long cp, char out[4])
{
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    /* Lead byte: the length's marker bits and the top bits; then 6 bits a
     * continuation byte. */
    int n = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    static const unsigned char lead[5] = {0, 0, 0xc0, 0xe0, 0xf0};
    for (int i = n - 1; i > 0; i--, cp >>= 6)
        out[i] = (char)(0x80 | (cp & 0x3f));
    out[0] = (char)(lead[n] | cp);
    return n;
}
