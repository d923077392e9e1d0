/* gpu_health.c - the GPU health engine (gpu_health.h).
 *
 * Records (kernel log XID/SXID lines, NVML XID events) are deduplicated:
 * one event per GPU, code and window (the catalog's, from the event's first
 * record), with a count, in a ring of MW_GPU_EVENTS_MAX. A small table per
 * GPU (and one for the node: NVSwitches, PCI devices the collector does not
 * read) keeps each code's open window, so a flood of records costs a table
 * look-up each and no memory. Health per GPU is the worst of:
 *   - its codes, by the catalog: one event gives the entry's state for its
 *     hold (0: until the GPU is seen reset, its energy counter restarting
 *     or it coming back from lost); escalate.count events of a code within
 *     the window give the escalated state while that window lasts, so an
 *     application-class XID (13, 31, 43, 45) never marks a GPU on its own;
 *   - its counters: lost, row remap failure or pending, volatile
 *     uncorrected ECC, retired pages over the threshold, PCIe link narrower
 *     than its maximum, PCIe replay and NVLink error rates, thermal and
 *     power-brake clock events held.
 * The node takes its worst GPU's state (or its own, from SXIDs and unknown
 * devices). */
#include "gpu_health.h"
#include "gpu.h"
#include "../../core/util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KEYS_PER_DEV 32 /* distinct codes tracked per GPU; the stalest goes first */
#define NODE_SLOT MW_GPU_MAX_DEVICES

typedef struct code_key {
    uint32_t code;
    uint8_t sxid, used;
    uint64_t event_id;         /* its open window's event in the ring */
    uint64_t count;            /* records in the open window */
    int64_t first_us, last_us; /* of the open window */
    const mw_xid_entry *entry;
} code_key;

typedef struct dev_track {
    char gpu[12], uuid[96], pci[16];
    code_key keys[KEYS_PER_DEV];
    int64_t reset_us; /* the last time the GPU was seen reset; events before it are gone */
    int have_prev;
    int64_t prev_us;
    uint64_t prev_replay, prev_nvlink, prev_energy;
    double pcie_rate, nvlink_rate;      /* per minute, over the last slow interval */
    int64_t thermal_since, brake_since; /* held since; 0: not active */
    int was_lost;
} dev_track;

struct mw_gpu_health_engine {
    mw_xid_catalog cat;
    pthread_mutex_t mu; /* ring, node, stats: read from HTTP threads */
    dev_track *t;       /* MW_GPU_MAX_DEVICES + 1 (the node's) */
    unsigned n;
    mw_gpu_event *ring;
    uint64_t next_id; /* ids start at 1 */
    mw_gpu_event_stats st;
    mw_gpu_node_health node;
};

mw_gpu_health_engine *mw_gpu_health_new(const mw_xid_catalog *cat)
{
    mw_gpu_health_engine *e = mw_xcalloc(1, sizeof(*e));
    e->cat = *cat;
    pthread_mutex_init(&e->mu, NULL);
    e->t = mw_xcalloc(MW_GPU_MAX_DEVICES + 1, sizeof(dev_track));
    e->ring = mw_xcalloc(MW_GPU_EVENTS_MAX, sizeof(mw_gpu_event));
    e->next_id = 1;
    e->node.state = MW_HEALTH_UNKNOWN;
    mw_strlcpy(e->node.reason, "no_reading", sizeof(e->node.reason));
    return e;
}

void mw_gpu_health_free(mw_gpu_health_engine *e)
{
    if (!e) return;
    pthread_mutex_destroy(&e->mu);
    free(e->t);
    free(e->ring);
    free(e);
}

void mw_gpu_health_devices(mw_gpu_health_engine *e, const mw_gpu_dev *devs, unsigned n)
{
    if (n > MW_GPU_MAX_DEVICES) n = MW_GPU_MAX_DEVICES;
    for (unsigned i = 0; i < n; i++) {
        dev_track *t = &e->t[i];
        mw_strlcpy(t->gpu, devs[i].index, sizeof(t->gpu));
        mw_strlcpy(t->uuid, devs[i].uuid, sizeof(t->uuid));
        /* "0000:3b:00.0" -> "0000:3b:00", the kernel log's form */
        mw_strlcpy(t->pci, devs[i].pci_bus_id, sizeof(t->pci));
        char *dot = strrchr(t->pci, '.');
        if (dot) *dot = '\0';
    }
    e->n = n;
}

static int dev_of_pci(const mw_gpu_health_engine *e, const char *pci)
{
    for (unsigned i = 0; i < e->n; i++)
        if (e->t[i].pci[0] && strcmp(e->t[i].pci, pci) == 0) return (int)i;
    return -1;
}

/* Record one XID/SXID of slot (a GPU, or NODE_SLOT with dev -1). */
static void record(mw_gpu_health_engine *e, int dev, const mw_xid_line *x, int sxid, int source,
                   int before_start, int64_t us, int64_t ms)
{
    dev_track *t = &e->t[dev >= 0 ? dev : NODE_SLOT];
    const mw_xid_entry *en = mw_xid_catalog_find(&e->cat, x->code, sxid, x->text);
    code_key *k = NULL, *stalest = &t->keys[0];
    for (int i = 0; i < KEYS_PER_DEV; i++) {
        code_key *c = &t->keys[i];
        if (c->used && c->code == x->code && c->sxid == sxid) {
            k = c;
            break;
        }
        if (!c->used || (stalest->used && c->last_us < stalest->last_us)) stalest = c;
    }
    pthread_mutex_lock(&e->mu);
    e->st.records++;
    if (k && us - k->first_us < e->cat.window_us && us >= k->first_us) {
        k->count++;
        if (us > k->last_us) k->last_us = us;
        mw_gpu_event *ev = &e->ring[k->event_id % MW_GPU_EVENTS_MAX];
        if (ev->id == k->event_id) {
            ev->count++;
            if (us > ev->last_us) ev->last_us = us;
            if (ms > ev->last_ms) ev->last_ms = ms;
        }
        pthread_mutex_unlock(&e->mu);
        return;
    }
    if (!k) k = stalest;
    *k = (code_key){.code = x->code,
                    .sxid = (uint8_t)sxid,
                    .used = 1,
                    .count = 1,
                    .first_us = us,
                    .last_us = us,
                    .entry = en};
    k->event_id = e->next_id++;
    mw_gpu_event *ev = &e->ring[k->event_id % MW_GPU_EVENTS_MAX];
    if (ev->id) e->st.evicted++;
    memset(ev, 0, sizeof(*ev));
    ev->id = k->event_id;
    ev->dev = dev;
    if (dev >= 0) {
        mw_strlcpy(ev->gpu, t->gpu, sizeof(ev->gpu));
        mw_strlcpy(ev->uuid, t->uuid, sizeof(ev->uuid));
        mw_strlcpy(ev->pci, t->pci, sizeof(ev->pci));
    } else {
        mw_strlcpy(ev->pci, x->pci, sizeof(ev->pci));
        mw_strlcpy(ev->uuid, x->uuid, sizeof(ev->uuid));
    }
    mw_strlcpy(ev->device, x->device, sizeof(ev->device));
    ev->code = x->code;
    ev->sxid = (uint8_t)sxid;
    ev->cls = en->cls;
    ev->state = en->state;
    ev->action = en->action;
    ev->source = (uint8_t)source;
    ev->before_start = (uint8_t)before_start;
    ev->count = 1;
    ev->first_us = ev->last_us = us;
    ev->first_ms = ev->last_ms = ms;
    ev->pid = x->pid;
    mw_strlcpy(ev->process, x->process, sizeof(ev->process));
    mw_strlcpy(ev->message, x->text, sizeof(ev->message));
    e->st.events++;
    pthread_mutex_unlock(&e->mu);
}

void mw_gpu_health_kmsg(mw_gpu_health_engine *e, const mw_kmsg_record *rec, int before_start,
                        int64_t now_us, int64_t now_ms)
{
    mw_xid_line x;
    int kind = mw_xid_parse_line(rec->msg, rec->msg_len, &x);
    if (kind == MW_XID_LINE_NONE) return;
    if (kind == MW_XID_LINE_GPU_AT) return; /* identity: the collector knows its GPUs' */
    int64_t us = (int64_t)rec->usec;
    /* The record's wall time: its age on the monotonic clock. */
    int64_t ms = us <= now_us ? now_ms - (now_us - us) / 1000 : now_ms;
    int dev = kind == MW_XID_LINE_XID ? dev_of_pci(e, x.pci) : -1;
    record(e, dev, &x, kind == MW_XID_LINE_SXID, MW_GPU_EVENT_KMSG, before_start, us, ms);
}

void mw_gpu_health_nvml_xid(mw_gpu_health_engine *e, unsigned dev, uint32_t code, int64_t now_us,
                            int64_t now_ms)
{
    if (dev >= e->n) return;
    mw_xid_line x;
    memset(&x, 0, sizeof(x));
    x.kind = MW_XID_LINE_XID;
    x.code = code;
    x.pid = -1;
    mw_strlcpy(x.pci, e->t[dev].pci, sizeof(x.pci));
    record(e, (int)dev, &x, 0, MW_GPU_EVENT_NVML, 0, now_us, now_ms);
}

void mw_gpu_health_kmsg_stats(mw_gpu_health_engine *e, int on, uint64_t read, uint64_t lost)
{
    pthread_mutex_lock(&e->mu);
    e->st.kmsg_on = on;
    e->st.kmsg_read = read;
    e->st.kmsg_lost = lost;
    pthread_mutex_unlock(&e->mu);
}

/* Keep the worse of the current verdict and (state, reason, action). */
static void worse(mw_gpu_health *h, int state, const char *reason, int action)
{
    if (state < h->state || (state == h->state && action <= h->action)) return;
    h->state = (uint8_t)state;
    h->action = (uint8_t)action;
    mw_strlcpy(h->reason, reason, sizeof(h->reason));
}

static void from_codes(const mw_gpu_health_engine *e, const dev_track *t, int64_t now_us,
                       mw_gpu_health *h)
{
    for (int i = 0; i < KEYS_PER_DEV; i++) {
        const code_key *k = &t->keys[i];
        if (!k->used || k->last_us <= t->reset_us) continue;
        const mw_xid_entry *en = k->entry;
        char reason[MW_HEALTH_REASON_MAX];
        snprintf(reason, sizeof(reason), "%s_%u", k->sxid ? "sxid" : "xid", k->code);
        if (en == &e->cat.def) snprintf(reason, sizeof(reason), "%s", "xid_other");
        if (en->state != MW_HEALTH_HEALTHY &&
            (en->hold_us == 0 || now_us - k->last_us < en->hold_us))
            worse(h, en->state, reason, en->action);
        if (en->escalate_count && k->count >= en->escalate_count &&
            now_us - k->last_us < e->cat.window_us)
            worse(h, en->escalate_state, reason, en->escalate_action);
        if (en->cls != MW_XID_CLASS_APPLICATION && en->cls != MW_XID_CLASS_UNKNOWN &&
            now_us - k->last_us < e->cat.th.recent_hardware_window_us)
            h->recent_hardware_events += (uint32_t)(k->count > UINT32_MAX ? UINT32_MAX : k->count);
    }
}

#define HAVE(d, f) ((d)->have & MW_GF_BIT(f))
#define CLOCK_THERMAL (0x20u | 0x40u) /* sw and hw thermal slowdown */
#define CLOCK_BRAKE 0x80u             /* hw power brake slowdown */

static uint64_t nvlink_errors(const mw_gpu_dev *d)
{
    uint64_t n = 0;
    for (uint32_t l = 0; l < d->nlinks; l++)
        for (int c = 0; c < 4; c++) /* replay, recovery, crc_flit, crc_data */
            if (c != 1 && (d->links[l].have >> c & 1)) n += d->links[l].errors[c];
    return n;
}

static void from_counters(const mw_gpu_health_engine *e, dev_track *t, const mw_gpu_dev *d,
                          int slow, int64_t now_us, mw_gpu_health *h)
{
    const mw_health_thresholds *th = &e->cat.th;
    /* A GPU reset or driver reload restarts the energy counter; a lost GPU
     * that answers again was reset: what its events said is over. */
    if (HAVE(d, MW_GF_ENERGY)) {
        if (t->prev_energy && d->energy_mj < t->prev_energy) t->reset_us = now_us;
        t->prev_energy = d->energy_mj;
    }
    if (t->was_lost && !d->lost) t->reset_us = now_us;
    t->was_lost = d->lost;
    if (d->lost) {
        worse(h, MW_HEALTH_UNHEALTHY, "gpu_lost", MW_ACTION_REBOOT_NODE);
        return;
    }
    if (HAVE(d, MW_GF_REMAPPED)) {
        if (d->remapped[3])
            worse(h, MW_HEALTH_UNHEALTHY, "row_remap_failure", MW_ACTION_DRAIN_CONTACT_SUPPORT);
        if (d->remapped[2]) worse(h, MW_HEALTH_DEGRADED, "row_remap_pending", MW_ACTION_RESET_GPU);
    }
    if (HAVE(d, MW_GF_ECC) && d->ecc_uncorrected)
        worse(h, MW_HEALTH_DEGRADED, "ecc_uncorrected", MW_ACTION_RESET_GPU);
    if (HAVE(d, MW_GF_RETIRED) && th->retired_pages > 0 &&
        (double)d->retired[0] + d->retired[1] >= th->retired_pages)
        worse(h, MW_HEALTH_DEGRADED, "retired_pages", MW_ACTION_DRAIN_CONTACT_SUPPORT);
    if (HAVE(d, MW_GF_PCIE_WIDTH) && HAVE(d, MW_GF_PCIE_WIDTH_MAX) && d->pcie_width_max &&
        d->pcie_width < d->pcie_width_max)
        worse(h, MW_HEALTH_DEGRADED, "pcie_link_degraded", MW_ACTION_DRAIN_CONTACT_SUPPORT);
    if (slow) {
        uint64_t nv = nvlink_errors(d);
        if (t->have_prev && now_us > t->prev_us) {
            double minutes = (double)(now_us - t->prev_us) / 60e6;
            t->pcie_rate = HAVE(d, MW_GF_PCIE_REPLAY) && d->pcie_replay >= t->prev_replay
                               ? (double)(d->pcie_replay - t->prev_replay) / minutes
                               : 0;
            t->nvlink_rate = nv >= t->prev_nvlink ? (double)(nv - t->prev_nvlink) / minutes : 0;
        }
        t->have_prev = 1;
        t->prev_us = now_us;
        t->prev_replay = d->pcie_replay;
        t->prev_nvlink = nv;
    }
    if (th->pcie_replays_per_minute > 0 && t->pcie_rate > th->pcie_replays_per_minute)
        worse(h, MW_HEALTH_DEGRADED, "pcie_replay_rate", MW_ACTION_DRAIN_CONTACT_SUPPORT);
    if (th->nvlink_errors_per_minute > 0 && t->nvlink_rate > th->nvlink_errors_per_minute)
        worse(h, MW_HEALTH_DEGRADED, "nvlink_error_rate", MW_ACTION_RESET_GPU);
    if (HAVE(d, MW_GF_CLOCK_EVENTS)) {
        if (!(d->clock_events & CLOCK_THERMAL))
            t->thermal_since = 0;
        else if (!t->thermal_since)
            t->thermal_since = now_us;
        if (!(d->clock_events & CLOCK_BRAKE))
            t->brake_since = 0;
        else if (!t->brake_since)
            t->brake_since = now_us;
        if (t->thermal_since && now_us - t->thermal_since >= th->clock_event_hold_us)
            worse(h, MW_HEALTH_DEGRADED, "thermal_slowdown", MW_ACTION_NONE);
        if (t->brake_since && now_us - t->brake_since >= th->clock_event_hold_us)
            worse(h, MW_HEALTH_DEGRADED, "power_brake", MW_ACTION_NONE);
    }
}

void mw_gpu_health_evaluate(mw_gpu_health_engine *e, const mw_gpu_dev *devs, unsigned n, int slow,
                            int64_t now_us, int64_t now_ms, mw_gpu_health *out)
{
    if (n > e->n) n = e->n;
    mw_gpu_node_health node = {0};
    node.ngpus = n;
    mw_strlcpy(node.reason, "none", sizeof(node.reason));
    for (unsigned i = 0; i < n; i++) {
        mw_gpu_health *h = &out[i];
        memset(h, 0, sizeof(*h));
        mw_strlcpy(h->reason, "none", sizeof(h->reason));
        from_counters(e, &e->t[i], &devs[i], slow, now_us, h);
        from_codes(e, &e->t[i], now_us, h);
        node.count[h->state]++;
        if (h->state > node.state || (h->state == node.state && h->action > node.action)) {
            node.state = h->state;
            node.action = h->action;
            mw_strlcpy(node.reason, h->reason, sizeof(node.reason));
            mw_strlcpy(node.gpu, devs[i].index, sizeof(node.gpu));
        }
    }
    mw_gpu_health own = {0};
    mw_strlcpy(own.reason, "none", sizeof(own.reason));
    from_codes(e, &e->t[NODE_SLOT], now_us, &own);
    if (own.state > node.state || (own.state == node.state && own.action > node.action)) {
        node.state = own.state;
        node.action = own.action;
        mw_strlcpy(node.reason, own.reason, sizeof(node.reason));
        node.gpu[0] = '\0';
    }
    node.updated_ms = now_ms;
    pthread_mutex_lock(&e->mu);
    e->node = node;
    pthread_mutex_unlock(&e->mu);
}

void mw_gpu_health_node(mw_gpu_health_engine *e, mw_gpu_node_health *out)
{
    pthread_mutex_lock(&e->mu);
    *out = e->node;
    pthread_mutex_unlock(&e->mu);
}

size_t mw_gpu_health_events(mw_gpu_health_engine *e, mw_gpu_event *out, size_t max,
                            mw_gpu_event_stats *st)
{
    pthread_mutex_lock(&e->mu);
    size_t n = 0;
    uint64_t first = e->next_id > MW_GPU_EVENTS_MAX ? e->next_id - MW_GPU_EVENTS_MAX : 1;
    for (uint64_t id = first; id < e->next_id && n < max; id++) {
        const mw_gpu_event *ev = &e->ring[id % MW_GPU_EVENTS_MAX];
        if (ev->id == id) out[n++] = *ev;
    }
    if (st) *st = e->st;
    pthread_mutex_unlock(&e->mu);
    return n;
}

/* One word of a snake_case reason in a Kubernetes condition reason: the
 * acronyms as people write them ("gpu_lost" -> "GPULost", "xid_79" ->
 * "XID79"), other words capitalised. */
static size_t camel_word(const char *w, size_t len, char *out, size_t room)
{
    static const char *const acronyms[][2] = {{"gpu", "GPU"},   {"xid", "XID"},
                                              {"sxid", "SXID"}, {"ecc", "ECC"},
                                              {"pcie", "PCIe"}, {"nvlink", "NVLink"}};
    for (size_t k = 0; k < MW_ARRAY_LEN(acronyms); k++)
        if (strlen(acronyms[k][0]) == len && !strncmp(w, acronyms[k][0], len)) {
            w = acronyms[k][1];
            break;
        }
    size_t n = 0;
    for (; n < len && n + 1 < room; n++)
        out[n] = n == 0 && w[n] >= 'a' && w[n] <= 'z' ? (char)(w[n] - 'a' + 'A') : w[n];
    return n;
}

void mw_gpu_node_verdict(const mw_gpu_node_health *h, mw_node_gpu_state *state, char *reason,
                         size_t rsize, char *message, size_t msize)
{
    switch (h->state) {
    case MW_HEALTH_HEALTHY:
        *state = MW_NODE_GPU_HEALTHY;
        break;
    case MW_HEALTH_DEGRADED:
        *state = MW_NODE_GPU_DEGRADED;
        break;
    case MW_HEALTH_UNHEALTHY:
        *state = MW_NODE_GPU_UNHEALTHY;
        break;
    default:
        *state = MW_NODE_GPU_UNKNOWN;
    }
    char counts[160];
    snprintf(counts, sizeof(counts), "%u GPU%s: %u healthy, %u degraded, %u unhealthy, %u unknown",
             h->ngpus, h->ngpus == 1 ? "" : "s", h->count[MW_HEALTH_HEALTHY],
             h->count[MW_HEALTH_DEGRADED], h->count[MW_HEALTH_UNHEALTHY],
             h->count[MW_HEALTH_UNKNOWN]);
    if (h->state == MW_HEALTH_HEALTHY || !strcmp(h->reason, "none")) {
        mw_strlcpy(reason, *state == MW_NODE_GPU_HEALTHY ? "GPUsHealthy" : "GPUHealthUnknown",
                   rsize);
        snprintf(message, msize, "%s", counts);
        return;
    }
    if (!rsize) return;
    size_t n = 0;
    for (const char *p = h->reason; *p && n + 1 < rsize;) {
        const char *end = strchr(p, '_');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        n += camel_word(p, len, reason + n, rsize - n);
        p += len + (end ? 1 : 0);
    }
    reason[n] = '\0';
    /* While nothing answers the per-GPU counts are of the last poll: the
     * reason says the readings are missing. */
    if (!strcmp(h->reason, "no_reading"))
        snprintf(message, msize, "no GPU poll has completed recently (a driver call hangs?)");
    else
        snprintf(message, msize, "%s%s: %s, recommended action: %s (%s)",
                 h->gpu[0] ? "GPU " : "the node", h->gpu, h->reason,
                 mw_health_action_name(h->action), counts);
}
