// Browser test of the waiting room's join page on a campaign with a proof-of-work challenge
// (docs/ACCESS.md), served by the edge worker in workerd in front of a real origin, in real
// headless Chromium. Run by scripts/test-waiting-page after waiting-page.test.mjs, which
// creates the campaign (`challenge: "pow"` at the default difficulty) and mints the tokens.
// Environment:
//   FLASHGATE_EDGE_URL        the edge worker (e.g. http://127.0.0.1:8787)
//   FLASHGATE_POW_CAMPAIGN    the campaign with the pow challenge
//   FLASHGATE_POW_TOKENS      customer tokens (JWT), space-separated: one page load each
//   FLASHGATE_CHROMIUM        Chromium executable (default /usr/bin/chromium)
//   FLASHGATE_SCREENSHOT      the base of the screenshots' paths (default
//                             <repo>/.dev/waiting-page.png; these end -pow-checking.png, -pow.png)
// Steps: without JavaScript the join page says it needs it and neither joins nor refreshes;
// with it, each customer's page (`GET …/queue`, no ticket, `#token=…`) fetches a challenge,
// solves it in a Web Worker ("Checking your browser…"), joins with the solution and shows her
// place; every ticket is admitted later (an infinite-queue ticket never would be). Prints each
// solve time and their median. Exits 0 when every step passed, 1 otherwise.
import { launchChromium } from "./chromium.mjs";
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const edge = process.env.FLASHGATE_EDGE_URL;
const campaign = process.env.FLASHGATE_POW_CAMPAIGN;
const tokens = (process.env.FLASHGATE_POW_TOKENS || "").split(/\s+/).filter(Boolean);
const base = resolve(process.env.FLASHGATE_SCREENSHOT || join(here, "..", "..", ".dev", "waiting-page.png"));
const checkingShot = base.replace(/\.png$/, "-pow-checking.png");
const joinedShot = base.replace(/\.png$/, "-pow.png");
if (!edge || !campaign || tokens.length < 1) {
  console.error("set FLASHGATE_EDGE_URL, FLASHGATE_POW_CAMPAIGN and FLASHGATE_POW_TOKENS");
  process.exit(2);
}
mkdirSync(dirname(base), { recursive: true });
const step = (m) => console.log("[waiting-page-pow] " + m);
const queueUrl = `${edge}/api/v1/campaigns/${campaign}/queue`;
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const browser = await launchChromium();
let failed = false;
try {
  step("no JavaScript: the join page says it needs it, and does not refresh");
  const plain = await browser.newContext({ javaScriptEnabled: false });
  const p0 = await plain.newPage();
  const r0 = await p0.goto(`${queueUrl}#token=${encodeURIComponent(tokens[0])}`, { waitUntil: "domcontentloaded" });
  if (r0.status() !== 200) throw new Error("the join page answered " + r0.status());
  if (r0.headers()["flashgate-answered-by"] !== "edge") throw new Error("the join page was not answered by the edge");
  const html = await r0.text();
  if (!html.includes("Joining the line needs JavaScript")) throw new Error("no word for a browser without JavaScript");
  if (html.includes("http-equiv")) throw new Error("the join page refreshes itself");
  if (/<(script|link|img)[^>]+(src|href)=/.test(html)) throw new Error("the page loads an external asset");
  // (Playwright turns script execution off without the parser's scripting flag, so Chromium
  // does not render <noscript> here: the words are checked in the HTML above.)
  if ((await p0.textContent("#state")) !== "joining") throw new Error("the join page's state is not joining");
  await plain.close();

  const solves = [];
  const pages = [];
  for (const [i, token] of tokens.entries()) {
    const context = await browser.newContext({ viewport: { width: 520, height: 720 } });
    const page = await context.newPage();
    const problems = [];
    const logged = [];
    page.on("pageerror", (e) => problems.push("page error: " + e.message));
    page.on("console", (m) => { if (m.text().startsWith("flashgate pow:")) logged.push(m.text()); });
    // The longest the page's own thread went without running a timer (every 20 ms) while the
    // page checked: a solve on that thread would show as a gap as long as the solve.
    await page.addInitScript(() => {
      let last = performance.now();
      window.__fgGap = 0;
      setInterval(() => {
        const now = performance.now();
        window.__fgGap = Math.max(window.__fgGap, now - last);
        last = now;
      }, 20);
    });
    if (i === 0) {
      // The first customer's challenge is held back 1.5 s, so that the screenshot catches
      // "Checking your browser…" (the solve is timed from the challenge's arrival).
      await page.route("**/queue/challenge", async (route) => {
        await new Promise((r) => setTimeout(r, 1500));
        await route.continue();
      });
    }
    await page.goto(`${queueUrl}#token=${encodeURIComponent(token)}`, { waitUntil: "domcontentloaded" });
    if (i === 0) {
      await page.waitForSelector("#check", { state: "visible", timeout: 10000 });
      if ((await page.textContent("#state")) !== "checking") throw new Error("not checking while the challenge is on its way");
      await page.screenshot({ path: checkingShot });
    }
    await page.waitForFunction(() => {
      const s = document.getElementById("state").textContent;
      return s === "waiting" || s === "admitted" || s === "not joined";
    }, null, { timeout: 120000 });
    const d = await page.evaluate(() => ({ ...document.getElementById("check").dataset,
      state: document.getElementById("state").textContent,
      position: document.getElementById("position").textContent,
      result: document.getElementById("result").textContent,
      url: location.href, gap: Math.round(window.__fgGap) }));
    if (d.state === "not joined") throw new Error("the page did not join: " + d.result);
    if (d.difficulty !== "18") throw new Error("expected the default difficulty 18, got " + d.difficulty);
    if (d.solver !== "worker") throw new Error("the page solved on its own thread (" + d.solver + "), not in a Worker");
    if (!(Number(d.position) >= 1) && d.state !== "admitted") throw new Error("no place in line: " + d.position);
    if (!/\?ticket=[^#]+#token=/.test(d.url)) throw new Error("the address is not the ticket's page: " + d.url);
    if (logged.length !== 1) throw new Error("expected one console line of the solve, got " + logged.length);
    solves.push({ ms: Number(d.solveMs), hashes: Number(d.hashes) });
    step(`customer ${i + 1}: solved in ${d.solveMs} ms (${d.hashes} hashes, ${d.solver}; the page's longest timer gap ${d.gap} ms), ` +
      `joined: ${d.state} at position ${d.position}`);
    if (i === 0) await page.screenshot({ path: joinedShot });
    if (problems.length) throw new Error(problems.join("; "));
    pages.push(page);
  }
  const ms = solves.map((s) => s.ms);
  step(`median solve time at difficulty 18: ${median(ms)} ms over ${ms.length} page loads ` +
    `(min ${Math.min(...ms)}, max ${Math.max(...ms)}; median ${median(solves.map((s) => s.hashes))} hashes)`);
  const hashes = solves.reduce((a, s) => a + s.hashes, 0);
  const rate = Math.round(hashes / ms.reduce((a, m) => a + m, 0) * 1000);
  // A solve takes a geometric number of tries: median ln 2 × 2^18 ≈ 181,700 at this rate.
  step(`hash rate ${rate} hashes/s (all hashes / all solve time); expected median solve ` +
    `${Math.round(Math.LN2 * 2 ** 18 / rate * 1000)} ms at that rate`);

  step("every page's ticket is a real one: each is admitted (at most 60 s)");
  for (const page of pages) {
    await page.waitForSelector("#claim", { state: "visible", timeout: 60000 });
    if ((await page.textContent("#state")) !== "admitted") throw new Error("button shown but not admitted");
  }
  step("passed");
} catch (e) {
  failed = true;
  console.error("[waiting-page-pow] FAILED: " + (e && e.stack ? e.stack : e));
} finally {
  await browser.close();
}
console.log("[waiting-page-pow] screenshots: " + checkingShot + " " + joinedShot);
process.exit(failed ? 1 : 0);
