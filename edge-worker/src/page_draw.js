// The draw page's script (included by edge-worker/src/page_draw.rs; docs/DRAWS.md). Its
// setting is the card's data-campaign (#draw); the customer token is the fragment's `token`.
// It polls the draw's public status every POLL_S seconds until drawn (a cacheable answer),
// reads her entry once she has one, and after the draw keeps reading it (less often) only
// while she is on the waitlist (a lapsed winner's unit may pass to her). The card's
// data-state and data-outcome mirror what it shows.
(() => {
  const POLL_S = 5, WAITLIST_POLL_S = 15;
  const $ = (id) => document.getElementById(id);
  const card = $("draw");
  const base = "/api/v1/campaigns/" + card.dataset.campaign + "/draw";
  const token = new URLSearchParams(location.hash.slice(1)).get("token");
  const auth = token ? { authorization: "Bearer " + token } : {};
  const when = (t) => (t ? String(t).replace("T", " ").replace("Z", " UTC") : "");
  let mine = null, admission = "", seen = "";

  function text(id, t) { $(id).textContent = t; }
  // What the page shows, from the draw's status `d` and her entry `m` (null: none).
  function show(d, m) {
    card.dataset.state = d.state;
    card.dataset.outcome = m ? m.outcome : "none";
    text("state", d.state);
    text("commitment", d.commitment);
    text("window", "Entries " + when(d.entries_open_at) + " – " + when(d.entries_close_at) +
      "; winners may buy for " + Math.round(d.buying_window_seconds / 3600 * 10) / 10 + " h.");
    if (m) {
      $("receipt").hidden = false;
      text("entry-id", m.receipt.entry_id);
      text("entered-at", when(m.receipt.entered_at));
    }
    $("enter").hidden = !(d.state === "open" && !m && token);
    let headline = "", detail = "";
    if (d.state === "scheduled") {
      headline = "Entries open soon";
      detail = "Entries open at " + when(d.entries_open_at) + ".";
    } else if (d.state === "open" || d.state === "closed") {
      if (m) {
        headline = "You are in the draw";
        detail = "The draw runs at " + when(d.entries_close_at) + ". Keep your receipt.";
      } else if (d.state === "open") {
        headline = "Entries are open";
        detail = token ? "Enter before " + when(d.entries_close_at) + "."
          : "Open this page from the shop to enter.";
      } else {
        headline = "Entries are closed";
        detail = "The draw is about to run.";
      }
    }
    const r = d.result;
    if (r) {
      text("seed", r.seed);
      text("digest", r.entries_digest);
      text("entries", r.entry_count + " entries, " + r.winners.length + " winners, " +
        r.waitlist.length + " on the waitlist; drawn at " + when(d.drawn_at));
      if (!m) {
        headline = "Drawn";
        detail = "You did not enter this draw.";
      } else if (m.outcome === "won") {
        headline = "You won!";
        detail = "Place " + m.place + " of " + r.entry_count + ". Buy before " +
          when(m.buying_until) + ".";
      } else if (m.outcome === "waitlisted") {
        headline = "Not drawn: waitlist position " + (m.place - r.stock) + " of " + r.waitlist.length;
        detail = "A winner who does not buy in time passes her unit down the waitlist. " +
          "Keep this page open: it keeps checking.";
      } else if (m.outcome === "lapsed") {
        headline = "Your buying window ended";
        detail = "Your unit passed to the next on the waitlist.";
      } else {
        headline = "You are in the draw";
        detail = "The result is on its way.";
      }
    }
    text("headline", headline);
    text("detail", detail);
    admission = (m && m.admission) || "";
    $("claim").dataset.admission = admission;
    $("claim").style.display = m && m.outcome === "won" ? "inline-block" : "none";
  }
  async function json(url, init) {
    const r = await fetch(url, init);
    let body = null;
    try { body = await r.json(); } catch (e) {}
    return { status: r.status, body };
  }
  async function readMine() {
    if (!token) return null;
    const a = await json(base + "/entries/mine", { headers: { accept: "application/json", ...auth } });
    if (a.status === 200) return a.body;
    if (a.status !== 404) text("result", (a.body && a.body.message) || "your entry: " + a.status);
    return null;
  }
  async function poll() {
    let again = POLL_S;
    try {
      const a = await json(base, { headers: { accept: "application/json" } });
      if (a.status !== 200) {
        text("state", "unavailable");
        text("result", (a.body && a.body.message) || "the draw answered " + a.status);
        if (a.status === 404 || a.status === 409) return;
      } else {
        const d = a.body;
        // Her entry is read once at the start and at the draw; then only while waitlisted.
        const drawnNow = d.state === "drawn" && seen !== "drawn";
        if (!seen || drawnNow || (d.state === "drawn" && mine && mine.outcome === "waitlisted")) {
          mine = (await readMine()) || mine;
        }
        seen = d.state;
        show(d, mine);
        if (d.state === "drawn") {
          if (!mine || mine.outcome !== "waitlisted") return;
          again = WAITLIST_POLL_S;
        }
      }
    } catch (e) {}
    setTimeout(poll, again * 1000);
  }
  $("enter").addEventListener("click", async () => {
    $("enter").disabled = true;
    const a = await json(base + "/entries", { method: "POST", body: "{}",
      headers: { "content-type": "application/json", ...auth } });
    $("enter").disabled = false;
    if (a.status === 200 || a.status === 201) {
      mine = { receipt: a.body, outcome: "entered" };
      text("result", "");
      const d = await json(base, { headers: { accept: "application/json" } });
      if (d.status === 200) show(d.body, mine);
    } else {
      text("result", (a.body && a.body.message) || "the entry answered " + a.status);
    }
  });
  $("claim").addEventListener("click", async () => {
    const key = "draw-" + (mine ? mine.receipt.entry_id : "x");
    const a = await json("/api/v1/campaigns/" + card.dataset.campaign + "/claims", {
      method: "POST", body: "{}",
      headers: { "content-type": "application/json", "idempotency-key": key,
        "flashgate-admission": admission, ...auth },
    });
    text("result", a.body ? a.body.result : "the claim answered " + a.status);
  });
  poll();
})();
