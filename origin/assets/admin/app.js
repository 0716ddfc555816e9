// flashgate dashboard: campaigns with live counts, a claims-per-second chart, and the
// manager's actions (pause, resume, restock, close) with a confirmation step. It only calls
// the origin's admin API (/admin/v1/...) with the token the manager pasted, which stays in
// this tab's sessionStorage. Everything from the API is written with textContent, never as HTML.
"use strict";

const TOKEN_KEY = "flashgate.adminToken";
const POLL_MS = 1000;
const HISTORY = 120; // samples kept per campaign for the chart (two minutes at 1/s)

const $ = (sel) => document.querySelector(sel);
const rows = new Map(); // campaign id -> {tr, cells}
const history = new Map(); // campaign id -> [{t, total, rate}]
let selected = null;
let pollTimer = null;
let pendingConfirm = null;

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

function notice(text, isError) {
  const n = $("#notice");
  n.textContent = text;
  n.classList.toggle("error", !!isError);
}

async function api(method, path, body) {
  const headers = { Authorization: "Bearer " + token() };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
    cache: "no-store",
  });
  let data = null;
  try { data = await res.json(); } catch (_) { data = null; }
  if (!res.ok) {
    const msg = data && data.message ? data.message : res.statusText;
    const err = new Error(res.status + " " + (data && data.result ? data.result : "error") + ": " + msg);
    err.status = res.status;
    throw err;
  }
  return data;
}

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function button(label, action, id, cls) {
  const b = el("button", cls, label);
  b.type = "button";
  b.dataset.action = action;
  b.dataset.campaign = id;
  return b;
}

// A whole-number input (at least 1) starting at `value`, named `label` for screen readers.
function numberInput(value, label) {
  const i = el("input");
  i.type = "number"; i.min = "1"; i.value = value;
  i.setAttribute("aria-label", label);
  return i;
}

function makeRow(c) {
  const tr = el("tr");
  tr.dataset.campaign = c.id;
  const cells = {};
  const idCell = el("td", "campaign");
  cells.id = el("strong", null, c.id);
  cells.name = el("span", "name");
  idCell.append(cells.id, cells.name);
  tr.append(idCell);
  for (const [key, cls] of [["kind", ""], ["state", "state"], ["stock", "n"], ["remaining", "n"],
                            ["held", "n"], ["done", "n"], ["minute", "n"], ["rate", "n"],
                            ["queue", "queue"]]) {
    cells[key] = el("td", cls);
    tr.append(cells[key]);
  }
  cells.badge = el("span", "badge");
  cells.state.append(cells.badge);
  const actions = el("td", "actions");
  cells.pause = button("Pause", "pause", c.id);
  cells.resume = button("Resume", "resume", c.id);
  cells.add = numberInput("10", "units to add to " + c.id);
  cells.add.dataset.restockFor = c.id;
  cells.restock = button("Restock", "restock", c.id);
  cells.close = button("Close", "close", c.id, "danger");
  cells.pauseAdmission = button("Pause admission", "pause_admission", c.id);
  cells.resumeAdmission = button("Resume admission", "resume_admission", c.id);
  cells.admit = numberInput("100", "customers admitted per second for " + c.id);
  cells.admit.dataset.admitFor = c.id;
  cells.waitingRoom = button("Set waiting room", "waiting_room", c.id);
  actions.append(cells.pause, cells.resume, cells.add, cells.restock, cells.close,
                 cells.pauseAdmission, cells.resumeAdmission, cells.admit, cells.waitingRoom);
  tr.append(actions);
  tr.addEventListener("click", (ev) => {
    if (ev.target.closest("button, input")) return;
    select(c.id);
  });
  $("#campaigns tbody").append(tr);
  return { tr, cells };
}

function rateOf(id, total, now) {
  const h = history.get(id) || [];
  const prev = h[h.length - 1];
  const rate = prev ? Math.max(0, (total - prev.total) / ((now - prev.t) / 1000)) : 0;
  h.push({ t: now, total, rate });
  while (h.length > HISTORY) h.shift();
  history.set(id, h);
  return rate;
}

function render(list) {
  const now = Date.now();
  const seen = new Set();
  for (const c of list) {
    seen.add(c.id);
    const row = rows.get(c.id) || makeRow(c);
    rows.set(c.id, row);
    row.waitingRoom = c.waiting_room;
    const k = row.cells;
    const counts = c.counts || {};
    k.name.textContent = c.name;
    k.kind.textContent = c.kind;
    k.badge.textContent = c.state.replace("_", " ");
    k.badge.className = "badge state-" + c.state;
    k.state.dataset.state = c.state;
    k.stock.textContent = c.stock;
    k.remaining.textContent = c.remaining;
    k.held.textContent = counts.held;
    k.done.textContent = c.kind === "sale" ? counts.paid : counts.issued + counts.redeemed;
    k.minute.textContent = counts.claims_last_minute;
    k.rate.textContent = rateOf(c.id, counts.claims_total, now).toFixed(1);
    const ended = c.state === "ended";
    k.pause.hidden = c.paused; k.resume.hidden = !c.paused;
    k.pause.disabled = ended; k.resume.disabled = ended; k.close.disabled = ended;
    k.restock.disabled = ended; k.add.disabled = ended;
    const q = c.queue;
    k.queue.textContent = q ? "waiting " + q.length + " · admitted " + q.admitted + " · unclaimed " +
      q.admitted_unclaimed + " · now serving " + q.now_serving + " · " + q.admit_per_second + "/s" +
      (q.paused ? " · paused" : "") : (c.waiting_room ? "unavailable" : "–");
    k.pauseAdmission.hidden = !c.waiting_room || Boolean(q && q.paused);
    k.resumeAdmission.hidden = !c.waiting_room || !(q && q.paused);
  }
  for (const [id, row] of rows) {
    if (!seen.has(id)) { row.tr.remove(); rows.delete(id); history.delete(id); }
  }
  $("#empty").hidden = list.length > 0;
  if (!selected && list.length) select(list[0].id);
  drawChart();
}

function select(id) {
  selected = id;
  for (const [cid, row] of rows) row.tr.classList.toggle("selected", cid === id);
  $("#detail").hidden = !id;
  $("#detail-name").textContent = id || "";
  drawChart();
  loadAudit();
}

async function loadAudit() {
  if (!selected) return;
  const ol = $("#audit");
  try {
    const data = await api("GET", "/admin/v1/campaigns/" + encodeURIComponent(selected) + "/audit");
    ol.replaceChildren(...data.entries.slice(0, 10).map((e) => {
      const params = Object.keys(e.params || {}).length ? " " + JSON.stringify(e.params) : "";
      return el("li", null, e.at + " · " + e.actor + " · " + e.action + params +
        " · remaining " + (e.before ? e.before.remaining : "–") + " → " + e.after.remaining);
    }));
    if (!data.entries.length) ol.replaceChildren(el("li", null, "no changes yet"));
  } catch (err) {
    ol.replaceChildren(el("li", null, String(err.message)));
  }
}

function drawChart() {
  const canvas = $("#chart");
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, pad = 36;
  ctx.clearRect(0, 0, w, h);
  const h0 = (selected && history.get(selected)) || [];
  const max = Math.max(1, ...h0.map((p) => p.rate));
  ctx.strokeStyle = "#e4e7ec"; ctx.fillStyle = "#667085"; ctx.font = "11px system-ui";
  for (let i = 0; i <= 4; i++) {
    const y = pad / 2 + (h - pad) * i / 4;
    ctx.beginPath(); ctx.moveTo(pad, y); ctx.lineTo(w - 8, y); ctx.stroke();
    ctx.fillText((max * (4 - i) / 4).toFixed(max < 4 ? 1 : 0), 4, y + 4);
  }
  ctx.fillText("−2 min", pad, h - 4);
  ctx.fillText("now", w - 30, h - 4);
  if (h0.length < 2) return;
  ctx.strokeStyle = "#2f6fed"; ctx.lineWidth = 2; ctx.beginPath();
  h0.forEach((p, i) => {
    const x = pad + (w - 8 - pad) * (HISTORY - h0.length + i) / (HISTORY - 1);
    const y = pad / 2 + (h - pad) * (1 - p.rate / max);
    if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
  });
  ctx.stroke();
  ctx.lineWidth = 1;
}

async function poll() {
  clearTimeout(pollTimer);
  if (!token()) return;
  try {
    const data = await api("GET", "/admin/v1/campaigns");
    render(data.campaigns);
    if (!$("#notice").classList.contains("error") || $("#notice").dataset.kind === "poll") {
      notice("Live · " + data.campaigns.length + " campaigns · updated " + new Date().toLocaleTimeString());
      $("#notice").dataset.kind = "poll";
    }
  } catch (err) {
    notice("Could not load campaigns: " + err.message, true);
    $("#notice").dataset.kind = "poll";
  }
  pollTimer = setTimeout(poll, POLL_MS);
}

const ACTIONS = {
  pause: (id) => ({ text: "Pause " + id + "? Claims will be answered “paused” until resumed.", body: { action: "pause" } }),
  resume: (id) => ({ text: "Resume " + id + "? Claims will flow again.", body: { action: "resume" } }),
  pause_admission: (id) => ({ text: "Pause admission to " + id + "? The queue keeps its order; nobody new is admitted.", body: { action: "pause_admission" } }),
  resume_admission: (id) => ({ text: "Resume admission to " + id + "?", body: { action: "resume_admission" } }),
  waiting_room: (id) => {
    const n = parseInt(rows.get(id).cells.admit.value, 10);
    if (!Number.isSafeInteger(n) || n < 1) return { error: "Enter customers admitted per second (1 or more)." };
    const w = Object.assign({}, rows.get(id).waitingRoom || {}, { admit_per_second: n });
    return { text: "Set the waiting room of " + id + " to admit " + n + " customers per second?", body: { waiting_room: w } };
  },
  close: (id) => ({ text: "Close " + id + " now? The campaign ends; this cannot be undone here.", body: { action: "close" } }),
  restock: (id) => {
    const add = parseInt(rows.get(id).cells.add.value, 10);
    if (!Number.isSafeInteger(add) || add < 1) return { error: "Enter a positive number of units to add." };
    return { text: "Restock " + id + " with " + add + " more units?", body: { action: "restock", add } };
  },
};

function askConfirm(text, run) {
  pendingConfirm = run;
  $("#confirm-text").textContent = text;
  $("#confirm").hidden = false;
  $("#confirm-yes").focus();
}

function closeConfirm() { $("#confirm").hidden = true; pendingConfirm = null; }

async function act(action, id) {
  const plan = ACTIONS[action](id);
  if (plan.error) { notice(plan.error, true); $("#notice").dataset.kind = "action"; return; }
  askConfirm(plan.text, async () => {
    try {
      const r = await api("PATCH", "/admin/v1/campaigns/" + encodeURIComponent(id), plan.body);
      notice(r.changed ? action + " " + id + ": done (state " + r.campaign.state + ")"
                       : action + " " + id + ": nothing to change");
      $("#notice").dataset.kind = "action";
      await poll();
      loadAudit();
    } catch (err) {
      notice(action + " " + id + " failed: " + err.message, true);
      $("#notice").dataset.kind = "action";
    }
  });
}

document.addEventListener("DOMContentLoaded", () => {
  $("#token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const t = $("#token").value.trim();
    if (!t) { notice("Paste a token first.", true); return; }
    sessionStorage.setItem(TOKEN_KEY, t);
    $("#token").value = "";
    notice("Loading…");
    poll();
  });
  $("#token-forget").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    clearTimeout(pollTimer);
    for (const row of rows.values()) row.tr.remove();
    rows.clear(); history.clear(); selected = null;
    $("#detail").hidden = true;
    notice("Token forgotten. Paste a manager token to load the campaigns.");
  });
  $("#campaigns tbody").addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-action]");
    if (b) act(b.dataset.action, b.dataset.campaign);
  });
  $("#confirm-no").addEventListener("click", closeConfirm);
  $("#confirm-yes").addEventListener("click", () => {
    const run = pendingConfirm;
    closeConfirm();
    if (run) run();
  });
  document.addEventListener("keydown", (ev) => { if (ev.key === "Escape") closeConfirm(); });
  if (token()) poll();
});
