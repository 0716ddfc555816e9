# shellcheck shell=bash
# Common helpers of the flashgate scripts: logging, ports, waiting, installing Debian packages.
# Source it; it defines variables and functions only.

FG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# Tool and cache folder outside the repo (shared with scripts/lib/edge.sh).
FG_CACHE="${FLASHGATE_TOOLS_DIR:-$HOME/.cache/flashgate}"

fg_log() { printf '[%s] %s\n' "${FG_TAG:-flashgate}" "$*" >&2; }
fg_die() { fg_log "error: $*"; exit 1; }
fg_have() { command -v "$1" >/dev/null 2>&1; }

# fg_port_open HOST PORT: true when something accepts TCP connections there.
fg_port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

# fg_free_port: prints a TCP port on 127.0.0.1 nothing listens on, below the kernel's
# ephemeral range (32768 and up on Linux by default), so an outgoing connection cannot take it
# between this check and the bind.
# FLASHGATE_PORT_RANGE=LOW-HIGH (e.g. 33100-33199) limits it to that range, for a machine
# shared by several runs that each own a range of ports.
fg_free_port() {
  local p i low=20000 span=12700
  if [[ "${FLASHGATE_PORT_RANGE:-}" =~ ^([0-9]+)-([0-9]+)$ ]]; then
    low="${BASH_REMATCH[1]}"; span=$(( BASH_REMATCH[2] - low + 1 ))
    [ "$span" -gt 0 ] || { echo "FLASHGATE_PORT_RANGE: '$FLASHGATE_PORT_RANGE' is empty" >&2; return 1; }
  fi
  for i in $(seq 1 200); do
    p=$(( low + (RANDOM * 32768 + RANDOM) % span ))
    if ! fg_port_open 127.0.0.1 "$p"; then echo "$p"; return 0; fi
  done
  return 1
}

# fg_until TRIES CMD...: runs CMD every 0.1 s until it succeeds (then 0) or TRIES runs failed (1).
fg_until() {
  local tries="$1" i
  shift
  for i in $(seq 1 "$tries"); do
    "$@" && return 0
    sleep 0.1
  done
  return 1
}

# fg_stop_service WHAT PIDFILE SECONDS FILE...: stops the process of PIDFILE (when there is one,
# saying "stopping WHAT"; see fg_stop_pid), then removes the FILEs that advertised it.
fg_stop_service() {
  local what="$1" pidfile="$2" secs="$3"
  shift 3
  if [ -f "$pidfile" ]; then
    fg_log "stopping $what"
    fg_stop_pid "$pidfile" "$secs"
  fi
  rm -f "$@"
}

# fg_wait_http URL SECONDS [PID]: waits until URL answers 2xx; gives up early when PID dies.
fg_wait_http() {
  local url="$1" secs="$2" pid="${3:-}" i
  for i in $(seq 1 $(( secs * 5 ))); do
    if curl -fsS -o /dev/null --max-time 2 --noproxy '*' "$url" 2>/dev/null; then return 0; fi
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
    sleep 0.2
  done
  return 1
}

# fg_pid_alive PIDFILE: true when PIDFILE names a running process.
fg_pid_alive() {
  local pid
  [ -s "$1" ] || return 1
  pid="$(cat "$1")"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

# fg_stop_pid PIDFILE [SECONDS]: SIGTERM the process in PIDFILE, SIGKILL after SECONDS
# (default 15); removes PIDFILE. A missing PIDFILE or dead process is fine.
fg_stop_pid() {
  local pidfile="$1" secs="${2:-15}" pid i
  [ -f "$pidfile" ] || return 0
  pid="$(cat "$pidfile")"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for i in $(seq 1 $(( secs * 10 ))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      fg_log "pid $pid did not stop in ${secs}s; killing it"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$pidfile"
}

# fg_apt_install PACKAGE...: installs Debian packages (as root, or with sudo).
fg_apt_install() {
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    fg_have sudo || fg_die "need root (or sudo) to install: $*"
    sudo="sudo"
  fi
  fg_log "installing Debian packages: $*"
  # One install at a time (scripts/test installs in the background while its legs run): the
  # lock file waits for another of ours where apt-get would fail on dpkg's lock.
  local lock=(flock "${TMPDIR:-/tmp}/flashgate-apt.lock")
  fg_have flock || lock=()
  if [ -z "${FG_APT_UPDATED:-}" ]; then
    "${lock[@]}" $sudo apt-get update -qq >&2 || fg_die "apt-get update failed"
    FG_APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive "${lock[@]}" $sudo apt-get install -y -qq \
    --no-install-recommends "$@" >&2 || fg_die "apt-get install $* failed"
}

# fg_need_cmd CMD PACKAGE: installs PACKAGE when CMD is missing.
fg_need_cmd() { fg_have "$1" || fg_apt_install "$2"; }

# fg_secret: 32 random bytes as hex.
fg_secret() { od -An -N32 -tx1 /dev/urandom | tr -d ' \n'; }
