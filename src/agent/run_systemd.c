/* run_systemd.c - a systemd transient scope for `mlwatch run`; see
 * run_systemd.h. The few sd-bus calls are declared here with the ABI of
 * libsystemd's sd-bus.h (stable since systemd 221), so the build needs no
 * libsystemd headers and a machine without the library runs the command
 * in a child cgroup instead. */
#include "run_systemd.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct sd_bus sd_bus;
typedef struct sd_bus_message sd_bus_message;
typedef struct sd_bus_slot sd_bus_slot;
typedef struct sd_bus_error {
    const char *name;
    const char *message;
    int need_free;
} sd_bus_error;
typedef int (*sd_bus_message_handler_t)(sd_bus_message *m, void *userdata, sd_bus_error *ret);

typedef struct sdbus {
    void *dl;
    int (*open_system)(sd_bus **);
    int (*open_user)(sd_bus **);
    int (*new_method_call)(sd_bus *, sd_bus_message **, const char *, const char *, const char *,
                           const char *);
    int (*append)(sd_bus_message *, const char *, ...);
    int (*open_container)(sd_bus_message *, char, const char *);
    int (*close_container)(sd_bus_message *);
    int (*call)(sd_bus *, sd_bus_message *, uint64_t, sd_bus_error *, sd_bus_message **);
    int (*read)(sd_bus_message *, const char *, ...);
    sd_bus_message *(*message_unref)(sd_bus_message *);
    void (*error_free)(sd_bus_error *);
    int (*add_match)(sd_bus *, sd_bus_slot **, const char *, sd_bus_message_handler_t, void *);
    int (*process)(sd_bus *, sd_bus_message **);
    int (*wait)(sd_bus *, uint64_t);
    sd_bus *(*flush_close_unref)(sd_bus *);
} sdbus;

int mw_run_systemd_booted(const char *dir)
{
    struct stat st;
    return lstat(dir, &st) == 0 && S_ISDIR(st.st_mode);
}

static int load(sdbus *b, const char *library, char *why, size_t whysize)
{
    memset(b, 0, sizeof(*b));
    b->dl = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!b->dl) {
        snprintf(why, whysize, "systemd: cannot load %s: %s", library, dlerror());
        return -1;
    }
    struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&b->open_system, "sd_bus_open_system"},
        {(void **)&b->open_user, "sd_bus_open_user"},
        {(void **)&b->new_method_call, "sd_bus_message_new_method_call"},
        {(void **)&b->append, "sd_bus_message_append"},
        {(void **)&b->open_container, "sd_bus_message_open_container"},
        {(void **)&b->close_container, "sd_bus_message_close_container"},
        {(void **)&b->call, "sd_bus_call"},
        {(void **)&b->read, "sd_bus_message_read"},
        {(void **)&b->message_unref, "sd_bus_message_unref"},
        {(void **)&b->error_free, "sd_bus_error_free"},
        {(void **)&b->add_match, "sd_bus_add_match"},
        {(void **)&b->process, "sd_bus_process"},
        {(void **)&b->wait, "sd_bus_wait"},
        {(void **)&b->flush_close_unref, "sd_bus_flush_close_unref"},
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        *syms[i].slot = dlsym(b->dl, syms[i].name);
        if (!*syms[i].slot) {
            snprintf(why, whysize, "systemd: %s has no %s", library, syms[i].name);
            dlclose(b->dl);
            b->dl = NULL;
            return -1;
        }
    }
    return 0;
}

/* The start job's end, from the manager's JobRemoved(u id, o job, s unit,
 * s result) signals: the one for our unit. */
typedef struct waiter {
    sdbus *b;
    const char *unit;
    char result[64];
} waiter;

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *ret)
{
    (void)ret;
    waiter *w = userdata;
    uint32_t id;
    const char *job, *unit, *result;
    if (w->b->read(m, "uoss", &id, &job, &unit, &result) >= 0 && strcmp(unit, w->unit) == 0)
        snprintf(w->result, sizeof(w->result), "%s", result);
    return 0;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fail_rc(char *why, size_t whysize, const char *what, int rc)
{
    snprintf(why, whysize, "systemd: %s: %s", what, strerror(rc < 0 ? -rc : rc));
    return -1;
}

/* The StartTransientUnit call: ssa(sv)a(sa(sv)). */
static int start_unit(sdbus *b, sd_bus *bus, const char *unit, const char *description,
                      const pid_t *pids, size_t npids, char *why, size_t whysize)
{
    sd_bus_message *m = NULL, *reply = NULL;
    sd_bus_error err = {NULL, NULL, 0};
    int rc = b->new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                "org.freedesktop.systemd1.Manager", "StartTransientUnit");
    if (rc < 0) return fail_rc(why, whysize, "StartTransientUnit", rc);
    /* fail: an existing unit of that name is an error, not replaced.
     * CPUAccounting: a cpuacct cgroup on v1 and hybrid hosts too.
     * CollectMode: systemd forgets the scope once it ends, failed or not. */
    if ((rc = b->append(m, "ss", unit, "fail")) < 0 ||
        (rc = b->open_container(m, 'a', "(sv)")) < 0 ||
        (rc = b->append(m, "(sv)", "Description", "s", description)) < 0 ||
        (rc = npids == 1 ? b->append(m, "(sv)", "PIDs", "au", 1, (uint32_t)pids[0])
                         : b->append(m, "(sv)", "PIDs", "au", 2, (uint32_t)pids[0],
                                     (uint32_t)pids[1])) < 0 ||
        (rc = b->append(m, "(sv)", "CPUAccounting", "b", 1)) < 0 ||
        (rc = b->append(m, "(sv)", "CollectMode", "s", "inactive-or-failed")) < 0 ||
        (rc = b->close_container(m)) < 0 || (rc = b->append(m, "a(sa(sv))", 0)) < 0) {
        b->message_unref(m);
        return fail_rc(why, whysize, "StartTransientUnit", rc);
    }
    rc = b->call(bus, m, 10 * 1000000ull, &err, &reply);
    b->message_unref(m);
    if (rc < 0) {
        if (err.name)
            snprintf(why, whysize, "systemd: StartTransientUnit %s: %s: %s", unit, err.name,
                     err.message ? err.message : "");
        else
            fail_rc(why, whysize, "StartTransientUnit", rc);
        b->error_free(&err);
        return -1;
    }
    const char *job = NULL;
    if (b->read(reply, "o", &job) < 0 || !job) {
        b->message_unref(reply);
        snprintf(why, whysize, "systemd: StartTransientUnit %s: no job in the answer", unit);
        return -1;
    }
    b->message_unref(reply);
    return 0;
}

int mw_run_systemd_scope(const char *library, const char *unit, const char *description,
                         const pid_t *pids, size_t npids, int timeout_ms, char *why, size_t whysize)
{
    sdbus b;
    if (npids < 1 || npids > 2) {
        snprintf(why, whysize, "systemd: a scope of %zu processes", npids);
        return -1;
    }
    if (load(&b, library ? library : "libsystemd.so.0", why, whysize) < 0) return -1;
    sd_bus *bus = NULL;
    int user = geteuid() != 0;
    int rc = user ? b.open_user(&bus) : b.open_system(&bus);
    if (rc < 0) {
        fail_rc(why, whysize, user ? "the user bus" : "the system bus", rc);
        dlclose(b.dl);
        return -1;
    }
    waiter w = {&b, unit, ""};
    int ret = -1;
    /* Before the call: the job may end before its answer is read. */
    rc = b.add_match(bus, NULL,
                     "type='signal',sender='org.freedesktop.systemd1',path='/org/freedesktop/"
                     "systemd1',interface='org.freedesktop.systemd1.Manager',member='JobRemoved'",
                     on_job_removed, &w);
    if (rc < 0) {
        fail_rc(why, whysize, "AddMatch JobRemoved", rc);
        goto out;
    }
    if (start_unit(&b, bus, unit, description, pids, npids, why, whysize) < 0) goto out;
    int64_t deadline = mono_ms() + timeout_ms;
    while (!w.result[0]) {
        rc = b.process(bus, NULL);
        if (rc < 0) {
            fail_rc(why, whysize, "waiting for the scope's start job", rc);
            goto out;
        }
        if (rc > 0) continue;
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            snprintf(why, whysize, "systemd: the start job of %s did not end within %d ms", unit,
                     timeout_ms);
            goto out;
        }
        b.wait(bus, (uint64_t)left * 1000);
    }
    if (strcmp(w.result, "done") != 0) {
        snprintf(why, whysize, "systemd: the start job of %s ended: %s", unit, w.result);
        goto out;
    }
    ret = 0;
out:
    b.flush_close_unref(bus);
    /* The library stays loaded: sd-bus may have registered state with the
     * C library (its mempools); a command needs it once. */
    return ret;
}
