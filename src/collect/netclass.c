/* netclass.c - link state, speed, MTU and carrier flaps of network
 * interfaces from /sys/class/net/<iface>/: a NIC that negotiated 10G
 * instead of 100G, or whose carrier keeps dropping, explains slow
 * distributed training better than any byte counter.
 *
 * Interfaces come and go (one veth per pod on Kubernetes nodes), so the
 * folder is listed each cycle; each interface's directory is opened once
 * (the entries are relative symlinks into ../../devices/..., followed by
 * openat) and kept while the interface exists. speed, duplex and carrier
 * fail with EINVAL while an interface is down and do not exist for some
 * virtual devices: those are omitted, not errors. */
#include "collector.h"
#include "netclass.h"
#include "../core/log.h"
#include "../core/parse.h"
#include "../core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NETCLASS_DIR "sys/class/net"
#define NETCLASS_MAX 4096
#define NETCLASS_NAME_MAX 32

/* clang-format off */
MW_METRIC(INFO, MW_INFO, "mlwatch_network_info", "", "Interface state, duplex and MAC address from /sys/class/net; the value is 1.");
MW_METRIC(MTU, MW_GAUGE, "mlwatch_network_mtu_bytes", "bytes", "MTU of the interface.");
MW_METRIC(SPEED, MW_GAUGE, "mlwatch_network_speed_bytes", "bytes", "Negotiated link speed in bytes per second (absent while down or unknown).");
MW_METRIC(UP, MW_GAUGE, "mlwatch_network_up", "", "1 when the operstate is up, else 0.");
MW_METRIC(CARRIER, MW_GAUGE, "mlwatch_network_carrier", "", "1 when the interface has a carrier (link), else 0.");
MW_METRIC(CARRIER_CHANGES, MW_COUNTER, "mlwatch_network_carrier_changes_total", "", "Times the carrier went up or down.");
MW_METRIC(TXQLEN, MW_GAUGE, "mlwatch_network_transmit_queue_length", "", "Length of the transmit queue (tx_queue_len).");
MW_METRIC(FLAGS, MW_GAUGE, "mlwatch_network_flags", "", "Interface flags (IFF_UP, IFF_BROADCAST, ... as a number).");
/* clang-format on */

/* --- parsers -------------------------------------------------------- */

static int trailing_ok(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n')
        p++;
    return *p == '\0';
}

int mw_netclass_parse_speed(const char *s, double *bytes)
{
    const char *p = s;
    int64_t v;
    if (mw_parse_i64(&p, &v) < 0 || !trailing_ok(p)) return -1;
    if (v <= 0) return v == -1 || v == 0 ? 1 : -1;
    if (v > 100000000) return -1; /* 100 Pb/s */
    *bytes = (double)v * 125000.0;
    return 0;
}

int mw_netclass_parse_hex(const char *s, uint64_t *out)
{
    if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return -1;
    const char *p = s + 2;
    uint64_t v = 0;
    int digits = 0;
    for (;; p++) {
        int h;
        if (*p >= '0' && *p <= '9')
            h = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            h = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            h = *p - 'A' + 10;
        else
            break;
        if (++digits > 16) return -1;
        v = v << 4 | (uint64_t)h;
    }
    if (!digits || !trailing_ok(p)) return -1;
    *out = v;
    return 0;
}

/* --- interface set --------------------------------------------------- */

typedef struct nc_iface {
    char name[NETCLASS_NAME_MAX];
    int fd;
} nc_iface;

typedef struct nc_state {
    int classfd;
    nc_iface *cur, *next; /* sorted by name; swapped each cycle */
    size_t n, cap;
} nc_state;

static int cmp_iface(const void *a, const void *b)
{
    return strcmp(((const nc_iface *)a)->name, ((const nc_iface *)b)->name);
}

static void close_all(nc_iface *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].fd >= 0) close(v[i].fd);
}

/* List the folder; keep the fds of known interfaces, open new ones, close
 * those that are gone. */
static void refresh(nc_state *st, mw_collect_ctx *ctx)
{
    DIR *d = mw_fdopendir_dup(st->classfd);
    if (!d) {
        mw_collect_error(ctx, NETCLASS_DIR, -errno, NULL);
        return;
    }
    size_t m = 0;
    int capped = 0;
    const struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (strlen(de->d_name) >= NETCLASS_NAME_MAX) {
            mw_collect_error(ctx, NETCLASS_DIR, 0, "interface name too long");
            continue;
        }
        if (m == NETCLASS_MAX) {
            capped = 1;
            break;
        }
        if (m == st->cap) {
            st->cap = st->cap ? st->cap * 2 : 16;
            st->cur = mw_xrealloc(st->cur, st->cap * sizeof(nc_iface));
            st->next = mw_xrealloc(st->next, st->cap * sizeof(nc_iface));
        }
        mw_strlcpy(st->next[m].name, de->d_name, NETCLASS_NAME_MAX);
        st->next[m].fd = -1;
        m++;
    }
    closedir(d);
    if (capped)
        mw_collect_error(ctx, NETCLASS_DIR, 0,
                         "more than 4096 interfaces; the rest are not reported");
    qsort(st->next, m, sizeof(nc_iface), cmp_iface);
    /* Merge the two sorted lists. */
    size_t i = 0;
    for (size_t j = 0; j < m; j++) {
        while (i < st->n && strcmp(st->cur[i].name, st->next[j].name) < 0) {
            if (st->cur[i].fd >= 0) close(st->cur[i].fd);
            st->cur[i++].fd = -1;
        }
        if (i < st->n && strcmp(st->cur[i].name, st->next[j].name) == 0) {
            st->next[j].fd = st->cur[i].fd;
            st->cur[i++].fd = -1;
            continue;
        }
        int fd = openat(st->classfd, st->next[j].name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        /* bonding_masters is a file in the same folder: not an interface. */
        if (fd < 0 && errno != ENOTDIR) {
            char path[96];
            snprintf(path, sizeof(path), NETCLASS_DIR "/%s", st->next[j].name);
            mw_collect_error(ctx, path, -errno, NULL);
        }
        st->next[j].fd = fd;
    }
    close_all(st->cur + i, st->n - i);
    nc_iface *t = st->cur;
    st->cur = st->next;
    st->next = t;
    st->n = m;
}

/* --- collection ----------------------------------------------------- */

static void attr_error(mw_collect_ctx *ctx, const char *iface, const char *file, int err)
{
    char path[128];
    snprintf(path, sizeof(path), NETCLASS_DIR "/%s/%s", iface, file);
    mw_collect_error(ctx, path, err, err ? NULL : "malformed content");
}

/* Unavailable rather than wrong: down (EINVAL), or not implemented by the
 * driver or the kernel. */
static int unavailable(int rc)
{
    return rc == -EINVAL || rc == -ENOENT || rc == -EOPNOTSUPP || rc == -524 /* ENOTSUPP */;
}

static void collect_iface(mw_collect_ctx *ctx, const nc_iface *f)
{
    const char *dev = f->name;
    char oper[32], duplex[32] = "", addr[64], line[64];
    int rc = mw_read_lineat(f->fd, "operstate", oper, sizeof(oper));
    if (rc < 0) {
        attr_error(ctx, dev, "operstate", rc);
        return; /* vanished or not an interface: nothing else will read */
    }
    rc = mw_read_lineat(f->fd, "duplex", duplex, sizeof(duplex));
    if (rc < 0) {
        duplex[0] = '\0';
        if (!unavailable(rc)) attr_error(ctx, dev, "duplex", rc);
    }
    rc = mw_read_lineat(f->fd, "address", addr, sizeof(addr));
    if (rc < 0) {
        addr[0] = '\0';
        attr_error(ctx, dev, "address", rc);
    }
    mw_emit(ctx->snap, &INFO, 1, "device", dev, "operstate", oper, "duplex", duplex, "address",
            addr, MW_END);
    mw_emit(ctx->snap, &UP, strcmp(oper, "up") == 0 ? 1.0 : 0.0, "device", dev, MW_END);

    uint64_t v;
    rc = mw_read_u64at(f->fd, "mtu", &v);
    if (rc < 0)
        attr_error(ctx, dev, "mtu", rc == -EINVAL ? 0 : rc);
    else
        mw_emit(ctx->snap, &MTU, (double)v, "device", dev, MW_END);
    rc = mw_read_lineat(f->fd, "speed", line, sizeof(line));
    double speed;
    if (rc < 0) {
        if (!unavailable(rc)) attr_error(ctx, dev, "speed", rc);
    } else if ((rc = mw_netclass_parse_speed(line, &speed)) < 0) {
        attr_error(ctx, dev, "speed", 0);
    } else if (rc == 0) {
        mw_emit(ctx->snap, &SPEED, speed, "device", dev, MW_END);
    }
    rc = mw_read_u64at(f->fd, "carrier", &v);
    if (rc == 0)
        mw_emit(ctx->snap, &CARRIER, v ? 1.0 : 0.0, "device", dev, MW_END);
    else if (!unavailable(rc))
        attr_error(ctx, dev, "carrier", rc);
    rc = mw_read_u64at(f->fd, "carrier_changes", &v);
    if (rc == 0)
        mw_emit(ctx->snap, &CARRIER_CHANGES, (double)v, "device", dev, MW_END);
    else if (rc != -ENOENT) /* before Linux 3.15 */
        attr_error(ctx, dev, "carrier_changes", rc == -EINVAL ? 0 : rc);
    rc = mw_read_u64at(f->fd, "tx_queue_len", &v);
    if (rc < 0)
        attr_error(ctx, dev, "tx_queue_len", rc == -EINVAL ? 0 : rc);
    else
        mw_emit(ctx->snap, &TXQLEN, (double)v, "device", dev, MW_END);
    rc = mw_read_lineat(f->fd, "flags", line, sizeof(line));
    if (rc < 0)
        attr_error(ctx, dev, "flags", rc);
    else if (mw_netclass_parse_hex(line, &v) < 0)
        attr_error(ctx, dev, "flags", 0);
    else
        mw_emit(ctx->snap, &FLAGS, (double)v, "device", dev, MW_END);
}

static int netclass_init(const mw_env *env, void **state)
{
    int fd = mw_hostfs_opendirfd(env->host, NETCLASS_DIR);
    if (fd < 0) {
        mw_log(MW_LOG_INFO, "netclass", "no %s (%s)", NETCLASS_DIR, strerror(-fd));
        return MW_COLLECTOR_ABSENT;
    }
    nc_state *st = mw_xcalloc(1, sizeof(*st));
    st->classfd = fd;
    *state = st;
    return 0;
}

static void netclass_collect(void *state, mw_collect_ctx *ctx)
{
    nc_state *st = state;
    refresh(st, ctx);
    for (size_t i = 0; i < st->n; i++)
        if (st->cur[i].fd >= 0) collect_iface(ctx, &st->cur[i]);
}

static void netclass_destroy(void *state)
{
    nc_state *st = state;
    if (!st) return;
    close_all(st->cur, st->n);
    free(st->cur);
    free(st->next);
    close(st->classfd);
    free(st);
}

const mw_collector mw_collector_netclass = {
    .name = "netclass",
    .help = "Interface link state, speed, MTU and carrier from /sys/class/net",
    .init = netclass_init,
    .collect = netclass_collect,
    .destroy = netclass_destroy,
};
