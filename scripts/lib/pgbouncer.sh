# shellcheck shell=bash
# PgBouncer (Debian's package) in front of a PostgreSQL, for the flashgate scripts. Source
# after common.sh. Pooling mode: FLASHGATE_PGBOUNCER_POOL_MODE (default transaction, with the
# origin's FLASHGATE_DB_POOLER=transaction; session works too: see docs/DEPLOY.md).
#
#   pgbouncer_up STATE_DIR DATABASE_URL   starts PgBouncer on a free loopback port (or
#                                         FLASHGATE_PGBOUNCER_PORT) in front of the server of
#                                         DATABASE_URL; sets PGBOUNCER_URL (same database,
#                                         through PgBouncer) and writes STATE_DIR/pgbouncer.url
#   pgbouncer_down STATE_DIR              stops the PgBouncer pgbouncer_up started
#
# The settings the origin needs (docs/DEPLOY.md "Behind a connection pooler"):
#   pool_mode = transaction (any PgBouncer: the origin runs every statement unnamed inside a
#     transaction, origin/src/db.rs), or session
#   ignore_startup_parameters = extra_float_digits,options
#     (sqlx sends extra_float_digits and PgBouncer 1.18 refuses unknown start-up parameters;
#     the origin stops sending both with FLASHGATE_DB_POOLER=transaction, other clients may not)
# and the origin runs with FLASHGATE_DB_POOLER=transaction (no start-up parameters).
# Authentication: auth_type = any with the server user of DATABASE_URL (a local trust setup);
# production uses scram-sha-256 and an auth_file / auth_query.

# pgbouncer_up STATE DATABASE_URL
pgbouncer_up() {
  local state="$1" url="$2" rest hostport host port user db dir i
  [ -x /usr/sbin/pgbouncer ] || fg_need_cmd pgbouncer pgbouncer
  local bin
  bin="$(command -v pgbouncer || echo /usr/sbin/pgbouncer)"
  [ -x "$bin" ] || fg_apt_install pgbouncer
  # postgres://user[:pw]@host:port/db[?...]
  rest="${url#*://}"
  user="postgres"
  case "$rest" in *@*) user="${rest%%@*}"; user="${user%%:*}"; rest="${rest#*@}" ;; esac
  hostport="${rest%%/*}"; db="${rest#*/}"; db="${db%%\?*}"
  host="${hostport%:*}"; port="${hostport##*:}"
  [ "$port" = "$hostport" ] && port=5432
  dir="$state/pgbouncer"
  mkdir -p "$dir"
  if fg_pid_alive "$dir/pgbouncer.pid" && [ -s "$state/pgbouncer.url" ]; then
    PGBOUNCER_URL="$(cat "$state/pgbouncer.url")"
    fg_log "PgBouncer already running at $PGBOUNCER_URL"; return 0
  fi
  local listen="${FLASHGATE_PGBOUNCER_PORT:-$(fg_free_port)}"
  cat >"$dir/pgbouncer.ini" <<INI
[databases]
* = host=$host port=$port user=$user

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $listen
unix_socket_dir =
auth_type = any
pool_mode = ${FLASHGATE_PGBOUNCER_POOL_MODE:-transaction}
ignore_startup_parameters = extra_float_digits,options
default_pool_size = ${FLASHGATE_PGBOUNCER_POOL_SIZE:-20}
max_client_conn = 500
server_reset_query =
pidfile = $dir/pgbouncer.pid
logfile = $dir/pgbouncer.log
INI
  # PgBouncer refuses to run as root: it runs as postgres then.
  local as=()
  if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
    chown -R postgres "$dir"
    as=(-u postgres)
  fi
  fg_log "starting PgBouncer (${FLASHGATE_PGBOUNCER_POOL_MODE:-transaction} pooling) on 127.0.0.1:$listen in front of $host:$port"
  "$bin" -d "${as[@]}" "$dir/pgbouncer.ini" >&2 || { tail -20 "$dir/pgbouncer.log" >&2; fg_die "PgBouncer did not start"; }
  PGBOUNCER_URL="postgres://$user@127.0.0.1:$listen/$db"
  if ! fg_until 50 psql "$PGBOUNCER_URL" -Atqc 'select 1' >/dev/null 2>&1; then
    tail -20 "$dir/pgbouncer.log" >&2
    fg_die "PgBouncer on port $listen does not answer"
  fi
  echo "$PGBOUNCER_URL" >"$state/pgbouncer.url"
  export PGBOUNCER_URL
}

# pgbouncer_down STATE
pgbouncer_down() {
  fg_stop_service PgBouncer "$1/pgbouncer/pgbouncer.pid" 10 "$1/pgbouncer.url"
}
