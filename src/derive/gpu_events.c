/* gpu_events.c - the GPU health module: the event history of the running
 * GPU collector at GET /api/v1/gpu/events (read role), and the agent's
 * readiness while the GPU stack does not answer (/-/ready 503 with the
 * reason, rather than a page of nothing with a 200).
 *
 * Events are the node's (its GPUs, NVSwitches, PCI devices): a namespace-
 * scoped reader whose policy hides node-level series gets none of them,
 * only a note that they are hidden. Data: collect/gpu/gpu_health.h. */
#include "../agent/module.h"
#include "../collect/gpu/gpu_health.h"
#include "../core/util.h"
#include "../serve/http.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static json_t *event_json(const mw_gpu_event *ev)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer((json_int_t)ev->id));
    json_object_set_new(o, "kind", json_string(ev->sxid ? "sxid" : "xid"));
    json_object_set_new(o, "code", json_integer(ev->code));
    json_object_set_new(o, "gpu", json_string(ev->gpu));
    json_object_set_new(o, "uuid", json_string(ev->uuid));
    json_object_set_new(o, "pci_bus_id", json_string(ev->pci));
    if (ev->device[0]) json_object_set_new(o, "device", json_string(ev->device));
    json_object_set_new(o, "source",
                        json_string(ev->source == MW_GPU_EVENT_KMSG ? "kernel_log" : "nvml"));
    json_object_set_new(o, "before_start", json_boolean(ev->before_start));
    json_object_set_new(o, "class", json_string(mw_xid_class_name(ev->cls)));
    json_object_set_new(o, "state", json_string(mw_health_state_name(ev->state)));
    json_object_set_new(o, "action", json_string(mw_health_action_name(ev->action)));
    json_object_set_new(o, "count", json_integer((json_int_t)ev->count));
    json_object_set_new(o, "first_time_ms", json_integer(ev->first_ms));
    json_object_set_new(o, "last_time_ms", json_integer(ev->last_ms));
    json_object_set_new(o, "message", json_string(ev->message));
    if (ev->pid >= 0) json_object_set_new(o, "pid", json_integer(ev->pid));
    if (ev->process[0]) json_object_set_new(o, "process", json_string(ev->process));
    return o;
}

static void events_handler(void *cls, const mw_http_request *req, mw_http_response *resp)
{
    (void)cls;
    json_t *data = json_object();
    json_t *arr = json_array();
    if (!mw_http_scope_allows(req->scope, NULL)) {
        json_object_set_new(data, "hidden",
                            json_string("GPU events are node-level data, which this reader's "
                                        "access policy does not show"));
    } else {
        size_t n;
        mw_gpu_event_stats st;
        mw_gpu_event *evs = mw_gpu_events_get(&n, &st);
        for (size_t i = 0; i < n; i++)
            json_array_append_new(arr, event_json(&evs[i]));
        free(evs);
        json_object_set_new(data, "records", json_integer((json_int_t)st.records));
        json_object_set_new(data, "events_created", json_integer((json_int_t)st.events));
        json_object_set_new(data, "events_evicted", json_integer((json_int_t)st.evicted));
        json_object_set_new(data, "kernel_log", json_boolean(st.kmsg_on));
        json_object_set_new(data, "kernel_log_records", json_integer((json_int_t)st.kmsg_read));
        json_object_set_new(data, "kernel_log_lost", json_integer((json_int_t)st.kmsg_lost));
        mw_gpu_node_health node;
        if (mw_gpu_node_health_get(&node) == 0) {
            json_t *nh = json_object();
            json_object_set_new(nh, "state", json_string(mw_health_state_name(node.state)));
            json_object_set_new(nh, "reason", json_string(node.reason));
            json_object_set_new(nh, "action", json_string(mw_health_action_name(node.action)));
            json_object_set_new(nh, "gpu", json_string(node.gpu));
            json_object_set_new(data, "node", nh);
        }
    }
    json_object_set_new(data, "events", arr);
    json_t *root = json_object();
    json_object_set_new(root, "status", json_string("success"));
    json_object_set_new(root, "data", data);
    char *body = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    resp->status = 200;
    resp->content_type = "application/json";
    resp->body = body;
    resp->len = strlen(body);
}

static int gpu_health_init(const mw_env *env, void **state)
{
    (void)env;
    *state = NULL;
    return 0;
}

static void gpu_health_routes(void *state, mw_http_server *http)
{
    mw_http_route(http, MW_ROLE_READ, "GET", "/api/v1/gpu/events", 0, events_handler, state);
}

static int gpu_health_ready(void *state, char *why, size_t size)
{
    (void)state;
    return mw_gpu_answering(why, size);
}

const mw_module mw_module_gpu_health = {
    .name = "gpu",
    .init = gpu_health_init,
    .routes = gpu_health_routes,
    .ready = gpu_health_ready,
};
