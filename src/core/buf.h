/* buf.h - growable byte buffer with an upper bound.
 *
 * Used for file contents and rendered output. Every buffer has a maximum size
 * so that no input (a huge /proc file, a hostile request body) can make the
 * agent's memory grow without bound. */
#ifndef MW_BUF_H
#define MW_BUF_H

#include <stdarg.h>
#include <stddef.h>

typedef struct mw_buf {
    char *data; /* NUL-terminated whenever it is not NULL */
    size_t len, cap;
    size_t max;   /* 0 = unbounded */
    int overflow; /* set when an append was refused (whole) at max */
} mw_buf;

void mw_buf_init(mw_buf *b, size_t max);
void mw_buf_free(mw_buf *b);
void mw_buf_clear(mw_buf *b);
/* Ensure room for n more bytes plus a NUL; returns 0, or -1 past max. */
int mw_buf_reserve(mw_buf *b, size_t n);
int mw_buf_append(mw_buf *b, const void *p, size_t n);
int mw_buf_puts(mw_buf *b, const char *s);
int mw_buf_putc(mw_buf *b, char c);
int mw_buf_printf(mw_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int mw_buf_vprintf(mw_buf *b, const char *fmt, va_list ap);
/* Hand the bytes to the caller (who frees them); the buffer is left empty. */
char *mw_buf_steal(mw_buf *b, size_t *len);

#endif
