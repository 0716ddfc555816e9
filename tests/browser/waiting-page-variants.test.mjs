// Browser test of the waiting room's page on a campaign with variants (docs/VARIANTS.md),
// served by the edge worker in workerd in front of a real origin, in real headless Chromium.
// Run by scripts/test-waiting-page, which creates the campaign (a waiting room admitting 5
// customers per second; variants 41 "Size 41" stock 2, 42 "Size 42" stock 1, 43 "Size 43"
// stock 0) and mints two customer tokens.
// Environment:
//   FLASHGATE_EDGE_URL          the edge worker (e.g. http://127.0.0.1:8787)
//   FLASHGATE_VARIANT_CAMPAIGN  the campaign with variants
//   FLASHGATE_VARIANT_TOKENS    two customer tokens (JWT), space-separated: the page's
//                               customer, then another who buys size 42 meanwhile
//   FLASHGATE_CHROMIUM          Chromium executable (default /usr/bin/chromium)
//   FLASHGATE_SCREENSHOT        the base of the screenshots' paths (default
//                               <repo>/.dev/waiting-page.png; these end -variants.png,
//                               -variants-sold-out.png, -variants-claimed.png)
// Steps: her page lists the three sizes, 43 marked sold out and not choosable; once admitted
// the claim button asks her to choose first; the other customer is admitted and claims 42
// through the edge with his admission token; her page, polling, marks 42 sold out without a
// reload; she picks 41 and the claim names it (201 claimed, variant 41). Exits 0 when every
// step passed, 1 otherwise.
import { launchChromium } from "./chromium.mjs";
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const edge = process.env.FLASHGATE_EDGE_URL;
const campaign = process.env.FLASHGATE_VARIANT_CAMPAIGN;
const tokens = (process.env.FLASHGATE_VARIANT_TOKENS || "").split(/\s+/).filter(Boolean);
const base = resolve(process.env.FLASHGATE_SCREENSHOT || join(here, "..", "..", ".dev", "waiting-page.png"));
const shot = (suffix) => base.replace(/\.png$/, `-variants${suffix}.png`);
if (!edge || !campaign || tokens.length !== 2) {
  console.error("set FLASHGATE_EDGE_URL, FLASHGATE_VARIANT_CAMPAIGN and FLASHGATE_VARIANT_TOKENS (2)");
  process.exit(2);
}
mkdirSync(dirname(base), { recursive: true });
const step = (m) => console.log("[waiting-page-variants] " + m);
const queueUrl = `${edge}/api/v1/campaigns/${campaign}/queue`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function joinRoom(token) {
  const res = await fetch(queueUrl, { method: "POST", headers: { authorization: "Bearer " + token } });
  const body = await res.json();
  if (res.status !== 201 || !body.ticket) throw new Error(`join answered ${res.status}: ${JSON.stringify(body)}`);
  return body.ticket;
}

// Polls the room's JSON answer with `ticket` until it is admitted (at most 30 s); that answer.
async function admitted(ticket) {
  const until = Date.now() + 30000;
  for (;;) {
    const res = await fetch(queueUrl, { headers: { accept: "application/json", "flashgate-ticket": ticket } });
    const body = await res.json();
    if (res.ok && body.admitted && body.admission_token) return body;
    if (Date.now() > until) throw new Error("not admitted after 30 s: " + JSON.stringify(body));
    await sleep(300);
  }
}

// The sold-out marks of the page: variant id -> [disabled, its words].
const marks = (page) => page.$$eval('input[name="variant"]', (inputs) =>
  Object.fromEntries(inputs.map((i) => [i.value,
    [i.disabled, document.querySelector(`[data-left="${i.value}"]`).textContent]])));

const browser = await launchChromium();
let failed = false;
try {
  const [mine, other] = tokens;
  step("two customers join through the edge");
  const myTicket = await joinRoom(mine);
  const otherTicket = await joinRoom(other);
  const pageUrl = `${queueUrl}?ticket=${encodeURIComponent(myTicket)}#token=${encodeURIComponent(mine)}`;

  step("her page lists the sizes; 43 (stock 0) is sold out and cannot be chosen");
  const page = await browser.newPage({ viewport: { width: 520, height: 760 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  let navigations = 0;
  page.on("framenavigated", (f) => { if (f === page.mainFrame()) navigations += 1; });
  const r = await page.goto(pageUrl, { waitUntil: "domcontentloaded" });
  if (r.headers()["flashgate-answered-by"] !== "edge") throw new Error("the page was not answered by the edge");
  const labels = await page.$$eval("#variants label", (ls) => ls.map((l) => l.textContent.trim()));
  if (JSON.stringify(labels) !== JSON.stringify(["Size 41", "Size 42", "Size 43 sold out"])) {
    throw new Error("the sizes listed: " + JSON.stringify(labels));
  }
  let m = await marks(page);
  if (JSON.stringify(m) !== JSON.stringify({ 41: [false, ""], 42: [false, ""], 43: [true, "sold out"] })) {
    throw new Error("the first marks: " + JSON.stringify(m));
  }

  step("admitted: the claim button asks for a size first");
  await page.waitForSelector("#claim", { state: "visible", timeout: 30000 });
  await page.screenshot({ path: shot("") });
  await page.click("#claim");
  await page.waitForFunction(() => document.getElementById("result").textContent !== "", null, { timeout: 5000 });
  const first = await page.textContent("#result");
  if (first !== "choose one first") throw new Error("a claim without a size: " + first);

  step("another customer is admitted and buys the last size 42 through the edge");
  const room = await admitted(otherTicket);
  const bought = await fetch(`${edge}/api/v1/campaigns/${campaign}/claims`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer " + other,
      "idempotency-key": "other-42-" + Date.now(), "flashgate-admission": room.admission_token },
    body: JSON.stringify({ variant: "42" }),
  });
  const boughtBody = await bought.json();
  if (bought.status !== 201 || boughtBody.claim.variant !== "42") {
    throw new Error(`his claim of 42 answered ${bought.status}: ${JSON.stringify(boughtBody)}`);
  }

  step("her page marks 42 sold out by its polls, without a reload (at most 30 s)");
  await page.waitForFunction(() => document.querySelector('[data-left="42"]').textContent === "sold out",
    null, { timeout: 30000 });
  m = await marks(page);
  if (JSON.stringify(m) !== JSON.stringify({ 41: [false, ""], 42: [true, "sold out"], 43: [true, "sold out"] })) {
    throw new Error("the marks after 42 sold: " + JSON.stringify(m));
  }
  if ((await page.textContent("#state")) !== "admitted") throw new Error("no longer admitted");
  await page.screenshot({ path: shot("-sold-out") });

  step("she picks 41 and claims it: the claim names the size");
  await page.check('input[name="variant"][value="41"]');
  await page.evaluate(() => { document.getElementById("result").textContent = ""; });
  await page.click("#claim");
  await page.waitForFunction(() => document.getElementById("result").textContent !== "", null, { timeout: 15000 });
  const result = await page.textContent("#result");
  if (result !== "claimed (41)") throw new Error("her claim answered " + result);
  await page.screenshot({ path: shot("-claimed") });
  if (navigations !== 1) throw new Error(`the page reloaded (${navigations} navigations) instead of polling`);
  if (problems.length) throw new Error(problems.join("; "));
  step("passed");
} catch (e) {
  failed = true;
  console.error("[waiting-page-variants] FAILED: " + (e && e.stack ? e.stack : e));
} finally {
  await browser.close();
}
console.log("[waiting-page-variants] screenshots: " + shot("") + " " + shot("-sold-out") + " " + shot("-claimed"));
process.exit(failed ? 1 : 0);
