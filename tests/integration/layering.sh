#!/usr/bin/env bash
# layering.sh - the arrows between the folders of src/ point one way
# (scripts/check_layering.py, run by scripts/lint.sh): the tree is clean,
# and an include against the flow planted in a copy of src/ is reported
# with its file, line and rule, and fails the check.
source "$(dirname "$0")/lib.sh"
check="$MLWATCH_SRC/scripts/check_layering.py"

python3 "$check" >"$WORK/clean.out" 2>&1 || fail "src/ breaks the layering:
$(cat "$WORK/clean.out")"
expect_eq "clean tree prints nothing" "" "$(cat "$WORK/clean.out")"

# plant CONTENT as the first line of FILE in a fresh copy of src/; run the check
planted() {
    rm -rf "$WORK/src" && cp -r "$MLWATCH_SRC/src" "$WORK/src"
    sed -i "1i $2" "$WORK/src/$1"
    rc=0
    python3 "$check" "$WORK/src" >"$WORK/planted.out" 2>&1 || rc=$?
}

planted store/store.c '#include "../query/api.h"'
expect_eq "store including query: status" 1 "$rc"
expect_eq "store including query: report" "src/store/store.c:1: store/ includes query/api.h: store/ may include only core, proto
layering: 1 include(s) against the flow (rule table: scripts/check_layering.py)" "$(cat "$WORK/planted.out")"

planted core/log.c '#include "../collect/collector.h"'
expect_eq "core including collect: status" 1 "$rc"
expect_eq "core including collect: report" "src/core/log.c:1: core/ includes collect/collector.h: core/ may include only itself
layering: 1 include(s) against the flow (rule table: scripts/check_layering.py)" "$(cat "$WORK/planted.out")"

planted derive/idle.c '#include "../notify/notify.h"'
expect_eq "derive including notify: status" 1 "$rc"
expect_eq "derive including notify: report" "src/derive/idle.c:1: derive/ includes notify/notify.h: derive/ may include only core, collect, kube
layering: 1 include(s) against the flow (rule table: scripts/check_layering.py)" "$(cat "$WORK/planted.out")"

# a sink does not include its siblings
planted ship/queue.c '#include "../notify/notify.h"'
expect_eq "ship including notify: status" 1 "$rc"

# the published interfaces: the module contract, the router for route owners
planted store/store.c '#include "../agent/module.h"'
expect_eq "store including agent/module.h: status" 0 "$rc"
planted derive/energy.c '#include "../serve/http.h"'
expect_eq "derive including serve/http.h: status" 0 "$rc"
planted derive/energy.c '#include "../serve/exposition.h"'
expect_eq "derive including the rest of serve: status" 1 "$rc"
planted collect/cpu.c '#include "../serve/http.h"'
expect_eq "collect including serve/http.h: status" 1 "$rc"

# a folder the table does not know fails, so that a new one gets its rule
mkdir -p "$WORK/src/newstage" && echo '/* x */' >"$WORK/src/newstage/x.c"
rc=0
python3 "$check" "$WORK/src" >"$WORK/planted.out" 2>&1 || rc=$?
expect_eq "unknown folder: status" 1 "$rc"
grep -q "src/newstage/x.c: folder newstage/ is not in the rule table" "$WORK/planted.out" ||
    fail "unknown folder not reported: $(cat "$WORK/planted.out")"
done_ok
