/* infiniband.c - InfiniBand and RoCE port state, rate and counters from
 * sys/class/infiniband/<device>/ports/<port>/.
 *
 * Ports are discovered once in init (their directories opened and kept,
 * with which counter files exist) and again only after a port's files
 * vanished (a device reset or driver reload). */
#include "collector.h"
#include "infiniband.h"
#include "../core/log.h"
#include "../core/parse.h"
#include "../core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IB_CLASS "sys/class/infiniband"
#define IB_MAX_PORTS 256

/* clang-format off */
MW_METRIC(RX_BYTES, MW_COUNTER, "mlwatch_infiniband_receive_bytes_total", "bytes", "Data octets received on the port (port_rcv_data x 4).");
MW_METRIC(TX_BYTES, MW_COUNTER, "mlwatch_infiniband_transmit_bytes_total", "bytes", "Data octets transmitted on the port (port_xmit_data x 4).");
MW_METRIC(RX_PACKETS, MW_COUNTER, "mlwatch_infiniband_receive_packets_total", "", "Packets received on the port.");
MW_METRIC(TX_PACKETS, MW_COUNTER, "mlwatch_infiniband_transmit_packets_total", "", "Packets transmitted on the port.");
MW_METRIC(ERRORS, MW_COUNTER, "mlwatch_infiniband_errors_total", "", "Port error counters by type (the name of the counter file in ports/N/counters).");
MW_METRIC(PORT_UP, MW_GAUGE, "mlwatch_infiniband_port_up", "", "1 when the port state is ACTIVE, else 0.");
MW_METRIC(RATE, MW_GAUGE, "mlwatch_infiniband_link_rate_bytes_per_second", "bytes_per_second", "Signalling rate of the link (ports/N/rate).");
MW_METRIC(INFO, MW_INFO, "mlwatch_infiniband_port_info", "", "Link layer (InfiniBand, or Ethernet for RoCE) and state of the port; the value is 1.");
/* clang-format on */

/* Counter files; the first four are traffic, the rest error types. */
enum { C_RX_DATA, C_TX_DATA, C_RX_PKTS, C_TX_PKTS, C_FIRST_ERROR };
static const char *const COUNTERS[] = {
    "port_rcv_data",
    "port_xmit_data",
    "port_rcv_packets",
    "port_xmit_packets",
    "symbol_error",
    "port_rcv_errors",
    "link_downed",
    "port_xmit_discards",
    "link_error_recovery",
    "port_rcv_remote_physical_errors",
    "excessive_buffer_overrun_errors",
    "local_link_integrity_errors",
    "port_xmit_constraint_errors",
    "port_rcv_constraint_errors",
    "VL15_dropped",
};
#define NCOUNTERS (sizeof(COUNTERS) / sizeof(COUNTERS[0]))

typedef struct ib_port {
    char device[64];
    char port[16];
    char link_layer[32];
    int fd;            /* ports/<port> */
    int cfd;           /* ports/<port>/counters, or -1 */
    uint32_t counters; /* bit i: COUNTERS[i] exists */
} ib_port;

typedef struct ib_state {
    ib_port *ports;
    size_t n;
    int rescan; /* a port vanished: discover again next cycle */
} ib_state;

/* --- parsers -------------------------------------------------------- */

int mw_ib_parse_state(const char *s, unsigned *code, char *name, size_t size)
{
    const char *p = s;
    uint64_t v;
    if (mw_parse_u64(&p, &v) < 0 || v > 0xffff || *p++ != ':') return -1;
    mw_skip_blanks(&p);
    const char *start = p;
    while ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
           *p == '_')
        p++;
    size_t len = (size_t)(p - start);
    if (len == 0) return -1;
    while (*p == ' ' || *p == '\t' || *p == '\n')
        p++;
    if (*p) return -1;
    *code = (unsigned)v;
    if (size) {
        if (len >= size) len = size - 1;
        memcpy(name, start, len);
        name[len] = '\0';
    }
    return 0;
}

int mw_ib_parse_rate(const char *s, double *bytes_per_second)
{
    const char *p = s;
    uint64_t whole, frac = 0, scale = 1;
    if (mw_parse_u64(&p, &whole) < 0 || whole > 1000000000) return -1;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9') return -1;
        for (; *p >= '0' && *p <= '9'; p++)
            if (scale < 1000000000) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                scale *= 10;
            }
    }
    mw_skip_blanks(&p);
    if (strncmp(p, "Gb/sec", 6) != 0) return -1;
    p += 6;
    /* The width and speed "(4X HDR)" follow; they are not needed. */
    if (*p && *p != ' ' && *p != '\n') return -1;
    double gbps = (double)whole + (double)frac / (double)scale;
    *bytes_per_second = gbps * 1e9 / 8.0;
    return 0;
}

/* --- discovery ------------------------------------------------------ */

static void close_ports(ib_state *st)
{
    for (size_t i = 0; i < st->n; i++) {
        if (st->ports[i].fd >= 0) close(st->ports[i].fd);
        if (st->ports[i].cfd >= 0) close(st->ports[i].cfd);
    }
    free(st->ports);
    st->ports = NULL;
    st->n = 0;
}

static int cmp_port(const void *a, const void *b)
{
    const ib_port *x = a, *y = b;
    int c = strcmp(x->device, y->device);
    if (c) return c;
    size_t lx = strlen(x->port), ly = strlen(y->port);
    return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x->port, y->port);
}

static void add_port(ib_state *st, size_t *cap, int portsfd, const char *dev, const char *port)
{
    int fd = openat(portsfd, port, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    if (st->n == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        st->ports = mw_xrealloc(st->ports, *cap * sizeof(ib_port));
    }
    ib_port *p = &st->ports[st->n++];
    memset(p, 0, sizeof(*p));
    mw_strlcpy(p->device, dev, sizeof(p->device));
    mw_strlcpy(p->port, port, sizeof(p->port));
    p->fd = fd;
    if (mw_read_lineat(fd, "link_layer", p->link_layer, sizeof(p->link_layer)) < 0)
        p->link_layer[0] = '\0';
    p->cfd = openat(fd, "counters", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (p->cfd >= 0) {
        struct stat sb;
        for (size_t i = 0; i < NCOUNTERS; i++)
            if (fstatat(p->cfd, COUNTERS[i], &sb, 0) == 0) p->counters |= 1u << i;
    }
}

static int all_digits(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

/* Find every port; returns 0 or -errno when the class folder cannot be
 * opened. */
static int discover(ib_state *st, const mw_hostfs *host)
{
    close_ports(st);
    st->rescan = 0;
    DIR *d = mw_hostfs_opendir(host, IB_CLASS);
    if (!d) return -errno;
    int classfd = dirfd(d);
    size_t cap = 0;
    const struct dirent *de;
    while ((de = readdir(d)) && st->n < IB_MAX_PORTS) {
        if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof(st->ports[0].device)) continue;
        char rel[300];
        snprintf(rel, sizeof(rel), "%s/ports", de->d_name);
        DIR *pd = mw_fdopendir(openat(classfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!pd) continue;
        int portsfd = dirfd(pd);
        const struct dirent *pe;
        while ((pe = readdir(pd)) && st->n < IB_MAX_PORTS)
            if (all_digits(pe->d_name) && strlen(pe->d_name) < sizeof(st->ports[0].port))
                add_port(st, &cap, portsfd, de->d_name, pe->d_name);
        closedir(pd);
    }
    closedir(d);
    if (st->n > 1) qsort(st->ports, st->n, sizeof(ib_port), cmp_port);
    return 0;
}

static int ib_init(const mw_env *env, void **state)
{
    ib_state *st = mw_xcalloc(1, sizeof(*st));
    int rc = discover(st, env->host);
    if (rc < 0 || st->n == 0) {
        mw_log(MW_LOG_INFO, "infiniband", "no InfiniBand/RoCE ports under %s (%s)", IB_CLASS,
               rc < 0 ? strerror(-rc) : "no devices");
        close_ports(st);
        free(st);
        return MW_COLLECTOR_ABSENT;
    }
    *state = st;
    return 0;
}

static void ib_destroy(void *state)
{
    ib_state *st = state;
    if (!st) return;
    close_ports(st);
    free(st);
}

/* --- collection ----------------------------------------------------- */

static void port_error(mw_collect_ctx *ctx, ib_state *st, const ib_port *p, const char *file,
                       int err)
{
    char path[256];
    snprintf(path, sizeof(path), IB_CLASS "/%s/ports/%s/%s", p->device, p->port, file);
    mw_collect_error(ctx, path, err, err ? NULL : "malformed content");
    if (err == -ENOENT || err == -ENODEV) st->rescan = 1;
}

static void collect_port(mw_collect_ctx *ctx, ib_state *st, const ib_port *p)
{
    const char *dev = p->device, *port = p->port;
    char line[128];
    int rc = mw_read_lineat(p->fd, "state", line, sizeof(line));
    unsigned code;
    char state[32];
    if (rc < 0) {
        port_error(ctx, st, p, "state", rc);
        if (rc == -ENOENT) return; /* the port is gone */
    } else if (mw_ib_parse_state(line, &code, state, sizeof(state)) < 0) {
        port_error(ctx, st, p, "state", 0);
    } else {
        mw_emit(ctx->snap, &PORT_UP, code == 4 ? 1.0 : 0.0, "device", dev, "port", port, MW_END);
        mw_emit(ctx->snap, &INFO, 1, "device", dev, "port", port, "link_layer", p->link_layer,
                "state", state, MW_END);
    }
    double rate;
    rc = mw_read_lineat(p->fd, "rate", line, sizeof(line));
    if (rc < 0)
        port_error(ctx, st, p, "rate", rc);
    else if (mw_ib_parse_rate(line, &rate) < 0)
        port_error(ctx, st, p, "rate", 0);
    else
        mw_emit(ctx->snap, &RATE, rate, "device", dev, "port", port, MW_END);

    for (size_t i = 0; i < NCOUNTERS; i++) {
        if (!(p->counters & (1u << i))) continue;
        uint64_t v;
        rc = mw_read_u64at(p->cfd, COUNTERS[i], &v);
        if (rc < 0) {
            char file[64];
            snprintf(file, sizeof(file), "counters/%s", COUNTERS[i]);
            port_error(ctx, st, p, file, rc == -EINVAL ? 0 : rc);
            continue;
        }
        switch (i) {
        case C_RX_DATA:
            mw_emit(ctx->snap, &RX_BYTES, (double)v * 4.0, "device", dev, "port", port, MW_END);
            break;
        case C_TX_DATA:
            mw_emit(ctx->snap, &TX_BYTES, (double)v * 4.0, "device", dev, "port", port, MW_END);
            break;
        case C_RX_PKTS:
            mw_emit(ctx->snap, &RX_PACKETS, (double)v, "device", dev, "port", port, MW_END);
            break;
        case C_TX_PKTS:
            mw_emit(ctx->snap, &TX_PACKETS, (double)v, "device", dev, "port", port, MW_END);
            break;
        default:
            mw_emit(ctx->snap, &ERRORS, (double)v, "device", dev, "port", port, "type", COUNTERS[i],
                    MW_END);
        }
    }
}

static void ib_collect(void *state, mw_collect_ctx *ctx)
{
    ib_state *st = state;
    if (st->rescan) {
        int rc = discover(st, ctx->env->host);
        if (rc < 0) {
            mw_collect_error(ctx, IB_CLASS, rc, NULL);
            st->rescan = 1;
            return;
        }
    }
    for (size_t i = 0; i < st->n; i++)
        collect_port(ctx, st, &st->ports[i]);
}

const mw_collector mw_collector_infiniband = {
    .name = "infiniband",
    .help = "InfiniBand/RoCE port state, link rate, traffic and error counters",
    .init = ib_init,
    .collect = ib_collect,
    .destroy = ib_destroy,
};
