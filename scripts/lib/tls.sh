# shellcheck shell=bash
# TLS-only PostgreSQL and Redis on loopback with a throwaway certificate authority, to test
# the origin against "managed" services (sslmode=verify-full, rediss://). Source after
# common.sh and services.sh.
#
#   tls_ca STATE                      makes STATE/tls/{ca,server,other-ca}.{pem,key} (openssl):
#                                     a CA, a server certificate it signed for 127.0.0.1 and
#                                     localhost, and a second CA that signed nothing
#   tls_pg_up STATE DB                an own PostgreSQL (initdb) with ssl=on and hostssl only,
#                                     on a free port; sets TLS_DATABASE_URL (verify-full)
#   tls_redis_up STATE                redis-server with --tls-port only; sets TLS_REDIS_URL
#   tls_down STATE                    stops both
# Clients trust the CA through sslrootcert= (PostgreSQL URL) and SSL_CERT_FILE (Redis, the
# admin CLI: rustls-native-certs reads it).

tls_ca() {
  local d="$1/tls"
  mkdir -p "$d"
  [ -s "$d/server.pem" ] && return 0
  fg_need_cmd openssl openssl
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=flashgate test CA" \
    -keyout "$d/ca.key" -out "$d/ca.pem" >/dev/null 2>&1 || fg_die "openssl: CA"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=flashgate other CA" \
    -keyout "$d/other-ca.key" -out "$d/other-ca.pem" >/dev/null 2>&1 || fg_die "openssl: other CA"
  openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" \
    -keyout "$d/server.key" -out "$d/server.csr" >/dev/null 2>&1 || fg_die "openssl: server key"
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$d/server.ext"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
    -days 2 -extfile "$d/server.ext" -out "$d/server.pem" >/dev/null 2>&1 || fg_die "openssl: server cert"
  chmod 600 "$d"/*.key
}

tls_pg_up() {
  local state="$1" db="$2" bin dir port
  tls_ca "$state"
  if [ -s "$state/tls-pg.port" ] && [ -s "$state/tls-pg.dir" ] && psql "postgres://postgres@127.0.0.1:$(cat "$state/tls-pg.port")/postgres?sslmode=require" -Atqc 'select 1' >/dev/null 2>&1; then
    port="$(cat "$state/tls-pg.port")"
  else
    bin="$(_svc_pg_bindir)" || fg_die "no initdb (install postgresql)"
    dir="$(mktemp -d /tmp/flashgate-pgtls.XXXXXX)"
    port="${FLASHGATE_TLS_PG_PORT:-$(fg_free_port)}"
    cp "$state/tls/server.pem" "$state/tls/server.key" "$dir/"
    if [ "$(id -u)" -eq 0 ]; then
      id postgres >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin postgres
      chown -R postgres "$dir"
    fi
    _svc_pg_run "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-locale >"$state/tls-pg-initdb.log" 2>&1 \
      || { cat "$state/tls-pg-initdb.log" >&2; fg_die "initdb (TLS PostgreSQL) failed"; }
    # TCP connections must use TLS: hostssl only (plain TCP is refused by pg_hba).
    printf 'local all all trust\nhostssl all all 127.0.0.1/32 trust\n' >"$dir/data/pg_hba.conf"
    echo "$dir" >"$state/tls-pg.dir"; echo "$port" >"$state/tls-pg.port"; echo "$bin" >"$state/tls-pg.bin"
    fg_log "starting a TLS-only PostgreSQL in $dir on 127.0.0.1:$port"
    _svc_pg_run "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
      -o "-p $port -c listen_addresses=127.0.0.1 -k $dir -c max_connections=40 -c ssl=on -c ssl_cert_file=$dir/server.pem -c ssl_key_file=$dir/server.key" start >&2 \
      || { tail -20 "$dir/postgres.log" >&2; fg_die "TLS PostgreSQL did not start"; }
    psql "postgres://postgres@127.0.0.1:$port/postgres?sslmode=require" -qc "CREATE DATABASE \"$db\"" >&2 \
      || fg_die "CREATE DATABASE $db (TLS PostgreSQL) failed"
  fi
  TLS_DATABASE_URL="postgres://postgres@127.0.0.1:$port/$db?sslmode=verify-full&sslrootcert=$state/tls/ca.pem"
  export TLS_DATABASE_URL
}

tls_redis_up() {
  local state="$1" port i d="$1/tls"
  tls_ca "$state"
  if ! fg_pid_alive "$state/tls-redis.pid"; then
    port="${FLASHGATE_TLS_REDIS_PORT:-$(fg_free_port)}"
    fg_log "starting a TLS-only Redis on 127.0.0.1:$port"
    redis-server --bind 127.0.0.1 --port 0 --tls-port "$port" --tls-cert-file "$d/server.pem" \
      --tls-key-file "$d/server.key" --tls-ca-cert-file "$d/ca.pem" --tls-auth-clients no \
      --save '' --appendonly no --daemonize yes --pidfile "$state/tls-redis.pid" \
      --logfile "$state/tls-redis.log" --dir "$state" >&2 || fg_die "TLS redis-server did not start"
    echo "$port" >"$state/tls-redis.port"
    for i in $(seq 1 50); do
      [ "$(redis-cli --tls --cacert "$d/ca.pem" -p "$port" ping 2>/dev/null)" = PONG ] && break
      sleep 0.1
    done
  fi
  TLS_REDIS_URL="rediss://127.0.0.1:$(cat "$state/tls-redis.port")/0"
  export TLS_REDIS_URL
}

tls_down() {
  local state="$1" dir bin
  if [ -s "$state/tls-pg.dir" ]; then
    dir="$(cat "$state/tls-pg.dir")"; bin="$(cat "$state/tls-pg.bin")"
    _svc_pg_run "$bin/pg_ctl" -D "$dir/data" -m fast -w -t 30 stop >/dev/null 2>&1 || true
    case "$dir" in /tmp/flashgate-pgtls.*) rm -rf "$dir" ;; esac
    rm -f "$state/tls-pg.dir" "$state/tls-pg.port" "$state/tls-pg.bin"
  fi
  [ -f "$state/tls-redis.pid" ] && fg_stop_pid "$state/tls-redis.pid" 10
  rm -f "$state/tls-redis.port"
}
