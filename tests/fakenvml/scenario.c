/* scenario.c - parsing the scenario files of the fake GPU libraries. */
#include "scenario.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const fk_field_names[FK_NFIELDS] = {
    "util",           "memory",   "power",        "limit",
    "energy",         "temp",     "clock",        "maxclock",
    "reasons",        "pstate",   "ecc",          "remapped",
    "retired",        "pcie_gen", "pcie_gen_max", "pcie_width",
    "pcie_width_max", "replay",   "nvlink",       "numa",
    "affinity",       "procs",    "procutil",     "mig",
    "uuid",           "name",     "pci",          "events",
    "migmemory",      "migutil",  "gpm",          "gpmmig",
};

const char *const fk_ras_block_names[FK_RAS_BLOCKS] = {
    "umc",       "sdma", "gfx", "mmhub", "athub", "pcie_bif", "hdp",
    "xgmi_wafl", "df",   "smn", "sem",   "mp0",   "mp1",      "fuse",
};

typedef struct parser {
    int line;
    char *err;
    unsigned errsize;
    int (*code_of)(const char *);
    int not_supported;
} parser;

static int fail(parser *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(parser *p, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errsize, "line %d: %s", p->line, msg);
    return -1;
}

static int num(parser *p, const char *key, const char *v, unsigned long long *out)
{
    char *end;
    errno = 0;
    *out = strtoull(v, &end, 0);
    if (!*v || *end || errno) return fail(p, "%s: not a number: '%s'", key, v);
    return 0;
}

static int field_of(const char *name)
{
    for (int f = 0; f < FK_NFIELDS; f++)
        if (strcmp(fk_field_names[f], name) == 0) return f;
    return -1;
}

/* Split "key=value" tokens; values may be "double quoted". */
static int tokens(char *s, char **keys, char **vals, int max)
{
    int n = 0;
    while (*s && n < max) {
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s || *s == '#') break;
        keys[n] = s;
        while (*s && *s != '=' && *s != ' ' && *s != '\t')
            s++;
        if (*s == '=') {
            *s++ = '\0';
            if (*s == '"') {
                vals[n] = ++s;
                while (*s && *s != '"')
                    s++;
            } else {
                vals[n] = s;
                while (*s && *s != ' ' && *s != '\t')
                    s++;
            }
        } else {
            vals[n] = NULL;
        }
        if (*s) *s++ = '\0';
        n++;
    }
    return n;
}

static int parse_list(parser *p, fk_gpu *g, const char *v, int with_code)
{
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", v);
    for (char *save = NULL, *item = strtok_r(buf, ",", &save); item;
         item = strtok_r(NULL, ",", &save)) {
        int code = p->not_supported;
        char *colon = strchr(item, ':');
        if (with_code) {
            if (!colon) return fail(p, "fail=%s: expected FIELD:CODE", item);
            *colon = '\0';
            const char *c = colon + 1;
            code = (*c >= '0' && *c <= '9') ? atoi(c) : p->code_of(c);
            if (code <= 0) return fail(p, "unknown error code '%s'", c);
        }
        int f = field_of(item);
        if (f < 0) return fail(p, "unknown field '%s'", item);
        g->fail[f] = code;
    }
    return 0;
}

static int parse_cpus(parser *p, const char *v, uint64_t *bits)
{
    memset(bits, 0, 16 * sizeof(uint64_t));
    const char *s = v;
    while (*s) {
        char *end;
        unsigned long a = strtoul(s, &end, 10), b = a;
        if (end == s) return fail(p, "cpus: malformed '%s'", v);
        if (*end == '-') {
            s = end + 1;
            b = strtoul(s, &end, 10);
            if (end == s) return fail(p, "cpus: malformed '%s'", v);
        }
        if (b >= 1024 || a > b) return fail(p, "cpus: out of range '%s'", v);
        for (unsigned long c = a; c <= b; c++)
            bits[c / 64] |= UINT64_C(1) << (c % 64);
        s = end;
        if (*s == ',')
            s++;
        else if (*s)
            return fail(p, "cpus: malformed '%s'", v);
    }
    return 0;
}

static fk_gpu *gpu_at(parser *p, fk_world *w, unsigned long long i)
{
    if (i >= FK_MAX_GPUS) {
        fail(p, "gpu index %llu out of range", i);
        return NULL;
    }
    fk_gpu *g = &w->gpus[i];
    if (!g->present) {
        g->present = 1;
        snprintf(g->name, sizeof(g->name), "Fake GPU");
        snprintf(g->uuid, sizeof(g->uuid), "GPU-fake-%llu", i);
        snprintf(g->bus, sizeof(g->bus), "00000000:%02llX:00.0", i + 1);
        g->numa = -1;
        g->pstate = 0;
        for (int b = 0; b < FK_RAS_BLOCKS; b++)
            g->ras_rc[b] = -1;
    }
    if (i + 1 > w->ngpus) w->ngpus = (unsigned)i + 1;
    return g;
}

#define STR(k, dst)                                                                                \
    if (strcmp(key, k) == 0) {                                                                     \
        snprintf(dst, sizeof(dst), "%s", v);                                                       \
        continue;                                                                                  \
    }
#define NUM(k, dst)                                                                                \
    if (strcmp(key, k) == 0) {                                                                     \
        if (num(p, key, v, &u) < 0) return -1;                                                     \
        dst = u;                                                                                   \
        continue;                                                                                  \
    }

/* GPM metrics by scenario name: graphics, sm_occupancy, dram_bw. */
static int gpm_index(const char *name)
{
    static const char *const names[3] = {"graphics", "sm_occupancy", "dram_bw"};
    for (int k = 0; k < 3; k++)
        if (strcmp(names[k], name) == 0) return k;
    return -1;
}

/* A percent 0..100 with decimals, or "na" (the metric answers
 * NOT_SUPPORTED, stored as -1). */
static int gpm_value(parser *p, const char *key, const char *v, double *out)
{
    if (strcmp(v, "na") == 0) {
        *out = -1;
        return 0;
    }
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (!*v || *end || errno || !(d >= 0 && d <= 100))
        return fail(p, "%s: not a percent: '%s'", key, v);
    *out = d;
    return 0;
}

/* ras_BLOCK=CE,UE (counts) or ras_BLOCK=CODE (what the block answers). */
static int ras_key(parser *p, fk_gpu *g, const char *block, const char *v)
{
    int b = 0;
    while (b < FK_RAS_BLOCKS && strcmp(fk_ras_block_names[b], block) != 0)
        b++;
    if (b == FK_RAS_BLOCKS) return fail(p, "gpu: unknown RAS block '%s'", block);
    char tail;
    if (sscanf(v, "%llu,%llu%c", &g->ras[b][0], &g->ras[b][1], &tail) == 2) {
        g->ras_rc[b] = 0;
        return 0;
    }
    int rc = (*v >= '0' && *v <= '9') ? atoi(v) : p->code_of(v);
    if (rc <= 0) return fail(p, "ras_%s: expected CE,UE or an error code, got '%s'", block, v);
    g->ras_rc[b] = rc;
    return 0;
}

static int gpu_line(parser *p, fk_world *w, char **keys, char **vals, int n)
{
    unsigned long long u;
    if (n < 2 || vals[1] || num(p, "gpu", keys[1], &u) < 0) return fail(p, "gpu: expected INDEX");
    fk_gpu *g = gpu_at(p, w, u);
    if (!g) return -1;
    for (int k = 2; k < n; k++) {
        const char *key = keys[k], *v = vals[k];
        if (!v) return fail(p, "'%s' has no value", key);
        STR("name", g->name) STR("uuid", g->uuid) STR("bus", g->bus);
        NUM("util", g->util) NUM("memutil", g->memutil) NUM("memtotal", g->memtotal);
        NUM("memused", g->memused) NUM("power_mw", g->power_mw) NUM("limit_mw", g->limit_mw);
        NUM("energy_mj", g->energy_mj) NUM("temp", g->temp) NUM("sm_mhz", g->sm_mhz);
        NUM("sm_max_mhz", g->sm_max_mhz) NUM("mem_mhz", g->mem_mhz);
        NUM("mem_max_mhz", g->mem_max_mhz) NUM("reasons", g->reasons) NUM("pstate", g->pstate);
        NUM("ecc_corrected", g->ecc[0]) NUM("ecc_uncorrected", g->ecc[1]);
        NUM("pcie_gen", g->pcie_gen) NUM("pcie_gen_max", g->pcie_gen_max);
        NUM("pcie_width", g->pcie_width) NUM("pcie_width_max", g->pcie_width_max);
        NUM("replay", g->replay) NUM("lost", g->lost) NUM("mig", g->mig);
        NUM("procs_delay_ms", g->procs_delay_ms) NUM("gpm", g->gpm);
        if (strncmp(key, "gpm_", 4) == 0) {
            int gk = gpm_index(key + 4);
            if (gk < 0 || gpm_value(p, key, v, &g->gpm_v[gk]) < 0)
                return fail(p, "gpu: bad GPM key or value '%s=%s'", key, v);
            continue;
        }
        if (strncmp(key, "ras_", 4) == 0) {
            if (ras_key(p, g, key + 4, v) < 0) return -1;
            continue;
        }
        if (strcmp(key, "numa") == 0) {
            g->numa = atoi(v);
            continue;
        }
        if (strcmp(key, "cpus") == 0) {
            if (parse_cpus(p, v, g->cpus) < 0) return -1;
            continue;
        }
        if (strcmp(key, "remapped") == 0 &&
            sscanf(v, "%u,%u,%u,%u", &g->remapped[0], &g->remapped[1], &g->remapped[2],
                   &g->remapped[3]) == 4)
            continue;
        if (strcmp(key, "retired") == 0 && sscanf(v, "%u,%u", &g->retired[0], &g->retired[1]) == 2)
            continue;
        if (strcmp(key, "unsupported") == 0) {
            if (parse_list(p, g, v, 0) < 0) return -1;
            continue;
        }
        if (strcmp(key, "fail") == 0) {
            if (parse_list(p, g, v, 1) < 0) return -1;
            continue;
        }
        return fail(p, "gpu: unknown or malformed key '%s'", key);
    }
    return 0;
}

/* Lines "OBJECT key=value ...": values into a small table by key. */
static const char *get(char **keys, char **vals, int n, const char *key)
{
    for (int k = 1; k < n; k++)
        if (strcmp(keys[k], key) == 0) return vals[k] ? vals[k] : "";
    return NULL;
}

static int getnum(parser *p, char **keys, char **vals, int n, const char *key,
                  unsigned long long def, unsigned long long *out)
{
    const char *v = get(keys, vals, n, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (strcmp(v, "na") == 0) {
        *out = ~0ULL;
        return 0;
    }
    return num(p, key, v, out);
}

static int other_line(parser *p, fk_world *w, char **keys, char **vals, int n)
{
    const char *obj = keys[0];
    unsigned long long gi, a, b, c, d, e, f;
    if (strcmp(obj, "system") == 0) {
        const char *v = get(keys, vals, n, "driver");
        if (v) snprintf(w->driver, sizeof(w->driver), "%s", v);
        v = get(keys, vals, n, "init");
        if (v) w->init_rc = (*v >= '0' && *v <= '9') ? atoi(v) : p->code_of(v);
        if (w->init_rc < 0) return fail(p, "unknown init code '%s'", v);
        return 0;
    }
    if (getnum(p, keys, vals, n, "gpu", ~0ULL, &gi) < 0) return -1;
    if (gi == ~0ULL) return fail(p, "%s: gpu= is required", obj);
    fk_gpu *g = gpu_at(p, w, gi);
    if (!g) return -1;
    if (strcmp(obj, "proc") == 0) {
        if (w->nprocs >= FK_MAX_PROCS) return fail(p, "too many processes");
        fk_proc *pr = &w->procs[w->nprocs++];
        memset(pr, 0, sizeof(*pr));
        pr->gpu = (unsigned)gi;
        if (getnum(p, keys, vals, n, "pid", 0, &a) < 0 || getnum(p, keys, vals, n, "mem", 0, &b) ||
            getnum(p, keys, vals, n, "sm", ~0ULL, &c) < 0 ||
            getnum(p, keys, vals, n, "gi", 0xffffffffULL, &d) < 0 ||
            getnum(p, keys, vals, n, "ci", 0xffffffffULL, &e) < 0)
            return -1;
        pr->pid = (unsigned)a;
        pr->mem = b;
        pr->has_sm = c != ~0ULL;
        pr->sm = (unsigned)c;
        pr->gi = (unsigned)d;
        pr->ci = (unsigned)e;
        return 0;
    }
    if (strcmp(obj, "mig") == 0) {
        if (getnum(p, keys, vals, n, "index", 0, &a) < 0 || a >= FK_MAX_MIG)
            return fail(p, "mig: bad index");
        fk_mig *m = &g->migs[a];
        m->present = 1;
        const char *v = get(keys, vals, n, "uuid");
        snprintf(m->uuid, sizeof(m->uuid), "%s", v ? v : "MIG-fake");
        v = get(keys, vals, n, "name");
        snprintf(m->name, sizeof(m->name), "%s", v ? v : "Fake GPU MIG 1g.5gb");
        if (getnum(p, keys, vals, n, "gi", 0, &b) < 0 || getnum(p, keys, vals, n, "ci", 0, &c) ||
            getnum(p, keys, vals, n, "memtotal", 0, &d) < 0 ||
            getnum(p, keys, vals, n, "memused", 0, &e) < 0 ||
            getnum(p, keys, vals, n, "util", ~0ULL, &f) < 0)
            return -1;
        m->gi = (unsigned)b;
        m->ci = (unsigned)c;
        m->memtotal = d;
        m->memused = e;
        m->has_util = f != ~0ULL;
        m->util = (unsigned)f;
        for (int k = 0; k < 3; k++) {
            static const char *const names[3] = {"graphics", "sm_occupancy", "dram_bw"};
            const char *gv = get(keys, vals, n, names[k]);
            m->gpm[k] = 0;
            if (gv && gpm_value(p, names[k], gv, &m->gpm[k]) < 0) return -1;
        }
        return 0;
    }
    if (strcmp(obj, "nvlink") == 0) {
        if (getnum(p, keys, vals, n, "link", 0, &a) < 0 || a >= FK_MAX_LINKS)
            return fail(p, "nvlink: bad link");
        fk_link *l = &g->links[a];
        l->present = 1;
        static const char *const names[] = {"replay", "recovery", "crc_flit", "crc_data",
                                            "ecc_data"};
        if (getnum(p, keys, vals, n, "active", 1, &b) < 0) return -1;
        l->active = (int)b;
        for (int k = 0; k < 5; k++)
            if (getnum(p, keys, vals, n, names[k], 0, &l->err[k]) < 0) return -1;
        return 0;
    }
    if (strcmp(obj, "event") == 0) {
        if (w->nevents >= FK_MAX_EVENTS) return fail(p, "too many events");
        if (getnum(p, keys, vals, n, "xid", 0, &a) < 0 || getnum(p, keys, vals, n, "id", 0, &b))
            return -1;
        w->events[w->nevents++] = (fk_event){(unsigned)b, (unsigned)gi, a};
        return 0;
    }
    return fail(p, "unknown line kind '%s'", obj);
}

int fk_parse(const char *text, fk_world *w, int (*code_of)(const char *name),
             int not_supported_code, char *err, unsigned errsize)
{
    memset(w, 0, sizeof(*w));
    snprintf(w->driver, sizeof(w->driver), "550.54.15");
    parser p = {0, err, errsize, code_of, not_supported_code};
    const char *s = text;
    while (*s) {
        const char *nl = strchr(s, '\n');
        size_t len = nl ? (size_t)(nl - s) : strlen(s);
        char line[4096];
        p.line++;
        if (len >= sizeof(line)) return fail(&p, "line too long");
        memcpy(line, s, len);
        line[len] = '\0';
        s += len + (nl ? 1 : 0);
        char *keys[64], *vals[64];
        int n = tokens(line, keys, vals, 64);
        if (n == 0) continue;
        int rc = strcmp(keys[0], "gpu") == 0 ? gpu_line(&p, w, keys, vals, n)
                                             : other_line(&p, w, keys, vals, n);
        if (rc < 0) return -1;
    }
    return 0;
}

static fk_world *current;
static struct stat current_st;
static int loaded;

static void load(int (*code_of)(const char *), int ns)
{
    const char *path = getenv("FAKE_NVML_SCENARIO");
    fk_world *w = calloc(1, sizeof(*w));
    if (!w) abort();
    char err[300];
    if (!path || !*path) {
        fk_parse("", w, code_of, ns, err, sizeof(err));
    } else {
        FILE *f = fopen(path, "r");
        if (!f) {
            fprintf(stderr, "fake GPU library: cannot open scenario %s: %s\n", path,
                    strerror(errno));
            abort();
        }
        static char text[1 << 20];
        size_t len = fread(text, 1, sizeof(text) - 1, f);
        text[len] = '\0';
        fstat(fileno(f), &current_st);
        fclose(f);
        if (fk_parse(text, w, code_of, ns, err, sizeof(err)) < 0) {
            fprintf(stderr, "fake GPU library: %s: %s\n", path, err);
            abort();
        }
    }
    free(current);
    current = w;
    loaded = 1;
}

const fk_world *fk_world_get(int (*code_of)(const char *name), int not_supported_code)
{
    if (!loaded) {
        load(code_of, not_supported_code);
        return current;
    }
    const char *reload = getenv("FAKE_NVML_RELOAD");
    const char *path = getenv("FAKE_NVML_SCENARIO");
    if ((reload && strcmp(reload, "0") == 0) || !path || !*path) return current;
    struct stat st;
    if (stat(path, &st) == 0 &&
        (st.st_ino != current_st.st_ino || st.st_size != current_st.st_size ||
         st.st_mtim.tv_sec != current_st.st_mtim.tv_sec ||
         st.st_mtim.tv_nsec != current_st.st_mtim.tv_nsec))
        load(code_of, not_supported_code);
    return current;
}

void fk_world_release(void)
{
    free(current);
    current = NULL;
    loaded = 0;
}
