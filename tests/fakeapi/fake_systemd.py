#!/usr/bin/python3
"""fake_systemd.py - a fake systemd manager on a D-Bus bus for the tests.

Owns org.freedesktop.systemd1 on the bus at DBUS_SYSTEM_BUS_ADDRESS (a
dbus-daemon the test started) and serves, at /org/freedesktop/systemd1,
org.freedesktop.systemd1.Manager.StartTransientUnit(s name, s mode,
a(sv) properties, a(sa(sv)) aux) -> o job for scopes, as systemd does:
  - the reply is the job's path; the job runs after it: the scope's cgroup
    SLICE/NAME is made under --cgroup-root (which stands for the root of
    systemd's hierarchy; Slice= or system.slice), each of PIDs is moved in
    by writing cgroup.procs (no file is created: a folder that is not a
    cgroup fails), and the JobRemoved(u id, o job, s unit, s result) signal
    says "done", or "failed" when a PID could not be moved (the cgroup is
    removed again);
  - errors like systemd's: org.freedesktop.systemd1.UnitExists for a name
    in use (or listed in --existing FILE, read at each call), org.freedesktop.DBus.Error.InvalidArgs for a bad job mode, a
    scope without PIDs or a name that is not a scope's,
    org.freedesktop.DBus.Error.PropertyReadOnly for a property systemd
    would not set on a transient scope,
    org.freedesktop.DBus.Error.InteractiveAuthorizationRequired for a
    caller that is not root (polkit's answer);
  - --user-manager UID: systemd's user manager of UID instead (on that
    user's bus): only UID may call (others: AccessDenied), and scopes go to
    app.slice;
  - once no process is left in a scope (cgroup.events "populated 0",
    checked every 5 ms) its cgroup is removed and the unit forgotten
    (CollectMode=inactive-or-failed).
Each call is appended to --log as a JSON line: the caller's uid, name,
mode, the properties (PIDs as a list) and the answer.

  fake_systemd.py --cgroup-root DIR --log FILE --ready FILE [--existing FILE]
                  [--user-manager UID]
"""
import argparse
import json
import os
import signal
import sys

import dbus
import dbus.mainloop.glib
import dbus.service
from gi.repository import GLib

MANAGER = "org.freedesktop.systemd1.Manager"
SCOPE_PROPERTIES = {"Description", "PIDs", "CPUAccounting", "CollectMode", "Slice", "Delegate",
                    "MemoryAccounting", "TasksAccounting", "IOAccounting", "AddRef"}
JOB_MODES = {"replace", "fail", "isolate", "ignore-dependencies", "ignore-requirements", "flush",
             "triggering", "restart-dependencies"}


def plain(v):
    if isinstance(v, (dbus.Array, list)):
        return [plain(x) for x in v]
    if isinstance(v, dbus.Boolean):
        return bool(v)
    if isinstance(v, (dbus.UInt32, dbus.Int32, dbus.UInt64, dbus.Int64)):
        return int(v)
    return str(v)


class Manager(dbus.service.Object):
    def __init__(self, bus, root, log, existing, user):
        super().__init__(bus, "/org/freedesktop/systemd1")
        self.bus, self.root, self.log = bus, root, log
        self.existing, self.user = existing, user
        self.units = {}  # name -> cgroup folder
        self.job = 0
        GLib.timeout_add(5, self.collect)

    def record(self, entry):
        with open(self.log, "a") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")

    @dbus.service.method(MANAGER, in_signature="ssa(sv)a(sa(sv))", out_signature="o",
                         sender_keyword="sender")
    def StartTransientUnit(self, name, mode, properties, aux, sender=None):
        uid = int(self.bus.get_unix_user(sender))
        props = {str(k): plain(v) for k, v in properties}
        entry = {"uid": uid, "name": str(name), "mode": str(mode), "properties": props,
                 "aux": len(aux)}

        def refuse(err, text):
            entry["error"] = err
            self.record(entry)
            raise dbus.exceptions.DBusException(text, name=err)

        if self.user is not None and uid != self.user:
            refuse("org.freedesktop.DBus.Error.AccessDenied", "Access denied")
        if self.user is None and uid != 0:
            refuse("org.freedesktop.DBus.Error.InteractiveAuthorizationRequired",
                   "Interactive authentication required.")
        if str(mode) not in JOB_MODES:
            refuse("org.freedesktop.DBus.Error.InvalidArgs", f"Job mode {mode} invalid.")
        if not str(name).endswith(".scope") or "/" in name:
            refuse("org.freedesktop.DBus.Error.InvalidArgs", f"Invalid unit name or type: {name}")
        existing = set()
        if self.existing and os.path.exists(self.existing):
            existing = set(open(self.existing).read().split())
        if name in self.units or name in existing:
            refuse("org.freedesktop.systemd1.UnitExists",
                   f"Unit {name} was already loaded or has a fragment file.")
        for k in props:
            if k not in SCOPE_PROPERTIES:
                refuse("org.freedesktop.DBus.Error.PropertyReadOnly",
                       f"Cannot set property {k}, or unknown property.")
        if not props.get("PIDs"):
            refuse("org.freedesktop.DBus.Error.InvalidArgs", "Scope has no PIDs. Refusing.")
        self.job += 1
        job = f"/org/freedesktop/systemd1/job/{self.job}"
        entry["job"] = job
        self.record(entry)
        slice_ = props.get("Slice", "app.slice" if self.user is not None else "system.slice")
        folder = os.path.join(self.root, slice_, str(name))
        self.units[str(name)] = None  # loaded, starting
        GLib.idle_add(self.run_job, self.job, job, str(name), folder, props["PIDs"])
        return dbus.ObjectPath(job)

    def run_job(self, jid, job, name, folder, pids):
        result = "done"
        try:
            os.makedirs(folder, exist_ok=False)
            for pid in pids:
                fd = os.open(os.path.join(folder, "cgroup.procs"), os.O_WRONLY)
                try:
                    os.write(fd, f"{pid}\n".encode())
                finally:
                    os.close(fd)
            self.units[name] = folder
        except OSError as e:
            print(f"fake_systemd: {name}: {e}", file=sys.stderr)
            result = "failed"
            try:
                os.rmdir(folder)
            except OSError:
                pass
            del self.units[name]
        self.record({"job": job, "unit": name, "result": result})
        self.JobRemoved(dbus.UInt32(jid), dbus.ObjectPath(job), name, result)
        return False

    @dbus.service.signal(MANAGER, signature="uoss")
    def JobRemoved(self, jid, job, unit, result):
        pass

    def collect(self):
        for name, folder in list(self.units.items()):
            if folder is None:
                continue
            try:
                with open(os.path.join(folder, "cgroup.events")) as f:
                    populated = "populated 1" in f.read()
            except OSError:
                with open(os.path.join(folder, "cgroup.procs")) as f:  # v1
                    populated = bool(f.read().strip())
            if not populated:
                os.rmdir(folder)
                del self.units[name]
                self.record({"unit": name, "removed": folder})
        return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cgroup-root", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--ready", required=True)
    ap.add_argument("--existing")
    ap.add_argument("--user-manager", type=int)
    a = ap.parse_args()
    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.bus.BusConnection(os.environ["DBUS_SYSTEM_BUS_ADDRESS"])
    name = dbus.service.BusName("org.freedesktop.systemd1", bus, do_not_queue=True)
    manager = Manager(bus, a.cgroup_root, a.log, a.existing, a.user_manager)
    loop = GLib.MainLoop()
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, loop.quit)
    with open(a.ready, "w") as f:
        f.write("ready\n")
    loop.run()
    del name, manager


if __name__ == "__main__":
    main()
