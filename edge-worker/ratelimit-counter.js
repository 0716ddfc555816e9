// The counter service behind ratelimit-binding.js (the local stand-in of the Workers rate-limit
// binding in plain workerd): one worker, so one isolate and one set of counts for every edge
// worker of the process. Its entrypoint's `count(namespace, key, limit, period)`, called over JS
// RPC, counts one request of `key` in `namespace` and returns `true`, or `false` (not counted)
// when `limit` were already counted in the last `period` seconds (a sliding window).

import { WorkerEntrypoint } from "cloudflare:workers";

/** Keys kept per namespace; past it, keys with nothing in their window go, then all. */
const MAX_KEYS = 100_000;

/** namespace -> key -> times (ms) of the requests counted in the window, oldest first. */
const namespaces = new Map();

/** Forgets the keys of `keys` whose window is empty at `now`; all of them if still full. */
function sweep(keys, now, periodMs) {
  for (const [key, times] of keys) {
    if (times.length === 0 || times[times.length - 1] <= now - periodMs) keys.delete(key);
  }
  if (keys.size >= MAX_KEYS) keys.clear();
}

function count({ namespace, key, limit, period }, now) {
  const periodMs = period * 1000;
  let keys = namespaces.get(namespace);
  if (!keys) namespaces.set(namespace, (keys = new Map()));
  let times = keys.get(key);
  if (!times) {
    if (keys.size >= MAX_KEYS) sweep(keys, now, periodMs);
    keys.set(key, (times = []));
  }
  let gone = 0;
  while (gone < times.length && times[gone] <= now - periodMs) gone += 1;
  if (gone > 0) times.splice(0, gone);
  if (times.length >= limit) return false;
  times.push(now);
  return true;
}

/** The service's entrypoint, called over JS RPC by the wrapped bindings. */
export default class Counter extends WorkerEntrypoint {
  /** Counts one request of `key` in `namespace`: `true`, or `false` (not counted) when `limit`
   * were already counted in the last `period` seconds. Throws a TypeError on bad arguments. */
  count(namespace, key, limit, period) {
    const ok =
      typeof namespace === "string" &&
      typeof key === "string" &&
      Number.isInteger(limit) &&
      limit > 0 &&
      (period === 10 || period === 60);
    if (!ok) throw new TypeError("count(namespace, key, limit, period): bad arguments");
    return count({ namespace, key, limit, period }, Date.now());
  }
}
