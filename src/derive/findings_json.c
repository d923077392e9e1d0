/* findings_json.c - findings as JSON (the /api/v1/findings answer, and what
 * `mlwatch doctor` reads back from an agent) and as a report in plain words.
 *
 * The JSON is built and parsed with jansson. Parsing an agent's answer is
 * strict about types and bounded (DR_MAX_FINDINGS findings, DR_MAX_EVIDENCE
 * numbers each, names cut to their fields); it is fuzzed (fuzz_findings_json). */
#include "findings.h"
#include "../core/util.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

char *dr_list_to_json(const dr_list *l, int64_t now_ms, const char *source, double window_s)
{
    json_t *root = json_object();
    json_object_set_new(root, "generated_at_ms", json_integer(now_ms));
    json_object_set_new(root, "source", json_string(source));
    json_object_set_new(root, "window_seconds", json_real(window_s));
    if (l->root[0]) json_object_set_new(root, "root", json_string(l->root));
    json_t *arr = json_array();
    for (size_t i = 0; i < l->n; i++) {
        const dr_finding *f = &l->items[i];
        json_t *o = json_object();
        json_object_set_new(o, "kind", json_string(dr_kind_name(f->kind)));
        json_object_set_new(o, "severity", json_string(dr_severity_name(f->severity)));
        json_object_set_new(o, "namespace", json_string(f->namespace_));
        json_object_set_new(o, "pod", json_string(f->pod));
        json_object_set_new(o, "container", json_string(f->container));
        json_object_set_new(o, "gpu", json_string(f->gpu));
        json_object_set_new(o, "magnitude", json_real(f->magnitude));
        json_object_set_new(o, "summary", json_string(f->summary));
        json_t *ev = json_object();
        for (size_t k = 0; k < f->nev; k++)
            json_object_set_new(ev, f->ev[k].name, json_real(f->ev[k].value));
        json_object_set_new(o, "evidence", ev);
        json_object_set_new(o, "advice", json_string(dr_kind_advice(f->kind)));
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "findings", arr);
    if (l->dropped) json_object_set_new(root, "dropped", json_integer((json_int_t)l->dropped));
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
    json_decref(root);
    return s; /* free() */
}

static int str_field(json_t *o, const char *key, char *dst, size_t n, int required, size_t index,
                     char *err, size_t errsize)
{
    json_t *v = json_object_get(o, key);
    if (!v) {
        if (!required) return 0;
        snprintf(err, errsize, "findings[%zu]: missing \"%s\"", index, key);
        return -1;
    }
    if (!json_is_string(v)) {
        snprintf(err, errsize, "findings[%zu].%s: not a string", index, key);
        return -1;
    }
    mw_strlcpy(dst, json_string_value(v), n);
    return 0;
}

int dr_list_from_json(const char *text, size_t len, dr_list *out, char *err, size_t errsize)
{
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(err, errsize, "not JSON: line %d column %d: %s", je.line, je.column, je.text);
        return -1;
    }
    int rc = -1;
    json_t *arr = json_is_object(root) ? json_object_get(root, "findings") : NULL;
    if (!json_is_array(arr)) {
        snprintf(err, errsize, "no \"findings\" array");
        goto done;
    }
    json_t *host_root = json_object_get(root, "root");
    if (json_is_string(host_root))
        out->root = dr_list_str(out, json_string_value(host_root), DR_ROOT_MAX);
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o)
    {
        if (!json_is_object(o)) {
            snprintf(err, errsize, "findings[%zu]: not an object", i);
            goto done;
        }
        char kind[64], sev[32];
        if (str_field(o, "kind", kind, sizeof(kind), 1, i, err, errsize) < 0 ||
            str_field(o, "severity", sev, sizeof(sev), 1, i, err, errsize) < 0)
            goto done;
        int k = dr_kind_parse(kind), s = dr_severity_parse(sev);
        if (k < 0 || s < 0) {
            snprintf(err, errsize, "findings[%zu]: unknown %s '%.40s'", i,
                     k < 0 ? "kind" : "severity", k < 0 ? kind : sev);
            goto done;
        }
        char ns[DR_NAMESPACE_MAX] = "", pod[DR_POD_MAX] = "", ctr[DR_CONTAINER_MAX] = "";
        char gpu[16] = "", sum[DR_SUMMARY_MAX] = "";
        if (str_field(o, "namespace", ns, sizeof(ns), 0, i, err, errsize) < 0 ||
            str_field(o, "pod", pod, sizeof(pod), 0, i, err, errsize) < 0 ||
            str_field(o, "container", ctr, sizeof(ctr), 0, i, err, errsize) < 0 ||
            str_field(o, "gpu", gpu, sizeof(gpu), 0, i, err, errsize) < 0 ||
            str_field(o, "summary", sum, sizeof(sum), 0, i, err, errsize) < 0)
            goto done;
        json_t *m = json_object_get(o, "magnitude");
        if (m && !json_is_number(m)) {
            snprintf(err, errsize, "findings[%zu].magnitude: not a number", i);
            goto done;
        }
        json_t *ev = json_object_get(o, "evidence");
        if (ev && !json_is_object(ev)) {
            snprintf(err, errsize, "findings[%zu].evidence: not an object", i);
            goto done;
        }
        const char *name;
        json_t *v;
        json_object_foreach(ev, name, v)
        {
            if (!json_is_number(v)) {
                snprintf(err, errsize, "findings[%zu].evidence.%.40s: not a number", i, name);
                goto done;
            }
        }
        dr_finding *f = dr_list_add(out);
        if (!f) continue;
        f->kind = (dr_kind)k;
        f->severity = (dr_severity)s;
        f->namespace_ = dr_list_str(out, ns, sizeof(ns));
        f->pod = dr_list_str(out, pod, sizeof(pod));
        f->container = dr_list_str(out, ctr, sizeof(ctr));
        mw_strlcpy(f->gpu, gpu, sizeof(f->gpu));
        f->summary = dr_list_str(out, sum, sizeof(sum));
        f->magnitude = m ? json_number_value(m) : 0;
        json_object_foreach(ev, name, v)
        {
            if (f->nev == DR_MAX_EVIDENCE) break;
            f->ev[f->nev].name = dr_list_str(out, name, DR_EVIDENCE_NAME_MAX);
            f->ev[f->nev++].value = json_number_value(v);
        }
    }
    rc = 0;
done:
    json_decref(root);
    return rc;
}

static void upper(const char *s, char *out, size_t n)
{
    size_t i = 0;
    for (; s[i] && i + 1 < n; i++)
        out[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 32 : s[i]);
    out[i] = '\0';
}

void dr_list_to_text(const dr_list *l, const char *source, double window_s, mw_buf *out)
{
    if (!l->n) {
        mw_buf_printf(out, "mlwatch doctor: nothing found over the last %.0f s (%s).\n", window_s,
                      source);
        return;
    }
    mw_buf_printf(out, "mlwatch doctor: %zu finding%s over the last %.0f s (%s), worst first.\n",
                  l->n, l->n == 1 ? "" : "s", window_s, source);
    for (size_t i = 0; i < l->n; i++) {
        const dr_finding *f = &l->items[i];
        char sev[16];
        upper(dr_severity_name(f->severity), sev, sizeof(sev));
        mw_buf_printf(out, "\n%zu. %s %s: ", i + 1, sev, dr_kind_name(f->kind));
        if (f->namespace_[0] || f->pod[0])
            mw_buf_printf(out, "pod %s/%s, container %s", f->namespace_, f->pod, f->container);
        else if (f->container[0])
            mw_buf_printf(out, "%s", f->container);
        else
            mw_buf_printf(out, "%s", f->gpu[0] ? "the GPU" : "the whole node");
        if (f->gpu[0]) mw_buf_printf(out, ", GPU %s", f->gpu);
        mw_buf_printf(out, "\n   %s\n   evidence:", f->summary);
        for (size_t k = 0; k < f->nev; k++)
            mw_buf_printf(out, " %s=%.10g", f->ev[k].name, f->ev[k].value);
        mw_buf_printf(out, "\n   what to do: %s\n", dr_kind_advice(f->kind));
    }
    if (l->dropped) mw_buf_printf(out, "\n(%zu more findings left out)\n", l->dropped);
}
