#!/usr/bin/python3
"""promql_exprs.py - run every PromQL expression of the rules and the Grafana
dashboards against a Prometheus and report how many series each returns
(tests/integration/deploy_promql.sh).

  promql_exprs.py --url URL --rules RULES.yml [--grafana DIR] [--may-be-empty NAME ...]
  promql_exprs.py --url PROMETHEUS --compare NAME=URL... [--at T] --rules ... [--grafana DIR]

With --compare, each expression runs on every backend at one instant (T,
default 3 s ago) with every range window WINDOW long, and the answers must
be the same: see compare() and the tolerances below. With --golden FILE the
answers that must be equal exactly (no rate, counter or growing gauge; not
the host's kernel) must also be FILE's, series by series and value by value
(UPDATE_GOLDEN=1 writes it).

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
import math
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import yaml

DURATIONS = {
    "__rate_interval": "1m", "__interval": "15s", "__range": "1h",
    "__range_s": "3600", "__range_ms": "3600000", "__interval_ms": "15000",
}
# Compared across backends (--compare), a series is its labels less those
# a scrape adds and remote write does not carry (instance, job) and less
# __name__ (VictoriaMetrics drops it from the left side of `or` where
# Prometheus keeps it; no legend, alert or record uses it). A label with an
# empty value is no label (PromQL's own rule; VictoriaMetrics returns
# cgroup="" out of `sum by (cgroup)` where Prometheus leaves it out).
SCRAPE_LABELS = {"instance", "job", "__name__"}
# Compared, every range window (the rules' own [10m], [1h], [1d] and the
# dashboards' $__rate_interval and $__range) is WINDOW: each backend holds
# all of it (the scrape began seconds after the agents did, so a window
# reaching back to their start holds less on Prometheus: genuinely fewer
# samples, not a difference of the backends).
WINDOW = "20s"
COMPARE_DURATIONS = dict(DURATIONS, __rate_interval=WINDOW, __range=WINDOW, __range_s="20",
                         __range_ms="20000")
# Values that move between two samples, equal within a tolerance; every
# other value must be equal exactly.
#  - a rate or increase: each backend's window ends at another sample (a
#    scrape every 1 s, the agents' own collection every 500 ms): within
#    RATE_TOL of each other (a counter that steps once a 500 ms cycle, as
#    the collector errors do, takes 40 steps in the window: one is 2.5 %,
#    and either end of the window can be a step off, with extrapolation);
#  - a counter, or a gauge that grows with time (idle seconds, an age, a
#    timestamp), read at an instant: the scrape's sample and the agent's own
#    are up to a second apart, which on a counter of seconds' age is
#    several per cent: within SAMPLE_TOL.
RATE = re.compile(r"\b(rate|irate|increase|delta|idelta|deriv)\s*\([^\[\]]*\[[^\]]*\]\s*\)")
SAMPLED = re.compile(r"\b(time|timestamp)\s*\(|_total\b|idle_seconds|age_seconds")
RATE_TOL = 0.075
SAMPLE_TOL = 0.10
ABS_TOL = 1e-9
# Where a backend truly differs: (backend, regex on the expression's place,
# why); only that backend's differences there are let through.
KNOWN = [
    ("vm", r'"CPU throttled periods"',
     "VictoriaMetrics answers X / (Y > 0) with 0 for a container whose Y (CFS periods per "
     "second) and X are 0, where PromQL filters it out: on VictoriaMetrics the panel "
     "also draws the containers without a CPU quota, at 0"),
]
# (a variable's name starts with a letter or _: "$1" is label_replace's
# group reference and stays)
VAR = r"(?:\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$([A-Za-z_]\w*))"


def substitute(expr, durations=None):
    durations = durations or DURATIONS

    def name(m):
        return m.group(1) or m.group(2) or m.group(3)

    # label="$var" -> label=~".*" (what "All" amounts to)
    expr = re.sub(r'(\w+)\s*=\s*"' + VAR + '"',
                  lambda m: f'{m.group(1)}=~".*"' if name_of(m, 1) not in durations else m.group(0),
                  expr)

    def repl(m):
        n = name(m)
        return durations.get(n, ".*")
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


def query(url, expr, at=None):
    """(number of series, error); with at, (result, error): the result as
    {labels without those only a scrape adds: value}."""
    params = {"query": expr}
    if at is not None:
        params["time"] = f"{at:.3f}"
    data = urllib.parse.urlencode(params).encode()
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
    if at is not None:
        if body["data"]["resultType"] == "scalar":
            return {(): float(res[1])}, None
        out = {}
        for r in res:
            key = tuple(sorted((k, v) for k, v in r["metric"].items() if k not in SCRAPE_LABELS and v != ""))
            out[key] = float(r["value"][1])
        return out, None
    if body["data"]["resultType"] == "scalar":
        return 1, None
    return len(res), None


def tolerance(q):
    """The relative tolerance of expression Q, and its class."""
    if SAMPLED.search(RATE.sub("", q)):
        return SAMPLE_TOL, "sampled"
    if RATE.search(q):
        return RATE_TOL, "rate"
    return 0.0, "exact"


def close(a, b, tol):
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= max(ABS_TOL if tol else 0.0, tol * max(abs(a), abs(b)))


def fmt_series(key):
    return "{" + ", ".join(f'{k}="{v}"' for k, v in key) + "}"


# Exact answers whose value is the test machine's, not the fixtures': left
# out of the golden file (the kernel of mlwatch_uname_info is the host's).
HOST_DEPENDENT = re.compile(r"mlwatch_uname_info")


def golden_lines(where, res):
    """The golden file's lines of one expression's exact answer."""
    return [f"{where}\t{fmt_series(k)}\t{v!r}" for k, v in sorted(res.items())]


def compare(a, exprs):
    """Each expression on every backend at one instant: the same series
    (labels only a scrape adds left out) with the same values, within the
    tolerance for moving ones; 1 if any differs beyond KNOWN."""
    backends = [("prometheus", a.url)] + [tuple(c.split("=", 1)) for c in a.compare]
    at = a.at if a.at is not None else time.time() - 3
    bad = 0
    widest = {"rate": (0.0, ""), "sampled": (0.0, "")}  # the largest difference let through, where
    golden = []
    for where, _, expr in exprs:
        q = re.sub(r"\[\d+[smhdwy](\d+[smhdwy])*\]", f"[{WINDOW}]", substitute(expr, COMPARE_DURATIONS))
        one = " ".join(q.split())
        got = {}
        for name, url in backends:
            got[name], err = query(url, q, at)
            if err is not None:
                print(f"ERROR  {name} {where}: {one}\n       {err}")
                bad += 1
        if any(v is None for v in got.values()):
            continue
        tol, cls = tolerance(q)
        ref = got["prometheus"]
        if not tol and not HOST_DEPENDENT.search(q):
            golden += golden_lines(where, ref)
        diffs = []
        for name, res in got.items():
            if name == "prometheus":
                continue
            for k in sorted(set(ref) | set(res)):
                if k not in res:
                    diffs.append(f"{name} lacks {fmt_series(k)} = {ref[k]:g}")
                elif k not in ref:
                    diffs.append(f"{name} has {fmt_series(k)} = {res[k]:g}, prometheus has not")
                elif not close(ref[k], res[k], tol):
                    diffs.append(f"{name} {fmt_series(k)} = {res[k]:.9g}, prometheus {ref[k]:.9g}")
                elif ref[k] != res[k] and not math.isnan(ref[k]):
                    rel = abs(ref[k] - res[k]) / max(abs(ref[k]), abs(res[k]))
                    if rel > widest[cls][0]:
                        widest[cls] = (rel, f"{name} {where} {fmt_series(k)}")
        known = [why for b, pat, why in KNOWN if re.search(pat, where) and
                 all(d.startswith(b + " ") for d in diffs)]
        tag = f" ({cls}: within {100 * tol:g} %)" if tol else " (exactly)"
        if diffs and known:
            print(f"KNOWN  {where}: {one}\n       {known[0]}: {'; '.join(diffs[:4])}")
        elif diffs:
            print(f"DIFF   {where}: {one}\n       " + "\n       ".join(diffs[:8]))
            bad += 1
        else:
            print(f"{len(ref):5d}  {where}: {one}: the same on {len(backends)} backends{tag}")
    if a.golden:
        bad += check_golden(a.golden, golden)
    print(f"{len(exprs)} expressions compared on {', '.join(n for n, _ in backends)}, {bad} differ; "
          "the largest differences let through: " +
          "; ".join(f"{c} {100 * r:.2f} % ({w or 'none'})" for c, (r, w) in widest.items()))
    return 1 if bad or not exprs else 0


def check_golden(path, lines):
    """The exact answers against the golden file PATH (written instead with
    UPDATE_GOLDEN=1): the number of lines that differ."""
    text = "".join(line + "\n" for line in lines)
    if os.environ.get("UPDATE_GOLDEN") == "1":
        with open(path, "w") as f:
            f.write(text)
        print(f"wrote {path}: {len(lines)} exact answers")
        return 0
    try:
        with open(path) as f:
            want = f.read().splitlines()
    except OSError as e:
        print(f"ERROR  golden file: {e} (run with UPDATE_GOLDEN=1 and review it)")
        return 1
    missing = sorted(set(want) - set(lines))
    extra = sorted(set(lines) - set(want))
    for line in missing:
        print(f"GOLDEN expected, not answered: {line}")
    for line in extra:
        print(f"GOLDEN answered, not expected: {line}")
    if not missing and not extra:
        print(f"{len(lines)} exact answers as in {os.path.basename(path)}")
    return len(missing) + len(extra)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--rules", required=True)
    ap.add_argument("--grafana")
    ap.add_argument("--may-be-empty", nargs="*", default=[])
    ap.add_argument("--compare", action="append", default=[], metavar="NAME=URL")
    ap.add_argument("--at", type=float)
    ap.add_argument("--golden", help="with --compare: the exact answers (series and values)")
    a = ap.parse_args()
    exprs = rule_exprs(a.rules)
    if a.grafana:
        exprs += dashboard_exprs(a.grafana)
    if a.compare:
        return compare(a, exprs)
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
