# shellcheck shell=bash
# The whole local stack: PostgreSQL + Redis (services.sh), the origin, and the edge worker in
# workerd (edge.sh). Source after common.sh and services.sh.
#
#   stack_up STATE_DIR PROFILE DB_NAME   PROFILE is release or debug; writes STATE_DIR/env
#   stack_down STATE_DIR                 stops exactly what stack_up started
#   stack_status STATE_DIR
#
# STATE_DIR holds the pidfiles, logs, the generated secrets (secrets.env, kept across runs)
# and env: FLASHGATE_ORIGIN_URL, FLASHGATE_EDGE_URL, FLASHGATE_ADMIN_TOKEN,
# FLASHGATE_CUSTOMER_TOKEN_SECRET, FLASHGATE_SERVICE_TOKEN, FLASHGATE_EDGE_SECRET,
# DATABASE_URL, REDIS_URL (KEY=value lines; `set -a; . STATE_DIR/env; set +a` loads them).
# FLASHGATE_ORIGIN_PORT picks the origin's port (default: 8080 when free and no FLASHGATE_PORT_RANGE is set, else a free one).
# FLASHGATE_NO_EDGE=1 starts the origin alone. The origins allow webhook endpoints on loopback
# and private addresses over http (FLASHGATE_WEBHOOK_ALLOW_PRIVATE, default true here).
# FLASHGATE_ORIGINS=N (default 1) starts N origins (origin-1 ... origin-N, each on a free
# loopback port) behind HAProxy (scripts/lib/balancer.sh); FLASHGATE_ORIGIN_URL is then the
# balancer's URL and the edge points at it. With 1 there is no balancer.
# FLASHGATE_PROMETHEUS=1 starts Prometheus (Debian's package) scraping every origin and the
# edge (scripts/lib/prometheus.sh); PROMETHEUS_URL is written to env.
# FLASHGATE_PGBOUNCER=1 puts PgBouncer (FLASHGATE_PGBOUNCER_POOL_MODE, default transaction) between the origins and
# PostgreSQL (scripts/lib/pgbouncer.sh; docs/DEPLOY.md "Behind a connection pooler").

if [ -f "$FG_ROOT/scripts/lib/edge.sh" ]; then
  # shellcheck disable=SC1091
  . "$FG_ROOT/scripts/lib/edge.sh"
fi

# shellcheck source=balancer.sh
. "$FG_ROOT/scripts/lib/balancer.sh"
# shellcheck source=pgbouncer.sh
. "$FG_ROOT/scripts/lib/pgbouncer.sh"
# shellcheck source=provider_sim.sh
. "$FG_ROOT/scripts/lib/provider_sim.sh"
# shellcheck source=prometheus.sh
. "$FG_ROOT/scripts/lib/prometheus.sh"

# stack_pooler STATE: with FLASHGATE_PGBOUNCER=1, starts PgBouncer in
# front of DATABASE_URL; the origins then use it (DATABASE_URL, FLASHGATE_DB_POOLER=transaction)
# and migrate over the direct URL (FLASHGATE_MIGRATION_DATABASE_URL).
stack_pooler() {
  local state="$1"
  [ "${FLASHGATE_PGBOUNCER:-0}" = "1" ] || return 0
  pgbouncer_up "$state" "$DATABASE_URL"
  export FLASHGATE_MIGRATION_DATABASE_URL="$DATABASE_URL"
  export DATABASE_URL="$PGBOUNCER_URL"
  export FLASHGATE_DB_POOLER=transaction
  fg_log "PostgreSQL through PgBouncer $PGBOUNCER_URL (${FLASHGATE_PGBOUNCER_POOL_MODE:-transaction} pooling)"
}

stack_edge_available() {
  [ "${FLASHGATE_NO_EDGE:-0}" != "1" ] && declare -F edge_start >/dev/null && declare -F edge_build >/dev/null
}

fg_target_dir() { echo "${CARGO_TARGET_DIR:-$FG_ROOT/target}"; }

# fg_cargo_build PROFILE ARGS...: cargo build in the repo with --release for PROFILE=release.
fg_cargo_build() {
  local profile="$1"; shift
  local flag=()
  [ "$profile" = "release" ] && flag=(--release)
  (cd "$FG_ROOT" && cargo build "${flag[@]}" "$@") || fg_die "cargo build $* failed"
}

# stack_build PROFILE [CARGO ARGS...]: builds what a stack runs, in one cargo invocation (so
# all see the same feature set and nothing is compiled twice): the origin (flashgate), the
# load generator (stampede), the chaos tools (check_history, fault_proxy) and the provider
# simulator, plus the targets of CARGO ARGS (the demo's `--bin gift_demo`). The benches are
# left to the scripts that run them: a first `scripts/dev up` builds five binaries, not twelve.
# FLASHGATE_SKIP_BUILD=1: cargo is not run (scripts/test builds once, then runs a leg beside
# `cargo test`, whose lock on the target directory a build would wait for); the binaries must
# be there.
STACK_BINS=(flashgate stampede check_history fault_proxy provider-sim)
stack_build() {
  local profile="$1" bin args=(); shift
  if [ "${FLASHGATE_SKIP_BUILD:-0}" = "1" ]; then
    for bin in "${STACK_BINS[@]}"; do
      [ -x "$(fg_target_dir)/$profile/$bin" ] \
        || fg_die "FLASHGATE_SKIP_BUILD=1 but $(fg_target_dir)/$profile/$bin is not built"
    done
    return 0
  fi
  for bin in "${STACK_BINS[@]}"; do args+=(--bin "$bin"); done
  fg_cargo_build "$profile" -p flashgate-origin -p flashgate-bench -p flashgate-tests \
    -p flashgate-provider-sim "${args[@]}" "$@"
}

# stack_secrets STATE: loads (creating on first use) the random secrets of this stack.
stack_secrets() {
  local state="$1"
  if [ ! -s "$state/secrets.env" ]; then
    umask 077
    {
      echo "FLASHGATE_ADMIN_TOKEN=$(fg_secret)"
      echo "FLASHGATE_CUSTOMER_TOKEN_SECRET=$(fg_secret)"
      echo "FLASHGATE_SERVICE_TOKEN=$(fg_secret)"
      echo "FLASHGATE_EDGE_SECRET=$(fg_secret)"
    } >"$state/secrets.env"
    umask 022
  fi
  # The edge's /__flashgate/metrics token (Prometheus scrapes the edge with it), added to a
  # secrets file written before it existed.
  if ! grep -q '^FLASHGATE_EDGE_METRICS_TOKEN=' "$state/secrets.env"; then
    echo "FLASHGATE_EDGE_METRICS_TOKEN=$(fg_secret)" >>"$state/secrets.env"
  fi
  set -a
  # shellcheck disable=SC1091
  . "$state/secrets.env"
  set +a
}

# origin_start STATE BIN [NAME]: starts the origin NAME (default "origin": STATE/NAME.pid,
# .url, .log) unless it runs; sets FLASHGATE_ORIGIN_URL to its URL. Only the origin named
# "origin" honours FLASHGATE_ORIGIN_PORT / 8080; the others take a free port.
origin_start() {
  local state="$1" bin="$2" name="${3:-origin}" port pid
  if fg_pid_alive "$state/$name.pid" && [ -s "$state/$name.url" ]; then
    FLASHGATE_ORIGIN_URL="$(cat "$state/$name.url")"
    if fg_wait_http "$FLASHGATE_ORIGIN_URL/readyz" 5; then
      fg_log "$name already running at $FLASHGATE_ORIGIN_URL"; return 0
    fi
    fg_log "$name pid $(cat "$state/$name.pid") is not ready; restarting it"
    fg_stop_pid "$state/$name.pid"
  fi
  port=""
  if [ "$name" = origin ]; then
    port="${FLASHGATE_ORIGIN_PORT:-}"
    # 8080 only when no port range was given: a range means "every port from here".
    if [ -z "$port" ] && [ -z "${FLASHGATE_PORT_RANGE:-}" ] && ! fg_port_open 127.0.0.1 8080; then
      port=8080
    fi
  fi
  local fixed="$port" attempt ready=0
  # A free port can be taken between the check and the bind (by another process, or as the
  # local port of an outgoing connection): a port picked here is tried up to 3 times.
  for attempt in 1 2 3; do
    [ -n "$fixed" ] || port="$(fg_free_port)"
    fg_port_open 127.0.0.1 "$port" && fg_die "port $port is taken (set FLASHGATE_ORIGIN_PORT)"
    fg_log "starting $name on 127.0.0.1:$port (log: $state/$name.log)"
    # Webhook endpoints on this machine (http://127.0.0.1:…, docs/CHECKOUT.md's receiver) are
    # allowed on a local stack, unless the caller says otherwise.
    FLASHGATE_LISTEN="127.0.0.1:$port" RUST_LOG="${RUST_LOG:-warn,flashgate=info,flashgate_origin=info}" \
      FLASHGATE_WEBHOOK_ALLOW_PRIVATE="${FLASHGATE_WEBHOOK_ALLOW_PRIVATE:-true}" \
      nohup "$bin" serve >"$state/$name.log" 2>&1 &
    pid=$!
    echo "$pid" >"$state/$name.pid"
    FLASHGATE_ORIGIN_URL="http://127.0.0.1:$port"
    if fg_wait_http "$FLASHGATE_ORIGIN_URL/readyz" 120 "$pid"; then ready=1; break; fi
    [ -z "$fixed" ] && grep -q 'Address already in use' "$state/$name.log" || break
    fg_log "$name: port $port was taken before it could bind; another port (attempt $attempt of 3)"
    fg_stop_pid "$state/$name.pid" 5
  done
  if [ "$ready" != 1 ]; then
    tail -30 "$state/$name.log" >&2
    fg_stop_pid "$state/$name.pid" 5
    fg_die "$name did not become ready (log: $state/$name.log)"
  fi
  echo "$FLASHGATE_ORIGIN_URL" >"$state/$name.url"
  fg_log "$name ready at $FLASHGATE_ORIGIN_URL"
}

# stack_origins: the number of origins asked for (FLASHGATE_ORIGINS, default 1, at most 16).
stack_origins() {
  local n="${FLASHGATE_ORIGINS:-1}"
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 16 ] \
    || fg_die "FLASHGATE_ORIGINS must be a whole number from 1 to 16 (got '$n')"
  echo "$n"
}

# origins_up STATE BIN N: N=1 starts the origin; N>1 starts origin-1..origin-N and HAProxy in
# front of them. Sets FLASHGATE_ORIGIN_URL to the origin or the balancer.
origins_up() {
  local state="$1" bin="$2" n="$3" k urls=()
  _stack_stop_other_origins "$state" "$n"
  if [ "$n" -eq 1 ]; then origin_start "$state" "$bin"; return; fi
  for k in $(seq 1 "$n"); do
    origin_start "$state" "$bin" "origin-$k"
    urls+=("$FLASHGATE_ORIGIN_URL")
  done
  balancer_up "$state" "${urls[@]}"
  FLASHGATE_ORIGIN_URL="$BALANCER_URL"
}

# _stack_stop_other_origins STATE N: an `up` with fewer origins than the running stack (or one
# origin after several, or several after one) stops the origins it will not use, and the
# balancer when one origin is asked for, so that none is left running unseen.
_stack_stop_other_origins() {
  local state="$1" n="$2" pidfile name k
  for pidfile in "$state"/origin.pid "$state"/origin-*.pid; do
    [ -f "$pidfile" ] || continue
    name="$(basename "$pidfile" .pid)"
    if [ "$name" = origin ]; then
      [ "$n" -eq 1 ] && continue
    else
      k="${name#origin-}"
      [ "$n" -gt 1 ] && [[ "$k" =~ ^[0-9]+$ ]] && [ "$k" -le "$n" ] && continue
    fi
    fg_log "stopping $name (FLASHGATE_ORIGINS=$n)"
    fg_stop_pid "$pidfile" 20
    rm -f "$state/$name.url"
  done
  [ "$n" -eq 1 ] && balancer_down "$state"
  return 0
}

# edge_up STATE: builds and starts the edge worker in workerd; sets FLASHGATE_EDGE_URL.
edge_up() {
  local state="$1"
  FLASHGATE_EDGE_URL=""
  if ! stack_edge_available; then
    fg_log "edge: not available (scripts/lib/edge.sh missing or FLASHGATE_NO_EDGE=1); origin only"
    return 0
  fi
  # A running edge is kept when it forwards to this origin URL (.dev/edge.origin); one left
  # pointing at another (a balancer restarted on another port) is restarted.
  if fg_pid_alive "$state/edge.pid" && [ -s "$state/edge.url" ]; then
    if [ "$(cat "$state/edge.origin" 2>/dev/null)" = "$FLASHGATE_ORIGIN_URL" ]; then
      FLASHGATE_EDGE_URL="$(cat "$state/edge.url")"
      fg_log "edge already running at $FLASHGATE_EDGE_URL"; return 0
    fi
    fg_log "edge: restarting it in front of $FLASHGATE_ORIGIN_URL (it forwarded to $(cat "$state/edge.origin" 2>/dev/null || echo 'an unknown origin'))"
    if declare -F edge_stop >/dev/null; then edge_stop "$state/edge.pid"; else fg_stop_pid "$state/edge.pid"; fi
  fi
  if [ "${FLASHGATE_SKIP_EDGE_BUILD:-0}" != "1" ]; then
    edge_tools_install || fg_die "installing the edge tools failed"
    edge_build || fg_die "building the edge worker failed"
  fi
  fg_log "starting the edge worker ($(edge_runtime || echo '?')) in front of $FLASHGATE_ORIGIN_URL"
  # Port 0 lets the runtime's runner take a free port; with FLASHGATE_PORT_RANGE it comes from
  # the range.
  local edge_port
  edge_port="$(edge_port)" || fg_die "no free port in FLASHGATE_PORT_RANGE"
  edge_start "$FLASHGATE_ORIGIN_URL" "$edge_port" "$state/edge.pid" "$state/edge.url" \
    || fg_die "the edge worker did not start (log: $state/edge.pid.log)"
  FLASHGATE_EDGE_URL="$(cat "$state/edge.url")"
  echo "$FLASHGATE_ORIGIN_URL" >"$state/edge.origin"
  fg_log "edge ready at $FLASHGATE_EDGE_URL"
}

stack_write_env() {
  local state="$1"
  umask 077
  cat >"$state/env" <<ENV
FLASHGATE_ORIGIN_URL=$FLASHGATE_ORIGIN_URL
FLASHGATE_EDGE_URL=$FLASHGATE_EDGE_URL
FLASHGATE_EDGE_RUNTIME=${FLASHGATE_EDGE_URL:+$(edge_runtime 2>/dev/null)}
FLASHGATE_ADMIN_TOKEN=$FLASHGATE_ADMIN_TOKEN
FLASHGATE_CUSTOMER_TOKEN_SECRET=$FLASHGATE_CUSTOMER_TOKEN_SECRET
FLASHGATE_SERVICE_TOKEN=$FLASHGATE_SERVICE_TOKEN
FLASHGATE_EDGE_SECRET=$FLASHGATE_EDGE_SECRET
FLASHGATE_EDGE_METRICS_TOKEN=$FLASHGATE_EDGE_METRICS_TOKEN
DATABASE_URL=$DATABASE_URL
REDIS_URL=$REDIS_URL
FLASHGATE_GIFT_PROVIDER_URL=${FLASHGATE_GIFT_PROVIDER_URL:-}
PROMETHEUS_URL=${PROMETHEUS_URL:-}
ENV
  if [ "${FLASHGATE_PGBOUNCER:-0}" = "1" ]; then
    printf 'FLASHGATE_DB_POOLER=transaction\nFLASHGATE_MIGRATION_DATABASE_URL=%s\n' \
      "$FLASHGATE_MIGRATION_DATABASE_URL" >>"$state/env"
  fi
  umask 022
}

stack_up() {
  local state="$1" profile="$2" db="$3" origins
  # Checked first, in this shell: a bad FLASHGATE_ORIGINS stops before anything starts (inside
  # $(...) below its error would only end the subshell).
  origins="$(stack_origins)" || exit 1
  mkdir -p "$state"
  services_up "$state" "$db"
  stack_pooler "$state"
  stack_secrets "$state"
  fg_log "building the origin and the stampede generator ($profile)"
  stack_build "$profile"
  provider_sim_up "$state" "$(fg_target_dir)/$profile/provider-sim"
  origins_up "$state" "$(fg_target_dir)/$profile/flashgate" "$origins"
  edge_up "$state"
  if [ "${FLASHGATE_PROMETHEUS:-0}" = "1" ]; then
    # Every origin itself (not the balancer in front of them), and the edge when it runs.
    # shellcheck disable=SC2046 # one URL a file
    PROMETHEUS_EDGE_URL="$FLASHGATE_EDGE_URL" \
      prometheus_up "$state" $(cat "$state"/origin.url "$state"/origin-*.url 2>/dev/null)
  fi
  export FLASHGATE_ORIGIN_URL FLASHGATE_EDGE_URL
  stack_write_env "$state"
  if [ -s "$state/balancer.url" ]; then
    fg_log "up: $origins origins behind HAProxy $FLASHGATE_ORIGIN_URL, edge ${FLASHGATE_EDGE_URL:-none}; env in $state/env"
  else
    fg_log "up: origin $FLASHGATE_ORIGIN_URL, edge ${FLASHGATE_EDGE_URL:-none}; env in $state/env"
  fi
}

# stack_stop_servers STATE: stops the edge and the origin, keeps the services.
stack_stop_servers() {
  local state="$1"
  if [ -f "$state/edge.pid" ]; then
    fg_log "stopping the edge worker"
    if declare -F edge_stop >/dev/null; then edge_stop "$state/edge.pid"; else fg_stop_pid "$state/edge.pid"; fi
  fi
  rm -f "$state/edge.url" "$state/edge.origin"
  balancer_down "$state"
  local pidfile name
  for pidfile in "$state"/origin.pid "$state"/origin-*.pid; do
    [ -f "$pidfile" ] || continue
    name="$(basename "$pidfile" .pid)"
    fg_log "stopping $name"
    fg_stop_pid "$pidfile" 20
    rm -f "$state/$name.url"
  done
  rm -f "$state/origin.url"
  provider_sim_down "$state"
}

stack_down() {
  local state="$1"
  [ -d "$state" ] || { fg_log "nothing to stop ($state does not exist)"; return 0; }
  stack_stop_servers "$state"
  prometheus_down "$state"
  pgbouncer_down "$state"
  services_down "$state"
  rm -f "$state/env"
}

stack_status() {
  local state="$1" rc=0 url
  services_status "$state" || rc=1
  local names=() name
  for name in "$state"/origin-*.url "$state"/origin-*.pid; do
    [ -e "$name" ] && names+=("$(basename "${name%.*}")")
  done
  if [ "${#names[@]}" -eq 0 ]; then names=(origin); fi
  for name in $(printf '%s\n' "${names[@]}" | sort -u -V); do
    if fg_pid_alive "$state/$name.pid" && url="$(cat "$state/$name.url" 2>/dev/null)" \
        && fg_wait_http "$url/readyz" 2; then
      printf '%-9s up   %s (pid %s)\n' "$name:" "$url" "$(cat "$state/$name.pid")"
    else
      printf '%-9s down\n' "$name:"; rc=1
    fi
  done
  if [ "${#names[@]}" -gt 1 ] || [ -f "$state/balancer.pid" ]; then
    balancer_status "$state" || rc=1
  fi
  if fg_pid_alive "$state/edge.pid" && url="$(cat "$state/edge.url" 2>/dev/null)"; then
    echo "edge:     up   $url (pid $(cat "$state/edge.pid"))"
  else
    echo "edge:     down"; rc=1
  fi
  return "$rc"
}
