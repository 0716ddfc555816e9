// Runs the built flashgate edge worker inside workerd via Miniflare (no internet needed).
//
// Environment:
//   EDGE_SCRIPT_DIR   folder with index.js + index_bg.wasm (default: the folder of
//                     wrangler.toml's `main`, edge-worker/build)
//   EDGE_PORT         port to listen on, 0 = any free port (default 0); host is 127.0.0.1
//   EDGE_URL_FILE     when set, the base URL is written there once listening
//   EDGE_LOG_LEVEL    NONE | ERROR | WARN (default) | INFO | DEBUG: Miniflare's and the
//                     worker's console output, on stderr
//   FLASHGATE_*       the worker's bindings: wrangler.toml's [vars] replaced by the environment,
//                     and the secrets and customer-token settings (worker-env.mjs lists them);
//                     FLASHGATE_ORIGIN_URL is the origin to forward to.
// Prints "edge listening on <url>" on stdout. SIGTERM / SIGINT dispose Miniflare and exit 0.
import { Log, LogLevel, Miniflare } from "miniflare";
import { readFileSync, writeFileSync, renameSync } from "node:fs";
import { join } from "node:path";
import { rateLimitDrift, workerSetup } from "./worker-env.mjs";

const port = Number.parseInt(process.env.EDGE_PORT || "0", 10);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`EDGE_PORT must be a port number, got ${process.env.EDGE_PORT}`);
  process.exit(2);
}

// The worker's settings, as plain workerd gets them too (worker-env.mjs): wrangler.toml's
// compatibility date and [vars], replaced by the environment, plus the secrets.
const setup = workerSetup(process.env, process.env.EDGE_SCRIPT_DIR);
const dir = setup.scriptDir;
for (const drift of rateLimitDrift(setup.bindings, setup.rateLimits)) {
  console.error(`run-miniflare: rate limits out of step: ${drift}`);
}

const mf = new Miniflare({
  modules: [
    { type: "ESModule", path: join(dir, "index.js"), contents: readFileSync(join(dir, "index.js"), "utf8") },
    { type: "CompiledWasm", path: join(dir, "index_bg.wasm"), contents: readFileSync(join(dir, "index_bg.wasm")) },
  ],
  modulesRoot: dir,
  compatibilityDate: setup.compatibilityDate,
  compatibilityFlags: setup.compatibilityFlags,
  host: "127.0.0.1",
  port,
  // Without this Miniflare fetches Request.cf data from the internet.
  cf: false,
  cache: true,
  bindings: setup.bindings,
  // wrangler.toml's [[ratelimits]], with Miniflare's own local rate-limit binding.
  ratelimits: Object.fromEntries(
    setup.rateLimits.map((r) => [r.name, { namespace_id: r.namespaceId, simple: { limit: r.limit, period: r.period } }]),
  ),
  log: new Log(LogLevel[(process.env.EDGE_LOG_LEVEL || "WARN").toUpperCase()] ?? LogLevel.WARN),
});

const url = (await mf.ready).toString().replace(/\/$/, "");
if (process.env.EDGE_URL_FILE) {
  // Write then rename so a reader never sees a partial URL.
  const tmp = `${process.env.EDGE_URL_FILE}.tmp`;
  writeFileSync(tmp, `${url}\n`);
  renameSync(tmp, process.env.EDGE_URL_FILE);
}
console.log(`edge listening on ${url}`);

let stopping = false;
async function stop() {
  if (stopping) return;
  stopping = true;
  try {
    await mf.dispose();
  } finally {
    process.exit(0);
  }
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
