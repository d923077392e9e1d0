/* test_remote_write.c - remote-write bodies through protobuf-c, which the
 * agent loads on first use (src/core/lazylib.c): encoding
 * (src/proto/rw_encode.c) and decoding (src/store/remote_write.c) agree,
 * and strings left at their default are not freed as if allocated; the
 * decoder's own walk: unknown fields skipped, metadata, refusals with their
 * exact messages (a malformed field before a NUL byte found earlier),
 * strings of every length made C strings in place, the memory budget
 * counted before anything is allocated, and the decoding buffer kept
 * between requests freed when writes stop. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "testutil.h"
#include "core/buf.h"
#include "proto/rw_encode.h"
#include "remote.pb-c.h"
#include "store/remote_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Runs first: nothing before it has encoded or decoded a message. */
static void loaded_by_first_message(void **state)
{
    (void)state;
    assert_false(tu_library_mapped("libprotobuf-c"));
    mw_buf raw, body;
    mw_buf_init(&raw, 0);
    mw_buf_init(&body, 0);
    const mw_rw_label labels[] = {{"__name__", "up"}, {"empty", ""}, {"job", "node"}};
    assert_int_equal(mw_rw_append_series(&raw, labels, 3, 0.25, 1700000000123), 0);
    assert_true(tu_library_mapped("libprotobuf-c"));
    assert_int_equal(mw_rw_snappy(raw.data, raw.len, &body), 0);
    mw_rw_request r;
    char err[256];
    assert_int_equal(mw_rw_decode((const uint8_t *)body.data, body.len, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ts[0].nsamples, 1);
    assert_true(r.ts[0].samples[0].v == 0.25);
    assert_true(r.ts[0].samples[0].t == 1700000000123);
    assert_int_equal(r.ts[0].nlabels, 3);
    assert_string_equal(r.ts[0].labels[0].name, "__name__");
    assert_string_equal(r.ts[0].labels[0].value, "up");
    assert_string_equal(r.ts[0].labels[1].name, "empty");
    assert_string_equal(r.ts[0].labels[1].value, "");
    assert_string_equal(r.ts[0].labels[2].name, "job");
    assert_string_equal(r.ts[0].labels[2].value, "node");
    mw_rw_request_free(&r);
    mw_buf_free(&raw);
    mw_buf_free(&body);
}

/* A string field absent on the wire (proto3 leaves "" out) is left at its
 * default, protobuf_c_empty_string: freeing the message with the system
 * allocator must not free it (AddressSanitizer would say so). */
static void default_strings_not_freed(void **state)
{
    (void)state;
    Prometheus__Label in = PROMETHEUS__LABEL__INIT;
    in.name = (char *)"job";
    in.value = (char *)"";
    uint8_t wire[64];
    size_t n = prometheus__label__get_packed_size(&in);
    assert_true(n <= sizeof(wire));
    assert_int_equal(prometheus__label__pack(&in, wire), n);
    assert_int_equal(n, 5); /* tag, length, "job"; no value */
    Prometheus__Label *out = prometheus__label__unpack(NULL, n, wire);
    assert_non_null(out);
    assert_string_equal(out->name, "job");
    assert_ptr_equal(out->value, protobuf_c_empty_string);
    prometheus__label__free_unpacked(out, NULL);
    /* Bytes that are not a Label: NULL, as protobuf-c reports it. */
    const uint8_t bad[] = {0x0a, 0x7f, 'x'};
    assert_null(prometheus__label__unpack(NULL, sizeof(bad), bad));
}

/* Snappy-compress raw and decode it; the status, the message in err. */
static int decode_raw(const void *raw, size_t n, mw_rw_request *r, char *err, size_t errsize)
{
    mw_buf body;
    mw_buf_init(&body, 0);
    assert_int_equal(mw_rw_snappy(raw, n, &body), 0);
    err[0] = '\0';
    int rc = mw_rw_decode((const uint8_t *)body.data, body.len, r, err, errsize);
    mw_buf_free(&body);
    return rc;
}

/* Fields the receiver does not know (a newer sender's) are skipped, of
 * every wire type; metadata comes back with its type's name. */
static void unknown_fields_and_metadata(void **state)
{
    (void)state;
    static const uint8_t raw[] = {
        0x0a, 0x19,                                                /* timeseries, 25 bytes */
        0x0a, 0x08, 0x0a, 0x01, 'a',  0x12, 0x03, 'x',  'y',  'z', /* label a="xyz" */
        0x18, 0x05,                                                /* field 3, varint: skipped */
        0x12, 0x0b, 0x09, 0,    0,    0,    0,    0,    0,    0xf0, 0x3f, /* sample value 1.0 */
        0x10, 0x07,                /* timestamp 7 (after the value) */
        0x25, 1,    2,    3,    4, /* WriteRequest field 4, fixed32: skipped */
        0x1a, 0x0a, 0x08, 0x01, 0x12, 0x01, 'm',  0x22, 0x01, 'h',  0x2a, 0x00, /* metadata */
    };
    mw_rw_request r;
    char err[256];
    assert_int_equal(decode_raw(raw, sizeof(raw), &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.ts[0].nlabels, 1);
    assert_string_equal(r.ts[0].labels[0].name, "a");
    assert_string_equal(r.ts[0].labels[0].value, "xyz");
    assert_int_equal(r.ts[0].nsamples, 1);
    assert_int_equal(r.nsamples, 1);
    assert_true(r.ts[0].samples[0].v == 1.0);
    assert_int_equal(r.ts[0].samples[0].t, 7);
    assert_int_equal(r.nmeta, 1);
    assert_string_equal(r.meta[0].name, "m");
    assert_string_equal(r.meta[0].type, "counter");
    assert_string_equal(r.meta[0].help, "h");
    assert_string_equal(r.meta[0].unit, "");
    mw_rw_request_free(&r);
}

static void refusals_say_why(void **state)
{
    (void)state;
    mw_rw_request r;
    char err[256];
    static const uint8_t nul[] = {0x0a, 0x07, 0x0a, 0x05, 0x0a, 0x03, 'a', 0, 'b'};
    assert_int_equal(decode_raw(nul, sizeof(nul), &r, err, sizeof(err)), -1);
    assert_string_equal(err, "protobuf: a label name contains a NUL byte");
    mw_rw_request_free(&r);
    static const uint8_t truncated[] = {0x0a, 0x05, 0x0a, 0x09, 0x0a};
    assert_int_equal(decode_raw(truncated, sizeof(truncated), &r, err, sizeof(err)), -1);
    assert_string_equal(err, "protobuf: field 1 is truncated");
    mw_rw_request_free(&r);
    static const uint8_t wrong_type[] = {0x08, 0x01};
    assert_int_equal(decode_raw(wrong_type, sizeof(wrong_type), &r, err, sizeof(err)), -1);
    assert_string_equal(err, "protobuf: WriteRequest.timeseries (field 1) has wire type 0 "
                             "instead of 2");
    mw_rw_request_free(&r);
    static const uint8_t group[] = {0x0b};
    assert_int_equal(decode_raw(group, sizeof(group), &r, err, sizeof(err)), -1);
    assert_string_equal(err, "protobuf: field 1 has the unsupported wire type 3");
    mw_rw_request_free(&r);
}

/* Strings are made C strings in place and every error of the walk comes
 * before a NUL byte found earlier: the first malformed field is what the
 * counting walk reported before the strings were taken. Inside a label
 * (which the quick count does not open) and in a series' own fields. */
static void malformed_field_before_nul(void **state)
{
    (void)state;
    mw_rw_request r;
    char err[256];
    static const uint8_t in_label[] = {
        0x0a, 0x07, 0x0a, 0x05, 0x0a, 0x03, 'a', 0, 'b', /* label name "a\0b" */
        0x0a, 0x04, 0x0a, 0x02, 0x08, 0x01,              /* Label.name as a varint */
    };
    assert_int_equal(decode_raw(in_label, sizeof(in_label), &r, err, sizeof(err)), -1);
    assert_string_equal(err, "protobuf: Label.name/value (field 1) has wire type 0 instead of 2");
    mw_rw_request_free(&r);
    static const uint8_t in_series[] = {
        0x0a, 0x07, 0x0a, 0x05, 0x0a, 0x03, 'a',
        0,    'b',  0x0a, 0x02, 0x10, 0x01, /* samples: varint */
    };
    assert_int_equal(decode_raw(in_series, sizeof(in_series), &r, err, sizeof(err)), -1);
    assert_string_equal(err, "protobuf: TimeSeries.samples (field 2) has wire type 0 instead of 2");
    mw_rw_request_free(&r);
    /* A NUL byte and nothing else wrong: the NUL byte. */
    static const uint8_t value_nul[] = {0x0a, 0x09, 0x0a, 0x07, 0x0a, 0x01,
                                        'a',  0x12, 0x02, 'x',  0};
    assert_int_equal(decode_raw(value_nul, sizeof(value_nul), &r, err, sizeof(err)), -1);
    assert_string_equal(err, "protobuf: a label value contains a NUL byte");
    mw_rw_request_free(&r);
}

/* Labels of every length (one-, two- and three-byte lengths on the wire)
 * in many series come back whole, each in place of its neighbours. */
static void strings_of_every_length(void **state)
{
    (void)state;
    enum { N = 400 };
    mw_buf raw;
    mw_buf_init(&raw, 0);
    char *big = malloc(20001);
    assert_non_null(big);
    for (size_t i = 0; i < 20000; i++)
        big[i] = (char)('a' + i % 26);
    big[20000] = '\0';
    static char vals[N][N + 1];
    for (size_t i = 0; i < N; i++) {
        memset(vals[i], (int)('A' + i % 26), i);
        vals[i][i] = '\0';
        const mw_rw_label l[] = {{"__name__", "m"}, {"v", vals[i]}, {"w", i % 50 ? "x" : big}};
        assert_int_equal(mw_rw_append_series(&raw, l, 3, (double)i, 1000 + (int64_t)i), 0);
    }
    mw_rw_request r;
    char err[256];
    assert_int_equal(decode_raw(raw.data, raw.len, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, N);
    for (size_t i = 0; i < N; i++) {
        assert_int_equal(r.ts[i].nlabels, 3);
        assert_string_equal(r.ts[i].labels[0].name, "__name__");
        assert_string_equal(r.ts[i].labels[0].value, "m");
        assert_string_equal(r.ts[i].labels[1].name, "v");
        assert_string_equal(r.ts[i].labels[1].value, vals[i]);
        assert_string_equal(r.ts[i].labels[2].name, "w");
        assert_string_equal(r.ts[i].labels[2].value, i % 50 ? "x" : big);
        assert_true(r.ts[i].samples[0].v == (double)i);
        assert_int_equal(r.ts[i].samples[0].t, 1000 + (int64_t)i);
    }
    mw_rw_request_free(&r);
    free(big);
    mw_buf_free(&raw);
}

/* The decoding buffer kept between requests is freed by the second trim
 * without a request in between (the store's maintenance thread trims every
 * second), so an idle agent holds nothing for it. */
static void spare_buffer_freed_when_idle(void **state)
{
    (void)state;
    mw_buf raw;
    mw_buf_init(&raw, 0);
    const mw_rw_label l[] = {{"__name__", "up"}};
    assert_int_equal(mw_rw_append_series(&raw, l, 1, 1.0, 5), 0);
    mw_rw_request r;
    char err[256];
    assert_int_equal(decode_raw(raw.data, raw.len, &r, err, sizeof(err)), 0);
    mw_rw_request_free(&r);
    mw_buf_free(&raw);
    assert_true(mw_rw_spare_bytes() > 0);
    mw_rw_spare_trim(); /* used since the last trim: kept */
    mw_rw_spare_trim();
    assert_int_equal(mw_rw_spare_bytes(), 0);
}

/* n empty TimeSeries: 2 bytes each on the wire, 96 bytes once decoded and
 * appended (remote_write.c, SERIES_COST). */
static int decode_empty_series(size_t n, mw_rw_request *r, char *err, size_t errsize)
{
    uint8_t *raw = malloc(2 * n);
    assert_non_null(raw);
    for (size_t i = 0; i < n; i++) {
        raw[2 * i] = 0x0a;
        raw[2 * i + 1] = 0;
    }
    int rc = decode_raw(raw, 2 * n, r, err, errsize);
    free(raw);
    return rc;
}

/* The decompressed limit is checked from the snappy header, before the
 * body is decompressed; the budget as the walk counts, before the arrays
 * are allocated: 32 MiB of series leave 16 MiB, 174,762 series of 96
 * bytes. */
static void budget_counted_before_allocating(void **state)
{
    (void)state;
    mw_rw_request r;
    char err[256];
    assert_int_equal(decode_empty_series((MW_RW_MAX_DECODED / 2) + 1, &r, err, sizeof(err)),
                     MW_RW_OVER_BUDGET);
    assert_string_equal(err, "snappy: the body would decompress to 33554434 bytes, more than "
                             "the limit of 33554432");
    mw_rw_request_free(&r);
    assert_int_equal(decode_empty_series(MW_RW_MAX_DECODED / 2, &r, err, sizeof(err)),
                     MW_RW_OVER_BUDGET);
    assert_string_equal(err, "the request needs more than the decoding budget of 50331648 bytes "
                             "(33554432 decompressed bytes; counted before the budget ran out: "
                             "174763 series, 0 labels, 0 samples)");
    assert_true(r.arena.used_bytes == 0);
    mw_rw_request_free(&r);
    /* What fits is decoded: 98 bytes a series (2 on the wire, 96 decoded)
     * in 48 MiB. */
    assert_int_equal(decode_empty_series(513588, &r, err, sizeof(err)), 0);
    assert_int_equal(r.n, 513588);
    mw_rw_request_free(&r);
    assert_int_equal(decode_empty_series(513589, &r, err, sizeof(err)), MW_RW_OVER_BUDGET);
    mw_rw_request_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(loaded_by_first_message),
        cmocka_unit_test(default_strings_not_freed),
        cmocka_unit_test(unknown_fields_and_metadata),
        cmocka_unit_test(refusals_say_why),
        cmocka_unit_test(budget_counted_before_allocating),
        cmocka_unit_test(malformed_field_before_nul),
        cmocka_unit_test(strings_of_every_length),
        cmocka_unit_test(spare_buffer_freed_when_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
