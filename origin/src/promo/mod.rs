//! The promo code service (`/api/v1/codes/…`, `/api/v1/uses/…`, `/admin/v1/codes/…`) on the
//! origin's PostgreSQL and Redis. Its tables keep their `coupon_` names; in the origin's code,
//! "coupon" means only a giveaway coupon ([`crate::giveaway`]).
//!
//! - [`rules`]: a code's rules, how they judge a cart, admin time inputs with IANA zones;
//! - [`store`]: the tables of `migrations/0003_coupon_codes.sql`; the use is one conditional
//!   statement (take one use only if one is left, save her use, unique per (code, customer));
//! - [`flags`]: the used-up flag and her use, cached in Redis for every origin;
//! - [`guess`]: token buckets that only failed tries spend, per customer and per IP;
//! - [`batch`]: one-time code batches saved with `COPY`;
//! - [`admin`]: managers' disable / enable of a code and the audited batch export;
//! - [`service`]: check, use, confirm, release and the release sweeper.
//!
//! Same pattern as a flash sale's claim path: a count that never goes below
//! zero, taken in one atomic step; one per customer by a unique key; uses held until paid and
//! put back when the payment fails or times out; a flag answers the rest once used up.

pub mod admin;
pub mod batch;
pub mod flags;
pub mod guess;
pub mod rules;
pub mod service;
pub mod store;

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use sqlx::PgPool;

pub use rules::CodeRules;

/// How long an origin trusts a cached code's rules. Rules never change once written, so this
/// only bounds memory churn.
pub const RULES_TTL: Duration = Duration::from_secs(300);
/// How long an origin remembers that a code does not exist (a code created through another
/// origin process is found after at most this).
pub const UNKNOWN_TTL: Duration = Duration::from_millis(200);
/// Most codes kept in the rules cache; past it the cache starts afresh.
pub const RULES_CACHE_MAX: usize = 200_000;

type Entry = (Instant, Option<Arc<CodeRules>>);

/// The per-process cache of code rules (shared by every origin running in this process, which
/// is harmless since rules never change; creating a code forgets its "unknown" entry).
pub struct RulesCache {
    map: Mutex<HashMap<String, Entry>>,
}

static CACHE: LazyLock<RulesCache> = LazyLock::new(|| RulesCache {
    map: Mutex::new(HashMap::new()),
});

impl RulesCache {
    /// The process's cache.
    pub fn global() -> &'static RulesCache {
        &CACHE
    }

    /// The rules of `code` (normalised), from memory or PostgreSQL. `None` when unknown.
    pub async fn get(
        &self,
        db: &PgPool,
        code: &str,
    ) -> Result<Option<Arc<CodeRules>>, sqlx::Error> {
        let now = Instant::now();
        if let Some((at, rules)) = self.map.lock().expect("rules cache").get(code) {
            let ttl = if rules.is_some() {
                RULES_TTL
            } else {
                UNKNOWN_TTL
            };
            if now.duration_since(*at) < ttl {
                return Ok(rules.clone());
            }
        }
        let rules = store::find_rules(db, code).await?.map(Arc::new);
        let mut map = self.map.lock().expect("rules cache");
        if map.len() >= RULES_CACHE_MAX {
            map.clear();
        }
        map.insert(code.to_string(), (now, rules.clone()));
        Ok(rules)
    }

    /// Forgets `code` (after creating it).
    pub fn forget(&self, code: &str) {
        self.map.lock().expect("rules cache").remove(code);
    }
}
