/* store_fixture_values.h - the samples of tests/fixtures/store-blocks-v1.
 *
 * The fixture's blocks were written by the build before block format 2
 * (tests/fixtures/store-blocks-v1/README.md); the test that reads them
 * (unit_store_codec) computes here what each must hold, bit for bit. */
#ifndef STORE_FIXTURE_VALUES_H
#define STORE_FIXTURE_VALUES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define FIX_BLOCKS 4
#define FIX_SERIES 12
#define FIX_SAMPLES 300 /* per series per block */
#define FIX_T0 1700000000000LL
#define FIX_STEP 15000

static inline const char *fix_family(int s)
{
    static const char *names[FIX_SERIES] = {"integer",  "decimal", "counter", "states",
                                            "constant", "sine",    "random",  "nan",
                                            "inf",      "negzero", "subnorm", "stale"};
    return names[s];
}

static inline int64_t fix_time(int block, int j)
{
    return FIX_T0 + ((int64_t)block * FIX_SAMPLES + j) * FIX_STEP;
}

static inline uint64_t fix_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static inline double fix_from_bits(uint64_t b)
{
    double v;
    memcpy(&v, &b, 8);
    return v;
}

/* Value of series s at sample r (0 .. FIX_BLOCKS * FIX_SAMPLES). */
static inline double fix_value(int s, int r)
{
    uint64_t h = fix_mix((uint64_t)s * 1000003u + (uint64_t)r);
    switch (s) {
    case 0:
        return floor(80 + 20 * sin(r * 0.05));
    case 1:
        return floor((350 + 150 * sin(r * 0.05)) * 1000) / 1000;
    case 2:
        return (double)r * 15 * 0.95 + 7;
    case 3:
        return (r / 40) % 2 ? 1755e6 : 1980e6;
    case 4:
        return 42.5;
    case 5:
        return 50 + 40 * sin(r * 0.1);
    case 6:
        return fix_from_bits(h);
    case 7:
        return fix_from_bits(0x7ff8000000000000ull | (h & 0xfffff) | (r % 3 ? 0 : 1ull << 50));
    case 8:
        return r % 3 == 0 ? INFINITY : r % 3 == 1 ? -INFINITY : 1.0;
    case 9:
        return r % 2 ? -0.0 : 0.0;
    case 10:
        return fix_from_bits(h & 0x000fffffffffffffull);
    default:
        return r % 5 == 4 ? fix_from_bits(0x7ff0000000000002ull) : (double)(r % 7);
    }
}

#endif
