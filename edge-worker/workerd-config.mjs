// Writes a workerd configuration (Cap'n Proto text) that serves the built edge worker with
// plain `workerd serve`, without Miniflare's Node front. Generated from wrangler.toml and the
// environment by worker-env.mjs (compatibility date and flags, [vars], secrets).
//
// Usage: node workerd-config.mjs OUT_FILE PORT [SCRIPT_DIR]
//   OUT_FILE    where the configuration goes (written then renamed)
//   PORT        port on 127.0.0.1 (on FLASHGATE_EDGE_HOST when set, e.g. 0.0.0.0 in a
//               container: deploy/compose.yaml); 0 = a free port chosen here
//   SCRIPT_DIR  folder with the built worker (index.js + index_bg.wasm); default: the folder of
//               wrangler.toml's `main`
// Prints the base URL it will listen on, e.g. http://127.0.0.1:38211.
// FLASHGATE_EDGE_ISOLATES=N (default 1, at most 16) runs N copies of the worker, each its own
// isolate on its own port (PORT, PORT+1, ...; free ports for 0), one URL printed per line: what
// the isolates of one location share (the rate-limit bindings) and what they do not (their
// caches and local buckets) can then be seen in one process.
//
// What Miniflare gives the worker and this configuration gives it too, or not:
// - bindings: text bindings, and JSON bindings for [vars] lists (FLASHGATE_CORS_ORIGINS);
// - the origin: the worker's global fetch goes to a network service allowed to reach
//   public, private and loopback addresses (workerd's default allows public ones only);
// - the Cache API: workerd has no cache of its own (Miniflare brings one); without
//   `cacheApiOutbound` the worker's `cache.get` always misses and `cache.put` stores nothing.
//   A single workerd process runs one isolate, whose own status cache already holds the status
//   for a TTL, so nothing is lost but the cross-isolate sharing of a real deployment;
// - `CF-Connecting-IP`: Miniflare sets it from the client's socket when a request has none;
//   plain workerd passes on only what the client sent (as Cloudflare sets it in production,
//   the edge's per-IP limit then applies only to clients that send one, e.g. the stampede);
// - rate-limit bindings: for each `[[ratelimits]]` of wrangler.toml, a local stand-in of the
//   Workers binding, as Miniflare has one: a wrapped binding (ratelimit-binding.js) over one
//   counter service (ratelimit-counter.js) that every copy of the worker shares. Its counts
//   are exact and immediate; the platform's are per location and eventually consistent.
import { renameSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { rateLimitDrift, workerSetup } from "./worker-env.mjs";

const here = dirname(fileURLToPath(import.meta.url));
/** The internal module of the rate-limit stand-in's wrapped bindings. */
const RATELIMIT_MODULE = "flashgate-internal:ratelimit";
/** Most copies of the worker FLASHGATE_EDGE_ISOLATES may ask for. */
const MAX_ISOLATES = 16;

/** A Cap'n Proto text literal for `s` (UTF-8 passes through; quotes, backslashes and control
 * characters are escaped). */
function capnpString(s) {
  let out = '"';
  for (const ch of String(s)) {
    const code = ch.codePointAt(0);
    if (ch === '"' || ch === "\\") out += `\\${ch}`;
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, "0")}`;
    else out += ch;
  }
  return `${out}"`;
}

/** A free port on 127.0.0.1, from the kernel. */
function freePort() {
  return new Promise((ok, fail) => {
    const server = createServer();
    server.on("error", fail);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => ok(port));
    });
  });
}

/** The name of the service of copy `i` of the worker. */
function edgeService(i) {
  return i === 0 ? "edge" : `edge-${i + 1}`;
}

/** The binding of rate limit `r` (worker-env.mjs `rateLimits`): the stand-in's wrapped
 * binding over the shared counter service. */
function rateLimitBinding(r) {
  const inner = [
    `(name = "counter", service = "ratelimit-counter")`,
    `(name = "namespace", text = ${capnpString(r.namespaceId)})`,
    `(name = "limit", json = ${capnpString(String(r.limit))})`,
    `(name = "period", json = ${capnpString(String(r.period))})`,
  ];
  return `(name = ${capnpString(r.name)}, wrapped = (moduleName = ${capnpString(RATELIMIT_MODULE)}, innerBindings = [
      ${inner.join(",\n      ")}
    ]))`;
}

/** The configuration text for the worker in `setup` listening on `host`:`port` (a copy of the
 * worker on each port when `port` is a list), to be written into folder `configDir` (the
 * modules are embedded by paths relative to it). */
export function workerdConfig(setup, port, configDir, host = "127.0.0.1") {
  const ports = Array.isArray(port) ? port : [port];
  const embed = (path) => `embed ${capnpString(relative(configDir, path) || ".")}`;
  const dir = relative(configDir, setup.scriptDir) || ".";
  const bindings = Object.entries(setup.bindings).map(([name, value]) =>
    typeof value === "string"
      ? `(name = ${capnpString(name)}, text = ${capnpString(value)})`
      : `(name = ${capnpString(name)}, json = ${capnpString(JSON.stringify(value))})`,
  );
  const limited = setup.rateLimits.length > 0;
  bindings.push(...setup.rateLimits.map(rateLimitBinding));
  const services = ports.map((_, i) => `(name = ${capnpString(edgeService(i))}, worker = .edgeWorker)`);
  if (limited) services.push(`(name = "ratelimit-counter", worker = .rateLimitCounter)`);
  services.push(`(name = "internet", network = (allow = ["public", "private", "local"]))`);
  const sockets = ports.map(
    (p, i) =>
      `(name = ${capnpString(i === 0 ? "http" : `http-${i + 1}`)}, address = ${capnpString(`${host}:${p}`)}, http = (), service = ${capnpString(edgeService(i))})`,
  );
  const extensions = limited
    ? `
  extensions = [
    (modules = [
      (name = ${capnpString(RATELIMIT_MODULE)}, internal = true, esModule = ${embed(join(here, "ratelimit-binding.js"))}),
    ]),
  ],`
    : "";
  const counter = limited
    ? `
const rateLimitCounter :Workerd.Worker = (
  modules = [(name = "ratelimit-counter.js", esModule = ${embed(join(here, "ratelimit-counter.js"))})],
  compatibilityDate = ${capnpString(setup.compatibilityDate)},
);
`
    : "";
  return `# Generated by edge-worker/workerd-config.mjs from wrangler.toml; do not edit.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    ${services.join(",\n    ")},
  ],
  sockets = [
    ${sockets.join(",\n    ")},
  ],${extensions}
);

const edgeWorker :Workerd.Worker = (
  modules = [
    (name = "index.js", esModule = embed ${capnpString(join(dir, "index.js"))}),
    (name = "index_bg.wasm", wasm = embed ${capnpString(join(dir, "index_bg.wasm"))}),
  ],
  compatibilityDate = ${capnpString(setup.compatibilityDate)},
  compatibilityFlags = [${setup.compatibilityFlags.map(capnpString).join(", ")}],
  bindings = [
    ${bindings.join(",\n    ")}
  ],
  globalOutbound = "internet",
);
${counter}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [out, portArg, scriptDir] = process.argv.slice(2);
  const wanted = Number.parseInt(portArg ?? "", 10);
  if (!out || !Number.isInteger(wanted) || wanted < 0 || wanted > 65535) {
    console.error("usage: node workerd-config.mjs OUT_FILE PORT [SCRIPT_DIR]");
    process.exit(2);
  }
  const copies = Number.parseInt(process.env.FLASHGATE_EDGE_ISOLATES || "1", 10);
  if (!Number.isInteger(copies) || copies < 1 || copies > MAX_ISOLATES) {
    console.error(`FLASHGATE_EDGE_ISOLATES must be 1..${MAX_ISOLATES}, got ${process.env.FLASHGATE_EDGE_ISOLATES}`);
    process.exit(2);
  }
  const ports = [];
  for (let i = 0; i < copies; i += 1) {
    let p = wanted === 0 ? await freePort() : wanted + i;
    while (ports.includes(p)) p = await freePort();
    ports.push(p);
  }
  const file = resolve(out);
  const host = process.env.FLASHGATE_EDGE_HOST || "127.0.0.1";
  const setup = workerSetup(process.env, scriptDir);
  for (const drift of rateLimitDrift(setup.bindings, setup.rateLimits)) {
    console.error(`workerd-config: rate limits out of step: ${drift}`);
  }
  const text = workerdConfig(setup, ports, dirname(file), host);
  writeFileSync(`${file}.tmp`, text, { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
  for (const p of ports) console.log(`http://${host}:${p}`);
}
