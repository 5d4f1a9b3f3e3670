#!/usr/bin/env bash
# simnodes.sh - simulated nodes on one machine: each "node" is a set of
# Linux namespaces of its own -- network (a veth pair to a bridge in the
# root namespace, its own address), UTS (host name nodeI), IPC (System V),
# mount (its own /dev/shm, so POSIX shared memory is not shared) and PID --
# and MPI jobs are launched across them by hydra with a launcher that
# enters a node's namespaces the way ssh would log into it. MPICH (its
# node detection, its shared memory) and mpix-acc (its node peers, its
# stream-executed path, UCX's shared-memory, CMA and IPC transports) then
# see separate nodes that talk over a real network stack (TCP over veth).
#
#   scripts/simnodes.sh run [-N NODES] [-p PPN] [--keep] -- MPIEXEC-ARGS...
#       make NODES nodes (default 2), run `mpiexec -f HOSTS -launcher rsh
#       -launcher-exec simnodes.sh -iface BRIDGE MPIEXEC-ARGS...` with PPN
#       ranks per node (default 1; -n in MPIEXEC-ARGS gives the total),
#       remove the nodes, exit with mpiexec's status. In the job,
#       SIMNODES_DIR names the state folder: `simnodes.sh link I down|up`
#       cuts or restores node I's link from inside the job (or from a test
#       script beside it). SIMNODES_NET=X asks for the subnet
#       10.78.X.0/24 (taken only if nothing here routes it yet).
#   scripts/simnodes.sh check          can nodes be made here? (exit 0/1)
#   scripts/simnodes.sh rsh HOST CMD   (hydra's launcher: run CMD on HOST)
#   scripts/simnodes.sh link I down|up (needs SIMNODES_DIR)
#
# Needs root (or CAP_SYS_ADMIN + CAP_NET_ADMIN), unshare, nsenter, ip
# (iproute2) and a kernel with bridge and veth. Names are unique per run
# (bridge mxsnXXXX, a 10.78.X.0/24 not routed here yet, chosen under
# /tmp/simnodes.lock), so runs may overlap; a killed run's leftovers are
# removed by the next run.
set -euo pipefail
self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")

die() {
    echo "simnodes: $*" >&2
    exit 2
}

node_pid() { cat "$SIMNODES_DIR/node$1.pid"; }

enter() { # I CMD...: run CMD in node I's namespaces
    local pid
    pid=$(node_pid "$1")
    shift
    nsenter -t "$pid" -n -u -i -m -p -- "$@"
}

cmd_rsh() {
    [ -n "${SIMNODES_DIR:-}" ] || die "rsh: SIMNODES_DIR is not set"
    local host=$1
    shift
    [[ $host =~ ^node([0-9]+)$ ]] || die "rsh: unknown host $host"
    # like ssh: the words make one shell command line on the node, run
    # from the caller's directory
    enter "${BASH_REMATCH[1]}" /bin/sh -c "cd '$PWD' 2>/dev/null; $*"
}

cmd_link() {
    [ -n "${SIMNODES_DIR:-}" ] || die "link: SIMNODES_DIR is not set"
    local i=$1 state=$2
    [[ $state =~ ^(up|down)$ ]] || die "link: up or down, not $state"
    ip link set "$(cat "$SIMNODES_DIR/veth$i")" "$state"
}

teardown() {
    local d=$1
    [ -d "$d" ] || return 0
    for f in "$d"/node*.pid; do
        [ -e "$f" ] || continue
        kill -9 "$(cat "$f")" 2>/dev/null || true
    done
    for f in "$d"/unshare*.pid; do
        [ -e "$f" ] || continue
        kill -9 "$(cat "$f")" 2>/dev/null || true
    done
    [ -e "$d/bridge" ] && ip link del "$(cat "$d/bridge")" 2>/dev/null || true
    for f in "$d"/veth*; do
        [ -e "$f" ] && ip link del "$(cat "$f")" 2>/dev/null || true
    done
    rm -rf "$d"
}

# Alive? (a node's or unshare's recorded process still exists)
pid_alive() { [ -n "$1" ] && kill -0 "$1" 2>/dev/null; }

# Remove what runs killed before their teardown left behind (a SIGKILL
# skips the EXIT trap): their bridges keep their 10.78.X.1/24 address and
# route in this namespace. A state folder counts as stale when it is older
# than a minute and none of its recorded processes lives.
reap_stale() { # OWN_DIR
    local d f live
    for d in /tmp/simnodes.*/; do
        d=${d%/}
        [ -d "$d" ] && [ "$d" != "$1" ] || continue
        [ -n "$(find "$d" -maxdepth 0 -mmin +1 2>/dev/null)" ] || continue
        live=0
        for f in "$d"/node*.pid "$d"/unshare*.pid; do
            [ -e "$f" ] && pid_alive "$(cat "$f")" && live=1
        done
        if [ $live = 0 ]; then teardown "$d"; fi
    done
    return 0
}

setup() { # DIR NODES
    local d=$1 n=$2
    mkdir -p "$d"
    # The subnet must be free in this namespace: a second route to the same
    # 10.78.X.0/24 (a concurrent run, a killed run's bridge) sends the
    # host's replies to hydra's proxies out of the wrong bridge, and the
    # job hangs before MPI_Init returns. Choice and bridge under one lock.
    exec 9>/tmp/simnodes.lock
    flock 9
    reap_stale "$d"
    local id net="" tries
    for ((tries = 0; tries < 100; tries++)); do
        id=$(printf '%04x' $((RANDOM % 65536)))
        ip link show "mxsn$id" >/dev/null 2>&1 || break
    done
    for ((tries = 0; tries < 200; tries++)); do
        local cand=$((RANDOM % 200 + 20))
        # SIMNODES_NET=X asks for 10.78.X.0/24 first (tests of the choice)
        [ $tries = 0 ] && [ -n "${SIMNODES_NET:-}" ] && cand=$SIMNODES_NET
        if [ -z "$(ip -4 route show "10.78.$cand.0/24" 2>/dev/null)" ] &&
            ! ip -4 -o addr show 2>/dev/null | grep -q " inet 10\.78\.$cand\."; then
            net=$cand
            break
        fi
    done
    [ -n "$net" ] || die "no free 10.78.X.0/24 subnet (200 tries)"
    local br=mxsn$id
    ip link add "$br" type bridge || die "cannot make a bridge (root and the bridge module needed)"
    echo "$br" >"$d/bridge"
    ip addr add "10.78.$net.1/24" dev "$br"
    ip link set "$br" up
    flock -u 9
    exec 9>&-
    echo "10.78.$net.1" >"$d/gateway"
    {
        echo "127.0.0.1 localhost"
        echo "10.78.$net.1 simnodes-host"
        for ((i = 0; i < n; i++)); do echo "10.78.$net.$((i + 10)) node$i"; done
    } >"$d/hosts"
    for ((i = 0; i < n; i++)); do
        # the node: namespaces kept alive by a sleeping process (PID 1 of
        # its PID namespace), with its own /dev/shm and /etc/hosts
        unshare --net --uts --ipc --mount --pid --fork --mount-proc --propagation private \
            /bin/sh -c "hostname node$i; mount -t tmpfs -o mode=1777 tmpfs /dev/shm; \
                mount --bind '$d/hosts' /etc/hosts; exec sleep infinity" 2>>"$d/unshare.log" &
        echo $! >"$d/unshare$i.pid"
        disown $! # no "Killed" notice at teardown
        local pid="" tries=0
        while [ -z "$pid" ] && [ $tries -lt 100 ]; do
            pid=$(pgrep -P "$(cat "$d/unshare$i.pid")" sleep || true)
            [ -n "$pid" ] || sleep 0.05
            tries=$((tries + 1))
        done
        [ -n "$pid" ] || die "node $i did not start"
        echo "$pid" >"$d/node$i.pid"
        local v=mxv${id}n$i
        ip link add "$v" type veth peer name eth0 netns "$pid"
        echo "$v" >"$d/veth$i"
        ip link set "$v" master "$br" up
        nsenter -t "$pid" -n ip link set lo up
        nsenter -t "$pid" -n ip addr add "10.78.$net.$((i + 10))/24" dev eth0
        nsenter -t "$pid" -n ip link set eth0 up
        nsenter -t "$pid" -n ip route add default via "10.78.$net.1"
    done
    # the nodes reach the host (when ping is there to ask)
    command -v ping >/dev/null || return 0
    for ((i = 0; i < n; i++)); do
        local ok=0
        for _ in $(seq 1 50); do
            if SIMNODES_DIR=$d enter "$i" ping -c1 -W1 "10.78.$net.1" >/dev/null 2>&1; then
                ok=1
                break
            fi
            sleep 0.1
        done
        [ $ok = 1 ] || die "node $i cannot reach the host (bridge 10.78.$net.1)"
    done
}

cmd_check() {
    local d
    d=$(mktemp -d /tmp/simnodes.XXXXXX)
    if (setup "$d" 2) >"$d.log" 2>&1; then
        rm -f "$d.log"
        teardown "$d"
        echo "simnodes: ok (namespaces, bridge and veth work here)"
        return 0
    fi
    teardown "$d"
    cat "$d.log" >&2
    rm -f "$d.log"
    echo "simnodes: cannot make nodes here (root, unshare, nsenter, ip, bridge and veth needed)"
    return 1
}

cmd_run() {
    local n=2 ppn=1 keep=0
    while [ $# -gt 0 ]; do
        case $1 in
        -N) n=$2; shift 2 ;;
        -p) ppn=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        --) shift; break ;;
        *) die "run: unknown option $1" ;;
        esac
    done
    local d
    d=$(mktemp -d /tmp/simnodes.XXXXXX)
    # shellcheck disable=SC2064
    if [ $keep = 0 ]; then
        trap "teardown '$d'" EXIT
        trap "exit 143" TERM
        trap "exit 130" INT
    fi
    setup "$d" "$n"
    for ((i = 0; i < n; i++)); do echo "node$i:$ppn"; done >"$d/hostfile"
    export SIMNODES_DIR=$d
    local rc=0
    "${MPIEXEC:-mpiexec}" -f "$d/hostfile" -launcher rsh -launcher-exec "$self" \
        -iface "$(cat "$d/bridge")" "$@" || rc=$?
    [ $keep = 1 ] && echo "simnodes: kept $d (teardown: kill its node*.pid, ip link del $(cat "$d/bridge"))" >&2
    return $rc
}

case ${1:-} in
run) shift; cmd_run "$@" ;;
check) cmd_check ;;
link) shift; cmd_link "$@" ;;
node*) cmd_rsh "$@" ;; # hydra's rsh launcher: HOST CMD...
rsh) shift; cmd_rsh "$@" ;;
*) sed -n '2,29p' "$0" >&2; exit 2 ;;
esac
