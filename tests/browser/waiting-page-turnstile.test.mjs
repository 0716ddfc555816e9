// Browser test of the join page on a campaign with a Turnstile challenge (docs/ACCESS.md),
// served by the edge worker in workerd in front of a real origin, in real headless Chromium,
// with the test stand-in for Turnstile (tests/browser/fake-turnstile.mjs: its widget script
// and its siteverify). Run by scripts/test-waiting-page, which starts the stand-in, gives the
// edge its URLs, the site key and the secret, creates the campaign and mints the token.
// Environment:
//   FLASHGATE_EDGE_URL             the edge worker
//   FLASHGATE_TURNSTILE_CAMPAIGN   the campaign with `challenge: "turnstile"`
//   FLASHGATE_TURNSTILE_TOKEN      a customer token (JWT)
//   FLASHGATE_FAKE_TURNSTILE_URL   the stand-in's base URL
//   FLASHGATE_TURNSTILE_SITE_KEY, FLASHGATE_TURNSTILE_SECRET   what the edge was given
//   FLASHGATE_CHROMIUM, FLASHGATE_SCREENSHOT   as the other browser tests (this one's
//                                  screenshot ends -turnstile.png)
// Steps: her page (`GET …/queue`, `#token=…`) loads the widget script from the configured URL,
// renders the widget with the site key, joins with the widget's token; the edge verified that
// token with the stand-in's siteverify (with the secret); the ticket is a real one: admitted.
// Exits 0 when every step passed, 1 otherwise.
import { launchChromium } from "./chromium.mjs";
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const edge = process.env.FLASHGATE_EDGE_URL;
const campaign = process.env.FLASHGATE_TURNSTILE_CAMPAIGN;
const token = process.env.FLASHGATE_TURNSTILE_TOKEN;
const fake = process.env.FLASHGATE_FAKE_TURNSTILE_URL;
const siteKey = process.env.FLASHGATE_TURNSTILE_SITE_KEY;
const secret = process.env.FLASHGATE_TURNSTILE_SECRET;
const base = resolve(process.env.FLASHGATE_SCREENSHOT || join(here, "..", "..", ".dev", "waiting-page.png"));
const shot = base.replace(/\.png$/, "-turnstile.png");
if (!edge || !campaign || !token || !fake || !siteKey || !secret) {
  console.error("set FLASHGATE_EDGE_URL, FLASHGATE_TURNSTILE_CAMPAIGN, FLASHGATE_TURNSTILE_TOKEN, " +
    "FLASHGATE_FAKE_TURNSTILE_URL, FLASHGATE_TURNSTILE_SITE_KEY and FLASHGATE_TURNSTILE_SECRET");
  process.exit(2);
}
mkdirSync(dirname(base), { recursive: true });
const step = (m) => console.log("[waiting-page-turnstile] " + m);

const browser = await launchChromium();
let failed = false;
try {
  const context = await browser.newContext({ viewport: { width: 520, height: 720 } });
  const page = await context.newPage();
  const problems = [];
  const scripts = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  page.on("request", (r) => { if (r.resourceType() === "script") scripts.push(r.url()); });
  const before = (await (await fetch(fake + "/calls")).json()).length;
  step("her join page loads the widget, gets its token and joins with it");
  await page.goto(`${edge}/api/v1/campaigns/${campaign}/queue#token=${encodeURIComponent(token)}`,
    { waitUntil: "domcontentloaded" });
  await page.waitForFunction(() => {
    const s = document.getElementById("state").textContent;
    return s === "waiting" || s === "admitted" || s === "not joined";
  }, null, { timeout: 30000 });
  const d = await page.evaluate(() => ({ state: document.getElementById("state").textContent,
    result: document.getElementById("result").textContent,
    widget: document.getElementById("turnstile").textContent, url: location.href }));
  if (d.state === "not joined") throw new Error("the page did not join: " + d.result);
  const loaded = scripts.filter((u) => u.startsWith(fake + "/turnstile/v0/api.js?"));
  if (loaded.length !== 1) throw new Error("the widget script was not loaded from the configured URL: " + scripts.join(" "));
  if (!new URL(loaded[0]).searchParams.get("onload") || new URL(loaded[0]).searchParams.get("render") !== "explicit") {
    throw new Error("the widget script was loaded without render=explicit and onload: " + loaded[0]);
  }
  if (!d.widget.includes("site key " + siteKey)) throw new Error("the widget was not rendered with the site key: " + d.widget);
  if (!/\?ticket=[^#]+#token=/.test(d.url)) throw new Error("the address is not the ticket's page: " + d.url);
  const calls = (await (await fetch(fake + "/calls")).json()).slice(before);
  if (calls.length !== 1 || calls[0].response !== "pass" || calls[0].secret !== secret) {
    throw new Error("the edge did not verify the widget's token once with the secret: " + JSON.stringify(calls));
  }
  step(`joined (${d.state}); the edge verified the token with siteverify`);
  await page.screenshot({ path: shot });
  step("her ticket is a real one: admitted (at most 60 s)");
  await page.waitForSelector("#claim", { state: "visible", timeout: 60000 });
  if ((await page.textContent("#state")) !== "admitted") throw new Error("button shown but not admitted");
  if (problems.length) throw new Error(problems.join("; "));
  step("passed");
} catch (e) {
  failed = true;
  console.error("[waiting-page-turnstile] FAILED: " + (e && e.stack ? e.stack : e));
} finally {
  await browser.close();
}
console.log("[waiting-page-turnstile] screenshot: " + shot);
process.exit(failed ? 1 : 0);
