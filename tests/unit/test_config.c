/* test_config.c - settings from flags and YAML (src/core/config.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "agent/agent.h"
#include "collect/collector.h"
#include "core/config.h"
#include "core/util.h"
#include "rules/rules.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static char dir[256];

/* The settings of the collector set and of `mlwatch metrics` in a config. */
#define COLL(c)                                                                                    \
    ((const mw_collector_set_settings *)mw_config_group(&(c), &mw_collector_set_options))
#define METRICS(c) ((const mw_metrics_settings *)mw_config_group(&(c), &mw_metrics_options))

static int known_collector(const char *name)
{
    return strcmp(name, "cpu") == 0 || strcmp(name, "memory") == 0 ||
           strcmp(name, "loadavg") == 0 || strcmp(name, "netdev") == 0;
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mlwatch-config-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    mw_options_register_all();
    mw_collector_name_check = known_collector;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    mw_collector_name_check = NULL;
    return system(cmd) == 0 ? 0 : -1;
}

/* Path of a file in the temporary folder, written with CONTENT. */
static const char *file_with(const char *name, const char *content)
{
    static char path[4][512];
    static int slot;
    char *p = path[slot++ % 4];
    tu_write(dir, name, content);
    snprintf(p, 512, "%s/%s", dir, name);
    return p;
}

static void defaults(void **state)
{
    (void)state;
    mw_config c;
    memset(&c, 0x5a, sizeof(c));
    mw_config_defaults(&c);
    assert_string_equal(c.root, "/");
    assert_string_equal(c.listen, "127.0.0.1:10230");
    assert_true(c.interval_ms == 1000);
    assert_string_equal(c.config_path, "");
    assert_string_equal(c.log_level, "info");
    assert_string_equal(METRICS(c)->format, "text");
    assert_int_equal(COLL(c)->ncollectors, 0);
    assert_int_equal(COLL(c)->ndisable_collectors, 0);
}

/* mw_config_defaults writes no page of the configuration that stays zero:
 * main()'s is a ~180 KB static, mostly empty buffers, whose untouched pages
 * are not resident. Pages that end up all zero are made read-only first, so
 * a write to one of them fails the test with SIGSEGV. */
static void defaults_write_only_nonzero_pages(void **state)
{
    (void)state;
    long page = sysconf(_SC_PAGESIZE);
    size_t len = (sizeof(mw_config) + (size_t)page - 1) / (size_t)page * (size_t)page;
    mw_config *want = calloc(1, sizeof(*want));
    assert_non_null(want);
    mw_config_defaults(want);
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    size_t zero_pages = 0, npages = len / (size_t)page;
    for (size_t p = 0; p < npages; p++) {
        size_t off = p * (size_t)page;
        size_t end =
            off + (size_t)page < sizeof(mw_config) ? off + (size_t)page : sizeof(mw_config);
        int zero = 1;
        for (size_t i = off; i < end && zero; i++)
            zero = ((const unsigned char *)want)[i] == 0;
        if (!zero) continue;
        assert_int_equal(mprotect(m + off, (size_t)page, PROT_READ), 0);
        zero_pages++;
    }
    mw_config_defaults((mw_config *)m);
    assert_memory_equal(m, want, sizeof(mw_config));
    /* Paths, lists and secrets are empty by default, and so is the unused
     * end of the owners' settings area: 32 of its 45 pages today stay zero
     * (13 of 26 before the settings moved to their owners). */
    assert_true(zero_pages * 3 >= npages);
    /* From dirty memory, defaults are the same bytes (padding included). */
    assert_int_equal(mprotect(m, len, PROT_READ | PROT_WRITE), 0);
    memset(m, 0x5a, len);
    mw_config_defaults((mw_config *)m);
    assert_memory_equal(m, want, sizeof(mw_config));
    munmap(m, len);
    free(want);
}

/* mw_assign_sparse: memcpy/memset that leaves equal words unwritten (a
 * read-only page holding the same bytes is not faulted), any length. */
static void assign_sparse(void **state)
{
    (void)state;
    long page = sysconf(_SC_PAGESIZE);
    unsigned char *m =
        mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    assert_true(m != MAP_FAILED);
    unsigned char src[2 * 4096 + 16];
    assert_true((size_t)page <= 4096 + 8);
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (unsigned char)(i * 7 + 1);
    /* First page differs (copied), second equals (read-only: not written). */
    memcpy(m + page, src + page, (size_t)page);
    assert_int_equal(mprotect(m + page, (size_t)page, PROT_READ), 0);
    mw_assign_sparse(m, src, 2 * (size_t)page);
    assert_memory_equal(m, src, 2 * (size_t)page);
    /* Zeroing: a read-only page of zeros is left alone. */
    assert_int_equal(mprotect(m + page, (size_t)page, PROT_READ | PROT_WRITE), 0);
    memset(m + page, 0, (size_t)page);
    assert_int_equal(mprotect(m + page, (size_t)page, PROT_READ), 0);
    mw_assign_sparse(m, NULL, 2 * (size_t)page);
    for (long i = 0; i < 2 * page; i++)
        assert_int_equal(m[i], 0);
    munmap(m, 2 * (size_t)page);
    /* Lengths that are not a multiple of 8, unaligned: exact bytes, none past n. */
    for (size_t n = 0; n <= 19; n++) {
        unsigned char dst[32];
        memset(dst, 0xee, sizeof(dst));
        mw_assign_sparse(dst + 1, src, n);
        assert_memory_equal(dst + 1, src, n);
        assert_int_equal(dst[0], 0xee);
        assert_int_equal(dst[1 + n], 0xee);
        mw_assign_sparse(dst + 1, NULL, n);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(dst[1 + i], 0);
        assert_int_equal(dst[1 + n], 0xee);
    }
}

/* mw_set_string: from NULL, cut to size - 1, the same pointer when equal. */
static void set_string(void **state)
{
    (void)state;
    char *s = NULL;
    mw_set_string(&s, "namespace-a", 8);
    assert_string_equal(s, "namespa");
    char *same = s;
    mw_set_string(&s, "namespace-b", 8); /* cut, it is the same */
    assert_ptr_equal(s, same);
    mw_set_string(&s, "", 8);
    assert_string_equal(s, "");
    mw_set_string(&s, "pod", 8);
    assert_string_equal(s, "pod");
    free(s);
}

static void listen_addresses(void **state)
{
    (void)state;
    const struct {
        const char *in;
        int rc;
        const char *host;
        unsigned port;
    } cases[] = {
        {"[::1]:10230", 0, "::1", 10230},
        {":0", 0, "", 0},
        {":10230", 0, "", 10230},
        {"0.0.0.0:1", 0, "0.0.0.0", 1},
        {"127.0.0.1:65535", 0, "127.0.0.1", 65535},
        {"localhost:80", 0, "localhost", 80},
        {"[fe80::1%eth0]:9100", 0, "fe80::1%eth0", 9100},
        {":00080", 0, "", 80},
        {"host:", -1, NULL, 0},
        {"host:99999", -1, NULL, 0},
        {":65536", -1, NULL, 0},
        {"host:-1", -1, NULL, 0},
        {"host:+1", -1, NULL, 0},
        {"host: 1", -1, NULL, 0},
        {"host:1 ", -1, NULL, 0},
        {"host:0x10", -1, NULL, 0},
        {"host:99999999999999999999", -1, NULL, 0},
        {"a:b:c", -1, NULL, 0},
        {"::1", -1, NULL, 0}, /* IPv6 needs brackets */
        {"::1:80", -1, NULL, 0},
        {"[::1]", -1, NULL, 0},
        {"[::1]:", -1, NULL, 0},
        {"[::1]x:1", -1, NULL, 0},
        {"[]:1", -1, NULL, 0},
        {"[::1:80", -1, NULL, 0},
        {"10230", -1, NULL, 0},
        {"", -1, NULL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char host[64] = "untouched";
        uint16_t port = 4242;
        int rc = mw_parse_listen(cases[i].in, host, sizeof(host), &port);
        if (rc != cases[i].rc) fail_msg("'%s': rc %d, want %d", cases[i].in, rc, cases[i].rc);
        if (rc == 0) {
            assert_string_equal(host, cases[i].host);
            assert_int_equal(port, cases[i].port);
        } else {
            assert_int_equal(port, 4242);
        }
    }
    /* A host that does not fit the caller's buffer is an error, not a cut. */
    char small[4];
    uint16_t port;
    assert_int_equal(mw_parse_listen("abc:1", small, sizeof(small), &port), 0);
    assert_string_equal(small, "abc");
    assert_int_equal(mw_parse_listen("abcd:1", small, sizeof(small), &port), -1);
    assert_int_equal(mw_parse_listen("[abcd]:1", small, sizeof(small), &port), -1);
}

static int load(mw_config *c, const char *yaml, char *err, size_t errsize)
{
    err[0] = '\0';
    return mw_config_load_string(c, "t.yaml", yaml, strlen(yaml), err, errsize);
}

/* libyaml is loaded by the first YAML read (src/core/lazylib.c), not at
 * start: an agent without a config file does without it. Runs first. */
static void libyaml_loaded_by_first_read(void **state)
{
    (void)state;
    mw_config c;
    mw_config_defaults(&c);
    assert_false(tu_library_mapped("libyaml"));
    char err[512];
    assert_int_equal(load(&c, "interval: 5s\n", err, sizeof(err)), 0);
    assert_true(c.interval_ms == 5000);
    assert_true(tu_library_mapped("libyaml"));
    /* And reports YAML errors as before. */
    assert_int_equal(load(&c, "interval: [\n", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "YAML syntax error"));
}

static void yaml_valid(void **state)
{
    (void)state;
    mw_config c;
    mw_config_defaults(&c);
    char err[512];
    const char *yaml = "# mlwatch settings\n"
                       "root: /host\n"
                       "listen: \"127.0.0.1:9100\"\n"
                       "interval: 1m30s\n"
                       "log_level: debug\n"
                       "format: openmetrics\n"
                       "collectors:\n"
                       "  - cpu\n"
                       "  - memory\n"
                       "disable_collectors: [netdev]\n";
    assert_int_equal(load(&c, yaml, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    assert_string_equal(c.root, "/host");
    assert_string_equal(c.listen, "127.0.0.1:9100");
    assert_true(c.interval_ms == 90000);
    assert_string_equal(c.log_level, "debug");
    assert_string_equal(METRICS(c)->format, "openmetrics");
    assert_int_equal(COLL(c)->ncollectors, 2);
    assert_string_equal(COLL(c)->collectors[0], "cpu");
    assert_string_equal(COLL(c)->collectors[1], "memory");
    assert_int_equal(COLL(c)->ndisable_collectors, 1);
    assert_string_equal(COLL(c)->disable_collectors[0], "netdev");

    /* A list may also be one comma-separated scalar, like the flag. */
    assert_int_equal(load(&c, "collectors: loadavg,cpu\n", err, sizeof(err)), 0);
    assert_int_equal(COLL(c)->ncollectors, 2);
    assert_string_equal(COLL(c)->collectors[0], "loadavg");
    assert_string_equal(COLL(c)->collectors[1], "cpu");
    /* An empty list, or an empty value, means the default (all / none). */
    assert_int_equal(load(&c, "collectors: []\n", err, sizeof(err)), 0);
    assert_int_equal(COLL(c)->ncollectors, 0);
    assert_int_equal(load(&c, "disable_collectors: \"\"\n", err, sizeof(err)), 0);
    assert_int_equal(COLL(c)->ndisable_collectors, 0);
    /* Keys not in the file keep their value. */
    assert_string_equal(c.root, "/host");
    /* Anchors and aliases are plain YAML. */
    assert_int_equal(load(&c, "root: &r /srv\nlisten: :1\n", err, sizeof(err)), 0);
    assert_string_equal(c.root, "/srv");
    /* An explicit document start and end are fine, as is a trailing empty one. */
    assert_int_equal(load(&c, "---\ninterval: 2s\n...\n", err, sizeof(err)), 0);
    assert_true(c.interval_ms == 2000);
    assert_int_equal(load(&c, "interval: 3s\n---\n", err, sizeof(err)), 0);
    assert_true(c.interval_ms == 3000);
    /* Exactly 64 list items fit. */
    char many[4096] = "collectors: [";
    for (int i = 0; i < 64; i++)
        strcat(many, i ? ", cpu" : "cpu");
    strcat(many, "]\n");
    assert_int_equal(load(&c, many, err, sizeof(err)), 0);
    assert_int_equal(COLL(c)->ncollectors, 64);
}

static void yaml_empty(void **state)
{
    (void)state;
    const char *empties[] = {"",    "\n\n",  "# only a comment\n", "---\n", "---\n...\n",
                             "~\n", "null\n"};
    for (size_t i = 0; i < sizeof(empties) / sizeof(empties[0]); i++) {
        mw_config c, want;
        mw_config_defaults(&c);
        mw_config_defaults(&want);
        char err[512];
        int rc = load(&c, empties[i], err, sizeof(err));
        if (i >= 5) {
            /* "~" and "null" are a scalar, not an empty file. */
            assert_int_equal(rc, -1);
            assert_string_equal(err, "t.yaml:1:1: the top level must be a mapping of settings "
                                     "(key: value)");
            continue;
        }
        if (rc != 0) fail_msg("'%s': %s", empties[i], err);
        assert_memory_equal(&c, &want, sizeof(c));
    }
}

static void yaml_errors(void **state)
{
    (void)state;
    char longroot[4200] = "root: /";
    memset(longroot + 7, 'r', 4096);
    longroot[7 + 4096] = '\0';
    char manyitems[4096] = "collectors: [";
    for (int i = 0; i < 65; i++)
        strcat(manyitems, i ? ", cpu" : "cpu");
    strcat(manyitems, "]\n");
    const struct {
        const char *yaml, *err;
    } cases[] = {
        {"- a\n- b\n", "t.yaml:1:1: the top level must be a mapping of settings (key: value)"},
        {"42\n", "t.yaml:1:1: the top level must be a mapping of settings (key: value)"},
        {"interval: 5s\ninterval: 10s\n",
         "t.yaml:2:1: duplicate key 'interval' (first set on line 1)"},
        {"collectors: [cpu]\nroot: /\ncollectors: [memory]\n",
         "t.yaml:3:1: duplicate key 'collectors' (first set on line 1)"},
        {"interval: [1s]\n", "t.yaml:1:11: interval: expected a single value, got a list"},
        {"listen: {a: b}\n", "t.yaml:1:9: listen: expected a single value, got a mapping"},
        {"root: /\nlog_level:\n  verbose: true\n",
         "t.yaml:3:3: log_level: expected a single value, got a mapping"},
        {"nested:\n  unknown: 1\n", "t.yaml:1:1: unknown key 'nested'"},
        {"root: /\nfoo: 1\n", "t.yaml:2:1: unknown key 'foo'"},
        {"log-level: debug\n", "t.yaml:1:1: unknown key 'log-level'"},
        {"config: other.yaml\n", "t.yaml:1:1: unknown key 'config'"},
        {"? [a]\n: b\n", "t.yaml:1:3: keys must be plain names"},
        {"\"interval\\0x\": 5s\n", "t.yaml:1:1: keys must be plain names"},
        {"root: \"/a\\0b\"\n", "t.yaml:1:7: root: value contains a NUL character"},
        {"collectors: [\"cpu\\0\"]\n", "t.yaml:1:14: collectors: value contains a NUL character"},
        {"collectors: [cpu, {a: b}]\n", "t.yaml:1:19: collectors: list items must be names"},
        {"collectors: {cpu: true}\n", "t.yaml:1:13: collectors: expected a list of names"},
        {"collectors: [\"\"]\n", "t.yaml:1:14: collectors: invalid list item ''"},
        {"collectors: cpu,\n", "t.yaml:1:13: collectors: invalid list item ''"},
        {"collectors: ',cpu'\n", "t.yaml:1:13: collectors: invalid list item ''"},
        {"collectors: [gpu]\n",
         "t.yaml:1:14: collectors: no collector named 'gpu' (see `mlwatch help`)"},
        {"disable_collectors: cpu,gpu\n",
         "t.yaml:1:21: disable_collectors: no collector named 'gpu' (see `mlwatch help`)"},
        {"collectors: [abcdefghijabcdefghijabcdefghijab]\n",
         "t.yaml:1:14: collectors: invalid list item 'abcdefghijabcdefghijabcdefghijab'"},
        {manyitems, "t.yaml:1:334: collectors: more than 64 items"},
        {"interval: 1.5s\n",
         "t.yaml:1:11: interval: invalid duration '1.5s' (examples: 1s, 500ms, 1m30s)"},
        {"interval: 0s\n",
         "t.yaml:1:11: interval: invalid duration '0s' (examples: 1s, 500ms, 1m30s)"},
        {"interval: 5\n",
         "t.yaml:1:11: interval: invalid duration '5' (examples: 1s, 500ms, 1m30s)"},
        {"interval:\n", "t.yaml:1:10: interval: invalid duration '' (examples: 1s, 500ms, 1m30s)"},
        {"listen: ':99999'\n", "t.yaml:1:9: listen: must be ADDR:PORT with a port from 0 to "
                               "65535, like :10230 or 127.0.0.1:10230"},
        {"log_level: loud\n", "t.yaml:1:12: log_level: must be one of debug, info, warn, error"},
        {"format: json\n", "t.yaml:1:9: format: must be text or openmetrics"},
        {longroot, "t.yaml:1:7: root: value is longer than 4095 characters"},
        {"interval: 5s\n  bad: indent\n",
         "t.yaml:2:6: YAML syntax error: mapping values are not allowed in this context"},
        {"\tinterval: 1s\n",
         "t.yaml:1:1: YAML syntax error: found character that cannot start any token"},
        {"interval: 'unterminated\n",
         "t.yaml:2:1: YAML syntax error: found unexpected end of stream"},
        /* Errors are one line, whatever the file holds. */
        {"\"a\\nb\": 1\n", "t.yaml:1:1: unknown key 'a?b'"},
        {"interval: \"1\\r\\ns\\t\"\n",
         "t.yaml:1:11: interval: invalid duration '1??s?' (examples: 1s, 500ms, 1m30s)"},
        /* A second document is not silently ignored, nor is garbage in it. */
        {"interval: 5s\n---\ninterval: 7s\n",
         "t.yaml:3:1: a second YAML document; the file must hold one mapping"},
        {"interval: 5s\n---\n[\n",
         "t.yaml:4:1: YAML syntax error: did not find expected node content"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mw_config c, want;
        mw_config_defaults(&c);
        mw_config_defaults(&want);
        char err[512];
        int rc = load(&c, cases[i].yaml, err, sizeof(err));
        if (rc != -1 || strcmp(err, cases[i].err) != 0)
            fail_msg("case %zu: rc %d, error '%s', want '%s'", i, rc, err, cases[i].err);
        /* A file with an error changes nothing, even keys before the error. */
        if (memcmp(&c, &want, sizeof(c)) != 0) fail_msg("case %zu changed the settings", i);
    }

    /* The error message is cut to the caller's buffer, and terminated. */
    mw_config c;
    mw_config_defaults(&c);
    char small[12];
    assert_int_equal(load(&c, "foo: 1\n", small, sizeof(small)), -1);
    assert_string_equal(small, "t.yaml:1:1:");
}

static void yaml_files(void **state)
{
    (void)state;
    mw_config c;
    mw_config_defaults(&c);
    char err[1024], want[1024];
    const char *p = file_with("ok.yaml", "interval: 10s\n");
    assert_int_equal(mw_config_load_file(&c, p, err, sizeof(err)), 0);
    assert_true(c.interval_ms == 10000);

    p = file_with("bad.yaml", "interval: 10s\nlisten: nope\n");
    assert_int_equal(mw_config_load_file(&c, p, err, sizeof(err)), -1);
    snprintf(want, sizeof(want),
             "%s:2:9: listen: must be ADDR:PORT with a port from 0 to 65535, like :10230 or "
             "127.0.0.1:10230",
             p);
    assert_string_equal(err, want);

    char missing[600];
    snprintf(missing, sizeof(missing), "%s/missing.yaml", dir);
    assert_int_equal(mw_config_load_file(&c, missing, err, sizeof(err)), -1);
    snprintf(want, sizeof(want), "%s: cannot open config file: No such file or directory", missing);
    assert_string_equal(err, want);

    /* A directory opens but cannot be read. */
    assert_int_equal(mw_config_load_file(&c, dir, err, sizeof(err)), -1);
    snprintf(want, sizeof(want), "%s: cannot read config file", dir);
    assert_string_equal(err, want);

    /* More than 1 MiB is refused before parsing. */
    size_t n = (1u << 20) + 1;
    char *big = malloc(n + 1);
    memset(big, '#', n);
    big[n] = '\0';
    p = file_with("big.yaml", big);
    assert_int_equal(mw_config_load_file(&c, p, err, sizeof(err)), -1);
    snprintf(want, sizeof(want), "%s: config file is larger than 1 MiB", p);
    assert_string_equal(err, want);
    /* Exactly 1 MiB minus one byte of comment is read. */
    big[n - 2] = '\0';
    p = file_with("almost.yaml", big);
    assert_int_equal(mw_config_load_file(&c, p, err, sizeof(err)), 0);
    free(big);
    assert_true(c.interval_ms == 10000);
}

/* Run mw_config_from_args on "mlwatch agent" and the NULL-terminated flags. */
static int args(mw_config *c, char *err, size_t errsize, char **rest, size_t *nrest,
                size_t rest_cap, ...)
{
    char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, rest_cap);
    argv[0] = "mlwatch";
    argv[1] = "agent";
    for (char *a; (a = va_arg(ap, char *)) && argc < 30;)
        argv[2 + argc++] = a;
    va_end(ap);
    err[0] = '\0';
    return mw_config_from_args(c, argc + 2, argv, 2, rest, nrest, rest_cap, err, errsize);
}

static void flags(void **state)
{
    (void)state;
    mw_config c;
    char err[1024];
    mw_config_defaults(&c);
    assert_int_equal(args(&c, err, sizeof(err), NULL, NULL, 0, "--interval", "5s",
                          "--listen=127.0.0.1:9", "--root", "/host", "--collectors=cpu,memory",
                          "--log-level", "warn", "--format=openmetrics", (const char *)NULL),
                     0);
    assert_true(c.interval_ms == 5000);
    assert_string_equal(c.listen, "127.0.0.1:9");
    assert_string_equal(c.root, "/host");
    assert_int_equal(COLL(c)->ncollectors, 2);
    assert_string_equal(COLL(c)->collectors[1], "memory");
    assert_string_equal(c.log_level, "warn");
    assert_string_equal(METRICS(c)->format, "openmetrics");

    /* Repeated flags: the last one wins, lists included (they replace). */
    assert_int_equal(args(&c, err, sizeof(err), NULL, NULL, 0, "--interval", "1s", "--interval=2s",
                          "--collectors", "loadavg", (const char *)NULL),
                     0);
    assert_true(c.interval_ms == 2000);
    assert_int_equal(COLL(c)->ncollectors, 1);
    assert_string_equal(COLL(c)->collectors[0], "loadavg");
    /* An empty list flag means the default again. */
    assert_int_equal(args(&c, err, sizeof(err), NULL, NULL, 0, "--collectors=", (const char *)NULL),
                     0);
    assert_int_equal(COLL(c)->ncollectors, 0);

    /* Positional arguments, and "--" ending the flags. */
    char *rest[4];
    size_t nrest = 99;
    assert_int_equal(args(&c, err, sizeof(err), rest, &nrest, 4, "one", "--interval", "3s", "--",
                          "--two", "three", (const char *)NULL),
                     0);
    assert_int_equal(nrest, 3);
    assert_string_equal(rest[0], "one");
    assert_string_equal(rest[1], "--two");
    assert_string_equal(rest[2], "three");
    assert_true(c.interval_ms == 3000);
}

/* A repeatable path (--rule-file): flags add lines, the first replaces the
 * file's value; the YAML value may be a list. */
static void repeatable_paths(void **state)
{
    (void)state;
    mw_config c;
    char err[1024];
    mw_config_defaults(&c);
    const mw_rules_settings *r = mw_config_group(&c, &mw_rules_options);
    assert_string_equal(r->rule_files, "");
    assert_int_equal(load(&c, "rule_file: [a.yml, 'r.d/*.yml']\n", err, sizeof(err)), 0);
    assert_string_equal(r->rule_files, "a.yml\nr.d/*.yml");
    assert_int_equal(load(&c, "rule_file: one.yml\n", err, sizeof(err)), 0);
    assert_string_equal(r->rule_files, "one.yml");
    assert_int_equal(args(&c, err, sizeof(err), NULL, NULL, 0, "--rule-file", "x.yml",
                          "--rule-file=y.yml", (const char *)NULL),
                     0);
    assert_string_equal(r->rule_files, "x.yml\ny.yml");
    assert_int_equal(
        args(&c, err, sizeof(err), NULL, NULL, 0, "--rule-file", "", (const char *)NULL), 0);
    assert_string_equal(r->rule_files, "");
    assert_int_equal(load(&c, "rule_file: [a, {b: c}]\n", err, sizeof(err)), -1);
    assert_string_equal(err, "t.yaml:1:16: rule_file: list items must be paths");
}

static void flag_errors(void **state)
{
    (void)state;
    const char *cfg = file_with("c.yaml", "interval: 10s\n");
    char eq[600];
    snprintf(eq, sizeof(eq), "--config=%s", cfg);
    char *rest[1];
    size_t nrest;
    const struct {
        int argc;
        const char *argv[6];
        const char *err;
    } cases[] = {
        {1, {"--nope"}, "unknown flag '--nope' (see `mlwatch help`)"},
        {1, {"--nope=1"}, "unknown flag '--nope' (see `mlwatch help`)"},
        {1, {"--"}, NULL},
        {1, {"--interval"}, "--interval: missing value"},
        {1, {"--interval="}, "--interval: invalid duration '' (examples: 1s, 500ms, 1m30s)"},
        {2,
         {"--interval", "1.5s"},
         "--interval: invalid duration '1.5s' (examples: 1s, 500ms, 1m30s)"},
        {2,
         {"--listen", "host:"},
         "--listen: must be ADDR:PORT with a port from 0 to 65535, like :10230 or 127.0.0.1:10230"},
        {1, {"--collectors=cpu,,memory"}, "--collectors: invalid list item ''"},
        {1, {"--collectors=gpu"}, "--collectors: no collector named 'gpu' (see `mlwatch help`)"},
        {1, {"--log-level=verbose"}, "--log-level: must be one of debug, info, warn, error"},
        {2, {"stray", "x"}, "unexpected argument 'stray'"},
        {2, {"--", "x"}, "unexpected argument 'x'"},
        {1, {"--a\nb"}, "unknown flag '--a?b' (see `mlwatch help`)"},
        {1, {"--interval=1\ns"}, "--interval: invalid duration '1?s' (examples: 1s, 500ms, 1m30s)"},
        {1, {"--config"}, "--config: missing value"},
        {1, {"--config="}, "--config: missing value"},
        {3, {"--config", cfg, eq}, "--config: given more than once"},
        {2, {eq, eq}, "--config: given more than once"},
        /* Reported before either file is read (the first does not exist). */
        {3, {"--config", "/nonexistent/bad.yaml", eq}, "--config: given more than once"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mw_config c;
        mw_config_defaults(&c);
        char *argv[8] = {"mlwatch", "agent"};
        for (int j = 0; j < cases[i].argc; j++)
            argv[2 + j] = (char *)cases[i].argv[j];
        char err[1024] = "";
        int rc =
            mw_config_from_args(&c, cases[i].argc + 2, argv, 2, NULL, NULL, 0, err, sizeof(err));
        if (!cases[i].err) {
            assert_int_equal(rc, 0);
            continue;
        }
        if (rc != -1 || strcmp(err, cases[i].err) != 0)
            fail_msg("case %zu: rc %d, error '%s', want '%s'", i, rc, err, cases[i].err);
    }
    /* More positional arguments than the caller has room for. */
    mw_config c;
    mw_config_defaults(&c);
    char err[256];
    assert_int_equal(args(&c, err, sizeof(err), rest, &nrest, 1, "a", "b", (const char *)NULL), -1);
    assert_string_equal(err, "unexpected argument 'b'");
}

static void config_file_and_flags(void **state)
{
    (void)state;
    const char *cfg = file_with("agent.yaml", "interval: 10s\n"
                                              "listen: 127.0.0.1:9100\n"
                                              "collectors: [cpu, memory]\n"
                                              "log_level: debug\n");
    mw_config c;
    char err[1024], want[1024];

    /* Flags win over the file wherever they appear on the command line. */
    mw_config_defaults(&c);
    assert_int_equal(args(&c, err, sizeof(err), NULL, NULL, 0, "--interval", "5s", "--config", cfg,
                          "--collectors", "loadavg", (const char *)NULL),
                     0);
    assert_true(c.interval_ms == 5000);              /* flag before --config */
    assert_string_equal(c.listen, "127.0.0.1:9100"); /* file */
    assert_string_equal(c.log_level, "debug");       /* file */
    assert_string_equal(c.root, "/");                /* default */
    assert_int_equal(COLL(c)->ncollectors, 1);       /* the flag replaces the file's list */
    assert_string_equal(COLL(c)->collectors[0], "loadavg");
    assert_string_equal(c.config_path, cfg);

    /* '=' form, flag after it. */
    char eq[600];
    snprintf(eq, sizeof(eq), "--config=%s", cfg);
    mw_config_defaults(&c);
    assert_int_equal(
        args(&c, err, sizeof(err), NULL, NULL, 0, eq, "--listen=:0", (const char *)NULL), 0);
    assert_true(c.interval_ms == 10000);
    assert_string_equal(c.listen, ":0");
    assert_int_equal(COLL(c)->ncollectors, 2);
    assert_string_equal(c.config_path, cfg);

    /* The value after --config is a path, not a flag or a positional. */
    char *rest[2];
    size_t nrest;
    mw_config_defaults(&c);
    assert_int_equal(
        args(&c, err, sizeof(err), rest, &nrest, 2, "--config", cfg, "pos", (const char *)NULL), 0);
    assert_int_equal(nrest, 1);
    assert_string_equal(rest[0], "pos");

    /* An error in the file is reported with its path, line and column. */
    const char *bad = file_with("bad.yaml", "interval: 10s\ninterval: 20s\n");
    mw_config_defaults(&c);
    assert_int_equal(args(&c, err, sizeof(err), NULL, NULL, 0, "--config", bad, (const char *)NULL),
                     -1);
    snprintf(want, sizeof(want), "%s:2:1: duplicate key 'interval' (first set on line 1)", bad);
    assert_string_equal(err, want);
    assert_true(c.interval_ms == 1000);

    /* After "--", --config is an ordinary positional argument. */
    mw_config_defaults(&c);
    assert_int_equal(
        args(&c, err, sizeof(err), rest, &nrest, 2, "--", "--config", bad, (const char *)NULL), 0);
    assert_int_equal(nrest, 2);
    assert_true(c.interval_ms == 1000);
}

static void help_tables(void **state)
{
    (void)state;
    char *help = NULL, *md = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&help, &len);
    mw_config_print_help(f);
    fclose(f);
    f = open_memstream(&md, &len);
    mw_config_print_markdown(f);
    fclose(f);

    assert_non_null(
        strstr(help, "  --interval DURATION            Collection interval (default: 1s)\n"));
    assert_non_null(
        strstr(help, "  --config PATH                  YAML configuration file (default: none)\n"));
    int options = 0;
    for (const char *p = help; (p = strstr(p, "  --")); p += 4)
        options++;
    assert_true(options >= 8);

    const char *head = "| flag | YAML key | default | meaning |\n|---|---|---|---|\n"
                       "| `--root` | `root` | `/` | Host prefix under which /proc, /sys, "
                       "/var/log/pods and /var/lib/kubelet are read |\n";
    assert_true(strncmp(md, head, strlen(head)) == 0);
    assert_non_null(
        strstr(md, "\n| `--config` | (flag only) | none | YAML configuration file |\n"));
    assert_non_null(strstr(md, "\n| `--log-level` | `log_level` | `info` | "));
    assert_non_null(strstr(md, "\n| `--disable-collectors` | `disable_collectors` | `none` | "));
    assert_null(strstr(md, "``")); /* an empty code span renders as two backticks */
    /* One row per option: "| `--flag` | key | default | meaning |" for each
     * flag of `mlwatch help`, "| (config file only) | key | ..." for each
     * nested YAML section (which has no flag). */
    int rows = 0, sections = 0;
    for (const char *p = md; *p; p++)
        rows += *p == '\n';
    for (const char *p = md; (p = strstr(p, "\n| (config file only) | `")); p++)
        sections++;
    assert_true(sections >= 1);
    assert_int_equal(rows, 2 + options + sections);
    for (const char *p = strstr(md, "|---|---|---|---|\n") + 18; *p; p = strchr(p, '\n') + 1) {
        assert_true(strncmp(p, "| `--", 5) == 0 || strncmp(p, "| (config file only) | `", 24) == 0);
        int bars = 0;
        for (const char *q = p; *q != '\n'; q++)
            bars += *q == '|';
        assert_int_equal(bars, 5);
    }
    free(help);
    free(md);
}

/* The range validator behind --query-max-samples, --process-top,
 * --idle-threshold, --alertmanager-queue-capacity and the like. */
static void range_validator(void **state)
{
    (void)state;
    char why[128];
    assert_int_equal(mw_check_range("1", 1, 64, 1, "a whole number from 1 to 64", why, sizeof(why)),
                     0);
    assert_int_equal(mw_check_range("64", 1, 64, 1, "x", why, sizeof(why)), 0);
    assert_int_equal(mw_check_range("6.5", 0, 100, 0, "x", why, sizeof(why)), 0);
    assert_int_equal(mw_check_range("1e3", 0, 1e15, 1, "x", why, sizeof(why)), 0);
    static const char *bad[] = {"0", "65", "6.5", "", "7x", "nan", "inf", "-1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = 0;
        assert_int_equal(
            mw_check_range(bad[i], 1, 64, 1, "a whole number from 1 to 64", why, sizeof(why)), -1);
        char want[128];
        snprintf(want, sizeof(want), "must be a whole number from 1 to 64, got '%s'", bad[i]);
        assert_string_equal(why, want);
    }
    assert_int_equal(
        mw_check_range("100.5", 0, 100, 0, "a percentage from 0 to 100", why, sizeof(why)), -1);
    assert_string_equal(why, "must be a percentage from 0 to 100, got '100.5'");
    assert_int_equal(mw_check_count("1000000000000001", why, sizeof(why)), -1);
    assert_string_equal(why, "must be a whole number from 0 to 1e15, got '1000000000000001'");
    assert_int_equal(mw_check_count("0", why, sizeof(why)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(libyaml_loaded_by_first_read),
        cmocka_unit_test(range_validator),
        cmocka_unit_test(defaults),
        cmocka_unit_test(defaults_write_only_nonzero_pages),
        cmocka_unit_test(assign_sparse),
        cmocka_unit_test(set_string),
        cmocka_unit_test(listen_addresses),
        cmocka_unit_test(yaml_valid),
        cmocka_unit_test(yaml_empty),
        cmocka_unit_test(yaml_errors),
        cmocka_unit_test(yaml_files),
        cmocka_unit_test(flags),
        cmocka_unit_test(repeatable_paths),
        cmocka_unit_test(flag_errors),
        cmocka_unit_test(config_file_and_flags),
        cmocka_unit_test(help_tables),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
