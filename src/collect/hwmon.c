/* hwmon.c - temperatures, power, energy and voltages from
 * sys/class/hwmon/hwmonN/.
 *
 * Chips and their sensors are discovered once in init: the chip directories
 * stay open, and the static parts (chip name, sensor labels, temperature
 * limits) are read then, so a cycle reads one file per sensor. Old drivers
 * keep their files in hwmonN/device/ instead of hwmonN/; that folder is used
 * when hwmonN/ itself has no sensor files. Discovery runs again only after a
 * chip's files vanished (a GPU or NVMe drive removed, a driver reloaded).
 *
 * A sensor that answers ENODATA has no reading at the moment (the hwmon ABI's
 * "value not available", e.g. a fan controller channel without a fan); it is
 * left out of the cycle without counting an error. */
#include "collector.h"
#include "hwmon.h"
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

#define HWMON_CLASS "sys/class/hwmon"
#define HWMON_MAX_CHIPS 256
#define HWMON_MAX_SENSORS 128

/* clang-format off */
MW_METRIC(TEMP, MW_GAUGE, "mlwatch_hwmon_temperature_celsius", "celsius", "Temperature reported by a hardware monitoring sensor.");
MW_METRIC(TEMP_MAX, MW_GAUGE, "mlwatch_hwmon_temperature_max_celsius", "celsius", "High limit of the temperature sensor (tempN_max).");
MW_METRIC(TEMP_CRIT, MW_GAUGE, "mlwatch_hwmon_temperature_critical_celsius", "celsius", "Critical limit of the temperature sensor (tempN_crit).");
MW_METRIC(POWER, MW_GAUGE, "mlwatch_hwmon_power_watts", "watts", "Power reported by a hardware monitoring sensor.");
MW_METRIC(ENERGY, MW_COUNTER, "mlwatch_hwmon_energy_joules_total", "joules", "Energy counted by a hardware monitoring sensor.");
MW_METRIC(VOLTAGE, MW_GAUGE, "mlwatch_hwmon_voltage_volts", "volts", "Voltage reported by a hardware monitoring sensor.");
/* clang-format on */

static const char *const KIND_PREFIX[] = {"temp", "power", "energy", "in"};

typedef struct hw_sensor {
    uint8_t kind;    /* mw_hwmon_kind */
    uint8_t average; /* power: powerN_average (no powerN_input) */
    uint8_t has_max, has_crit;
    unsigned index;
    double max_c, crit_c;
    char sensor[24]; /* "temp1" */
    char label[64];  /* tempN_label or "" */
} hw_sensor;

typedef struct hw_chip {
    char hwmon[32]; /* "hwmon0" */
    char name[64];
    int fd;        /* the folder holding the sensor files */
    int in_device; /* fd is hwmonN/device (old-style driver) */
    hw_sensor *sensors;
    size_t n;
} hw_chip;

typedef struct hw_state {
    hw_chip *chips;
    size_t n;
    int rescan;
} hw_state;

/* --- parsers -------------------------------------------------------- */

int mw_hwmon_parse_file(const char *name, mw_hwmon_kind *kind, unsigned *index, int *average)
{
    for (int k = 0; k < 4; k++) {
        size_t n = strlen(KIND_PREFIX[k]);
        if (strncmp(name, KIND_PREFIX[k], n) != 0) continue;
        const char *p = name + n;
        uint64_t v;
        if (mw_parse_u64(&p, &v) < 0 || v > 65535) return -1;
        if (strcmp(p, "_input") == 0)
            *average = 0;
        else if (k == MW_HWMON_POWER && strcmp(p, "_average") == 0)
            *average = 1;
        else
            return -1;
        *kind = (mw_hwmon_kind)k;
        *index = (unsigned)v;
        return 0;
    }
    return -1;
}

int mw_hwmon_parse_value(const char *text, int64_t *out)
{
    const char *p = text;
    if (mw_parse_i64(&p, out) < 0) return -1;
    while (*p == ' ' || *p == '\n')
        p++;
    return *p ? -1 : 0;
}

/* Read a small signed value; 0, -errno, or -EINVAL when malformed. */
static int read_i64at(int dirfd, const char *name, int64_t *out)
{
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return -errno;
    char tmp[64];
    ssize_t n;
    do
        n = read(fd, tmp, sizeof(tmp) - 1);
    while (n < 0 && errno == EINTR);
    int e = errno;
    close(fd);
    if (n < 0) return -e;
    tmp[n] = '\0';
    return mw_hwmon_parse_value(tmp, out) < 0 ? -EINVAL : 0;
}

/* --- discovery ------------------------------------------------------ */

static void free_chips(hw_state *st)
{
    for (size_t i = 0; i < st->n; i++) {
        if (st->chips[i].fd >= 0) close(st->chips[i].fd);
        free(st->chips[i].sensors);
    }
    free(st->chips);
    st->chips = NULL;
    st->n = 0;
}

static int cmp_sensor(const void *a, const void *b)
{
    const hw_sensor *x = a, *y = b;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static int cmp_chip(const void *a, const void *b)
{
    const hw_chip *x = a, *y = b;
    size_t lx = strlen(x->hwmon), ly = strlen(y->hwmon);
    return lx != ly ? (lx < ly ? -1 : 1) : strcmp(x->hwmon, y->hwmon);
}

/* Collect the sensors of the folder dirfd into chip; returns how many. */
static size_t scan_sensors(hw_chip *chip, int dirfd)
{
    DIR *d = mw_fdopendir_dup(dirfd);
    if (!d) return 0;
    size_t cap = 0;
    const struct dirent *de;
    while ((de = readdir(d))) {
        mw_hwmon_kind kind;
        unsigned index;
        int average;
        if (mw_hwmon_parse_file(de->d_name, &kind, &index, &average) < 0) continue;
        size_t i;
        for (i = 0; i < chip->n; i++)
            if (chip->sensors[i].kind == kind && chip->sensors[i].index == index) break;
        if (i < chip->n) {
            /* powerN_input and powerN_average: prefer the instantaneous one. */
            if (!average) chip->sensors[i].average = 0;
            continue;
        }
        if (chip->n == HWMON_MAX_SENSORS) continue;
        if (chip->n == cap) {
            cap = cap ? cap * 2 : 8;
            chip->sensors = mw_xrealloc(chip->sensors, cap * sizeof(hw_sensor));
        }
        hw_sensor *s = &chip->sensors[chip->n++];
        memset(s, 0, sizeof(*s));
        s->kind = (uint8_t)kind;
        s->index = index;
        s->average = (uint8_t)average;
        snprintf(s->sensor, sizeof(s->sensor), "%s%u", KIND_PREFIX[kind], index);
    }
    closedir(d);
    return chip->n;
}

/* Static parts of each sensor: label and temperature limits. */
static void read_static(hw_chip *chip)
{
    char file[48];
    for (size_t i = 0; i < chip->n; i++) {
        hw_sensor *s = &chip->sensors[i];
        snprintf(file, sizeof(file), "%s_label", s->sensor);
        if (mw_read_lineat(chip->fd, file, s->label, sizeof(s->label)) < 0) s->label[0] = '\0';
        if (s->kind != MW_HWMON_TEMP) continue;
        int64_t v;
        snprintf(file, sizeof(file), "%s_max", s->sensor);
        if (read_i64at(chip->fd, file, &v) == 0) {
            s->has_max = 1;
            s->max_c = (double)v / 1000.0;
        }
        snprintf(file, sizeof(file), "%s_crit", s->sensor);
        if (read_i64at(chip->fd, file, &v) == 0) {
            s->has_crit = 1;
            s->crit_c = (double)v / 1000.0;
        }
    }
    if (chip->n > 1) qsort(chip->sensors, chip->n, sizeof(hw_sensor), cmp_sensor);
}

static void add_chip(hw_state *st, size_t *cap, int classfd, const char *entry)
{
    int fd = openat(classfd, entry, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    hw_chip chip;
    memset(&chip, 0, sizeof(chip));
    mw_strlcpy(chip.hwmon, entry, sizeof(chip.hwmon));
    chip.fd = fd;
    int have_name = mw_read_lineat(fd, "name", chip.name, sizeof(chip.name)) == 0;
    if (scan_sensors(&chip, fd) == 0) {
        /* Old drivers: everything is in the parent device's folder. */
        int devfd = openat(fd, "device", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (devfd >= 0) {
            if (scan_sensors(&chip, devfd) > 0) {
                close(fd);
                chip.fd = devfd;
                chip.in_device = 1;
                if (!have_name)
                    have_name = mw_read_lineat(devfd, "name", chip.name, sizeof(chip.name)) == 0;
            } else
                close(devfd);
        }
    }
    if (!have_name) chip.name[0] = '\0';
    if (chip.n == 0) {
        close(chip.fd);
        free(chip.sensors);
        return;
    }
    read_static(&chip);
    if (st->n == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        st->chips = mw_xrealloc(st->chips, *cap * sizeof(hw_chip));
    }
    st->chips[st->n++] = chip;
}

static int discover(hw_state *st, const mw_hostfs *host)
{
    free_chips(st);
    st->rescan = 0;
    DIR *d = mw_hostfs_opendir(host, HWMON_CLASS);
    if (!d) return -errno;
    int classfd = dirfd(d);
    size_t cap = 0;
    const struct dirent *de;
    while ((de = readdir(d)) && st->n < HWMON_MAX_CHIPS) {
        if (strncmp(de->d_name, "hwmon", 5) != 0 || strlen(de->d_name) >= 32) continue;
        add_chip(st, &cap, classfd, de->d_name);
    }
    closedir(d);
    if (st->n > 1) qsort(st->chips, st->n, sizeof(hw_chip), cmp_chip);
    return 0;
}

static int hw_init(const mw_env *env, void **state)
{
    hw_state *st = mw_xcalloc(1, sizeof(*st));
    int rc = discover(st, env->host);
    if (rc < 0 || st->n == 0) {
        mw_log(MW_LOG_INFO, "hwmon", "no hardware monitoring chips under %s (%s)", HWMON_CLASS,
               rc < 0 ? strerror(-rc) : "no sensors");
        free_chips(st);
        free(st);
        return MW_COLLECTOR_ABSENT;
    }
    *state = st;
    return 0;
}

static void hw_destroy(void *state)
{
    hw_state *st = state;
    if (!st) return;
    free_chips(st);
    free(st);
}

/* --- collection ----------------------------------------------------- */

/* 1 when the chip's folder is no longer the one under sys/class/hwmon (its
 * device was removed, or replaced by another). */
static int chip_gone(mw_collect_ctx *ctx, const hw_chip *c)
{
    char path[96];
    snprintf(path, sizeof(path), HWMON_CLASS "/%s%s", c->hwmon, c->in_device ? "/device" : "");
    int fd = mw_hostfs_opendirfd(ctx->env->host, path);
    if (fd < 0) return 1;
    struct stat a, b;
    int same =
        fstat(fd, &a) == 0 && fstat(c->fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    close(fd);
    return !same;
}

static void collect_chip(mw_collect_ctx *ctx, hw_state *st, const hw_chip *c)
{
    char file[48];
    for (size_t i = 0; i < c->n; i++) {
        const hw_sensor *s = &c->sensors[i];
        snprintf(file, sizeof(file), "%s_%s", s->sensor, s->average ? "average" : "input");
        int64_t v;
        int rc = read_i64at(c->fd, file, &v);
        if (rc == -ENODATA) continue;
        if (rc < 0) {
            char path[160];
            snprintf(path, sizeof(path), HWMON_CLASS "/%s/%s", c->hwmon, file);
            mw_collect_error(ctx, path, rc == -EINVAL ? 0 : rc,
                             rc == -EINVAL ? "malformed content" : NULL);
            if (rc == -ENOENT || rc == -ENODEV) {
                st->rescan = 1;
                if (chip_gone(ctx, c)) return; /* the rest would fail alike */
            }
            continue;
        }
        mw_label l[4] = {
            {"chip", c->name}, {"hwmon", c->hwmon}, {"sensor", s->sensor}, {"label", s->label}};
        switch (s->kind) {
        case MW_HWMON_TEMP:
            mw_emitv(ctx->snap, &TEMP, (double)v / 1000.0, 4, l);
            if (s->has_max) mw_emitv(ctx->snap, &TEMP_MAX, s->max_c, 4, l);
            if (s->has_crit) mw_emitv(ctx->snap, &TEMP_CRIT, s->crit_c, 4, l);
            break;
        case MW_HWMON_POWER:
            mw_emitv(ctx->snap, &POWER, (double)v / 1e6, 4, l);
            break;
        case MW_HWMON_ENERGY:
            mw_emitv(ctx->snap, &ENERGY, (double)v / 1e6, 4, l);
            break;
        default:
            mw_emitv(ctx->snap, &VOLTAGE, (double)v / 1000.0, 4, l);
        }
    }
}

static void hw_collect(void *state, mw_collect_ctx *ctx)
{
    hw_state *st = state;
    if (st->rescan) {
        int rc = discover(st, ctx->env->host);
        if (rc < 0) {
            mw_collect_error(ctx, HWMON_CLASS, rc, NULL);
            st->rescan = 1;
            return;
        }
    }
    for (size_t i = 0; i < st->n; i++)
        collect_chip(ctx, st, &st->chips[i]);
}

const mw_collector mw_collector_hwmon = {
    .name = "hwmon",
    .help = "Temperatures, power, energy and voltages of hardware monitoring chips",
    .init = hw_init,
    .collect = hw_collect,
    .destroy = hw_destroy,
};
