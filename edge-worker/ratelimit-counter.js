// The counter service behind ratelimit-binding.js (the local stand-in of the Workers rate-limit
// binding in plain workerd): one worker, so one isolate and one set of counts for every edge
// worker of the process. `POST /limit` with `{ namespace, key, limit, period }` counts one
// request of `key` in `namespace` and answers `{ "success": true }`, or `false` (not counted)
// when `limit` were already counted in the last `period` seconds (a sliding window).

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

export default {
  async fetch(request) {
    const url = new URL(request.url);
    if (request.method !== "POST" || url.pathname !== "/limit") {
      return new Response("not found", { status: 404 });
    }
    let body;
    try {
      body = await request.json();
    } catch {
      return new Response("bad json", { status: 400 });
    }
    const { namespace, key, limit, period } = body ?? {};
    const ok =
      typeof namespace === "string" &&
      typeof key === "string" &&
      Number.isInteger(limit) &&
      limit > 0 &&
      (period === 10 || period === 60);
    if (!ok) return new Response("bad request", { status: 400 });
    return Response.json({ success: count(body, Date.now()) });
  },
};
