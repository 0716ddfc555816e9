// Browser test of the dashboard's variants panel in real headless Chromium (Debian's package,
// driven by playwright-core). Run by scripts/test-dashboard after dashboard-webhooks.test.mjs,
// against its origin. It creates a sale with variants (41 "Size 41" stock 2, 42 "Size 42"
// stock 1), claims size 42 for one customer, and sees in the page, once the campaign is
// selected: one row per variant with its state, stock, remaining, held and paid (42 sold out,
// 1 held; 41 active, 2 remaining); then a second claim (size 41) shows up by the page's own
// polling; selecting a campaign without variants (one of its own) hides the panel.
// Environment as dashboard.test.mjs (FLASHGATE_ORIGIN_URL, FLASHGATE_ADMIN_TOKEN,
// FLASHGATE_CUSTOMER_TOKEN_SECRET, FLASHGATE_CHROMIUM, FLASHGATE_ARTIFACTS). Screenshot: artifacts/dashboard-variants.png.
// Exits 0 when every step passed, 1 otherwise.
import { launchChromium } from "./chromium.mjs";
import { createHmac, randomUUID } from "node:crypto";
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const origin = process.env.FLASHGATE_ORIGIN_URL;
const token = process.env.FLASHGATE_ADMIN_TOKEN;
const customerSecret = process.env.FLASHGATE_CUSTOMER_TOKEN_SECRET;
const artifacts = resolve(process.env.FLASHGATE_ARTIFACTS || join(here, "..", "..", "artifacts"));
if (!origin || !token || !customerSecret) {
  console.error("set FLASHGATE_ORIGIN_URL, FLASHGATE_ADMIN_TOKEN and FLASHGATE_CUSTOMER_TOKEN_SECRET");
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });
const step = (m) => console.log("[dashboard-variants] " + m);

const b64 = (v) => Buffer.from(JSON.stringify(v)).toString("base64url");
function customerToken(sub) {
  const head = b64({ alg: "HS256", typ: "JWT" }) + "." + b64({ sub, exp: Math.floor(Date.now() / 1000) + 3600 });
  return head + "." + createHmac("sha256", customerSecret).update(head).digest("base64url");
}

// Creates sale `id` (started a minute ago) with `more` fields (its variants); throws unless 201.
async function create(id, more) {
  const now = Date.now();
  const res = await fetch(origin + "/admin/v1/campaigns", {
    method: "POST",
    headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
    body: JSON.stringify({ id, name: "Dashboard sizes", kind: "sale", stock: 0,
      starts_at: new Date(now - 60000).toISOString(), ends_at: new Date(now + 3600000).toISOString(),
      ...more }),
  });
  if (res.status !== 201) throw new Error("create " + id + ": " + res.status + " " + await res.text());
}

// A claim of `variant` of `id` by customer `sub`: status and body.
async function claim(id, sub, variant) {
  const res = await fetch(`${origin}/api/v1/campaigns/${id}/claims`, {
    method: "POST",
    headers: { Authorization: "Bearer " + customerToken(sub), "Content-Type": "application/json",
      "Idempotency-Key": randomUUID() },
    body: JSON.stringify({ variant }),
  });
  return { status: res.status, body: await res.json() };
}

// The variants panel's rows: id -> the text of each cell after the id.
const rowsOf = (page) => page.$$eval("#variants tbody tr", (trs) => Object.fromEntries(trs.map((tr) =>
  [tr.dataset.variant, [...tr.querySelectorAll("td")].slice(1).map((td) => td.textContent.trim())])));

const browser = await launchChromium();
let failed = false;
try {
  const id = "sizes-" + Date.now();
  const plain = "plain-" + Date.now();
  step("create " + id + " with sizes 41 (2) and 42 (1), and " + plain + " without; a customer claims 42");
  await create(id, { variants: [{ id: "41", name: "Size 41", stock: 2 }, { id: "42", name: "Size 42", stock: 1 }] });
  await create(plain, { stock: 3 });
  const first = await claim(id, "dash-v-1", "42");
  if (first.status !== 201) throw new Error("claim 42: " + first.status + " " + JSON.stringify(first.body));

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

  step("the panel lists the sizes with their state and counts");
  await page.waitForSelector("#variants-panel:not([hidden])", { timeout: 10000 });
  let rows = await rowsOf(page);
  const want1 = { 41: ["Size 41", "active", "2", "2", "0", "0"], 42: ["Size 42", "sold out", "1", "0", "1", "0"] };
  if (JSON.stringify(rows) !== JSON.stringify(want1)) throw new Error("the rows: " + JSON.stringify(rows));
  if ((await page.textContent("#variants-count")) !== "2 variants") throw new Error("the count line");

  step("another customer claims 41: the page's polling shows it");
  const second = await claim(id, "dash-v-2", "41");
  if (second.status !== 201) throw new Error("claim 41: " + second.status + " " + JSON.stringify(second.body));
  await page.waitForFunction(() => {
    const tr = document.querySelector('#variants tbody tr[data-variant="41"]');
    return tr && tr.querySelectorAll("td")[4].textContent === "1";
  }, null, { timeout: 10000 });
  rows = await rowsOf(page);
  if (JSON.stringify(rows[41]) !== JSON.stringify(["Size 41", "active", "2", "1", "1", "0"])) {
    throw new Error("size 41 after its claim: " + JSON.stringify(rows[41]));
  }
  await page.screenshot({ path: join(artifacts, "dashboard-variants.png"), fullPage: true });

  step("a campaign without variants hides the panel");
  await page.fill("#filter-name", plain);
  await page.waitForSelector(`#campaigns tr[data-campaign="${plain}"]`, { timeout: 10000 });
  await page.click(`#campaigns tr[data-campaign="${plain}"] td.campaign`);
  await page.waitForSelector("#variants-panel", { state: "hidden", timeout: 10000 });
  if (problems.length) throw new Error(problems.join("; "));
  step("passed");
} catch (e) {
  failed = true;
  console.error("[dashboard-variants] FAILED: " + (e && e.stack ? e.stack : e));
} finally {
  await browser.close();
}
process.exit(failed ? 1 : 0);
