# netns.sh: two simulated machines on this one (sourced by tests/mpi/multihost.sh and
# bench/multihost.sh). Two network namespaces, A and B, joined by a veth pair whose ends
# alone have addresses (10.77.0.1 in A, 10.77.0.2 in B: the only addresses anything here
# sends to; no route leads elsewhere), each with its own host name (a UTS namespace per
# launch) and its own core: mpirun and rank 0 run in A on core 0, Open MPI's daemon and
# rank 1 are launched into B on core 1 by a plm_rsh_agent script around `ip netns exec`.
# The ranks talk over TCP on the veth only (btl tcp,self: no shared memory), and so do the
# daemons. The link's rate is shaped with tbf on both ends (link_shape), and its delay, as
# this kernel has no netem (doc/mpi.md), by tests/mpi/link_delay.c: each end's outgoing
# packets go to a netfilter queue (an NFQUEUE rule in the namespace's mangle POSTROUTING)
# that a process in that namespace holds for the delay, on the namespace's own core. Names
# carry a random id, so two runs cannot collide; link_down removes everything (the caller
# traps it on exit and on signals).
#
# Open MPI as root: the caller exports OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
# Needs root, ip (iproute2), tc, unshare and taskset (util-linux), 2 cores. mh_can says
# whether this machine allows it (and why not, in MH_WHY).

MH_ID=$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
MH_A=txlA-$MH_ID MH_B=txlB-$MH_ID
MH_VA=txa$MH_ID MH_VB=txb$MH_ID
MH_IPA=10.77.0.1 MH_IPB=10.77.0.2 MH_NET=10.77.0.0/30
MH_DIR=
MH_UP=0

# mh_can: 0 when namespaces, veth pairs, UTS namespaces and 2 cores are there (MH_WHY: what
# is missing otherwise)
mh_can() {
    MH_WHY=
    if [ "$(id -u)" -ne 0 ]; then MH_WHY="not root"; return 1; fi
    for c in ip tc unshare taskset mpirun; do
        command -v $c >/dev/null 2>&1 || { MH_WHY="no $c"; return 1; }
    done
    if [ "$(nproc)" -lt 2 ]; then MH_WHY="fewer than 2 cores"; return 1; fi
    if ! ip netns add "$MH_A" 2>/dev/null; then MH_WHY="ip netns add is refused"; return 1; fi
    ok=1
    ip netns exec "$MH_A" unshare --uts true 2>/dev/null || { ok=0; MH_WHY="unshare --uts is refused"; }
    ip netns del "$MH_A" 2>/dev/null
    [ $ok -eq 1 ]
}

# link_up DIR: the namespaces, the veth pair and its addresses; DIR (made, the caller's
# temporary directory) gets the hostfile and the launcher
link_up() {
    MH_DIR=$1
    MH_UP=1
    ip netns add "$MH_A" && ip netns add "$MH_B" &&
        ip link add "$MH_VA" netns "$MH_A" type veth peer name "$MH_VB" netns "$MH_B" || return 1
    for ns in "$MH_A" "$MH_B"; do # no IPv6: no link-local addresses, no router solicitations
        ip netns exec "$ns" sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 \
            net.ipv6.conf.default.disable_ipv6=1 >/dev/null 2>&1
    done
    ip -n "$MH_A" addr add $MH_IPA/30 dev "$MH_VA" && ip -n "$MH_B" addr add $MH_IPB/30 dev "$MH_VB" &&
        ip -n "$MH_A" link set "$MH_VA" up && ip -n "$MH_B" link set "$MH_VB" up &&
        ip -n "$MH_A" link set lo up && ip -n "$MH_B" link set lo up || return 1
    printf '%s slots=1\n%s slots=1\n' $MH_IPA $MH_IPB > "$MH_DIR/hosts"
    printf '%s slots=1\n' $MH_IPA > "$MH_DIR/host1"
    # the launcher: Open MPI runs `AGENT HOST orted ARGS...`; HOST is B's address
    cat > "$MH_DIR/agent" <<EOF
#!/bin/sh
host=\$1; shift
[ "\$host" = $MH_IPB ] || { echo "agent: no machine \$host here" >&2; exit 1; }
exec ip netns exec $MH_B unshare --uts sh -c 'hostname txlB; exec taskset -c 1 sh -c "\$1"' agent "\$*"
EOF
    chmod +x "$MH_DIR/agent"
}

# link_shape RATE[@US]: tbf on both ends (RATE as tc takes it: 1gbit, 10gbit), or "none" to
# remove it; @US adds a delay of US microseconds each way (link_delay). The bucket holds 1 ms
# at the rate (at least 128 KiB: a 64 KiB GSO packet).
link_shape() {
    link_undelay
    tc -n "$MH_A" qdisc del dev "$MH_VA" root 2>/dev/null
    tc -n "$MH_B" qdisc del dev "$MH_VB" root 2>/dev/null
    rate=${1%@*} us=
    case $1 in *@*) us=${1#*@} ;; esac
    if [ "$rate" != none ]; then
        burst=$(echo "$rate" | awk '{v = $1 + 0; u = tolower($1); sub(/^[0-9.]+/, "", u)
            m = u == "gbit" ? 1e9 : u == "mbit" ? 1e6 : u == "kbit" ? 1e3 : 1
            x = v * m / 8 / 1000; if (x < 131072) x = 131072; printf "%d", x}')
        tc -n "$MH_A" qdisc add dev "$MH_VA" root tbf rate "$rate" burst "$burst" latency 50ms &&
            tc -n "$MH_B" qdisc add dev "$MH_VB" root tbf rate "$rate" burst "$burst" latency 50ms ||
            return 1
    fi
    [ -z "$us" ] || link_delay "$us"
}

# link_delay US: both ends' outgoing packets held US microseconds (MH_DELAY_BIN, default
# build/tests/link_delay: make test-multihost builds it; needs iptables). MH_WHY says why not.
MH_DELAYS=
link_delay() {
    bin=${MH_DELAY_BIN:-build/tests/link_delay}
    MH_WHY=
    command -v iptables >/dev/null 2>&1 || { MH_WHY="no iptables"; return 1; }
    [ -x "$bin" ] || { MH_WHY="no $bin"; return 1; }
    for side in A:0 B:1; do
        core=${side#*:} side=${side%:*}
        eval "ns=\$MH_$side dev=\$MH_V$side"
        ip netns exec "$ns" taskset -c "$core" "$bin" 0 "$1" > "$MH_DIR/delay$side.out" \
            2> "$MH_DIR/delay$side.err" &
        MH_DELAYS="$MH_DELAYS $!"
        n=0 # bound before the rule sends packets to it (an unbound queue drops them)
        until grep -q ready "$MH_DIR/delay$side.out" 2>/dev/null; do
            n=$((n + 1))
            [ $n -lt 100 ] || { MH_WHY="link_delay: $(cat "$MH_DIR/delay$side.err")"; return 1; }
            sleep 0.05
        done
        ip netns exec "$ns" iptables -t mangle -A POSTROUTING -o "$dev" -j NFQUEUE --queue-num 0 ||
            { MH_WHY="iptables NFQUEUE in $ns refused"; return 1; }
    done
}

# link_undelay: the delay's rules and processes gone (their counts on stderr, when asked by
# MH_DELAY_LOG=FILE)
link_undelay() {
    [ -n "$MH_DELAYS" ] || return 0
    ip netns exec "$MH_A" iptables -t mangle -F 2>/dev/null
    ip netns exec "$MH_B" iptables -t mangle -F 2>/dev/null
    kill -TERM $MH_DELAYS 2>/dev/null
    wait $MH_DELAYS 2>/dev/null
    MH_DELAYS=
    [ -z "${MH_DELAY_LOG:-}" ] || cat "$MH_DIR/delayA.err" "$MH_DIR/delayB.err" >> "$MH_DELAY_LOG" 2>/dev/null
}

# mh_mpirun SECONDS NP ARGS...: mpirun across the link (NP 2: one rank per machine; NP 1:
# rank 0 alone in A, on core 0), TCP on the veth only, each process on its machine's core, at
# niceness MH_NICE (default 0); killed after SECONDS (exit 124, as timeout's). It runs in the
# background and is waited for: a signal's trap then runs at once (sh runs it only after a
# foreground command ends)
mh_mpirun() {
    secs=$1 np=$2; shift 2
    hf=$MH_DIR/hosts
    [ "$np" -eq 1 ] && hf=$MH_DIR/host1
    timeout -k 5 "$secs" nice -n "${MH_NICE:-0}" ip netns exec "$MH_A" unshare --uts sh -c 'hostname txlA; exec taskset -c 0 "$@"' \
        mh mpirun --hostfile "$hf" -np "$np" --map-by node --bind-to none \
        --mca plm_rsh_agent "$MH_DIR/agent" --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include $MH_NET --mca oob_tcp_if_include $MH_NET "$@" &
    wait $!
}

# link_down: every process left in the namespaces killed (by pid), the namespaces (and with
# them the veth pair and its qdiscs) removed
link_down() {
    [ "$MH_UP" -eq 1 ] || return 0
    for ns in "$MH_A" "$MH_B"; do
        pids=$(ip netns pids "$ns" 2>/dev/null)
        [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    done
    for ns in "$MH_A" "$MH_B"; do
        ip netns del "$ns" 2>/dev/null
    done
    MH_UP=0
}
