#!/usr/bin/env python3
# promqltest_run.py - runs Prometheus's own PromQL test files (the
# promqltest format of Prometheus 2.x: load, clear, eval instant at,
# eval_fail, eval_ordered; and of 3.x: eval range from S to E step D,
# expect fail/ordered/string/warn/info/no_warn/no_info, load_with_nhcb)
# against an mlwatch agent through its HTTP API, and counts the evals that
# pass. Annotations are checked as Prometheus's runner checks them: the
# answer's warnings and infos (of the instant query for an instant eval, of
# the range query for a range eval) against `expect warn/info` (msg: exact
# text with its position, regex:, or bare: any), `expect no_warn/no_info`
# (none) and eval_warn/eval_info (at least one); an eval without such
# lines does not look at them. Native histogram samples ({{schema:0 sum:5
# count:4 buckets:[1 2 1]}}, `{{A}}+{{B}}xN`, `{{A}}xN`) go in through
# remote write's histograms field; an expected histogram is compared with
# the API's "histogram"/"histograms" answer (count, sum and every non-empty
# bucket's rule, bounds and count, within 1e-6; the schema shows in the
# bounds, the counter-reset hint not at all). The files are not part of this repository: read
# them from a checkout of Prometheus (see docs/promql.md, "Prometheus's test
# files"), e.g.
#
#   git -C prometheus show v2.42.0:promql/testdata/functions.test > /tmp/t/functions.test
#   bench/promqltest_run.py build/mlwatch /tmp/t/*.test
#
# Each `load` goes in by remote write (tests/integration/promql_load.c); each
# `clear` (and each file) starts a fresh agent on an empty data folder. An
# eval passes as Prometheus's test runner decides: the instant query's
# answer has exactly the expected series, values within 1e-6 relative (in
# order for eval_ordered); eval_fail must be refused; and (not ordered) the
# same query as a range query from T-1m to T+1m, step 1m, must give the same
# answer at T. -v prints every failure. --closed-windows runs the agent
# with --query-closed-windows (Prometheus 2's windows, for 2.x's files);
# otherwise it runs with --query-delayed-name-removal, as Prometheus's own
# test engine (promqltest) enables delayed name removal.
import json, math, os, re, shutil, socket, subprocess, sys, tempfile, time
import urllib.error, urllib.parse, urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
DUR = re.compile(r"(\d+)(ms|y|w|d|h|m|s)")
UNIT_MS = {"ms": 1, "s": 1000, "m": 60000, "h": 3600000, "d": 86400000, "w": 604800000, "y": 31536000000}


def dur_ms(s):
    s = s.strip()
    if s in ("0", ""):
        return 0
    pos, total = 0, 0
    for m in DUR.finditer(s):
        if m.start() != pos:
            raise ValueError("bad duration " + s)
        total += int(m.group(1)) * UNIT_MS[m.group(2)]
        pos = m.end()
    if pos != len(s):
        raise ValueError("bad duration " + s)
    return total


def parse_number(s):
    s = s.strip()
    low = s.lower().lstrip("+-")
    if low in ("inf", "nan"):
        v = float("inf") if low == "inf" else float("nan")
        return -v if s.startswith("-") else v
    try:
        return float(int(s, 0))
    except ValueError:
        return float(s)


LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=)\s*"((?:[^"\\]|\\.)*)"\s*,?')


def unescape(s):
    return json.loads('"' + s.replace("\\'", "'") + '"')


def parse_series(line):
    """name{a="b"} rest -> (labels dict, rest)."""
    line = line.strip()
    m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)?", line)
    labels = {}
    if m.group(1):
        labels["__name__"] = m.group(1)
    i = m.end()
    if i < len(line) and line[i] == "{":
        i += 1
        while True:
            while i < len(line) and line[i] in " ,":
                i += 1
            if line[i] == "}":
                i += 1
                break
            lm = LABEL.match(line, i)
            if not lm:
                raise ValueError("bad labels: " + line)
            labels[lm.group(1)] = unescape(lm.group(3))
            i = lm.end()
    # A label with an empty value is no label (Prometheus's labels drop it).
    return {k: v for k, v in labels.items() if v != ""}, line[i:].strip()


NUM = r"(?:[-+]?(?:Inf|NaN|inf|nan|0x[0-9a-fA-F]+|[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?))"
EXPAND = re.compile(r"^(" + NUM + r")(?:([-+])(" + NUM.replace("[-+]?", "") + r"))?x(\d+)$")


HIST_TOKEN = re.compile(r"\{\{[^}]*\}\}(?:[-+]\{\{[^}]*\}\})?(?:x\d+)?")


def tokens(values):
    """The value tokens of a series line, a {{...}} item (with its +{{...}}xN) as one."""
    out, i = [], 0
    while i < len(values):
        if values[i].isspace():
            i += 1
            continue
        m = HIST_TOKEN.match(values, i)
        if m:
            out.append(m.group(0))
            i = m.end()
            continue
        j = i
        while j < len(values) and not values[j].isspace():
            j += 1
        out.append(values[i:j])
        i = j
    return out


def parse_hist(text):
    """{{schema:0 sum:5 ...}} -> dict."""
    h = {"schema": 0, "sum": 0.0, "count": 0.0, "zc": 0.0, "zt": 0.0, "pos": {}, "neg": {},
         "custom": [], "hint": 0}
    body = text.strip()[2:-2]
    lists = {}
    for m in re.finditer(r"(\w+):\[([^\]]*)\]", body):
        lists[m.group(1)] = [parse_number(x) for x in m.group(2).split()]
    rest = re.sub(r"\w+:\[[^\]]*\]", " ", body)
    off = noff = 0
    for m in re.finditer(r"(\w+):(\S+)", rest):
        k, v = m.group(1), m.group(2)
        if k == "schema":
            h["schema"] = int(v)
        elif k == "sum":
            h["sum"] = parse_number(v)
        elif k == "count":
            h["count"] = parse_number(v)
        elif k == "z_bucket":
            h["zc"] = parse_number(v)
        elif k == "z_bucket_w":
            h["zt"] = parse_number(v)
        elif k == "offset":
            off = int(v)
        elif k == "n_offset":
            noff = int(v)
        elif k == "counter_reset_hint":
            h["hint"] = {"unknown": 0, "reset": 1, "not_reset": 2, "gauge": 3}[v]
        else:
            raise ValueError("histogram key " + k)
    for i, c in enumerate(lists.get("buckets", [])):
        h["pos"][off + i] = c
    for i, c in enumerate(lists.get("n_buckets", [])):
        h["neg"][noff + i] = c
    h["custom"] = lists.get("custom_values", [])
    return h


def reduce_hist(h, schema):
    if h["schema"] == -53 or schema >= h["schema"]:
        return h
    d = h["schema"] - schema
    r = dict(h, schema=schema, pos={}, neg={})
    for side in ("pos", "neg"):
        for i, c in h[side].items():
            t = ((i - 1) >> d) + 1
            r[side][t] = r[side].get(t, 0) + c
    return r


def add_hist(a, b, sign):
    s = min(a["schema"], b["schema"])
    a, b = reduce_hist(a, s), reduce_hist(b, s)
    r = dict(a, pos=dict(a["pos"]), neg=dict(a["neg"]))
    for side in ("pos", "neg"):
        for i, c in b[side].items():
            r[side][i] = r[side].get(i, 0) + sign * c
    for k in ("sum", "count", "zc"):
        r[k] = a[k] + sign * b[k]
    return r


def expand_hist(t):
    m = re.match(r"^(\{\{[^}]*\}\})(?:([-+])(\{\{[^}]*\}\}))?(?:x(\d+))?$", t)
    a = parse_hist(m.group(1))
    n = int(m.group(4)) if m.group(4) else 0
    out = []
    for _ in range(n + 1):
        out.append(a)
        if m.group(3):
            a = add_hist(a, parse_hist(m.group(3)), 1 if m.group(2) == "+" else -1)
    return out


def expand(values):
    """Values of a series line: None = omitted, 'stale', a float or a histogram (dict)."""
    out = []
    joined = tokens(values)
    for t in joined:
        if t.startswith("{{"):
            out.extend(expand_hist(t))
        elif t == "_":
            out.append(None)
        elif re.match(r"^_x(\d+)$", t):
            out.extend([None] * int(t[2:]))
        elif t == "stale":
            out.append("stale")
        else:
            m = EXPAND.match(t)
            if m:
                a = parse_number(m.group(1))
                d = parse_number(m.group(3)) if m.group(3) else 0.0
                if m.group(2) == "-":
                    d = -d
                for _ in range(int(m.group(4)) + 1):
                    out.append(a)
                    a += d
            else:
                out.append(parse_number(t))
    return out


def with_nhcb(defs, labels_of):
    """load_with_nhcb: each classic histogram (NAME_bucket{le=...}, NAME_count,
    NAME_sum) also as a custom-bucket native histogram NAME{...} (schema -53)."""
    groups = {}
    for key, l in labels_of.items():
        name = l.get("__name__", "")
        if not name.endswith("_bucket") or "le" not in l:
            continue
        try:
            le = parse_number(l["le"])
        except ValueError:
            continue
        base = dict((k, v) for k, v in l.items() if k != "le")
        base["__name__"] = name[:-7]
        groups.setdefault(fmt_labels(base), (base, []))[1].append((le, defs[key]))
    for bkey, (base, buckets) in groups.items():
        buckets.sort(key=lambda b: b[0])
        # Bounds spelt differently ("0.2", "2e-1") are one bucket: Prometheus's
        # converter keeps the first it sees and ignores the others.
        buckets = [b for i, b in enumerate(buckets) if i == 0 or b[0] != buckets[i - 1][0]]
        other = lambda suffix: defs.get(fmt_labels(dict(base, __name__=base["__name__"] + suffix)))
        cnt, sm = other("_count"), other("_sum")
        n = max(len(v) for _, v in buckets)
        custom = [le for le, _ in buckets if not math.isinf(le)]
        out = []
        for k in range(n):
            vals = [v[k] if k < len(v) else None for _, v in buckets]
            if any(x is None or isinstance(x, (str, dict)) for x in vals):
                out.append(None)
                continue
            h = {"schema": -53, "sum": 0.0, "count": 0.0, "zc": 0.0, "zt": 0.0, "pos": {}, "neg": {},
                 "custom": custom, "hint": 0}
            prev = 0.0
            for i, x in enumerate(vals):
                h["pos"][i] = x - prev
                prev = x
            h["count"] = prev
            if cnt and k < len(cnt) and isinstance(cnt[k], float):
                h["count"] = cnt[k]
            if sm and k < len(sm) and isinstance(sm[k], float):
                h["sum"] = sm[k]
            out.append(h)
        defs[bkey] = out


def fmt_labels(l):
    name = l.get("__name__", "")
    rest = ",".join('%s=%s' % (k, json.dumps(v, ensure_ascii=False)) for k, v in sorted(l.items()) if k != "__name__")
    return "%s{%s}" % (name, rest)


def fmt_side(side):
    if not side:
        return ""
    lo, hi = min(side), max(side)
    return ",".join([str(lo)] + [repr(float(side.get(i, 0))) for i in range(lo, hi + 1)])


def fmt_value(v):
    if isinstance(v, dict):  # promql_load.c's histogram value
        return "H|%d|%d|%r|%r|%r|%r|%s|%s|%s" % (
            v["schema"], v["hint"], float(v["zt"]), float(v["zc"]), float(v["count"]), float(v["sum"]),
            fmt_side(v["pos"]), fmt_side(v["neg"]), ",".join(repr(float(x)) for x in v["custom"]))
    if v == "stale":
        return "stale"
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(v)


class Agent:
    def __init__(self, binary, extra=()):
        self.binary = binary
        self.proc = None
        self.dir = None
        self.extra = extra

    def start(self):
        self.stop()
        self.dir = tempfile.mkdtemp(prefix="mw-promqltest-")
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        self.url = "http://127.0.0.1:%d" % port
        self.proc = subprocess.Popen(
            [self.binary, "agent", "--listen", "127.0.0.1:%d" % port, "--data-dir", self.dir + "/data",
             "--state-dir", self.dir + "/state", "--interval", "1h", "--disable-collectors", "gpu"] + list(self.extra),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except Exception:
                time.sleep(0.05)
        raise RuntimeError("agent did not start")

    def stop(self):
        if self.proc:
            self.proc.terminate()
            self.proc.wait()
            self.proc = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def query(self, path, params):
        url = self.url + path + "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=60) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            try:
                return e.code, json.load(e)
            except Exception:
                return e.code, {"status": "error", "error": "not JSON"}


def hist_bound(idx, h):
    s = h["schema"]
    if s == -53:
        cv = h["custom"]
        return -math.inf if idx < 0 else (math.inf if idx >= len(cv) else cv[idx])
    if s <= 0:
        e = idx << -s
        return math.ldexp(1, e) if e < 1024 else (1.7976931348623157e308 if e == 1024 else math.inf)
    frac = 2 ** ((idx & ((1 << s) - 1)) / (1 << s)) / 2
    e = (idx >> s) + 1
    return math.ldexp(frac, e) if e < 1025 else 1.7976931348623157e308


def hist_buckets(h):
    """The API's buckets of an expected histogram: [rule, lower, upper, count], empty ones left out."""
    out, zt = [], h["zt"]
    if h["schema"] == -53:
        for i in sorted(h["pos"]):
            out.append([0, hist_bound(i - 1, h), hist_bound(i, h), h["pos"][i]])
    else:
        for i in sorted(h["neg"], reverse=True):
            lo, hi = -hist_bound(i, h), -hist_bound(i - 1, h)
            if hi < 0 and hi > -zt:
                hi = -zt
            out.append([1, lo, hi, h["neg"][i]])
        if h["zc"] > 0:
            out.append([3, -zt, zt, h["zc"]])
        for i in sorted(h["pos"]):
            lo, hi = hist_bound(i - 1, h), hist_bound(i, h)
            if 0 < lo < zt:
                lo = zt
            out.append([0, lo, hi, h["pos"][i]])
    return [b for b in out if b[3] != 0]


def values_equal(e, g):
    """An expected value (float or histogram dict) against an answer's (float or the API's histogram)."""
    if isinstance(e, dict) or isinstance(g, dict):
        if not (isinstance(e, dict) and isinstance(g, dict)):
            return False
        if not (almost_equal(e["count"], num(g["count"])) and almost_equal(e["sum"], num(g["sum"]))):
            return False
        want, got = hist_buckets(e), g.get("buckets", [])
        if len(want) != len(got):
            return False
        for w, b in zip(want, got):
            if w[0] != b[0] or not all(almost_equal(w[k], num(b[k])) for k in (1, 2, 3)):
                return False
        return True
    return almost_equal(e, g)


def almost_equal(a, b):
    if math.isnan(a) and math.isnan(b):
        return True
    if a == b:
        return True
    diff = abs(a - b)
    min_normal = 2.2250738585072014e-308
    if a == 0 or b == 0 or diff < min_normal:
        return diff < 1e-6 * min_normal
    return diff / (abs(a) + abs(b)) < 1e-6


def num(s):
    return float(s.replace("+Inf", "inf").replace("-Inf", "-inf"))


def compare(expected, scalar, ordered, got):
    """got: list of (labels, value) or ('scalar', value). Returns None or why."""
    if scalar is not None:
        if got[0] != "scalar":
            return "expected a scalar, got %s" % got[0]
        return None if values_equal(scalar, got[1]) else "scalar %r, expected %r" % (got[1], scalar)
    if got[0] == "scalar":
        return "got a scalar, expected a vector"
    res = got[1]
    if len(res) != len(expected):
        return "%d series, expected %d: %s" % (len(res), len(expected),
                                                 [fmt_labels(l) + " " + repr(v) for l, v in res][:6])
    exp_by_key = {fmt_labels(l): (i, v) for i, (l, v) in enumerate(expected)}
    for pos, (l, v) in enumerate(res):
        k = fmt_labels(l)
        if k not in exp_by_key:
            return "unexpected series %s %r" % (k, v)
        i, ev = exp_by_key[k]
        if ordered and i != pos:
            return "%s at position %d, expected %d" % (k, pos, i)
        if not values_equal(ev, v):
            return "%s = %r, expected %r" % (k, v, ev)
    return None


def instant_answer(data):
    t = data["resultType"]
    if t == "scalar":
        return ("scalar", num(data["result"][1]))
    if t == "vector":
        return ("vector", [(s["metric"], s["histogram"][1] if "histogram" in s else num(s["value"][1]))
                           for s in data["result"]])
    return (t, [])


def range_answer(data, t_s, scalar):
    out = []
    for s in data["result"]:
        for ts, v in s.get("values", []):
            if abs(ts - t_s) < 1e-6:
                out.append((s["metric"], num(v)))
        for ts, h in s.get("histograms", []):
            if abs(ts - t_s) < 1e-6:
                out.append((s["metric"], h))
    if scalar:
        return ("scalar", out[0][1] if out else float("nan"))
    return ("vector", out)


def compare_range(expected, scalar, data, rng):
    """Range answer against expected series of per-step values."""
    start, end, step = rng
    got = {}
    for s in data["result"]:
        pts = {round(ts * 1000): num(v) for ts, v in s.get("values", [])}
        pts.update({round(ts * 1000): h for ts, h in s.get("histograms", [])})
        got[fmt_labels(s["metric"])] = pts
    want = {}
    for l, vals in expected:
        pts = {}
        for k, v in enumerate(vals or []):
            if v is not None and v != "stale":
                pts[start + k * step] = v
        want[fmt_labels(l)] = pts
    if scalar is not None:
        want = {"{}": {t: scalar for t in range(start, end + 1, step)}}
    if set(got) != set(want):
        return "series %s, expected %s" % (sorted(got)[:4], sorted(want)[:4])
    for k, pts in want.items():
        g = got[k]
        if set(g) != set(pts):
            return "%s: points at %s, expected %s" % (k, sorted(g)[:6], sorted(pts)[:6])
        for t, v in pts.items():
            if not values_equal(v, g[t]):
                return "%s at %d: %r, expected %r" % (k, t, g[t], v)
    return None


def check_annotations(flags, annos, ans):
    """None when the answer's warnings and infos are what the eval expects
    (Prometheus's promqltest rules), else why not."""
    got = {"warn": ans.get("warnings") or [], "info": ans.get("infos") or []}
    for kind, what in (("warn", "warnings"), ("info", "info annotations")):
        if kind in flags and not got[kind]:
            return "expected %s, got none" % what
        exp = annos.get(kind)
        if exp:
            match = lambda e, a: e[1] == a if e[0] == "msg" else e[1].search(a) is not None
            if not got[kind]:
                return "expected %s %s, got none" % (kind, [e[1] if e[0] == "msg" else e[1].pattern for e in exp])
            for e in exp:
                if not any(match(e, a) for a in got[kind]):
                    return "expected %s %r, got %s" % (kind, e[1] if e[0] == "msg" else e[1].pattern, got[kind])
            for a in got[kind]:
                if not any(match(e, a) for e in exp):
                    return "unexpected %s %r" % (kind, a)
        if "no_" + kind in annos and got[kind]:
            return "unexpected %s: %s" % (what, got[kind])
    return None


def compare_matrix(expected, data, rvec):
    """An instant query's range-vector (matrix) answer against `expect range
    vector from A to B step S` series, whose k-th value is at A + k*S."""
    if data["resultType"] != "matrix":
        return "got a %s, expected a range vector" % data["resultType"]
    start, _, step = rvec
    return compare_range(expected, None, data, (start, 0, step))


def eval_one(agent, expr, t_ms, rng, flags, annos, expected, scalar, string, unsupported, rvec=None):
    """None when the eval passes, else why not."""
    if unsupported:
        return "expects native histograms or a range vector answer (not supported by this runner)"
    t_s = t_ms / 1000
    if rng:
        code, ans = agent.query("/api/v1/query_range", {
            "query": expr, "start": "%.3f" % (rng[0] / 1000), "end": "%.3f" % (rng[1] / 1000),
            "step": "%.3f" % (rng[2] / 1000)})
        if "fail" in flags:
            return None if ans.get("status") == "error" else "expected an error"
        if ans.get("status") != "success":
            return "error %s: %s" % (code, ans.get("error"))
        return check_annotations(flags, annos, ans) or compare_range(expected, scalar, ans["data"], rng)
    code, ans = agent.query("/api/v1/query", {"query": expr, "time": "%.3f" % t_s})
    if "fail" in flags:
        return None if ans.get("status") == "error" else "expected an error"
    if ans.get("status") != "success":
        return "error %s: %s" % (code, ans.get("error"))
    why = check_annotations(flags, annos, ans)
    if why:
        return why
    if rvec:
        return compare_matrix(expected, ans["data"], rvec)
    if string is not None:
        d = ans["data"]
        return None if d["resultType"] == "string" and d["result"][1] == string else "string %r" % d
    why = compare(expected, scalar, "ordered" in flags, instant_answer(ans["data"]))
    # As promqltest, no range-mode check of start(), end(), range() or
    # step(): a range query resolves them differently.
    if (why is None and "ordered" not in flags and ans["data"]["resultType"] in ("vector", "scalar")
            and not re.search(r"(start|end|range|step)\(\)", expr)):
        code, rans = agent.query("/api/v1/query_range", {
            "query": expr, "start": "%.3f" % (t_s - 60), "end": "%.3f" % (t_s + 60), "step": "60"})
        if rans.get("status") != "success":
            why = "range mode: error %s: %s" % (code, rans.get("error"))
        else:
            why = compare(expected, scalar, False, range_answer(rans["data"], t_s, scalar is not None))
            if why:
                why = "range mode: " + why
    return why


def run_file(path, agent, loader, verbose, counts):
    lines = [l.strip() for l in open(path).read().split("\n")]
    lines = ["" if l.startswith("#") else l for l in lines]
    agent.start()
    i = 0
    fname = os.path.basename(path)
    while i < len(lines):
        l = lines[i]
        if not l:
            i += 1
            continue
        word = l.split()[0].lower()
        if word == "clear":
            agent.start()
            i += 1
        elif word in ("load", "load_with_nhcb"):
            gap = dur_ms(l.split(None, 1)[1])
            nhcb = word == "load_with_nhcb"
            defs = {}  # a series defined twice: the last definition (as Prometheus)
            labels_of = {}
            i += 1
            while i < len(lines) and lines[i]:
                try:
                    labels, vals = parse_series(lines[i])
                    defs[fmt_labels(labels)] = expand(vals)
                    labels_of[fmt_labels(labels)] = labels
                except (ValueError, IndexError, AttributeError, KeyError):
                    counts["bad_lines"] = counts.get("bad_lines", 0) + 1
                i += 1
            if nhcb:
                with_nhcb(defs, labels_of)
            rows = []
            for key, vals in defs.items():
                for k, v in enumerate(vals):
                    if v is not None:
                        rows.append("%s %d %s" % (key, k * gap, fmt_value(v)))
            with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
                f.write("\n".join(rows) + "\n")
            st = subprocess.run([loader, agent.url + "/api/v1/write", f.name], capture_output=True, text=True)
            os.unlink(f.name)
            if st.stdout.strip() != "204":
                print("%s:%d: load answered %s" % (fname, i, st.stdout.strip()), file=sys.stderr)
        elif word.startswith("eval"):
            lineno = i + 1
            m = re.match(r"^eval(?:_(fail|ordered|warn|info))?\s+instant\s+(?:at\s+(.+?))?\s+(.+)$", l)
            rm = re.match(r"^eval(?:_(fail|ordered|warn|info))?\s+range\s+from\s+(\S+)\s+to\s+(\S+)\s+step\s+(\S+)\s+(.+)$", l)
            if rm:
                mod, expr = rm.group(1), rm.group(5)
                rng = (dur_ms(rm.group(2)), dur_ms(rm.group(3)), dur_ms(rm.group(4)))
                t_ms = rng[0]
            else:
                mod, at, expr = m.group(1), m.group(2) or "0", m.group(3)
                rng = None
                t_ms = dur_ms(at)
            expected, scalar, string, unsupported, rvec = [], None, None, False, None
            flags = {mod} if mod else set()
            annos = {}  # warn/info/no_warn/no_info -> [(msg|regex, text or pattern)]
            i += 1
            while i < len(lines) and lines[i]:
                x = lines[i]
                if x.startswith("expect "):
                    e = x[7:].strip()
                    if e.startswith("fail"):
                        flags.add("fail")
                    elif e.startswith("ordered"):
                        flags.add("ordered")
                    elif e.startswith("string"):
                        q = e[6:].strip()
                        string = q[1:-1] if q[:1] in "`'" else json.loads(q)
                    elif re.match(r"^(warn|info|no_warn|no_info)\b", e):
                        am = re.match(r"^(warn|info|no_warn|no_info)(?:\s+(regex|msg):(.+))?$", e)
                        if not am:
                            raise ValueError("%s:%d: bad expect line %r" % (fname, i + 1, x))
                        kind = am.group(1)
                        if am.group(2) == "msg":
                            annos.setdefault(kind, []).append(("msg", am.group(3).strip()))
                        elif am.group(2) == "regex":
                            annos.setdefault(kind, []).append(("regex", re.compile(am.group(3).strip())))
                        else:
                            annos.setdefault(kind, []).append(("regex", re.compile("")))
                    elif e.startswith("range vector"):
                        rv = re.match(r"^range vector\s+from\s+(\S+)\s+to\s+(\S+)\s+step\s+(\S+)$", e)
                        if rv:
                            rvec = tuple(dur_ms(rv.group(k)) for k in (1, 2, 3))
                        else:
                            unsupported = True
                else:
                    try:
                        scalar = parse_number(x)
                    except ValueError:
                        labels, vals = parse_series(x)
                        vs = expand(vals)
                        expected.append((labels, vs if rng or rvec else (vs[0] if vs else None)))
                i += 1
            counts["total"] += 1
            why = eval_one(agent, expr, t_ms, rng, flags, annos, expected, scalar, string, unsupported, rvec)
            if why is None:
                counts["passed"] += 1
            elif verbose:
                print("FAIL %s:%d: %s\n    %s" % (fname, lineno, expr, why))
        else:
            raise ValueError("%s:%d: unknown command %r" % (fname, i + 1, l))


def main():
    args = sys.argv[1:]
    verbose = "-v" in args
    # Prometheus's test engine runs with delayed name removal (an opt-in
    # feature of the server); 2.x's files have neither it nor 3.x's windows.
    extra = (["--query-closed-windows"] if "--closed-windows" in args
             else ["--query-delayed-name-removal"])
    args = [a for a in args if a not in ("-v", "--closed-windows")]
    binary, files = args[0], args[1:]
    # one loader per run: two runs at once must not rebuild each other's
    loader = os.path.join(tempfile.gettempdir(), "mw-promqltest-load-%d" % os.getpid())
    subprocess.run(["cc", "-O1", "-o", loader, os.path.join(SRC, "tests/integration/promql_load.c"),
                    "-lsnappy", "-lcurl"], check=True)
    agent = Agent(os.path.abspath(binary), extra)
    total = {"total": 0, "passed": 0}
    try:
        for f in files:
            counts = {"total": 0, "passed": 0}
            try:
                run_file(f, agent, loader, verbose, counts)
            except Exception as e:  # a line this runner cannot read: the rest of the file is not counted
                print("%s: stopped: %s" % (os.path.basename(f), e))
            print("%-24s %4d / %4d" % (os.path.basename(f), counts["passed"], counts["total"]))
            for k in total:
                total[k] += counts[k]
    finally:
        agent.stop()
    print("%-24s %4d / %4d" % ("total", total["passed"], total["total"]))


if __name__ == "__main__":
    main()
