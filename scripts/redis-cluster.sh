#!/usr/bin/env bash
# A Redis Cluster on loopback for the Redis backend's tests and benchmarks: 3 primaries and
# 3 replicas of Debian's redis-server, in a directory of their own.
#
#   scripts/redis-cluster.sh start     start it (fresh: the directory is emptied first)
#   scripts/redis-cluster.sh stop      stop every node and remove the directory
#   scripts/redis-cluster.sh status    cluster_state of the first node that answers
#   scripts/redis-cluster.sh seeds     the seed URLs for NEARDUP_REDIS / --redis
#   scripts/redis-cluster.sh start-node PORT   start one node again (after a kill -9), on
#                                      its old configuration: it rejoins as a replica
#
# REDIS_CLUSTER_PORT (default 7000): the first port; the nodes use it and the next five.
# REDIS_CLUSTER_DIR (default /tmp/neardup-redis-cluster): where the nodes keep their files.
# The nodes keep no data on disk (no RDB, no AOF): the replicas are the copies, and a write
# acknowledged with WAIT 1 is on one of them.
set -euo pipefail

base=${REDIS_CLUSTER_PORT:-7000}
dir=${REDIS_CLUSTER_DIR:-/tmp/neardup-redis-cluster}
ports=$(seq "$base" $((base + 5)))

die() {
    echo "redis-cluster.sh: $*" >&2
    exit 1
}

need() {
    command -v "$1" >/dev/null 2>&1 ||
        die "$1 not found: install Debian's redis-server and redis-tools (apt-get install -y redis-server redis-tools)"
}

start_node() {
    local port=$1
    mkdir -p "$dir/$port"
    redis-server --port "$port" --bind 127.0.0.1 --protected-mode no \
        --dir "$dir/$port" --daemonize yes \
        --pidfile "$dir/$port/redis.pid" --logfile "$dir/$port/redis.log" \
        --cluster-enabled yes --cluster-config-file nodes.conf \
        --cluster-node-timeout 1000 --cluster-replica-validity-factor 0 \
        --save '' --appendonly no
}

node_ready() {
    # Says cluster_state:ok and knows all six nodes; a replica also has its link to its
    # primary up (until then a write that asks for a replica's acknowledgement, WAIT, fails).
    local info
    redis-cli -p "$1" cluster info 2>/dev/null | grep -q 'cluster_state:ok' &&
        [ "$(redis-cli -p "$1" cluster nodes 2>/dev/null | grep -vc fail)" -ge 6 ] &&
        info=$(redis-cli -p "$1" info replication 2>/dev/null) &&
        { ! grep -q '^role:slave' <<<"$info" || grep -q '^master_link_status:up' <<<"$info"; }
}

wait_ok() {
    # Until every node is ready (node_ready), for up to 30 s.
    for _ in $(seq 300); do
        local ok=0
        for port in $ports; do
            if node_ready "$port"; then
                ok=$((ok + 1))
            fi
        done
        [ "$ok" -eq 6 ] && return 0
        sleep 0.1
    done
    die "the cluster did not come up; see $dir/*/redis.log"
}

stop() {
    # The pids are read once: a node deletes its pid file as it shuts down, so reading the
    # file again while waiting raced with that (and failed the script under set -e).
    local pids=""
    for port in $ports; do
        local pid
        pid=$(cat "$dir/$port/redis.pid" 2>/dev/null) || continue
        # Only a redis-server of ours: the pid file may be stale.
        if [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "redis-server.*:$port"; then
            kill "$pid" 2>/dev/null || true
            pids="$pids $pid"
        fi
    done
    for pid in $pids; do
        for _ in $(seq 50); do
            [ -d "/proc/$pid" ] || break
            sleep 0.1
        done
    done
    rm -rf "$dir"
}

case "${1:-}" in
    start)
        need redis-server
        need redis-cli
        stop
        mkdir -p "$dir"
        for port in $ports; do
            start_node "$port"
        done
        for port in $ports; do
            for _ in $(seq 100); do
                redis-cli -p "$port" ping >/dev/null 2>&1 && break
                sleep 0.05
            done
        done
        nodes=""
        for port in $ports; do
            nodes="$nodes 127.0.0.1:$port"
        done
        # shellcheck disable=SC2086
        redis-cli --cluster create $nodes --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 ||
            { cat "$dir/create.log" >&2; die "redis-cli --cluster create failed"; }
        wait_ok
        echo "redis cluster up: $("$0" seeds)"
        ;;
    stop)
        stop
        ;;
    status)
        for port in $ports; do
            redis-cli -p "$port" cluster info 2>/dev/null | grep cluster_state && exit 0
        done
        die "no node answers"
        ;;
    seeds)
        out=""
        for port in $ports; do
            out="$out${out:+,}redis://127.0.0.1:$port"
        done
        echo "$out"
        ;;
    start-node)
        [ -n "${2:-}" ] || die "start-node needs a port"
        start_node "$2"
        wait_ok
        ;;
    *)
        die "usage: $0 start|stop|status|seeds|start-node PORT"
        ;;
esac
