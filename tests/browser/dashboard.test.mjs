// Browser test of the origin's /admin dashboard in real headless Chromium (Debian's package,
// driven by playwright-core; no browser download). Run by scripts/test-dashboard, which starts
// an origin and creates the campaign. Environment:
//   FLASHGATE_ORIGIN_URL   the running origin (e.g. http://127.0.0.1:8123)
//   FLASHGATE_ADMIN_TOKEN  a manager token
//   FLASHGATE_TEST_CAMPAIGN  an active campaign to pause and resume
//   FLASHGATE_CHROMIUM     Chromium executable (default /usr/bin/chromium)
//   FLASHGATE_ARTIFACTS    where screenshots go (default <repo>/artifacts)
// Exits 0 when every step passed, 1 otherwise.
import { launchChromium } from "./chromium.mjs";
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

const step = (m) => console.log("[dashboard] " + m);
const browser = await launchChromium();
let failed = false;
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("console", (m) => { if (m.type() === "error") problems.push("console: " + m.text()); });

  const api = async (method, path, body) => {
    const res = await fetch(origin + path, {
      method,
      headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: res.status, body: await res.json() };
  };
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
