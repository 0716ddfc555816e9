// The waiting page's script (included by edge-worker/src/page.rs). Its settings are the data
// attributes of the card (#room): the campaign, the ticket (empty on the join page), the first
// Retry-After, and on the join page the campaign's challenge and difficulty (and for a
// Turnstile challenge the site key and the widget script's URL).
(() => {
  const $ = (id) => document.getElementById(id);
  const room = $("room").dataset;
  const base = "/api/v1/campaigns/" + room.campaign + "/queue";
  const fragment = new URLSearchParams(location.hash.slice(1));
  let ticket = room.ticket;
  let admission = $("claim").dataset.admission;
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  function show(s) {
    $("position").textContent = s.position;
    $("eta").textContent = s.eta_seconds;
    $("state").textContent = s.state;
    $("outlook").textContent = s.outlook || "";
    $("note").textContent = s.outlook === "may_return"
      ? "Sold out for now, but units held by others may come back until " + s.held_until +
        ". Keep this page open: it keeps checking."
      : (s.outlook === "final" ? "Sold out: nothing will come back." : "");
    admission = s.admission_token || admission;
    for (const v of s.variants || []) {
      const input = document.querySelector('input[name="variant"][value="' + v.id + '"]');
      if (!input) continue;
      const sold = v.state === "sold_out" || v.remaining <= 0;
      input.disabled = sold;
      if (sold) input.checked = false;
      document.querySelector('[data-left="' + v.id + '"]').textContent = sold ? "sold out" : "";
    }
    $("claim").style.display = s.admitted ? "inline-block" : "none";
  }
  async function poll() {
    let wait = 5;
    try {
      const r = await fetch(base + "?ticket=" + encodeURIComponent(ticket),
        { headers: { accept: "application/json", "flashgate-ticket": ticket } });
      wait = Number(r.headers.get("retry-after")) || wait;
      if (r.ok) {
        const s = await r.json();
        show(s);
        const more = s.state === "sold_out" && s.outlook === "may_return";
        if (!more && (s.state === "sold_out" || s.state === "ended" || s.state === "lapsed")) return;
      }
    } catch (e) {}
    setTimeout(poll, wait * 1000);
  }
  $("claim").addEventListener("click", async () => {
    const token = fragment.get("token");
    if (!token) { $("result").textContent = "open this page from the shop to claim"; return; }
    const picker = $("variants");
    const picked = picker && document.querySelector('input[name="variant"]:checked');
    if (picker && !picked) { $("result").textContent = "choose one first"; return; }
    // One key per variant: a retry of the same choice replays, another choice is a new claim.
    const key = "page-" + ticket.slice(-16) + (picked ? "-" + picked.value : "");
    const r = await fetch("/api/v1/campaigns/" + room.campaign + "/claims", {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer " + token,
        "idempotency-key": key, "flashgate-admission": admission },
      body: picked ? JSON.stringify({ variant: picked.value }) : "{}",
    });
    const a = await r.json();
    // The variant named: a sold-out one's, or the claim's (hers, also on already_claimed).
    const named = a.variant || (a.claim && a.claim.variant);
    $("result").textContent = a.result + (named ? " (" + named + ")" : "");
  });

  // The proof of work (docs/ACCESS.md): SHA-256 of `challenge + ":" + n` with `difficulty`
  // leading zero bits. The blocks of `challenge + ":"` that no counter touches are hashed
  // once (the midstate); each try hashes only the last one or two blocks. Self-contained, so
  // that a Worker runs it from its source text.
  function powSolver(challenge, difficulty) {
    const K = new Int32Array([
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2]);
    const W = new Int32Array(64);
    const H = new Int32Array(8);
    function compress(h, b, o) {
      for (let i = 0; i < 16; i++, o += 4) W[i] = (b[o] << 24) | (b[o + 1] << 16) | (b[o + 2] << 8) | b[o + 3];
      for (let i = 16; i < 64; i++) {
        const x = W[i - 15], y = W[i - 2];
        const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
        const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
        W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
      }
      let a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
      for (let i = 0; i < 64; i++) {
        const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
        const t1 = (hh + S1 + ((e & f) ^ (~e & g)) + K[i] + W[i]) | 0;
        const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
        const t2 = (S0 + ((a & bb) ^ (a & c) ^ (bb & c))) | 0;
        hh = g; g = f; f = e; e = (d + t1) | 0; d = c; c = bb; bb = a; a = (t1 + t2) | 0;
      }
      h[0] = (h[0] + a) | 0; h[1] = (h[1] + bb) | 0; h[2] = (h[2] + c) | 0; h[3] = (h[3] + d) | 0;
      h[4] = (h[4] + e) | 0; h[5] = (h[5] + f) | 0; h[6] = (h[6] + g) | 0; h[7] = (h[7] + hh) | 0;
    }
    const prefix = Array.from(challenge + ":", (ch) => ch.charCodeAt(0) & 0xff);
    const mid = new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
      0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
    const whole = prefix.length - (prefix.length % 64);
    const block = new Uint8Array(128);
    for (let o = 0; o < whole; o += 64) {
      block.set(prefix.slice(o, o + 64));
      compress(mid, block, 0);
    }
    const rest = prefix.length - whole;
    block.fill(0);
    block.set(prefix.slice(whole));
    let width = 0, blocks = 1;
    function zeroBits() {
      let n = 0;
      for (let i = 0; i < 8; i++) {
        const z = Math.clz32(H[i]);
        n += z;
        if (z < 32) break;
      }
      return n;
    }
    // Tries counters start..start+count-1; the solution, or -1.
    return function tries(start, count) {
      for (let n = start; n < start + count; n++) {
        const digits = String(n);
        if (digits.length !== width) {
          width = digits.length;
          const t = rest + width;
          blocks = t + 9 <= 64 ? 1 : 2;
          block.fill(0, rest);
          block[t] = 0x80;
          const bits = (whole + t) * 8, end = blocks * 64;
          block[end - 4] = bits >>> 24; block[end - 3] = bits >>> 16;
          block[end - 2] = bits >>> 8; block[end - 1] = bits;
        }
        for (let i = 0; i < width; i++) block[rest + i] = digits.charCodeAt(i);
        H.set(mid);
        compress(H, block, 0);
        if (blocks === 2) compress(H, block, 64);
        if (zeroBits() >= difficulty) return n;
      }
      return -1;
    };
  }
  const SLICE = 1 << 14;
  // A Worker built from a Blob that solves what it is sent; started (and its compiler warmed
  // on a throwaway challenge) while the challenge is on its way. Null without Workers.
  function startWorker() {
    try {
      const code = powSolver.toString() + "\nonmessage = (e) => {\n" +
        "  const t = powSolver(e.data.challenge, e.data.difficulty);\n" +
        "  if (e.data.warm) { t(0, " + SLICE + "); return; }\n" +
        "  for (let n = 0; ; n += " + SLICE + ") {\n" +
        "    const s = t(n, " + SLICE + ");\n" +
        "    if (s >= 0) { postMessage({ solution: s }); return; }\n" +
        "    postMessage({ tried: n + " + SLICE + " });\n  }\n};\n";
      const url = URL.createObjectURL(new Blob([code], { type: "text/javascript" }));
      const w = new Worker(url);
      URL.revokeObjectURL(url);
      w.postMessage({ challenge: "warm-up", difficulty: 32, warm: true });
      return w;
    } catch (e) { return null; }
  }
  // Solves in Worker `w` (the page stays responsive); without one, in slices on the page's
  // thread that yield to the event loop between them.
  function solve(w, challenge, difficulty, progress) {
    return new Promise((resolve, reject) => {
      if (w) {
        w.onmessage = (e) => {
          if (e.data.solution === undefined) { progress(e.data.tried); return; }
          resolve({ solution: e.data.solution, solver: "worker" });
        };
        w.onerror = (e) => { e.preventDefault(); inline().then(resolve, reject); };
        w.postMessage({ challenge, difficulty });
      } else {
        inline().then(resolve, reject);
      }
    });
    async function inline() {
      const t = powSolver(challenge, difficulty);
      for (let n = 0; ; n += SLICE) {
        const s = t(n, SLICE);
        if (s >= 0) return { solution: s, solver: "page" };
        progress(n + SLICE);
        await sleep(0);
      }
    }
  }
  // Calls `send` until it answers other than 429, waiting each Retry-After.
  async function patiently(send) {
    for (;;) {
      const r = await send();
      if (r.status !== 429) return r;
      await sleep((Number(r.headers.get("retry-after")) || 1) * 1000);
    }
  }
  // "Checking your browser…": the join's {challenge, solution}, with a Worker of its own.
  async function proofOfWork(token) {
    const check = $("check");
    check.hidden = false;
    $("state").textContent = "checking";
    const w = startWorker();
    try {
      return await solved(token, w);
    } finally {
      if (w) w.terminate();
    }
  }
  // Fetches a challenge, solves it while showing the odds of being done, and returns the
  // join's {challenge, solution}; a challenge that expired meanwhile is fetched again.
  async function solved(token, w) {
    const check = $("check");
    for (;;) {
      const r = await patiently(() => fetch(base + "/challenge",
        { headers: { accept: "application/json", authorization: "Bearer " + token } }));
      if (!r.ok) throw new Error("the challenge answered " + r.status);
      const c = await r.json();
      const started = performance.now();
      const done = await solve(w, c.challenge, c.difficulty, (tried) => {
        // The chance a solution is found within this many tries.
        $("progress").value = 1 - Math.exp(-tried / 2 ** c.difficulty);
      });
      const ms = Math.round(performance.now() - started);
      if (Date.now() >= Date.parse(c.expires_at)) continue;
      $("progress").value = 1;
      Object.assign(check.dataset, { solveMs: ms, hashes: done.solution + 1,
        difficulty: c.difficulty, solver: done.solver });
      $("check-text").textContent = "Browser checked";
      $("check-note").textContent = "in " + (ms / 1000).toFixed(2) + " s";
      console.log("flashgate pow: " + c.difficulty + " bits solved in " + ms + " ms, " +
        (done.solution + 1) + " hashes, " + done.solver);
      return { challenge: c.challenge, solution: String(done.solution) };
    }
  }
  // The Turnstile widget's token: loads the widget script (data-turnstile-script, with
  // `render=explicit` and an onload callback, as Cloudflare documents), renders the widget
  // into #turnstile with the site key, and resolves with the token its callback gives.
  function turnstileToken() {
    $("state").textContent = "checking";
    const box = $("turnstile");
    box.hidden = false;
    return new Promise((resolve, reject) => {
      window.flashgateTurnstileLoaded = () => {
        window.turnstile.render(box, { sitekey: room.sitekey, callback: resolve,
          "error-callback": () => reject(new Error("the Turnstile check failed")) });
      };
      const url = room.turnstileScript;
      const script = document.createElement("script");
      script.async = true;
      script.onerror = () => reject(new Error("the Turnstile script did not load"));
      script.src = url + (url.includes("?") ? "&" : "?") +
        "render=explicit&onload=flashgateTurnstileLoaded";
      document.head.appendChild(script);
    });
  }
  // The join page: joins (after the proof of work, with the invite of the fragment when
  // there is one), then becomes the ticket's page without a reload.
  async function join() {
    const token = fragment.get("token");
    if (!token) { $("result").textContent = "open this page from the shop to join"; return; }
    if (room.challenge === "turnstile" && !room.sitekey) {
      $("result").textContent = "this waiting room asks for a Turnstile check: join from the shop";
      return;
    }
    try {
      const body = room.challenge === "pow" ? await proofOfWork(token)
        : (room.challenge === "turnstile" ? { turnstile_token: await turnstileToken() } : {});
      if (fragment.get("invite")) body.invite = fragment.get("invite");
      $("state").textContent = "joining";
      const r = await patiently(() => fetch(base, { method: "POST", body: JSON.stringify(body),
        headers: { "content-type": "application/json", authorization: "Bearer " + token } }));
      const j = await r.json();
      if (!r.ok) throw new Error(j.message || "the join answered " + r.status);
      ticket = j.ticket;
      history.replaceState(null, "", base + "?ticket=" + encodeURIComponent(ticket) + location.hash);
      show({ position: j.position, eta_seconds: j.eta_seconds, state: j.state, admitted: false });
      setTimeout(poll, 1000);
    } catch (e) {
      $("state").textContent = "not joined";
      $("result").textContent = String(e.message || e);
    }
  }
  if (ticket) {
    show({ position: $("position").textContent, eta_seconds: $("eta").textContent,
      state: $("state").textContent, outlook: $("outlook").textContent,
      held_until: room.heldUntil, admitted: room.admitted === "true" });
    setTimeout(poll, Number(room.retry) * 1000);
  } else {
    join();
  }
})();
