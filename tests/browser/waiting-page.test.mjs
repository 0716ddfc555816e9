// Browser test of the waiting room's page, served by the edge worker in workerd in front of a
// real origin, in real headless Chromium (Debian's package, driven by playwright-core). Run by
// scripts/test-waiting-page, which brings the stack up, creates a campaign with a waiting room
// (admit 1 customer per second, starting a few seconds later) and mints the customer tokens.
// Environment:
//   FLASHGATE_EDGE_URL       the edge worker (e.g. http://127.0.0.1:8787)
//   FLASHGATE_TEST_CAMPAIGN  the campaign with the waiting room
//   FLASHGATE_TEST_TOKENS    customer tokens (JWT), space-separated: the last one is the
//                            customer whose page is opened, the others join ahead of her
//   FLASHGATE_CHROMIUM       Chromium executable (default /usr/bin/chromium)
//   FLASHGATE_SCREENSHOT     where the screenshot goes (default <repo>/.dev/waiting-page.png)
// Steps: the customers join through the edge; her page (`GET …/queue?ticket=…` with
// Accept: text/html, `#token=…` in the fragment) shows her position and `waiting`; without a
// reload it refreshes itself until `admitted`, the claim button appears, and pressing it
// claims (201 "claimed"). The same page without JavaScript shows the position and carries a
// meta refresh. Exits 0 when every step passed, 1 otherwise.
import { launchChromium } from "./chromium.mjs";
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const edge = process.env.FLASHGATE_EDGE_URL;
const campaign = process.env.FLASHGATE_TEST_CAMPAIGN;
const tokens = (process.env.FLASHGATE_TEST_TOKENS || "").split(/\s+/).filter(Boolean);
const shot = resolve(process.env.FLASHGATE_SCREENSHOT || join(here, "..", "..", ".dev", "waiting-page.png"));
if (!edge || !campaign || tokens.length < 2) {
  console.error("set FLASHGATE_EDGE_URL, FLASHGATE_TEST_CAMPAIGN and FLASHGATE_TEST_TOKENS (2 or more)");
  process.exit(2);
}
mkdirSync(dirname(shot), { recursive: true });
const step = (m) => console.log("[waiting-page] " + m);
const queueUrl = `${edge}/api/v1/campaigns/${campaign}/queue`;

const browser = await launchChromium();
let failed = false;
try {
  step(`${tokens.length} customers join through the edge`);
  let mine;
  for (const token of tokens) {
    const res = await fetch(queueUrl, { method: "POST", headers: { authorization: "Bearer " + token } });
    const body = await res.json();
    if (res.status !== 201 || !body.ticket) throw new Error(`join answered ${res.status}: ${JSON.stringify(body)}`);
    mine = { token, ...body };
  }
  const pageUrl = `${queueUrl}?ticket=${encodeURIComponent(mine.ticket)}#token=${encodeURIComponent(mine.token)}`;

  step("no JavaScript: the position is there, and a meta refresh");
  const plain = await browser.newContext({ javaScriptEnabled: false });
  const p0 = await plain.newPage();
  const r0 = await p0.goto(pageUrl, { waitUntil: "domcontentloaded" });
  if (r0.status() !== 200) throw new Error("the page answered " + r0.status());
  if (r0.headers()["flashgate-answered-by"] !== "edge") throw new Error("the page was not answered by the edge");
  const html = await r0.text();
  if (!/<noscript><meta http-equiv="refresh" content="\d+;url=/.test(html)) {
    throw new Error("no meta refresh in <noscript>");
  }
  if (/<(script|link|img)[^>]+(src|href)=/.test(html)) throw new Error("the page loads an external asset");
  const pos0 = Number(await p0.textContent("#position"));
  if (!(pos0 >= 1)) throw new Error("no position without JavaScript: " + pos0);
  await plain.close();

  step("with JavaScript: position and state shown, no claim button yet");
  const page = await browser.newPage({ viewport: { width: 520, height: 640 } });
  const problems = [];
  page.on("pageerror", (e) => problems.push("page error: " + e.message));
  let navigations = 0;
  page.on("framenavigated", (f) => { if (f === page.mainFrame()) navigations += 1; });
  await page.goto(pageUrl, { waitUntil: "domcontentloaded" });
  const firstState = await page.textContent("#state");
  const firstPos = Number(await page.textContent("#position"));
  step(`shown: position ${firstPos}, state ${firstState}`);
  if (firstState !== "waiting" || !(firstPos >= 1)) {
    throw new Error(`expected waiting at a position >= 1, got ${firstState} at ${firstPos}`);
  }
  if (await page.isVisible("#claim")) throw new Error("claim button visible before admission");
  await page.screenshot({ path: shot.replace(/\.png$/, "-waiting.png") });

  step("the page refreshes itself until admitted (at most 60 s)");
  await page.waitForSelector("#claim", { state: "visible", timeout: 60000 });
  if ((await page.textContent("#state")) !== "admitted") throw new Error("button shown but not admitted");
  if (Number(await page.textContent("#position")) !== 0) throw new Error("admitted at a position other than 0");
  if (navigations !== 1) throw new Error(`the page reloaded (${navigations} navigations) instead of polling`);
  await page.screenshot({ path: shot });

  step("press claim: the claim goes through with the admission token");
  await page.click("#claim");
  await page.waitForFunction(() => document.getElementById("result").textContent !== "", null, { timeout: 15000 });
  const result = await page.textContent("#result");
  if (result !== "claimed") throw new Error("the claim answered " + result);
  if (problems.length) throw new Error(problems.join("; "));
  step("passed");
} catch (e) {
  failed = true;
  console.error("[waiting-page] FAILED: " + (e && e.stack ? e.stack : e));
} finally {
  await browser.close();
}
console.log("[waiting-page] screenshot: " + shot);
process.exit(failed ? 1 : 0);
