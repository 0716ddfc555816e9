# shellcheck shell=bash
# README.md's shell examples run as written, against a running dev stack. Source after
# scripts/lib/common.sh.
#
#   readme_block MARKER         prints the first ```sh block after the README line that is
#                               exactly MARKER (e.g. "Try it by hand:")
#   readme_run MARKER ENV LOG   runs that block with bash -euo pipefail in a scratch folder laid
#                               out like a clone whose `scripts/dev up` wrote ENV: `.dev/env` is
#                               ENV, `scripts` is this clone's, `target/release` and
#                               `target/debug` are this build's debug binaries (the block names
#                               target/release/…). Output (stdout and
#                               stderr) in LOG; returns the block's exit status.
#   readme_run_in_clone MARKER LOG
#                               runs that block with bash -euo pipefail in this clone's root,
#                               as a reader would (what it starts keeps running: `scripts/dev
#                               up`); output in LOG; returns the block's exit status.
#   readme_expect LOG TEXT...   true when LOG contains every TEXT (fixed strings); else names
#                               the first one missing.
#   doc_blocks FILE             prints every ```sh block of FILE (a path from the clone's root,
#                               e.g. docs/CHECKOUT.md), in order, as one script
#   doc_run FILE ENV LOG        runs them as one script (later blocks use the variables of
#                               earlier ones), with ENV's variables exported first (as after
#                               `set -a; . .dev/env; set +a`), laid out and logged like readme_run
#
# Both put the scratch folder's target/debug first on PATH, so a block may name `flashgate`,
# `stampede` … as a reader who installed them would. A ```console block is a synopsis (other
# hosts, placeholders, minutes-long runs) and is never run.

readme_block() {
  awk -v m="$1" '$0 == m { found = 1; next }
                 found && /^```sh$/ { inside = 1; next }
                 inside && /^```$/ { exit }
                 inside { print }' "$FG_ROOT/README.md"
}

# _doc_exec SCRIPT ENV LOG: runs SCRIPT in a scratch folder laid out like a clone (see above),
# in a session of its own: what it left running (a webhook receiver it started, when it failed
# before stopping it) is stopped after it.
_doc_exec() {
  local block="$1" env="$2" log="$3" scratch rc=0 pid
  scratch="$(mktemp -d)"
  mkdir -p "$scratch/.dev" "$scratch/target"
  ln -s "$env" "$scratch/.dev/env"
  ln -s "$FG_ROOT/scripts" "$scratch/scripts"
  ln -s "$(fg_target_dir)/debug" "$scratch/target/release"
  ln -s "$(fg_target_dir)/debug" "$scratch/target/debug"
  (cd "$scratch" && PATH="$scratch/target/debug:$PATH" exec setsid -w bash -euo pipefail -c "$block") \
    >"$log" 2>&1 &
  pid=$!
  wait "$pid" || rc=$?
  kill -- "-$pid" 2>/dev/null || true
  rm -rf "$scratch"
  return "$rc"
}

readme_run() {
  local marker="$1" block
  block="$(readme_block "$marker")"
  [ -n "$block" ] || { fg_log "README.md has no sh block after '$marker'"; return 1; }
  _doc_exec "$block" "$2" "$3"
}

readme_run_in_clone() {
  local marker="$1" block
  block="$(readme_block "$marker")"
  [ -n "$block" ] || { fg_log "README.md has no sh block after '$marker'"; return 1; }
  (cd "$FG_ROOT" && exec bash -euo pipefail -c "$block") >"$2" 2>&1
}

doc_blocks() {
  awk '/^```sh$/ { inside = 1; next }
       inside && /^```$/ { inside = 0; next }
       inside { print }' "$FG_ROOT/$1"
}

doc_run() {
  local file="$1" block
  block="$(doc_blocks "$file")"
  [ -n "$block" ] || { fg_log "$file has no sh block"; return 1; }
  _doc_exec "set -a; . .dev/env; set +a
$block" "$2" "$3"
}

readme_expect() {
  local log="$1" want
  shift
  for want in "$@"; do
    grep -qF -- "$want" "$log" || { fg_log "doc example: no '$want' in its output ($log)"; return 1; }
  done
}
