# shellcheck shell=bash
# Headless Chromium for the dashboard's browser test. Source after scripts/lib/common.sh.
#
#   browser_install   idempotent: Debian's chromium and chromium-driver when /usr/bin/chromium
#                     is missing (never a browser download), then `npm ci` in tests/browser/
#                     (playwright-core, pinned by package-lock.json) when node_modules is
#                     missing or older than the lock file. The npm cache lives outside the repo.
#   browser_path      prints the Chromium executable (FLASHGATE_CHROMIUM or /usr/bin/chromium)
#
# `npx playwright install` is never run: playwright-core drives the Debian Chromium through
# executablePath.

BROWSER_TEST_DIR="$FG_ROOT/tests/browser"

browser_path() { echo "${FLASHGATE_CHROMIUM:-/usr/bin/chromium}"; }

browser_install() {
  if [ ! -x "$(browser_path)" ]; then
    fg_apt_install chromium chromium-driver
  fi
  [ -x "$(browser_path)" ] || { fg_log "no Chromium at $(browser_path)"; return 1; }
  fg_have node || fg_apt_install nodejs npm
  if [ ! -d "$BROWSER_TEST_DIR/node_modules" ] \
      || [ "$BROWSER_TEST_DIR/package-lock.json" -nt "$BROWSER_TEST_DIR/node_modules" ]; then
    fg_log "npm ci in tests/browser/"
    (cd "$BROWSER_TEST_DIR" && npm ci --cache "$FG_CACHE/npm" --no-audit --no-fund --prefer-offline) \
      || return 1
    touch "$BROWSER_TEST_DIR/node_modules"
  fi
}
