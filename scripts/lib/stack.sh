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
# FLASHGATE_ORIGIN_PORT picks the origin's port (default: 8080 when free, else a free one).
# FLASHGATE_NO_EDGE=1 starts the origin alone.

if [ -f "$FG_ROOT/scripts/lib/edge.sh" ]; then
  # shellcheck disable=SC1091
  . "$FG_ROOT/scripts/lib/edge.sh"
fi

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

# stack_build PROFILE: builds the origin (flashgate) and the load generator (stampede) in one
# cargo invocation, so both see the same feature set and nothing is compiled twice.
stack_build() { fg_cargo_build "$1" -p flashgate-origin -p flashgate-tests --bins; }

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
  set -a
  # shellcheck disable=SC1091
  . "$state/secrets.env"
  set +a
}

# origin_start STATE BIN: starts the origin unless it runs; sets FLASHGATE_ORIGIN_URL.
origin_start() {
  local state="$1" bin="$2" port pid
  if fg_pid_alive "$state/origin.pid" && [ -s "$state/origin.url" ]; then
    FLASHGATE_ORIGIN_URL="$(cat "$state/origin.url")"
    if fg_wait_http "$FLASHGATE_ORIGIN_URL/readyz" 5; then
      fg_log "origin already running at $FLASHGATE_ORIGIN_URL"; return 0
    fi
    fg_log "origin pid $(cat "$state/origin.pid") is not ready; restarting it"
    fg_stop_pid "$state/origin.pid"
  fi
  port="${FLASHGATE_ORIGIN_PORT:-}"
  if [ -z "$port" ]; then
    if fg_port_open 127.0.0.1 8080; then port="$(fg_free_port)"; else port=8080; fi
  fi
  fg_port_open 127.0.0.1 "$port" && fg_die "port $port is taken (set FLASHGATE_ORIGIN_PORT)"
  fg_log "starting the origin on 127.0.0.1:$port (log: $state/origin.log)"
  FLASHGATE_LISTEN="127.0.0.1:$port" RUST_LOG="${RUST_LOG:-warn,flashgate=info,flashgate_origin=info}" \
    nohup "$bin" serve >"$state/origin.log" 2>&1 &
  pid=$!
  echo "$pid" >"$state/origin.pid"
  FLASHGATE_ORIGIN_URL="http://127.0.0.1:$port"
  if ! fg_wait_http "$FLASHGATE_ORIGIN_URL/readyz" 120 "$pid"; then
    tail -30 "$state/origin.log" >&2
    fg_stop_pid "$state/origin.pid" 5
    fg_die "the origin did not become ready (log: $state/origin.log)"
  fi
  echo "$FLASHGATE_ORIGIN_URL" >"$state/origin.url"
  fg_log "origin ready at $FLASHGATE_ORIGIN_URL"
}

# edge_up STATE: builds and starts the edge worker in workerd; sets FLASHGATE_EDGE_URL.
edge_up() {
  local state="$1"
  FLASHGATE_EDGE_URL=""
  if ! stack_edge_available; then
    fg_log "edge: not available (scripts/lib/edge.sh missing or FLASHGATE_NO_EDGE=1); origin only"
    return 0
  fi
  if fg_pid_alive "$state/edge.pid" && [ -s "$state/edge.url" ]; then
    FLASHGATE_EDGE_URL="$(cat "$state/edge.url")"
    fg_log "edge already running at $FLASHGATE_EDGE_URL"; return 0
  fi
  if [ "${FLASHGATE_SKIP_EDGE_BUILD:-0}" != "1" ]; then
    edge_tools_install || fg_die "installing the edge tools failed"
    edge_build || fg_die "building the edge worker failed"
  fi
  fg_log "starting the edge worker (Miniflare/workerd) in front of $FLASHGATE_ORIGIN_URL"
  edge_start "$FLASHGATE_ORIGIN_URL" 0 "$state/edge.pid" "$state/edge.url" \
    || fg_die "the edge worker did not start (log: $state/edge.pid.log)"
  FLASHGATE_EDGE_URL="$(cat "$state/edge.url")"
  fg_log "edge ready at $FLASHGATE_EDGE_URL"
}

stack_write_env() {
  local state="$1"
  umask 077
  cat >"$state/env" <<ENV
FLASHGATE_ORIGIN_URL=$FLASHGATE_ORIGIN_URL
FLASHGATE_EDGE_URL=$FLASHGATE_EDGE_URL
FLASHGATE_ADMIN_TOKEN=$FLASHGATE_ADMIN_TOKEN
FLASHGATE_CUSTOMER_TOKEN_SECRET=$FLASHGATE_CUSTOMER_TOKEN_SECRET
FLASHGATE_SERVICE_TOKEN=$FLASHGATE_SERVICE_TOKEN
FLASHGATE_EDGE_SECRET=$FLASHGATE_EDGE_SECRET
DATABASE_URL=$DATABASE_URL
REDIS_URL=$REDIS_URL
ENV
  umask 022
}

stack_up() {
  local state="$1" profile="$2" db="$3"
  mkdir -p "$state"
  services_up "$state" "$db"
  stack_secrets "$state"
  fg_log "building the origin and the stampede generator ($profile)"
  stack_build "$profile"
  origin_start "$state" "$(fg_target_dir)/$profile/flashgate"
  edge_up "$state"
  export FLASHGATE_ORIGIN_URL FLASHGATE_EDGE_URL
  stack_write_env "$state"
  fg_log "up: origin $FLASHGATE_ORIGIN_URL, edge ${FLASHGATE_EDGE_URL:-none}; env in $state/env"
}

# stack_stop_servers STATE: stops the edge and the origin, keeps the services.
stack_stop_servers() {
  local state="$1"
  if [ -f "$state/edge.pid" ]; then
    fg_log "stopping the edge worker"
    if declare -F edge_stop >/dev/null; then edge_stop "$state/edge.pid"; else fg_stop_pid "$state/edge.pid"; fi
  fi
  rm -f "$state/edge.url"
  if [ -f "$state/origin.pid" ]; then
    fg_log "stopping the origin"
    fg_stop_pid "$state/origin.pid" 20
  fi
  rm -f "$state/origin.url"
}

stack_down() {
  local state="$1"
  [ -d "$state" ] || { fg_log "nothing to stop ($state does not exist)"; return 0; }
  stack_stop_servers "$state"
  services_down "$state"
  rm -f "$state/env"
}

stack_status() {
  local state="$1" rc=0 url
  services_status "$state" || rc=1
  if fg_pid_alive "$state/origin.pid" && url="$(cat "$state/origin.url" 2>/dev/null)" \
      && fg_wait_http "$url/readyz" 2; then
    echo "origin:   up   $url (pid $(cat "$state/origin.pid"))"
  else
    echo "origin:   down"; rc=1
  fi
  if fg_pid_alive "$state/edge.pid" && url="$(cat "$state/edge.url" 2>/dev/null)"; then
    echo "edge:     up   $url (pid $(cat "$state/edge.pid"))"
  else
    echo "edge:     down"; rc=1
  fi
  return "$rc"
}
