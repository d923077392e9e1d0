/* test_remote_write.c - remote-write bodies through protobuf-c, which the
 * agent loads on first use (src/core/lazylib.c): encoding
 * (src/proto/rw_encode.c) and decoding (src/store/remote_write.c) agree,
 * and strings left at their default are not freed as if allocated. */
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(loaded_by_first_message),
        cmocka_unit_test(default_strings_not_freed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
