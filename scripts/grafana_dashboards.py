#!/usr/bin/env python3
"""grafana_dashboards.py - the mlwatch dashboards as Grafana JSON.

ui/dashboards.json is the one source of the dashboards: the agent's web UI
reads it at run time, and this script turns each of its pages into a Grafana
dashboard (schemaVersion 39, Grafana 9 and later) in deploy/grafana/:

  scripts/grafana_dashboards.py              write deploy/grafana/*.json
  scripts/grafana_dashboards.py --check      exit 1 if they differ from the spec,
                                             or if a dashboard is not valid
  scripts/grafana_dashboards.py --exprs      print every expression, one a line,
                                             with the variables substituted
  scripts/grafana_dashboards.py --query URL  run each substituted expression as an
                                             instant query at URL (a Prometheus-
                                             compatible base URL); list the empty ones

Substitution (what --exprs prints; docs/ui.md): $namespace -> .*,
$workload -> "" (every pod), $node -> .*, $__range -> 1h,
$__rate_interval -> 1m. Standard library only.

Panel kinds: timeseries, stat, table, findings (a table of mlwatch_finding
here; the UI draws /api/v1/findings with evidence), statetimeline (Grafana's
state-timeline), facts (a table of instant queries, one row per fact) and
sources (a text panel: the agent's /api/v1/status/sources is not a
Prometheus query, so Grafana shows what each missing source means). Every
panel gets its description, and its "empty"/"needs" text as Grafana's
noValue; percent and temperature panels get thresholds. --check also
refuses a fixed rate window ([1m]: $__rate_interval instead) and a panel
without a description or an explanation for when it is empty."""
import argparse
import json
import os
import re
import sys
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = os.path.join(ROOT, "ui", "dashboards.json")
OUT = os.path.join(ROOT, "deploy", "grafana")
DS = {"type": "prometheus", "uid": "${datasource}"}
SUBST = {"namespace": ".*", "workload": "", "node": ".*", "__range": "1h", "__rate_interval": "1m"}


def load_spec(path=SPEC):
    with open(path) as f:
        return json.load(f)


def substitute(expr, values=None):
    """Replace $name and ${name} (longest names first, so $__range is not $__r...)."""
    values = values or SUBST

    def repl(m):
        name = m.group(1) or m.group(2)
        if name.isdigit():  # label_replace's capture group "$1", not a variable
            return m.group(0)
        if name not in values:
            raise ValueError(f"unknown variable ${name} in {expr!r}")
        return values[name]
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", repl, expr)


def variable(name, v):
    if v["type"] == "textbox":
        return {"name": name, "label": v["label"], "type": "textbox", "query": v.get("default", ""),
                "current": {"text": v.get("default", ""), "value": v.get("default", "")},
                "hide": 0}
    query = f"label_values({v['metric']}, {v['label_name']})"
    return {
        "name": name, "label": v["label"], "type": "query", "datasource": DS,
        "definition": query,
        "query": query,  # the string form: Grafana 9 reads it, 10 and 11 migrate it
        "refresh": 2, "sort": 1, "multi": bool(v.get("multi")), "includeAll": True,
        "allValue": v["all"], "current": {"text": "All", "value": "$__all"}, "hide": 0,
        "options": [],
    }


def grafana_unit(unit):
    """Our "suffix:X" is Grafana's custom unit "suffix: X"."""
    if unit and unit.startswith("suffix:"):
        return "suffix: " + unit[7:].strip()
    return unit


# Thresholds where they mean something: a share (utilization, throttling,
# pressure) high is a problem; so is a hot GPU.
THRESHOLDS = {
    "percentunit": [{"color": "green", "value": None}, {"color": "orange", "value": 0.5},
                    {"color": "red", "value": 0.9}],
    "celsius": [{"color": "green", "value": None}, {"color": "orange", "value": 80},
                {"color": "red", "value": 90}],
}


def empty_text(spec, p):
    """What the panel says when it has no data (the UI's text, without this agent's state)."""
    parts = []
    if p.get("empty"):
        parts.append(p["empty"])
    need = spec.get("needs", {}).get(p.get("needs", ""))
    if need:
        parts.append(need["text"])
    return " ".join(parts)


def field_config(unit, decimals=None, no_value=""):
    d = {"unit": grafana_unit(unit)}
    if decimals is not None:
        d["decimals"] = decimals
    if no_value:
        d["noValue"] = no_value
    if unit in THRESHOLDS:
        d["thresholds"] = {"mode": "absolute", "steps": THRESHOLDS[unit]}
    return {"defaults": d, "overrides": []}


def panel(p, x, y, spec=None):
    kind = p["kind"]
    spec = spec or {}
    g = {"id": p["id"], "title": p["title"], "datasource": DS,
         "gridPos": {"h": p["h"], "w": p["w"], "x": x, "y": y}}
    refs = [chr(ord("A") + i) for i in range(len(p["targets"]))]
    no_value = empty_text(spec, p)
    if kind == "timeseries":
        g["type"] = "timeseries"
        g["fieldConfig"] = field_config(p["unit"], p.get("decimals"), no_value)
        if p["unit"] in THRESHOLDS:
            g["fieldConfig"]["defaults"]["custom"] = {"thresholdsStyle": {"mode": "line"}}
        # A scrolling table legend: never cut off, however many series.
        g["options"] = {"legend": {"displayMode": "table", "placement": "right" if p["w"] >= 12 else "bottom",
                                   "showLegend": True, "calcs": ["mean", "max"]},
                        "tooltip": {"mode": "multi", "sort": "desc"}}
        g["targets"] = [{"datasource": DS, "refId": r, "expr": t["expr"], "range": True,
                         "instant": False, "legendFormat": t.get("legend", "__auto")}
                        for r, t in zip(refs, p["targets"])]
    elif kind == "statetimeline":
        g["type"] = "state-timeline"
        g["fieldConfig"] = field_config("short", None, no_value)
        g["fieldConfig"]["defaults"]["mappings"] = [
            {"type": "value", "options": {"0": {"text": "off", "color": "transparent"},
                                          "1": {"text": "active", "color": "orange"}}}]
        g["options"] = {"showValue": "never", "mergeValues": True, "rowHeight": 0.8,
                        "legend": {"showLegend": False}}
        g["targets"] = [{"datasource": DS, "refId": r, "expr": t["expr"], "range": True,
                         "instant": False, "legendFormat": t.get("legend", "__auto")}
                        for r, t in zip(refs, p["targets"])]
    elif kind == "stat":
        g["type"] = "stat"
        g["fieldConfig"] = field_config(p["unit"], p.get("decimals"), no_value)
        g["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "value", "graphMode": "area",
                        "textMode": "value_and_name" if p["targets"][0].get("legend") else "value"}
        g["targets"] = [{"datasource": DS, "refId": r, "expr": t["expr"], "range": True,
                         "instant": False, **({"legendFormat": t["legend"]} if t.get("legend") else {})}
                        for r, t in zip(refs, p["targets"])]
    elif kind == "facts":
        # One row per fact: instant queries; a label fact shows that label
        # (its legend), a value fact its value.
        facts = [t for t in p["targets"] if t.get("expr")]
        refs = refs[:len(facts)]
        g["type"] = "stat"
        g["fieldConfig"] = field_config("short", None, no_value)
        g["fieldConfig"]["overrides"] = [
            {"matcher": {"id": "byFrameRefID", "options": r},
             "properties": [{"id": "unit", "value": grafana_unit(t.get("unit", "short"))}]}
            for r, t in zip(refs, facts) if not t.get("label")]
        g["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                        "colorMode": "none", "graphMode": "none", "textMode": "value_and_name",
                        "orientation": "horizontal"}
        g["targets"] = [{"datasource": DS, "refId": r, "expr": t["expr"], "range": False, "instant": True,
                         "legendFormat": f"{t['title']}: {{{{{t['label']}}}}}" if t.get("label") else t["title"]}
                        for r, t in zip(refs, facts)]
    elif kind == "sources":
        g["type"] = "text"
        lines = [f"- **{k}**: {v['text']}" for k, v in sorted(spec.get("needs", {}).items())]
        g["options"] = {"mode": "markdown", "content":
                        "What this agent sees and cannot see is at its `/api/v1/status/sources` "
                        "and on the Overview page of its web UI. What each missing source means:\n\n"
                        + "\n".join(lines)}
        g["targets"] = [{"datasource": DS, "refId": r, "expr": t["expr"], "range": False,
                         "instant": True} for r, t in zip(refs, p["targets"])]
    elif kind in ("table", "findings"):
        # findings: the UI draws /api/v1/findings; Grafana the same findings
        # from mlwatch_finding, as a table.
        g["type"] = "table"
        g["fieldConfig"] = {"defaults": {}, "overrides": [
            {"matcher": {"id": "byName", "options": f"Value #{r}"},
             "properties": [{"id": "displayName", "value": t["title"]},
                            {"id": "unit", "value": t.get("unit", "short")}] +
            ([{"id": "decimals", "value": t["decimals"]}] if "decimals" in t else [])}
            for r, t in zip(refs, p["targets"])]}
        # Instant queries in table format, one column per query, merged on
        # their labels; then only the spec's columns, in its order.
        g["targets"] = [{"datasource": DS, "refId": r, "expr": t["expr"], "range": False,
                         "instant": True, "format": "table"} for r, t in zip(refs, p["targets"])]
        names = {c["label"]: c["title"] for c in p["columns"]}
        order = {c["label"]: i for i, c in enumerate(p["columns"])}
        for i, r in enumerate(refs):
            order[f"Value #{r}"] = len(p["columns"]) + i
        g["transformations"] = [
            {"id": "merge", "options": {}},
            {"id": "filterFieldsByName", "options": {"include": {"names": list(order)}}},
            {"id": "organize", "options": {
                "excludeByName": {"Time": True, "__name__": True},
                "indexByName": order, "renameByName": names}},
        ]
        g["options"] = {"showHeader": True, "cellHeight": "sm"}
    else:
        raise ValueError(f"panel {p['id']}: unknown kind {kind!r}")
    if p.get("description"):
        g["description"] = p["description"]
    if kind == "table" and no_value:
        g["fieldConfig"]["defaults"]["noValue"] = no_value
    return g


def dashboard(spec, page):
    panels, x, y, row_h = [], 0, 0, 0
    for p in page["panels"]:
        if x + p["w"] > 24:
            x, y, row_h = 0, y + row_h, 0
        panels.append(panel(p, x, y, spec))
        x += p["w"]
        row_h = max(row_h, p["h"])
    templating = [{"name": "datasource", "label": "Data source", "type": "datasource",
                   "query": "prometheus", "current": {}, "hide": 0, "refresh": 1,
                   "regex": "", "options": []}]
    templating += [variable(n, spec["variables"][n]) for n in page["variables"]]
    return {
        "__comment": "Generated from ui/dashboards.json by scripts/grafana_dashboards.py; "
                     "do not edit by hand.",
        "uid": page["uid"], "title": f"mlwatch / {page['title']}",
        "description": page["description"], "tags": ["mlwatch"], "editable": True,
        "schemaVersion": 39, "version": 1, "graphTooltip": 1, "timezone": "",
        "time": {"from": "now-1h", "to": "now"}, "refresh": "30s",
        "timepicker": {"refresh_intervals": ["5s", "10s", "30s", "1m", "5m"]},
        "templating": {"list": templating}, "annotations": {"list": []},
        "links": [], "panels": panels,
    }


def render(d):
    return json.dumps(d, indent=2, sort_keys=True) + "\n"


def validate(d, name):
    """Problems with one Grafana dashboard, as a list of strings."""
    errs = []
    if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 36:
        errs.append("schemaVersion missing or below 36")
    for k in ("uid", "title", "panels", "templating"):
        if k not in d:
            errs.append(f"no {k}")
    tl = d.get("templating", {}).get("list", [])
    ds = [v for v in tl if v.get("name") == "datasource"]
    if not ds or ds[0].get("type") != "datasource" or ds[0].get("query") != "prometheus":
        errs.append("no datasource variable of type datasource, query prometheus")
    declared = {v["name"] for v in tl} | {"__range", "__interval", "__rate_interval"}
    ids = [p.get("id") for p in d.get("panels", [])]
    if len(ids) != len(set(ids)):
        errs.append(f"panel ids not unique: {ids}")
    for p in d.get("panels", []):
        where = f"panel {p.get('id')} ({p.get('title')})"
        gp = p.get("gridPos", {})
        if not all(isinstance(gp.get(k), int) for k in "hwxy") or gp["x"] + gp["w"] > 24:
            errs.append(f"{where}: bad gridPos {gp}")
        if p.get("datasource", {}).get("uid") != "${datasource}":
            errs.append(f"{where}: panel datasource is not ${{datasource}}")
        if not p.get("targets"):
            errs.append(f"{where}: no targets")
        for t in p.get("targets", []):
            if t.get("datasource", {}).get("uid") != "${datasource}":
                errs.append(f"{where}: target {t.get('refId')} does not use ${{datasource}}")
            for v in re.findall(r"\$\{?(\w+)", t.get("expr", "")):
                if v not in declared and not v.isdigit():
                    errs.append(f"{where}: ${v} is not a variable of the dashboard")
    return [f"{name}: {e}" for e in errs]


def validate_spec(spec):
    """What the spec itself must hold: a description on every panel, an
    explanation for when it is empty, $__rate_interval in every rate."""
    errs = []
    for page in spec["pages"]:
        for p in page["panels"]:
            where = f"{page['id']} panel {p['id']} ({p['title']})"
            if not p.get("description"):
                errs.append(f"{where}: no description")
            if not p.get("empty") and p.get("needs") not in spec.get("needs", {}):
                errs.append(f"{where}: says nothing when empty (no \"empty\" text, no known \"needs\")")
            for t in p["targets"]:
                if re.search(r"\[\d+[smhd]\]", t.get("expr", "")):
                    errs.append(f"{where}: a fixed rate window in {t['expr']!r}: use [$__rate_interval]")
    return errs


def exprs(spec):
    for page in spec["pages"]:
        for p in page["panels"]:
            for t in p["targets"]:
                if t.get("expr"):
                    yield page["id"], p["id"], t["expr"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", default=SPEC)
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--exprs", action="store_true")
    ap.add_argument("--query", metavar="URL")
    a = ap.parse_args()
    spec = load_spec(a.spec)
    if a.exprs:
        for _, _, e in exprs(spec):
            print(substitute(e))
        return 0
    if a.query:
        empty = 0
        for page, pid, e in exprs(spec):
            q = urllib.parse.urlencode({"query": substitute(e)})
            with urllib.request.urlopen(f"{a.query.rstrip('/')}/api/v1/query?{q}", timeout=10) as r:
                res = json.load(r)["data"]["result"]
            if not res:
                empty += 1
                print(f"empty: {page} panel {pid}: {substitute(e)}")
        return 1 if empty else 0
    errors, stale = validate_spec(spec), []
    for page in spec["pages"]:
        d = dashboard(spec, page)
        text = render(d)
        path = os.path.join(a.out, f"{page['id']}.json")
        errors += validate(json.loads(text), os.path.basename(path))
        if a.check:
            try:
                with open(path) as f:
                    current = f.read()
            except OSError:
                current = None
            if current != text:
                stale.append(path)
        else:
            with open(path, "w") as f:
                f.write(text)
    for e in errors:
        print(f"invalid: {e}", file=sys.stderr)
    for s in stale:
        print(f"out of date: {s} (run scripts/grafana_dashboards.py)", file=sys.stderr)
    return 1 if errors or stale else 0


if __name__ == "__main__":
    sys.exit(main())
