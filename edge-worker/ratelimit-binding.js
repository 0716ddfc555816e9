// The local stand-in of the Workers rate-limit binding, for the edge in plain workerd (what
// Miniflare does for its own runtime): a wrapped binding whose counts live in one counter
// service (ratelimit-counter.js) that every worker of the workerd process shares, as the
// isolates of one Cloudflare location share the real binding's. workerd-config.mjs gives the
// worker one such binding for each `[[ratelimits]]` of wrangler.toml. It is not the platform's
// binding: its counts are exact and immediate, the platform's are eventually consistent.
//
// Inner bindings (workerd-config.mjs): `counter` (the counter service), `namespace` (the
// `namespace_id`), `limit` and `period` (s; 10 or 60) of `simple`.

/** The binding; its class name is what workers-rs checks (`Ratelimit`), as on the platform. */
class Ratelimit {
  #counter;
  #namespace;
  #limit;
  #period;

  constructor(env) {
    this.#counter = env.counter;
    this.#namespace = String(env.namespace);
    this.#limit = env.limit;
    this.#period = env.period;
  }

  /** Counts one request of `key`: `{ success: false }` once `limit` were counted in the last
   * `period` seconds. Throws on a bad argument or when the counter cannot be reached. */
  async limit(options) {
    if (typeof options !== "object" || options === null || typeof options.key !== "string") {
      throw new TypeError("limit() takes { key: string }");
    }
    // A JS RPC call into the counter service: no HTTP request, headers or JSON body per ask
    // (the platform's binding has none either).
    const success = await this.#counter.count(this.#namespace, options.key, this.#limit, this.#period);
    return { success };
  }
}

export default function wrap(env) {
  return new Ratelimit(env);
}
