// Runs the built flashgate edge worker inside workerd via Miniflare (no internet needed).
//
// Environment:
//   EDGE_SCRIPT_DIR   folder with index.js + index_bg.wasm (default: ./build next to this file)
//   EDGE_PORT         port to listen on, 0 = any free port (default 0); host is 127.0.0.1
//   EDGE_URL_FILE     when set, the base URL is written there once listening
//   EDGE_LOG_LEVEL    NONE | ERROR | WARN (default) | INFO | DEBUG: Miniflare's and the
//                     worker's console output, on stderr
//   FLASHGATE_*       passed to the worker as bindings: FLASHGATE_ORIGIN_URL (required),
//                     FLASHGATE_STATUS_TTL_MS, FLASHGATE_STATUS_MAX_STALE_MS,
//                     FLASHGATE_NOT_STARTED_SKEW_MS, FLASHGATE_ORIGIN_TIMEOUT_MS,
//                     FLASHGATE_LIMIT_{CLAIMS,JOINS,POLLS,IP}_PER_S, FLASHGATE_CORS_ORIGINS and the
//                     secrets FLASHGATE_CUSTOMER_TOKEN_SECRET, FLASHGATE_EDGE_SECRET,
//                     FLASHGATE_EDGE_METRICS_TOKEN,
//                     and the customer-token settings FLASHGATE_CUSTOMER_TOKEN_SECRETS,
//                     FLASHGATE_JWT_{ISSUER,AUDIENCE,LEEWAY_SECONDS},
//                     FLASHGATE_JWKS{,_URL,_TTL_SECONDS,_MIN_REFRESH_SECONDS}.
// Prints "edge listening on <url>" on stdout. SIGTERM / SIGINT dispose Miniflare and exit 0.
import { Log, LogLevel, Miniflare } from "miniflare";
import { readFileSync, writeFileSync, renameSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const dir = resolve(process.env.EDGE_SCRIPT_DIR || join(here, "build"));
const port = Number.parseInt(process.env.EDGE_PORT || "0", 10);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`EDGE_PORT must be a port number, got ${process.env.EDGE_PORT}`);
  process.exit(2);
}

// Same names as the [vars] and secrets of wrangler.toml; unset ones are left out so the
// worker applies its defaults.
const NAMES = [
  "FLASHGATE_ORIGIN_URL",
  "FLASHGATE_STATUS_TTL_MS",
  "FLASHGATE_STATUS_MAX_STALE_MS",
  "FLASHGATE_NOT_STARTED_SKEW_MS",
  "FLASHGATE_ORIGIN_TIMEOUT_MS",
  "FLASHGATE_LIMIT_CLAIMS_PER_S",
  "FLASHGATE_LIMIT_JOINS_PER_S",
  "FLASHGATE_LIMIT_POLLS_PER_S",
  "FLASHGATE_LIMIT_IP_PER_S",
  "FLASHGATE_CORS_ORIGINS",
  "FLASHGATE_CUSTOMER_TOKEN_SECRET",
  "FLASHGATE_EDGE_SECRET",
  "FLASHGATE_EDGE_METRICS_TOKEN",
  "FLASHGATE_CUSTOMER_TOKEN_SECRETS",
  "FLASHGATE_JWT_ISSUER",
  "FLASHGATE_JWT_AUDIENCE",
  "FLASHGATE_JWT_LEEWAY_SECONDS",
  "FLASHGATE_JWKS_URL",
  "FLASHGATE_JWKS",
  "FLASHGATE_JWKS_TTL_SECONDS",
  "FLASHGATE_JWKS_MIN_REFRESH_SECONDS",
];
const bindings = {};
for (const name of NAMES) {
  if (process.env[name]) bindings[name] = process.env[name];
}
// A list in wrangler.toml's [vars] (FLASHGATE_CORS_ORIGINS = ["https://shop.example"]) reaches
// the worker as a JSON value, not a string: given as JSON text here, it is passed the same way.
const cors = bindings.FLASHGATE_CORS_ORIGINS;
if (cors && cors.trim().startsWith("[")) bindings.FLASHGATE_CORS_ORIGINS = JSON.parse(cors);

const mf = new Miniflare({
  modules: [
    { type: "ESModule", path: join(dir, "index.js"), contents: readFileSync(join(dir, "index.js"), "utf8") },
    { type: "CompiledWasm", path: join(dir, "index_bg.wasm"), contents: readFileSync(join(dir, "index_bg.wasm")) },
  ],
  modulesRoot: dir,
  // Keep in step with wrangler.toml.
  compatibilityDate: "2026-07-01",
  host: "127.0.0.1",
  port,
  // Without this Miniflare fetches Request.cf data from the internet.
  cf: false,
  cache: true,
  bindings,
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
