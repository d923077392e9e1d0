/* cgroup_path.c - classification of cgroup paths, see cgroup_path.h. */
#include "cgroup_path.h"

#include <string.h>

int mw_cg_reported(mw_cg_kind kind)
{
    return kind == MW_CG_K8S_CONTAINER || kind == MW_CG_SERVICE || kind == MW_CG_DOCKER ||
           kind == MW_CG_SLURM_JOB;
}

int mw_cg_walked(mw_cg_kind kind)
{
    return kind == MW_CG_GROUP || kind == MW_CG_KUBEPODS || kind == MW_CG_K8S_QOS ||
           kind == MW_CG_K8S_POD || kind == MW_CG_DOCKER_ROOT || kind == MW_CG_SLURM_ROOT ||
           kind == MW_CG_SLURM_UID;
}

void mw_cg_root(mw_cg_node *out)
{
    memset(out, 0, sizeof(*out));
    out->kind = MW_CG_GROUP;
}

static int is(const char *s, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n == l && memcmp(s, lit, l) == 0;
}

static int prefix(const char *s, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n >= l && memcmp(s, lit, l) == 0;
}

static int suffix(const char *s, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n >= l && memcmp(s + n - l, lit, l) == 0;
}

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* A container ID: lower-case hex of min..64 digits. */
static int take_id(const char *s, size_t n, size_t min, char *out)
{
    if (n < min || n > 64) return -1;
    for (size_t i = 0; i < n; i++)
        if (!is_hex(s[i])) return -1;
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

/* A pod UID: hex digits and SEP ('-' in cgroupfs names, '_' in systemd
 * names, where '-' separates the slice hierarchy). Stored with '-'. UIDs are
 * UUIDs (36 characters); static (mirror) pods have 32-hex hashes. */
static int take_uid(const char *s, size_t n, char sep, char *out)
{
    if (n < 8 || n > 36) return -1;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == sep)
            out[i] = '-';
        else if (is_hex(c) || (c >= 'A' && c <= 'F'))
            out[i] = c;
        else
            return -1;
    }
    out[n] = '\0';
    return 0;
}

static int take_digits(const char *s, size_t n)
{
    if (n == 0 || n > 20) return -1;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return -1;
    return 0;
}

/* "<pre><body><post>": body and its length, or -1. */
static int between(const char *s, size_t n, const char *pre, const char *post, const char **body,
                   size_t *blen)
{
    size_t a = strlen(pre), b = strlen(post);
    if (n < a + b || !prefix(s, n, pre) || !suffix(s, n, post)) return -1;
    *body = s + a;
    *blen = n - a - b;
    return 0;
}

static mw_cg_kind container_of_pod(const char *s, size_t n, mw_cg_node *out)
{
    const char *b;
    size_t bl;
    /* crio-conmon-<id>: CRI-O's container monitor, not a container. */
    if (prefix(s, n, "crio-conmon-")) return MW_CG_IGNORE;
    if (between(s, n, "cri-containerd-", ".scope", &b, &bl) == 0 &&
        take_id(b, bl, 12, out->id) == 0)
        out->runtime = MW_RT_CONTAINERD;
    else if (between(s, n, "crio-", ".scope", &b, &bl) == 0 && take_id(b, bl, 12, out->id) == 0)
        out->runtime = MW_RT_CRIO;
    else if (between(s, n, "crio-", "", &b, &bl) == 0 && take_id(b, bl, 12, out->id) == 0)
        out->runtime = MW_RT_CRIO;
    else if (between(s, n, "docker-", ".scope", &b, &bl) == 0 && take_id(b, bl, 12, out->id) == 0)
        out->runtime = MW_RT_DOCKER;
    else if (take_id(s, n, 64, out->id) == 0)
        out->runtime = MW_RT_NONE; /* cgroupfs driver: containerd and Docker both use the bare ID */
    else
        return MW_CG_IGNORE;
    return MW_CG_K8S_CONTAINER;
}

static mw_cg_kind pod_slice(const char *s, size_t n, const char *pre, mw_cg_node *out)
{
    const char *b;
    size_t bl;
    if (between(s, n, pre, ".slice", &b, &bl) == 0 && take_uid(b, bl, '_', out->pod_uid) == 0)
        return MW_CG_K8S_POD;
    if (between(s, n, "pod", "", &b, &bl) == 0 && take_uid(b, bl, '-', out->pod_uid) == 0)
        return MW_CG_K8S_POD;
    return MW_CG_IGNORE;
}

/* systemd unit types other than slices, services and the scopes we know:
 * nothing of interest lives below them. */
static int other_unit(const char *s, size_t n)
{
    static const char *const units[] = {".scope",  ".mount", ".socket", ".swap",     ".device",
                                        ".target", ".path",  ".timer",  ".automount"};
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (suffix(s, n, units[i])) return 1;
    return 0;
}

mw_cg_kind mw_cg_classify(const mw_cg_node *parent, const char *s, size_t n, mw_cg_node *out)
{
    mw_cg_node p = *parent; /* parent and out may be the same node */
    memset(out, 0, sizeof(*out));
    out->kind = MW_CG_IGNORE;
    const char *b;
    size_t bl;
    if (n == 0 || memchr(s, '/', n) || memchr(s, '\0', n)) return MW_CG_IGNORE;

    switch (p.kind) {
    case MW_CG_GROUP:
        if (is(s, n, "kubepods") || is(s, n, "kubepods.slice"))
            out->kind = MW_CG_KUBEPODS;
        else if (n > 8 && suffix(s, n, ".service"))
            out->kind = MW_CG_SERVICE;
        else if (between(s, n, "docker-", ".scope", &b, &bl) == 0 &&
                 take_id(b, bl, 12, out->id) == 0) {
            out->kind = MW_CG_DOCKER;
            out->runtime = MW_RT_DOCKER;
        } else if (suffix(s, n, "slurmstepd.scope"))
            out->kind = MW_CG_SLURM_ROOT;
        else if (suffix(s, n, ".slice"))
            out->kind = MW_CG_GROUP;
        else if (is(s, n, "docker"))
            out->kind = MW_CG_DOCKER_ROOT;
        else if (is(s, n, "slurm") || prefix(s, n, "slurm_"))
            out->kind = MW_CG_SLURM_ROOT;
        else if (!other_unit(s, n))
            out->kind = MW_CG_GROUP;
        break;
    case MW_CG_KUBEPODS:
        if (is(s, n, "kubepods-burstable.slice") || is(s, n, "burstable")) {
            out->kind = MW_CG_K8S_QOS;
            out->qos = MW_QOS_BURSTABLE;
        } else if (is(s, n, "kubepods-besteffort.slice") || is(s, n, "besteffort")) {
            out->kind = MW_CG_K8S_QOS;
            out->qos = MW_QOS_BESTEFFORT;
        } else if ((out->kind = pod_slice(s, n, "kubepods-pod", out)) == MW_CG_K8S_POD) {
            out->qos = MW_QOS_GUARANTEED;
        }
        break;
    case MW_CG_K8S_QOS:
        out->kind = pod_slice(
            s, n, p.qos == MW_QOS_BURSTABLE ? "kubepods-burstable-pod" : "kubepods-besteffort-pod",
            out);
        if (out->kind == MW_CG_K8S_POD) out->qos = p.qos;
        break;
    case MW_CG_K8S_POD:
        out->kind = container_of_pod(s, n, out);
        if (out->kind == MW_CG_K8S_CONTAINER) {
            out->qos = p.qos;
            memcpy(out->pod_uid, p.pod_uid, sizeof(out->pod_uid));
        }
        break;
    case MW_CG_DOCKER_ROOT:
        if (take_id(s, n, 64, out->id) == 0) {
            out->kind = MW_CG_DOCKER;
            out->runtime = MW_RT_DOCKER;
        }
        break;
    case MW_CG_SLURM_ROOT:
        if (prefix(s, n, "job_") && take_digits(s + 4, n - 4) == 0)
            out->kind = MW_CG_SLURM_JOB;
        else if (prefix(s, n, "uid_") && take_digits(s + 4, n - 4) == 0)
            out->kind = MW_CG_SLURM_UID;
        break;
    case MW_CG_SLURM_UID:
        if (prefix(s, n, "job_") && take_digits(s + 4, n - 4) == 0) out->kind = MW_CG_SLURM_JOB;
        break;
    default:
        break;
    }
    if (out->kind == MW_CG_IGNORE) memset(out, 0, sizeof(*out));
    return out->kind;
}

mw_cg_kind mw_cg_parse_path(const char *path, mw_cg_node *out)
{
    mw_cg_root(out);
    const char *p = path;
    for (;;) {
        while (*p == '/')
            p++;
        if (!*p) return out->kind;
        size_t n = strcspn(p, "/");
        if (!mw_cg_walked(out->kind)) { /* below a reported or ignored cgroup */
            memset(out, 0, sizeof(*out));
            return out->kind = MW_CG_IGNORE;
        }
        mw_cg_classify(out, p, n, out);
        p += n;
    }
}

int mw_cg_component_id(const char *s, size_t n, char *id)
{
    mw_cg_node pod, out;
    memset(&pod, 0, sizeof(pod));
    pod.kind = MW_CG_K8S_POD;
    if (mw_cg_classify(&pod, s, n, &out) == MW_CG_K8S_CONTAINER) {
        memcpy(id, out.id, sizeof(out.id));
        return 0;
    }
    return -1;
}

/* Rank of a v1 controller list for our purpose: cpuacct 3, cpu 2, memory 1. */
static int rank_controllers(const char *s, size_t n)
{
    int best = -1;
    while (n > 0) {
        const char *comma = memchr(s, ',', n);
        size_t l = comma ? (size_t)(comma - s) : n;
        int r = is(s, l, "cpuacct") ? 3 : is(s, l, "cpu") ? 2 : is(s, l, "memory") ? 1 : -1;
        if (r > best) best = r;
        if (!comma) break;
        n -= l + 1;
        s = comma + 1;
    }
    return best;
}

int mw_parse_proc_cgroup(const char *text, char *out, size_t size)
{
    const char *best = NULL;
    size_t best_len = 0;
    int best_rank = -1;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        const char *c1 = memchr(p, ':', len);
        if (!c1 || c1 == p || take_digits(p, (size_t)(c1 - p)) < 0) return -1;
        const char *rest = c1 + 1;
        size_t rlen = len - (size_t)(rest - p);
        const char *c2 = memchr(rest, ':', rlen);
        if (!c2) return -1;
        size_t clen = (size_t)(c2 - rest);
        const char *path = c2 + 1;
        size_t plen = rlen - clen - 1;
        if (plen == 0 || path[0] != '/') return -1;
        /* v2 line "0::/path" ranks 0; v1 lines by their controllers. */
        int r = clen == 0 ? (is(p, (size_t)(c1 - p), "0") ? 0 : -1) : rank_controllers(rest, clen);
        if (r > best_rank) {
            best_rank = r;
            best = path;
            best_len = plen;
        }
        p += len;
        if (*p == '\n') p++;
    }
    if (!best || best_len >= size) return -1;
    memcpy(out, best, best_len);
    out[best_len] = '\0';
    return 0;
}

uint64_t mw_cg_hash(const char *s)
{
    /* Eight bytes at a time: cgroup paths are 100 to 200 bytes long. */
    size_t n = strlen(s);
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ n, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

const char *mw_cg_qos_name(mw_cg_qos qos)
{
    switch (qos) {
    case MW_QOS_GUARANTEED:
        return "guaranteed";
    case MW_QOS_BURSTABLE:
        return "burstable";
    case MW_QOS_BESTEFFORT:
        return "besteffort";
    default:
        return "";
    }
}

const char *mw_cg_runtime_name(mw_cg_runtime rt)
{
    switch (rt) {
    case MW_RT_CONTAINERD:
        return "containerd";
    case MW_RT_CRIO:
        return "crio";
    case MW_RT_DOCKER:
        return "docker";
    default:
        return "";
    }
}
