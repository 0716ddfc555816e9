# shellcheck shell=bash
# PostgreSQL and Redis for the flashgate scripts. Source it after scripts/lib/common.sh.
#
#   services_up STATE_DIR DB_NAME   exports DATABASE_URL and REDIS_URL, creating DB_NAME
#   services_down STATE_DIR         stops what services_up started (nothing else)
#   services_status STATE_DIR       prints what is used and whether it answers
#
# Where the services come from, in order:
#   1. DATABASE_URL / REDIS_URL when set in the environment (the database in DATABASE_URL is
#      created if missing);
#   2. the machine's own instances when they answer: PostgreSQL on 127.0.0.1:5432 as user
#      postgres without a password, Redis on 127.0.0.1:6379;
#   3. throwaway instances started here: initdb + pg_ctl in a temp dir on a free port, and
#      redis-server --save '' on a free port, installing the Debian packages postgresql and
#      redis-server when missing. services_down stops them and removes the temp dir.
# FLASHGATE_REDIS=cluster (and no REDIS_URL) starts a 6-node Redis Cluster instead of the
# single Redis (scripts/lib/cluster.sh): REDIS_URL becomes redis+cluster://host:port,... and
# services_down stops the cluster. REDIS_URL may name a cluster in that form too.
# Only the database DB_NAME is ever created; no other database is touched.
# Several runs side by side on one machine (one per clone or worktree): FLASHGATE_DB_SUFFIX
# (e.g. _h1) is appended to every DB_NAME, and FLASHGATE_REDIS_PORT names the port of the
# machine's Redis to use in place of 6379 (start one per run: redis-server --port N --save '').

if [ -f "$FG_ROOT/scripts/lib/cluster.sh" ]; then
  # shellcheck source=cluster.sh
  . "$FG_ROOT/scripts/lib/cluster.sh"
fi

_svc_pg_ok() { psql "$1" -Atqc 'select 1' >/dev/null 2>&1; }

# _svc_pg_ensure_db URL: creates the database named in URL (via the server's postgres db).
_svc_pg_ensure_db() {
  local url="$1" db maint
  _svc_pg_ok "$url" && return 0
  db="${url##*/}"; db="${db%%\?*}"
  [[ "$db" =~ ^[A-Za-z0-9_]+$ ]] || fg_die "cannot create database '$db' (name must be [A-Za-z0-9_]+)"
  maint="${url%/*}/postgres"
  _svc_pg_ok "$maint" || fg_die "PostgreSQL at ${url%/*}/ does not answer (psql \"$maint\")"
  if [ "$(psql "$maint" -Atqc "SELECT 1 FROM pg_database WHERE datname = '$db'")" != "1" ]; then
    fg_log "creating database $db"
    psql "$maint" -qc "CREATE DATABASE \"$db\"" >&2 || fg_die "CREATE DATABASE $db failed"
  fi
  _svc_pg_ok "$url" || fg_die "database $db does not answer after creating it"
}

_svc_redis_ok() {
  local url="$1" hostport host port line
  case "$url" in redis+cluster://*) cluster_ok "$url"; return ;; esac
  hostport="${url#redis://}"; hostport="${hostport##*@}"; hostport="${hostport%%/*}"
  host="${hostport%:*}"; port="${hostport##*:}"
  [ "$port" = "$hostport" ] && port=6379
  if fg_have redis-cli; then
    [ "$(redis-cli -u "$url" ping 2>/dev/null)" = "PONG" ]
  else
    (
      exec 3<>"/dev/tcp/$host/$port" || exit 1
      printf 'PING\r\n' >&3
      IFS= read -r -t 2 line <&3 || true
      [[ "$line" == +PONG* ]]
    ) 2>/dev/null
  fi
}

# _svc_pg_run CMD...: runs a PostgreSQL server command as a non-root user (postgres refuses
# to run as root).
_svc_pg_run() {
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

_svc_pg_bindir() {
  local d
  d="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)"
  if [ -n "$d" ] && [ -x "$d/initdb" ]; then echo "$d"; return 0; fi
  if fg_have initdb && fg_have pg_ctl; then dirname "$(command -v initdb)"; return 0; fi
  return 1
}

# _svc_pg_start_own STATE DB: a throwaway PostgreSQL in a temp dir; prints its URL.
_svc_pg_start_own() {
  local state="$1" db="$2" bin dir port
  if [ -s "$state/pg.dir" ] && [ -s "$state/pg.port" ]; then
    dir="$(cat "$state/pg.dir")"; port="$(cat "$state/pg.port")"
    if _svc_pg_ok "postgres://postgres@127.0.0.1:$port/postgres"; then
      echo "postgres://postgres@127.0.0.1:$port/$db"; return 0
    fi
  fi
  bin="$(_svc_pg_bindir)" || { fg_apt_install postgresql; bin="$(_svc_pg_bindir)"; } \
    || fg_die "no initdb/pg_ctl after installing postgresql"
  fg_need_cmd psql postgresql-client
  dir="$(mktemp -d /tmp/flashgate-pg.XXXXXX)"
  port="$(fg_free_port)"
  [ "$(id -u)" -eq 0 ] && { id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres; chown postgres "$dir"; }
  fg_log "starting a throwaway PostgreSQL in $dir on 127.0.0.1:$port"
  _svc_pg_run "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-locale >"$state/pg-initdb.log" 2>&1 \
    || { cat "$state/pg-initdb.log" >&2; fg_die "initdb failed"; }
  echo "$dir" >"$state/pg.dir"; echo "$port" >"$state/pg.port"; echo "$bin" >"$state/pg.bin"
  _svc_pg_run "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
    -o "-p $port -c listen_addresses=127.0.0.1 -k $dir -c max_connections=200" start >&2 \
    || { tail -20 "$dir/postgres.log" >&2; fg_die "PostgreSQL did not start"; }
  echo "postgres://postgres@127.0.0.1:$port/$db"
}

# _svc_redis_start_own STATE: a throwaway Redis keeping nothing on disk; prints its URL.
_svc_redis_start_own() {
  local state="$1" port i
  if fg_pid_alive "$state/redis.pid" && [ -s "$state/redis.port" ]; then
    echo "redis://127.0.0.1:$(cat "$state/redis.port")"; return 0
  fi
  fg_need_cmd redis-server redis-server
  port="$(fg_free_port)"
  fg_log "starting a throwaway Redis on 127.0.0.1:$port"
  redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --daemonize yes \
    --pidfile "$state/redis.pid" --logfile "$state/redis.log" --dir "$state" >&2 \
    || fg_die "redis-server did not start"
  echo "$port" >"$state/redis.port"
  fg_until 50 _svc_redis_ok "redis://127.0.0.1:$port" \
    || fg_die "Redis on port $port does not answer; log: $state/redis.log"
  echo "redis://127.0.0.1:$port"
}

# _svc_pg_recreate_db URL: drops and creates the database named in URL (only used for a
# database these scripts named themselves).
_svc_pg_recreate_db() {
  fg_log "recreating the database of $1 (fresh for this run)"
  _svc_pg_drop_db "$1"
  _svc_pg_ensure_db "$1"
}

# _svc_pg_url_of URL DB: URL (its query string dropped) naming database DB on the same server.
_svc_pg_url_of() { local url="${1%%\?*}"; echo "${url%/*}/$2"; }

# _svc_pg_drop_db URL: drops the database named in URL (only a flashgate_* one).
_svc_pg_drop_db() {
  local url="$1" db maint
  db="${url##*/}"; db="${db%%\?*}"
  [[ "$db" =~ ^flashgate_[a-z0-9_]+$ ]] || fg_die "refusing to drop database '$db'"
  maint="${url%/*}/postgres"
  fg_log "dropping database $db"
  psql "$maint" -qc "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" >&2 || fg_die "DROP DATABASE $db failed"
}

# The key that names the owner of a Redis database (a clone's path), see _svc_redis_claim_db.
SVC_REDIS_OWNER_KEY="flashgate:dev:owner"

# _svc_redis_claim_db BASE_URL FIRST OWNER: the first Redis database from FIRST (then on, wrapping
# within 4..15) that OWNER already owns, or that is empty and then becomes OWNER's; prints its
# index. Fails when every one belongs to someone else. Databases 0 to 3 are left to others
# (0 the default, 2 scripts/test, 3 scripts/test-topology).
_svc_redis_claim_db() {
  local base="$1" first="$2" owner="$3" k db have
  fg_need_cmd redis-cli redis-tools
  for k in $(seq 0 11); do
    db=$(( 4 + (first - 4 + k) % 12 ))
    have="$(redis-cli -u "$base/$db" get "$SVC_REDIS_OWNER_KEY" 2>/dev/null)" || return 1
    if [ "$have" = "$owner" ]; then echo "$db"; return 0; fi
    if [ -z "$have" ] && [ "$(redis-cli -u "$base/$db" dbsize)" = 0 ] \
        && [ "$(redis-cli -u "$base/$db" set "$SVC_REDIS_OWNER_KEY" "$owner" NX)" = OK ]; then
      echo "$db"; return 0
    fi
  done
  return 1
}

# services_up STATE DB [FRESH]: FRESH=1 starts from an empty database DB and an empty Redis
# database (index $FLASHGATE_REDIS_DB) when the scripts chose them, i.e. not for
# DATABASE_URL / REDIS_URL given by the caller.
services_up() {
  local state="$1" db="$2${FLASHGATE_DB_SUFFIX:-}" fresh="${3:-0}" pg_from redis_from redis_db="${FLASHGATE_REDIS_DB:-0}"
  mkdir -p "$state"
  fg_need_cmd psql postgresql-client
  if [ -n "${DATABASE_URL:-}" ]; then
    pg_from="DATABASE_URL"
  elif fg_port_open 127.0.0.1 5432 && _svc_pg_ok "postgres://postgres@127.0.0.1:5432/postgres"; then
    DATABASE_URL="postgres://postgres@127.0.0.1:5432/$db"; pg_from="this machine's PostgreSQL"
  else
    DATABASE_URL="$(_svc_pg_start_own "$state" "$db")"; pg_from="throwaway PostgreSQL"
  fi
  if [ "$fresh" = 1 ] && [ "$pg_from" != "DATABASE_URL" ]; then
    _svc_pg_recreate_db "$DATABASE_URL"
  fi
  _svc_pg_ensure_db "$DATABASE_URL"
  if [ -n "${REDIS_URL:-}" ]; then
    redis_from="REDIS_URL"
    _svc_redis_ok "$REDIS_URL" || fg_die "Redis at REDIS_URL does not answer PING"
  elif [ "${FLASHGATE_REDIS:-single}" = cluster ]; then
    cluster_up "$state"
    REDIS_URL="$CLUSTER_URL"; redis_from="local Redis Cluster, 3 primaries + 3 replicas"
  else
    [ "${FLASHGATE_REDIS:-single}" = single ] || fg_die "FLASHGATE_REDIS must be single or cluster"
    local base
    if _svc_redis_ok "redis://127.0.0.1:${FLASHGATE_REDIS_PORT:-6379}"; then
      base="redis://127.0.0.1:${FLASHGATE_REDIS_PORT:-6379}"; redis_from="this machine's Redis"
    else
      base="$(_svc_redis_start_own "$state")"; redis_from="throwaway Redis"
    fi
    if [ -n "${FLASHGATE_REDIS_OWNER:-}" ]; then
      redis_db="$(_svc_redis_claim_db "$base" "$redis_db" "$FLASHGATE_REDIS_OWNER")" \
        || fg_die "Redis databases 4 to 15 all belong to other clones; set FLASHGATE_REDIS_DB"
    fi
    REDIS_URL="$base/$redis_db"
    if [ "$fresh" = 1 ]; then
      fg_need_cmd redis-cli redis-tools
      fg_log "emptying Redis database $redis_db (fresh for this run)"
      redis-cli -u "$REDIS_URL" flushdb >/dev/null || fg_die "FLUSHDB on $REDIS_URL failed"
    fi
  fi
  export DATABASE_URL REDIS_URL
  printf 'DATABASE_URL=%s\nREDIS_URL=%s\n' "$DATABASE_URL" "$REDIS_URL" >"$state/services.env"
  fg_log "PostgreSQL: $pg_from ($DATABASE_URL)"
  fg_log "Redis: $redis_from ($REDIS_URL)"
}

services_down() {
  local state="$1" dir bin kept=1
  # On this machine's own PostgreSQL and Redis the clone's data outlives `down`: where it is
  # stays written (data.env) for `scripts/dev reset`. Throwaway services take it with them.
  { [ -s "$state/pg.dir" ] || [ -f "$state/redis.pid" ] || [ -d "$state/cluster" ]; } && kept=0
  if [ "$kept" = 1 ] && [ -s "$state/services.env" ]; then
    cp "$state/services.env" "$state/data.env"
  fi
  if [ -s "$state/pg.dir" ]; then
    dir="$(cat "$state/pg.dir")"; bin="$(cat "$state/pg.bin" 2>/dev/null || _svc_pg_bindir)"
    if [ -d "$dir/data" ]; then
      fg_log "stopping the throwaway PostgreSQL in $dir"
      _svc_pg_run "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
    fi
    case "$dir" in /tmp/flashgate-pg.*) rm -rf "$dir" ;; esac
    rm -f "$state/pg.dir" "$state/pg.port" "$state/pg.bin"
  fi
  if [ -f "$state/redis.pid" ]; then
    fg_log "stopping the throwaway Redis"
    fg_stop_pid "$state/redis.pid" 10
    rm -f "$state/redis.port"
  fi
  cluster_down "$state"
  rm -f "$state/services.env"
}

services_status() {
  local state="$1" DATABASE_URL REDIS_URL
  if [ ! -s "$state/services.env" ]; then echo "services: not set up"; return 1; fi
  # shellcheck disable=SC1091
  . "$state/services.env"
  if _svc_pg_ok "$DATABASE_URL"; then echo "postgres: up   $DATABASE_URL"; else echo "postgres: DOWN $DATABASE_URL"; fi
  if [ -d "$state/cluster" ]; then
    cluster_status "$state"
  elif _svc_redis_ok "$REDIS_URL"; then echo "redis:    up   $REDIS_URL"; else echo "redis:    DOWN $REDIS_URL"; fi
}
