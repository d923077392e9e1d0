/* test_gpu_health.c - GPU health (issue 30): the kernel log record and XID
 * line parsers on several driver generations' formats, the kmsg reader
 * (records from before the start, a ring that wrapped, EPIPE), the XID
 * catalog (built in, an operator's file merged over it, errors with
 * file:line:col), the health rules (XIDs, escalation, counters, a lost GPU)
 * and two storms with exact states and counts: 672 XID 45 on 3 nodes in
 * 3 h (no unhealthy GPU), 800,000 XID 95 records on 29 GPU windows
 * (bounded memory, exact deduplicated counts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "collect/gpu/gpu.h"
#include "collect/gpu/gpu_health.h"
#include "collect/gpu/xid.h"
#include "testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define S 1000000LL /* microseconds per second */

static void kmsg_records(void **state)
{
    (void)state;
    mw_kmsg_record r;
    const char *l = "4,897,9000000,-,caller=T4721;NVRM: Xid (PCI:0000:18:00): 45, x";
    assert_int_equal(mw_kmsg_parse_record(l, strlen(l), &r), 0);
    assert_int_equal(r.prio, 4);
    assert_int_equal(r.seq, 897);
    assert_int_equal(r.usec, 9000000);
    assert_int_equal(r.flag, '-');
    assert_int_equal(r.msg_len, strlen("NVRM: Xid (PCI:0000:18:00): 45, x"));
    assert_memory_equal(r.msg, "NVRM: Xid", 9);
    l = "6,1,2,c;";
    assert_int_equal(mw_kmsg_parse_record(l, strlen(l), &r), 0);
    assert_int_equal(r.msg_len, 0);
    const char *bad[] = {" SUBSYSTEM=pci",
                         "4,1,2;x",
                         "4,1,2,x;y",
                         "a,1,2,-;x",
                         "4,1,2,-x",
                         "4,1,2,-",
                         "",
                         "4,,2,-;x",
                         "4,99999999999999999999,2,-;x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(mw_kmsg_parse_record(bad[i], strlen(bad[i]), &r), -1);
}

static int parse(const char *s, mw_xid_line *x)
{
    return mw_xid_parse_line(s, strlen(s), x);
}

static void xid_lines(void **state)
{
    (void)state;
    mw_xid_line x;
    /* R535: pid and name */
    assert_int_equal(
        parse("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
              &x),
        MW_XID_LINE_XID);
    assert_string_equal(x.pci, "0000:3b:00");
    assert_int_equal(x.code, 79);
    assert_int_equal(x.pid, 1234);
    assert_string_equal(x.process, "python3");
    assert_string_equal(x.text, "GPU has fallen off the bus.");
    /* R550+: unknown process */
    assert_int_equal(parse("NVRM: Xid (PCI:0000:48:00): 48, pid='<unknown>', name=<unknown>, An "
                           "uncorrectable double bit error",
                           &x),
                     MW_XID_LINE_XID);
    assert_int_equal(x.pid, -1);
    assert_string_equal(x.process, "");
    assert_string_equal(x.text, "An uncorrectable double bit error");
    /* R470: no pid, upper-case hex */
    assert_int_equal(parse("NVRM: Xid (PCI:0000:B1:00): 13, Graphics SM Warp Exception", &x),
                     MW_XID_LINE_XID);
    assert_string_equal(x.pci, "0000:b1:00");
    assert_int_equal(x.pid, -1);
    assert_string_equal(x.text, "Graphics SM Warp Exception");
    /* older drivers: no "PCI:" */
    assert_int_equal(parse("NVRM: Xid (0000:01:00): 3, C 00000005 SC 00000007", &x),
                     MW_XID_LINE_XID);
    assert_string_equal(x.pci, "0000:01:00");
    assert_int_equal(x.code, 3);
    assert_int_equal(
        parse("NVRM: GPU at PCI:0000:2b:00: GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae", &x),
        MW_XID_LINE_GPU_AT);
    assert_string_equal(x.pci, "0000:2b:00");
    assert_string_equal(x.uuid, "GPU-0b11d014-1685-04bd-26ed-5fc0bc1c44ae");
    assert_int_equal(parse("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 "
                           "egress non-posted PRIV error",
                           &x),
                     MW_XID_LINE_SXID);
    assert_string_equal(x.device, "nvidia-nvswitch0");
    assert_string_equal(x.pci, "0000:05:00");
    assert_int_equal(x.code, 12028);
    assert_string_equal(x.text, "Non-fatal, Link 32 egress non-posted PRIV error");
    const char *none[] = {"NVRM: GPU 0000:38:00.0: GPU has fallen off the bus.",
                          "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
                          "eth0: Link is Up",
                          "NVRM: Xid (PCI:0000:3b:00) 79, no colon",
                          "NVRM: Xid (PCI:zz:3b:00): 79, bad bus",
                          "NVRM: Xid (PCI:0000:3b:00): , no code",
                          "nvidia-nvswitch0: Xid (PCI:0000:05:00.0): 1, not an SXid",
                          "NVRM: Xid (PCI:0000:3b:00): 99999999999, too big",
                          ""};
    for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
        assert_int_equal(parse(none[i], &x), MW_XID_LINE_NONE);
}

/* Four GPUs at the fixture's bus ids (0000:18, 28, 38, 48). */
static mw_gpu_dev *devices(unsigned n)
{
    mw_gpu_dev *d = calloc(n, sizeof(*d));
    for (unsigned i = 0; i < n; i++) {
        snprintf(d[i].index, sizeof(d[i].index), "%u", i);
        snprintf(d[i].uuid, sizeof(d[i].uuid), "GPU-%u", i);
        snprintf(d[i].pci_bus_id, sizeof(d[i].pci_bus_id), "0000:%02x:00.0", 0x18 + 0x10 * i);
    }
    return d;
}

static mw_gpu_health_engine *engine(const char *catalog_path)
{
    mw_xid_catalog *cat = malloc(sizeof(*cat));
    char err[400];
    assert_int_equal(mw_xid_catalog_load(cat, catalog_path, err, sizeof(err)), 0);
    mw_gpu_health_engine *e = mw_gpu_health_new(cat);
    free(cat);
    return e;
}

typedef struct feed {
    mw_gpu_health_engine *e;
    int before;
    long n;
} feed;

static void on_rec(void *ctx, const mw_kmsg_record *rec, int before_start)
{
    feed *f = ctx;
    f->n++;
    f->before += before_start;
    mw_gpu_health_kmsg(f->e, rec, before_start, 10 * S, 1700000010000);
}

static const mw_gpu_event *find(const mw_gpu_event *ev, size_t n, const char *pci, uint32_t code)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(ev[i].pci, pci) == 0 && ev[i].code == code) return &ev[i];
    fail_msg("no event %s %u", pci, code);
    return NULL;
}

/* The fixture: R470, R535 and R550 lines among other messages, a
 * continuation, a ring that lost records 890-894. */
static void kernel_log_fixture(void **state)
{
    (void)state;
    const char *root = tu_fixture_copy("kmsg-node");
    mw_hostfs host;
    assert_int_equal(mw_hostfs_open(&host, root), 0);
    mw_kmsg_reader r;
    char why[200];
    assert_int_equal(mw_kmsg_open(&r, &host, "/dev/kmsg", why, sizeof(why)), 0);
    mw_gpu_dev *d = devices(4);
    feed f = {engine(NULL), 0, 0};
    mw_gpu_health_devices(f.e, d, 4);
    assert_int_equal(mw_kmsg_drain(&r, 1000, on_rec, &f, why, sizeof(why)), 17);
    assert_int_equal(f.before, 17);
    assert_int_equal(r.lost, 5);
    assert_int_equal(r.malformed, 0);
    mw_gpu_event ev[16];
    mw_gpu_event_stats st;
    size_t n = mw_gpu_health_events(f.e, ev, 16, &st);
    assert_int_equal(n, 9);
    assert_int_equal(st.records, 10);
    const mw_gpu_event *x = find(ev, n, "0000:18:00", 13);
    assert_int_equal(x->count, 2);
    assert_string_equal(x->gpu, "0");
    assert_int_equal(x->before_start, 1);
    x = find(ev, n, "0000:38:00", 79);
    assert_int_equal(x->pid, 2841);
    assert_string_equal(x->process, "python3");
    assert_string_equal(x->uuid, "GPU-2");
    assert_int_equal(x->first_us, 7000100);
    assert_int_equal(x->first_ms, 1700000010000 - (10 * S - 7000100) / 1000);
    x = find(ev, n, "0000:28:00", 31); /* R470 form */
    assert_int_equal(x->pid, -1);
    x = find(ev, n, "0000:18:00", 45);
    assert_string_equal(x->process, "torchrun");
    x = find(ev, n, "0000:99:00", 119); /* not a GPU the collector reads */
    assert_int_equal(x->dev, -1);
    x = find(ev, n, "0000:07:00", 20034);
    assert_int_equal(x->sxid, 1);
    assert_string_equal(x->device, "nvidia-nvswitch2");

    mw_gpu_health h[4];
    mw_gpu_health_evaluate(f.e, d, 4, 1, 10 * S, 1700000010000, h);
    assert_int_equal(h[0].state, MW_HEALTH_HEALTHY); /* 13, 13, 45: application class */
    assert_int_equal(h[1].state, MW_HEALTH_HEALTHY);
    assert_int_equal(h[2].state, MW_HEALTH_UNHEALTHY);
    assert_string_equal(h[2].reason, "xid_79");
    assert_int_equal(h[2].action, MW_ACTION_REBOOT_NODE);
    assert_int_equal(h[3].state, MW_HEALTH_UNHEALTHY);
    assert_string_equal(h[3].reason, "xid_48");
    assert_int_equal(h[3].recent_hardware_events, 2);
    assert_int_equal(h[0].recent_hardware_events, 0);
    mw_gpu_node_health node;
    mw_gpu_health_node(f.e, &node);
    assert_int_equal(node.state, MW_HEALTH_UNHEALTHY);
    assert_string_equal(node.reason, "xid_79");
    assert_string_equal(node.gpu, "2");
    assert_int_equal(node.count[MW_HEALTH_HEALTHY], 2);
    assert_int_equal(node.count[MW_HEALTH_UNHEALTHY], 2);

    /* Records appended after the start are not before_start. */
    assert_int_equal(mw_kmsg_drain(&r, 1000, on_rec, &f, why, sizeof(why)), 0);
    char path[4200];
    snprintf(path, sizeof(path), "%s/dev/kmsg", root);
    FILE *fp = fopen(path, "a");
    fputs("4,902,9900000,-;NVRM: Xid (PCI:0000:28:00): 94, pid=7, name=a, Contained ECC error", fp);
    fflush(fp); /* half a record: waits for its newline */
    assert_int_equal(mw_kmsg_drain(&r, 1000, on_rec, &f, why, sizeof(why)), 0);
    fputs(".\n", fp);
    fclose(fp);
    assert_int_equal(mw_kmsg_drain(&r, 1000, on_rec, &f, why, sizeof(why)), 1);
    assert_int_equal(f.before, 17);
    n = mw_gpu_health_events(f.e, ev, 16, &st);
    x = find(ev, n, "0000:28:00", 94);
    assert_int_equal(x->before_start, 0);
    assert_string_equal(x->message, "Contained ECC error.");
    mw_gpu_health_evaluate(f.e, d, 4, 1, 10 * S, 1700000010000, h);
    assert_int_equal(h[1].state, MW_HEALTH_DEGRADED); /* 94: contained, restart the application */
    assert_int_equal(h[1].action, MW_ACTION_RESTART_APPLICATION);
    /* its hold is 1 h */
    mw_gpu_health_evaluate(f.e, d, 4, 1, 9900000 + 3600 * S + 1, 1700000010000, h);
    assert_int_equal(h[1].state, MW_HEALTH_HEALTHY);
    mw_kmsg_close(&r);
    mw_hostfs_close(&host);
    mw_gpu_health_free(f.e);
    free(d);
    tu_cleanup();
}

/* /dev/kmsg's own behaviour: one record per read, EPIPE once when the ring
 * overwrote the next record, then the oldest left, EAGAIN when none. */
static int fake_step;
static ssize_t fake_read(int fd, void *buf, size_t n)
{
    (void)fd;
    static const char *const seq[] = {"6,10,1,-;a\n", "6,11,2,-;b\n", NULL, "6,40,3,-;c\n"};
    int k = fake_step++;
    if (k == 2) {
        errno = EPIPE;
        return -1;
    }
    if (k >= 4) {
        errno = EAGAIN;
        return -1;
    }
    size_t len = strlen(seq[k]);
    assert_true(len <= n);
    memcpy(buf, seq[k], len);
    return (ssize_t)len;
}

static void kmsg_wrap(void **state)
{
    (void)state;
    mw_kmsg_reader r;
    char why[200];
    assert_int_equal(mw_kmsg_open(&r, NULL, "/dev/null", why, sizeof(why)), 0);
    r.read_fn = fake_read;
    fake_step = 0;
    mw_gpu_dev *d = devices(1);
    feed f = {engine(NULL), 0, 0};
    mw_gpu_health_devices(f.e, d, 1);
    assert_int_equal(mw_kmsg_drain(&r, 100, on_rec, &f, why, sizeof(why)), 3);
    assert_int_equal(r.overruns, 1);
    assert_int_equal(r.lost, 28); /* 12 to 39 */
    assert_int_equal(r.caught_up, 1);
    assert_int_equal(f.before, 3);
    mw_kmsg_close(&r);
    assert_int_equal(mw_kmsg_open(&r, NULL, "/nonexistent/kmsg", why, sizeof(why)), -1);
    assert_string_equal(why, "/nonexistent/kmsg: No such file or directory");
    mw_gpu_health_free(f.e);
    free(d);
}

static void catalog(void **state)
{
    (void)state;
    mw_xid_catalog *cat = malloc(sizeof(*cat));
    char err[400];
    assert_int_equal(mw_xid_catalog_load(cat, NULL, err, sizeof(err)), 0);
    assert_string_equal(cat->version, "1");
    assert_string_equal(cat->source,
                        "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html");
    assert_string_equal(cat->retrieved, "2026-12-02");
    assert_int_equal(cat->window_us, 600 * S);
    assert_int_equal(cat->n, 27);
    static const uint32_t app[] = {13, 31, 43, 45};
    for (int i = 0; i < 4; i++) {
        const mw_xid_entry *e = mw_xid_catalog_find(cat, app[i], 0, "");
        assert_int_equal(e->code, app[i]);
        assert_int_equal(e->cls, MW_XID_CLASS_APPLICATION);
        assert_int_equal(e->state, MW_HEALTH_HEALTHY);
    }
    const mw_xid_entry *e = mw_xid_catalog_find(cat, 79, 0, "");
    assert_int_equal(e->state, MW_HEALTH_UNHEALTHY);
    assert_int_equal(e->action, MW_ACTION_REBOOT_NODE);
    assert_ptr_equal(mw_xid_catalog_find(cat, 4242, 0, ""), &cat->def);
    assert_ptr_equal(mw_xid_catalog_find(cat, 1, 1, "Fatal, Link"), &cat->sxid_fatal);
    assert_ptr_equal(mw_xid_catalog_find(cat, 1, 1, "Non-fatal, Link"), &cat->sxid_nonfatal);

    /* An operator's file over it: an entry replaced, one added. */
    const char *over = "window: 5m\n"
                       "xids:\n"
                       "  - {code: 45, class: application, state: degraded, action: reset_gpu}\n"
                       "  - {code: 4242, class: hardware, state: unhealthy, action: reboot_node}\n";
    assert_int_equal(mw_xid_catalog_parse(cat, "ops.yaml", over, strlen(over), err, sizeof(err)),
                     0);
    assert_int_equal(cat->n, 28);
    assert_int_equal(cat->window_us, 300 * S);
    assert_int_equal(mw_xid_catalog_find(cat, 45, 0, "")->state, MW_HEALTH_DEGRADED);
    assert_int_equal(mw_xid_catalog_find(cat, 4242, 0, "")->action, MW_ACTION_REBOOT_NODE);
    assert_int_equal(mw_xid_catalog_find(cat, 79, 0, "")->state, MW_HEALTH_UNHEALTHY);

    struct {
        const char *text, *err;
    } bad[] = {
        {"xids:\n  - {code: 45, state: broken}\n",
         "ops.yaml:2:23: state must be one of healthy, degraded, unhealthy"},
        {"xids:\n  - {state: degraded}\n", "ops.yaml:2:5: an entry needs a code"},
        {"windw: 5m\n",
         "ops.yaml:1:1: unknown key 'windw' (version, source, retrieved, window, thresholds, "
         "default, sxid_fatal, sxid_nonfatal, xids)"},
        {"window: soon\n", "ops.yaml:1:9: window must be a duration (30s, 10m, 24h) or 0"},
        {"xids:\n  - {code: 13, escalate: {count: 1}}\n",
         "ops.yaml:2:34: escalate.count must be 2 or more"},
        {"thresholds: {retired_pages: -1}\n",
         "ops.yaml:1:29: retired_pages must be a number from 0 to 1000000"},
        {"xids: [\n", "ops.yaml:2:1: YAML syntax error: did not find expected node content"},
        {"window: 7m\nbogus: 1\n",
         "ops.yaml:2:1: unknown key 'bogus' (version, source, retrieved, window, thresholds, "
         "default, sxid_fatal, sxid_nonfatal, xids)"},
        {"xids:\n  - {code: 45, state: unknown}\n",
         "ops.yaml:2:23: state unknown is the agent's (no reading), not an event's"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mw_xid_catalog before = *cat;
        assert_int_equal(mw_xid_catalog_parse(cat, "ops.yaml", bad[i].text, strlen(bad[i].text),
                                              err, sizeof(err)),
                         -1);
        assert_string_equal(err, bad[i].err);
        assert_memory_equal(&before, cat, sizeof(before)); /* an error changes nothing */
    }
    assert_int_equal(mw_xid_catalog_load(cat, "/nonexistent.yaml", err, sizeof(err)), -1);
    assert_string_equal(err, "/nonexistent.yaml: No such file or directory");
    free(cat);
}

/* Feed one record line (the kernel's format) to the engine. */
static void line(mw_gpu_health_engine *e, int64_t us, uint64_t seq, const char *fmt, ...)
{
    char msg[300], rec[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    int n =
        snprintf(rec, sizeof(rec), "4,%llu,%lld,-;%s", (unsigned long long)seq, (long long)us, msg);
    mw_kmsg_record r;
    assert_int_equal(mw_kmsg_parse_record(rec, (size_t)n, &r), 0);
    mw_gpu_health_kmsg(e, &r, 0, us, 1700000000000 + us / 1000);
}

/* Application-class XIDs alone never mark a GPU; 20 XID 13 within the
 * window escalate to degraded, 19 do not. */
static void escalation(void **state)
{
    (void)state;
    mw_gpu_dev *d = devices(2);
    mw_gpu_health_engine *e = engine(NULL);
    mw_gpu_health_devices(e, d, 2);
    for (int i = 0; i < 19; i++)
        line(e, 100 * S + i * S, (uint64_t)i, "NVRM: Xid (PCI:0000:18:00): 13, Graphics Exception");
    for (int i = 0; i < 20; i++)
        line(e, 100 * S + i * S, (uint64_t)(100 + i),
             "NVRM: Xid (PCI:0000:28:00): 13, pid=%d, name=a, Graphics Exception", 1000 + i);
    mw_gpu_health h[2];
    mw_gpu_health_evaluate(e, d, 2, 1, 120 * S, 0, h);
    assert_int_equal(h[0].state, MW_HEALTH_HEALTHY);
    assert_int_equal(h[1].state, MW_HEALTH_DEGRADED);
    assert_string_equal(h[1].reason, "xid_13");
    assert_int_equal(h[1].action, MW_ACTION_RESET_GPU);
    /* once the window has passed since the last one, no more */
    mw_gpu_health_evaluate(e, d, 2, 1, 119 * S + 600 * S, 0, h);
    assert_int_equal(h[1].state, MW_HEALTH_HEALTHY);
    mw_gpu_event ev[8];
    mw_gpu_event_stats st;
    assert_int_equal(mw_gpu_health_events(e, ev, 8, &st), 2); /* deduplicated: one per GPU */
    assert_int_equal(ev[0].count, 19);
    assert_int_equal(ev[1].count, 20);
    assert_int_equal(ev[1].pid, 1000); /* the first record's */
    mw_gpu_health_free(e);
    free(d);
}

static void counters(void **state)
{
    (void)state;
    mw_gpu_dev *d = devices(1);
    mw_gpu_health_engine *e = engine(NULL);
    mw_gpu_health_devices(e, d, 1);
    mw_gpu_health h;
#define EVAL(t) mw_gpu_health_evaluate(e, d, 1, 1, (t), 0, &h)
    d->have = MW_GF_BIT(MW_GF_REMAPPED) | MW_GF_BIT(MW_GF_ECC) | MW_GF_BIT(MW_GF_RETIRED) |
              MW_GF_BIT(MW_GF_PCIE_WIDTH) | MW_GF_BIT(MW_GF_PCIE_WIDTH_MAX) |
              MW_GF_BIT(MW_GF_PCIE_REPLAY) | MW_GF_BIT(MW_GF_CLOCK_EVENTS) |
              MW_GF_BIT(MW_GF_ENERGY);
    d->pcie_width = d->pcie_width_max = 16;
    d->energy_mj = 1000;
    EVAL(1 * S);
    assert_int_equal(h.state, MW_HEALTH_HEALTHY);
    assert_string_equal(h.reason, "none");
    d->remapped[2] = 1;
    EVAL(2 * S);
    assert_int_equal(h.state, MW_HEALTH_DEGRADED);
    assert_string_equal(h.reason, "row_remap_pending");
    d->remapped[3] = 1;
    EVAL(3 * S);
    assert_int_equal(h.state, MW_HEALTH_UNHEALTHY);
    assert_string_equal(h.reason, "row_remap_failure");
    assert_int_equal(h.action, MW_ACTION_DRAIN_CONTACT_SUPPORT);
    d->remapped[2] = d->remapped[3] = 0;
    d->ecc_uncorrected = 1;
    EVAL(4 * S);
    assert_string_equal(h.reason, "ecc_uncorrected");
    d->ecc_uncorrected = 0;
    d->retired[0] = 30;
    d->retired[1] = 29;
    EVAL(5 * S);
    assert_int_equal(h.state, MW_HEALTH_HEALTHY); /* 59 < 60 */
    d->retired[1] = 30;
    EVAL(6 * S);
    assert_string_equal(h.reason, "retired_pages");
    d->retired[0] = d->retired[1] = 0;
    d->pcie_width = 8;
    EVAL(7 * S);
    assert_string_equal(h.reason, "pcie_link_degraded");
    d->pcie_width = 16;
    /* replays: 60 a minute is the limit, 61 is over */
    d->pcie_replay = 60;
    EVAL(67 * S);
    assert_int_equal(h.state, MW_HEALTH_HEALTHY);
    d->pcie_replay = 121;
    EVAL(127 * S);
    assert_string_equal(h.reason, "pcie_replay_rate");
    EVAL(187 * S); /* no new replay in the next minute */
    assert_int_equal(h.state, MW_HEALTH_HEALTHY);
    /* thermal slowdown held 60 s */
    d->clock_events = 0x40;
    EVAL(200 * S);
    assert_int_equal(h.state, MW_HEALTH_HEALTHY);
    EVAL(259 * S);
    assert_int_equal(h.state, MW_HEALTH_HEALTHY);
    EVAL(260 * S);
    assert_string_equal(h.reason, "thermal_slowdown");
    d->clock_events = 0x80;
    EVAL(261 * S);
    assert_int_equal(h.state, MW_HEALTH_HEALTHY); /* the brake just started */
    EVAL(321 * S);
    assert_string_equal(h.reason, "power_brake");
    d->clock_events = 0;
    /* an XID 79, then the GPU is lost, then back: the reset ends both */
    line(e, 330 * S, 1, "NVRM: Xid (PCI:0000:18:00): 79, GPU has fallen off the bus.");
    EVAL(331 * S);
    assert_string_equal(h.reason, "xid_79");
    d->lost = 1;
    EVAL(332 * S);
    assert_int_equal(h.state, MW_HEALTH_UNHEALTHY);
    assert_string_equal(h.reason, "gpu_lost");
    assert_int_equal(h.action, MW_ACTION_REBOOT_NODE);
    d->lost = 0;
    EVAL(333 * S);
    assert_int_equal(h.state, MW_HEALTH_HEALTHY);
    /* an XID 48 until the energy counter restarts (a GPU reset) */
    line(e, 340 * S, 2, "NVRM: Xid (PCI:0000:18:00): 48, DBE");
    EVAL(341 * S);
    assert_string_equal(h.reason, "xid_48");
    EVAL(341 * S + 86400 * S);
    assert_string_equal(h.reason, "xid_48"); /* hold 0: no end in time */
    d->energy_mj = 10;
    EVAL(341 * S + 86401 * S);
    assert_int_equal(h.state, MW_HEALTH_HEALTHY);
#undef EVAL
    mw_gpu_health_free(e);
    free(d);
}

/* 672 XID 45 records on 3 nodes of 8 GPUs in 3 h (the report against
 * NVSentinel): 28 per GPU, one every 385 s. No GPU and no node is
 * unhealthy; with the 10-minute window each GPU has 14 events of 2. */
static void storm_xid45(void **state)
{
    (void)state;
    unsigned unhealthy = 0, degraded = 0, records = 0;
    for (int node = 0; node < 3; node++) {
        mw_gpu_dev *d = devices(8);
        for (unsigned i = 0; i < 8; i++)
            snprintf(d[i].pci_bus_id, sizeof(d[i].pci_bus_id), "0000:%02x:00.0", 0x18 + 0x10 * i);
        mw_gpu_health_engine *e = engine(NULL);
        mw_gpu_health_devices(e, d, 8);
        uint64_t seq = 0;
        for (int j = 0; j < 28; j++)
            for (unsigned g = 0; g < 8; g++) {
                line(e, 1000 * S + j * 385 * S + g, seq++,
                     "NVRM: Xid (PCI:0000:%02x:00): 45, pid=%d, name=python, Ch 00000010",
                     0x18 + 0x10 * g, 5000 + j);
                records++;
            }
        mw_gpu_health h[8];
        mw_gpu_health_evaluate(e, d, 8, 1, 1000 * S + 3 * 3600 * S, 0, h);
        for (unsigned g = 0; g < 8; g++) {
            assert_int_equal(h[g].state, MW_HEALTH_HEALTHY);
            assert_string_equal(h[g].reason, "none");
            assert_int_equal(h[g].recent_hardware_events, 0);
            unhealthy += h[g].state == MW_HEALTH_UNHEALTHY;
            degraded += h[g].state == MW_HEALTH_DEGRADED;
        }
        mw_gpu_node_health nh;
        mw_gpu_health_node(e, &nh);
        assert_int_equal(nh.state, MW_HEALTH_HEALTHY);
        assert_int_equal(nh.count[MW_HEALTH_HEALTHY], 8);
        mw_gpu_event ev[200];
        mw_gpu_event_stats st;
        size_t n = mw_gpu_health_events(e, ev, 200, &st);
        assert_int_equal(n, 8 * 14);
        assert_int_equal(st.records, 224);
        for (size_t i = 0; i < n; i++)
            assert_int_equal(ev[i].count, 2);
        mw_gpu_health_free(e);
        free(d);
    }
    assert_int_equal(records, 672);
    assert_int_equal(unhealthy, 0);
    assert_int_equal(degraded, 0);
}

/* 800,000 XID 95 records, 29 distinct (GPU, window): 4 windows of 200,000
 * records 10 minutes apart, the first on 8 GPUs, the others on 7. Memory
 * is the engine's fixed ring; counts are exact. */
static void flood_xid95(void **state)
{
    (void)state;
    mw_gpu_dev *d = devices(8);
    mw_gpu_health_engine *e = engine(NULL);
    mw_gpu_health_devices(e, d, 8);
    for (uint64_t r = 0; r < 800000; r++) {
        uint64_t w = r / 200000, i = r % 200000;
        unsigned g = (unsigned)(w == 0 ? i % 8 : i % 7);
        line(e, (int64_t)(w * 600 + 10) * S + (int64_t)i, r,
             "NVRM: Xid (PCI:0000:%02x:00): 95, pid=%u, name=train, Uncontained ECC error",
             0x18 + 0x10 * g, (unsigned)(i % 50000));
    }
    mw_gpu_event ev[64];
    mw_gpu_event_stats st;
    size_t n = mw_gpu_health_events(e, ev, 64, &st);
    assert_int_equal(n, 29);
    assert_int_equal(st.records, 800000);
    assert_int_equal(st.events, 29);
    assert_int_equal(st.evicted, 0);
    uint64_t sum = 0;
    for (size_t k = 0; k < n; k++) {
        unsigned g = (unsigned)strtoul(ev[k].gpu, NULL, 10);
        int w = (int)((ev[k].first_us / S - 10) / 600);
        uint64_t want = w == 0 ? 25000 : g < 200000 % 7 ? 200000 / 7 + 1 : 200000 / 7;
        assert_int_equal(ev[k].count, want);
        sum += ev[k].count;
    }
    assert_int_equal(sum, 800000);
    mw_gpu_health h[8];
    mw_gpu_health_evaluate(e, d, 8, 1, 2400 * S, 0, h);
    for (int g = 0; g < 8; g++) {
        assert_int_equal(h[g].state, MW_HEALTH_UNHEALTHY);
        assert_string_equal(h[g].reason, "xid_95");
        assert_int_equal(h[g].action, MW_ACTION_RESET_GPU);
    }
    mw_gpu_health_free(e);
    free(d);
}

/* More distinct events than the history holds: the oldest go, counted;
 * memory stays the ring's. */
static void history_bound(void **state)
{
    (void)state;
    mw_gpu_dev *d = devices(1);
    mw_gpu_health_engine *e = engine(NULL);
    mw_gpu_health_devices(e, d, 1);
    for (int w = 0; w < MW_GPU_EVENTS_MAX + 76; w++)
        line(e, (int64_t)w * 601 * S, (uint64_t)w, "NVRM: Xid (PCI:0000:18:00): 94, Contained");
    mw_gpu_event *ev = calloc(MW_GPU_EVENTS_MAX + 100, sizeof(*ev));
    mw_gpu_event_stats st;
    assert_int_equal(mw_gpu_health_events(e, ev, MW_GPU_EVENTS_MAX + 100, &st), MW_GPU_EVENTS_MAX);
    assert_int_equal(st.events, MW_GPU_EVENTS_MAX + 76);
    assert_int_equal(st.evicted, 76);
    assert_int_equal(ev[0].id, 77);
    assert_int_equal(ev[0].first_us, 76 * 601 * S);
    assert_int_equal(ev[MW_GPU_EVENTS_MAX - 1].id, MW_GPU_EVENTS_MAX + 76);
    free(ev);
    mw_gpu_health_free(e);
    free(d);
}

/* The node's summary as the GPUHealthy condition says it. */
static void node_verdict(void **state)
{
    (void)state;
    mw_node_gpu_state s;
    char reason[64], msg[512];
    mw_gpu_node_health h = {.state = MW_HEALTH_HEALTHY, .ngpus = 8, .count = {8, 0, 0, 0}};
    strcpy(h.reason, "none");
    mw_gpu_node_verdict(&h, &s, reason, sizeof(reason), msg, sizeof(msg));
    assert_int_equal(s, MW_NODE_GPU_HEALTHY);
    assert_string_equal(reason, "GPUsHealthy");
    assert_string_equal(msg, "8 GPUs: 8 healthy, 0 degraded, 0 unhealthy, 0 unknown");
    h = (mw_gpu_node_health){.state = MW_HEALTH_UNHEALTHY,
                             .action = MW_ACTION_REBOOT_NODE,
                             .ngpus = 2,
                             .count = {1, 0, 0, 1}};
    strcpy(h.reason, "gpu_lost");
    strcpy(h.gpu, "1");
    mw_gpu_node_verdict(&h, &s, reason, sizeof(reason), msg, sizeof(msg));
    assert_int_equal(s, MW_NODE_GPU_UNHEALTHY);
    assert_string_equal(reason, "GPULost");
    assert_string_equal(msg, "GPU 1: gpu_lost, recommended action: reboot_node (2 GPUs: 1 "
                             "healthy, 0 degraded, 1 unhealthy, 0 unknown)");
    h.state = MW_HEALTH_DEGRADED;
    h.action = MW_ACTION_RESET_GPU;
    strcpy(h.reason, "nvlink_error_rate");
    h.gpu[0] = '\0';
    mw_gpu_node_verdict(&h, &s, reason, sizeof(reason), msg, sizeof(msg));
    assert_int_equal(s, MW_NODE_GPU_DEGRADED);
    assert_string_equal(reason, "NVLinkErrorRate");
    assert_string_equal(msg, "the node: nvlink_error_rate, recommended action: reset_gpu (2 "
                             "GPUs: 1 healthy, 0 degraded, 1 unhealthy, 0 unknown)");
    strcpy(h.reason, "sxid_12028");
    mw_gpu_node_verdict(&h, &s, reason, sizeof(reason), msg, sizeof(msg));
    assert_string_equal(reason, "SXID12028");
    h.state = MW_HEALTH_UNKNOWN;
    strcpy(h.reason, "no_reading");
    mw_gpu_node_verdict(&h, &s, reason, sizeof(reason), msg, sizeof(msg));
    assert_int_equal(s, MW_NODE_GPU_UNKNOWN);
    assert_string_equal(reason, "NoReading");
    assert_string_equal(msg, "no GPU poll has completed recently (a driver call hangs?)");
    /* A reason longer than the field is cut, still terminated. */
    char small[6];
    strcpy(h.reason, "row_remap_failed");
    mw_gpu_node_verdict(&h, &s, small, sizeof(small), msg, sizeof(msg));
    assert_string_equal(small, "RowRe");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kmsg_records),
        cmocka_unit_test(xid_lines),
        cmocka_unit_test(kernel_log_fixture),
        cmocka_unit_test(kmsg_wrap),
        cmocka_unit_test(catalog),
        cmocka_unit_test(escalation),
        cmocka_unit_test(counters),
        cmocka_unit_test(storm_xid45),
        cmocka_unit_test(flood_xid95),
        cmocka_unit_test(history_bound),
        cmocka_unit_test(node_verdict),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
