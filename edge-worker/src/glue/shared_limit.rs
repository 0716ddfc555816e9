//! The rate limits that hold across isolates, asked of the Workers rate-limit bindings (wasm32
//! only; the rules are in [`crate::shared_limit`]). Called only for a request the local buckets
//! let through and that will cost something: never for an answer given from the cache.

use super::telemetry;
use crate::config::EdgeConfig;
use crate::decide::Answer;
use crate::shared_limit::{self, Budget, Outcome};
use flashgate_shared::ip_limit::limit_key_of;
use wasm_bindgen::JsValue;
use worker::{js_sys, Env};

/// Counts the request against `budget` (per `customer`) and the per-IP budget (per `ip`'s key,
/// when known), both bindings asked at once; 429 `rate_limited` when either is spent. A budget
/// without its binding, or whose rate is 0, is not asked; a binding that fails lets the
/// request through.
pub(super) async fn check(
    env: &Env,
    cfg: &EdgeConfig,
    budget: Budget,
    customer: &str,
    ip: Option<&str>,
) -> Result<(), Answer> {
    let ip_key = ip.and_then(|ip| limit_key_of(ip, cfg.limits.ipv6_prefix));
    let by_ip = async {
        match ip_key {
            Some(key) => ask(env, cfg, Budget::Ip, key).await,
            None => Outcome::Off,
        }
    };
    let (by_customer, by_ip) =
        futures_util::join!(ask(env, cfg, budget, customer.to_string()), by_ip);
    shared_limit::verdict(&[by_customer, by_ip])
}

/// What `budget`'s binding says of `key`, counted ([`telemetry::shared_limit`]); a failure is
/// logged now and then ([`shared_limit::log_failure`]).
async fn ask(env: &Env, cfg: &EdgeConfig, budget: Budget, key: String) -> Outcome {
    let name = budget.binding();
    if budget.per_s(&cfg.limits) == 0 || !bound(env, name) {
        return Outcome::Off;
    }
    let (outcome, error) = match env.rate_limiter(name) {
        Ok(limiter) => match limiter.limit(key).await {
            Ok(o) if o.success => (Outcome::Passed, None),
            Ok(_) => (Outcome::Refused, None),
            Err(e) => (Outcome::Failed, Some(e.to_string())),
        },
        Err(e) => (Outcome::Failed, Some(e.to_string())),
    };
    let n = telemetry::shared_limit(budget, outcome);
    if let Some(e) = error.filter(|_| shared_limit::log_failure(n)) {
        worker::console_warn!("rate-limit binding {name} failed ({n} so far here): {e}");
    }
    outcome
}

/// Whether the environment has a binding called `name` (of any type).
fn bound(env: &Env, name: &str) -> bool {
    js_sys::Reflect::get(env.as_ref(), &JsValue::from_str(name))
        .map(|v| !v.is_undefined())
        .unwrap_or(false)
}
