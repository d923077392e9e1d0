/* sockstat.c - socket counts and socket buffer memory from /proc/net/sockstat
 * and /proc/net/sockstat6: TCP orphans and TIME-WAIT build-up, and TCP/UDP
 * buffer memory nearing net.ipv4.tcp_mem.
 *
 * IPv6 counts get their own names (mlwatch_sockstat_tcp6_inuse, ...) rather
 * than a family label, so that every family keeps one label set and the IPv4
 * names do not change when sockstat6 is missing. TCP and UDP "mem" are in
 * pages (converted to bytes with the agent's page size, the same as the
 * kernel's); FRAG "memory" is already in bytes. */
#include "collector.h"
#include "sockstat.h"
#include "../core/log.h"
#include "../core/parse.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define SOCKSTAT_MAX_PAIRS 32
#define SOCKSTAT_NAME_MAX 32

typedef struct sockstat_value {
    const char *proto, *key;
    int pages; /* value in pages: scale to bytes */
    mw_metric_desc desc;
} sockstat_value;

#define G(proto, key, name, help)                                                                  \
    {                                                                                              \
        proto, key, 0,                                                                             \
        {                                                                                          \
            "mlwatch_sockstat_" name, help, "", MW_GAUGE                                           \
        }                                                                                          \
    }
#define M(proto, key, pages, name, help)                                                           \
    {                                                                                              \
        proto, key, pages,                                                                         \
        {                                                                                          \
            "mlwatch_sockstat_" name, help, "bytes", MW_GAUGE                                      \
        }                                                                                          \
    }

static const sockstat_value VALUES[] = {
    G("sockets", "used", "sockets_used", "Sockets of all families in use."),
    G("TCP", "inuse", "tcp_inuse", "IPv4 TCP sockets in use (listening and connected)."),
    G("TCP", "orphan", "tcp_orphan", "TCP sockets no longer attached to a process."),
    G("TCP", "tw", "tcp_timewait", "TCP sockets in TIME-WAIT."),
    G("TCP", "alloc", "tcp_alloc", "TCP sockets allocated (all states, IPv4 and IPv6)."),
    M("TCP", "mem", 1, "tcp_memory_bytes", "Memory used by TCP socket buffers."),
    G("UDP", "inuse", "udp_inuse", "IPv4 UDP sockets in use."),
    M("UDP", "mem", 1, "udp_memory_bytes", "Memory used by UDP socket buffers."),
    G("UDPLITE", "inuse", "udplite_inuse", "IPv4 UDP-Lite sockets in use."),
    G("RAW", "inuse", "raw_inuse", "IPv4 raw sockets in use."),
    G("FRAG", "inuse", "frag_inuse", "IPv4 fragment reassembly queues in use."),
    M("FRAG", "memory", 0, "frag_memory_bytes", "Memory used by IPv4 fragment reassembly."),
    G("TCP6", "inuse", "tcp6_inuse", "IPv6 TCP sockets in use."),
    G("UDP6", "inuse", "udp6_inuse", "IPv6 UDP sockets in use."),
    G("UDPLITE6", "inuse", "udplite6_inuse", "IPv6 UDP-Lite sockets in use."),
    G("RAW6", "inuse", "raw6_inuse", "IPv6 raw sockets in use."),
    G("FRAG6", "inuse", "frag6_inuse", "IPv6 fragment reassembly queues in use."),
    M("FRAG6", "memory", 0, "frag6_memory_bytes", "Memory used by IPv6 fragment reassembly."),
};
#define NVALUES (sizeof(VALUES) / sizeof(VALUES[0]))

/* --- parser ---------------------------------------------------------- */

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Check ([s, e) after the prefix) and, with cb, report one line. */
static int line_pairs(const char *proto, const char *s, const char *e, mw_sockstat_cb cb, void *arg)
{
    int n = 0;
    for (;;) {
        const char *k, *v;
        size_t kl = mw_next_token(&s, e, &k);
        if (kl == 0) return n > 0 ? 0 : -1;
        size_t vl = mw_next_token(&s, e, &v);
        if (vl == 0 || kl >= SOCKSTAT_NAME_MAX || ++n > SOCKSTAT_MAX_PAIRS) return -1;
        const char *p = v;
        uint64_t x;
        if (mw_parse_u64(&p, &x) < 0 || p != v + vl) return -1;
        if (cb) {
            char key[SOCKSTAT_NAME_MAX];
            memcpy(key, k, kl);
            key[kl] = '\0';
            cb(arg, proto, key, x);
        }
    }
}

int mw_parse_sockstat(const char *text, mw_sockstat_cb cb, void *arg)
{
    int bad = 0;
    const char *p = text, *s, *e;
    while (mw_next_line(&p, &s, &e)) {
        if (s == e) continue;
        const char *c = memchr(s, ':', (size_t)(e - s));
        size_t plen = c ? (size_t)(c - s) : 0;
        int ok = plen > 0 && plen < SOCKSTAT_NAME_MAX;
        for (const char *q = s; ok && q < c; q++)
            if (is_blank(*q)) ok = 0;
        char proto[SOCKSTAT_NAME_MAX];
        if (ok) {
            memcpy(proto, s, plen);
            proto[plen] = '\0';
            ok = line_pairs(proto, c + 1, e, NULL, NULL) == 0;
        }
        if (!ok) {
            bad++;
            continue;
        }
        if (cb) line_pairs(proto, c + 1, e, cb, arg);
    }
    return bad;
}

/* --- collection ----------------------------------------------------- */

static void emit_value(void *arg, const char *proto, const char *key, uint64_t value)
{
    mw_collect_ctx *ctx = arg;
    for (size_t i = 0; i < NVALUES; i++) {
        if (strcmp(VALUES[i].proto, proto) != 0 || strcmp(VALUES[i].key, key) != 0) continue;
        double v = (double)value;
        if (VALUES[i].pages) v *= (double)sysconf(_SC_PAGESIZE);
        mw_emit(ctx->snap, &VALUES[i].desc, v, MW_END);
        return;
    }
}

static void read_one(mw_collect_ctx *ctx, const char *path)
{
    const char *text = mw_collect_read(ctx, path, 0);
    if (!text) return;
    int bad = mw_parse_sockstat(text, emit_value, ctx);
    for (int i = 0; i < bad; i++)
        mw_collect_error(ctx, path, 0, "malformed line");
}

typedef struct sockstat_state {
    int v6; /* sockstat6 exists (IPv6 compiled in and not disabled at boot) */
} sockstat_state;

static sockstat_state STATE_V4 = {0}, STATE_V6 = {1};

static int sockstat_init(const mw_env *env, void **state)
{
    if (faccessat(env->host->rootfd, "proc/net/sockstat", R_OK, 0) < 0) {
        mw_log(MW_LOG_INFO, "sockstat", "no proc/net/sockstat (%s)", strerror(errno));
        return MW_COLLECTOR_ABSENT;
    }
    *state =
        faccessat(env->host->rootfd, "proc/net/sockstat6", R_OK, 0) == 0 ? &STATE_V6 : &STATE_V4;
    return 0;
}

static void sockstat_collect(void *state, mw_collect_ctx *ctx)
{
    const sockstat_state *st = state;
    read_one(ctx, "proc/net/sockstat");
    if (st->v6) read_one(ctx, "proc/net/sockstat6");
}

const mw_collector mw_collector_sockstat = {
    .name = "sockstat",
    .help = "Sockets in use and socket buffer memory from /proc/net/sockstat{,6}",
    .init = sockstat_init,
    .collect = sockstat_collect,
};
