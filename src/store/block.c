/* block.c - writing and reading immutable block files.
 *
 * Layout (little-endian):
 *   "MWBLOCK1" (the magic of every format version)
 *   chunk data: chunks back to back: format 1 Gorilla chunks of up to 480
 *               samples; format 2 tscodec.h chunks of up to 2880 (12 h at
 *               15 s), each chosen per chunk and zstd-compressed
 *   symbols:    per symbol: uvarint length, bytes, NUL (sorted, so symbol
 *               order is string order); then u32 offset of each
 *   series:     per series: uvarint nlabels, {uvarint name, uvarint value},
 *               uvarint nchunks, {varint mint, uvarint maxt-mint, uvarint n,
 *               uvarint offset, uvarint length, u32 crc32[, uvarint aggr]}
 *               (aggr since format 3: MW_AGGR_*); zeros to a multiple of 8
 *               bytes; then u64 offset of each series
 *   postings:   sorted u32 series ids per label pair; then a table of
 *               {u32 name, u32 value, u64 offset, u32 count} sorted by pair
 *   extension:  (format 3) u64 resolution in ms (0: raw), u64 number of
 *               source blocks, u64 seq of each
 *   footer:     the section offsets and counts, the block's meta, the
 *               format version (0 in blocks of format 1, written before it
 *               was recorded), the extension's offset (format 3; 0 before),
 *               u32 crc32 of everything from the symbols to here, "MWBLKEND"
 * Only the chunks a query needs are touched; the index is checked once at
 * open (read with pread, so checking does not add to the resident set). */
#include "block.h"
#include "../core/buf.h"
#include "../core/bytes.h"
#include "../core/log.h"
#include "../core/util.h"
#include "tscodec.h"
#include "varint.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const char blk_magic[8] = {'M', 'W', 'B', 'L', 'O', 'C', 'K', '1'};
static const char blk_end[8] = {'M', 'W', 'B', 'L', 'K', 'E', 'N', 'D'};
#define FOOTER_WORDS 19 /* u64 fields before the crc */
#define FOOTER_SIZE (FOOTER_WORDS * 8 + 4 + 8)
/* Re-encoded chunks hold up to this many samples (format 2: the per-chunk
 * costs, index entry and zstd frame, spread over 12 h at 15 s). */
#define BLOCK_CHUNK_SAMPLES 2880
#define OUT_BUF (1u << 20) /* the writer's buffer before each write(2) */
_Static_assert(BLOCK_CHUNK_SAMPLES <= MW_TSC_MAX_SAMPLES, "chunks the codec takes");

int mw_labels_cmp(const mw_label *a, size_t na, const mw_label *b, size_t nb)
{
    for (size_t i = 0; i < na && i < nb; i++) {
        int c = strcmp(a[i].name, b[i].name);
        if (c) return c;
        c = strcmp(a[i].value, b[i].value);
        if (c) return c;
    }
    return na < nb ? -1 : na > nb;
}

/* ---- reading ---- */

struct mw_block {
    _Atomic int refs;
    _Atomic int doomed;
    char path[PATH_MAX];
    const uint8_t *p;
    size_t size;
    int mapped;
    mw_block_meta meta;
    uint64_t sym_off, symtab_off, series_off, seriestab_off, post_off, ptab_off, index_end;
    uint64_t nsym, npost;
    uint32_t version; /* block format */
};

/* Skip the rest of a chunk entry after its crc: the aggregate tag of
 * format 3 (raw before). */
static int entry_aggr(const mw_block *b, mw_rd *r)
{
    if (b->version < 3) return MW_AGGR_RAW;
    uint64_t a = mw_rd_uvarint(r);
    return a < MW_AGGRS ? (int)a : -1;
}

static const char *sym_str(const mw_block *b, uint32_t sym, size_t *len)
{
    if (sym >= b->nsym) return NULL;
    uint64_t off = b->sym_off + mw_get_le32(b->p + b->symtab_off + (uint64_t)sym * 4);
    mw_rd r = {b->p, b->symtab_off, off, 0};
    uint64_t l = mw_rd_uvarint(&r);
    const uint8_t *s = mw_rd_bytes(&r, l + 1);
    if (!s || s[l] != 0) return NULL;
    if (len) *len = l;
    return (const char *)s;
}

/* Symbol of a string by binary search (symbols are sorted): 0, or -1. */
static int sym_find(const mw_block *b, const char *s, uint32_t *out)
{
    uint64_t lo = 0, hi = b->nsym;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        const char *m = sym_str(b, (uint32_t)mid, NULL);
        if (!m) return -1;
        int c = strcmp(m, s);
        if (c == 0) {
            *out = (uint32_t)mid;
            return 0;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

static int check_block(mw_block *b, char *err, size_t errsize)
{
    if (b->size < sizeof(blk_magic) + FOOTER_SIZE || memcmp(b->p, blk_magic, 8) != 0 ||
        memcmp(b->p + b->size - 8, blk_end, 8) != 0) {
        snprintf(err, errsize, "not a block file (bad magic)");
        return -1;
    }
    const uint8_t *f = b->p + b->size - FOOTER_SIZE;
    uint64_t w[FOOTER_WORDS];
    for (int i = 0; i < FOOTER_WORDS; i++)
        w[i] = mw_get_le64(f + 8 * i);
    b->sym_off = w[0];
    b->symtab_off = w[1];
    b->series_off = w[2];
    b->seriestab_off = w[3];
    b->post_off = w[4];
    b->ptab_off = w[5];
    b->nsym = w[6];
    b->meta.nseries = w[7];
    b->npost = w[8];
    b->meta.mint = (int64_t)w[9];
    b->meta.maxt = (int64_t)w[10];
    b->meta.nchunks = w[11];
    b->meta.nsamples = w[12];
    b->meta.seq = w[13];
    b->meta.level = (uint32_t)w[14];
    b->meta.chunk_seq_min = (uint32_t)w[15];
    b->meta.chunk_seq_max = (uint32_t)w[16];
    b->version = w[17] ? (uint32_t)w[17] : 1;
    if (w[17] > MW_BLOCK_FORMAT) {
        /* Checked before anything else of the index: a newer build may
         * have changed it. Not corrupt: the caller keeps the file. */
        snprintf(err, errsize,
                 "written in block format %llu, newer than this build reads (formats 1 to %d): "
                 "run a newer mlwatch on this data folder, or move the block away",
                 (unsigned long long)w[17], MW_BLOCK_FORMAT);
        return -2;
    }
    b->meta.version = b->version;
    b->index_end = b->size - FOOTER_SIZE;
    uint64_t end = b->index_end;
    if (b->version >= 3) {
        /* The extension between the postings table and the footer. */
        uint64_t ext = w[18];
        if (ext < b->ptab_off || ext > end || end - ext < 16) {
            snprintf(err, errsize, "inconsistent footer");
            return -1;
        }
        const uint8_t *e = b->p + ext;
        uint64_t ns = mw_get_le64(e + 8);
        if (ns > MW_BLOCK_MAX_SOURCES || end - ext != 16 + ns * 8 || (int64_t)mw_get_le64(e) < 0) {
            snprintf(err, errsize, "inconsistent extension");
            return -1;
        }
        b->meta.resolution_ms = (int64_t)mw_get_le64(e);
        b->meta.nsources = (uint32_t)ns;
        for (uint64_t i = 0; i < ns; i++)
            b->meta.sources[i] = mw_get_le64(e + 16 + 8 * i);
        end = ext;
    }
    /* Sections in order, each table the size its count says. */
    if (!(8 <= b->sym_off && b->sym_off <= b->symtab_off && b->symtab_off <= b->series_off &&
          b->series_off <= b->seriestab_off && b->seriestab_off <= b->post_off &&
          b->post_off <= b->ptab_off && b->ptab_off <= end) ||
        b->nsym > (1ull << 32) || b->meta.nseries > (1ull << 32) || b->npost > (1ull << 32) ||
        b->series_off - b->symtab_off != b->nsym * 4 ||
        b->post_off - b->seriestab_off != b->meta.nseries * 8 ||
        end - b->ptab_off != b->npost * 20) {
        snprintf(err, errsize, "inconsistent footer");
        return -1;
    }
    uint32_t want = mw_get_le32(f + FOOTER_WORDS * 8);
    uint32_t crc = (uint32_t)crc32(0, NULL, 0);
    if (b->mapped) {
        /* pread, not the mapping: checking must not fault the index in. */
        int fd = open(b->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            snprintf(err, errsize, "cannot reopen: %s", strerror(errno));
            return -1;
        }
        uint8_t *buf = mw_xmalloc(1 << 20);
        uint64_t off = b->sym_off, stop = b->size - 12;
        while (off < stop) {
            size_t n = stop - off < (1 << 20) ? (size_t)(stop - off) : (1 << 20);
            ssize_t k = pread(fd, buf, n, (off_t)off);
            if (k <= 0) break;
            crc = (uint32_t)crc32(crc, buf, (uInt)k);
            off += (uint64_t)k;
        }
        free(buf);
        close(fd);
    } else {
        crc = (uint32_t)crc32(crc, b->p + b->sym_off, (uInt)(b->size - 12 - b->sym_off));
    }
    if (crc != want) {
        snprintf(err, errsize, "index checksum mismatch");
        return -1;
    }
    /* Every offset the tables hold stays inside its section. */
    for (uint64_t i = 0; i < b->nsym; i++)
        if (b->sym_off + mw_get_le32(b->p + b->symtab_off + i * 4) >= b->symtab_off) {
            snprintf(err, errsize, "symbol %llu out of range", (unsigned long long)i);
            return -1;
        }
    for (uint64_t i = 0; i < b->meta.nseries; i++) {
        uint64_t o = mw_get_le64(b->p + b->seriestab_off + i * 8);
        if (o < b->series_off || o >= b->seriestab_off) {
            snprintf(err, errsize, "series %llu out of range", (unsigned long long)i);
            return -1;
        }
    }
    for (uint64_t i = 0; i < b->npost; i++) {
        const uint8_t *e = b->p + b->ptab_off + i * 20;
        uint64_t o = mw_get_le64(e + 8), c = mw_get_le32(e + 16);
        if (mw_get_le32(e) >= b->nsym || mw_get_le32(e + 4) >= b->nsym || o < b->post_off ||
            o > b->ptab_off || (b->ptab_off - o) / 4 < c) {
            snprintf(err, errsize, "postings entry %llu out of range", (unsigned long long)i);
            return -1;
        }
    }
    b->meta.size = b->size;
    return 0;
}

mw_block *mw_block_open_mem(const uint8_t *p, size_t n, char *err, size_t errsize)
{
    mw_block *b = mw_xcalloc(1, sizeof(*b));
    b->p = p;
    b->size = n;
    atomic_store(&b->refs, 1);
    int rc = check_block(b, err, errsize);
    if (rc < 0) {
        free(b);
        errno = rc == -2 ? ENOTSUP : EINVAL;
        return NULL;
    }
    return b;
}

mw_block *mw_block_open(const char *path, char *err, size_t errsize)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errsize, "cannot open: %s", strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || st.st_size == 0) {
        snprintf(err, errsize, "empty or unreadable");
        close(fd);
        return NULL;
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) {
        snprintf(err, errsize, "cannot map: %s", strerror(errno));
        return NULL;
    }
    madvise(m, (size_t)st.st_size, MADV_RANDOM);
    mw_block *b = mw_xcalloc(1, sizeof(*b));
    b->p = m;
    b->size = (size_t)st.st_size;
    b->mapped = 1;
    mw_strlcpy(b->path, path, sizeof(b->path));
    atomic_store(&b->refs, 1);
    int rc = check_block(b, err, errsize);
    if (rc < 0) {
        munmap(m, b->size);
        free(b);
        errno = rc == -2 ? ENOTSUP : EINVAL;
        return NULL;
    }
    return b;
}

void mw_block_ref(mw_block *b)
{
    atomic_fetch_add(&b->refs, 1);
}

void mw_block_doom(mw_block *b)
{
    atomic_store(&b->doomed, 1);
}

void mw_block_unref(mw_block *b)
{
    if (!b || atomic_fetch_sub(&b->refs, 1) != 1) return;
    if (b->mapped) munmap((void *)b->p, b->size);
    if (atomic_load(&b->doomed) && b->path[0]) unlink(b->path);
    free(b);
}

const mw_block_meta *mw_block_get_meta(const mw_block *b)
{
    return &b->meta;
}

static int series_reader(const mw_block *b, uint32_t id, mw_rd *r)
{
    if (id >= b->meta.nseries) return -1;
    *r =
        (mw_rd){b->p, b->seriestab_off, mw_get_le64(b->p + b->seriestab_off + (uint64_t)id * 8), 0};
    return 0;
}

int mw_block_labels(const mw_block *b, uint32_t id, mw_label *out, size_t cap, size_t *n)
{
    mw_rd r;
    if (series_reader(b, id, &r) < 0) return -1;
    uint64_t nl = mw_rd_uvarint(&r);
    if (nl > cap || nl == 0) return -1;
    for (uint64_t i = 0; i < nl; i++) {
        uint64_t a = mw_rd_uvarint(&r), v = mw_rd_uvarint(&r);
        if (r.bad || a >= b->nsym || v >= b->nsym) return -1;
        out[i].name = sym_str(b, (uint32_t)a, NULL);
        out[i].value = sym_str(b, (uint32_t)v, NULL);
        if (!out[i].name || !out[i].value) return -1;
    }
    *n = nl;
    return 0;
}

int mw_block_read(const mw_block *b, uint32_t id, int64_t mint, int64_t maxt, mw_samples *out)
{
    return mw_block_read_aggr(b, id, MW_AGGR_RAW, mint, maxt, out);
}

int mw_block_read_aggr(const mw_block *b, uint32_t id, int aggr, int64_t mint, int64_t maxt,
                       mw_samples *out)
{
    mw_rd r;
    if (series_reader(b, id, &r) < 0) return -2;
    uint64_t nl = mw_rd_uvarint(&r);
    for (uint64_t i = 0; i < nl * 2 && !r.bad; i++)
        mw_rd_uvarint(&r);
    uint64_t nc = mw_rd_uvarint(&r);
    for (uint64_t c = 0; c < nc && !r.bad; c++) {
        int64_t cmin = mw_rd_varint(&r);
        int64_t cmax = (int64_t)((uint64_t)cmin + mw_rd_uvarint(&r));
        uint64_t n = mw_rd_uvarint(&r), off = mw_rd_uvarint(&r), len = mw_rd_uvarint(&r);
        uint32_t crc = mw_rd_u32(&r);
        int tag = entry_aggr(b, &r);
        if (r.bad || tag < 0) return -2;
        if (tag != aggr || cmax < mint || cmin > maxt) continue;
        if (off < 8 || off > b->sym_off || len > b->sym_off - off || n > UINT32_MAX) return -2;
        if ((uint32_t)crc32(0, b->p + off, (uInt)len) != crc) {
            mw_log_once(MW_LOG_ERROR, "store", b->path,
                        "block %s: chunk at offset %llu has a "
                        "bad checksum; its samples are skipped",
                        b->path, (unsigned long long)off);
            out->damaged++;
            continue;
        }
        if (b->version == 1) {
            mw_gorilla_dec d;
            mw_gorilla_dec_init(&d, b->p + off, len, (uint32_t)n);
            int64_t t;
            double v;
            while (mw_gorilla_next(&d, &t, &v) == 1) {
                if (t < mint) continue;
                if (t > maxt) break;
                if (mw_samples_push(out, t, v) < 0) return -1;
            }
            continue;
        }
        /* Format 2: the whole chunk decoded in place past the samples
         * already there, then the range kept. */
        if (n == 0 || n > MW_TSC_MAX_SAMPLES) return -2;
        if (out->cap - out->n < n) {
            size_t cap = out->cap ? out->cap : 64;
            while (cap - out->n < n)
                cap *= 2;
            out->t = mw_xrealloc(out->t, cap * sizeof(int64_t));
            out->v = mw_xrealloc(out->v, cap * sizeof(double));
            out->cap = cap;
        }
        int64_t *ct = out->t + out->n;
        double *cv = out->v + out->n;
        if (mw_tsc_decode(b->p + off, len, (uint32_t)n, ct, cv, NULL) < 0) {
            mw_log_once(MW_LOG_ERROR, "store", b->path,
                        "block %s: chunk at offset %llu does not decode; its samples are skipped",
                        b->path, (unsigned long long)off);
            out->damaged++;
            continue;
        }
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            if (ct[i] >= mint && ct[i] <= maxt) {
                ct[k] = ct[i];
                cv[k] = cv[i];
                k++;
            }
        if (out->max && out->n + k > out->max) return -1;
        out->n += k;
    }
    return r.bad ? -2 : 0;
}

uint32_t mw_block_version(const mw_block *b)
{
    return b->version;
}

int mw_block_chunks(const mw_block *b, uint32_t id, mw_block_chunk_fn fn, void *arg)
{
    mw_rd r;
    if (series_reader(b, id, &r) < 0) return -1;
    uint64_t nl = mw_rd_uvarint(&r);
    for (uint64_t i = 0; i < nl * 2 && !r.bad; i++)
        mw_rd_uvarint(&r);
    uint64_t nc = mw_rd_uvarint(&r);
    for (uint64_t c = 0; c < nc && !r.bad; c++) {
        mw_rd_varint(&r);
        mw_rd_uvarint(&r);
        uint64_t n = mw_rd_uvarint(&r), off = mw_rd_uvarint(&r), len = mw_rd_uvarint(&r);
        mw_rd_u32(&r);
        if (entry_aggr(b, &r) < 0) return -1;
        if (r.bad || off < 8 || off > b->sym_off || len > b->sym_off - off || n > UINT32_MAX)
            return -1;
        fn(arg, b->p + off, (size_t)len, (uint32_t)n);
    }
    return r.bad ? -1 : 0;
}

/* Postings table entry i: name, value, ids. */
static void post_entry(const mw_block *b, uint64_t i, uint32_t *name, uint32_t *value,
                       const uint8_t **ids, uint32_t *count)
{
    const uint8_t *e = b->p + b->ptab_off + i * 20;
    *name = mw_get_le32(e);
    *value = mw_get_le32(e + 4);
    *ids = b->p + mw_get_le64(e + 8);
    *count = mw_get_le32(e + 16);
}

static void emit_ids(const uint8_t *p, uint32_t count, mw_postings_fn fn, void *arg)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* The file's little-endian ids as they lie in the mapping (postings
     * are written 4-byte aligned): no copy of a long list. */
    if (((uintptr_t)p & 3) == 0) {
        fn(arg, (const uint32_t *)(const void *)p, count);
        return;
    }
#endif
    uint32_t tmp[1024];
    while (count) {
        uint32_t n = count < 1024 ? count : 1024;
        for (uint32_t i = 0; i < n; i++)
            tmp[i] = mw_get_le32(p + 4 * i);
        fn(arg, tmp, n);
        p += 4 * n;
        count -= n;
    }
}

/* First postings entry with name >= (name, value). */
static uint64_t post_lower(const mw_block *b, uint32_t name, uint32_t value)
{
    uint64_t lo = 0, hi = b->npost;
    while (lo < hi) {
        uint64_t mid = (lo + hi) / 2;
        const uint8_t *e = b->p + b->ptab_off + mid * 20;
        uint32_t n = mw_get_le32(e), v = mw_get_le32(e + 4);
        if (n < name || (n == name && v < value))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The postings of name=value: 0 and *ids set, or -1 when absent. */
static int blk_postings(const mw_block *b, const char *name, const char *value, const uint8_t **ids,
                        uint32_t *count)
{
    uint32_t n, v;
    if (sym_find(b, name, &n) < 0 || sym_find(b, value, &v) < 0) return -1;
    uint64_t i = post_lower(b, n, v);
    if (i >= b->npost) return -1;
    uint32_t en, ev;
    post_entry(b, i, &en, &ev, ids, count);
    return en == n && ev == v ? 0 : -1;
}

static void blk_lookup(void *ctx, const char *name, const char *value, mw_postings_fn fn, void *arg)
{
    const uint8_t *ids;
    uint32_t count;
    if (blk_postings(ctx, name, value, &ids, &count) == 0) emit_ids(ids, count, fn, arg);
}

static size_t blk_count(void *ctx, const char *name, const char *value)
{
    const uint8_t *ids;
    uint32_t count;
    return blk_postings(ctx, name, value, &ids, &count) == 0 ? count : 0;
}

typedef struct value_fwd {
    void (*fn)(void *arg, const char *value, const uint32_t *ids, size_t n);
    void *arg;
    const char *value;
} value_fwd;

static void fwd_ids(void *arg, const uint32_t *ids, size_t n)
{
    value_fwd *f = arg;
    f->fn(f->arg, f->value, ids, n);
}

static void blk_values(void *ctx, const char *name,
                       void (*fn)(void *arg, const char *value, const uint32_t *ids, size_t n),
                       void *arg)
{
    const mw_block *b = ctx;
    uint32_t n;
    if (sym_find(b, name, &n) < 0) return;
    for (uint64_t i = post_lower(b, n, 0); i < b->npost; i++) {
        uint32_t en, ev, count;
        const uint8_t *ids;
        post_entry(b, i, &en, &ev, &ids, &count);
        if (en != n) break;
        value_fwd f = {fn, arg, sym_str(b, ev, NULL)};
        if (f.value) emit_ids(ids, count, fwd_ids, &f);
    }
}

static void blk_all(void *ctx, mw_ids *out)
{
    const mw_block *b = ctx;
    for (uint64_t i = 0; i < b->meta.nseries; i++)
        mw_ids_push(out, (uint32_t)i);
}

const mw_index_ops mw_block_index_ops = {blk_lookup, blk_values, blk_all, blk_count};

/* ---- writing ---- */

struct mw_block_writer {
    char path[PATH_MAX];
    int fd;       /* -1 once closed */
    mw_buf out;   /* written to fd in pieces of OUT_BUF bytes */
    uint64_t off; /* bytes written */
    mw_symtab sym;
    mw_buf series;     /* series records with provisional symbol ids */
    mw_ids series_off; /* offsets into series (as pairs of u32: low, high) */
    uint64_t nseries;
    mw_postings *post; /* by provisional pair id */
    uint32_t post_cap;
    mw_block_meta meta;
    mw_tsc_enc *enc;
    int err;
};

static void wr(mw_block_writer *w, const void *p, size_t n);
static void add_stream(mw_block_writer *w, const mw_block_stream *st);

mw_block_writer *mw_block_writer_new(const char *path, int *err)
{
    mw_block_writer *w = mw_xcalloc(1, sizeof(*w));
    mw_strlcpy(w->path, path, sizeof(w->path));
    /* Plain write(2) through a buffer of ours rather than stdio: the same
     * calls as the WAL and the snapshot, which the crash tests' faultfs
     * intercepts (stdio's writes bypass it), so a missing fsync here shows. */
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        *err = -errno;
        free(w);
        return NULL;
    }
    mw_buf_init(&w->out, 0);
    mw_symtab_init(&w->sym);
    mw_buf_init(&w->series, 0);
    w->meta.mint = INT64_MAX;
    w->meta.maxt = INT64_MIN;
    w->enc = mw_tsc_enc_new();
    w->off = 0;
    wr(w, blk_magic, 8);
    return w;
}

/* Write out what is buffered; the first error sticks in w->err. */
static void flush_out(mw_block_writer *w)
{
    size_t done = 0;
    while (!w->err && done < w->out.len) {
        ssize_t k = write(w->fd, w->out.data + done, w->out.len - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            w->err = k < 0 ? -errno : -EIO;
        else
            done += (size_t)k;
    }
    mw_buf_clear(&w->out);
}

static void wr(mw_block_writer *w, const void *p, size_t n)
{
    if (!w->err) {
        mw_buf_append(&w->out, p, n);
        if (w->out.len >= OUT_BUF) flush_out(w);
    }
    w->off += n;
}

int mw_block_writer_add(mw_block_writer *w, const mw_label *labels, size_t n, const int64_t *t,
                        const double *v, size_t nsamples)
{
    mw_block_stream st = {MW_AGGR_RAW, t, v, nsamples};
    return mw_block_writer_add_streams(w, labels, n, &st, 1);
}

int mw_block_writer_add_streams(mw_block_writer *w, const mw_label *labels, size_t n,
                                const mw_block_stream *st, size_t nst)
{
    size_t total = 0;
    for (size_t i = 0; i < nst; i++)
        total += st[i].n;
    if (!total || w->err) return w->err;
    mw_ids_push(&w->series_off, (uint32_t)w->series.len);
    mw_ids_push(&w->series_off, (uint32_t)((uint64_t)w->series.len >> 32));
    uint32_t id = (uint32_t)w->nseries++;
    mw_buf_uvarint(&w->series, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t a = mw_sym_intern(&w->sym, labels[i].name, strlen(labels[i].name));
        uint32_t b = mw_sym_intern(&w->sym, labels[i].value, strlen(labels[i].value));
        uint32_t pr = mw_pair_intern(&w->sym, a, b);
        mw_buf_uvarint(&w->series, a);
        mw_buf_uvarint(&w->series, b);
        if (pr >= w->post_cap) {
            uint32_t cap = w->post_cap ? w->post_cap * 2 : 1024;
            while (cap <= pr)
                cap *= 2;
            w->post = mw_xrealloc(w->post, cap * sizeof(mw_postings));
            memset(w->post + w->post_cap, 0, (cap - w->post_cap) * sizeof(mw_postings));
            w->post_cap = cap;
        }
        mw_postings *p = &w->post[pr];
        if (p->n == p->cap) {
            p->cap = p->cap ? p->cap * 2 : 4;
            p->ids = mw_xrealloc(p->ids, p->cap * sizeof(uint32_t));
        }
        p->ids[p->n++] = id;
    }
    size_t nchunks = 0;
    for (size_t i = 0; i < nst; i++)
        nchunks += (st[i].n + BLOCK_CHUNK_SAMPLES - 1) / BLOCK_CHUNK_SAMPLES;
    mw_buf_uvarint(&w->series, nchunks);
    for (size_t i = 0; i < nst; i++)
        add_stream(w, &st[i]);
    return w->err;
}

static void add_stream(mw_block_writer *w, const mw_block_stream *st)
{
    const int64_t *t = st->t;
    const double *v = st->v;
    size_t nsamples = st->n;
    if (!nsamples) return;
    size_t nchunks = (nsamples + BLOCK_CHUNK_SAMPLES - 1) / BLOCK_CHUNK_SAMPLES;
    for (size_t c = 0; c < nchunks; c++) {
        size_t from = c * BLOCK_CHUNK_SAMPLES;
        size_t to = from + BLOCK_CHUNK_SAMPLES < nsamples ? from + BLOCK_CHUNK_SAMPLES : nsamples;
        size_t len;
        int kind;
        const uint8_t *chunk = mw_tsc_encode(w->enc, t + from, v + from, to - from, &len, &kind);
        w->meta.kinds[kind]++;
        mw_buf_varint(&w->series, t[from]);
        mw_buf_uvarint(&w->series, (uint64_t)t[to - 1] - (uint64_t)t[from]);
        mw_buf_uvarint(&w->series, to - from);
        mw_buf_uvarint(&w->series, w->off);
        mw_buf_uvarint(&w->series, len);
        mw_buf_u32(&w->series, (uint32_t)crc32(0, chunk, (uInt)len));
        mw_buf_uvarint(&w->series, (uint64_t)st->aggr);
        wr(w, chunk, len);
        w->meta.nchunks++;
    }
    if (t[0] < w->meta.mint) w->meta.mint = t[0];
    if (t[nsamples - 1] > w->meta.maxt) w->meta.maxt = t[nsamples - 1];
    w->meta.nsamples += nsamples;
}

static const mw_symtab *sort_sym;
static int cmp_sym(const void *a, const void *b)
{
    return strcmp(sort_sym->strs[*(const uint32_t *)a], sort_sym->strs[*(const uint32_t *)b]);
}

typedef struct ptab_row {
    uint32_t name, value, pair;
} ptab_row;
static int cmp_row(const void *a, const void *b)
{
    const ptab_row *x = a, *y = b;
    if (x->name != y->name) return x->name < y->name ? -1 : 1;
    return x->value < y->value ? -1 : x->value > y->value;
}

int mw_block_writer_finish(mw_block_writer *w, mw_block_meta *meta, const char *final_path)
{
    /* Symbols sorted by string; old -> new ids. */
    uint32_t nsym = w->sym.n;
    uint32_t *order = mw_xmalloc((nsym ? nsym : 1) * sizeof(uint32_t));
    uint32_t *remap = mw_xmalloc((nsym ? nsym : 1) * sizeof(uint32_t));
    for (uint32_t i = 0; i < nsym; i++)
        order[i] = i;
    sort_sym = &w->sym; /* compactions run one at a time (maint_mu) */
    qsort(order, nsym, sizeof(uint32_t), cmp_sym);
    for (uint32_t i = 0; i < nsym; i++)
        remap[order[i]] = i;
    uint64_t crc = crc32(0, NULL, 0);
    mw_buf sec;
    mw_buf_init(&sec, 0);
    uint64_t sym_off = w->off;
    mw_buf tab;
    mw_buf_init(&tab, 0);
    for (uint32_t i = 0; i < nsym; i++) {
        mw_buf_u32(&tab, (uint32_t)sec.len);
        uint32_t s = order[i];
        mw_buf_uvarint(&sec, w->sym.lens[s]);
        mw_buf_append(&sec, w->sym.strs[s], w->sym.lens[s] + 1);
    }
    crc = crc32((uLong)crc, (const Bytef *)sec.data, (uInt)sec.len);
    wr(w, sec.data, sec.len);
    uint64_t symtab_off = w->off;
    crc = crc32((uLong)crc, (const Bytef *)tab.data, (uInt)tab.len);
    wr(w, tab.data, tab.len);
    /* Series, rewritten with the final symbol ids. */
    uint64_t series_off = w->off;
    mw_buf_clear(&sec);
    mw_buf_clear(&tab);
    mw_rd r = {(const uint8_t *)w->series.data, w->series.len, 0, 0};
    for (uint64_t k = 0; k < w->nseries; k++) {
        mw_buf_u64(&tab, series_off + sec.len);
        uint64_t nl = mw_rd_uvarint(&r);
        mw_buf_uvarint(&sec, nl);
        for (uint64_t i = 0; i < nl * 2; i++)
            mw_buf_uvarint(&sec, remap[mw_rd_uvarint(&r)]);
        uint64_t nc = mw_rd_uvarint(&r);
        mw_buf_uvarint(&sec, nc);
        for (uint64_t c = 0; c < nc; c++) {
            mw_buf_varint(&sec, mw_rd_varint(&r));
            for (int j = 0; j < 4; j++)
                mw_buf_uvarint(&sec, mw_rd_uvarint(&r));
            mw_buf_u32(&sec, mw_rd_u32(&r));
            mw_buf_uvarint(&sec, mw_rd_uvarint(&r)); /* the aggregate */
        }
    }
    /* Zeros up to a multiple of 8, so that the series table and the
     * postings after it are aligned in the mapping (readers use the ids in
     * place; blocks written before are read through a copy). */
    while ((w->off + sec.len) % 8)
        mw_buf_append(&sec, "", 1);
    crc = crc32((uLong)crc, (const Bytef *)sec.data, (uInt)sec.len);
    wr(w, sec.data, sec.len);
    uint64_t seriestab_off = w->off;
    crc = crc32((uLong)crc, (const Bytef *)tab.data, (uInt)tab.len);
    wr(w, tab.data, tab.len);
    /* Postings, in (name, value) string order. */
    uint32_t np = w->sym.npairs;
    ptab_row *rows = mw_xmalloc((np ? np : 1) * sizeof(ptab_row));
    for (uint32_t p = 0; p < np; p++)
        rows[p] = (ptab_row){remap[w->sym.pairs[p][0]], remap[w->sym.pairs[p][1]], p};
    qsort(rows, np, sizeof(ptab_row), cmp_row);
    uint64_t post_off = w->off;
    mw_buf_clear(&sec);
    mw_buf_clear(&tab);
    for (uint32_t i = 0; i < np; i++) {
        const mw_postings *p = &w->post[rows[i].pair];
        mw_buf_u32(&tab, rows[i].name);
        mw_buf_u32(&tab, rows[i].value);
        mw_buf_u64(&tab, post_off + sec.len);
        mw_buf_u32(&tab, p->n);
        for (uint32_t j = 0; j < p->n; j++)
            mw_buf_u32(&sec, p->ids[j]);
    }
    crc = crc32((uLong)crc, (const Bytef *)sec.data, (uInt)sec.len);
    wr(w, sec.data, sec.len);
    uint64_t ptab_off = w->off;
    crc = crc32((uLong)crc, (const Bytef *)tab.data, (uInt)tab.len);
    wr(w, tab.data, tab.len);
    /* The extension: resolution and sources. */
    uint64_t ext_off = w->off;
    mw_buf_clear(&sec);
    uint32_t nsrc = meta->nsources < MW_BLOCK_MAX_SOURCES ? meta->nsources : MW_BLOCK_MAX_SOURCES;
    mw_buf_u64(&sec, (uint64_t)meta->resolution_ms);
    mw_buf_u64(&sec, nsrc);
    for (uint32_t i = 0; i < nsrc; i++)
        mw_buf_u64(&sec, meta->sources[i]);
    crc = crc32((uLong)crc, (const Bytef *)sec.data, (uInt)sec.len);
    wr(w, sec.data, sec.len);
    if (w->nseries == 0) w->meta.mint = w->meta.maxt = 0;
    uint64_t words[FOOTER_WORDS] = {sym_off,
                                    symtab_off,
                                    series_off,
                                    seriestab_off,
                                    post_off,
                                    ptab_off,
                                    nsym,
                                    w->nseries,
                                    np,
                                    (uint64_t)w->meta.mint,
                                    (uint64_t)w->meta.maxt,
                                    w->meta.nchunks,
                                    w->meta.nsamples,
                                    meta->seq,
                                    meta->level,
                                    meta->chunk_seq_min,
                                    meta->chunk_seq_max,
                                    MW_BLOCK_FORMAT,
                                    ext_off};
    mw_buf_clear(&sec);
    for (int i = 0; i < FOOTER_WORDS; i++)
        mw_buf_u64(&sec, words[i]);
    crc = crc32((uLong)crc, (const Bytef *)sec.data, (uInt)sec.len);
    mw_buf_u32(&sec, (uint32_t)crc);
    mw_buf_append(&sec, blk_end, 8);
    wr(w, sec.data, sec.len);
    mw_buf_free(&sec);
    mw_buf_free(&tab);
    free(rows);
    free(order);
    free(remap);
    int rc = w->err;
    flush_out(w);
    if (!rc) rc = w->err;
    if (!rc && fsync(w->fd) < 0) rc = -errno;
    if (close(w->fd) != 0 && !rc) rc = -errno;
    w->fd = -1;
    if (!rc && rename(w->path, final_path) < 0) rc = -errno;
    /* The caller deletes what the block replaces (chunk files, merged
     * blocks) next: the new name must be on disk first. */
    if (!rc && (rc = mw_sync_parent_folder(final_path)) < 0) unlink(final_path);
    if (rc) unlink(w->path);
    meta->nseries = w->nseries;
    meta->nsamples = w->meta.nsamples;
    meta->nchunks = w->meta.nchunks;
    meta->mint = w->meta.mint;
    meta->maxt = w->meta.maxt;
    meta->size = w->off;
    meta->version = MW_BLOCK_FORMAT;
    memcpy(meta->kinds, w->meta.kinds, sizeof(meta->kinds));
    w->err = rc;
    mw_block_writer_abort(w);
    return rc;
}

void mw_block_writer_abort(mw_block_writer *w)
{
    if (!w) return;
    if (w->fd >= 0) {
        close(w->fd);
        unlink(w->path);
    }
    mw_buf_free(&w->out);
    mw_tsc_enc_free(w->enc);
    mw_symtab_free(&w->sym);
    mw_buf_free(&w->series);
    mw_ids_free(&w->series_off);
    for (uint32_t p = 0; p < w->post_cap; p++)
        free(w->post[p].ids);
    free(w->post);
    free(w);
}
