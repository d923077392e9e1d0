#!/usr/bin/python3
"""promql_exprs.py - run every PromQL expression of the rules and the Grafana
dashboards against a Prometheus and report how many series each returns
(tests/integration/deploy_promql.sh).

  promql_exprs.py --url URL --rules RULES.yml [--grafana DIR] [--may-be-empty NAME ...]

Expressions:
  - rules: each record and alert expr of RULES.yml (a rules file, or a
    PrometheusRule whose spec holds the groups);
  - dashboards: each target's expr in DIR/*.json (panels nested in rows
    included), and each query variable: label_values(METRIC, LABEL) runs
    as count by (LABEL) (METRIC), a plain query_result(EXPR) as EXPR.
Grafana variables are replaced the way "All" would expand them: a
$var/${var}/${var:fmt}/[[var]] inside a regex matcher (=~ "...") becomes
.*, an equality matcher label="$var" becomes label=~".*", anything else .*;
$__rate_interval 1m, $__interval 15s, $__range 1h (and its _s/_ms forms).

Every expression must run without error and return at least one series,
except the alerts and records named with --may-be-empty (conditions the
test cannot make hold), which must only run without error. Exit 1
otherwise; every expression is printed with its series count."""
import argparse
import glob
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

import yaml

DURATIONS = {
    "__rate_interval": "1m", "__interval": "15s", "__range": "1h",
    "__range_s": "3600", "__range_ms": "3600000", "__interval_ms": "15000",
}
VAR = r"(?:\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+))"


def substitute(expr):
    def name(m):
        return m.group(1) or m.group(2) or m.group(3)

    # label="$var" -> label=~".*" (what "All" amounts to)
    expr = re.sub(r'(\w+)\s*=\s*"' + VAR + '"',
                  lambda m: f'{m.group(1)}=~".*"' if name_of(m, 1) not in DURATIONS else m.group(0),
                  expr)

    def repl(m):
        n = name(m)
        return DURATIONS.get(n, ".*")
    return re.sub(VAR, repl, expr)


def name_of(m, offset):
    return m.group(offset + 1) or m.group(offset + 2) or m.group(offset + 3)


def rule_exprs(path):
    with open(path) as f:
        doc = yaml.safe_load(f)
    if doc.get("kind") == "PrometheusRule":
        doc = doc["spec"]
    out = []
    for g in doc["groups"]:
        for r in g["rules"]:
            name = r.get("record") or r.get("alert")
            out.append((f"rules {g['name']} {name}", name, r["expr"]))
    return out


def panels(ps):
    for p in ps or []:
        yield p
        yield from panels(p.get("panels"))


def dashboard_exprs(folder):
    out = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        base = os.path.basename(path)
        with open(path) as f:
            d = json.load(f)
        for v in (d.get("templating") or {}).get("list") or []:
            if v.get("type") != "query":
                continue
            q = v.get("query")
            if isinstance(q, dict):
                q = q.get("query")
            if not q:
                continue
            m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", q, re.S)
            if m:
                q = f"count by ({m.group(2)}) ({m.group(1)})"
            elif re.fullmatch(r"\s*label_values\(\s*(\w+)\s*\)\s*", q):
                q = "count by (" + re.fullmatch(r"\s*label_values\(\s*(\w+)\s*\)\s*", q).group(1) \
                    + ") ({__name__=~\"mlwatch_.+\"})"
            else:
                m = re.fullmatch(r"\s*query_result\((.*)\)\s*", q, re.S)
                if m:
                    q = m.group(1)
                elif re.fullmatch(r"\s*(metrics|label_names)\(.*\)\s*", q, re.S):
                    continue  # name listings, not PromQL
            out.append((f"{base} variable ${v.get('name')}", None, q))
        for p in panels(d.get("panels")):
            for t in p.get("targets") or []:
                if t.get("expr"):
                    title = (p.get("title") or "").strip() or f"panel {p.get('id')}"
                    out.append((f"{base} \"{title}\" {t.get('refId', '')}".rstrip(), None,
                                t["expr"]))
    return out


def query(url, expr):
    data = urllib.parse.urlencode({"query": expr}).encode()
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/api/v1/query", data, timeout=30) as r:
            body = json.load(r)
    except urllib.error.HTTPError as e:
        try:
            body = json.load(e)
        except ValueError:
            return None, f"HTTP {e.code}"
    except (urllib.error.URLError, OSError) as e:
        return None, str(e)
    if body.get("status") != "success":
        return None, body.get("error", "no error text")
    res = body["data"]["result"]
    if body["data"]["resultType"] == "scalar":
        return 1, None
    return len(res), None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--rules", required=True)
    ap.add_argument("--grafana")
    ap.add_argument("--may-be-empty", nargs="*", default=[])
    a = ap.parse_args()
    exprs = rule_exprs(a.rules)
    if a.grafana:
        exprs += dashboard_exprs(a.grafana)
    bad = 0
    counts = {"rules": 0, "dashboards": 0}
    for where, name, expr in exprs:
        q = substitute(expr)
        n, err = query(a.url, q)
        one = " ".join(q.split())
        counts["rules" if where.startswith("rules ") else "dashboards"] += 1
        if err is not None:
            print(f"ERROR  {where}: {one}\n       {err}")
            bad += 1
        elif n == 0 and name not in a.may_be_empty:
            print(f"EMPTY  {where}: {one}")
            bad += 1
        else:
            tag = " (may be empty)" if n == 0 else ""
            print(f"{n:5d}  {where}: {one}{tag}")
    print(f"{len(exprs)} expressions ({counts['rules']} from the rules, "
          f"{counts['dashboards']} from the dashboards), {bad} failed")
    return 1 if bad or not exprs else 0


if __name__ == "__main__":
    sys.exit(main())
