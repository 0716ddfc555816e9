// Browser test of the dashboard's webhook view in real headless Chromium (Debian's package,
// driven by playwright-core). Run by scripts/test-dashboard after dashboard.test.mjs, against
// its origin (which allows endpoints on loopback: FLASHGATE_WEBHOOK_ALLOW_PRIVATE). A receiver
// of its own (node:http) answers 500, then 200. The test registers an endpoint for
// `campaign.restocked`, restocks the campaign, and sees in the page: the endpoint (URL,
// types, enabled); its delivery pending with the 500 as its last response code and the attempt's
// time in UTC; then delivered with 200 once the receiver answers; Replay, confirmed, sends the
// event again (the receiver gets its webhook-id a second time). Environment as
// dashboard.test.mjs (FLASHGATE_ORIGIN_URL, FLASHGATE_ADMIN_TOKEN, FLASHGATE_TEST_CAMPAIGN,
// FLASHGATE_CHROMIUM, FLASHGATE_ARTIFACTS). Exits 0 when every step passed, 1 otherwise.
import { launchChromium } from "./chromium.mjs";
import { createServer } from "node:http";
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const origin = process.env.FLASHGATE_ORIGIN_URL;
const token = process.env.FLASHGATE_ADMIN_TOKEN;
const campaign = process.env.FLASHGATE_TEST_CAMPAIGN;
const artifacts = resolve(process.env.FLASHGATE_ARTIFACTS || join(here, "..", "..", "artifacts"));
if (!origin || !token || !campaign) {
  console.error("set FLASHGATE_ORIGIN_URL, FLASHGATE_ADMIN_TOKEN and FLASHGATE_TEST_CAMPAIGN");
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });

const step = (m) => console.log("[dashboard-webhooks] " + m);

const api = async (method, path, body) => {
  const res = await fetch(origin + path, {
    method,
    headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
    body: body ? JSON.stringify(body) : undefined,
  });
  return { status: res.status, body: res.status === 204 ? null : await res.json() };
};

// The receiver: answers `answer.status` to every delivery and counts them by webhook-id.
const answer = { status: 500 };
const received = new Map(); // webhook-id -> [statuses answered]
const receiver = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    const id = req.headers["webhook-id"] || "";
    received.set(id, [...(received.get(id) || []), answer.status]);
    res.writeHead(answer.status).end();
  });
});
await new Promise((ok) => receiver.listen(0, "127.0.0.1", ok));
const hooksUrl = `http://127.0.0.1:${receiver.address().port}/hooks`;

const browser = await launchChromium();
let failed = false;
let endpoint = null;
try {
  step("register " + hooksUrl + " for campaign.restocked");
  const made = await api("POST", "/admin/v1/webhooks/endpoints",
    { url: hooksUrl, event_types: ["campaign.restocked"], description: "dashboard test" });
  if (made.status !== 201) throw new Error("register: " + made.status + " " + JSON.stringify(made.body));
  endpoint = made.body.id;

  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  await page.goto(origin + "/admin", { waitUntil: "domcontentloaded" });
  await page.fill("#token", token);
  await page.click("#token-use");
  const epRow = `#endpoints tr[data-endpoint="${endpoint}"]`;
  await page.waitForSelector(epRow, { timeout: 10000 });
  await page.click(epRow);
  const shown = await page.textContent(epRow);
  for (const want of [hooksUrl, "campaign.restocked", "enabled", "dashboard test"]) {
    if (!shown.includes(want)) throw new Error(`endpoint row lacks '${want}': ${shown}`);
  }

  step("restock " + campaign + ": its campaign.restocked event meets a receiver answering 500");
  const r = await api("PATCH", "/admin/v1/campaigns/" + campaign, { action: "restock", add: 1 });
  if (r.status !== 200) throw new Error("restock: " + r.status + " " + JSON.stringify(r.body));
  const delivery = await page.waitForSelector("#deliveries tbody tr[data-event]", { timeout: 15000 });
  const eventId = await delivery.getAttribute("data-event");
  const row = `#deliveries tr[data-event="${eventId}"]`;
  const cells = () => page.$$eval(row + " td", (tds) => tds.map((td) => td.textContent.trim()));
  await page.waitForFunction((sel) => {
    const tds = document.querySelectorAll(sel + " td");
    return tds.length && tds[4].textContent.trim() === "500";
  }, row, { timeout: 15000 });
  const pending = await cells();
  step("delivery: " + JSON.stringify(pending));
  if (pending[1] !== "campaign.restocked" || pending[2] !== "pending" || !(Number(pending[3]) >= 1)) {
    throw new Error("a failed delivery shows as " + JSON.stringify(pending));
  }
  if (!/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/.test(pending[5])) {
    throw new Error("last attempt's time is not labelled UTC: " + pending[5]);
  }
  if (!(received.get(eventId) || []).includes(500)) throw new Error("the receiver never answered 500");

  step("the receiver answers 200: the retry delivers it");
  answer.status = 200;
  await page.waitForSelector(`${row} td.state[data-status="delivered"]`, { timeout: 30000 });
  const done = await cells();
  if (done[4] !== "200") throw new Error("a delivered delivery shows as " + JSON.stringify(done));
  await page.screenshot({ path: join(artifacts, "dashboard-webhooks.png"), fullPage: true });
  const before = (received.get(eventId) || []).filter((s) => s === 200).length;

  step("replay it: confirmed first, then the receiver gets it again");
  await page.click(`${row} button[data-replay]`);
  await page.waitForSelector("#confirm:not([hidden])");
  const ask = await page.textContent("#confirm-text");
  if (!ask.includes(eventId) || !ask.includes(hooksUrl)) throw new Error("confirmation: " + ask);
  await page.click("#confirm-yes");
  await page.waitForFunction(() => /1 queued/.test(document.querySelector("#notice").textContent),
    null, { timeout: 10000 });
  for (let i = 0; (received.get(eventId) || []).filter((s) => s === 200).length <= before; i++) {
    if (i > 100) throw new Error("the replayed event did not reach the receiver");
    await new Promise((ok) => setTimeout(ok, 100));
  }
  await page.waitForSelector(`${row} td.state[data-status="delivered"]`, { timeout: 10000 });
  if (problems.length) throw new Error("browser reported: " + problems.join(" | "));
  step("passed; screenshot dashboard-webhooks.png");
} catch (err) {
  failed = true;
  console.error("[dashboard-webhooks] FAILED: " + (err && err.stack ? err.stack : err));
  try {
    const pages = browser.contexts().flatMap((c) => c.pages());
    if (pages[0]) await pages[0].screenshot({ path: join(artifacts, "dashboard-webhooks-failure.png"), fullPage: true });
  } catch (_) { /* the failure screenshot is best effort */ }
} finally {
  if (endpoint) await api("DELETE", "/admin/v1/webhooks/endpoints/" + endpoint).catch(() => {});
  await browser.close();
  receiver.close();
}
process.exit(failed ? 1 : 0);
