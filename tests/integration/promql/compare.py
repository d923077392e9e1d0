# compare.py PROM_URL MLWATCH_URL CORPUS T0_S: runs every query of CORPUS
# against both as instant queries (several times) and range queries, and
# compares result types, label sets and values (1e-9 relative, NaN = NaN).
import json, math, sys, urllib.parse, urllib.request

prom, mw, corpus, t0 = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])

def get(base, path, params):
    url = base + path + "?" + urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)

def num(s):
    return float(s.replace("+Inf", "inf").replace("-Inf", "-inf"))

def same(a, b):
    a, b = num(a), num(b)
    if math.isnan(a) and math.isnan(b):
        return True
    if a == b:
        return True
    if math.isinf(a) or math.isinf(b):  # else inf - 1 <= 1e-9 * inf
        return False
    return abs(a - b) <= 1e-9 * max(abs(a), abs(b))

def norm(data):
    t = data["resultType"]
    r = data["result"]
    if t in ("scalar", "string"):
        return t, {"": [r]}
    out = {}
    for s in r:
        key = json.dumps(sorted(s["metric"].items()))
        out[key] = s.get("values") or [s["value"]]
    return t, out

def compare(what, a, b):
    (ta, ra), (tb, rb) = norm(a), norm(b)
    if ta != tb:
        return "result type %s vs %s" % (ta, tb)
    if set(ra) != set(rb):
        return "label sets differ: prometheus only %s; mlwatch only %s" % (
            sorted(set(ra) - set(rb))[:3], sorted(set(rb) - set(ra))[:3])
    for k in ra:
        pa, pb = ra[k], rb[k]
        if len(pa) != len(pb):
            return "%s: %d points vs %d" % (k, len(pa), len(pb))
        for x, y in zip(pa, pb):
            if abs(float(x[0]) - float(y[0])) > 1e-6:
                return "%s: timestamps %s vs %s" % (k, x[0], y[0])
            if ta == "string":
                if x[1] != y[1]:
                    return "%s: %s vs %s" % (k, x[1], y[1])
            elif not same(x[1], y[1]):
                return "%s at %s: prometheus %s, mlwatch %s" % (k, x[0], x[1], y[1])
    return None

fails = total = 0
for line in open(corpus):
    q = line.strip()
    if not q or q.startswith("#"):
        continue
    cases = [("/api/v1/query", {"query": q, "time": "%.3f" % (t0 + off)}) for off in (600, 1200.5, 1507, 1800)]
    cases.append(("/api/v1/query_range", {"query": q, "start": "%.3f" % (t0 + 300), "end": "%.3f" % (t0 + 1800), "step": "60"}))
    cases.append(("/api/v1/query_range", {"query": q, "start": "%.3f" % (t0 + 317), "end": "%.3f" % (t0 + 900), "step": "45s"}))
    for path, params in cases:
        total += 1
        ca, a = get(prom, path, params)
        cb, b = get(mw, path, params)
        err = None
        if ca != cb:
            err = "status %d vs %d (%s / %s)" % (ca, cb, a.get("error"), b.get("error"))
        elif ca == 200:
            err = compare(q, a["data"], b["data"])
        if err:
            fails += 1
            print("DIFF %s %s: %s" % (path, json.dumps(params), err))
print("%d of %d comparisons differ" % (fails, total))
sys.exit(1 if fails else 0)
