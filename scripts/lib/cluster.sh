# shellcheck shell=bash
# A local Redis Cluster: 6 nodes on free loopback ports, 3 primaries and 3 replicas. Source
# after common.sh.
#
#   cluster_up STATE           starts the nodes (redis-server --cluster-enabled yes, nothing kept
#                              on disk), joins them with `redis-cli --cluster create
#                              --cluster-replicas 1`, waits for cluster_state:ok on every node;
#                              sets CLUSTER_URL (redis+cluster://127.0.0.1:p1,127.0.0.1:p2,...)
#                              and writes it to STATE/cluster/url
#   cluster_down STATE         stops every node cluster_up started and removes STATE/cluster
#   cluster_ok URL             true when every node named in a redis+cluster:// URL answers
#                              PING and one of them reports cluster_state:ok
#   cluster_nodes STATE        prints `CLUSTER NODES` as one node sees it (id, address, role,
#                              slots)
#   cluster_primaries STATE    prints the ports of the nodes that are primaries now
#   cluster_kill_primary STATE [PORT]
#                              kill -9 of one primary (PORT, else the first one); prints its port
#   cluster_wait_ok STATE SECONDS
#                              waits until cluster_state is ok and every primary answers (after
#                              cluster_kill_primary: until the replica has taken over)
#
# Each node's cluster bus has its own free port (cluster-port), so any free client port works.
# FLASHGATE_CLUSTER_PORTS="P1 P2 P3 P4 P5 P6" (or comma-separated) gives the 6 client ports
# instead, for a machine shared by several runs; each node's bus is then its port + 10000
# (Redis's own default).
# A failed node is taken over by its replica after cluster-node-timeout (2,000 ms here).
# cluster-require-full-coverage no: while a failed primary's slots have no primary, the other
# primaries go on serving theirs (with the default, yes, every node refuses every command from
# the moment the failure is agreed until the replica is promoted), so the gate shards and
# records on healthy primaries keep working through a failover.

CLUSTER_NODES=6
CLUSTER_NODE_TIMEOUT_MS=2000

# _cluster_ports STATE: the client ports of the nodes cluster_up started, one a line.
_cluster_ports() { cat "$1/cluster/ports" 2>/dev/null; }

# _cluster_new_port TAKEN: a free loopback port not in the space-separated list TAKEN.
_cluster_new_port() {
  local p i
  for i in $(seq 1 50); do
    p="$(fg_free_port)" || return 1
    [[ "$1" == *" $p "* ]] || { echo "$p"; return 0; }
  done
  return 1
}

# _cluster_live_port STATE: a port of a node that answers PING.
_cluster_live_port() {
  local p
  for p in $(_cluster_ports "$1"); do
    [ "$(redis-cli -h 127.0.0.1 -p "$p" ping 2>/dev/null)" = "PONG" ] && { echo "$p"; return 0; }
  done
  return 1
}

_cluster_state() { redis-cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n 's/^cluster_state://p'; }

# _cluster_synced PORT: true for a primary, or a replica whose link to its primary is up.
_cluster_synced() {
  local info
  info="$(redis-cli -h 127.0.0.1 -p "$1" info replication 2>/dev/null | tr -d '\r')"
  grep -qx 'role:master' <<<"$info" || grep -qx 'master_link_status:up' <<<"$info"
}

cluster_ok() {
  local url="$1" list hostport ok=1 any_ok=1
  list="${url#redis+cluster://}"; list="${list%%/*}"
  for hostport in ${list//,/ }; do
    [ "$(redis-cli -h "${hostport%:*}" -p "${hostport##*:}" ping 2>/dev/null)" = "PONG" ] || ok=0
    [ "$(_cluster_state "${hostport##*:}")" = "ok" ] && any_ok=0
  done
  [ "$ok" = 1 ] && [ "$any_ok" = 0 ]
}

cluster_up() {
  local state="$1" dir port bus i nodes=() ports=()
  dir="$state/cluster"
  if [ -s "$dir/url" ] && cluster_ok "$(cat "$dir/url")"; then
    CLUSTER_URL="$(cat "$dir/url")"
    fg_log "Redis Cluster already running ($CLUSTER_URL)"; return 0
  fi
  cluster_down "$state"
  fg_need_cmd redis-server redis-server
  fg_need_cmd redis-cli redis-tools
  mkdir -p "$dir"
  local taken=" " given=()
  if [ -n "${FLASHGATE_CLUSTER_PORTS:-}" ]; then
    read -r -a given <<<"${FLASHGATE_CLUSTER_PORTS//,/ }"
    [ "${#given[@]}" -eq "$CLUSTER_NODES" ] \
      || fg_die "FLASHGATE_CLUSTER_PORTS names ${#given[@]} ports; the cluster has $CLUSTER_NODES nodes"
  fi
  for i in $(seq 1 "$CLUSTER_NODES"); do
    if [ "${#given[@]}" -gt 0 ]; then
      port="${given[$((i - 1))]}"; bus=$((port + 10000))
      fg_port_open 127.0.0.1 "$port" && fg_die "cluster port $port (FLASHGATE_CLUSTER_PORTS) is taken"
    else
      # Ports are only checked, not held, until the node binds them: never hand one out twice.
      port="$(_cluster_new_port "$taken")"; taken+="$port "
      bus="$(_cluster_new_port "$taken")"; taken+="$bus "
    fi
    mkdir -p "$dir/$port"
    redis-server --bind 127.0.0.1 --port "$port" --cluster-enabled yes --cluster-port "$bus" \
      --cluster-config-file "$dir/$port/nodes.conf" --cluster-node-timeout "$CLUSTER_NODE_TIMEOUT_MS" \
      --cluster-require-full-coverage no \
      --repl-diskless-sync-delay 0 --save '' --appendonly no --daemonize yes --dir "$dir/$port" \
      --pidfile "$dir/$port/redis.pid" --logfile "$dir/$port/redis.log" >&2 \
      || fg_die "redis-server (cluster node $i, port $port) did not start"
    echo "$port" >>"$dir/ports"
    ports+=("$port"); nodes+=("127.0.0.1:$port")
  done
  for port in "${ports[@]}"; do
    # Up to 30 s: on a loaded 2-core machine a daemonised node can take seconds to bind.
    for i in $(seq 1 300); do
      [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = "PONG" ] && break
      sleep 0.1
    done
    if [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" != "PONG" ]; then
      tail -5 "$dir/$port/redis.log" >&2 2>/dev/null
      fg_die "cluster node on port $port does not answer; log: $dir/$port/redis.log"
    fi
  done
  fg_log "creating a Redis Cluster of ${#nodes[@]} nodes (3 primaries, 3 replicas): ${nodes[*]}"
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1 \
    || { tail -20 "$dir/create.log" >&2; fg_die "redis-cli --cluster create failed (log: $dir/create.log)"; }
  for port in "${ports[@]}"; do
    for i in $(seq 1 150); do
      [ "$(_cluster_state "$port")" = "ok" ] && break
      sleep 0.2
    done
    [ "$(_cluster_state "$port")" = "ok" ] || fg_die "cluster node $port is not cluster_state:ok after 30 s"
  done
  # A replica that never finished its first sync cannot take over: wait for every link.
  for port in "${ports[@]}"; do
    for i in $(seq 1 150); do
      _cluster_synced "$port" && break
      sleep 0.2
    done
    _cluster_synced "$port" || fg_die "cluster replica $port has not synced with its primary after 30 s"
  done
  CLUSTER_URL="redis+cluster://$(printf '127.0.0.1:%s,' "${ports[@]}")"
  CLUSTER_URL="${CLUSTER_URL%,}"
  echo "$CLUSTER_URL" >"$dir/url"
  fg_log "Redis Cluster ready: cluster_state:ok on all ${#ports[@]} nodes ($CLUSTER_URL)"
}

cluster_down() {
  local state="$1" port
  [ -d "$state/cluster" ] || return 0
  fg_log "stopping the Redis Cluster"
  for port in $(_cluster_ports "$state"); do
    fg_stop_pid "$state/cluster/$port/redis.pid" 10
  done
  rm -rf "$state/cluster"
}

cluster_nodes() {
  local port
  port="$(_cluster_live_port "$1")" || { echo "no cluster node answers"; return 1; }
  redis-cli -h 127.0.0.1 -p "$port" cluster nodes | tr -d '\r' \
    | awk '{ id[NR] = $1; addr[$1] = $2; sub(/@.*/, "", addr[$1]); flags[NR] = $3; of[NR] = $4
             slots[NR] = ""; for (i = 9; i <= NF; i++) slots[NR] = slots[NR] " " $i }
           END { for (n = 1; n <= NR; n++) {
                   role = flags[n]; sub(/myself,/, "", role)
                   what = (of[n] == "-") ? "slots" slots[n] : "replica of " addr[of[n]]
                   printf "%-16s %-12s %s\n", addr[id[n]], role, what } }' | sort
}

cluster_primaries() {
  local port
  port="$(_cluster_live_port "$1")" || return 1
  redis-cli -h 127.0.0.1 -p "$port" cluster nodes | tr -d '\r' \
    | awk '$3 ~ /master/ && $3 !~ /fail/ { split($2, a, "[:@]"); print a[2] }'
}

cluster_kill_primary() {
  local state="$1" port="${2:-}" pid
  [ -n "$port" ] || port="$(cluster_primaries "$state" | head -1)"
  [ -n "$port" ] || fg_die "no primary found"
  pid="$(cat "$state/cluster/$port/redis.pid" 2>/dev/null)" || fg_die "no pidfile of node $port"
  fg_log "kill -9 of Redis primary 127.0.0.1:$port (pid $pid)"
  kill -KILL "$pid"
  rm -f "$state/cluster/$port/redis.pid"
  echo "$port"
}

# _cluster_serving STATE: true when cluster_state is ok and every node listed as a primary (not
# flagged failed) answers PING, i.e. a killed primary has been replaced by its replica.
_cluster_serving() {
  local state="$1" port primaries p
  port="$(_cluster_live_port "$state")" && [ "$(_cluster_state "$port")" = "ok" ] || return 1
  primaries="$(cluster_primaries "$state")"
  [ "$(echo "$primaries" | wc -w)" -ge 3 ] || return 1
  for p in $primaries; do
    [ "$(redis-cli -h 127.0.0.1 -p "$p" ping 2>/dev/null)" = "PONG" ] || return 1
  done
}

cluster_wait_ok() {
  local state="$1" secs="$2" i port
  for i in $(seq 1 $((secs * 5))); do
    _cluster_serving "$state" && return 0
    sleep 0.2
  done
  return 1
}

# cluster_status STATE: one line for the cluster, then its nodes. Non-zero when it is not ok.
cluster_status() {
  local state="$1" port
  if port="$(_cluster_live_port "$state")" && [ "$(_cluster_state "$port")" = "ok" ]; then
    echo "cluster:  up   $(cat "$state/cluster/url") (cluster_state:ok)"
    cluster_nodes "$state" | sed 's/^/          /'
  else
    echo "cluster:  DOWN"; return 1
  fi
}
