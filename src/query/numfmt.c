/* numfmt.c - PromQL value formatting (pq_format_value): the shortest
 * decimal that reads back to the same double, written without an exponent,
 * as Go's strconv.FormatFloat(v, 'f', -1, 64): 1e100 is 1 and 100 zeros,
 * 5e-324 is "0." with 323 zeros and 5. A range query formats every point of
 * its answer, so this is on the hot path of the HTTP API.
 *
 * The reference definition (shortest_slow) tries 1..17 significant digits
 * of printf("%.*e") with strtod: up to some twenty printf/strtod calls per
 * value. The fast path gives the same digits without them: integers below
 * 2^53 are written directly; otherwise the 17 correctly rounded digits
 * (128-bit integer arithmetic for 2^-15 <= |v| < 2^53, else one printf) are
 * rounded in the string to fewer digits (exact unless the dropped digits
 * are exactly 5000..., then the slow path decides), each candidate is
 * checked against v's rounding interval (integer arithmetic again, else
 * strtod). Whatever the fast path cannot prove identical (ties, powers of
 * two, huge or tiny values, integers from 2^53) goes the slow way. Both
 * write the fixed notation from the digits (write_fixed).
 * tests/unit/test_numfmt.c checks the answers' properties (they read back,
 * no shorter decimal does, the nearest of the shortest) on millions of
 * values, and exact strings. */
#include "promql.h"

#include "../core/units.h"
#include "../core/util.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct exact exact;
static int exact_up(const exact *x, const char *dg, int p, int e);

/* The first p of the 17 digits d, correctly rounded, into out (p digits);
 * the decimal exponent of the result in *e (from e17, that of d). When the
 * dropped digits are exactly a half, the 17 digits were themselves rounded
 * and do not tell the direction: v's exact value does (x), else -1. */
static int round_digits(const char *d, int e17, int p, char *out, int *e, const exact *x)
{
    memcpy(out, d, (size_t)p);
    *e = e17;
    if (p == 17) return 0;
    int up = d[p] > '5';
    if (d[p] == '5') {
        for (int i = p + 1; i < 17; i++)
            if (d[i] != '0') up = 1;
        if (!up) {
            up = exact_up(x, out, p, e17);
            if (up < 0) return -1;
        }
    }
    if (!up) return 0;
    int i = p - 1;
    while (i >= 0 && out[i] == '9')
        out[i--] = '0';
    if (i >= 0) {
        out[i]++;
    } else { /* 99..9 -> 100..0, one decade up */
        out[0] = '1';
        (*e)++;
    }
    return 0;
}

static size_t put_uint(char *out, uint64_t u)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

__extension__ typedef unsigned __int128 u128;

/* v = m * 2^-s exactly, for the common range (2^-15 <= |v| < 2^53, not an
 * integer): with k = 16 - (decimal exponent of v), n2 = 2 * m * 10^k and
 * p10k = 10^k, both below 2^128, the 17 digits and the read-back test are
 * integer arithmetic, without printf or strtod. */
struct exact {
    int ok, s, k;
    uint64_t m;
    u128 n2, p10k;
};

static u128 pow10_128(int k)
{
    u128 p = 1;
    for (int i = 0; i < k; i++)
        p *= 10;
    return p;
}

/* The 17 correctly rounded (half to even, as printf) digits of a into d
 * and their exponent, or 0 when a is outside the exact range. */
static int exact_digits(double a, exact *x, char *d, int *e17)
{
    uint64_t bits;
    memcpy(&bits, &a, sizeof(bits));
    int be = (int)(bits >> 52 & 0x7ff);
    x->ok = 0;
    if (be == 0) return 0; /* subnormal */
    x->m = (bits & 0xFFFFFFFFFFFFFull) | 1ull << 52;
    x->s = 1075 - be; /* a = m * 2^-s */
    if (x->s < 1 || x->s > 67) return 0;
    int e = (int)floor(log10(a));
    const uint64_t lo17 = 10000000000000000ull, hi17 = 100000000000000000ull;
    for (int tries = 0; tries < 3; tries++) {
        x->k = 16 - e;
        if (x->k < 0 || x->k > 22) return 0;
        x->p10k = pow10_128(x->k);
        u128 n = (u128)x->m * x->p10k;
        u128 q = n >> x->s, r = n & (((u128)1 << x->s) - 1), half = (u128)1 << (x->s - 1);
        if (q < lo17) {
            e--;
            continue;
        }
        if (q >= hi17) {
            e++;
            continue;
        }
        if (r > half || (r == half && (q & 1))) q++;
        uint64_t u = (uint64_t)q;
        *e17 = e;
        if (u == hi17) { /* 9.99..95 and up: one decade up */
            u = lo17;
            (*e17)++;
        }
        for (int i = 16; i >= 0; i--) {
            d[i] = (char)('0' + u % 10);
            u /= 10;
        }
        x->n2 = n << 1;
        x->ok = 1;
        return 1;
    }
    return 0;
}

static uint64_t digits_value(const char *dg, int p)
{
    uint64_t dv = 0;
    for (int i = 0; i < p; i++)
        dv = dv * 10 + (uint64_t)(dg[i] - '0');
    return dv;
}

/* Whether v rounds up from the p digits dg (exponent e of the first) to
 * the next p-digit number: above their midpoint, or on it with an odd last
 * digit (printf rounds half to even); -1 without the exact value. */
static int exact_up(const exact *x, const char *dg, int p, int e)
{
    if (!x->ok) return -1;
    uint64_t dv = digits_value(dg, p);
    int j = e - (p - 1) + x->k; /* 0 <= j <= 17 */
    u128 mid2 = ((u128)(2 * dv + 1) * pow10_128(j)) << x->s;
    return x->n2 > mid2 || (x->n2 == mid2 && (dv & 1));
}

/* Whether the p digits dg (exponent e of the first) read back as v. */
static int reads_back(const char *dg, int p, int e, int neg, double v, const exact *x)
{
    if (x->ok) {
        /* |candidate - v| < half of v's spacing 2^-s, or equal to it with
         * an even mantissa (strtod rounds half to even), scaled by
         * 10^k * 2^(s+1). */
        uint64_t dv = digits_value(dg, p);
        int j = e - (p - 1) + x->k; /* 0 <= j <= 18 */
        u128 c = ((u128)dv * pow10_128(j)) << (x->s + 1);
        u128 diff = c > x->n2 ? c - x->n2 : x->n2 - c;
        return diff < x->p10k || (diff == x->p10k && !(x->m & 1));
    }
    char s[40];
    int n = 0;
    if (neg) s[n++] = '-';
    memcpy(s + n, dg, (size_t)p);
    n += p;
    int x10 = e - (p - 1);
    s[n++] = 'e';
    if (x10 < 0) s[n++] = '-';
    n += (int)put_uint(s + n, (uint64_t)(x10 < 0 ? -x10 : x10));
    s[n] = '\0';
    return strtod(s, NULL) == v;
}

/* The fixed notation of the p digits dg (decimal exponent e of the first)
 * into out, which holds PQ_VALUE_BUFSIZE bytes: zeros pad the integer part
 * of a large value, as Go does ("1e100" is 1 and 100 zeros). */
static void write_fixed(int neg, const char *dg, int p, int e, char *out)
{
    size_t n = 0;
    if (neg) out[n++] = '-';
    if (e >= 0) {
        int whole = p < e + 1 ? p : e + 1;
        memcpy(out + n, dg, (size_t)whole);
        n += (size_t)whole;
        for (int i = p; i < e + 1; i++)
            out[n++] = '0';
        if (p > e + 1) {
            out[n++] = '.';
            memcpy(out + n, dg + e + 1, (size_t)(p - 1 - e));
            n += (size_t)(p - 1 - e);
        }
    } else {
        out[n++] = '0';
        out[n++] = '.';
        for (int i = 0; i < -e - 1; i++)
            out[n++] = '0';
        memcpy(out + n, dg, (size_t)p);
        n += (size_t)p;
    }
    out[n] = '\0';
}

/* The reference definition, for what the fast path cannot prove: the
 * fewest digits p whose decimal reads back, by printf("%.*e") and strtod.
 * The correctly rounded p digits are the nearest p-digit decimal, so they
 * are the answer when they read back. At a power of two the next double
 * away from zero is twice as far as the one towards it, and the p-digit
 * decimal on the far side can read back when the nearest does not: Go
 * takes it, being the shortest. Returns p, digits in dg, exponent in *e. */
static int shortest_slow(double v, int neg, char *dg, int *e)
{
    const exact none = {0};
    char s[40];
    for (int p = 1;; p++) {
        snprintf(s, sizeof(s), "%.*e", p - 1, fabs(v)); /* d.ddd...e[+-]XX */
        dg[0] = s[0];
        if (p > 1) memcpy(dg + 1, s + 2, (size_t)(p - 1));
        *e = atoi(strchr(s, 'e') + 1);
        if (p == 17 || reads_back(dg, p, *e, neg, v, &none)) return p;
        if (!(strtod(s, NULL) < fabs(v))) continue;
        char up[17];
        int ue = *e, i = p - 1;
        memcpy(up, dg, (size_t)p);
        while (i >= 0 && up[i] == '9')
            up[i--] = '0';
        if (i >= 0) {
            up[i]++;
        } else { /* 99..9 + 1 = 100..0, one decade up */
            up[0] = '1';
            ue++;
        }
        if (reads_back(up, p, ue, neg, v, &none)) {
            memcpy(dg, up, (size_t)p);
            *e = ue;
            return p;
        }
    }
}

/* Digits d (17, from "%.16e") of |v|: the shortest p whose correctly rounded
 * digits read back, into dg, with their exponent; -1 if it cannot be told
 * without the slow path (a tie). Valid where reading back is monotone in p
 * (see pq_format_value), so any search order finds the binary search's p. */
static int shortest(const char *d, int e17, int neg, double v, const exact *x, char *dg, int *e)
{
    /* The 17 digits without their trailing zeros are exactly the value of
     * the k-digit rounding, which therefore reads back. */
    int k = 17;
    while (k > 1 && d[k - 1] == '0')
        k--;
    char c[17];
    int ce, hi = k, lo = 1; /* reads back with hi digits, not below lo */
    /* Most values need all or nearly all their digits: step down twice
     * before bisecting. */
    for (int i = 0; i < 2 && lo < hi; i++) {
        if (round_digits(d, e17, hi - 1, c, &ce, x) < 0) return -1;
        if (reads_back(c, hi - 1, ce, neg, v, x))
            hi--;
        else
            lo = hi;
    }
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (round_digits(d, e17, mid, c, &ce, x) < 0) return -1;
        if (reads_back(c, mid, ce, neg, v, x))
            hi = mid;
        else
            lo = mid + 1;
    }
    if (round_digits(d, e17, hi, dg, e, x) < 0) return -1;
    return hi;
}

/* Into out (PQ_VALUE_BUFSIZE bytes), from the fast path where it applies. */
static void format_value(double v, char *out)
{
    int neg = signbit(v) != 0;
    double a = fabs(v);
    /* An integer below 2^53: every shorter rounding is another integer, at
     * least 1 away, more than half its spacing, so the shortest digits are
     * all of it. -0 stays "-0". */
    if (a < 9007199254740992.0 && a == (double)(int64_t)a) {
        size_t n = 0;
        if (neg) out[n++] = '-';
        n += put_uint(out + n, (uint64_t)a);
        out[n] = '\0';
        return;
    }
    char dg[17];
    int e = 0, p = -1;
    /* Reading back is monotone in the number of digits (a longer correct
     * rounding is no farther from v) when v's neighbours are equally far on
     * both sides: not so at a power of two (mantissa field 0). Huge and
     * tiny values, and integers from 2^53 on, go the slow way. */
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    if ((bits & 0xFFFFFFFFFFFFFull) != 0 && a <= 1e300 && a >= 1e-300 && a < 9007199254740992.0) {
        char d[17];
        int e17;
        exact x;
        if (!exact_digits(a, &x, d, &e17)) {
            char s[40];
            snprintf(s, sizeof(s), "%.16e", a); /* d.dddddddddddddddde[+-]XX */
            d[0] = s[0];
            memcpy(d + 1, s + 2, 16);
            e17 = atoi(s + 19);
        }
        p = shortest(d, e17, neg, v, &x, dg, &e);
    }
    if (p < 0) p = shortest_slow(v, neg, dg, &e);
    write_fixed(neg, dg, p, e, out);
}

void pq_format_value(double v, char *buf, size_t size)
{
    if (mw_format_nonfinite(v, buf, size)) return;
    if (size >= PQ_VALUE_BUFSIZE) {
        format_value(v, buf);
        return;
    }
    char out[PQ_VALUE_BUFSIZE];
    format_value(v, out);
    if (size) mw_strlcpy(buf, out, size);
}
