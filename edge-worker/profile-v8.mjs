// V8 CPU profiles of the worker inside workerd, through workerd's inspector: where the time of
// one kind of answer goes, function by function (the worker's wasm keeps its Rust names), and
// the per-answer difference between two workers (the edge and the trivial baseline worker).
//
//   node edge-worker/profile-v8.mjs record WS_URL TARGET_URL TOKEN OUT.cpuprofile [SECONDS]
//       WS_URL: the worker's inspector socket (workerd serve CONFIG --inspector-addr=HOST:PORT,
//       then ws://HOST:PORT/<service name>); sends the claims' POST (Bearer TOKEN,
//       Idempotency-Key, `{}`) with 10 connections: 2 s of warm-up, then SECONDS (default 5)
//       profiled; prints the answers sent. TOKEN `mint:SECRET` mints an HS256 token of a new
//       customer per request with that customer-token secret (a join of a new customer each,
//       as scripts/bench-edge's queue_join phase sends them).
//   node edge-worker/profile-v8.mjs compare A.cpuprofile ANSWERS_A B.cpuprofile ANSWERS_B
//       prints the JavaScript thread's busy µs per answer of each and the functions whose self
//       time per answer differs most (A − B, A, B).
// The profiler slows the isolate down: compare profiles taken the same way, not with
// scripts/bench-edge's figures. `ws` comes with Miniflare (edge-worker/package-lock.json).
import { readFileSync, writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { dirname, join } from "node:path";
import { createRequire } from "node:module";
import { createHmac } from "node:crypto";

const require = createRequire(join(dirname(fileURLToPath(import.meta.url)), "package.json"));
const [mode, ...args] = process.argv.slice(2);

async function record(wsUrl, url, token, out, seconds = "5") {
  const { default: WebSocket } = await import(require.resolve("ws"));
  const { default: autocannon } = await import(require.resolve("autocannon"));
  const ws = new WebSocket(wsUrl);
  await new Promise((resolve, reject) => ws.on("open", resolve).on("error", reject));
  let id = 0;
  const waiting = new Map();
  ws.on("message", (m) => {
    const d = JSON.parse(m);
    if (d.id && waiting.has(d.id)) { waiting.get(d.id)(d); waiting.delete(d.id); }
  });
  const call = (method, params = {}) => new Promise((resolve) => {
    id += 1; waiting.set(id, resolve); ws.send(JSON.stringify({ id, method, params }));
  });
  const headers = (t) => ({ authorization: `Bearer ${t}`, "idempotency-key": "profile", "content-type": "application/json" });
  const secret = token.startsWith("mint:") ? token.slice(5) : null;
  const b64url = (b) => Buffer.from(b).toString("base64url");
  const head = b64url(JSON.stringify({ alg: "HS256", typ: "JWT" }));
  const exp = Math.floor(Date.now() / 1000) + 3600;
  const prefix = `profile-${Date.now()}-`;
  let minted = 0;
  const mint = () => {
    minted += 1;
    const body = `${head}.${b64url(JSON.stringify({ sub: `${prefix}${minted}`, exp }))}`;
    return `${body}.${createHmac("sha256", secret).update(body).digest("base64url")}`;
  };
  const load = (duration) => autocannon({
    url, method: "POST", body: "{}", connections: 10, duration,
    headers: headers(secret ? mint() : token),
    ...(secret && { requests: [{ setupRequest: (req) => ({ ...req, headers: headers(mint()) }) }] }),
  });
  await call("Profiler.enable");
  await load(2);
  await call("Profiler.start");
  const r = await load(Number(seconds));
  const p = await call("Profiler.stop");
  writeFileSync(out, JSON.stringify(p.result.profile));
  console.log(`${r.requests.total} answers (${r["2xx"]} 2xx, ${r["4xx"]} 4xx) in ${seconds} s profiled: ${out}`);
  ws.close();
}

// Self time per answer (µs) by function name (hash suffixes of Rust symbols dropped).
function selfPerAnswer(file, answers) {
  const p = JSON.parse(readFileSync(file, "utf8"));
  const nodes = new Map(p.nodes.map((n) => [n.id, n]));
  const perSample = (p.endTime - p.startTime) / p.samples.length;
  const self = new Map();
  for (const s of p.samples) {
    const name = (nodes.get(s).callFrame.functionName || "(anonymous)").replace(/::h[0-9a-f]{16}/g, "");
    self.set(name, (self.get(name) ?? 0) + perSample / answers);
  }
  return self;
}

function compare(fileA, answersA, fileB, answersB) {
  const a = selfPerAnswer(fileA, Number(answersA));
  const b = selfPerAnswer(fileB, Number(answersB));
  const busy = (m) => [...m].filter(([k]) => k !== "(idle)").reduce((s, [, v]) => s + v, 0);
  console.log(`busy µs per answer: A ${busy(a).toFixed(1)}, B ${busy(b).toFixed(1)}`);
  const rows = [...new Set([...a.keys(), ...b.keys()])].filter((k) => k !== "(idle)")
    .map((k) => [k, a.get(k) ?? 0, b.get(k) ?? 0]).sort((x, y) => (y[1] - y[2]) - (x[1] - x[2]));
  console.log("  A−B µs      A      B  function (self time)");
  for (const [k, x, y] of rows.slice(0, 25)) {
    console.log(`${(x - y).toFixed(2).padStart(7)} ${x.toFixed(2).padStart(6)} ${y.toFixed(2).padStart(6)}  ${k.slice(0, 100)}`);
  }
}

if (mode === "record" && args.length >= 4) await record(...args);
else if (mode === "compare" && args.length === 4) compare(...args);
else {
  console.error("usage: profile-v8.mjs record WS_URL TARGET_URL TOKEN OUT [SECONDS] | compare A N_A B N_B");
  process.exit(2);
}
