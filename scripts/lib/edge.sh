# shellcheck shell=bash
# Edge worker helpers: install the tools, build the worker, run it in workerd (plain, or behind
# Miniflare).
#
# Source this file (`. scripts/lib/edge.sh`); it defines functions only and changes no shell
# options of the caller. Works offline: worker-build is pointed at local tools instead of
# downloading wasm-bindgen, esbuild and wasm-opt. See docs/EDGE.md.
#
# Functions:
#   edge_tools_install                 install (idempotent) everything edge_build/edge_start need
#   edge_build                         build edge-worker/ into edge-worker/build/ (release)
#   edge_build_baseline                build the trivial constant-JSON worker used by scripts/bench-edge
#   edge_runtime                       the runtime edge_start uses (FLASHGATE_EDGE_RUNTIME)
#   edge_start ORIGIN PORT PIDFILE URLFILE [SCRIPT_DIR]
#                                      start the worker in workerd in the background, write its
#                                      pid and URL
#   edge_stop PIDFILE                  stop what edge_start started
#
# Environment read:
#   FLASHGATE_EDGE_RUNTIME  workerd (default) or miniflare: see edge_runtime
#   FLASHGATE_TOOLS_DIR   tool cache (default $HOME/.cache/flashgate); tools live in
#                         <dir>/<tool>-<version>, the npm cache in <dir>/npm
#   FLASHGATE_CUSTOMER_TOKEN_SECRET, FLASHGATE_EDGE_SECRET, FLASHGATE_STATUS_TTL_MS,
#   FLASHGATE_STATUS_MAX_STALE_MS, FLASHGATE_NOT_STARTED_SKEW_MS, FLASHGATE_ORIGIN_TIMEOUT_MS
#                         passed to the worker by edge_start (unset = wrangler.toml's [vars],
#                         which are the worker's defaults)
#   FLASHGATE_TEST_CLOCK_OFFSET_MS
#                         fault injection only: the worker's clock shifted by this many ms
#                         (scripts/chaos clock-skew); unset = the machine's time

# Pinned versions. wasm-bindgen-cli must equal the wasm-bindgen version in Cargo.lock.
EDGE_WORKER_BUILD_VERSION=0.8.7
EDGE_WASM_BINDGEN_VERSION=0.2.130

# Repository root (this file is scripts/lib/edge.sh).
EDGE_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
EDGE_DIR="$EDGE_REPO_ROOT/edge-worker"

_edge_tools_dir() { echo "${FLASHGATE_TOOLS_DIR:-$HOME/.cache/flashgate}"; }
_edge_log() { echo "[edge] $*" >&2; }

# edge_tools_install: makes sure the wasm32 target, worker-build, wasm-bindgen-cli and the
# node packages (workerd, miniflare, esbuild, binaryen, smol-toml, autocannon from
# edge-worker/package-lock.json) are present.
# Rust tools go to $FLASHGATE_TOOLS_DIR/<tool>-<version> and are reused when present (a cold
# install takes ~2 min on 2 cores). `npm ci` runs only when node_modules is missing or older
# than package-lock.json, with its cache outside the repo. Returns non-zero on failure.
edge_tools_install() {
  local tools; tools="$(_edge_tools_dir)"
  mkdir -p "$tools" || return 1
  if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
    _edge_log "adding rust target wasm32-unknown-unknown"
    rustup target add wasm32-unknown-unknown || return 1
  fi
  local wb="$tools/worker-build-$EDGE_WORKER_BUILD_VERSION"
  local bg="$tools/wasm-bindgen-cli-$EDGE_WASM_BINDGEN_VERSION"
  if [ ! -x "$wb/bin/worker-build" ] || [ ! -x "$bg/bin/wasm-bindgen" ]; then
    _edge_log "installing the edge toolchain into $tools (first run only, about 2 min on 2 cores; the compiler lines below are it)"
  fi
  # The two tools run a few times per build, on one small wasm file: their compile time is
  # what counts, so they are built unoptimised, without debug info or LTO (a third of the
  # release compile; the worker they build is the same byte for byte, as fast; docs/BENCHMARKS.md,
  # "Build and start-up").
  local quick=(env CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_DEBUG=0
    CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16)
  if [ ! -x "$wb/bin/worker-build" ]; then
    _edge_log "installing worker-build $EDGE_WORKER_BUILD_VERSION into $wb"
    "${quick[@]}" cargo install worker-build --version "$EDGE_WORKER_BUILD_VERSION" --locked \
      --root "$wb" || return 1
  fi
  if [ ! -x "$bg/bin/wasm-bindgen" ]; then
    _edge_log "installing wasm-bindgen-cli $EDGE_WASM_BINDGEN_VERSION into $bg"
    # Without --locked: with it the install needs a webpki-roots version the index lacks. Only
    # the `wasm-bindgen` binary, without TLS (its download features are never used here).
    "${quick[@]}" cargo install wasm-bindgen-cli --version "$EDGE_WASM_BINDGEN_VERSION" \
      --no-default-features --bin wasm-bindgen --root "$bg" || return 1
  fi
  if [ ! -d "$EDGE_DIR/node_modules" ] || [ "$EDGE_DIR/package-lock.json" -nt "$EDGE_DIR/node_modules" ]; then
    _edge_log "npm ci in edge-worker/"
    (cd "$EDGE_DIR" && npm ci --cache "$tools/npm" --no-audit --no-fund --prefer-offline) || return 1
    touch "$EDGE_DIR/node_modules"
  fi
}

# _edge_worker_build DIR: runs worker-build --release in DIR with the local tools.
_edge_worker_build() {
  local dir="$1" tools; tools="$(_edge_tools_dir)"
  (
    cd "$dir" &&
    WASM_BINDGEN_BIN="$tools/wasm-bindgen-cli-$EDGE_WASM_BINDGEN_VERSION/bin/wasm-bindgen" \
    ESBUILD_BIN="$EDGE_DIR/node_modules/.bin/esbuild" \
    WASM_OPT_BIN="$EDGE_DIR/node_modules/.bin/wasm-opt" \
    CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$EDGE_REPO_ROOT/target}" \
    CARGO_PROFILE_RELEASE_DEBUG=0 \
      "$tools/worker-build-$EDGE_WORKER_BUILD_VERSION/bin/worker-build" --release
  )
}

# _edge_sources_stamp: a hash of what the worker is built from (the worker's and the shared
# crate's files as they are in the working tree, the workspace manifest and lock file, the
# build tools' versions); empty when git cannot list them.
_edge_sources_stamp() {
  local files
  files="$(cd "$EDGE_REPO_ROOT" && git ls-files -co --exclude-standard -- edge-worker/src \
    edge-worker/Cargo.toml shared Cargo.toml Cargo.lock 2>/dev/null)" || return 0
  [ -n "$files" ] || return 0
  {
    (cd "$EDGE_REPO_ROOT" && printf '%s\n' "$files" | xargs -d '\n' sha1sum)
    echo "$EDGE_WORKER_BUILD_VERSION $EDGE_WASM_BINDGEN_VERSION"
  } | sha1sum | cut -c1-40
}

# edge_build: builds the worker (release, wasm-opt -O) into edge-worker/build/ (index.js +
# index_bg.wasm). Needs edge_tools_install first. ~45 s cold, ~10 s incremental; nothing to do
# when its sources have not changed since the last build (build/.sources keeps their hash).
edge_build() {
  local stamp; stamp="$(_edge_sources_stamp)"
  if [ -n "$stamp" ] && [ -f "$EDGE_DIR/build/index.js" ] \
      && [ "$(cat "$EDGE_DIR/build/.sources" 2>/dev/null)" = "$stamp" ]; then
    _edge_log "edge worker unchanged since its last build: not rebuilt"
    return 0
  fi
  _edge_log "building edge worker"
  _edge_worker_build "$EDGE_DIR" || return 1
  [ -f "$EDGE_DIR/build/index.js" ] || { _edge_log "build/index.js missing after build"; return 1; }
  [ -z "$stamp" ] || echo "$stamp" >"$EDGE_DIR/build/.sources"
}

# edge_build_baseline: builds the trivial constant-JSON Rust worker (edge-worker/bench-baseline)
# into edge-worker/bench-baseline/build/, the reference of scripts/bench-edge.
edge_build_baseline() {
  _edge_log "building baseline worker"
  _edge_worker_build "$EDGE_DIR/bench-baseline" || return 1
}

# edge_port: the PORT to give edge_start: 0 (the runtime's runner picks a free port), or with
# FLASHGATE_PORT_RANGE a free port from that range.
edge_port() {
  if [ -n "${FLASHGATE_PORT_RANGE:-}" ]; then fg_free_port; else echo 0; fi
}

# edge_runtime: the runtime edge_start uses, from FLASHGATE_EDGE_RUNTIME: `workerd` (default:
# plain workerd, the binary of the npm package `workerd`, with a configuration generated from
# wrangler.toml by edge-worker/workerd-config.mjs; about twice the requests/s of Miniflare on
# this kind of machine) or `miniflare` (edge-worker/run-miniflare.mjs: workerd behind
# Miniflare's Node front, with its Cache API and CF-Connecting-IP from the client's socket;
# what the cargo tests use). Anything else is an error (returns 2).
edge_runtime() {
  case "${FLASHGATE_EDGE_RUNTIME:-workerd}" in
    workerd|miniflare) echo "${FLASHGATE_EDGE_RUNTIME:-workerd}" ;;
    *) _edge_log "FLASHGATE_EDGE_RUNTIME must be workerd or miniflare, not '$FLASHGATE_EDGE_RUNTIME'"; return 2 ;;
  esac
}

# edge_start ORIGIN_URL PORT PIDFILE URLFILE [SCRIPT_DIR]: starts the built worker (SCRIPT_DIR,
# default edge-worker/build) in the runtime of edge_runtime, in the background, with
# FLASHGATE_ORIGIN_URL=ORIGIN_URL and wrangler.toml's [vars] replaced by the FLASHGATE_*
# settings and secrets of the environment (edge-worker/worker-env.mjs). PORT 0 picks a free
# port. Waits until it answers HTTP (≤ 30 s), then writes the pid to PIDFILE and its base URL
# (e.g. http://127.0.0.1:38211) to URLFILE. Logs go to PIDFILE with .log appended (with
# workerd, its configuration, which holds the secrets, to PIDFILE.capnp, mode 600). Returns
# non-zero when it did not come up.
edge_start() {
  local origin="$1" port="$2" pidfile="$3" urlfile="$4" script_dir="${5:-$EDGE_DIR/build}"
  if [ -z "$origin" ] || [ -z "$port" ] || [ -z "$pidfile" ] || [ -z "$urlfile" ]; then
    _edge_log "usage: edge_start ORIGIN_URL PORT PIDFILE URLFILE [SCRIPT_DIR]"; return 2
  fi
  local runtime pid url=""
  runtime="$(edge_runtime)" || return 2
  rm -f "$urlfile"
  if [ "$runtime" = workerd ]; then
    # Below the kernel's ephemeral range when common.sh is there (see fg_free_port).
    if [ "$port" = 0 ] && declare -F fg_free_port >/dev/null; then port="$(fg_free_port)" || return 1; fi
    # One copy of the worker (FLASHGATE_EDGE_ISOLATES is for the tests' two-isolate runs).
    url="$(FLASHGATE_ORIGIN_URL="$origin" FLASHGATE_EDGE_ISOLATES=1 node "$EDGE_DIR/workerd-config.mjs" "$pidfile.capnp" \
      "$port" "$script_dir")" || { _edge_log "generating the workerd configuration failed"; return 1; }
    nohup "$EDGE_DIR/node_modules/.bin/workerd" serve "$pidfile.capnp" >"$pidfile.log" 2>&1 &
    pid=$!
  else
    FLASHGATE_ORIGIN_URL="$origin" EDGE_PORT="$port" EDGE_URL_FILE="$urlfile.runner" \
      EDGE_SCRIPT_DIR="$script_dir" \
      nohup node "$EDGE_DIR/run-miniflare.mjs" >"$pidfile.log" 2>&1 &
    pid=$!
  fi
  echo "$pid" >"$pidfile"
  local i
  for i in $(seq 1 300); do
    if [ -z "$url" ] && [ -s "$urlfile.runner" ]; then url="$(cat "$urlfile.runner")"; fi
    # Up once it answers HTTP at all (the baseline worker answers every path 409).
    if [ -n "$url" ] && curl -s --noproxy '*' -o /dev/null --max-time 2 "$url/healthz"; then
      rm -f "$urlfile.runner"
      echo "$url" >"$urlfile.tmp" && mv "$urlfile.tmp" "$urlfile"
      _edge_log "edge worker up in $runtime at $url"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      _edge_log "$runtime exited; log: $pidfile.log"; tail -20 "$pidfile.log" >&2; return 1
    fi
    sleep 0.1
  done
  _edge_log "$runtime did not start within 30 s; log: $pidfile.log"
  kill "$pid" 2>/dev/null
  return 1
}

# edge_stop PIDFILE: sends SIGTERM to what edge_start started (workerd, or the Miniflare runner,
# which disposes its workerd), waits up to 5 s, then SIGKILL. Removes PIDFILE and the
# generated workerd configuration. A missing PIDFILE is fine.
edge_stop() {
  local pidfile="$1" pid i
  [ -f "$pidfile" ] || return 0
  pid="$(cat "$pidfile")"
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null
  fi
  rm -f "$pidfile" "$pidfile.capnp"
}
