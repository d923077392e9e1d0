/* rw_config.c - the remote_write and external_labels config sections and the
 * endpoint list the shipper runs with, see rw_config.h.
 *
 * The YAML is turned into a jansson tree (every scalar a string) only to walk
 * it; the endpoints are parsed from it once, when the file is loaded, and
 * kept as mw_rw_endpoint_cfg values the shipper copies at start, so a config
 * that loads is a config the shipper can start with. */
#include "rw_config.h"
#include "../core/log.h"
#include "../core/hash.h"
#include "../core/units.h"
#include "../core/util.h"

#include <ctype.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define MAX_NODES 20000
#define MAX_DEPTH 12

/* ---- YAML -> JSON ---- */

static json_t *to_json(yaml_document_t *doc, yaml_node_t *n, int depth, size_t *budget,
                       yaml_mark_t *bad, char *why, size_t whysize)
{
    *bad = n->start_mark;
    if (depth > MAX_DEPTH || ++*budget > MAX_NODES) {
        mw_fail(why, whysize, "nested too deeply or too large");
        return NULL;
    }
    if (n->type == YAML_SCALAR_NODE) {
        if (strlen((const char *)n->data.scalar.value) != n->data.scalar.length) {
            mw_fail(why, whysize, "value contains a NUL character");
            return NULL;
        }
        json_t *s = json_stringn((const char *)n->data.scalar.value, n->data.scalar.length);
        if (!s) mw_fail(why, whysize, "value is not valid UTF-8");
        return s;
    }
    if (n->type == YAML_SEQUENCE_NODE) {
        json_t *a = json_array();
        for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
             it++) {
            yaml_node_t *c = yaml_document_get_node(doc, *it);
            json_t *v = c ? to_json(doc, c, depth + 1, budget, bad, why, whysize) : NULL;
            if (!v) {
                json_decref(a);
                return NULL;
            }
            json_array_append_new(a, v);
        }
        return a;
    }
    json_t *o = json_object();
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        if (!k || !v) continue;
        *bad = k->start_mark;
        if (k->type != YAML_SCALAR_NODE ||
            strlen((const char *)k->data.scalar.value) != k->data.scalar.length) {
            mw_fail(why, whysize, "keys must be plain names");
            json_decref(o);
            return NULL;
        }
        const char *key = (const char *)k->data.scalar.value;
        if (json_object_get(o, key)) {
            mw_fail(why, whysize, "duplicate key '%.100s'", key);
            json_decref(o);
            return NULL;
        }
        json_t *jv = to_json(doc, v, depth + 1, budget, bad, why, whysize);
        if (!jv) {
            json_decref(o);
            return NULL;
        }
        json_object_set_new(o, key, jv);
    }
    return o;
}

/* ---- JSON -> endpoints ---- */

static int check_keys(json_t *o, const char *const *allowed, const char *where, char *why, size_t n)
{
    if (!json_is_object(o)) return mw_fail(why, n, "%s: expected a mapping", where);
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        size_t i;
        for (i = 0; allowed[i]; i++)
            if (strcmp(k, allowed[i]) == 0) break;
        if (!allowed[i]) {
            if (strcmp(k, "password") == 0 || strcmp(k, "bearer_token") == 0)
                return mw_fail(why, n,
                               "%s: '%s' inline is refused: put the secret in a file and use "
                               "%s_file",
                               where, k, k);
            return mw_fail(why, n, "%s: unknown key '%.100s'", where, k);
        }
    }
    return 0;
}

/* The string value of key, NULL when absent; -1 on a non-string. */
static int get_str(json_t *o, const char *key, const char **out, const char *where, char *why,
                   size_t n)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (!v) return 0;
    if (!json_is_string(v)) return mw_fail(why, n, "%s: %s: expected a single value", where, key);
    *out = json_string_value(v);
    return 0;
}

static int copy_str(json_t *o, const char *key, char *dst, size_t size, const char *where,
                    char *why, size_t n)
{
    const char *s;
    if (get_str(o, key, &s, where, why, n) < 0) return -1;
    if (!s) return 0;
    if (strlen(s) >= size)
        return mw_fail(why, n, "%s: %s: longer than %zu characters", where, key, size - 1);
    mw_strlcpy(dst, s, size);
    return 0;
}

static int get_duration(json_t *o, const char *key, int64_t *out, const char *where, char *why,
                        size_t n)
{
    const char *s;
    if (get_str(o, key, &s, where, why, n) < 0) return -1;
    if (!s) return 0;
    int64_t ms;
    if (mw_parse_duration_ms(s, &ms) < 0 || ms <= 0)
        return mw_fail(why, n, "%s: %s: invalid duration '%.60s' (examples: 30s, 500ms)", where,
                       key, s);
    *out = ms;
    return 0;
}

static int get_uint(json_t *o, const char *key, uint64_t *out, uint64_t lo, uint64_t hi,
                    const char *where, char *why, size_t n)
{
    const char *s;
    if (get_str(o, key, &s, where, why, n) < 0) return -1;
    if (!s) return 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *s == '-' || *end || v < lo || v > hi)
        return mw_fail(why, n, "%s: %s: must be a whole number from %llu to %llu, got '%.40s'",
                       where, key, (unsigned long long)lo, (unsigned long long)hi, s);
    *out = v;
    return 0;
}

static int get_bool(json_t *o, const char *key, int *out, const char *where, char *why, size_t n)
{
    const char *s;
    if (get_str(o, key, &s, where, why, n) < 0) return -1;
    if (!s) return 0;
    if (strcmp(s, "true") == 0)
        *out = 1;
    else if (strcmp(s, "false") == 0)
        *out = 0;
    else
        return mw_fail(why, n, "%s: %s: must be true or false", where, key);
    return 0;
}

/* ${NAME} and $NAME in an external label's value come from the environment
 * (as Prometheus's expand-external-labels does), so that one config shared by
 * every node of a DaemonSet can say node: ${NODE_NAME}. "$$" is a literal $.
 * An unset variable is an error rather than an empty value: series of
 * different nodes would otherwise collide silently. */
static int expand_env(const char *in, char *out, size_t outsz, const char *where, const char *key,
                      char *why, size_t n)
{
    size_t o = 0;
    for (const char *p = in; *p;) {
        char var[128];
        size_t vl = 0;
        if (p[0] == '$' && p[1] == '$') {
            p += 2;
            if (o + 1 >= outsz) goto too_long;
            out[o++] = '$';
            continue;
        }
        if (p[0] == '$' && p[1] == '{') {
            const char *e = strchr(p + 2, '}');
            if (!e) return mw_fail(why, n, "%s: %s: unterminated ${ in '%.100s'", where, key, in);
            vl = (size_t)(e - (p + 2));
            if (!vl || vl >= sizeof(var))
                return mw_fail(why, n, "%s: %s: bad variable name in '%.100s'", where, key, in);
            memcpy(var, p + 2, vl);
            p = e + 1;
        } else if (p[0] == '$' && (isalpha((unsigned char)p[1]) || p[1] == '_')) {
            const char *e = p + 1;
            while (isalnum((unsigned char)*e) || *e == '_')
                e++;
            vl = (size_t)(e - (p + 1));
            if (vl >= sizeof(var))
                return mw_fail(why, n, "%s: %s: bad variable name in '%.100s'", where, key, in);
            memcpy(var, p + 1, vl);
            p = e;
        } else {
            if (o + 1 >= outsz) goto too_long;
            out[o++] = *p++;
            continue;
        }
        var[vl] = '\0';
        const char *val = getenv(var);
        if (!val)
            return mw_fail(why, n, "%s: %s: environment variable %s is not set", where, key, var);
        size_t l = strlen(val);
        if (o + l >= outsz) goto too_long;
        memcpy(out + o, val, l);
        o += l;
    }
    out[o] = '\0';
    return 0;
too_long:
    return mw_fail(why, n, "%s: %s: expected a non-empty value under 256 characters", where, key);
}

/* Add name=value unless the set has name already (an endpoint's own label
 * wins over a global one). */
static int add_label(char (*names)[128], char (*values)[256], size_t *count, const char *name,
                     const char *value, const char *where, char *why, size_t n)
{
    for (size_t i = 0; i < *count; i++)
        if (strcmp(names[i], name) == 0) return 0;
    if (*count >= MW_RW_MAX_EXTERNAL)
        return mw_fail(why, n, "%s: more than %d labels", where, MW_RW_MAX_EXTERNAL);
    mw_strlcpy(names[*count], name, sizeof(names[0]));
    mw_strlcpy(values[(*count)++], value, sizeof(values[0]));
    return 0;
}

static int parse_labels(json_t *o, char (*names)[128], char (*values)[256], size_t *count,
                        const char *where, char *why, size_t n)
{
    if (!json_is_object(o)) return mw_fail(why, n, "%s: expected a mapping of label: value", where);
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (!mw_rl_valid_name(k) || strlen(k) >= sizeof(names[0]))
            return mw_fail(why, n, "%s: '%.100s' is not a valid label name", where, k);
        char value[sizeof(values[0])];
        if (json_is_string(v) &&
            expand_env(json_string_value(v), value, sizeof(value), where, k, why, n) < 0)
            return -1;
        if (!json_is_string(v) || !value[0])
            return mw_fail(why, n, "%s: %s: expected a non-empty value under 256 characters", where,
                           k);
        if (add_label(names, values, count, k, value, where, why, n) < 0) return -1;
    }
    return 0;
}

static int parse_rule(json_t *o, mw_relabel *rl, const char *where, char *why, size_t n)
{
    static const char *const keys[] = {"source_labels", "separator", "regex",  "target_label",
                                       "replacement",   "modulus",   "action", NULL};
    if (check_keys(o, keys, where, why, n) < 0) return -1;
    mw_relabel_spec sp = {0};
    const char *src[MW_RL_MAX_SOURCES];
    json_t *sl = json_object_get(o, "source_labels");
    if (sl) {
        if (json_is_string(sl)) {
            src[sp.nsource++] = json_string_value(sl);
        } else if (json_is_array(sl)) {
            size_t i;
            json_t *it;
            json_array_foreach(sl, i, it)
            {
                if (!json_is_string(it))
                    return mw_fail(why, n, "%s: source_labels: expected label names", where);
                if (sp.nsource >= MW_RL_MAX_SOURCES)
                    return mw_fail(why, n, "%s: more than %d source_labels", where,
                                   MW_RL_MAX_SOURCES);
                src[sp.nsource++] = json_string_value(it);
            }
        } else {
            return mw_fail(why, n, "%s: source_labels: expected a list of label names", where);
        }
    }
    sp.source_labels = src;
    if (get_str(o, "separator", &sp.separator, where, why, n) < 0 ||
        get_str(o, "regex", &sp.regex, where, why, n) < 0 ||
        get_str(o, "target_label", &sp.target_label, where, why, n) < 0 ||
        get_str(o, "replacement", &sp.replacement, where, why, n) < 0 ||
        get_str(o, "action", &sp.action, where, why, n) < 0 ||
        get_uint(o, "modulus", &sp.modulus, 1, UINT64_MAX, where, why, n) < 0)
        return -1;
    char inner[512];
    if (mw_relabel_add(rl, &sp, inner, sizeof(inner)) < 0)
        return mw_fail(why, n, "%s: %s", where, inner);
    return 0;
}

void mw_rw_display_url(const char *url, char *out, size_t n)
{
    const char *p = strstr(url, "://");
    const char *host = p ? p + 3 : url;
    const char *end = host + strcspn(host, "/?#");
    const char *at = NULL;
    for (const char *q = host; q < end; q++)
        if (*q == '@') at = q;
    size_t schemelen = (size_t)(host - url);
    const char *h = at ? at + 1 : host;
    size_t restlen = strcspn(h, "?#");
    snprintf(out, n, "%.*s%.*s", (int)schemelen, url, (int)restlen, h);
}

static void defaults(mw_rw_endpoint_cfg *ep)
{
    memset(ep, 0, sizeof(*ep));
    ep->timeout_ms = 30000;
    ep->max_shards = 2;
    ep->max_samples_per_send = 2000;
    ep->batch_send_deadline_ms = 5000;
    ep->capacity = 512ull << 20;
    ep->min_backoff_ms = 30;
    ep->max_backoff_ms = 5000;
}

static int set_url(mw_rw_endpoint_cfg *ep, const char *url, const char *where, char *why, size_t n)
{
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return mw_fail(why, n, "%s: url must start with http:// or https://", where);
    if (strlen(url) >= sizeof(ep->url))
        return mw_fail(why, n, "%s: url longer than %zu characters", where, sizeof(ep->url) - 1);
    for (const unsigned char *p = (const unsigned char *)url; *p; p++)
        if (*p <= 0x20 || *p == 0x7f)
            return mw_fail(why, n, "%s: url contains a space or control character", where);
    mw_strlcpy(ep->url, url, sizeof(ep->url));
    mw_rw_display_url(url, ep->display_url, sizeof(ep->display_url));
    uint64_t h = mw_fnv1a64_str(MW_FNV1A64_SEED, ep->display_url); /* a stable folder per URL */
    snprintf(ep->dirname, sizeof(ep->dirname), "url-%016llx", (unsigned long long)h);
    return 0;
}

static int parse_endpoint(json_t *o, mw_rw_endpoint_cfg *ep, const char *where, char *why, size_t n)
{
    static const char *const keys[] = {"url",
                                       "name",
                                       "remote_timeout",
                                       "basic_auth",
                                       "bearer_token_file",
                                       "tls_config",
                                       "external_labels",
                                       "queue_config",
                                       "write_relabel_configs",
                                       NULL};
    static const char *const auth_keys[] = {"username", "password_file", NULL};
    static const char *const tls_keys[] = {
        "ca_file", "cert_file", "key_file", "insecure_skip_verify", "server_name", NULL};
    static const char *const queue_keys[] = {
        "max_shards", "max_samples_per_send", "batch_send_deadline",
        "capacity",   "min_backoff",          "max_backoff",
        NULL};
    char sub[160];
    if (check_keys(o, keys, where, why, n) < 0) return -1;
    const char *url, *name;
    if (get_str(o, "url", &url, where, why, n) < 0 || get_str(o, "name", &name, where, why, n) < 0)
        return -1;
    if (!url) return mw_fail(why, n, "%s: url is missing", where);
    if (set_url(ep, url, where, why, n) < 0) return -1;
    if (name) {
        size_t l = strlen(name);
        if (!l || l >= sizeof(ep->name) ||
            strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN"
                         "OPQRSTUVWXYZ0123456789_.-") != l ||
            name[0] == '.')
            return mw_fail(why, n,
                           "%s: name must be 1 to 63 of A-Z a-z 0-9 _ . - (not starting "
                           "with .)",
                           where);
        mw_strlcpy(ep->name, name, sizeof(ep->name));
        mw_strlcpy(ep->dirname, name, sizeof(ep->dirname));
    }
    if (get_duration(o, "remote_timeout", &ep->timeout_ms, where, why, n) < 0 ||
        copy_str(o, "bearer_token_file", ep->bearer_token_file, sizeof(ep->bearer_token_file),
                 where, why, n) < 0)
        return -1;
    json_t *a = json_object_get(o, "basic_auth");
    if (a) {
        snprintf(sub, sizeof(sub), "%s.basic_auth", where);
        if (check_keys(a, auth_keys, sub, why, n) < 0 ||
            copy_str(a, "username", ep->basic_username, sizeof(ep->basic_username), sub, why, n) <
                0 ||
            copy_str(a, "password_file", ep->basic_password_file, sizeof(ep->basic_password_file),
                     sub, why, n) < 0)
            return -1;
        if (!ep->basic_username[0]) return mw_fail(why, n, "%s: username is missing", sub);
        if (ep->bearer_token_file[0])
            return mw_fail(why, n, "%s: basic_auth and bearer_token_file are mutually exclusive",
                           where);
    }
    json_t *t = json_object_get(o, "tls_config");
    if (t) {
        snprintf(sub, sizeof(sub), "%s.tls_config", where);
        if (check_keys(t, tls_keys, sub, why, n) < 0 ||
            copy_str(t, "ca_file", ep->ca_file, sizeof(ep->ca_file), sub, why, n) < 0 ||
            copy_str(t, "cert_file", ep->cert_file, sizeof(ep->cert_file), sub, why, n) < 0 ||
            copy_str(t, "key_file", ep->key_file, sizeof(ep->key_file), sub, why, n) < 0 ||
            get_bool(t, "insecure_skip_verify", &ep->insecure_skip_verify, sub, why, n) < 0 ||
            copy_str(t, "server_name", ep->server_name, sizeof(ep->server_name), sub, why, n) < 0)
            return -1;
        if (!ep->cert_file[0] != !ep->key_file[0])
            return mw_fail(why, n, "%s: cert_file and key_file go together", sub);
    }
    json_t *el = json_object_get(o, "external_labels");
    if (el) {
        snprintf(sub, sizeof(sub), "%s.external_labels", where);
        if (parse_labels(el, ep->ext_names, ep->ext_values, &ep->next, sub, why, n) < 0) return -1;
    }
    json_t *qc = json_object_get(o, "queue_config");
    if (qc) {
        snprintf(sub, sizeof(sub), "%s.queue_config", where);
        uint64_t shards = (uint64_t)ep->max_shards;
        const char *cap;
        if (check_keys(qc, queue_keys, sub, why, n) < 0 ||
            get_uint(qc, "max_shards", &shards, 1, 64, sub, why, n) < 0 ||
            get_uint(qc, "max_samples_per_send", &ep->max_samples_per_send, 1, 100000, sub, why,
                     n) < 0 ||
            get_duration(qc, "batch_send_deadline", &ep->batch_send_deadline_ms, sub, why, n) < 0 ||
            get_duration(qc, "min_backoff", &ep->min_backoff_ms, sub, why, n) < 0 ||
            get_duration(qc, "max_backoff", &ep->max_backoff_ms, sub, why, n) < 0 ||
            get_str(qc, "capacity", &cap, sub, why, n) < 0)
            return -1;
        ep->max_shards = (int)shards;
        if (cap && (mw_parse_size(cap, &ep->capacity) < 0 || ep->capacity < (1u << 20)))
            return mw_fail(why, n,
                           "%s: capacity: a size of at least 1MiB (bytes on disk), got "
                           "'%.40s'",
                           sub, cap);
        if (ep->min_backoff_ms > ep->max_backoff_ms)
            return mw_fail(why, n, "%s: min_backoff is above max_backoff", sub);
    }
    json_t *rules = json_object_get(o, "write_relabel_configs");
    if (rules) {
        if (!json_is_array(rules))
            return mw_fail(why, n, "%s: write_relabel_configs: expected a list", where);
        size_t i;
        json_t *r;
        json_array_foreach(rules, i, r)
        {
            snprintf(sub, sizeof(sub), "%s.write_relabel_configs[%zu]", where, i);
            if (parse_rule(r, &ep->relabel, sub, why, n) < 0) return -1;
        }
    }
    return 0;
}

void mw_rw_config_free(mw_rw_config *rc)
{
    for (size_t i = 0; i < rc->n; i++)
        mw_relabel_free(&rc->ep[i].relabel);
    free(rc->ep);
    rc->ep = NULL;
    rc->n = 0;
}

static mw_rw_endpoint_cfg *add_endpoint(mw_rw_config *rc)
{
    rc->ep = mw_xrealloc(rc->ep, (rc->n + 1) * sizeof(*rc->ep));
    defaults(&rc->ep[rc->n]);
    return &rc->ep[rc->n++];
}

/* Two endpoints may not share a queue folder (name or URL): endpoint i
 * against those before it. */
static int check_unique(const mw_rw_config *rc, size_t i, char *why, size_t n)
{
    for (size_t j = 0; j < i; j++)
        if (strcmp(rc->ep[i].dirname, rc->ep[j].dirname) == 0)
            return mw_fail(why, n, "remote_write: two endpoints named or at '%.100s'",
                           rc->ep[i].name[0] ? rc->ep[i].name : rc->ep[i].display_url);
    return 0;
}

/* The endpoints of the file's remote_write list (a JSON array of
 * mappings), checked; global labels and --remote-write come later. */
static int parse_list(json_t *list, mw_rw_config *out, char *why, size_t n)
{
    memset(out, 0, sizeof(*out));
    size_t i;
    json_t *o;
    json_array_foreach(list, i, o)
    {
        char where[64];
        snprintf(where, sizeof(where), "remote_write[%zu]", i);
        if (out->n >= MW_RW_MAX_ENDPOINTS) {
            mw_rw_config_free(out);
            return mw_fail(why, n, "%s: more than %d endpoints", where, MW_RW_MAX_ENDPOINTS);
        }
        if (parse_endpoint(o, add_endpoint(out), where, why, n) < 0) {
            mw_rw_config_free(out);
            return -1;
        }
    }
    for (i = 0; i < out->n; i++)
        if (check_unique(out, i, why, n) < 0) {
            mw_rw_config_free(out);
            return -1;
        }
    return 0;
}

int mw_rw_config_build(const mw_config *config, mw_rw_config *out, char *why, size_t n)
{
    const mw_rw_settings *cfg = mw_config_group(config, &mw_rw_options);
    memset(out, 0, sizeof(*out));
    if (cfg->url[0]) {
        mw_rw_endpoint_cfg *ep = add_endpoint(out);
        if (set_url(ep, cfg->url, "--remote-write", why, n) < 0) goto fail;
    }
    size_t i;
    for (i = 0; cfg->list && i < cfg->list->n; i++) {
        if (out->n >= MW_RW_MAX_ENDPOINTS) {
            mw_fail(why, n, "remote_write[%zu]: more than %d endpoints", i, MW_RW_MAX_ENDPOINTS);
            goto fail;
        }
        mw_rw_endpoint_cfg *ep = add_endpoint(out);
        *ep = cfg->list->ep[i];
        if (mw_relabel_copy(&ep->relabel, &cfg->list->ep[i].relabel, why, n) < 0) goto fail;
    }
    for (i = 0; i < out->n; i++) {
        mw_rw_endpoint_cfg *ep = &out->ep[i];
        for (size_t k = 0; k < cfg->external.n; k++)
            if (add_label(ep->ext_names, ep->ext_values, &ep->next, cfg->external.names[k],
                          cfg->external.values[k], "external_labels", why, n) < 0)
                goto fail;
        if (check_unique(out, i, why, n) < 0) goto fail;
    }
    return 0;
fail:
    mw_rw_config_free(out);
    return -1;
}

/* Every list the config files made, kept for the life of the process
 * (copies of a configuration share them). */
typedef struct kept_list {
    struct kept_list *next;
    mw_rw_config rc;
} kept_list;
static kept_list *kept;
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;

static const mw_rw_config *keep_list(const mw_rw_config *rc)
{
    kept_list *k = mw_xcalloc(1, sizeof(*k));
    k->rc = *rc;
    pthread_mutex_lock(&kept_mu);
    k->next = kept;
    kept = k;
    pthread_mutex_unlock(&kept_mu);
    return &k->rc;
}

void mw_rw_forget_lists(void)
{
    pthread_mutex_lock(&kept_mu);
    kept_list *k = kept;
    kept = NULL;
    pthread_mutex_unlock(&kept_mu);
    while (k) {
        kept_list *next = k->next;
        mw_rw_config_free(&k->rc);
        free(k);
        k = next;
    }
}

/* ---- config-file sections ---- */

static int section_fail(char *err, size_t errsize, const char *file, const yaml_mark_t *m,
                        const char *why)
{
    snprintf(err, errsize, "%s:%zu:%zu: %s", file, m->line + 1, m->column + 1, why);
    return -1;
}

/* The section's node as a tree to walk, or NULL with err set: not of the
 * type wanted, or not walkable. *bad: the last node walked. */
static json_t *section_tree(const char *section, const char *expected, yaml_node_type_t want,
                            const char *file, yaml_document_t *doc, yaml_node_t *node,
                            yaml_mark_t *bad, char *err, size_t errsize)
{
    char why[512], msg[600];
    size_t budget = 0;
    *bad = node->start_mark;
    if (node->type != want) {
        snprintf(msg, sizeof(msg), "%s: expected %s", section, expected);
        section_fail(err, errsize, file, bad, msg);
        return NULL;
    }
    json_t *tree = to_json(doc, node, 0, &budget, bad, why, sizeof(why));
    if (!tree) {
        snprintf(msg, sizeof(msg), "%s: %s", section, why);
        section_fail(err, errsize, file, bad, msg);
    }
    return tree;
}

static int remote_write_section(void *settings, const char *file, void *docp, void *nodep,
                                char *err, size_t errsize)
{
    mw_rw_settings *c = settings;
    yaml_document_t *doc = docp;
    yaml_node_t *node = nodep;
    char why[512];
    yaml_mark_t bad;
    json_t *list = section_tree("remote_write", "a URL or a list of endpoints", YAML_SEQUENCE_NODE,
                                file, doc, node, &bad, err, errsize);
    if (!list) return -1;
    /* Parsed once here: the shipper starts from these endpoints. */
    mw_rw_config parsed;
    int rc = parse_list(list, &parsed, why, sizeof(why));
    json_decref(list);
    if (rc < 0) {
        /* Point at the endpoint the message names. */
        size_t idx = 0;
        if (sscanf(why, "remote_write[%zu]", &idx) == 1 &&
            idx < (size_t)(node->data.sequence.items.top - node->data.sequence.items.start)) {
            yaml_node_t *it = yaml_document_get_node(doc, node->data.sequence.items.start[idx]);
            if (it) bad = it->start_mark;
        }
        return section_fail(err, errsize, file, &bad, why);
    }
    c->list = keep_list(&parsed);
    return 0;
}

static int external_labels_section(void *settings, const char *file, void *docp, void *nodep,
                                   char *err, size_t errsize)
{
    mw_rw_settings *c = settings;
    yaml_node_t *node = nodep;
    char why[512];
    yaml_mark_t bad;
    json_t *o = section_tree("external_labels", "a mapping of label: value", YAML_MAPPING_NODE,
                             file, docp, node, &bad, err, errsize);
    if (!o) return -1;
    mw_rw_labels labels = {.n = 0};
    int rc = parse_labels(o, labels.names, labels.values, &labels.n, "external_labels", why,
                          sizeof(why));
    json_decref(o);
    if (rc < 0) return section_fail(err, errsize, file, &node->start_mark, why);
    c->external = labels;
    return 0;
}

/* clang-format off */
static const mw_option rw_rows[] = {
    /* A flag and a scalar key for one URL; a list in the file is parsed by
     * the section function. */
    {.name = "remote-write", .type = MW_OPT_STRING, .offset = offsetof(mw_rw_settings, url), .size = sizeof(((mw_rw_settings *)0)->url), .def = "", .help = "Prometheus remote-write URL to ship every sample to; in the config file also a list of endpoints with auth, TLS, queue and write_relabel_configs (docs/remote-write.md)", .section = remote_write_section},
    MW_OPT_SECTION_OF("external-labels", "none", external_labels_section, "Labels added to every series shipped by remote write: external_labels: {node: n1}"),
};
/* clang-format on */
const mw_option_group mw_rw_options =
    MW_OPTION_GROUP("remote write", "src/ship/rw_config.c", mw_rw_settings, rw_rows, NULL);
