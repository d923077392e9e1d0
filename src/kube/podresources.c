/* podresources.c - the kubelet pod-resources client (see podresources.h).
 *
 * gRPC over a unix socket without a gRPC library: libcurl speaks HTTP/2
 * with prior knowledge (the kubelet's socket is h2c), the request is one
 * length-prefixed frame holding an empty ListPodResourcesRequest, and the
 * answer is one frame holding the protobuf-c decoded response, then the
 * grpc-status trailer. The call is made on this module's own thread, so a
 * slow kubelet never holds up a collection cycle. */
#include "podresources.h"
#include "../core/buf.h"
#include "../core/bytes.h"
#include "../core/http_client.h"
#include "../core/log.h"
#include "../core/util.h"
#include "../core/worker.h"
#include "podresources.pb-c.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

void mw_podres_table_free(mw_podres_table *t)
{
    free(t->rows);
    memset(t, 0, sizeof(*t));
}

static void put(char *dst, size_t n, const char *src)
{
    mw_strlcpy(dst, src ? src : "", n);
}

/* The protobuf message of a one-frame gRPC body, or NULL with a message. */
static const uint8_t *frame(const uint8_t *body, size_t len, uint32_t *n, char *err, size_t errsize)
{
    if (len < 5) {
        snprintf(err, errsize, "gRPC frame: %zu bytes, shorter than its 5-byte header", len);
        return NULL;
    }
    if (body[0] != 0) {
        snprintf(err, errsize, "gRPC frame: compressed flag %u (no compression was offered)",
                 body[0]);
        return NULL;
    }
    *n = mw_get_be32(body + 1);
    if (*n > MW_PODRES_MAX_FRAME) {
        snprintf(err, errsize, "gRPC frame: %u bytes, more than the %u allowed", *n,
                 MW_PODRES_MAX_FRAME);
        return NULL;
    }
    if ((size_t)*n != len - 5) {
        snprintf(err, errsize, "gRPC frame: header says %u bytes, body has %zu", *n, len - 5);
        return NULL;
    }
    return body + 5;
}

mw_podres_row *mw_podres_add(mw_podres_table *t)
{
    if (t->n >= MW_PODRES_MAX_ROWS) {
        mw_log_once(MW_LOG_WARN, "podresources", "rows",
                    "more than %d allocated GPUs: ignoring more", MW_PODRES_MAX_ROWS);
        return NULL;
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->rows = mw_xrealloc(t->rows, t->cap * sizeof(*t->rows));
    }
    mw_podres_row *row = &t->rows[t->n++];
    memset(row, 0, sizeof(*row));
    row->replica = -1;
    return row;
}

int mw_podres_split_replica(const char *id, char *uuid, size_t n)
{
    const char *sep = strstr(id, "::");
    if (!sep) {
        mw_strlcpy(uuid, id, n);
        return -1;
    }
    size_t k = (size_t)(sep - id);
    if (k >= n) k = n - 1;
    memcpy(uuid, id, k);
    uuid[k] = '\0';
    char *end;
    long r = strtol(sep + 2, &end, 10);
    if (end == sep + 2 || *end || r < 0 || r > 1000000) return -1;
    return (int)r;
}

static int gpu_resource(const char *name)
{
    return name &&
           (strcmp(name, MW_PODRES_RESOURCE) == 0 || strcmp(name, MW_PODRES_RESOURCE_SHARED) == 0);
}

static mw_podres_row *container_row(mw_podres_table *t, const V1__PodResources *p,
                                    const V1__ContainerResources *c, int source)
{
    mw_podres_row *row = mw_podres_add(t);
    if (!row) return NULL;
    put(row->ns, sizeof(row->ns), p->namespace_);
    put(row->pod, sizeof(row->pod), p->name);
    put(row->container, sizeof(row->container), c->name);
    row->source = source;
    return row;
}

int mw_podres_decode(const uint8_t *body, size_t len, mw_podres_table *t, char *err, size_t errsize)
{
    t->n = 0;
    uint32_t n;
    const uint8_t *msg = frame(body, len, &n, err, errsize);
    if (!msg) return -1;
    V1__ListPodResourcesResponse *r = v1__list_pod_resources_response__unpack(NULL, n, msg);
    if (!r) {
        snprintf(err, errsize, "ListPodResourcesResponse: not a valid protobuf message");
        return -1;
    }
    int full = 0;
    for (size_t i = 0; i < r->n_pod_resources && !full; i++) {
        const V1__PodResources *p = r->pod_resources[i];
        for (size_t j = 0; j < p->n_containers && !full; j++) {
            const V1__ContainerResources *c = p->containers[j];
            for (size_t k = 0; k < c->n_devices && !full; k++) {
                const V1__ContainerDevices *d = c->devices[k];
                if (!gpu_resource(d->resource_name)) continue;
                for (size_t m = 0; m < d->n_device_ids && !full; m++) {
                    mw_podres_row *row = container_row(t, p, c, MW_PODRES_DEVICE_PLUGIN);
                    if (!row) {
                        full = 1;
                        break;
                    }
                    row->replica = mw_podres_split_replica(d->device_ids[m] ? d->device_ids[m] : "",
                                                           row->device, sizeof(row->device));
                }
            }
            for (size_t k = 0; k < c->n_dynamic_resources && !full; k++) {
                const V1__DynamicResource *d = c->dynamic_resources[k];
                for (size_t m = 0; m < d->n_claim_resources && !full; m++) {
                    const V1__ClaimResource *cr = d->claim_resources[m];
                    if (!cr->device_name || !*cr->device_name) continue; /* not a device */
                    mw_podres_row *row = container_row(t, p, c, MW_PODRES_DRA);
                    if (!row) {
                        full = 1;
                        break;
                    }
                    put(row->driver, sizeof(row->driver), cr->driver_name);
                    put(row->pool, sizeof(row->pool), cr->pool_name);
                    put(row->dra_device, sizeof(row->dra_device), cr->device_name);
                    snprintf(row->claim, sizeof(row->claim), "%.63s/%.253s",
                             d->claim_namespace ? d->claim_namespace : "",
                             d->claim_name ? d->claim_name : "");
                }
            }
        }
    }
    v1__list_pod_resources_response__free_unpacked(r, NULL);
    return (int)t->n;
}

int mw_podres_decode_allocatable(const uint8_t *body, size_t len, mw_podres_table *t, char *err,
                                 size_t errsize)
{
    uint32_t n;
    const uint8_t *msg = frame(body, len, &n, err, errsize);
    if (!msg) return -1;
    V1__AllocatableResourcesResponse *r = v1__allocatable_resources_response__unpack(NULL, n, msg);
    if (!r) {
        snprintf(err, errsize, "AllocatableResourcesResponse: not a valid protobuf message");
        return -1;
    }
    /* Count the replica IDs of each GPU into the rows holding one of them
     * (at most MW_PODRES_MAX_ROWS IDs are looked at: bounded work). */
    for (size_t i = 0; i < t->n; i++)
        if (t->rows[i].replica >= 0) t->rows[i].replicas = 0;
    int ids = 0;
    for (size_t k = 0; k < r->n_devices && ids < MW_PODRES_MAX_ROWS; k++) {
        const V1__ContainerDevices *d = r->devices[k];
        if (!gpu_resource(d->resource_name)) continue;
        for (size_t m = 0; m < d->n_device_ids && ids < MW_PODRES_MAX_ROWS; m++) {
            char uuid[96];
            if (!d->device_ids[m] ||
                mw_podres_split_replica(d->device_ids[m], uuid, sizeof(uuid)) < 0)
                continue;
            ids++;
            for (size_t i = 0; i < t->n; i++)
                if (t->rows[i].replica >= 0 && strcmp(t->rows[i].device, uuid) == 0)
                    t->rows[i].replicas++;
        }
    }
    v1__allocatable_resources_response__free_unpacked(r, NULL);
    return ids;
}

void mw_podres_resolve(const mw_podres_resolver *r, mw_podres_table *t)
{
    if (!r) return;
    for (size_t i = 0; i < t->n && r->uuid; i++) {
        mw_podres_row *row = &t->rows[i];
        if (row->source == MW_PODRES_DRA && !row->device[0])
            r->uuid(r->cls, row->driver, row->pool, row->dra_device, row->device,
                    sizeof(row->device));
    }
    if (r->claims) r->claims(r->cls, t);
}

/* ---- the poller ---- */

struct mw_podres {
    char socket[PATH_MAX + 64];
    mw_worker w;           /* its mutex also guards what follows */
    mw_podres_table table; /* guarded by w.mu */
    uint64_t generation;
    int available;
    const mw_podres_resolver *resolver; /* NULL: DRA devices stay unresolved */
    mw_podres_resolver resolver_copy;
};

typedef struct grpc_status {
    int status; /* grpc-status, -1 = none seen */
    char message[256];
} grpc_status;

/* Headers and trailers alike: the status of a failed call can come in a
 * trailers-only response. */
static void on_header(const char *p, size_t n, void *ud)
{
    grpc_status *c = ud;
    char line[300];
    size_t k = n < sizeof(line) - 1 ? n : sizeof(line) - 1;
    memcpy(line, p, k);
    line[k] = '\0';
    line[strcspn(line, "\r\n")] = '\0';
    if (strncasecmp(line, "grpc-status:", 12) == 0)
        c->status = atoi(line + 12);
    else if (strncasecmp(line, "grpc-message:", 13) == 0)
        mw_strlcpy(c->message, line + 13 + strspn(line + 13, " "), sizeof(c->message));
}

/* One call of method (List or GetAllocatableResources): 0 with t filled,
 * -1 with a message. */
static int call_once(const char *socket, const char *method, mw_podres_table *t, char *err,
                     size_t errsize)
{
    static const char req[5] = {0, 0, 0, 0, 0}; /* an empty request message */
    grpc_status c = {.status = -1};
    char url[96];
    snprintf(url, sizeof(url), "http://localhost/v1.PodResourcesLister/%s", method);
    int list = strcmp(method, "List") == 0;
    mw_http_call call = {.unix_socket = socket,
                         .url = url,
                         .http2_prior_knowledge = 1,
                         .headers = {"content-type: application/grpc", "te: trailers"},
                         .post = 1,
                         .body = req,
                         .body_len = sizeof(req),
                         .max_body = MW_PODRES_MAX_FRAME + 5,
                         .on_header = on_header,
                         .cls = &c,
                         .connect_timeout_ms = 5000,
                         .timeout_ms = 10000};
    int ret = -1;
    if (mw_http_perform(NULL, &call) < 0) {
        if (call.failure == MW_HTTP_UNAVAILABLE)
            snprintf(err, errsize, "libcurl is not available");
        else
            snprintf(err, errsize, "%.300s: %s%s", socket, call.reason,
                     call.failure == MW_HTTP_TOO_LARGE ? " (response over 16 MiB)" : "");
    } else if (call.status != 200) {
        snprintf(err, errsize, "%.300s: HTTP status %ld", socket, call.status);
    } else if (c.status != 0) {
        snprintf(err, errsize, "%.300s: grpc-status %d%s%.150s", socket, c.status,
                 c.message[0] ? ": " : "", c.message);
    } else if (list ? mw_podres_decode((const uint8_t *)call.answer.data, call.answer.len, t, err,
                                       errsize) >= 0
                    : mw_podres_decode_allocatable((const uint8_t *)call.answer.data,
                                                   call.answer.len, t, err, errsize) >= 0) {
        ret = 0;
    }
    mw_http_call_free(&call);
    return ret;
}

static void poll_once(mw_podres *p)
{
    struct stat sb;
    if (stat(p->socket, &sb) != 0) {
        /* No kubelet here, or its socket is not mounted: not an error. */
        pthread_mutex_lock(&p->w.mu);
        if (p->table.n || p->available) p->generation++;
        p->table.n = 0;
        p->available = 0;
        pthread_mutex_unlock(&p->w.mu);
        return;
    }
    mw_podres_table t = {0};
    char err[512];
    if (call_once(p->socket, "List", &t, err, sizeof(err)) < 0) {
        mw_log_once(MW_LOG_WARN, "podresources", "list", "kubelet pod-resources List: %s", err);
        pthread_mutex_lock(&p->w.mu);
        p->available = 1;
        pthread_mutex_unlock(&p->w.mu);
        mw_podres_table_free(&t);
        return; /* keep the last good table */
    }
    /* Time-slicing replicas: how many each shared GPU has. */
    int replicas = 0;
    for (size_t i = 0; i < t.n; i++)
        replicas |= t.rows[i].replica >= 0;
    if (replicas && call_once(p->socket, "GetAllocatableResources", &t, err, sizeof(err)) < 0)
        mw_log_once(MW_LOG_WARN, "podresources", "allocatable",
                    "kubelet pod-resources GetAllocatableResources (time-slicing replicas): %s",
                    err);
    mw_podres_resolve(p->resolver, &t);
    pthread_mutex_lock(&p->w.mu);
    mw_podres_table old = p->table;
    p->table = t;
    p->available = 1;
    p->generation++;
    pthread_mutex_unlock(&p->w.mu);
    mw_podres_table_free(&old);
}

static void *run(void *arg)
{
    mw_podres *p = arg;
    do {
        poll_once(p);
    } while (mw_worker_sleep(&p->w, MW_PODRES_INTERVAL_MS));
    return NULL;
}

/* clang-format off */
static const mw_option podres_rows[] = {
    MW_OPT(mw_podres_settings, "kubelet-pod-resources", MW_OPT_BOOL, kubelet_pod_resources, "true", NULL, "Learn GPUs allocated to pods from the kubelet's pod-resources socket (off when absent)"),
};
/* clang-format on */
const mw_option_group mw_podres_options = MW_OPTION_GROUP(
    "kubelet pod resources", "src/kube/podresources.c", mw_podres_settings, podres_rows, NULL);

int mw_podres_start(const mw_config *cfg, const mw_podres_resolver *resolver, mw_podres **out)
{
    *out = NULL;
    if (!((const mw_podres_settings *)mw_config_group(cfg, &mw_podres_options))
             ->kubelet_pod_resources)
        return 1;
    mw_podres *p = mw_xcalloc(1, sizeof(*p));
    const char *root = strcmp(cfg->root, "/") == 0 ? "" : cfg->root;
    snprintf(p->socket, sizeof(p->socket), "%s%s", root, MW_PODRES_SOCKET);
    if (resolver) {
        p->resolver_copy = *resolver;
        p->resolver = &p->resolver_copy;
    }
    mw_worker_init(&p->w);
    if (mw_worker_start(&p->w, run, p) < 0) {
        mw_log(MW_LOG_WARN, "podresources", "cannot start a thread: %s", strerror(errno));
        mw_worker_destroy(&p->w);
        free(p);
        return 1;
    }
    *out = p;
    return 0;
}

int mw_podres_copy(mw_podres *p, uint64_t *generation, mw_podres_table *t)
{
    int copied = 0;
    pthread_mutex_lock(&p->w.mu);
    if (p->generation != *generation) {
        if (t->cap < p->table.n) {
            t->cap = p->table.n;
            t->rows = mw_xrealloc(t->rows, t->cap * sizeof(*t->rows));
        }
        if (p->table.n) memcpy(t->rows, p->table.rows, p->table.n * sizeof(*t->rows));
        t->n = p->table.n;
        *generation = p->generation;
        copied = 1;
    }
    pthread_mutex_unlock(&p->w.mu);
    return copied;
}

void mw_podres_kick(void *p)
{
    if (p) mw_worker_kick(&((mw_podres *)p)->w);
}

void mw_podres_stop(mw_podres *p)
{
    if (!p) return;
    mw_worker_stop(&p->w);
    mw_podres_table_free(&p->table);
    mw_worker_destroy(&p->w);
    free(p);
}
