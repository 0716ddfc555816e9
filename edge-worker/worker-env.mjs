// What the edge worker is given, taken from wrangler.toml and the environment: one place for
// both local runtimes (run-miniflare.mjs and workerd-config.mjs), so that Miniflare and plain
// workerd run the worker with the same settings as a deployment.
//
// - compatibility date and flags: wrangler.toml's `compatibility_date`, `compatibility_flags`;
// - the module folder: the folder of wrangler.toml's `main` (edge-worker/build) unless given;
// - bindings: wrangler.toml's [vars] (the deployment's defaults), each replaced by an
//   environment variable of the same name when that is set and not empty, plus the secrets
//   and optional settings below, taken from the environment only. A [vars] list
//   (FLASHGATE_CORS_ORIGINS = [...]) is a JSON value binding, as wrangler gives it; set in the
//   environment as JSON text (`["https://shop.example"]`) it is passed the same way, as a
//   comma-separated string it stays a string (the worker reads both);
// - rate limits: wrangler.toml's `[[ratelimits]]` (the Workers rate-limit bindings of the
//   budgets held across isolates, docs/EDGE.md), which each runtime binds its own way.
//
// FLASHGATE_WRANGLER_TOML names another wrangler.toml to read (default: the repository's), e.g.
// one without `[[ratelimits]]`.
import { readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "smol-toml";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root (this file is edge-worker/worker-env.mjs). */
export const repoRoot = resolve(here, "..");

/** Secrets and optional settings that wrangler.toml does not list among its [vars]. */
const FROM_ENVIRONMENT_ONLY = [
  "FLASHGATE_CUSTOMER_TOKEN_SECRET",
  "FLASHGATE_CUSTOMER_TOKEN_SECRETS",
  "FLASHGATE_EDGE_SECRET",
  "FLASHGATE_EDGE_METRICS_TOKEN",
  "FLASHGATE_JWT_ISSUER",
  "FLASHGATE_JWT_AUDIENCE",
  "FLASHGATE_JWT_LEEWAY_SECONDS",
  "FLASHGATE_JWT_MAX_LIFETIME_SECONDS",
  "FLASHGATE_JWKS_URL",
  "FLASHGATE_JWKS",
  "FLASHGATE_JWKS_TTL_SECONDS",
  "FLASHGATE_JWKS_MIN_REFRESH_SECONDS",
  // Fault injection only (scripts/chaos clock-skew): the worker's clock shifted, ms.
  "FLASHGATE_TEST_CLOCK_OFFSET_MS",
  "FLASHGATE_TURNSTILE_SECRET",
  "FLASHGATE_TURNSTILE_SITEVERIFY_URL",
  "FLASHGATE_TURNSTILE_TIMEOUT_MS",
  "FLASHGATE_TURNSTILE_SITE_KEY",
  "FLASHGATE_TURNSTILE_SCRIPT_URL",
];

/**
 * wrangler.toml's `[[ratelimits]]` as `{ name, namespaceId, limit, period }`; throws on an entry
 * the platform would refuse (no name or namespace_id, a limit that is not a positive integer, a
 * period other than 10 or 60 s).
 */
export function rateLimits(toml) {
  return (toml.ratelimits ?? []).map((r, i) => {
    const { name, namespace_id: namespaceId, simple } = r ?? {};
    const limit = simple?.limit;
    const period = simple?.period ?? 60;
    const ok =
      typeof name === "string" &&
      name !== "" &&
      typeof namespaceId === "string" &&
      namespaceId !== "" &&
      Number.isInteger(limit) &&
      limit > 0 &&
      (period === 10 || period === 60);
    if (!ok) {
      throw new Error(
        `wrangler.toml [[ratelimits]] #${i + 1}: needs name, namespace_id and simple = { limit = <positive integer>, period = 10 | 60 }`,
      );
    }
    return { name, namespaceId, limit, period };
  });
}

/** The rate-limit bindings the worker asks (docs/EDGE.md), each with the per-second setting
 * whose × 10 its `limit` must be, over a period of 10 s. */
export const RATE_LIMIT_SETTINGS = {
  FLASHGATE_JOIN_LIMITER: "FLASHGATE_LIMIT_JOINS_PER_S",
  FLASHGATE_CLAIM_LIMITER: "FLASHGATE_LIMIT_CLAIMS_PER_S",
  FLASHGATE_IP_LIMITER: "FLASHGATE_LIMIT_IP_PER_S",
};

/**
 * Where `rateLimits` (of [rateLimits]) and the per-second settings in `bindings` disagree: one
 * sentence per binding of [RATE_LIMIT_SETTINGS] whose period is not 10 s or whose limit is not
 * its setting × 10 (a setting of 0 turns the budget off and agrees with any limit); empty when
 * they agree.
 */
export function rateLimitDrift(bindings, rateLimits) {
  const out = [];
  for (const r of rateLimits) {
    const setting = RATE_LIMIT_SETTINGS[r.name];
    if (!setting) continue;
    const perS = Number.parseInt(String(bindings[setting] ?? ""), 10);
    if (r.period !== 10) out.push(`${r.name}: period ${r.period} s, the edge expects 10`);
    else if (Number.isInteger(perS) && perS > 0 && r.limit !== perS * 10) {
      out.push(`${r.name}: limit ${r.limit} per 10 s, but ${setting} = ${perS} makes it ${perS * 10}`);
    }
  }
  return out;
}

/**
 * The worker as wrangler.toml describes it, with its bindings from `env`:
 * `{ compatibilityDate, compatibilityFlags, scriptDir, bindings, rateLimits }`, where `bindings`
 * maps a name to a string or a JSON value (an array) and `rateLimits` is [rateLimits]'s.
 * `scriptDir` is `scriptDir` when given, else the folder of wrangler.toml's `main`. Throws when
 * wrangler.toml cannot be read or parsed.
 */
export function workerSetup(
  env = process.env,
  scriptDir = undefined,
  wranglerPath = env.FLASHGATE_WRANGLER_TOML || join(repoRoot, "wrangler.toml"),
) {
  const toml = parse(readFileSync(wranglerPath, "utf8"));
  const vars = toml.vars ?? {};
  const bindings = {};
  for (const [name, value] of Object.entries(vars)) bindings[name] = value;
  for (const name of [...Object.keys(vars), ...FROM_ENVIRONMENT_ONLY]) {
    const text = env[name];
    if (!text) continue;
    const isList = Array.isArray(vars[name]) && text.trim().startsWith("[");
    bindings[name] = isList ? JSON.parse(text) : text;
  }
  return {
    compatibilityDate: toml.compatibility_date,
    compatibilityFlags: toml.compatibility_flags ?? [],
    scriptDir: resolve(scriptDir || join(repoRoot, dirname(toml.main))),
    bindings,
    rateLimits: rateLimits(toml),
  };
}
