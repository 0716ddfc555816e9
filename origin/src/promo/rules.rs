//! The rules of a code and how they judge a cart (most checks read only the code's rules, which
//! never change once written, so any origin can cache them). Its times are read with the admin
//! API's one parser ([`parse_instant`]).

use chrono::{DateTime, Utc};
use flashgate_shared::api::promo::{CodeKind, NotApplicable};
use flashgate_shared::money::{self, Applied, Discount};

pub use crate::admin::time::parse_instant;

/// The rules of a code or batch, times already resolved to instants: what is written, and
/// (in [`CodeRules::rules`]) what is read back and cached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewRules {
    pub kind: CodeKind,
    /// Basis points (1000 = 10 %), or `None` for an amount.
    pub percent_off_bp: Option<i64>,
    /// Minor units, or `None` for a percentage.
    pub amount_off: Option<i64>,
    pub currency: String,
    /// Minor units, compared with the pre-discount cart total, inclusive.
    pub min_order: i64,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    /// Total uses of a code (1 for a one-time code).
    pub use_limit: i64,
    pub once_per_customer: bool,
}

/// A code with its rules, as cached by every origin. Rules never change once written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeRules {
    /// The normalised code.
    pub code: String,
    pub rules_id: i64,
    /// The rules row, as written by [`super::store::insert_rules`].
    pub rules: NewRules,
    /// Batch id of a one-time code.
    pub batch: Option<String>,
}

impl CodeRules {
    /// The discount of the code.
    pub fn discount(&self) -> Discount {
        match (self.rules.percent_off_bp, self.rules.amount_off) {
            (Some(bp), _) => Discount::Percent { basis_points: bp },
            (None, Some(a)) => Discount::Amount { minor_units: a },
            (None, None) => Discount::Amount { minor_units: 0 },
        }
    }

    /// Judges a cart by the rules alone (no state), in this order: `not_started`
    /// (`now < starts_at`), `expired` (`now >= ends_at`), `currency_mismatch` (when the request
    /// names a currency), `below_minimum` (`cart_total < min_order`). Otherwise the discount
    /// by [`flashgate_shared::money::apply`].
    pub fn judge(
        &self,
        now: DateTime<Utc>,
        cart_total: i64,
        currency: Option<&str>,
    ) -> Result<Applied, NotApplicable> {
        if now < self.rules.starts_at {
            return Err(NotApplicable::NotStarted);
        }
        if now >= self.rules.ends_at {
            return Err(NotApplicable::Expired);
        }
        if currency.is_some_and(|c| c != self.rules.currency) {
            return Err(NotApplicable::CurrencyMismatch);
        }
        if cart_total < self.rules.min_order {
            return Err(NotApplicable::BelowMinimum);
        }
        Ok(money::apply(self.discount(), cart_total))
    }
}
