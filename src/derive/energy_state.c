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
#define VERSION 2 /* version 1 (no shares, methods, components or floors) is read too */

/* --- dump ------------------------------------------------------------------ */

/* The file is written one entry at a time: jansson builds and prints each
 * container's object, and the text is appended. A tree of every container at
 * once (a few hundred KB of small objects, every minute) would raise the
 * heap's high-water mark, and with it the agent's resident memory, for
 * good. */
typedef struct dump_ctx {
    mw_buf out;
    int ncontainers, nnode, nshares, ncomponents, nfloors;
    /* the other lists, appended after the containers */
    mw_buf node, shares, components, floors;
    double node_co2;
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

/* {"cpu":{"measured":{"dynamic":J,"idle":J},"estimated":{...}},...} of an
 * entity's values (MW_EC_N x MW_EK_N x MW_EM_N). */
static json_t *joules_json(const double *v)
{
    json_t *j = json_object();
    for (int k = 0; k < MW_EC_N; k++) {
        json_t *c = json_object();
        for (int m = 0; m < MW_EM_N; m++) {
            double dyn = v[(k * MW_EK_N + MW_EK_DYNAMIC) * MW_EM_N + m];
            double idle = v[(k * MW_EK_N + MW_EK_IDLE) * MW_EM_N + m];
            if (dyn > 0 || idle > 0) /* absent: 0 */
                json_object_set_new(c, mw_energy_method_names[m],
                                    json_pack("{s:f,s:f}", "dynamic", dyn, "idle", idle));
        }
        if (json_object_size(c))
            json_object_set_new(j, mw_energy_component_names[k], c);
        else
            json_decref(c);
    }
    return j;
}

static void dump_one(void *arg, char kind, const char *a, const char *b, const char *c,
                     const double *v, size_t n)
{
    dump_ctx *d = arg;
    switch (kind) {
    case 'n':
        append_json(
            &d->node,
            json_pack("{s:s,s:s,s:s,s:f}", "source", a, "zone", b, "method", c, "joules", v[0]),
            &d->nnode);
        return;
    case 'k':
        append_json(
            &d->components,
            json_pack("{s:s,s:s,s:s,s:f}", "component", a, "kind", b, "method", c, "joules", v[0]),
            &d->ncomponents);
        return;
    case 'f':
        append_json(&d->floors, json_pack("{s:s,s:s,s:f}", "component", a, "gpu", b, "watts", v[0]),
                    &d->nfloors);
        return;
    case 'g':
        d->node_co2 = v[0];
        return;
    case 's':
        if (n != MW_ENERGY_VALUES + 1) return;
        append_json(&d->shares,
                    json_pack("{s:s,s:o,s:f}", "share", a, "joules", joules_json(v), "co2_grams",
                              v[MW_ENERGY_VALUES]),
                    &d->nshares);
        return;
    default:
        break;
    }
    if (n != MW_ENERGY_VALUES + 1) return;
    append_json(&d->out,
                json_pack("{s:s,s:s,s:s,s:o,s:f}", "namespace", a, "pod", b, "container", c,
                          "joules", joules_json(v), "co2_grams", v[MW_ENERGY_VALUES]),
                &d->ncontainers);
}

static void append_list(mw_buf *out, const char *name, const mw_buf *list)
{
    mw_buf_printf(out, "],\"%s\":[", name);
    if (list->len) mw_buf_append(out, list->data, list->len);
}

char *mw_energy_state_dump(const mw_energy *e, const char *identity, int64_t now_ms)
{
    json_t *id = json_string(identity ? identity : "");
    if (!id) return NULL; /* not UTF-8 */
    dump_ctx d;
    memset(&d, 0, sizeof(d));
    mw_buf_init(&d.out, 0);
    mw_buf *lists[] = {&d.node, &d.shares, &d.components, &d.floors};
    for (size_t i = 0; i < MW_ARRAY_LEN(lists); i++)
        mw_buf_init(lists[i], 0);
    mw_buf_printf(&d.out, "{\"format\":\"%s\",\"version\":%d,\"identity\":", FORMAT, VERSION);
    int one = 0;
    append_json(&d.out, id, &one);
    mw_buf_printf(&d.out, ",\"saved_ms\":%lld,\"containers\":[", (long long)now_ms);
    mw_energy_visit(e, dump_one, &d);
    append_list(&d.out, "shares", &d.shares);
    append_list(&d.out, "node", &d.node);
    append_list(&d.out, "components", &d.components);
    append_list(&d.out, "floors", &d.floors);
    mw_buf_puts(&d.out, "],\"node_co2_grams\":");
    one = 0;
    append_json(&d.out, json_real(d.node_co2), &one);
    mw_buf_putc(&d.out, '}');
    for (size_t i = 0; i < MW_ARRAY_LEN(lists); i++)
        mw_buf_free(lists[i]);
    return mw_buf_steal(&d.out, NULL);
}

/* --- parse ------------------------------------------------------------------ */

int mw_energy_state_total(const json_t *v, double *out)
{
    if (!json_is_number(v)) return -1;
    double x = json_number_value(v);
    if (!isfinite(x) || x < 0 || x > 1e18) return -1;
    *out = x;
    return 0;
}

json_t *mw_energy_state_root(const char *text, size_t len, const mw_state_kind *kind,
                             const char *identity, json_int_t *version, char *err, size_t errsize)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root) {
        snprintf(err, errsize, "not JSON (line %d: %s)", je.line, je.text);
        return NULL;
    }
    const json_t *fmt = json_object_get(root, "format"), *ver = json_object_get(root, "version");
    const json_t *id = json_object_get(root, "identity");
    const char *id_text = json_is_string(id) && json_string_length(id) <= kind->identity_max &&
                                  strlen(json_string_value(id)) == json_string_length(id)
                              ? json_string_value(id)
                              : NULL;
    *version = json_is_integer(ver) ? json_integer_value(ver) : 0;
    if (!json_is_string(fmt) || strlen(json_string_value(fmt)) != json_string_length(fmt) ||
        strcmp(json_string_value(fmt), kind->format) != 0)
        snprintf(err, errsize, "not an mlwatch %s state file", kind->what);
    else if (*version < kind->oldest || *version > kind->newest)
        snprintf(err, errsize, "unsupported version (this agent reads %s)", kind->versions);
    else if (!id_text || strcmp(id_text, identity) != 0)
        snprintf(err, errsize, "written on another machine ('%s', this is '%s')",
                 id_text ? id_text : "?", identity);
    else
        return root;
    json_decref(root);
    return NULL;
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

/* An entity's joules object into v (MW_ENERGY_VALUES): version 2 by method,
 * a component or method left out being 0; version 1 had {"dynamic","idle"}
 * for every component, taken as method v1_cpu_method for the CPU and
 * measured for the rest. Returns -1 with the bad component in *bad. */
static int parse_joules(const json_t *jo, int version, int v1_cpu_method, double *v,
                        const char **bad)
{
    memset(v, 0, sizeof(double) * MW_ENERGY_VALUES);
    for (int k = 0; k < MW_EC_N; k++) {
        const json_t *cj = json_object_get(jo, mw_energy_component_names[k]);
        *bad = mw_energy_component_names[k];
        for (int m = 0; m < MW_EM_N; m++) {
            const json_t *mj = cj;
            if (version >= 2) {
                if (cj && !json_is_object(cj)) return -1;
                mj = json_object_get(cj, mw_energy_method_names[m]);
                if (!mj) continue;
            } else if (m != (k == MW_EC_CPU ? v1_cpu_method : MW_EM_MEASURED)) {
                continue;
            }
            if (mw_energy_state_total(json_object_get(mj, "dynamic"),
                                      &v[(k * MW_EK_N + MW_EK_DYNAMIC) * MW_EM_N + m]) < 0 ||
                mw_energy_state_total(json_object_get(mj, "idle"),
                                      &v[(k * MW_EK_N + MW_EK_IDLE) * MW_EM_N + m]) < 0)
                return -1;
        }
    }
    return 0;
}

int mw_energy_state_parse(mw_energy *e, const char *text, size_t len, const char *identity,
                          char *err, size_t errsize)
{
    static const mw_state_kind kind = {FORMAT, "energy", 1, VERSION, "versions 1 and 2", 256};
    json_int_t version;
    json_t *root = mw_energy_state_root(text, len, &kind, identity, &version, err, errsize);
    if (!root) return -1;
    int rc = -1;
    const json_t *cs = json_object_get(root, "containers"), *ns = json_object_get(root, "node");
    const json_t *ss = json_object_get(root, "shares"), *ks = json_object_get(root, "components");
    const json_t *fs = json_object_get(root, "floors");
    double node_co2 = 0;
    if (!json_is_array(cs) || !json_is_array(ns) ||
        (version >= 2 &&
         (!json_is_array(ss) || !json_is_array(ks) || !json_is_array(fs) ||
          mw_energy_state_total(json_object_get(root, "node_co2_grams"), &node_co2) < 0))) {
        snprintf(err, errsize,
                 "containers, shares, node, components and floors must be lists "
                 "and node_co2_grams a total");
        goto out;
    }
    /* Version 1 wrote the CPU model's totals as source "model". */
    int v1_cpu_method = MW_EM_MEASURED;
    size_t i;
    const json_t *c;
    json_array_foreach(ns, i, c)
    {
        const char *src;
        if (str(c, "source", &src, 63) == 0 && strcmp(src, "model") == 0)
            v1_cpu_method = MW_EM_ESTIMATED;
    }
    /* Validate everything first: a half-restored state would be worse than none. */
    for (int pass = 0; pass < 2; pass++) {
        json_array_foreach(cs, i, c)
        {
            const char *a, *b, *k, *bad;
            double v[MW_ENERGY_VALUES], co2;
            const json_t *jo = json_object_get(c, "joules");
            if (str(c, "namespace", &a, 253) < 0 || str(c, "pod", &b, 253) < 0 ||
                str(c, "container", &k, 511) < 0 || !json_is_object(jo) ||
                mw_energy_state_total(json_object_get(c, "co2_grams"), &co2) < 0) {
                snprintf(err, errsize, "containers[%zu]: malformed", i);
                goto out;
            }
            if (parse_joules(jo, (int)version, v1_cpu_method, v, &bad) < 0) {
                snprintf(err, errsize, "containers[%zu]: bad joules.%s", i, bad);
                goto out;
            }
            if (!pass) continue;
            if (version == 1 && !*a && !*b && !*k) {
                /* Version 1's unattributed remainder: its dynamic energy was
                 * no container's (system), its idle energy no one's
                 * (unreserved). */
                double dyn[MW_ENERGY_VALUES] = {0}, idl[MW_ENERGY_VALUES] = {0};
                for (int x = 0; x < MW_EC_N; x++)
                    for (int m = 0; m < MW_EM_N; m++) {
                        int di = (x * MW_EK_N + MW_EK_DYNAMIC) * MW_EM_N + m;
                        int ii = (x * MW_EK_N + MW_EK_IDLE) * MW_EM_N + m;
                        dyn[di] = v[di];
                        idl[ii] = v[ii];
                    }
                mw_energy_restore_share(e, MW_ES_SYSTEM, dyn, co2);
                mw_energy_restore_share(e, MW_ES_UNRESERVED, idl, 0);
                continue;
            }
            mw_energy_restore_container(e, a, b, k, v, co2);
        }
        json_array_foreach(ss, i, c)
        {
            const char *a, *bad;
            double v[MW_ENERGY_VALUES], co2;
            int sh = -1;
            if (str(c, "share", &a, 32) < 0 ||
                (sh = mw_energy_name_index(mw_energy_share_names, MW_ES_N, a)) < 0 ||
                !json_is_object(json_object_get(c, "joules")) ||
                mw_energy_state_total(json_object_get(c, "co2_grams"), &co2) < 0 ||
                parse_joules(json_object_get(c, "joules"), (int)version, 0, v, &bad) < 0) {
                snprintf(err, errsize, "shares[%zu]: malformed", i);
                goto out;
            }
            if (pass) mw_energy_restore_share(e, sh, v, co2);
        }
        json_array_foreach(ns, i, c)
        {
            const char *a, *b, *k;
            double j;
            if (str(c, "source", &a, 63) < 0 || str(c, "zone", &b, 200) < 0 ||
                str(c, "method", &k, 32) < 0 ||
                mw_energy_state_total(json_object_get(c, "joules"), &j) < 0) {
                snprintf(err, errsize, "node[%zu]: malformed", i);
                goto out;
            }
            if (pass) mw_energy_restore_node(e, a, b, k, j);
        }
        json_array_foreach(ks, i, c)
        {
            const char *a, *b, *k;
            double j;
            int ci = -1, ki = -1, mi = -1;
            if (str(c, "component", &a, 16) < 0 || str(c, "kind", &b, 16) < 0 ||
                str(c, "method", &k, 16) < 0 ||
                mw_energy_state_total(json_object_get(c, "joules"), &j) < 0 ||
                (ci = mw_energy_name_index(mw_energy_component_names, MW_EC_N, a)) < 0 ||
                (ki = mw_energy_name_index(mw_energy_kind_names, MW_EK_N, b)) < 0 ||
                (mi = mw_energy_name_index(mw_energy_method_names, MW_EM_N, k)) < 0) {
                snprintf(err, errsize, "components[%zu]: malformed", i);
                goto out;
            }
            if (pass) mw_energy_restore_component(e, ci, ki, mi, j);
        }
        json_array_foreach(fs, i, c)
        {
            const char *a, *g;
            double w;
            int ci = -1;
            if (str(c, "component", &a, 16) < 0 || str(c, "gpu", &g, 95) < 0 ||
                mw_energy_state_total(json_object_get(c, "watts"), &w) < 0 || w > 1e6 ||
                (ci = mw_energy_name_index(mw_energy_component_names, MW_EC_N, a)) < 0 ||
                (ci == MW_EC_GPU) != (*g != 0)) {
                snprintf(err, errsize, "floors[%zu]: malformed", i);
                goto out;
            }
            if (pass) mw_energy_restore_floor(e, ci, g, w);
        }
    }
    if (version == 1)
        mw_energy_restore_components_from_parts(e);
    else
        mw_energy_restore_node_co2(e, node_co2);
    rc = 0;
out:
    json_decref(root);
    return rc;
}

/* --- files -------------------------------------------------------------------- */

int mw_energy_state_read(const char *dir, const char *file, mw_state_parse_fn parse, void *obj,
                         const char *identity, char *err, size_t errsize)
{
    char path[4096], aside[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
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
        rc = parse(obj, text, n, identity, why, sizeof(why));
    free(text);
    if (rc == 0) return 0;
    int moved = rename(path, aside) == 0;
    snprintf(err, errsize, "%s: %s; %s%s%s", path, why,
             moved ? "set aside as " : "could not set it aside", moved ? file : "",
             moved ? ".rejected, counters start at 0" : "");
    return -1;
}

static int parse_energy(void *obj, const char *text, size_t len, const char *identity, char *err,
                        size_t errsize)
{
    return mw_energy_state_parse(obj, text, len, identity, err, errsize);
}

int mw_energy_state_load(mw_energy *e, const char *dir, const char *identity, char *err,
                         size_t errsize)
{
    return mw_energy_state_read(dir, MW_ENERGY_STATE_FILE, parse_energy, e, identity, err, errsize);
}

int mw_energy_state_write(const char *dir, const char *file, const char *text)
{
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) return -errno;
    char path[4096], tmp[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return -errno;
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

int mw_energy_state_save(const mw_energy *e, const char *dir, const char *identity, int64_t now_ms)
{
    char *text = mw_energy_state_dump(e, identity, now_ms);
    if (!text) return -ENOMEM;
    int rc = mw_energy_state_write(dir, MW_ENERGY_STATE_FILE, text);
    free(text);
    return rc;
}
