# shellcheck shell=bash
# A webhook endpoint during a demo run, and the lag of its deliveries (docs/WEBHOOKS.md).
# Source after common.sh; needs the stack's env loaded (FLASHGATE_ORIGIN_URL,
# FLASHGATE_ADMIN_TOKEN, DATABASE_URL) and origins that allow endpoints on loopback (the
# stack's do: FLASHGATE_WEBHOOK_ALLOW_PRIVATE).
#
#   webhook_lag_up STATE     starts scripts/webhook-receiver (the reference standardwebhooks
#                            library; STATE/webhook-receiver.pid, .log) with a fresh secret and
#                            registers it for claim.held and campaign.sold_out; sets
#                            WEBHOOK_LAG_ENDPOINT
#   webhook_lag_report STATE waits until the endpoint has nothing pending (at most 300 s), then
#                            prints the number of events and the lag from event written
#                            (webhook_events.occurred_at) to delivered (delivered_at): p50,
#                            p99, max; fails when one is not delivered or the receiver rejected
#                            a signature (WEBHOOK_LAG_FIGURES keeps the line). Deletes the
#                            endpoint and stops the receiver.
#   webhook_lag_down STATE   when the run ends early: deletes the endpoint (else its deliveries
#                            would wait for a receiver gone, retried for days) and stops the
#                            receiver

webhook_lag_up() {
  local state="$1" secret port body
  secret="whsec_$(head -c 32 /dev/urandom | base64)"
  "$FG_ROOT/scripts/webhook-receiver" --secret "$secret" >"$state/webhook-receiver.log" &
  echo $! >"$state/webhook-receiver.pid"
  fg_until 600 grep -q '^listening on' "$state/webhook-receiver.log" \
    || fg_die "the webhook receiver did not start (log: $state/webhook-receiver.log)"
  port="$(awk '/^listening on/ { print $3 }' "$state/webhook-receiver.log")"
  body="{\"url\":\"http://127.0.0.1:$port/hooks\",\"secret\":\"$secret\",\"description\":\"demo lag\",\"event_types\":[\"claim.held\",\"campaign.sold_out\"]}"
  WEBHOOK_LAG_ENDPOINT="$(curl -fsS --noproxy '*' -X POST "$FLASHGATE_ORIGIN_URL/admin/v1/webhooks/endpoints" \
    -H "Authorization: Bearer $FLASHGATE_ADMIN_TOKEN" -H 'Content-Type: application/json' -d "$body" \
    | grep -o '"id":"[^"]*"' | head -1 | cut -d'"' -f4)" \
    || fg_die "registering the demo's webhook endpoint failed"
  [ -n "$WEBHOOK_LAG_ENDPOINT" ] || fg_die "registering the demo's webhook endpoint gave no id"
  fg_log "webhook endpoint $WEBHOOK_LAG_ENDPOINT: a receiver on the reference standardwebhooks library at 127.0.0.1:$port"
}

# _webhook_lag_sql QUERY: one value from PostgreSQL (DATABASE_URL), the endpoint as :'ep'
# (on stdin: psql does not interpolate variables in -c).
_webhook_lag_sql() {
  psql "${FLASHGATE_MIGRATION_DATABASE_URL:-$DATABASE_URL}" -Atq -v ON_ERROR_STOP=1 \
    -v ep="$WEBHOOK_LAG_ENDPOINT" <<<"$1"
}

_webhook_lag_pending() {
  _webhook_lag_sql "SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = :'ep' AND status = 'pending'"
}
_webhook_lag_drained() { [ "$(_webhook_lag_pending 2>/dev/null)" = 0 ]; }

webhook_lag_report() {
  local state="$1" rc=0 figures rejected
  if ! fg_until 3000 _webhook_lag_drained; then
    fg_log "webhooks FAILED: $(_webhook_lag_pending) deliveries still pending after 300 s"; rc=1
  fi
  figures="$(_webhook_lag_sql "
    SELECT format('%s events (%s claim.held, %s campaign.sold_out), %s delivered, %s failed; lag event written → delivered: p50 %s ms, p99 %s ms, max %s ms',
             count(*), count(*) FILTER (WHERE e.type = 'claim.held'),
             count(*) FILTER (WHERE e.type = 'campaign.sold_out'),
             count(*) FILTER (WHERE d.status = 'delivered'), count(*) FILTER (WHERE d.status = 'failed'),
             round(percentile_cont(0.5) WITHIN GROUP (ORDER BY l)), round(percentile_cont(0.99) WITHIN GROUP (ORDER BY l)),
             round(max(l)))
      FROM webhook_deliveries d JOIN webhook_events e ON e.id = d.event_id,
           LATERAL (SELECT extract(epoch FROM d.delivered_at - e.occurred_at) * 1000 AS l) x
     WHERE d.endpoint_id = :'ep'")"
  WEBHOOK_LAG_FIGURES="$figures"
  fg_log "webhooks: $figures"
  [ "$(_webhook_lag_sql "SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = :'ep' AND status <> 'delivered'")" = 0 ] || rc=1
  rejected="$(grep -c '^rejected' "$state/webhook-receiver.log" || true)"
  if [ "$rejected" != 0 ]; then fg_log "webhooks FAILED: the receiver rejected $rejected deliveries"; rc=1; fi
  webhook_lag_down "$state"
  return "$rc"
}

webhook_lag_down() {
  if [ -n "${WEBHOOK_LAG_ENDPOINT:-}" ]; then
    curl -fsS --noproxy '*' -o /dev/null -X DELETE \
      "$FLASHGATE_ORIGIN_URL/admin/v1/webhooks/endpoints/$WEBHOOK_LAG_ENDPOINT" \
      -H "Authorization: Bearer $FLASHGATE_ADMIN_TOKEN" || fg_log "deleting the demo's webhook endpoint failed"
    WEBHOOK_LAG_ENDPOINT=""
  fi
  fg_stop_pid "$1/webhook-receiver.pid" 5 || true
}
