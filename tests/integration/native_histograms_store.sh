#!/usr/bin/env bash
# native_histograms_store.sh - native histograms in the store itself:
# /api/v1/store/export writes each histogram sample's histogram after its
# NaN reference (H|schema|hint|zero_threshold|zero_count|count|sum|POS|NEG|
# CUSTOM, buckets as index:count), exponential and custom-bucket ones and
# a series mixing floats and histograms; a resent request (a retried
# batch) is accepted as duplicates without growing the histograms file;
# a reference whose record is gone exports as H|missing.
source "$(dirname "$0")/lib.sh"
HERE="$MLWATCH_SRC/tests/integration"
LOADER="$WORK/promql_load"
cc -O1 -o "$LOADER" "$HERE/promql_load.c" -lsnappy -lcurl || fail "cannot compile the loader"

T0=1700000000
# H|schema|hint|zero_threshold|zero_count|count|sum|POS|NEG|CUSTOM (the
# loader's: POS and NEG one span, `offset,count,...`)
cat >"$WORK/data.txt" <<DATA
h ${T0}000 H|0|2|0.001|1|6|5|0,1,2,0,1|0,1|
c ${T0}000 H|-53|0|0|0|3|1.5|0,1,2||1,2
m ${T0}000 1
m $((T0 + 60))000 H|1|0|0|0|1|2.25|-1,1||
DATA
start_agent --interval 10s --disable-collectors gpu
expect_eq "remote write" 204 "$("$LOADER" "$AGENT_URL/api/v1/write" "$WORK/data.txt")"

export_of() { curl -s "$AGENT_URL/api/v1/store/export?match=$1"; }
HFILE="$WORK/data/data/histograms"
size_of() { stat -c %s "$HFILE"; }

expect_eq "an exponential histogram exported whole" \
    "{__name__=\"h\"} ${T0}000 nan 0x7ff4000000000000 H|0|2|0.001|1|6|5|0:1,1:2,2:0,3:1|0:1|" \
    "$(export_of h)"
expect_eq "a custom-bucket histogram exported with its bounds" \
    "{__name__=\"c\"} ${T0}000 nan 0x7ff400000000002b H|-53|0|0|0|3|1.5|0:1,1:2||1,2" \
    "$(export_of c)"
expect_eq "floats and histograms of one series" \
    "{__name__=\"m\"} ${T0}000 1 0x3ff0000000000000
{__name__=\"m\"} $((T0 + 60))000 nan 0x7ff4000000000060 H|1|0|0|0|1|2.25|-1:1||" \
    "$(export_of m)"
# Records: 8 bytes of header, then 35, 45 and 27 bytes of encoding.
size=$(size_of)
expect_eq "the histograms file holds the three records" 131 "$size"

# Resent: each series' newest sample (an older one is out of order, for
# floats as for histograms).
grep -v "^m ${T0}000 " "$WORK/data.txt" >"$WORK/again.txt"
exports() { export_of h; export_of c; export_of m; }
before=$(exports)
expect_eq "the newest samples again (a retried batch) are accepted" 204 \
    "$("$LOADER" "$AGENT_URL/api/v1/write" "$WORK/again.txt")"
expect_eq "the resent histograms did not grow the file" "$size" "$(size_of)"
expect_eq "no sample added, the same references kept" "$before" "$(exports)"

# A record lost (the file cut short, as a torn tail after a crash):
# its sample stays, marked.
truncate -s 48 "$HFILE"
expect_eq "a reference whose record is gone" \
    "{__name__=\"c\"} ${T0}000 nan 0x7ff400000000002b H|missing" "$(export_of c)"
done_ok
