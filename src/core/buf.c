/* buf.c - growable bounded byte buffer, see buf.h. */
#include "buf.h"
#include "util.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mw_buf_init(mw_buf *b, size_t max)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->max = max;
    b->overflow = 0;
}

void mw_buf_free(mw_buf *b)
{
    free(b->data);
    mw_buf_init(b, b->max);
}

void mw_buf_clear(mw_buf *b)
{
    b->len = 0;
    b->overflow = 0;
    if (b->data) b->data[0] = '\0';
}

int mw_buf_reserve(mw_buf *b, size_t n)
{
    /* Compare without computing len + n + 1 or max + 1, which can wrap. */
    if (n > SIZE_MAX - 1 - b->len || (b->max && (b->len > b->max || n > b->max - b->len))) {
        b->overflow = 1;
        return -1;
    }
    size_t need = b->len + n + 1;
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (b->max && cap - 1 > b->max) cap = b->max + 1;
    b->data = mw_xrealloc(b->data, cap);
    b->data[b->len] = '\0'; /* a fresh buffer is an empty string, not garbage */
    b->cap = cap;
    return 0;
}

int mw_buf_append(mw_buf *b, const void *p, size_t n)
{
    if (mw_buf_reserve(b, n) < 0) return -1;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int mw_buf_puts(mw_buf *b, const char *s)
{
    return mw_buf_append(b, s, strlen(s));
}

int mw_buf_putc(mw_buf *b, char c)
{
    return mw_buf_append(b, &c, 1);
}

int mw_buf_vprintf(mw_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    if (n < 0) {
        va_end(ap2);
        return -1;
    }
    int rc;
    if ((size_t)n < sizeof(tmp)) {
        rc = mw_buf_append(b, tmp, (size_t)n);
    } else if (mw_buf_reserve(b, (size_t)n) < 0) {
        rc = -1;
    } else {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap2);
        b->len += (size_t)n;
        rc = 0;
    }
    va_end(ap2);
    return rc;
}

int mw_buf_printf(mw_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = mw_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

char *mw_buf_steal(mw_buf *b, size_t *len)
{
    if (mw_buf_reserve(b, 0) < 0 && !b->data) return NULL;
    char *p = b->data;
    if (len) *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    b->overflow = 0;
    return p;
}
