// flashgate dashboard: campaigns with live counts (filtered by state and name, a page at a
// time), the selected campaign's per-second chart drawn from the origin's series (claims,
// sold-out answers at the origin and at the edge, remaining, over the whole sale or the last
// 5 minutes, so a spike stays visible after it), the edge's answers by kind, its
// variants with their live counts (a campaign with variants), its audit trail, its draw when it is one, and the manager's actions (pause, resume, restock, close) with a confirmation
// step. The webhook endpoints and their deliveries are webhooks.js's, run from this poll
// (pollHooks, forgetHooks). It only calls
// the origin's admin API (/admin/v1/...) with the token pasted (a manager's or a viewer's), kept in
// this tab's sessionStorage. Everything from the API is written with textContent, never as HTML.
"use strict";

const TOKEN_KEY = "flashgate.adminToken";
const POLL_MS = 1000;
const HISTORY = 2; // samples kept per campaign for its claims/s column (the last poll's delta)
const PAGE_SIZE = 25; // campaigns per page
const LISTED_MAX = 500; // most campaigns GET /admin/v1/campaigns lists (the newest)
const SERIES_SECONDS = 300; // the zoomed chart's span (GET .../series?seconds=)
const SALE_LEAD_S = 600; // the whole-sale span starts this long before the start (the prequeue)
const SALE_POLL_MS = 5000; // the whole-sale series (up to an hour) is read at most this often

const $ = (sel) => document.querySelector(sel);
const rows = new Map(); // campaign id -> {tr, cells}
const history = new Map(); // campaign id -> [{t, total, rate}]
let selected = null;
let campaigns = []; // the last list the origin sent, newest first
let page = 0;
let series = null; // the selected campaign's last series
let span = "sale"; // the chart's span: "sale" (from the sale's start) or "recent" (5 minutes)
let seriesReadAt = 0; // when the series was last asked for (Date.now())
let pollTimer = null;
let pendingConfirm = null;
const pollHooks = []; // functions run after each poll of the campaigns (webhooks.js)
const forgetHooks = []; // functions run when the token is forgotten

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

// Every time on the page is shown in UTC and says so, whatever the browser's zone (the API's
// times are UTC): "2026-03-29 21:59:00 UTC", or "21:59:00 UTC" for `timeOnly`.
function utc(t, timeOnly) {
  const d = t instanceof Date ? t : new Date(t);
  if (Number.isNaN(d.getTime())) return String(t);
  const iso = d.toISOString(); // always UTC
  return (timeOnly ? iso.slice(11, 19) : iso.slice(0, 10) + " " + iso.slice(11, 19)) + " UTC";
}

// A count for people: "1,234", "12.3k", "1.1M", "1.1T" (whole numbers below 10,000 as they
// are, with a thousands separator); `exact` keeps every digit, with separators.
const EXACT = new Intl.NumberFormat("en-US");
const COMPACT = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });
function human(n, exact) {
  if (typeof n !== "number" || !Number.isFinite(n)) return n === undefined || n === null ? "–" : String(n);
  return exact || Math.abs(n) < 10000 ? EXACT.format(n) : COMPACT.format(n);
}

// The ticks of a chart axis for counts from 0 to `max`: at most `most` distinct whole numbers
// 0, step, 2·step, … with step 1, 2 or 5 times a power of ten, the last at or above `max`
// (the axis's top, which the lines are scaled to).
function countTicks(max, most) {
  const top = Math.max(1, Math.ceil(max));
  let step = 1;
  for (let p = 1; ; p *= 10) {
    const s = [1, 2, 5].map((m) => m * p).find((s) => Math.ceil(top / s) <= most - 1);
    if (s) { step = s; break; }
  }
  const n = Math.ceil(top / step);
  return Array.from({ length: n + 1 }, (_, i) => i * step);
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
  const actionsCell = el("td", "actions");
  const actions = el("div", "buttons");
  actionsCell.append(actions);
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
  tr.append(actionsCell);
  tr.addEventListener("click", (ev) => {
    if (ev.target.closest("button, input")) return;
    select(c.id);
  });
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

// The campaigns the filters keep: a state (the select) and a piece of the id or name.
function filtered() {
  const state = $("#filter-state").value;
  const q = $("#filter-name").value.trim().toLowerCase();
  return campaigns.filter((c) => (!state || c.state === state) &&
    (!q || c.id.includes(q) || (c.name || "").toLowerCase().includes(q)));
}

function render() {
  const shown = filtered();
  const pages = Math.max(1, Math.ceil(shown.length / PAGE_SIZE));
  page = Math.min(page, pages - 1);
  const list = shown.slice(page * PAGE_SIZE, (page + 1) * PAGE_SIZE);
  const seen = new Set();
  const tbody = $("#campaigns tbody");
  for (const c of list) {
    seen.add(c.id);
    const row = rows.get(c.id) || makeRow(c);
    rows.set(c.id, row);
    tbody.append(row.tr); // moves an existing row into the list's order
    row.waitingRoom = c.waiting_room;
    const k = row.cells;
    const counts = c.counts || {};
    k.name.textContent = c.name;
    k.kind.textContent = c.kind;
    k.badge.textContent = c.state.replace("_", " ");
    k.badge.className = "badge state-" + c.state;
    k.state.dataset.state = c.state;
    k.stock.textContent = human(c.stock);
    k.remaining.textContent = human(c.remaining);
    k.held.textContent = human(counts.held);
    k.done.textContent = human(c.kind === "sale" ? counts.paid : counts.issued + counts.redeemed);
    k.minute.textContent = human(counts.claims_last_minute);
    const h = history.get(c.id) || [];
    k.rate.textContent = (h.length ? h[h.length - 1].rate : 0).toFixed(1);
    const ended = c.state === "ended";
    k.pause.hidden = c.paused; k.resume.hidden = !c.paused;
    k.pause.disabled = ended; k.resume.disabled = ended; k.close.disabled = ended;
    k.restock.disabled = ended; k.add.disabled = ended;
    const q = c.queue;
    // `now_serving` is an order key (a join's arrival time, or a drawn number), not a count:
    // shown in full, with separators.
    k.queue.textContent = q ? "waiting " + human(q.length) + " · admitted " + human(q.admitted) +
      " · unclaimed " + human(q.admitted_unclaimed) + " · now serving " + human(q.now_serving, true) +
      " · " + human(q.admit_per_second) + "/s" +
      (q.paused ? " · paused" : "") : (c.waiting_room ? "unavailable" : "–");
    k.pauseAdmission.hidden = !c.waiting_room || Boolean(q && q.paused);
    k.resumeAdmission.hidden = !c.waiting_room || !(q && q.paused);
  }
  for (const [id, row] of rows) {
    if (!seen.has(id)) { row.tr.remove(); rows.delete(id); }
  }
  const known = new Set(campaigns.map((c) => c.id));
  for (const id of history.keys()) if (!known.has(id)) history.delete(id);
  const empty = $("#empty");
  empty.hidden = list.length > 0;
  empty.textContent = campaigns.length ? "No campaign matches the filter." : "No campaigns yet.";
  const newest = campaigns.length >= LISTED_MAX ? " (the newest " + LISTED_MAX + ")" : "";
  $("#count").textContent = (shown.length === campaigns.length
    ? campaigns.length + " campaigns" : shown.length + " of " + campaigns.length + " campaigns") + newest;
  $("#page-info").textContent = "page " + (page + 1) + " of " + pages;
  $("#page-prev").disabled = page === 0;
  $("#page-next").disabled = page >= pages - 1;
  if (!selected && list.length) select(list[0].id);
  else if (selected && !known.has(selected)) select(list.length ? list[0].id : null);
  for (const [cid, row] of rows) row.tr.classList.toggle("selected", cid === selected);
}

function select(id) {
  selected = id;
  for (const [cid, row] of rows) row.tr.classList.toggle("selected", cid === id);
  $("#detail").hidden = !id;
  $("#detail-name").textContent = id || "";
  series = null;
  drawChart();
  loadSeries();
  loadVariants();
  loadDraw();
  loadAudit();
}

// The selected campaign's variants, one row each with its state and live counts, from
// GET /admin/v1/campaigns/{id} (its `variants`); hidden for a campaign without variants.
async function loadVariants() {
  const id = selected;
  const panel = $("#variants-panel");
  if (!id) { panel.hidden = true; return; }
  try {
    const c = await api("GET", "/admin/v1/campaigns/" + encodeURIComponent(id));
    if (id !== selected) return; // another campaign was selected meanwhile
    const vs = c.variants || [];
    panel.hidden = !vs.length;
    $("#variants-count").textContent = vs.length + " variants";
    $("#variants tbody").replaceChildren(...vs.map((v) => {
      const tr = el("tr");
      tr.dataset.variant = v.id;
      const state = el("td", "state");
      state.append(el("span", "badge state-" + v.state, v.state.replace("_", " ")));
      const done = c.kind === "sale" ? v.paid : v.issued + v.redeemed;
      tr.append(el("td", null, v.id), el("td", null, v.name), state,
        ...[v.stock, v.remaining, v.held, done].map((n) => el("td", "n", human(n))));
      return tr;
    }));
  } catch (err) {
    $("#variants-count").textContent = "variants: " + err.message;
  }
}

// The selected campaign's draw (GET .../draw): its state, entries, winners, how far units
// passed down the waitlist, claims, lapses and the commitment. The figures are also kept in
// the panel's data attributes (the browser test reads them). Whether the campaign is a draw
// comes from its public status (`draw` only on a draw), so no other campaign gets a 409 that
// the browser would log as a failed load.
const notDraws = new Set();
async function loadDraw() {
  const id = selected, panel = $("#draw-panel");
  if (!id || notDraws.has(id)) { panel.hidden = true; return; }
  try {
    const status = await api("GET", "/api/v1/campaigns/" + encodeURIComponent(id));
    if (id !== selected) return;
    if (!status.draw) { notDraws.add(id); panel.hidden = true; return; }
    const p = await api("GET", "/admin/v1/campaigns/" + encodeURIComponent(id) + "/draw");
    if (id !== selected) return;
    const d = p.draw;
    const facts = [
      ["State", d.state + (d.drawn_at ? " · drawn " + utc(d.drawn_at) : "")],
      ["Entries", p.entries + " · window " + utc(d.entries_open_at) + " – " + utc(d.entries_close_at)],
      ["Winners", d.drawn_at ? String(p.winners) : "not drawn yet"],
      ["Waitlist", p.waitlist + " · " + p.admitted_from_waitlist + " admitted as units passed down"],
      ["Admitted", p.admitted + " · " + p.claimed + " claimed · " + p.lapsed + " lapsed"],
      ["Commitment", d.commitment],
    ];
    $("#draw-facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", null, k), el("dd", null, v)]));
    Object.assign(panel.dataset, { state: d.state, entries: p.entries, winners: p.winners,
      waitlist: p.waitlist, admitted: p.admitted, fromWaitlist: p.admitted_from_waitlist,
      claimed: p.claimed, lapsed: p.lapsed, commitment: d.commitment });
    panel.hidden = false;
  } catch (err) {
    if (err.status === 409) { notDraws.add(id); panel.hidden = true; return; }
    $("#draw-facts").replaceChildren(el("dd", null, "draw: " + err.message));
  }
}

// The query of the selected campaign's series: from the sale's start (less SALE_LEAD_S, not
// before its creation; the origin keeps the span to the last hour), or the last 5 minutes.
function seriesQuery(id) {
  const c = campaigns.find((x) => x.id === id);
  if (span === "recent" || !c) return "seconds=" + SERIES_SECONDS;
  const start = Date.parse(c.starts_at) - SALE_LEAD_S * 1000;
  const created = Date.parse(c.created_at);
  const from = Number.isNaN(created) ? start : Math.max(start, created);
  if (Number.isNaN(from) || from > Date.now()) return "seconds=" + SERIES_SECONDS;
  return "from=" + encodeURIComponent(new Date(from).toISOString().slice(0, 19) + "Z");
}

// Reads the selected campaign's series; `polled`: from the poll, which reads the whole-sale
// span (up to an hour of rows) at most every SALE_POLL_MS.
async function loadSeries(polled) {
  const id = selected;
  if (!id) return;
  if (polled && span === "sale" && Date.now() - seriesReadAt < SALE_POLL_MS) return;
  seriesReadAt = Date.now();
  try {
    const data = await api("GET", "/admin/v1/campaigns/" + encodeURIComponent(id) +
      "/series?" + seriesQuery(id));
    if (id !== selected) return; // another campaign was selected meanwhile
    series = data;
  } catch (err) {
    series = null;
    $("#chart-sum").textContent = "series: " + err.message;
  }
  drawChart();
}

// What an audit entry changed: every fact whose value differs between before and after
// ("paused false → true", "stock 25 → 32"); a create lists the facts it set.
function changedFacts(e) {
  const before = e.before || {}, after = e.after || {};
  const keys = Object.keys(after).filter((k) => JSON.stringify(before[k]) !== JSON.stringify(after[k]));
  if (!keys.length) return "no fact changed";
  const show = (v) => (v === undefined || v === null ? "–" : typeof v === "object" ? JSON.stringify(v) : String(v));
  return keys.map((k) => e.before ? k + " " + show(before[k]) + " → " + show(after[k]) : k + " " + show(after[k])).join(", ");
}

async function loadAudit() {
  if (!selected) return;
  const ol = $("#audit");
  try {
    const data = await api("GET", "/admin/v1/campaigns/" + encodeURIComponent(selected) + "/audit");
    ol.replaceChildren(...data.entries.slice(0, 10).map((e) => {
      // The JSON parts wrap inside the card (app.css, #audit): a long value has no space to
      // break at.
      const li = el("li");
      li.append(el("time", null, utc(e.at)), " · " + e.actor + " · " + e.action);
      if (Object.keys(e.params || {}).length) li.append(" ", el("code", "json", JSON.stringify(e.params)));
      li.append(" · ", el("span", "facts", changedFacts(e)));
      return li;
    }));
    if (!data.entries.length) ol.replaceChildren(el("li", null, "no changes yet"));
  } catch (err) {
    ol.replaceChildren(el("li", null, String(err.message)));
  }
}

// A span of seconds for people: "45 s", "5 min", "1 h 20 min".
function spanText(n) {
  if (n < 120) return n + " s";
  const m = Math.round(n / 60);
  return m < 60 ? m + " min" : Math.floor(m / 60) + " h" + (m % 60 ? " " + (m % 60) + " min" : "");
}

// The edge's answers in the series, by kind, with their totals (sold out first, then the
// claim answers, then the challenge failures). Kept in the items' data attributes too.
function drawEdgeAnswers(s) {
  const list = $("#edge-answers");
  const kinds = s ? Object.keys(s.edge || {}) : [];
  const rank = (k) => (k === "sold_out" ? 0 : k.startsWith("challenge_") ? 2 : 1);
  kinds.sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  const sum = (a) => a.reduce((t, v) => t + v, 0);
  list.replaceChildren(...kinds.map((k) => {
    const total = sum(s.edge[k]);
    const li = el("li");
    li.dataset.result = k; li.dataset.total = String(total);
    const label = k.startsWith("challenge_") ? "challenge failed: " + k.slice(10).replaceAll("_", " ")
      : k.replaceAll("_", " ");
    li.append(el("span", "kind", label), " ", el("strong", null, human(total)));
    li.title = human(total, true) + " " + label + " answers at the edge";
    return li;
  }));
  if (!kinds.length) list.replaceChildren(el("li", "none", s ? "none reported" : "–"));
}

// The selected campaign's series: claims/s and sold-out answers/s (this origin's and the
// edge's) on the left axis, remaining on the right one, over the span chosen. The figures drawn
// are also kept in the canvas's data attributes (the browser test reads them).
function drawChart() {
  const canvas = $("#chart");
  const ctx = canvas.getContext("2d");
  const w = canvas.width, h = canvas.height, left = 40, right = 52, top = 10, bottom = 22;
  ctx.clearRect(0, 0, w, h);
  const s = series && series.campaign === selected ? series : null;
  const n = s ? s.seconds : SERIES_SECONDS;
  const claims = s ? s.claims : [], soldOut = s ? s.sold_out : [], remaining = s ? s.remaining : [];
  const edgeSoldOut = s && s.edge && s.edge.sold_out ? s.edge.sold_out : [];
  const peak = (a) => a.reduce((m, v) => Math.max(m, v), 0); // no spread: an hour is 3,600 values
  const leftTicks = countTicks(Math.max(peak(claims), peak(soldOut), peak(edgeSoldOut)), 5);
  const rightTicks = countTicks(peak(remaining), 5);
  const max = leftTicks[leftTicks.length - 1], maxRem = rightTicks[rightTicks.length - 1];
  const x = (i) => left + (w - left - right) * i / Math.max(1, n - 1);
  const y = (v, m) => top + (h - top - bottom) * (1 - v / m);
  ctx.strokeStyle = "#e4e7ec"; ctx.fillStyle = "#667085"; ctx.font = "11px system-ui";
  for (const v of leftTicks) {
    const yy = y(v, max);
    ctx.beginPath(); ctx.moveTo(left, yy); ctx.lineTo(w - right, yy); ctx.stroke();
    ctx.fillText(human(v), 4, yy + 4);
  }
  for (const v of rightTicks) ctx.fillText(human(v), w - right + 6, y(v, maxRem) + 4);
  ctx.fillText(s ? utc(s.from, true) : "−" + spanText(n), left, h - 6);
  ctx.fillText("now", w - right - 22, h - 6);
  const line = (values, m, color, dash) => {
    if (values.length < 2) return;
    ctx.strokeStyle = color; ctx.lineWidth = 2; ctx.setLineDash(dash); ctx.beginPath();
    values.forEach((v, i) => (i ? ctx.lineTo(x(i), y(v, m)) : ctx.moveTo(x(i), y(v, m))));
    ctx.stroke(); ctx.setLineDash([]); ctx.lineWidth = 1;
  };
  line(remaining, maxRem, "#98a2b3", [4, 3]);
  line(edgeSoldOut, max, "#f79009", []);
  line(soldOut, max, "#c4320a", []);
  line(claims, max, "#2f6fed", []);
  const sum = (a) => a.reduce((t, v) => t + v, 0);
  canvas.dataset.leftTicks = leftTicks.join(",");
  canvas.dataset.rightTicks = rightTicks.join(",");
  canvas.dataset.points = String(claims.length);
  canvas.dataset.claimsPeak = String(peak(claims));
  canvas.dataset.claimsTotal = String(sum(claims));
  canvas.dataset.soldOutTotal = String(sum(soldOut));
  canvas.dataset.edgeSoldOutTotal = String(sum(edgeSoldOut));
  canvas.dataset.remainingPeak = String(remaining.length ? peak(remaining) : "");
  canvas.dataset.remainingLast = String(remaining.length ? remaining[remaining.length - 1] : "");
  canvas.dataset.span = span;
  $("#span-title").textContent = span === "sale" ? "whole sale" + (s ? ", " + spanText(n) : "")
    : "last 5 minutes";
  $("#chart-sum").textContent = s ? "· " + human(sum(claims)) + " claims, peak " + human(peak(claims)) +
    "/s, " + human(sum(soldOut)) + " sold-out answers here and " + human(sum(edgeSoldOut)) +
    " at the edge in " + spanText(n) : "";
  drawEdgeAnswers(s);
}

async function poll() {
  clearTimeout(pollTimer);
  if (!token()) return;
  try {
    const data = await api("GET", "/admin/v1/campaigns");
    campaigns = data.campaigns;
    const now = Date.now();
    for (const c of campaigns) rateOf(c.id, (c.counts || {}).claims_total, now);
    render();
    loadSeries(true);
    loadVariants();
    loadDraw();
    for (const hook of pollHooks) hook();
    if (!$("#notice").classList.contains("error") || $("#notice").dataset.kind === "poll") {
      notice("Live · " + data.campaigns.length + " campaigns · updated " + utc(new Date(), true));
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
    rows.clear(); history.clear(); selected = null; campaigns = []; series = null;
    $("#detail").hidden = true;
    for (const hook of forgetHooks) hook();
    notice("Token forgotten. Paste a manager or viewer token to load the campaigns.");
  });
  $("#campaigns tbody").addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-action]");
    if (b) act(b.dataset.action, b.dataset.campaign);
  });
  for (const b of document.querySelectorAll("#span button")) {
    b.addEventListener("click", () => {
      span = b.dataset.span;
      for (const o of document.querySelectorAll("#span button")) o.setAttribute("aria-pressed", String(o === b));
      series = null; drawChart(); loadSeries();
    });
  }
  $("#filter-state").addEventListener("change", () => { page = 0; render(); });
  $("#filter-name").addEventListener("input", () => { page = 0; render(); });
  $("#page-prev").addEventListener("click", () => { page = Math.max(0, page - 1); render(); });
  $("#page-next").addEventListener("click", () => { page += 1; render(); });
  $("#confirm-no").addEventListener("click", closeConfirm);
  $("#confirm-yes").addEventListener("click", () => {
    const run = pendingConfirm;
    closeConfirm();
    if (run) run();
  });
  document.addEventListener("keydown", (ev) => { if (ev.key === "Escape") closeConfirm(); });
  if (token()) poll();
});
