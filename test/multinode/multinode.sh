#!/usr/bin/env bash
# test/multinode/multinode.sh - the inter-node path on every commit: MPI jobs
# across simulated nodes (scripts/simnodes.sh: each node its own network,
# host name, IPC, /dev/shm and PID namespace; UCX over TCP on veth pairs),
# host streams. Each case checks the program's PASS and, from
# MPIX_ACC_STATS=1, how every rank classified its peers and which UCX
# transports its endpoints use -- so the test fails if anything (MPICH,
# the library, UCX) took the processes for one node.
#
#   test/multinode/multinode.sh [BUILDDIR]   (default $MPIXACC_BUILDDIR, else <repo>/build)
#   MULTINODE_CASES="ring-2x1 link-down-errors" runs only those cases.
#
# Cases (about 40-60 s in all on 2 cores; a case whose MPICH finalize hangs
# -- an MPICH 4.0.2 defect over UCX TCP, see run_case -- costs 45 s):
#   ring-2x1, pingpong-2x1, nonovertaking-2x1, call_order-2x1
#                 2 nodes x 1 rank: every rank sees 0 peers on its node and 1
#                 elsewhere; every endpoint is tcp/eth0 only.
#   stream_comm-2x2, sx_path-2x2
#                 2 nodes x 2 ranks: 1 peer on the node, 2 elsewhere; the
#                 stream-executed path carries the messages within a node
#                 (sx_path: "path sx" non-zero) and endpoints to the other
#                 node are tcp/eth0.
#   pingpong-staged-2x1
#                 pingpong with MPIX_ACC_NET_STAGE=all: its messages of at
#                 most 8 KiB go through host memory across the nodes (every
#                 rank's stats line counts them).
#   ring-3x1      3 nodes.
#   stale-bridge  ring-2x1 while this namespace already routes the subnet
#                 the run asks for (SIMNODES_NET; a bridge like the one a
#                 killed run leaves behind) and a killed run's state folder
#                 exists: the run takes another subnet (it hung before
#                 MPI_Init returned when it took the same one: the host's
#                 replies to hydra's proxies left by the stale bridge) and
#                 removes the leftovers. Needs a free bridge name here.
#   link-down-errors
#                 MPIX_ACC_PEER_ERRORS=1, node 1's link cut for 10 s while
#                 rank 0 has receives (host wait, stream wait) and a send
#                 with rank 1 outstanding (test/mpi/link_down.c): the
#                 receives complete with the library's transport error
#                 while the link is down (TCP keep-alive, shortened here),
#                 the stream is released; MPI_Finalize returns on rank 0
#                 (rank 1, cut off, returns an error after
#                 MPIX_ACC_FINALIZE_PEER_TIMEOUT).
#   link-down-default
#                 default mode, the same cut: the receives stay pending
#                 while the link is down (MPI semantics: a peer is never
#                 given up), and complete with their data once it is back
#                 and rank 1 sends; MPI_Finalize returns on both.
set -u
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if [[ ${1:-} =~ ^[0-9]+$ ]]; then shift; fi
builddir=${1:-${MPIXACC_BUILDDIR:-$root/build}}
[ -f "$root/scripts/mpixacc-env.sh" ] && . "$root/scripts/mpixacc-env.sh"
sim=$root/scripts/simnodes.sh
if ! "$sim" check >/dev/null 2>&1; then
    "$sim" check
    echo "multinode.sh: FAIL: simulated nodes cannot be made on this machine"
    exit 1
fi
log=$(mktemp /tmp/mpixacc-multinode.XXXXXX)
trap 'rm -f "$log"' EXIT
fails=0
cases=${MULTINODE_CASES:-ring-2x1 pingpong-2x1 pingpong-staged-2x1 nonovertaking-2x1 call_order-2x1 stream_comm-2x2 sx_path-2x2 ring-3x1 stale-bridge link-down-errors link-down-default}
want() { [[ " $cases " == *" $1 "* ]]; }

fail() {
    echo "multinode.sh: FAIL ($1): $2"
    tail -25 "$log" | sed 's/^/    /'
    fails=$((fails + 1))
}

# case NAME NODES PPN PROGRAM [ENV=...]
run_case() {
    local name=$1 nodes=$2 ppn=$3 prog=$4
    shift 4
    want "$name" || return 0
    local n=$((nodes * ppn)) t0=$SECONDS
    # MPICH 4.0.2 (ch4:ucx) hangs in MPI_Finalize across these nodes more
    # often with 2 ranks per node and its own shared memory on (a plain MPI
    # program, MPIX_ACC_DISABLE=1: 7 of 8 runs); MPIR_CVAR_NOLOCAL=1 (UCX
    # carries MPICH's node-local messages too) makes it rarer. The
    # library's node classification does not depend on it.
    local nolocal=""
    [ "$ppn" -gt 1 ] && nolocal=MPIR_CVAR_NOLOCAL=1
    # UCX's TCP connection set-up gives up after UCX_TCP_MAX_CONN_RETRIES
    # (25) reconnects ("try to increase net.core.somaxconn ... or increase
    # UCX_TCP_MAX_CONN_RETRIES"): seen three times in nonovertaking-2x1 with
    # the 2 cores busy (CI's ASan leg, and CI beside a build), where a lane
    # connected mid-run lost the simultaneous-connect race again and again;
    # the sends then failed "peer unreachable" (reported, no hang). The
    # simulated nodes share 2 cores, so the harness allows more retries.
    env MPIX_ACC_STATS=1 UCX_TCP_MAX_CONN_RETRIES=255 $nolocal "$@" timeout 45 "$sim" run \
        -N "$nodes" -p "$ppn" -- -n "$n" "$builddir/test/mpi/$prog" >"$log" 2>&1
    local rc=$? why="" note=""
    # MPICH's own MPI_Finalize (after the library's, which prints the stats
    # lines and hands over) hangs across these nodes in a fraction of runs:
    # a plain MPI_Init/MPI_Barrier/MPI_Finalize program with the library
    # disabled hung in 2-5 of 6 runs with 2 or 3 nodes (UCX debug log: ep
    # close in flush mode waits on a peer that already closed its TCP
    # connection; MPICH 4.0.2 closes without error handling). Such a run
    # counts only when everything the library does was done: PASS, every
    # rank's statistics printed, no FAIL.
    local nstats
    nstats=$(grep -c "stats: peers: " "$log")
    if [ $rc -eq 124 ] && grep -q "PASS" "$log" && [ "$nstats" -eq "$n" ] && ! grep -q " FAIL" "$log"; then
        rc=0
        note=" [MPICH's MPI_Finalize hung after the library's had finished; job ended by timeout]"
    fi
    [ $rc -eq 0 ] || why="exit status $rc"
    grep -q "PASS" "$log" || why="${why:+$why, }no PASS"
    if grep -q ' ERROR ' "$log"; then why="${why:+$why, }$(grep -m1 ' ERROR ' "$log" | cut -c1-200)"; fi
    local here=$((ppn - 1)) away=$((n - ppn))
    local np
    np=$(grep -c "stats: peers: $here on this node, $away on other nodes; UCX endpoints" "$log")
    [ "$np" -eq "$n" ] || why="${why:+$why, }$np of $n ranks saw $here peers on their node and $away elsewhere"
    # every rank's endpoints: those over TCP use eth0 only, and no more
    # endpoints use other (shared-memory) transports than the rank has
    # peers on its node -- a peer on another node is never reached by them
    local nok
    nok=$(grep -oE "stats: peers: [0-9]+ on this node, [0-9]+ on other nodes; UCX endpoints [0-9]+: .*" "$log" |
        awk -v here="$here" '{
            sub(/.*UCX endpoints [0-9]+: /, ""); n = split($0, kinds, ", "); other = 0; bad = 0
            for (i = 1; i <= n; i++) {
                m = split(kinds[i], w, " x"); cnt = w[m] + 0
                if (kinds[i] ~ /tcp\//) { if (w[1] != "tcp/eth0") bad = 1 } else other += cnt
            }
            if (!bad && other <= here) ok++
        } END { print ok + 0 }')
    [ "$nok" -eq "$n" ] || why="${why:+$why, }$nok of $n ranks with endpoints only over tcp/eth0 beyond their node"
    if [[ " $* " == *" MPIX_ACC_NET_STAGE=all "* ]]; then
        local nst
        nst=$(grep -cE 'stats: staged through host memory \(MPIX_ACC_NET_STAGE=all, up to [0-9]+ bytes\): sent [1-9][0-9]* received [1-9]' "$log")
        [ "$nst" -eq "$n" ] || why="${why:+$why, }$nst of $n ranks staged messages through host memory"
    fi
    if [ "$prog" = sx_path ]; then
        local nsx
        nsx=$(grep -cE 'stats: path sx: sent [1-9][0-9]* messages' "$log")
        [ "$nsx" -eq "$n" ] || why="${why:+$why, }$nsx of $n ranks used the SX path within their node"
    fi
    if [ -n "$why" ]; then
        fail "$name" "$why"
    else
        echo "multinode.sh: ok ($name, $((SECONDS - t0)) s): $(grep -m1 'stats: peers' "$log" | sed 's/.*stats: //')$note"
    fi
}

run_case ring-2x1 2 1 ring
run_case pingpong-2x1 2 1 pingpong
run_case pingpong-staged-2x1 2 1 pingpong MPIX_ACC_NET_STAGE=all
run_case nonovertaking-2x1 2 1 nonovertaking
run_case call_order-2x1 2 1 call_order
run_case stream_comm-2x2 2 2 stream_comm
run_case sx_path-2x2 2 2 sx_path
run_case ring-3x1 3 1 ring

# stale-bridge: what a run killed by SIGKILL leaves (its EXIT trap skipped):
# a bridge routing the subnet the run asks for, and a state folder (with a
# bridge of its own) whose processes are gone
stale_case() {
    want stale-bridge || return 0
    local cases=stale-bridge-run # run_case's filter
    local id=$((RANDOM % 1000)) net=$((RANDOM % 200 + 20)) d why="" t0=$SECONDS
    local br=mxsnsa$id br2=mxsnsb$id
    ip link add "$br" type bridge 2>/dev/null || { fail stale-bridge "cannot make bridge $br"; return; }
    ip addr add "10.78.$net.1/24" dev "$br" && ip link set "$br" up
    d=$(mktemp -d /tmp/simnodes.XXXXXX)
    ip link add "$br2" type bridge 2>/dev/null && echo "$br2" >"$d/bridge"
    echo 2147483646 >"$d/node0.pid" # no such process
    touch -d '-5 min' "$d"
    SIMNODES_NET=$net run_case stale-bridge-run 2 1 ring
    if [ -d "$d" ] || ip link show "$br2" >/dev/null 2>&1; then
        why="the killed run's state folder $d or its bridge $br2 is still there"
    fi
    ip link show "$br" >/dev/null 2>&1 || why="${why:+$why, }bridge $br (no state folder) was removed"
    ip link del "$br" 2>/dev/null
    ip link del "$br2" 2>/dev/null
    rm -rf "$d"
    if [ -n "$why" ]; then
        fail stale-bridge "$why"
    else
        echo "multinode.sh: ok (stale-bridge, $((SECONDS - t0)) s): subnet 10.78.$net.0/24 left to $br, leftovers of $d removed"
    fi
}
stale_case

# link_down MODE: node 1's link is cut by the program (rank 1 runs
# `simnodes.sh link 1 down` once both have posted their operations)
link_case() {
    local name=$1 mode=$2
    shift 2
    want "$name" || return 0
    local prog=$builddir/test/mpi/link_down t0=$SECONDS
    [ -x "$prog" ] || { fail "$name" "$prog not built"; return; }
    env MPIX_ACC_STATS=1 LINK_DOWN_EXPECT="$mode" SIMNODES="$sim" "$@" timeout 200 \
        "$sim" run -N 2 -p 1 -- -n 2 "$prog" >"$log" 2>&1
    local rc=$? why=""
    grep -q "\[link_down\] PASS" "$log" || why="no PASS from rank 0 (exit status $rc)"
    grep -q "\[link_down\] rank 0: MPI_Finalize returned" "$log" ||
        why="${why:+$why, }rank 0's MPI_Finalize did not return"
    if [ -n "$why" ]; then
        fail "$name" "$why"
    else
        echo "multinode.sh: ok ($name, $((SECONDS - t0)) s): $(grep -m1 '\[link_down\] PASS' "$log" | sed 's/.*PASS //')"
    fi
}
# The kernel's TCP keep-alive (set by UCX on its sockets) shortened so that
# the cut is seen in about 4 s (UCX's defaults: 10 s idle, then probes 2 s
# apart); measured here: 4.1 s. UCX's own keep-alive rounds
# (UCX_KEEPALIVE_INTERVAL) keep the connection busy, so TCP's retransmission
# time-out applies instead and the cut went unseen for the whole 10 s hold.
# Data in flight at the cut (the 64 KiB send) puts the socket in
# retransmission, where keep-alive does not probe: TCP_USER_TIMEOUT bounds
# that (without it the cut went unseen for 10 s in 1 of 4 runs).
link_case link-down-errors errors MPIX_ACC_PEER_ERRORS=1 UCX_TCP_KEEPIDLE=1s UCX_TCP_KEEPINTVL=1s UCX_TCP_USER_TIMEOUT=3s \
    UCX_TCP_KEEPCNT=3 MPIX_ACC_FINALIZE_PEER_TIMEOUT=10
link_case link-down-default default

[ $fails -eq 0 ] && echo "multinode.sh: PASS" || echo "multinode.sh: $fails case(s) failed"
[ $fails -eq 0 ]
