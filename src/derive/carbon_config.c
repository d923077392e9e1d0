/* carbon_config.c - the `carbon:` section of the config file: the carbon
 * intensity API (docs/energy.md has the three documented providers).
 *
 *   carbon:
 *     url: https://api.carbonintensity.org.uk/intensity
 *     json_path: data[0].intensity.actual
 *     auth_header: auth-token        # header name; its value is read from auth_file
 *     auth_file: /etc/mlwatch/emaps-token
 *     refresh: 5m
 *     timeout: 10s
 *     max_body: 1MiB
 *
 * Errors name the file, line and column. --carbon-intensity, when given,
 * wins over url. */
#include "carbon.h"
#include "../core/config.h"
#include "../core/units.h"
#include "../core/util.h"

#include <string.h>
#include <yaml.h>

static int set_str(char *dst, size_t size, const char *v)
{
    if (strlen(v) >= size) return -1;
    mw_strlcpy(dst, v, size);
    return 0;
}

void mw_carbon_settings_defaults(mw_carbon_settings *c)
{
    c->refresh_ms = 5 * 60 * 1000;
    c->timeout_ms = 10 * 1000;
    c->max_body = 1 << 20;
    mw_strlcpy(c->json_path, "carbonIntensity", sizeof(c->json_path));
    mw_strlcpy(c->auth_header, "auth-token", sizeof(c->auth_header));
}

int mw_carbon_config_section(mw_carbon_settings *c, const char *file, void *docp, void *nodep,
                             char *err, size_t errsize)
{
    yaml_document_t *doc = docp;
    yaml_node_t *node = nodep;
    if (node->type != YAML_MAPPING_NODE)
        return mw_section_fail(
            err, errsize, file, "carbon", node,
            "expected a mapping (url, json_path, auth_header, auth_file, refresh, "
            "timeout, max_body)");
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        yaml_node_t *v = yaml_document_get_node(doc, p->value);
        if (!k || !v) continue;
        if (k->type != YAML_SCALAR_NODE)
            return mw_section_fail(err, errsize, file, "carbon", k, "keys must be names");
        const char *key = (const char *)k->data.scalar.value;
        if (v->type != YAML_SCALAR_NODE ||
            strlen((const char *)v->data.scalar.value) != v->data.scalar.length)
            return mw_section_fail(err, errsize, file, "carbon", v, "%s: expected a single value",
                                   key);
        const char *val = (const char *)v->data.scalar.value;
        int bad = 0;
        if (strcmp(key, "url") == 0) {
            if (strncmp(val, "http://", 7) != 0 && strncmp(val, "https://", 8) != 0)
                return mw_section_fail(err, errsize, file, "carbon", v,
                                       "url: must start with http:// or https://");
            bad = set_str(c->url, sizeof(c->url), val);
        } else if (strcmp(key, "json_path") == 0) {
            bad = !*val || set_str(c->json_path, sizeof(c->json_path), val);
        } else if (strcmp(key, "auth_header") == 0) {
            bad = !*val || strpbrk(val, ": \t\r\n") != NULL ||
                  set_str(c->auth_header, sizeof(c->auth_header), val);
        } else if (strcmp(key, "auth_file") == 0) {
            bad = set_str(c->auth_file, sizeof(c->auth_file), val);
        } else if (strcmp(key, "refresh") == 0 || strcmp(key, "timeout") == 0) {
            int64_t ms;
            if (mw_parse_duration_ms(val, &ms) < 0 || ms <= 0)
                return mw_section_fail(err, errsize, file, "carbon", v,
                                       "%s: invalid duration '%s' (examples: 5m, 10s)", key, val);
            *(key[0] == 'r' ? &c->refresh_ms : &c->timeout_ms) = ms;
        } else if (strcmp(key, "max_body") == 0) {
            uint64_t b;
            if (mw_parse_size(val, &b) < 0 || b < 64 || b > (64u << 20))
                return mw_section_fail(err, errsize, file, "carbon", v,
                                       "max_body: a size from 64 bytes to 64MiB");
            c->max_body = b;
        } else {
            return mw_section_fail(err, errsize, file, "carbon", k, "unknown key '%s'", key);
        }
        if (bad) return mw_section_fail(err, errsize, file, "carbon", v, "%s: invalid value", key);
    }
    return 0;
}
