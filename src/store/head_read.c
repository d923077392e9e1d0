/* head_read.c - reading many head series at once, in chunk-file order.
 *
 * A range query reads every head chunk of thousands of series: about 20
 * records of ~170 bytes per series and hour, scattered over the chunk files
 * (each round of appends cuts chunks of all series, so one series' records
 * lie megabytes apart, and series of one metric lie close together). One
 * pread per record made the syscalls a third of a query's time.
 *
 * Instead, a batch of series is walked together: a max-heap holds the next
 * record reference of every series, and records are visited in descending
 * file order (newest file first, then downwards in the file), so that one
 * read window (a single pread of up to WIN_MAX bytes ending at the record
 * wanted) serves all the batch's records within it. The window's size
 * follows the observed distance between wanted records: wide when they are
 * dense, one record when they are sparse (copying a large window for a few
 * records costs more than the syscalls it saves).
 *
 * Records are parsed and checksummed as they are visited; their Gorilla
 * payloads are kept (in pieces, bounded by the sample budget) until a
 * series' chain is complete, then each series is decoded oldest chunk first
 * into exact-size arrays, in the order of ids: results do not depend on the
 * reading order.
 *
 * The chunk files are append-only and a record never changes once written,
 * so bytes read stay valid for the whole query. They are read with pread on
 * the head's descriptors, never mapped: a file deleted by compaction while a
 * query runs must not fault (the descriptor keeps the data readable). A
 * window shorter than asked for (end of the file, being appended) is handled
 * like a short read of one record. Memory is per call (the window, the
 * heap, the kept payloads) and freed before returning; nothing per series
 * outlives the call. */
#include "head.h"
#include "../core/bytes.h"
#include "../core/log.h"
#include "../core/util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Largest window read at once. */
#define WIN_MAX (256u << 10)
/* Smallest read: a head record (cut once past MW_HEAD_CHUNK_BYTES: at most
 * one sample, under 20 bytes, beyond it) with its header and checksum. */
#define READ_ONE (MW_CHUNK_HDR_SIZE + 4 + MW_HEAD_CHUNK_BYTES + 32)
/* Records further apart than this are read one by one: a pread costs about
 * as much as copying a few KiB from the page cache. Closer ones share
 * windows of about 8 gaps (measured on the benchmark's data: 4 or 32 gaps
 * cost more CPU). */
#define GAP_DENSE 4096u
/* Kept payloads are stored in pieces growing from PIECE_MIN to PIECE (a
 * small selection must not map and unmap a megabyte per query). PIECE stays
 * below the allocator's mmap threshold (128 KiB, src/core/util.c): pieces
 * mapped afresh for every query (20 MB for 10k series) cost a page fault
 * per 4 KiB (5-8 % of a query's CPU time); from the heap they are reused. */
#define PIECE_MIN (16u << 10)
#define PIECE (96u << 10)

typedef struct pend {
    uint64_t ref;
    uint32_t idx; /* index in ids */
} pend;

typedef struct kept {
    const uint8_t *p; /* Gorilla payload */
    uint32_t idx;     /* the series' index in ids */
    uint16_t n, nbytes;
} kept;

typedef struct piece {
    struct piece *next;
    size_t used, cap;
    uint8_t data[];
} piece;

typedef struct reader {
    mw_head *h;
    uint8_t *win; /* win_cap bytes, grown on demand up to WIN_MAX */
    size_t win_cap;
    uint32_t win_seq; /* window: file, offset of win[0], valid bytes */
    uint64_t win_off; /* UINT64_MAX = empty */
    size_t win_len;
    int fd;            /* descriptor of win_seq */
    uint32_t fd_seq;   /* UINT32_MAX = none */
    uint64_t last_ref; /* previous record visited, for the gap estimate */
    uint64_t gap;      /* moving average of the distance between records */
    uint8_t *one;      /* a record larger than the window's part of it */
    piece *pieces;
    kept *k;
    size_t nk, capk;
} reader;

static void heap_push(pend *hp, size_t *n, pend e)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (hp[up].ref >= e.ref) break;
        hp[i] = hp[up];
        i = up;
    }
    hp[i] = e;
}

static pend heap_pop(pend *hp, size_t *n)
{
    pend top = hp[0], e = hp[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && hp[c + 1].ref > hp[c].ref) c++;
        if (hp[c].ref <= e.ref) break;
        hp[i] = hp[c];
        i = c;
    }
    if (*n) hp[i] = e;
    return top;
}

static int file_fd(reader *r, uint32_t seq)
{
    if (r->fd_seq != seq) {
        r->fd = mw_head_read_fd(r->h, seq);
        r->fd_seq = seq;
    }
    return r->fd;
}

/* Bytes of the record at ref, at least MW_CHUNK_HDR_SIZE of them (*avail
 * says how many are there), or NULL when the file has none. */
static const uint8_t *record_at(reader *r, uint64_t ref, size_t *avail)
{
    uint32_t seq = (uint32_t)(ref >> 32);
    uint64_t off = (uint32_t)ref;
    if (r->last_ref && (uint32_t)(r->last_ref >> 32) == seq && r->last_ref > ref) {
        /* One jump (to the next cluster of wanted records) must not make
         * the following dense records look sparse: the sample is capped. */
        uint64_t g = r->last_ref - ref;
        r->gap = (r->gap * 7 + (g < 65536 ? g : 65536)) / 8;
    }
    r->last_ref = ref;
    if (!(seq == r->win_seq && r->win_off != UINT64_MAX && off >= r->win_off &&
          off + MW_CHUNK_HDR_SIZE <= r->win_off + r->win_len)) {
        int fd = file_fd(r, seq);
        if (fd < 0) return NULL;
        size_t w = READ_ONE;
        if (r->gap <= GAP_DENSE) {
            w = (size_t)(r->gap ? r->gap : 1) * 8;
            if (w < READ_ONE) w = READ_ONE;
            if (w > WIN_MAX) w = WIN_MAX;
        }
        /* The window ends just past this record: every later visit is at a
         * lower offset. */
        uint64_t end = off + READ_ONE, start = end > w ? end - w : 0;
        if (r->win_cap < w) { /* grown once or twice per query, no copy */
            size_t cap = r->win_cap ? r->win_cap * 2 : 16384;
            while (cap < w)
                cap *= 2;
            if (cap > WIN_MAX) cap = WIN_MAX;
            free(r->win);
            r->win = mw_xmalloc(cap);
            r->win_cap = cap;
        }
        ssize_t got = pread(fd, r->win, (size_t)(end - start), (off_t)start);
        r->win_seq = seq;
        r->win_off = start;
        r->win_len = got > 0 ? (size_t)got : 0;
        if (off + MW_CHUNK_HDR_SIZE > start + r->win_len) {
            r->win_off = UINT64_MAX;
            return NULL;
        }
    }
    *avail = (size_t)(r->win_off + r->win_len - off);
    return r->win + (off - r->win_off);
}

/* The whole record at ref (header, payload, checksum) parsed and checked:
 * its bytes, or NULL. */
static const uint8_t *record_whole(reader *r, uint64_t ref, const uint8_t *p, size_t avail,
                                   mw_chunk_hdr *hdr)
{
    size_t need = MW_CHUNK_HDR_SIZE + 4 + (size_t)mw_get_le16(p + 6);
    if (avail < need) { /* beyond the window: read it alone */
        if (!r->one) r->one = mw_xmalloc(MW_CHUNK_HDR_SIZE + 4 + 65536);
        int fd = file_fd(r, (uint32_t)(ref >> 32));
        ssize_t got = fd < 0 ? -1 : pread(fd, r->one, need, (off_t)(uint32_t)ref);
        if (got < 0) return NULL;
        p = r->one;
        avail = (size_t)got;
    }
    return mw_chunk_parse(p, avail, hdr) == 0 ? p : NULL;
}

static const uint8_t *keep_bytes(reader *r, const uint8_t *src, size_t n)
{
    piece *pc = r->pieces;
    if (!pc || pc->cap - pc->used < n) {
        size_t cap = pc ? (pc->cap < PIECE ? pc->cap * 2 : PIECE) : PIECE_MIN;
        if (cap < n) cap = n;
        pc = mw_xmalloc(sizeof(piece) + cap);
        pc->next = r->pieces;
        pc->used = 0;
        pc->cap = cap;
        r->pieces = pc;
    }
    uint8_t *dst = pc->data + pc->used;
    memcpy(dst, src, n);
    pc->used += n;
    return dst;
}

/* Append the samples of a chunk within [mint, maxt] to out. */
static void decode_into(const uint8_t *bytes, size_t nbytes, uint32_t n, int64_t mint, int64_t maxt,
                        mw_samples *out)
{
    if (out->cap - out->n < n) {
        while (out->cap - out->n < n)
            out->cap = out->cap ? out->cap * 2 : 256;
        out->t = mw_xrealloc(out->t, out->cap * sizeof(int64_t));
        out->v = mw_xrealloc(out->v, out->cap * sizeof(double));
    }
    int64_t *t = out->t + out->n;
    double *v = out->v + out->n;
    size_t got = mw_gorilla_decode(bytes, nbytes, n, t, v), j = 0;
    /* Keep [mint, maxt] in place (j never passes k). */
    for (size_t k = 0; k < got; k++) {
        if (t[k] < mint) continue;
        if (t[k] > maxt) break;
        t[j] = t[k];
        v[j] = v[k];
        j++;
    }
    out->n += j;
}

/* Over the budget, counting what is already known to be needed. */
static int over(size_t max, const size_t *total, size_t mine)
{
    return max && __atomic_load_n(total, __ATOMIC_RELAXED) + mine > max;
}

int mw_head_read_batch(mw_head *h, const uint32_t *ids, size_t n, int64_t mint, int64_t maxt,
                       size_t max, size_t *total, int64_t **t, double **v, size_t *cnt,
                       size_t *damaged)
{
    reader r = {.h = h, .win_off = UINT64_MAX, .fd = -1, .fd_seq = UINT32_MAX, .gap = 1024};
    pend *hp = mw_xmalloc((n ? n : 1) * sizeof(pend));
    /* Kept records per series, then where each series' run starts. */
    uint32_t *start = mw_xcalloc(n + 1, sizeof(uint32_t));
    size_t nh = 0, lower = 0; /* lower: samples surely in range, for the budget */
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t ref = mw_head_series(h, ids[i])->last_ref;
        if (ref && (uint32_t)(ref >> 32) >= h->min_seq)
            heap_push(hp, &nh, (pend){ref, (uint32_t)i});
    }
    while (nh > 0) {
        pend e = heap_pop(hp, &nh);
        size_t avail;
        const uint8_t *p = record_at(&r, e.ref, &avail);
        if (!p) continue; /* the chain ends where the file does */
        int64_t cmin = (int64_t)mw_get_le64(p + 8), cmax = (int64_t)mw_get_le64(p + 16);
        if (cmax < mint) continue; /* older records are older still */
        uint64_t prev = mw_get_le64(p + 24);
        if (cmin <= maxt) {
            mw_chunk_hdr hdr;
            const uint8_t *rec = record_whole(&r, e.ref, p, avail, &hdr);
            if (!rec) {
                (*damaged)++;
                mw_log_once(MW_LOG_ERROR, "store", "chunk-crc",
                            "chunk file %08u offset %u: bad checksum; its samples are skipped",
                            (unsigned)(e.ref >> 32), (unsigned)e.ref);
            } else {
                if (r.nk == r.capk) {
                    r.capk = r.capk ? r.capk * 2 : 1024;
                    r.k = mw_xrealloc(r.k, r.capk * sizeof(kept));
                }
                r.k[r.nk++] = (kept){keep_bytes(&r, rec + MW_CHUNK_HDR_SIZE, hdr.nbytes), e.idx,
                                     hdr.n, hdr.nbytes};
                start[e.idx + 1]++;
                if (hdr.mint >= mint && hdr.maxt <= maxt) lower += hdr.n;
                if (over(max, total, lower)) {
                    rc = -1;
                    break;
                }
            }
        }
        /* A chunk's predecessor was written before it: a lower reference.
         * Anything else is damage, and following it could loop. */
        if (prev && prev < e.ref && (uint32_t)(prev >> 32) >= h->min_seq)
            heap_push(hp, &nh, (pend){prev, e.idx});
    }
    /* Each series' records together, oldest first (the sweep met them
     * newest first), so that the next series' payloads can be prefetched
     * while one is decoded: they were copied long ago and are out of the
     * CPU's caches by now. */
    for (size_t i = 0; i < n; i++)
        start[i + 1] += start[i];
    kept *order = mw_xmalloc((r.nk ? r.nk : 1) * sizeof(kept));
    {
        uint32_t *pos = mw_xmalloc((n ? n : 1) * sizeof(uint32_t));
        memcpy(pos, start, n * sizeof(uint32_t));
        for (size_t k = r.nk; k-- > 0;)
            order[pos[r.k[k].idx]++] = r.k[k];
        free(pos);
    }
    /* Decoded straight into the series' own arrays, sized by the kept
     * chunks' sample counts (an upper bound: exact unless a chunk straddles
     * mint or maxt), instead of into a scratch buffer and then copied: the
     * copy was a pass over every sample. The arrays are trimmed to the
     * exact size when a chunk was cut, so no more memory is held than
     * before. */
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (i + 1 < n)
            for (uint32_t k = start[i + 1]; k < start[i + 2]; k++) {
                __builtin_prefetch(order[k].p);
                __builtin_prefetch(order[k].p + 64);
                if (order[k].nbytes > 128) __builtin_prefetch(order[k].p + 128);
            }
        const mw_series *s = mw_head_series(h, ids[i]);
        size_t ub = s->enc.n;
        for (uint32_t k = start[i]; k < start[i + 1]; k++)
            ub += order[k].n;
        if (ub == 0) continue;
        mw_samples sm = {
            .t = mw_xmalloc(ub * sizeof(int64_t)), .v = mw_xmalloc(ub * sizeof(double)), .cap = ub};
        for (uint32_t k = start[i]; k < start[i + 1]; k++)
            decode_into(order[k].p, order[k].nbytes, order[k].n, mint, maxt, &sm);
        if (s->enc.n > 0)
            decode_into(s->chunk, mw_gorilla_bytes(&s->enc), s->enc.n, mint, maxt, &sm);
        if (sm.n == 0 || (max && __atomic_add_fetch(total, sm.n, __ATOMIC_RELAXED) > max)) {
            free(sm.t);
            free(sm.v);
            if (sm.n) rc = -1;
            continue;
        }
        if (sm.n < ub) {
            sm.t = mw_xrealloc(sm.t, sm.n * sizeof(int64_t));
            sm.v = mw_xrealloc(sm.v, sm.n * sizeof(double));
        }
        cnt[i] = sm.n;
        t[i] = sm.t;
        v[i] = sm.v;
    }
    while (r.pieces) {
        piece *next = r.pieces->next;
        free(r.pieces);
        r.pieces = next;
    }
    free(r.k);
    free(r.one);
    free(r.win);
    free(order);
    free(hp);
    free(start);
    return rc;
}
