// Load phases of scripts/bench-edge: drives HTTP load with autocannon and prints one JSON line
// per phase. Usage:
//   node bench.mjs PHASE_JSON
// where PHASE_JSON is {"runtime"?, "name", "url", "method", "headers", "body", "expectStatus",
// "expectBody", "connections", "seconds", "randomSuffix"?, "tokensFile"?}. With "randomSuffix":
// true every request (the probe too) goes to the URL's path plus a random suffix, e.g. a made-up
// campaign id per request. With "tokensFile" (a file of customer tokens, one a line) the requests
// take the tokens in turn as `Authorization: Bearer <token>` (the probe the first): one customer
// per token. With "mintSecret" (the HS256 customer-token secret) and "mintPrefix", every request
// (the probe too) carries a token of its own, minted in autocannon's setupRequest for customer
// `<mintPrefix><n>`, n = 1, 2, ...: a new customer per request (autocannon would otherwise send
// the very same request each time). Those requests are built once, before the load, like the single request of the
// other phases, so the load generator's own cost per request stays the same. Before the load, one request checks that the answer has the expected status,
// body and `flashgate-answered-by: edge`; the phase fails (exit 1) when it does not, or when
// any answer under load has another status.
// With "powJoins" (a count, with "mintSecret") the phase joins a `pow` campaign: before the
// load, that many customers are minted, each fetches her challenge from the edge
// (`<url>/challenge`) and solves it (the campaign's difficulty, kept low: the edge's check is one
// HMAC and one SHA-256 whatever the difficulty); the load then sends exactly those joins, one
// customer each, with `{"challenge", "solution"}` (autocannon's `amount` instead of a duration).
import autocannon from "autocannon";
import { readdirSync, readFileSync } from "node:fs";
import { createHash, createHmac } from "node:crypto";

const phase = JSON.parse(process.argv[2]);
const init = { method: phase.method || "GET", headers: phase.headers || {}, body: phase.body };
const tokens = phase.tokensFile
  ? readFileSync(phase.tokensFile, "utf8").split("\n").filter(Boolean)
  : [];
const withToken = (token) => ({ ...init.headers, authorization: `Bearer ${token}` });
if (tokens.length > 0) init.headers = withToken(tokens[0]);

const b64url = (b) => Buffer.from(b).toString("base64url");
const jwtHead = b64url(JSON.stringify({ alg: "HS256", typ: "JWT" }));
const exp = Math.floor(Date.now() / 1000) + 3600;
let minted = 0;
const mint = () => {
  minted += 1;
  const body = `${jwtHead}.${b64url(JSON.stringify({ sub: `${phase.mintPrefix}${minted}`, exp }))}`;
  return `${body}.${createHmac("sha256", phase.mintSecret).update(body).digest("base64url")}`;
};
if (phase.mintSecret) init.headers = withToken(mint());

// The pow joins, solved before the load: [{ headers, body }], sent in turn.
const solved = [];
let sent = 0;
const leadingZeroBits = (digest) => {
  let bits = 0;
  for (const byte of digest) {
    if (byte !== 0) return bits + Math.clz32(byte) - 24;
    bits += 8;
  }
  return bits;
};
const solveOne = async (headers) => {
  const res = await fetch(`${phase.url}/challenge`, { headers });
  if (res.status !== 200) throw new Error(`challenge: ${res.status} ${await res.text()}`);
  const { challenge, difficulty } = await res.json();
  for (let n = 0; ; n += 1) {
    const digest = createHash("sha256").update(`${challenge}:${n}`).digest();
    if (leadingZeroBits(digest) >= difficulty) {
      return { headers: { ...headers, "content-type": "application/json" }, body: JSON.stringify({ challenge, solution: String(n) }) };
    }
  }
};
if (phase.powJoins) {
  // The probe's customer first, then the load's; 32 fetches in flight.
  const all = [init.headers, ...Array.from({ length: phase.powJoins }, () => withToken(mint()))];
  const out = new Array(all.length);
  let next = 0;
  await Promise.all(Array.from({ length: 32 }, async () => {
    while (next < all.length) {
      const i = next++;
      out[i] = await solveOne(all[i]);
    }
  }));
  init.headers = out[0].headers;
  init.body = out[0].body;
  solved.push(...out.slice(1));
}

const suffix = () => `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
const probe = await fetch(phase.randomSuffix ? phase.url + suffix() : phase.url, init);
const probeBody = await probe.text();
const by = probe.headers.get("flashgate-answered-by");
if (probe.status !== phase.expectStatus || by !== "edge" || (phase.expectBody && probeBody !== phase.expectBody)) {
  console.error(`${phase.name}: probe got ${probe.status} answered-by=${by} body=${probeBody}`);
  process.exit(1);
}

// Core time of the serving runtime (`serverPids`: its process tree), in µs: every thread's
// time on a core (/proc/PID/task/*/schedstat, ns), read right around the load.
const serverCpuUs = () => (phase.serverPids ?? []).reduce((sum, pid) => {
  let tasks = [];
  try { tasks = readdirSync(`/proc/${pid}/task`); } catch { return sum; }
  return sum + tasks.reduce((s, t) => {
    try { return s + Number(readFileSync(`/proc/${pid}/task/${t}/schedstat`, "utf8").split(" ")[0]) / 1000; }
    catch { return s; }
  }, 0);
}, 0);
const cpuBefore = serverCpuUs();
const startedMs = performance.now();
const result = await autocannon({
  url: phase.url,
  method: init.method,
  headers: init.headers,
  body: init.body,
  connections: phase.connections,
  ...(phase.powJoins ? { amount: solved.length } : { duration: phase.seconds }),
  ...(phase.randomSuffix && {
    requests: [{ setupRequest: (req) => ({ ...req, path: new URL(phase.url).pathname + suffix() }) }],
  }),
  ...(tokens.length > 0 && {
    requests: tokens.map((token) => ({ method: init.method, headers: withToken(token), body: init.body })),
  }),
  ...(phase.mintSecret && !phase.powJoins && {
    requests: [{ setupRequest: (req) => ({ ...req, headers: withToken(mint()) }) }],
  }),
  ...(phase.powJoins && {
    requests: [{ setupRequest: (req) => ({ ...req, ...solved[sent++ % solved.length] }) }],
  }),
});
const elapsedS = (performance.now() - startedMs) / 1000;
const serverCpu = Math.round(serverCpuUs() - cpuBefore);
const total = result.requests.total;
const expected = phase.expectStatus >= 400 && phase.expectStatus < 500 ? result["4xx"] : result["2xx"];
const out = {
  runtime: phase.runtime,
  name: phase.name,
  requests: total,
  ...(tokens.length > 0 && { customers: tokens.length }),
  ...(phase.mintSecret && { customers: phase.powJoins ? phase.powJoins + 1 : minted }),
  // A pow phase sends a fixed amount: its rate is that amount over the time it took.
  rps: Math.round(phase.powJoins ? total / elapsedS : result.requests.average),
  p50_ms: result.latency.p50,
  p99_ms: result.latency.p99,
  expected_status: expected,
  errors: result.errors + result.timeouts,
  ...(phase.serverPids && { server_cpu_us: serverCpu }),
};
console.log(JSON.stringify(out));
if (expected !== total || out.errors > 0) {
  const byClass = ["2xx", "3xx", "4xx", "5xx"].map((c) => `${c} ${result[c]}`).join(", ");
  console.error(`${phase.name}: ${total - expected} answers with another status (${byClass}), ${out.errors} errors`);
  process.exit(1);
}
