/* energy_state.c - the energy state file: JSON (jansson), atomic writes; see
 * energy_state.h. */
#include "energy_state.h"
#include "../core/buf.h"
#include "../core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORMAT "mlwatch-energy-state"
#define VERSION 1

/* --- dump ------------------------------------------------------------------ */

/* The file is written one entry at a time: jansson builds and prints each
 * container's object, and the text is appended. A tree of every container at
 * once (a few hundred KB of small objects, every minute) would raise the
 * heap's high-water mark, and with it the agent's resident memory, for
 * good. */
typedef struct dump_ctx {
    mw_buf out;
    int ncontainers, nnode;
    mw_buf node; /* the node array, appended after the containers */
} dump_ctx;

/* Append j's compact text (then drop j), after a comma when *count entries
 * are there already. */
static void append_json(mw_buf *b, json_t *j, int *count)
{
    if (!j) return; /* a string that is not UTF-8: the entry is left out */
    char *text = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    json_decref(j);
    if (!text) return;
    if ((*count)++) mw_buf_putc(b, ',');
    mw_buf_puts(b, text);
    free(text);
}

static void dump_one(void *arg, char kind, const char *a, const char *b, const char *c,
                     const double *v, size_t n)
{
    dump_ctx *d = arg;
    if (kind == 'n') {
        append_json(
            &d->node,
            json_pack("{s:s,s:s,s:s,s:f}", "source", a, "zone", b, "method", c, "joules", v[0]),
            &d->nnode);
        return;
    }
    if (n != MW_EC_N * MW_EK_N + 1) return;
    json_t *j = json_object();
    for (int k = 0; k < MW_EC_N; k++)
        json_object_set_new(j, mw_energy_component_names[k],
                            json_pack("{s:f,s:f}", "dynamic", v[k * MW_EK_N + MW_EK_DYNAMIC],
                                      "idle", v[k * MW_EK_N + MW_EK_IDLE]));
    append_json(&d->out,
                json_pack("{s:s,s:s,s:s,s:o,s:f}", "namespace", a, "pod", b, "container", c,
                          "joules", j, "co2_grams", v[MW_EC_N * MW_EK_N]),
                &d->ncontainers);
}

char *mw_energy_state_dump(const mw_energy *e, const char *identity, int64_t now_ms)
{
    json_t *id = json_string(identity ? identity : "");
    if (!id) return NULL; /* not UTF-8 */
    dump_ctx d = {.ncontainers = 0};
    mw_buf_init(&d.out, 0);
    mw_buf_init(&d.node, 0);
    mw_buf_printf(&d.out, "{\"format\":\"%s\",\"version\":%d,\"identity\":", FORMAT, VERSION);
    int one = 0;
    append_json(&d.out, id, &one);
    mw_buf_printf(&d.out, ",\"saved_ms\":%lld,\"containers\":[", (long long)now_ms);
    mw_energy_visit(e, dump_one, &d);
    mw_buf_puts(&d.out, "],\"node\":[");
    if (d.node.len) mw_buf_append(&d.out, d.node.data, d.node.len);
    mw_buf_puts(&d.out, "]}");
    mw_buf_free(&d.node);
    return mw_buf_steal(&d.out, NULL);
}

/* --- parse ------------------------------------------------------------------ */

static int total(const json_t *v, double *out)
{
    if (!json_is_number(v)) return -1;
    double x = json_number_value(v);
    if (!isfinite(x) || x < 0 || x > 1e18) return -1;
    *out = x;
    return 0;
}

static int str(const json_t *o, const char *key, const char **out, size_t max)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_string(v) || json_string_length(v) > max ||
        strlen(json_string_value(v)) != json_string_length(v))
        return -1;
    *out = json_string_value(v);
    return 0;
}

int mw_energy_state_parse(mw_energy *e, const char *text, size_t len, const char *identity,
                          char *err, size_t errsize)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root) {
        snprintf(err, errsize, "not JSON (line %d: %s)", je.line, je.text);
        return -1;
    }
    int rc = -1;
    const char *fmt = NULL, *id = NULL;
    const json_t *ver = json_object_get(root, "version");
    const json_t *cs = json_object_get(root, "containers"), *ns = json_object_get(root, "node");
    if (str(root, "format", &fmt, 64) < 0 || strcmp(fmt, FORMAT) != 0) {
        snprintf(err, errsize, "not an mlwatch energy state file");
        goto out;
    }
    if (!json_is_integer(ver) || json_integer_value(ver) != VERSION) {
        snprintf(err, errsize, "unsupported version (this agent reads version %d)", VERSION);
        goto out;
    }
    if (str(root, "identity", &id, 256) < 0 || strcmp(id, identity) != 0) {
        snprintf(err, errsize, "written on another machine ('%s', this is '%s')", id ? id : "?",
                 identity);
        goto out;
    }
    if (!json_is_array(cs) || !json_is_array(ns)) {
        snprintf(err, errsize, "containers and node must be lists");
        goto out;
    }
    /* Validate everything first: a half-restored state would be worse than none. */
    for (int pass = 0; pass < 2; pass++) {
        size_t i;
        const json_t *c;
        json_array_foreach(cs, i, c)
        {
            const char *a, *b, *k;
            double j[MW_EC_N][MW_EK_N], co2;
            const json_t *jo = json_object_get(c, "joules");
            if (str(c, "namespace", &a, 253) < 0 || str(c, "pod", &b, 253) < 0 ||
                str(c, "container", &k, 511) < 0 || !json_is_object(jo) ||
                total(json_object_get(c, "co2_grams"), &co2) < 0) {
                snprintf(err, errsize, "containers[%zu]: malformed", i);
                goto out;
            }
            for (int x = 0; x < MW_EC_N; x++) {
                const json_t *cj = json_object_get(jo, mw_energy_component_names[x]);
                if (total(json_object_get(cj, "dynamic"), &j[x][MW_EK_DYNAMIC]) < 0 ||
                    total(json_object_get(cj, "idle"), &j[x][MW_EK_IDLE]) < 0) {
                    snprintf(err, errsize, "containers[%zu]: bad joules.%s", i,
                             mw_energy_component_names[x]);
                    goto out;
                }
            }
            if (pass) mw_energy_restore_container(e, a, b, k, (const double(*)[MW_EK_N])j, co2);
        }
        json_array_foreach(ns, i, c)
        {
            const char *a, *b, *k;
            double j;
            if (str(c, "source", &a, 63) < 0 || str(c, "zone", &b, 200) < 0 ||
                str(c, "method", &k, 32) < 0 || total(json_object_get(c, "joules"), &j) < 0) {
                snprintf(err, errsize, "node[%zu]: malformed", i);
                goto out;
            }
            if (pass) mw_energy_restore_node(e, a, b, k, j);
        }
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* --- files -------------------------------------------------------------------- */

int mw_energy_state_load(mw_energy *e, const char *dir, const char *identity, char *err,
                         size_t errsize)
{
    char path[4096], aside[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, MW_ENERGY_STATE_FILE);
    snprintf(aside, sizeof(aside), "%s.rejected", path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return 1;
        snprintf(err, errsize, "%s: %s", path, strerror(errno));
        return -1;
    }
    char *text = mw_xmalloc(MW_ENERGY_STATE_MAX);
    size_t n = fread(text, 1, MW_ENERGY_STATE_MAX, f);
    int bad = ferror(f);
    fclose(f);
    char why[512];
    int rc;
    if (bad)
        snprintf(why, sizeof(why), "read error"), rc = -1;
    else if (n == MW_ENERGY_STATE_MAX)
        snprintf(why, sizeof(why), "larger than %u bytes", MW_ENERGY_STATE_MAX), rc = -1;
    else
        rc = mw_energy_state_parse(e, text, n, identity, why, sizeof(why));
    free(text);
    if (rc == 0) return 0;
    int moved = rename(path, aside) == 0;
    snprintf(err, errsize, "%s: %s; %s", path, why,
             moved ? "set aside as " MW_ENERGY_STATE_FILE ".rejected, counters start at 0"
                   : "could not set it aside");
    return -1;
}

int mw_energy_state_save(const mw_energy *e, const char *dir, const char *identity, int64_t now_ms)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) return -errno;
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, MW_ENERGY_STATE_FILE);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    char *text = mw_energy_state_dump(e, identity, now_ms);
    if (!text) return -ENOMEM;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        int rc = -errno;
        free(text);
        return rc;
    }
    size_t len = strlen(text), off = 0;
    int rc = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0) {
            if (errno == EINTR) continue;
            rc = -errno;
            break;
        }
        off += (size_t)w;
    }
    free(text);
    if (rc == 0 && fsync(fd) < 0) rc = -errno;
    if (close(fd) < 0 && rc == 0) rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0) rc = -errno;
    if (rc < 0) {
        unlink(tmp);
        return rc;
    }
    /* The rename itself must survive a power cut. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}
