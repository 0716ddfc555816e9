// Browser test of the dashboard's whole-sale view with the edge's answers, in real headless
// Chromium (Debian's package, driven by playwright-core). Run by scripts/test-dashboard, which
// starts, beside the dashboard's origin, a second origin with an edge secret on the same
// PostgreSQL and Redis and the built edge worker in workerd in front of it. A sale of 20 units
// is stampeded through the edge: 400 customers 40 at a time, then, once the edge answers sold
// out itself, 600 more. The edge counts the sold-out answers it gave and reports them to its
// origin once a second; the dashboard (on the other origin) must show, for that campaign, the
// very number of sold-out answers the load got from the edge, in "Answers at the edge" and on
// the chart, over the whole sale and zoomed to the last 5 minutes, formatted for people.
// Environment as dashboard.test.mjs, plus:
//   FLASHGATE_EDGE_URL  the edge in front of the second origin
// Screenshot: artifacts/dashboard-edge.png. Exits 0 when every step passed, 1 otherwise.
import { launchChromium } from "./chromium.mjs";
import { createHmac, randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const origin = process.env.FLASHGATE_ORIGIN_URL;
const edge = process.env.FLASHGATE_EDGE_URL;
const token = process.env.FLASHGATE_ADMIN_TOKEN;
const customerSecret = process.env.FLASHGATE_CUSTOMER_TOKEN_SECRET;
const prefix = process.env.FLASHGATE_TEST_CAMPAIGN || "dash";
const artifacts = resolve(process.env.FLASHGATE_ARTIFACTS || join(here, "..", "..", "artifacts"));
if (!origin || !edge || !token || !customerSecret) {
  console.error("set FLASHGATE_ORIGIN_URL, FLASHGATE_EDGE_URL, FLASHGATE_ADMIN_TOKEN and FLASHGATE_CUSTOMER_TOKEN_SECRET");
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });
const step = (m) => console.log("[dashboard-edge] " + m);

const b64 = (v) => Buffer.from(JSON.stringify(v)).toString("base64url");
function customerToken(sub) {
  const head = b64({ alg: "HS256", typ: "JWT" }) + "." + b64({ sub, exp: Math.floor(Date.now() / 1000) + 3600 });
  return head + "." + createHmac("sha256", customerSecret).update(head).digest("base64url");
}

// Connections workerd closed under the client before it sent its request (a kept-alive socket
// closed as it was reused): the claim is sent again, with the same key.
let resent = 0;

// A claim of customer `sub` on `id` through the edge: status, who answered, result.
async function claim(id, sub) {
  const init = {
    method: "POST",
    headers: { Authorization: "Bearer " + customerToken(sub), "Content-Type": "application/json",
      "Idempotency-Key": randomUUID() },
    body: "{}",
  };
  let res;
  for (let i = 0; ; i++) {
    try {
      res = await fetch(`${edge}/api/v1/campaigns/${id}/claims`, init);
      break;
    } catch (e) {
      const code = e && e.cause && e.cause.code;
      if (i >= 3 || !["ECONNRESET", "UND_ERR_SOCKET", "ECONNREFUSED"].includes(code)) throw e;
      resent++;
    }
  }
  let body = {};
  try { body = await res.json(); } catch (_) { body = {}; }
  return { status: res.status, by: res.headers.get("flashgate-answered-by") || "", result: body.result };
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

const browser = await launchChromium();
let failed = false;
try {
  const id = prefix + "-edge";
  const stock = 20;
  const now = Date.now();
  const created = await fetch(origin + "/admin/v1/campaigns", {
    method: "POST",
    headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
    body: JSON.stringify({ id, name: "Edge answers", kind: "sale", stock,
      starts_at: new Date(now - 60000).toISOString(), ends_at: new Date(now + 3600000).toISOString() }),
  });
  if (created.status !== 201) throw new Error("create " + id + ": " + created.status);

  step(`stampede through the edge: ${id} (stock ${stock}), 400 customers 40 at a time`);
  const answers = await together(Array.from({ length: 400 }, (_, i) => () => claim(id, `${id}-a${i}`)), 40);
  // Until the edge has the sold-out status (one status TTL), probes: their answers count too.
  for (let i = 0; ; i++) {
    const a = await claim(id, `${id}-probe${i}`);
    answers.push(a);
    if (a.by === "edge" && a.result === "sold_out") break;
    if (i > 100) throw new Error("the edge never answered sold out: " + JSON.stringify(a));
    await new Promise((r) => setTimeout(r, 200));
  }
  step("then 600 more, answered at the edge");
  answers.push(...await together(Array.from({ length: 600 }, (_, i) => () => claim(id, `${id}-b${i}`)), 40));
  const tally = {};
  for (const a of answers) tally[a.by + " " + a.status + " " + a.result] = (tally[a.by + " " + a.status + " " + a.result] || 0) + 1;
  step("answers: " + JSON.stringify(tally) + "; sent again after a closed connection: " + resent);
  const atEdge = answers.filter((a) => a.by === "edge" && a.result === "sold_out").length;
  const claimed = answers.filter((a) => a.status === 201).length;
  if (claimed !== stock) throw new Error("claimed " + claimed);

  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });
  await page.goto(origin + "/admin", { waitUntil: "domcontentloaded" });
  await page.fill("#token", token);
  await page.click("#token-use");
  await page.fill("#filter-name", id);
  const row = `#campaigns tr[data-campaign="${id}"]`;
  await page.waitForSelector(row, { timeout: 10000 });
  await page.click(row + " td.campaign");

  step(`the whole sale: the edge's ${atEdge} sold-out answers, as the load got them`);
  const shown = (want) => page.waitForFunction((want) => {
    const li = document.querySelector('#edge-answers li[data-result="sold_out"]');
    return li && li.dataset.total === String(want) &&
      document.querySelector("#chart").dataset.edgeSoldOutTotal === String(want);
  }, want, { timeout: 20000 });
  await shown(atEdge);
  const sale = await page.evaluate(() => ({ ...document.querySelector("#chart").dataset }));
  step("chart: " + JSON.stringify(sale));
  // The whole sale runs from the campaign's creation here (its start was a minute before it).
  const points = Number(sale.points);
  if (sale.span !== "sale" || sale.claimsTotal !== String(stock) || points < 2 || points >= 300) {
    throw new Error("the whole-sale chart: " + JSON.stringify(sale));
  }
  const text = await page.textContent('#edge-answers li[data-result="sold_out"] strong');
  if (text !== new Intl.NumberFormat("en-US").format(atEdge)) throw new Error("shown as " + text);
  if (!(await page.textContent("#span-title")).startsWith("whole sale")) throw new Error("the span title");
  await page.screenshot({ path: join(artifacts, "dashboard-edge.png"), fullPage: true });
  step("screenshot: " + join(artifacts, "dashboard-edge.png"));

  step("zoomed to the last 5 minutes: the same answers");
  await page.click('#span button[data-span="recent"]');
  await page.waitForFunction(() => document.querySelector("#chart").dataset.span === "recent" &&
    document.querySelector("#chart").dataset.points === "300", null, { timeout: 10000 });
  await shown(atEdge);
  if ((await page.textContent("#span-title")) !== "last 5 minutes") throw new Error("the span title");
  if (problems.length) throw new Error(problems.join("; "));
  step(`passed: ${atEdge} sold-out answers at the edge shown, ${atEdge} given`);
} catch (e) {
  failed = true;
  console.error("[dashboard-edge] FAILED: " + (e && e.stack ? e.stack : e) + (e && e.cause ? "\ncause: " + (e.cause.stack || e.cause) : ""));
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
