// Browser test of the draw's page (docs/DRAWS.md), served by the edge worker in workerd in front
// of a real origin, in real headless Chromium. Run by scripts/test-waiting-page, which mints the
// tokens; the test creates the draw campaign (stock 1, entries opening 5 s later). Environment:
//   FLASHGATE_EDGE_URL, FLASHGATE_ORIGIN_URL, FLASHGATE_ADMIN_TOKEN   the stack
//   FLASHGATE_DRAW_CAMPAIGN   the draw campaign's id (not created yet)
//   FLASHGATE_DRAW_TOKENS     customer tokens (JWT), space-separated: all but the last enter
//                             through their pages; the last one does not enter
//   FLASHGATE_CHROMIUM        Chromium executable (default /usr/bin/chromium)
//   FLASHGATE_SCREENSHOT      the base of the screenshots' paths (default
//                             <repo>/.dev/waiting-page.png; these end -draw-<step>.png)
// Steps: the first page (`GET …/draw`, `#token=…`) shows `scheduled` and the commitment the
// origin publishes; once entries open it offers the button; each entrant enters through her
// page and sees the receipt the origin holds for her; a manager runs the draw; every page then
// shows the origin's outcome for its customer (won with the claim button, the waitlist position,
// or not entered) and the reveal (seed, digest); the winner's button claims (201 "claimed");
// the managers' dashboard (/admin at the origin) shows the draw's counts and commitment.
// Exits 0 when every step passed, 1 otherwise.
import { launchChromium } from "./chromium.mjs";
import { mkdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const { FLASHGATE_EDGE_URL: edge, FLASHGATE_ORIGIN_URL: origin, FLASHGATE_ADMIN_TOKEN: admin } = process.env;
const campaign = process.env.FLASHGATE_DRAW_CAMPAIGN;
const tokens = (process.env.FLASHGATE_DRAW_TOKENS || "").split(/\s+/).filter(Boolean);
const base = resolve(process.env.FLASHGATE_SCREENSHOT || join(here, "..", "..", ".dev", "waiting-page.png"));
const shot = (name) => base.replace(/\.png$/, `-draw-${name}.png`);
if (!edge || !origin || !admin || !campaign || tokens.length < 3) {
  console.error("set FLASHGATE_EDGE_URL, FLASHGATE_ORIGIN_URL, FLASHGATE_ADMIN_TOKEN, " +
    "FLASHGATE_DRAW_CAMPAIGN and FLASHGATE_DRAW_TOKENS (3 or more)");
  process.exit(2);
}
mkdirSync(dirname(base), { recursive: true });
const step = (m) => console.log("[waiting-page-draw] " + m);
const drawUrl = `${edge}/api/v1/campaigns/${campaign}/draw`;
const subOf = (t) => JSON.parse(Buffer.from(t.split(".")[1], "base64url").toString()).sub;
const expect = (what, got, want) => {
  if (got !== want) throw new Error(`${what}: the page shows ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`);
};
async function api(url, init = {}) {
  const r = await fetch(url, init);
  const body = await r.json();
  if (!r.ok) throw new Error(`${init.method || "GET"} ${url}: ${r.status} ${JSON.stringify(body)}`);
  return body;
}
const mine = (token) => api(`${drawUrl}/entries/mine`, { headers: { authorization: "Bearer " + token } });
const card = (page) => page.evaluate(() => {
  const t = (id) => document.getElementById(id).textContent;
  const d = document.getElementById("draw").dataset;
  return { state: d.state, outcome: d.outcome, headline: t("headline"), detail: t("detail"),
    commitment: t("commitment"), seed: t("seed"), digest: t("digest"), entryId: t("entry-id"),
    result: t("result"),
    claim: getComputedStyle(document.getElementById("claim")).display !== "none" };
});

const browser = await launchChromium();
let failed = false;
try {
  step("creating the draw campaign: stock 1, entries open in 5 s for 30 min");
  const at = (s) => new Date(Date.now() + s * 1000).toISOString().replace(/\.\d+Z$/, "Z");
  await api(`${origin}/admin/v1/campaigns`, { method: "POST",
    headers: { authorization: "Bearer " + admin, "content-type": "application/json" },
    body: JSON.stringify({ id: campaign, name: "Waiting page draw test", kind: "sale", stock: 1,
      starts_at: at(0), ends_at: at(3600), access: "draw",
      draw: { entries_open_at: at(5), entries_close_at: at(1800) } }) });
  const pages = [];
  for (const token of tokens) {
    const context = await browser.newContext({ viewport: { width: 520, height: 860 } });
    const page = await context.newPage();
    const problems = [];
    page.on("pageerror", (e) => problems.push("page error: " + e.message));
    const r = await page.goto(`${drawUrl}#token=${encodeURIComponent(token)}`, { waitUntil: "domcontentloaded" });
    if (r.status() !== 200) throw new Error("the draw page answered " + r.status());
    if (r.headers()["flashgate-answered-by"] !== "edge") throw new Error("the draw page was not answered by the edge");
    if (/<(script|link|img)[^>]+(src|href)=/.test(await r.text())) throw new Error("the page loads an external asset");
    pages.push({ page, token, sub: subOf(token), problems });
  }
  const first = pages[0].page;
  const status = await api(drawUrl);
  if (status.state === "scheduled") {
    step("before the entry window: `scheduled`, the commitment, no button");
    await first.waitForFunction(() => document.getElementById("draw").dataset.state === "scheduled");
    const c = await card(first);
    expect("the commitment", c.commitment, status.commitment);
    expect("the headline", c.headline, "Entries open soon");
    if (await first.isVisible("#enter")) throw new Error("an enter button before the window opens");
    await first.screenshot({ path: shot("scheduled") });
  } else {
    step(`the draw is already ${status.state}: no screenshot of the scheduled state`);
  }

  step("the entry window opens (at most 30 s): each entrant enters through her page");
  const entrants = pages.slice(0, -1);
  for (const [i, p] of entrants.entries()) {
    await p.page.waitForSelector("#enter", { state: "visible", timeout: 30000 });
    expect("the headline", (await card(p.page)).headline, "Entries are open");
    if (i === 0) await p.page.screenshot({ path: shot("open") });
    await p.page.click("#enter");
    await p.page.waitForSelector("#receipt", { state: "visible", timeout: 10000 });
    const c = await card(p.page);
    const m = await mine(p.token);
    expect("the receipt", c.entryId, m.receipt.entry_id);
    expect("the outcome", c.outcome, "entered");
    expect("the headline", c.headline, "You are in the draw");
    if (await p.page.isVisible("#enter")) throw new Error("the enter button stays after the entry");
    if (i === 0) await p.page.screenshot({ path: shot("entered") });
  }
  const outsider = pages[pages.length - 1];
  expect("the outsider's outcome", (await card(outsider.page)).outcome, "none");

  step("a manager runs the draw; every page shows the origin's result");
  const drawn = await api(`${origin}/admin/v1/campaigns/${campaign}/draw/run`, {
    method: "POST", headers: { authorization: "Bearer " + admin } });
  const r = drawn.result;
  if (r.winners.length !== 1 || r.entry_count !== entrants.length) throw new Error("unexpected draw: " + JSON.stringify(r));
  for (const p of pages) {
    await p.page.waitForFunction(() => {
      const d = document.getElementById("draw").dataset;
      return d.state === "drawn" && d.outcome !== "entered";
    }, null, { timeout: 30000 });
    const c = await card(p.page);
    expect("the seed", c.seed, r.seed);
    expect("the entry list digest", c.digest, r.entries_digest);
    expect("the commitment", c.commitment, r.commitment);
    if (p === outsider) {
      expect("the outsider's outcome", c.outcome, "none");
      expect("the outsider's detail", c.detail, "You did not enter this draw.");
      continue;
    }
    const m = await mine(p.token);
    expect("the outcome of " + p.sub, c.outcome, m.outcome);
    if (m.outcome === "won") {
      if (r.winners[0] !== p.sub) throw new Error(`${p.sub} won on the page, the result names ${r.winners[0]}`);
      expect("the headline", c.headline, "You won!");
      if (!c.claim) throw new Error("no claim button for the winner");
      if (!c.detail.includes(m.buying_until.replace("T", " ").replace("Z", " UTC"))) {
        throw new Error(`the buying window ${m.buying_until} is not shown: ${c.detail}`);
      }
      p.won = true;
    } else {
      const k = r.waitlist.indexOf(p.sub) + 1;
      if (k < 1) throw new Error(`${p.sub} is neither a winner nor on the waitlist`);
      expect("the outcome of " + p.sub, m.outcome, "waitlisted");
      expect("the headline", c.headline, `Not drawn: waitlist position ${k} of ${r.waitlist.length}`);
      if (c.claim) throw new Error("a claim button on the waitlist");
      if (k === 1) await p.page.screenshot({ path: shot("waitlist") });
    }
  }
  step("the winner's button claims with her admission");
  const winner = pages.find((p) => p.won);
  if (!winner) throw new Error("no page shows the winner");
  await winner.page.click("#claim");
  await winner.page.waitForFunction(() => document.getElementById("result").textContent !== "", null, { timeout: 10000 });
  expect("the claim's answer", (await card(winner.page)).result, "claimed");
  await winner.page.screenshot({ path: shot("won") });
  await outsider.page.screenshot({ path: shot("not-entered") });
  for (const p of pages) if (p.problems.length) throw new Error(p.problems.join("; "));

  step("the managers' dashboard shows the draw: entries, winners, waitlist, claims, commitment");
  const want = await api(`${origin}/admin/v1/campaigns/${campaign}/draw`, { headers: { authorization: "Bearer " + admin } });
  if (want.entries !== entrants.length || want.winners !== 1 || want.claimed !== 1 || want.waitlist !== entrants.length - 1) {
    throw new Error("unexpected counts from the admin API: " + JSON.stringify(want));
  }
  const dash = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  await dash.goto(`${origin}/admin`);
  await dash.fill("#token", admin);
  await dash.click("#token-use");
  await dash.fill("#filter-name", campaign);
  await dash.click(`tr[data-campaign="${campaign}"] td.campaign`);
  await dash.waitForFunction(() => document.getElementById("draw-panel").dataset.claimed === "1", null, { timeout: 15000 });
  const panel = await dash.evaluate(() => ({ ...document.getElementById("draw-panel").dataset,
    text: document.getElementById("draw-facts").textContent }));
  for (const [k, v] of [["entries", want.entries], ["winners", want.winners], ["waitlist", want.waitlist],
    ["admitted", want.admitted], ["claimed", want.claimed], ["lapsed", want.lapsed]]) {
    expect("the dashboard's " + k, panel[k], String(v));
  }
  expect("the dashboard's commitment", panel.commitment, r.commitment);
  if (!panel.text.includes(r.commitment)) throw new Error("the commitment is not shown: " + panel.text);
  await dash.screenshot({ path: shot("dashboard") });
  step("passed");
} catch (e) {
  failed = true;
  console.error("[waiting-page-draw] FAILED: " + (e && e.stack ? e.stack : e));
} finally {
  await browser.close();
}
console.log("[waiting-page-draw] screenshots: " + ["scheduled", "open", "entered", "waitlist", "won", "not-entered", "dashboard"].map(shot).join(" "));
process.exit(failed ? 1 : 0);
