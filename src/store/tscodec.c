/* tscodec.c - per-chunk choice of the smallest exact encoding, then zstd.
 *
 * Chunk bytes: u8 0 and the raw encoding, or u8 1 and one zstd frame of
 * it (content size in the frame header, no checksum: the block keeps a
 * crc32 per chunk). Raw encoding: u8 kinds (timestamps in the low nibble,
 * values in the high one), then
 *   timestamps 0 regular:   varint t0, uvarint step (when n > 1)
 *   timestamps 1 irregular: integer sequence, deltas of deltas
 *   timestamps 2:           carried by the Gorilla stream (values 2)
 *   values 0 dictionary:    u8 k (1..16), k u64 value bits, then (k > 1) n
 *                           bytes, each an index below k
 *   values 1 decimal:       u8 d (0..9), u8 mode (0 deltas, 1 deltas of
 *                           deltas), uvarint e (0..16) exceptions, each
 *                           uvarint gap to the previous one's position
 *                           (+1) and u64 value bits, then the integer
 *                           sequence of the m_i (an exception repeats the
 *                           previous m, 0 at the start)
 *   values 2 Gorilla:       a Gorilla chunk of (t, v) (gorilla.h)
 * Integer sequence (arithmetic modulo 2^64): varint x0; for n > 1, in
 * mode 1 varint x1 - x0; uvarint g, the gcd of the residuals (0: all zero,
 * then none follow); each residual / g as a zigzag varint (deltas from x1,
 * deltas of deltas from x2). The encoding must end exactly at the end of
 * the bytes. */
#include "tscodec.h"
#include "../core/bytes.h"
#include "../core/util.h"
#include "gorilla.h"
#include "varint.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

const char *const mw_tsc_kind_names[MW_TSC_KINDS] = {"dictionary", "decimal", "gorilla"};

#define MAX_DIGITS 9
#define DICT_MAX 16
/* Values a decimal chunk may hold that are not decimals: the stale marker
 * Prometheus writes when a target goes away, a NaN, -0. */
#define EXC_MAX 16
#define ZSTD_LEVEL 9
/* Largest raw encoding of n samples. Decimal: kinds 1, timestamps 10n + 10
 * (10-byte varints), d and mode 2, exceptions 1 + 16 * 18, values 8n + 30
 * (|m| < 2^53: residuals below 2^56 zigzagged) = 18n + 332; dictionary
 * 11n + 140; Gorilla 1 + 16 + 19 (n - 1). */
#define RAW_BOUND(n) (512 + (size_t)(n)*20)

static const double pow10_tab[MAX_DIGITS + 1] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9};

static uint64_t bits_of(double v)
{
    uint64_t b;
    memcpy(&b, &v, 8);
    return b;
}

static uint64_t zigzag(int64_t x)
{
    return ((uint64_t)x << 1) ^ (x < 0 ? UINT64_MAX : 0);
}

static int64_t unzigzag(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t r = a % b;
        a = b;
        b = r;
    }
    return a;
}

/* ---- encoding ---- */

typedef struct wbuf {
    uint8_t *p;
    size_t n;
} wbuf;

static void put_u8(wbuf *w, uint8_t b)
{
    w->p[w->n++] = b;
}

static void put_uv(wbuf *w, uint64_t v)
{
    w->n += mw_uvarint_put(w->p + w->n, v);
}

static void put_sv(wbuf *w, int64_t v)
{
    put_uv(w, zigzag(v));
}

static void put_u64(wbuf *w, uint64_t v)
{
    mw_put_le64(w->p + w->n, v);
    w->n += 8;
}

/* x[0..n) as an integer sequence (see the top of the file). */
static void put_intseq(wbuf *w, const uint64_t *x, size_t n, int dod)
{
    put_sv(w, (int64_t)x[0]);
    if (n == 1) return;
    size_t first = dod ? 2 : 1;
    if (dod) put_sv(w, (int64_t)(x[1] - x[0]));
    uint64_t g = 0;
    for (size_t i = first; i < n; i++) {
        uint64_t r = dod ? (x[i] - x[i - 1]) - (x[i - 1] - x[i - 2]) : x[i] - x[i - 1];
        int64_t s = (int64_t)r;
        if (s == INT64_MIN) {
            g = 1; /* |s| does not fit: residuals as they are */
            break;
        }
        g = gcd64(g, (uint64_t)(s < 0 ? -s : s));
        if (g == 1) break;
    }
    put_uv(w, g);
    if (g == 0) return;
    for (size_t i = first; i < n; i++) {
        uint64_t r = dod ? (x[i] - x[i - 1]) - (x[i - 1] - x[i - 2]) : x[i] - x[i - 1];
        put_sv(w, (int64_t)r / (int64_t)g);
    }
}

struct mw_tsc_enc {
    ZSTD_CCtx *zc;
    uint8_t *cand, *best, *z; /* RAW_BOUND(MW_TSC_MAX_SAMPLES) + 1 bytes each */
    uint64_t m[MW_TSC_MAX_SAMPLES];
    uint8_t tsec[16 + 10 * MW_TSC_MAX_SAMPLES]; /* the timestamp section */
    size_t best_len;
    int best_kind;
};

mw_tsc_enc *mw_tsc_enc_new(void)
{
    mw_tsc_enc *e = mw_xcalloc(1, sizeof(*e));
    size_t cap = RAW_BOUND(MW_TSC_MAX_SAMPLES) + 1;
    e->cand = mw_xmalloc(cap);
    e->best = mw_xmalloc(cap);
    size_t zcap = ZSTD_compressBound(cap) + 1;
    e->z = mw_xmalloc(zcap);
    e->zc = ZSTD_createCCtx();
    if (!e->zc) abort(); /* zstd's allocation failed: as mw_xmalloc does */
    ZSTD_CCtx_setParameter(e->zc, ZSTD_c_compressionLevel, ZSTD_LEVEL);
    ZSTD_CCtx_setParameter(e->zc, ZSTD_c_checksumFlag, 0);
    ZSTD_CCtx_setParameter(e->zc, ZSTD_c_contentSizeFlag, 1);
    ZSTD_CCtx_setParameter(e->zc, ZSTD_c_dictIDFlag, 0);
    return e;
}

void mw_tsc_enc_free(mw_tsc_enc *e)
{
    if (!e) return;
    ZSTD_freeCCtx(e->zc);
    free(e->cand);
    free(e->best);
    free(e->z);
    free(e);
}

/* Keep the candidate in e->cand[1..raw_len] (byte 0 free for the outer
 * tag) if it, or its zstd frame, is the smallest so far. */
static void consider(mw_tsc_enc *e, size_t raw_len, int kind)
{
    uint8_t *out = e->cand;
    size_t len = raw_len + 1;
    out[0] = 0;
    size_t zcap = ZSTD_compressBound(RAW_BOUND(MW_TSC_MAX_SAMPLES) + 1);
    size_t zl = ZSTD_compress2(e->zc, e->z + 1, zcap, e->cand + 1, raw_len);
    if (!ZSTD_isError(zl) && zl + 1 < len) {
        e->z[0] = 1;
        out = e->z;
        len = zl + 1;
    }
    if (e->best_len == 0 || len < e->best_len) {
        memcpy(e->best, out, len);
        e->best_len = len;
        e->best_kind = kind;
    }
}

/* The fewest decimal digits d with v == (double)m / 10^d, |m| < 2^53; -1
 * when there is none. The division is the decoder's, so equal bits here
 * mean the decoder gives v back. */
static int decimal_digits(double v, int from, int64_t *mout)
{
    for (int d = from; d <= MAX_DIGITS; d++) {
        double x = v * pow10_tab[d];
        if (!(fabs(x) < 9007199254740992.0)) return -1; /* NaN, Inf, too large */
        int64_t m = (int64_t)llrint(x);
        if (bits_of((double)m / pow10_tab[d]) == bits_of(v)) {
            *mout = m;
            return d;
        }
    }
    return -1;
}

/* The timestamp section into w; its kind. */
static int put_times(wbuf *w, const int64_t *t, size_t n, uint64_t *scratch)
{
    int regular = 1;
    for (size_t i = 2; i < n && regular; i++)
        regular = (uint64_t)t[i] - (uint64_t)t[i - 1] == (uint64_t)t[1] - (uint64_t)t[0];
    if (regular) {
        put_sv(w, t[0]);
        if (n > 1) put_uv(w, (uint64_t)t[1] - (uint64_t)t[0]);
        return 0;
    }
    for (size_t i = 0; i < n; i++)
        scratch[i] = (uint64_t)t[i];
    put_intseq(w, scratch, n, 1);
    return 1;
}

const uint8_t *mw_tsc_encode(mw_tsc_enc *e, const int64_t *t, const double *v, size_t n,
                             size_t *len, int *kind)
{
    if (n == 0 || n > MW_TSC_MAX_SAMPLES) abort(); /* the caller cuts chunks (tscodec.h) */
    e->best_len = 0;
    /* Timestamps once, copied before each candidate's values. */
    uint8_t *tsec = e->tsec;
    wbuf tw = {tsec, 0};
    int tkind = put_times(&tw, t, n, e->m);

    /* Dictionary of distinct bit patterns. */
    uint64_t dict[DICT_MAX] = {0};
    size_t k = 0;
    int dict_ok = 1;
    for (size_t i = 0; i < n && dict_ok; i++) {
        uint64_t b = bits_of(v[i]);
        size_t j = 0;
        while (j < k && dict[j] != b)
            j++;
        if (j == k) {
            if (k == DICT_MAX)
                dict_ok = 0;
            else
                dict[k++] = b;
        }
    }
    if (dict_ok) {
        wbuf w = {e->cand + 1, 0};
        put_u8(&w, (uint8_t)(tkind | MW_TSC_DICT << 4));
        memcpy(w.p + w.n, tsec, tw.n);
        w.n += tw.n;
        put_u8(&w, (uint8_t)k);
        for (size_t j = 0; j < k; j++)
            put_u64(&w, dict[j]);
        if (k > 1)
            for (size_t i = 0; i < n; i++) {
                uint64_t b = bits_of(v[i]);
                uint8_t j = 0;
                while (dict[j] != b)
                    j++;
                put_u8(&w, j);
            }
        consider(e, w.n, MW_TSC_DICT);
    }

    /* Decimals: the digits the most precise value needs, then every value
     * checked at that many (bit-exact, see decimal_digits); up to EXC_MAX
     * values that are no decimal at all are kept aside as exceptions. */
    if (!(dict_ok && k == 1)) {
        int d = 0;
        int64_t m = 0;
        size_t nexc = 0;
        for (size_t i = 0; i < n && d >= 0; i++) {
            int di = decimal_digits(v[i], d, &m);
            if (di >= 0)
                d = di;
            else if (++nexc > EXC_MAX)
                d = -1;
        }
        uint32_t exc[EXC_MAX];
        nexc = 0;
        int64_t prev = 0;
        for (size_t i = 0; i < n && d >= 0; i++) {
            if (decimal_digits(v[i], d, &m) != d) {
                if (nexc == EXC_MAX) {
                    d = -1;
                    break;
                }
                exc[nexc++] = (uint32_t)i;
                m = prev;
            }
            e->m[i] = (uint64_t)m;
            prev = m;
        }
        for (int mode = 0; d >= 0 && mode < 2; mode++) {
            wbuf w = {e->cand + 1, 0};
            put_u8(&w, (uint8_t)(tkind | MW_TSC_DECIMAL << 4));
            memcpy(w.p + w.n, tsec, tw.n);
            w.n += tw.n;
            put_u8(&w, (uint8_t)d);
            put_u8(&w, (uint8_t)mode);
            put_uv(&w, nexc);
            for (size_t j = 0; j < nexc; j++) {
                put_uv(&w, j ? exc[j] - exc[j - 1] - 1 : exc[j]);
                put_u64(&w, bits_of(v[exc[j]]));
            }
            put_intseq(&w, e->m, n, mode);
            consider(e, w.n, MW_TSC_DECIMAL);
        }
    }

    /* Gorilla, for whatever else (and when it is smaller). */
    if (!dict_ok || e->best_len > 2 + n / 4) {
        wbuf w = {e->cand + 1, 0};
        put_u8(&w, (uint8_t)(2 | MW_TSC_GORILLA << 4));
        mw_gorilla_enc g;
        mw_gorilla_enc_init(&g);
        for (size_t i = 0; i < n; i++)
            mw_gorilla_append(&g, w.p + w.n, t[i], v[i]);
        w.n += mw_gorilla_bytes(&g);
        consider(e, w.n, MW_TSC_GORILLA);
    }
    *len = e->best_len;
    if (kind) *kind = e->best_kind;
    return e->best;
}

/* ---- decoding ---- */

/* Per thread: zstd's decompression context and room for one raw chunk
 * and its integers, freed when the thread exits. */
typedef struct scratch {
    ZSTD_DCtx *zd;
    uint8_t raw[RAW_BOUND(MW_TSC_MAX_SAMPLES)];
    uint64_t x[MW_TSC_MAX_SAMPLES];
} scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *p)
{
    scratch *s = p;
    ZSTD_freeDCtx(s->zd);
    free(s);
}

static void scratch_init(void)
{
    pthread_key_create(&scratch_key, scratch_free);
}

static scratch *get_scratch(void)
{
    pthread_once(&scratch_once, scratch_init);
    scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        s = mw_xmalloc(sizeof(*s));
        s->zd = ZSTD_createDCtx();
        if (!s->zd) abort();
        pthread_setspecific(scratch_key, s);
    }
    return s;
}

static int get_intseq(mw_rd *r, size_t n, int dod, uint64_t *x)
{
    x[0] = (uint64_t)mw_rd_varint(r);
    if (n == 1) return r->bad ? -1 : 0;
    uint64_t delta = 0;
    size_t first = 1;
    if (dod) {
        delta = (uint64_t)mw_rd_varint(r);
        x[1] = x[0] + delta;
        first = 2;
    }
    uint64_t g = mw_rd_uvarint(r);
    for (size_t i = first; i < n && !r->bad; i++) {
        uint64_t res = g ? (uint64_t)unzigzag(mw_rd_uvarint(r)) * g : 0;
        delta = dod ? delta + res : res;
        x[i] = x[i - 1] + delta;
    }
    return r->bad ? -1 : 0;
}

static int decode_raw(const uint8_t *p, size_t len, uint32_t n, int64_t *t, double *v, int *kind,
                      scratch *s)
{
    mw_rd r = {p, len, 0, 0};
    const uint8_t *kb = mw_rd_bytes(&r, 1);
    if (!kb) return -1;
    unsigned tk = *kb & 15, vk = *kb >> 4;
    if (kind) *kind = (int)vk;
    if (vk == MW_TSC_GORILLA) {
        if (tk != 2) return -1;
        return mw_gorilla_decode(p + 1, len - 1, n, t, v) == n ? 0 : -1;
    }
    if (tk == 0) {
        uint64_t t0 = (uint64_t)mw_rd_varint(&r), step = n > 1 ? mw_rd_uvarint(&r) : 0;
        for (uint32_t i = 0; i < n; i++)
            t[i] = (int64_t)(t0 + step * i);
    } else if (tk == 1) {
        if (get_intseq(&r, n, 1, s->x) < 0) return -1;
        for (uint32_t i = 0; i < n; i++)
            t[i] = (int64_t)s->x[i];
    } else {
        return -1;
    }
    if (vk == MW_TSC_DICT) {
        const uint8_t *kp = mw_rd_bytes(&r, 1);
        if (!kp || *kp == 0 || *kp > DICT_MAX) return -1;
        unsigned k = *kp;
        uint64_t dict[DICT_MAX];
        for (unsigned j = 0; j < k; j++)
            dict[j] = mw_rd_u64(&r);
        if (r.bad) return -1;
        const uint8_t *idx = k > 1 ? mw_rd_bytes(&r, n) : NULL;
        if (k > 1 && !idx) return -1;
        for (uint32_t i = 0; i < n; i++) {
            unsigned j = idx ? idx[i] : 0;
            if (j >= k) return -1;
            memcpy(&v[i], &dict[j], 8);
        }
    } else if (vk == MW_TSC_DECIMAL) {
        const uint8_t *hd = mw_rd_bytes(&r, 2);
        if (!hd || hd[0] > MAX_DIGITS || hd[1] > 1) return -1;
        uint64_t nexc = mw_rd_uvarint(&r);
        if (r.bad || nexc > EXC_MAX) return -1;
        uint64_t exc_at[EXC_MAX], exc_bits[EXC_MAX];
        for (uint64_t j = 0; j < nexc; j++) {
            uint64_t gap = mw_rd_uvarint(&r);
            uint64_t at = j ? exc_at[j - 1] + 1 + gap : gap;
            if (r.bad || gap >= n || at >= n) return -1;
            exc_at[j] = at;
            exc_bits[j] = mw_rd_u64(&r);
        }
        if (get_intseq(&r, n, hd[1], s->x) < 0) return -1;
        double p10 = pow10_tab[hd[0]];
        for (uint32_t i = 0; i < n; i++)
            v[i] = (double)(int64_t)s->x[i] / p10;
        for (uint64_t j = 0; j < nexc; j++)
            memcpy(&v[exc_at[j]], &exc_bits[j], 8);
    } else {
        return -1;
    }
    return r.bad || r.off != len ? -1 : 0;
}

int mw_tsc_decode(const uint8_t *p, size_t len, uint32_t n, int64_t *t, double *v, int *kind)
{
    if (n == 0 || n > MW_TSC_MAX_SAMPLES || len < 2) return -1;
    scratch *s = get_scratch();
    if (p[0] == 0) return decode_raw(p + 1, len - 1, n, t, v, kind, s);
    if (p[0] != 1) return -1;
    /* One whole zstd frame, its content size declared and within what n
     * samples can take: a hostile frame cannot make us allocate or write
     * more than the scratch holds. */
    const uint8_t *f = p + 1;
    size_t flen = len - 1;
    unsigned long long cs = ZSTD_getFrameContentSize(f, flen);
    if (cs == ZSTD_CONTENTSIZE_ERROR || cs == ZSTD_CONTENTSIZE_UNKNOWN || cs < 1 ||
        cs > RAW_BOUND(n))
        return -1;
    size_t fs = ZSTD_findFrameCompressedSize(f, flen);
    if (ZSTD_isError(fs) || fs != flen) return -1;
    size_t got = ZSTD_decompressDCtx(s->zd, s->raw, sizeof(s->raw), f, flen);
    if (ZSTD_isError(got) || got != cs) return -1;
    return decode_raw(s->raw, got, n, t, v, kind, s);
}
