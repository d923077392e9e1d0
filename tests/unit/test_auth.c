/* test_auth.c - serve/auth.c's parts: which listening addresses are
 * loopback, token files (format, errors naming file and line, exact
 * matching, re-reading on change, keeping the last good tokens). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "serve/auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void loopback(void **state)
{
    (void)state;
    assert_int_equal(mw_auth_listen_is_loopback("127.0.0.1:10230"), 1);
    assert_int_equal(mw_auth_listen_is_loopback("127.3.4.5:0"), 1);
    assert_int_equal(mw_auth_listen_is_loopback("localhost:1"), 1);
    assert_int_equal(mw_auth_listen_is_loopback("LocalHost:1"), 1);
    assert_int_equal(mw_auth_listen_is_loopback("[::1]:1"), 1);
    assert_int_equal(mw_auth_listen_is_loopback("[::ffff:127.0.0.1]:1"), 1);
    assert_int_equal(mw_auth_listen_is_loopback(":10230"), 0);
    assert_int_equal(mw_auth_listen_is_loopback("0.0.0.0:10230"), 0);
    assert_int_equal(mw_auth_listen_is_loopback("128.0.0.1:1"), 0);
    assert_int_equal(mw_auth_listen_is_loopback("10.1.2.3:1"), 0);
    assert_int_equal(mw_auth_listen_is_loopback("[::]:1"), 0);
    assert_int_equal(mw_auth_listen_is_loopback("[::ffff:10.0.0.1]:1"), 0);
    assert_int_equal(mw_auth_listen_is_loopback("node-7:1"), 0);
    assert_int_equal(mw_auth_listen_is_loopback("localhost.evil.example:1"), 0);
}

static char dir[64];

static const char *write_file(const char *name, const char *text)
{
    static char path[2][128];
    static int which;
    char *p = path[which++ % 2];
    snprintf(p, 128, "%s/%s", dir, name);
    char tmp[160];
    snprintf(tmp, sizeof(tmp), "%s.new", p);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(rename(tmp, p), 0); /* as a Secret's update: a new inode */
    return p;
}

static mw_auth *open_with(mw_http_role role, const char *path, char *err, size_t n)
{
    mw_auth_settings s;
    memset(&s, 0, sizeof(s));
    snprintf(s.token_file[role], sizeof(s.token_file[role]), "%s", path);
    return mw_auth_open(&s, "127.0.0.1:0", err, n);
}

static int has(mw_auth *a, const char *tok, mw_http_role role)
{
    return mw_auth_token_has_role(a, tok, strlen(tok), role);
}

static void token_files(void **state)
{
    (void)state;
    char err[600];
    const char *p = write_file(
        "read", "# readers\n\n  alpha-token-0123456789  \r\nbeta.token_~+/0123456789==\n");
    mw_auth *a = open_with(MW_ROLE_READ, p, err, sizeof(err));
    assert_non_null(a);
    assert_int_equal(has(a, "alpha-token-0123456789", MW_ROLE_READ), 1);
    assert_int_equal(has(a, "beta.token_~+/0123456789==", MW_ROLE_READ), 1);
    assert_int_equal(has(a, "alpha-token-0123456789", MW_ROLE_WRITE), 0);
    assert_int_equal(has(a, "alpha-token-012345678", MW_ROLE_READ), 0);   /* a prefix */
    assert_int_equal(has(a, "alpha-token-01234567890", MW_ROLE_READ), 0); /* one more */
    assert_int_equal(has(a, "alpha-token-0123456788", MW_ROLE_READ), 0);  /* last differs */
    assert_int_equal(has(a, "Alpha-token-0123456789", MW_ROLE_READ), 0);  /* first differs */
    assert_int_equal(has(a, "# readers", MW_ROLE_READ), 0);
    assert_int_equal(has(a, "", MW_ROLE_READ), 0);
    /* A NUL inside the presented token does not cut it short. */
    assert_int_equal(mw_auth_token_has_role(a, "alpha-token-0123456789\0x", 24, MW_ROLE_READ), 0);

    /* Rewritten: the new tokens after at most a second, the old gone. */
    write_file("read", "gamma-token-0123456789\n");
    assert_int_equal(has(a, "gamma-token-0123456789", MW_ROLE_READ), 0); /* checked < 1 s ago */
    struct timespec ts = {1, 100 * 1000000};
    nanosleep(&ts, NULL);
    assert_int_equal(has(a, "gamma-token-0123456789", MW_ROLE_READ), 1);
    assert_int_equal(has(a, "alpha-token-0123456789", MW_ROLE_READ), 0);
    /* A malformed rewrite keeps the last good tokens. */
    write_file("read", "short\n");
    nanosleep(&ts, NULL);
    assert_int_equal(has(a, "gamma-token-0123456789", MW_ROLE_READ), 1);
    assert_int_equal(has(a, "short", MW_ROLE_READ), 0);
    mw_auth_free(a);
}

static void bad_files(void **state)
{
    (void)state;
    char err[600], want[700];
    const char *p = write_file("bad", "good-token-0123456789\nhas space-0123456789\n");
    assert_null(open_with(MW_ROLE_WRITE, p, err, sizeof(err)));
    snprintf(want, sizeof(want),
             "--write-token-file %s:2: a token must be 16 to 255 characters of A-Z a-z 0-9 - . _ "
             "~ + / (then = padding)",
             p);
    assert_string_equal(err, want);
    p = write_file("bad", "==padding-first-0123456789\n");
    assert_null(open_with(MW_ROLE_ADMIN, p, err, sizeof(err)));
    p = write_file("bad", "padding=in-the-middle-0123\n");
    assert_null(open_with(MW_ROLE_ADMIN, p, err, sizeof(err)));
    char many[40 * 24] = "";
    for (int i = 0; i < 33; i++) {
        char line[24];
        snprintf(line, sizeof(line), "token-number-%04d-xx\n", i);
        strcat(many, line);
    }
    p = write_file("bad", many);
    assert_null(open_with(MW_ROLE_METRICS, p, err, sizeof(err)));
    snprintf(want, sizeof(want), "--metrics-token-file %s:33: more than 32 tokens", p);
    assert_string_equal(err, want);
    p = write_file("bad", "\n# only a comment\n");
    assert_null(open_with(MW_ROLE_READ, p, err, sizeof(err)));
    snprintf(want, sizeof(want), "--read-token-file %s: no token in the file", p);
    assert_string_equal(err, want);
}

int main(void)
{
    snprintf(dir, sizeof(dir), "/tmp/mlwatch-test-auth-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(loopback),
        cmocka_unit_test(token_files),
        cmocka_unit_test(bad_files),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) rc = 1;
    return rc;
}
