# gen_data.py T0_MS: the data set of promql_compare.sh, one sample a line,
# series by series in time order: counters with a reset, gauges with NaN, a
# series that goes stale and returns, classic histogram buckets (and
# histograms at histogram_quantile's edges).
import math, sys

t0 = int(sys.argv[1])
step = 15000
n = 121  # 30 minutes
out = []

def series(name, labels, values):
    lab = ",".join('%s="%s"' % kv for kv in labels)
    for i, v in enumerate(values):
        if v is None:
            continue
        out.append('%s{%s} %d %s' % (name, lab, t0 + i * step, v))

for job, inst, rate in [("api", "a", 1.5), ("api", "b", 3), ("db", "a", 0.25), ("db", "c", 7)]:
    vals, c = [], 0.0
    for i in range(n):
        c += rate * (1 + (i % 3))
        if job == "db" and inst == "c" and i == 60:
            c = 2.0  # counter reset
        vals.append(repr(c))
    series("req_total", [("instance", inst), ("job", job)], vals)

for inst, base in [("a", 20), ("b", 18), ("c", 25)]:
    vals = []
    for i in range(n):
        v = base + 5 * math.sin(i / 7.0 + base)
        vals.append("NaN" if inst == "b" and i == 40 else repr(round(v, 3)))
    series("temp", [("instance", inst)], vals)

vals = []
for i in range(n):
    if 40 <= i < 80:
        vals.append("stale" if i == 40 else None)
    else:
        vals.append(repr(float(i)))
series("flappy", [("instance", "a")], vals)

series("job_weight", [("job", "api")], ["2"] * n)
series("job_weight", [("job", "db")], ["5"] * n)

for job, scale in [("api", 1), ("db", 3)]:
    for le, frac in [("0.1", 0.2), ("0.5", 0.6), ("1", 0.9), ("+Inf", 1.0)]:
        series("lat_bucket", [("job", job), ("le", le)],
               [repr(math.floor(i * 10 * scale * frac)) for i in range(n)])

# histogram_quantile's edges: no +Inf bucket, a +Inf count below the
# previous bucket's, a lone +Inf bucket, no observations (le="-1" first).
for name, buckets in [("hq_noinf_bucket", [("0.1", 10), ("1", 20)]),
                      ("hq_nonmono_bucket", [("0.1", 10), ("0.5", 30), ("1", 40), ("+Inf", 35)]),
                      ("hq_infonly_bucket", [("+Inf", 10)]),
                      ("hq_empty_bucket", [("-1", 0), ("1", 0), ("+Inf", 0)])]:
    for le, count in buckets:
        series(name, [("le", le)], [repr(i * count) for i in range(n)])

print("\n".join(out))
