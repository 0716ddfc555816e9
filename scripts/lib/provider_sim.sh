# shellcheck shell=bash
# The mobile-credit provider simulator (provider-sim/) of the local stack: the origins' gift
# outbox relay calls it (FLASHGATE_GIFT_PROVIDER_URL). Source after common.sh.
#
#   provider_sim_up STATE BIN   starts it on a free loopback port unless it runs; exports
#                               FLASHGATE_GIFT_PROVIDER_URL (STATE/provider-sim.pid, .url, .log)
#   provider_sim_down STATE
#
# Faults come from PROVIDER_SIM_TIMEOUT_RATE, PROVIDER_SIM_ERROR_RATE,
# PROVIDER_SIM_ACCEPT_THEN_TIMEOUT_RATE, PROVIDER_SIM_HANG_MS (default: none).

provider_sim_up() {
  local state="$1" bin="$2" port
  if fg_pid_alive "$state/provider-sim.pid" && [ -s "$state/provider-sim.url" ]; then
    FLASHGATE_GIFT_PROVIDER_URL="$(cat "$state/provider-sim.url")"
    export FLASHGATE_GIFT_PROVIDER_URL
    return 0
  fi
  port="$(fg_free_port)"
  fg_log "starting the provider simulator on 127.0.0.1:$port (log: $state/provider-sim.log)"
  PROVIDER_SIM_LISTEN="127.0.0.1:$port" nohup "$bin" >"$state/provider-sim.log" 2>&1 &
  echo "$!" >"$state/provider-sim.pid"
  FLASHGATE_GIFT_PROVIDER_URL="http://127.0.0.1:$port"
  # Any answer (404 on /) means it listens.
  fg_until 100 fg_port_open 127.0.0.1 "$port" || fg_die "the provider simulator did not start (log: $state/provider-sim.log)"
  echo "$FLASHGATE_GIFT_PROVIDER_URL" >"$state/provider-sim.url"
  export FLASHGATE_GIFT_PROVIDER_URL
}

provider_sim_down() {
  fg_stop_service "the provider simulator" "$1/provider-sim.pid" 5 "$1/provider-sim.url"
}
