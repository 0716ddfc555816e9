// Browser test of the origin's /admin dashboard in real headless Chromium (Debian's package,
// driven by playwright-core; no browser download). Run by scripts/test-dashboard, which starts
// an origin and creates the campaign. Four legs: the manager's actions on one campaign; a
// campaign sold out by real concurrent claims, then the page opened afresh after the spike
// (the chart must still show it: the origin's per-second series); a campaign of one unit with
// a 200-character name in a browser set to New York (distinct whole-number axis ticks, audit
// lines inside their card, every time in UTC and labelled); 200 more campaigns (paging,
// filters, the page within a 1,400 px window). Environment:
//   FLASHGATE_ORIGIN_URL   the running origin (e.g. http://127.0.0.1:8123)
//   FLASHGATE_ADMIN_TOKEN  a manager token
//   FLASHGATE_CUSTOMER_TOKEN_SECRET  the origin's HS256 customer token secret (the claims)
//   FLASHGATE_TEST_CAMPAIGN  an active campaign to pause and resume (also the prefix of the
//                          campaigns the other legs create)
//   FLASHGATE_CHROMIUM     Chromium executable (default /usr/bin/chromium)
//   FLASHGATE_ARTIFACTS    where screenshots go (default <repo>/artifacts)
// Exits 0 when every step passed, 1 otherwise.
import { launchChromium } from "./chromium.mjs";
import { mkdirSync } from "node:fs";
import { createHmac, randomUUID } from "node:crypto";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const origin = process.env.FLASHGATE_ORIGIN_URL;
const token = process.env.FLASHGATE_ADMIN_TOKEN;
const campaign = process.env.FLASHGATE_TEST_CAMPAIGN;
const customerSecret = process.env.FLASHGATE_CUSTOMER_TOKEN_SECRET;
const artifacts = resolve(process.env.FLASHGATE_ARTIFACTS || join(here, "..", "..", "artifacts"));
if (!origin || !token || !campaign || !customerSecret) {
  console.error("set FLASHGATE_ORIGIN_URL, FLASHGATE_ADMIN_TOKEN, FLASHGATE_CUSTOMER_TOKEN_SECRET and FLASHGATE_TEST_CAMPAIGN");
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });

const step = (m) => console.log("[dashboard] " + m);

const api = async (method, path, body) => {
  const res = await fetch(origin + path, {
    method,
    headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: await res.json() };
};

// An HS256 customer token for `sub` (RFC 7519), valid one hour.
const b64 = (v) => Buffer.from(typeof v === "string" ? v : JSON.stringify(v)).toString("base64url");
function customerToken(sub) {
  const head = b64({ alg: "HS256", typ: "JWT" }) + "." + b64({ sub, exp: Math.floor(Date.now() / 1000) + 3600 });
  return head + "." + createHmac("sha256", customerSecret).update(head).digest("base64url");
}

// One claim of customer `sub` on campaign `id`; retried while the origin answers 503.
async function claim(id, sub) {
  const headers = { Authorization: "Bearer " + customerToken(sub), "Content-Type": "application/json",
                    "Idempotency-Key": randomUUID() };
  for (let i = 0; ; i++) {
    const res = await fetch(`${origin}/api/v1/campaigns/${id}/claims`, { method: "POST", headers, body: "{}" });
    const body = await res.json();
    if (res.status !== 503 || i >= 10) return body.result;
    await new Promise((r) => setTimeout(r, 300));
  }
}

// Runs `jobs` (functions returning promises) `width` at a time; their results in order.
async function together(jobs, width) {
  const out = new Array(jobs.length);
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < jobs.length) { const i = next++; out[i] = await jobs[i](); }
  }));
  return out;
}

function newCampaign(id, name, stock) {
  const at = (min) => new Date(Date.now() + min * 60000).toISOString().replace(/\.\d+Z$/, "Z");
  return api("POST", "/admin/v1/campaigns",
    { id, name, kind: "giveaway", stock, starts_at: at(-1), ends_at: at(60) });
}

// The page's layout in a 1,400 px window: nothing wider than the window, every Actions cell
// inside the table's border.
async function checkLayout(page) {
  const m = await page.evaluate(() => {
    const table = document.querySelector("#campaigns").getBoundingClientRect();
    const cells = [...document.querySelectorAll("#campaigns td.actions")].map((td) => td.getBoundingClientRect());
    return { width: document.documentElement.scrollWidth, tableRight: table.right,
             actionsRight: Math.max(0, ...cells.map((r) => r.right)), cells: cells.length };
  });
  if (m.width > 1400) throw new Error("page is " + m.width + " px wide in a 1,400 px window");
  if (!m.cells || m.actionsRight > m.tableRight + 0.5) {
    throw new Error("Actions cells end at " + m.actionsRight + " px, the table at " + m.tableRight);
  }
  return m;
}

// A chart axis's ticks (the canvas's data-left-ticks / data-right-ticks): distinct whole
// numbers, rising from 0.
function checkTicks(name, list) {
  const ticks = (list || "").split(",").map(Number);
  const ok = ticks.length >= 2 && ticks[0] === 0 && ticks.every(Number.isInteger) &&
    ticks.every((t, i) => i === 0 || t > ticks[i - 1]);
  if (!ok) throw new Error(name + " axis ticks are not distinct whole numbers: " + list);
}

// Every audit line inside its card: no line (its JSON included) wider than the list, the list
// not scrolled sideways, each line's time in UTC and labelled so.
async function checkAudit(page) {
  const m = await page.evaluate(() => {
    const ol = document.querySelector("#audit");
    const card = ol.getBoundingClientRect();
    return {
      olOverflow: ol.scrollWidth - ol.clientWidth,
      lines: [...ol.querySelectorAll("li")].map((li) => ({
        text: li.textContent, overflow: li.scrollWidth - li.clientWidth,
        right: Math.max(...[...li.querySelectorAll("*")].map((e) => e.getBoundingClientRect().right),
                        li.getBoundingClientRect().right) - card.right,
      })),
    };
  });
  if (!m.lines.length) throw new Error("no audit line");
  if (m.olOverflow > 1) throw new Error("the audit list scrolls sideways by " + m.olOverflow + " px");
  for (const l of m.lines) {
    if (l.overflow > 1 || l.right > 1) {
      throw new Error("audit line runs off its card (" + l.overflow + " px, right +" + l.right + " px): " + l.text);
    }
    if (!/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC · /.test(l.text)) {
      throw new Error("audit line's time is not labelled UTC: " + l.text);
    }
  }
}

async function openWithToken(browser) {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.goto(origin + "/admin", { waitUntil: "domcontentloaded" });
  await page.fill("#token", token);
  await page.click("#token-use");
  await page.waitForSelector("#campaigns tbody tr");
  return page;
}
const browser = await launchChromium();
let failed = false;
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });

  const row = `tr[data-campaign="${campaign}"]`;
  const stateIs = (s) => page.waitForSelector(`${row} td.state[data-state="${s}"]`, { timeout: 10000 });

  step("load " + origin + "/admin");
  const res = await page.goto(origin + "/admin", { waitUntil: "domcontentloaded" });
  if (res.status() !== 200) throw new Error("GET /admin answered " + res.status());
  if (!(res.headers()["content-security-policy"] || "").includes("script-src 'self'")) {
    throw new Error("no Content-Security-Policy on /admin");
  }

  step("paste the manager token");
  await page.fill("#token", token);
  await page.click("#token-use");
  await stateIs("active");
  const stored = await page.evaluate(() => sessionStorage.getItem("flashgate.adminToken"));
  if (stored !== token) throw new Error("token not kept in sessionStorage");

  step("press pause: a confirmation comes first");
  await page.click(`${row} button[data-action="pause"]`);
  await page.waitForSelector("#confirm:not([hidden])");
  const question = await page.textContent("#confirm-text");
  if (!question.includes(campaign)) throw new Error("confirmation does not name the campaign: " + question);
  if ((await api("GET", "/admin/v1/campaigns/" + campaign)).body.paused) {
    throw new Error("paused before the confirmation");
  }
  await page.screenshot({ path: join(artifacts, "dashboard-confirm.png") });

  step("confirm: the state changes to paused");
  await page.click("#confirm-yes");
  await stateIs("paused");
  const shown = await api("GET", "/admin/v1/campaigns/" + campaign);
  if (!shown.body.paused || shown.body.state !== "paused") {
    throw new Error("the origin does not say paused: " + JSON.stringify(shown.body));
  }
  await page.waitForSelector("#audit li:has-text('pause')", { timeout: 5000 });
  const pauseLine = await page.textContent("#audit li:first-child");
  if (!pauseLine.includes("paused false → true")) {
    throw new Error("the pause's audit line does not show the changed field: " + pauseLine);
  }
  await checkLayout(page);
  await page.screenshot({ path: join(artifacts, "dashboard.png") });
  step("screenshot: " + join(artifacts, "dashboard.png"));

  step("resume, then cancel: nothing changes");
  await page.click(`${row} button[data-action="resume"]`);
  await page.waitForSelector("#confirm:not([hidden])");
  await page.click("#confirm-no");
  await page.waitForTimeout(1500);
  if (!(await api("GET", "/admin/v1/campaigns/" + campaign)).body.paused) {
    throw new Error("cancel resumed the campaign");
  }

  step("resume, then confirm: active again");
  await page.click(`${row} button[data-action="resume"]`);
  await page.click("#confirm-yes");
  await stateIs("active");

  step("restock 7 units, confirmed");
  const before = (await api("GET", "/admin/v1/campaigns/" + campaign)).body;
  await page.fill(`${row} input[data-restock-for="${campaign}"]`, "7");
  await page.click(`${row} button[data-action="restock"]`);
  await page.click("#confirm-yes");
  await page.waitForFunction(
    ([sel, want]) => document.querySelector(sel)?.textContent === String(want),
    [`${row} td:nth-child(4)`, before.stock + 7], { timeout: 10000 });

  const audit = (await api("GET", `/admin/v1/campaigns/${campaign}/audit`)).body.entries.map((e) => e.action);
  if (audit.join(",") !== "restock,resume,pause,create") throw new Error("audit trail: " + audit);
  await page.waitForSelector("#audit li:has-text('stock " + before.stock + " → " + (before.stock + 7) + "')",
                             { timeout: 5000 });
  await page.close();

  const stock = 150, crowd = 400;
  const soldOut = campaign + "-sellout";
  step(`sell-out: ${soldOut} (stock ${stock}), ${crowd} customers claiming 40 at a time`);
  if ((await newCampaign(soldOut, "Sell-out test", stock)).status !== 201) throw new Error("create " + soldOut);
  const results = await together(Array.from({ length: crowd }, (_, i) => () => claim(soldOut, `${soldOut}-c${i}`)), 40);
  const tally = {};
  for (const r of results) tally[r] = (tally[r] || 0) + 1;
  step("answers: " + JSON.stringify(tally));
  if (tally.claimed !== stock || tally.sold_out !== crowd - stock) throw new Error("answers " + JSON.stringify(tally));
  step("5 s later, a fresh page (no history of its own) must still show the spike");
  await new Promise((r) => setTimeout(r, 5000));
  const late = await openWithToken(browser);
  late.on("pageerror", (e) => problems.push("page error: " + e.message));
  await late.fill("#filter-name", soldOut);
  await late.click(`tr[data-campaign="${soldOut}"] td.campaign`);
  await late.waitForFunction((want) => document.querySelector("#chart").dataset.claimsTotal === String(want),
                             stock, { timeout: 10000 });
  const drawn = await late.evaluate(() => ({ ...document.querySelector("#chart").dataset }));
  step("chart: " + JSON.stringify(drawn));
  if (drawn.soldOutTotal !== String(crowd - stock)) throw new Error("sold-out answers drawn: " + drawn.soldOutTotal);
  if (Number(drawn.claimsPeak) < 1 || drawn.remainingLast !== "0" || Number(drawn.remainingPeak) > stock) {
    throw new Error("chart figures: " + JSON.stringify(drawn));
  }
  checkTicks("left", drawn.leftTicks);
  checkTicks("right", drawn.rightTicks);
  // The series itself: 0 remaining before the create, `stock` less the claims of its second at
  // its end, then each second's claims taken off the one before.
  const sr = (await api("GET", `/admin/v1/campaigns/${soldOut}/series?seconds=120`)).body;
  const c = sr.remaining.findIndex((r, i) => r + sr.claims[i] > 0);
  const steps = sr.remaining.slice(c + 1).every((r, j) => r === sr.remaining[c + j] - sr.claims[c + 1 + j]);
  if (c < 0 || sr.remaining.slice(0, c).some((r) => r !== 0) || sr.remaining[c] + sr.claims[c] !== stock || !steps) {
    throw new Error("series: " + JSON.stringify(sr));
  }
  await late.screenshot({ path: join(artifacts, "dashboard-sellout.png") });
  step("screenshot: " + join(artifacts, "dashboard-sellout.png"));
  await late.close();

  const small = campaign + "-one";
  // A name with no space to break at (200 characters, the longest allowed): the create's audit
  // line carries it; a restock adds its JSON parameters.
  const longName = "x".repeat(200);
  step(`one unit, a long name, a browser in New York: ${small}`);
  if ((await newCampaign(small, longName, 1)).status !== 201) throw new Error("create " + small);
  if ((await api("PATCH", "/admin/v1/campaigns/" + small, { action: "restock", add: 1 })).status !== 200) {
    throw new Error("restock " + small);
  }
  if ((await api("PATCH", "/admin/v1/campaigns/" + small, { set_stock: 1 })).status !== 200) {
    throw new Error("set_stock " + small);
  }
  const ny = await browser.newPage({ viewport: { width: 1400, height: 900 }, timezoneId: "America/New_York" });
  ny.on("pageerror", (e) => problems.push("page error: " + e.message));
  await ny.goto(origin + "/admin", { waitUntil: "domcontentloaded" });
  await ny.fill("#token", token);
  await ny.click("#token-use");
  await ny.waitForSelector("#campaigns tbody tr");
  const zone = await ny.evaluate(() => Intl.DateTimeFormat().resolvedOptions().timeZone);
  if (zone !== "America/New_York") throw new Error("the page runs in " + zone);
  await ny.fill("#filter-name", small);
  await ny.click(`tr[data-campaign="${small}"] td.campaign`);
  await ny.waitForFunction(() => document.querySelector("#chart").dataset.remainingLast === "1", null,
                           { timeout: 10000 });
  await ny.waitForSelector("#audit li:has-text('set_stock')", { timeout: 5000 });
  const one = await ny.evaluate(() => ({ ...document.querySelector("#chart").dataset }));
  step("chart of one unit: ticks " + one.leftTicks + " | " + one.rightTicks);
  checkTicks("left", one.leftTicks);
  checkTicks("right", one.rightTicks);
  await checkAudit(ny);
  await ny.waitForSelector("#notice:has-text('updated')", { timeout: 5000 });
  const updated = (await ny.textContent("#notice")).match(/updated (\d\d):(\d\d):(\d\d) UTC$/);
  if (!updated) throw new Error("the notice's time is not in UTC, labelled: " + (await ny.textContent("#notice")));
  const shownAt = Number(updated[1]) * 3600 + Number(updated[2]) * 60 + Number(updated[3]);
  const nowUtc = Math.floor(Date.now() / 1000) % 86400;
  if (Math.min((nowUtc - shownAt + 86400) % 86400, (shownAt - nowUtc + 86400) % 86400) > 120) {
    throw new Error("the notice says " + updated[0] + ", the UTC time is another");
  }
  await ny.screenshot({ path: join(artifacts, "dashboard-utc.png") });
  step("screenshot: " + join(artifacts, "dashboard-utc.png"));
  await ny.close();

  const many = 200;
  step(`${many} more campaigns: paging, filters, width`);
  const ids = Array.from({ length: many }, (_, i) => `${campaign}-s${String(i).padStart(3, "0")}`);
  const made = await together(ids.map((id, i) => () => newCampaign(id, `Scale test ${i}`, 10 + i)), 16);
  if (made.some((r) => r.status !== 201)) throw new Error("creating the campaigns failed");
  for (const id of ids.slice(0, 3)) await api("PATCH", "/admin/v1/campaigns/" + id, { action: "pause" });
  const big = await openWithToken(browser);
  big.on("pageerror", (e) => problems.push("page error: " + e.message));
  const shownRows = () => big.$$eval("#campaigns tbody tr", (trs) => trs.map((tr) => tr.dataset.campaign));
  const first = await shownRows();
  if (first.length !== 25) throw new Error("first page shows " + first.length + " rows, want 25");
  const height = await big.evaluate(() => document.documentElement.scrollHeight);
  // 25 rows of at most three lines (this test's ids wrap) and the chart: no page grows with the
  // number of campaigns (177 of them made a 9,774 px page before paging).
  if (height > 3000) throw new Error("the page is " + height + " px tall with " + many + " campaigns");
  const info = await big.textContent("#page-info");
  const total = Number((await big.textContent("#count")).match(/\d+/)[0]);
  if (total < many + 2 || info !== "page 1 of " + Math.ceil(total / 25)) throw new Error(`count ${total}, ${info}`);
  const layout = await checkLayout(big);
  await big.screenshot({ path: join(artifacts, "dashboard-200.png"), fullPage: true });
  step(`page 1: 25 of ${total}, ${height} px tall, ${layout.width} px wide; screenshot dashboard-200.png`);
  await big.click("#page-next");
  const second = await shownRows();
  if (second.length !== 25 || second.some((id) => first.includes(id))) throw new Error("page 2: " + second);
  await big.fill("#filter-name", campaign + "-s");
  await big.selectOption("#filter-state", "paused");
  const paused = await shownRows();
  if (paused.sort().join() !== ids.slice(0, 3).sort().join()) throw new Error("paused filter shows " + paused);
  if ((await big.textContent("#page-info")) !== "page 1 of 1") throw new Error("paging not reset by the filter");
  await big.fill("#filter-name", campaign + "-s07");
  await big.selectOption("#filter-state", "active");
  const named = await shownRows();
  if (named.sort().join() !== ids.slice(70, 80).sort().join()) throw new Error("name filter: " + named);
  await big.close();
  if (problems.length) throw new Error("browser reported: " + problems.join(" | "));
  step("passed");
} catch (err) {
  failed = true;
  console.error("[dashboard] FAILED: " + (err && err.stack ? err.stack : err));
  try {
    const pages = browser.contexts().flatMap((c) => c.pages());
    if (pages[0]) await pages[0].screenshot({ path: join(artifacts, "dashboard-failure.png"), fullPage: true });
  } catch (_) { /* the failure screenshot is best effort */ }
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
