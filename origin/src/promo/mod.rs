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
//! - [`audit`]: the gate audit's repair of the cached state after a release Redis missed;
//! - [`service`]: check, use, confirm, release and the release sweeper.
//!
//! Same pattern as a flash sale's claim path: a count that never goes below
//! zero, taken in one atomic step; one per customer by a unique key; uses held until paid and
//! put back when the payment fails or times out; a flag answers the rest once used up.

pub mod admin;
pub mod audit;
pub mod batch;
pub mod flags;
pub mod guess;
pub mod rules;
pub mod service;
pub mod store;

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::Db;
use moka::future::Cache;
use moka::Expiry;

pub use rules::CodeRules;

/// How long an origin trusts a cached code's rules. Rules never change once written, so this
/// only bounds memory churn.
pub const RULES_TTL: Duration = Duration::from_secs(300);
/// How long an origin remembers that a code does not exist (a code created through another
/// origin is found after at most this).
pub const UNKNOWN_TTL: Duration = Duration::from_millis(200);
/// Most codes kept in the rules cache.
pub const RULES_CACHE_MAX: u64 = 200_000;

type Entry = Option<Arc<CodeRules>>;

/// [`RULES_TTL`] for a known code, [`UNKNOWN_TTL`] for an unknown one.
struct RulesExpiry;

impl Expiry<String, Entry> for RulesExpiry {
    fn expire_after_create(&self, _code: &String, rules: &Entry, _at: Instant) -> Option<Duration> {
        Some(if rules.is_some() {
            RULES_TTL
        } else {
            UNKNOWN_TTL
        })
    }
}

/// An origin's cache of code rules (a `moka` cache, single-flight per code; part of
/// [`crate::state::AppState`]). Creating a code through this origin forgets its "unknown"
/// entry.
#[derive(Clone)]
pub struct RulesCache {
    rules: Cache<String, Entry>,
}

impl Default for RulesCache {
    fn default() -> Self {
        RulesCache {
            rules: Cache::builder()
                .max_capacity(RULES_CACHE_MAX)
                .expire_after(RulesExpiry)
                .build(),
        }
    }
}

impl RulesCache {
    /// The rules of `code` (normalised), from memory or PostgreSQL. `None` when unknown.
    /// Errors: the PostgreSQL error of the read.
    pub async fn get(&self, db: &Db, code: &str) -> Result<Entry, sqlx::Error> {
        let load = async { store::find_rules(db, code).await.map(|r| r.map(Arc::new)) };
        crate::cache::get_or_load(&self.rules, code.to_string(), load).await
    }

    /// Forgets `code` (after creating it).
    pub async fn forget(&self, code: &str) {
        self.rules.invalidate(code).await;
    }
}
