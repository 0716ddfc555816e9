// flashgate dashboard, webhook endpoints: every endpoint (URL, event types, enabled or why
// not), and the selected endpoint's newest deliveries (event, type, status, attempts, last
// response code and time, next attempt), each with a Replay action (confirmed first) that sends
// its event again. Loaded after app.js, whose helpers it uses ($, api, el, utc, notice,
// askConfirm) and whose poll runs it (pollHooks, forgetHooks). Everything from the API is
// written with textContent, never as HTML.
"use strict";

const DELIVERIES_SHOWN = 25; // the newest deliveries of the selected endpoint shown

const endpointRows = new Map(); // endpoint id -> {tr, cells}
const deliveryRows = new Map(); // event id -> {tr, cells}
let endpoints = []; // the last list the origin sent
let selectedEndpoint = null;

function endpointPath(id) {
  return "/admin/v1/webhooks/endpoints/" + encodeURIComponent(id);
}

function makeEndpointRow(e) {
  const tr = el("tr");
  tr.dataset.endpoint = e.id;
  const cells = {};
  const urlCell = el("td", "campaign");
  cells.url = el("strong");
  cells.description = el("span", "name");
  urlCell.append(cells.url, cells.description);
  tr.append(urlCell);
  for (const [key, cls] of [["types", "types"], ["state", "state"], ["created", ""]]) {
    cells[key] = el("td", cls);
    tr.append(cells[key]);
  }
  cells.badge = el("span", "badge");
  cells.state.append(cells.badge);
  tr.addEventListener("click", () => selectEndpoint(e.id));
  return { tr, cells };
}

// Keeps `tbody` showing one row per item of `items` in their order: rows of `map` (key ->
// {tr, cells}) are reused, made with `make` when new, filled by `fill(cells, item)`, and
// removed when their item is gone. Returns the keys shown.
function syncRows(tbody, map, items, keyOf, make, fill) {
  const seen = new Set();
  for (const item of items) {
    const key = keyOf(item);
    seen.add(key);
    const row = map.get(key) || make(item);
    map.set(key, row);
    tbody.append(row.tr); // moves an existing row into the list's order
    fill(row.cells, item);
  }
  for (const [key, row] of map) {
    if (!seen.has(key)) { row.tr.remove(); map.delete(key); }
  }
  return seen;
}

function renderEndpoints() {
  const seen = syncRows($("#endpoints tbody"), endpointRows, endpoints, (e) => e.id, makeEndpointRow, (k, e) => {
    k.url.textContent = e.url;
    k.description.textContent = e.description || "";
    k.types.textContent = e.event_types.join(", ");
    k.badge.textContent = e.enabled ? "enabled" : "disabled" + (e.disabled_reason ? " · " + e.disabled_reason : "");
    k.badge.className = "badge " + (e.enabled ? "state-active" : "state-ended");
    k.created.textContent = utc(e.created_at);
  });
  $("#endpoints-empty").hidden = endpoints.length > 0;
  if (!seen.has(selectedEndpoint)) selectEndpoint(endpoints.length ? endpoints[0].id : null);
  for (const [id, row] of endpointRows) row.tr.classList.toggle("selected", id === selectedEndpoint);
}

function makeDeliveryRow(d) {
  const tr = el("tr");
  tr.dataset.event = d.event_id;
  const cells = {};
  for (const [key, cls] of [["event", "event"], ["type", ""], ["status", "state"], ["attempts", "n"],
                            ["code", "n"], ["last", ""], ["next", ""]]) {
    cells[key] = el("td", cls);
    tr.append(cells[key]);
  }
  cells.event.textContent = d.event_id;
  cells.badge = el("span", "badge");
  cells.status.append(cells.badge);
  const actions = el("td", "actions");
  cells.replay = el("button", null, "Replay");
  cells.replay.type = "button";
  cells.replay.dataset.replay = d.event_id;
  actions.append(cells.replay);
  tr.append(actions);
  return { tr, cells };
}

const DELIVERY_BADGE = { delivered: "state-active", pending: "state-scheduled", failed: "state-sold_out" };

function renderDeliveries(list) {
  const shown = list.slice(0, DELIVERIES_SHOWN);
  syncRows($("#deliveries tbody"), deliveryRows, shown, (d) => d.event_id, makeDeliveryRow, (k, d) => {
    k.type.textContent = d.type;
    k.badge.textContent = d.status;
    k.badge.className = "badge " + (DELIVERY_BADGE[d.status] || "");
    k.status.dataset.status = d.status;
    k.attempts.textContent = d.attempts;
    k.code.textContent = d.last_response_code === undefined ? "–" : d.last_response_code;
    k.last.textContent = d.last_attempt_at ? utc(d.last_attempt_at) : "–";
    k.next.textContent = d.status === "pending" ? utc(d.next_attempt_at) : "–";
  });
  $("#deliveries-count").textContent = list.length > shown.length
    ? "· the newest " + shown.length + " of " + list.length : "· " + list.length;
  $("#deliveries-empty").hidden = list.length > 0;
}

function selectEndpoint(id) {
  if (id !== selectedEndpoint) {
    for (const row of deliveryRows.values()) row.tr.remove();
    deliveryRows.clear();
  }
  selectedEndpoint = id;
  for (const [eid, row] of endpointRows) row.tr.classList.toggle("selected", eid === id);
  $("#deliveries-panel").hidden = !id;
  const e = endpoints.find((x) => x.id === id);
  $("#deliveries-endpoint").textContent = e ? e.url : "";
  loadDeliveries();
}

async function loadDeliveries() {
  const id = selectedEndpoint;
  if (!id) return;
  try {
    const data = await api("GET", endpointPath(id) + "/deliveries");
    if (id === selectedEndpoint) renderDeliveries(data.deliveries);
  } catch (err) {
    $("#deliveries-count").textContent = "· deliveries: " + err.message;
  }
}

async function pollWebhooks() {
  try {
    const data = await api("GET", "/admin/v1/webhooks/endpoints");
    endpoints = data.endpoints;
    $("#webhooks").hidden = false;
    renderEndpoints();
    loadDeliveries();
  } catch (err) {
    $("#webhooks").hidden = false;
    $("#endpoints-empty").hidden = false;
    $("#endpoints-empty").textContent = "Could not load webhook endpoints: " + err.message;
  }
}

function forgetWebhooks() {
  for (const row of endpointRows.values()) row.tr.remove();
  for (const row of deliveryRows.values()) row.tr.remove();
  endpointRows.clear(); deliveryRows.clear(); endpoints = []; selectedEndpoint = null;
  $("#webhooks").hidden = true;
}

function replay(eventId) {
  const id = selectedEndpoint;
  const e = endpoints.find((x) => x.id === id);
  askConfirm("Send event " + eventId + " again to " + (e ? e.url : id) + "? Its attempts start from zero.",
    async () => {
      try {
        const r = await api("POST", endpointPath(id) + "/replay", { event_id: eventId });
        notice("replay " + eventId + ": " + r.queued + " queued");
        $("#notice").dataset.kind = "action";
        loadDeliveries();
      } catch (err) {
        notice("replay " + eventId + " failed: " + err.message, true);
        $("#notice").dataset.kind = "action";
      }
    });
}

pollHooks.push(pollWebhooks);
forgetHooks.push(forgetWebhooks);
document.addEventListener("DOMContentLoaded", () => {
  $("#deliveries tbody").addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-replay]");
    if (b) replay(b.dataset.replay);
  });
});
