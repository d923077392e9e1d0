# cluster_lib.sh - helpers of the cluster tests (cluster_view.sh,
# cluster_three.sh), sourced after lib.sh.

# launch NAME COMMAND ARGS...: an mlwatch process on a port of the kernel's
# choice (read from its log, $WORK/NAME.log); its URL in URL_NAME.
launch() {
    local name=$1 port=
    shift
    : >"$WORK/$name.log" # there before the child's redirection makes it
    "$MLWATCH_BIN" "$@" --listen 127.0.0.1:0 >"$WORK/$name.log" 2>&1 &
    PIDS+=($!)
    local pid=$!
    for _ in $(seq 200); do
        port=$(sed -n 's/.* info agent: .* listening on .* (port \([0-9]*\)).*/\1/p' "$WORK/$name.log")
        [ -n "$port" ] && break
        exited "$pid" && fail "$name exited: $(head -c 600 "$WORK/$name.log")"
        sleep 0.1
    done
    [ -n "$port" ] || fail "$name does not listen: $(head -c 600 "$WORK/$name.log")"
    printf -v "URL_${name//-/_}" 'http://127.0.0.1:%s' "$port"
}

# gpu_lines INDEX MODEL UTIL MEMUSED UUIDCHAR: a fake NVML scenario's GPU (its
# UUID unique per UUIDCHAR and INDEX; 100 W, 40 °C, SM clock 1900 - 10 × INDEX MHz).
gpu_lines() {
    printf 'gpu %s name="%s" uuid=GPU-%s0000000-0000-4000-8000-00000000000%s bus=00000000:%s:00.0\n' \
        "$1" "$2" "$5" "$1" "$((18 + 10 * $1))"
    printf 'gpu %s util=%s memtotal=85520809984 memused=%s power_mw=100000 energy_mj=1000000 sm_mhz=%s sm_max_mhz=1980 mem_mhz=2619 mem_max_mhz=2619 temp=40\n' \
        "$1" "$3" "$4" "$((1900 - 10 * $1))"
}
