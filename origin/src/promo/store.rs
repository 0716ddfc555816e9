//! PostgreSQL access of the promo code service (tables of `migrations/0003_coupon_codes.sql`).
//! PostgreSQL is the truth: every take, release and confirm is one conditional statement.

use chrono::{DateTime, Utc};
use flashgate_shared::api::coupons::UseStatus;
use sqlx::{PgPool, Row};

use super::rules::{CodeRules, NewRules};

const RULES_COLUMNS: &str =
    "c.code, c.rules_id, r.kind, r.percent_off_bp::bigint AS percent_off_bp,
    r.amount_off, r.currency, r.min_order, r.starts_at, r.ends_at, r.use_limit,
    r.once_per_customer, b.id AS batch";

fn rules_of(row: &sqlx::postgres::PgRow) -> sqlx::Result<CodeRules> {
    Ok(CodeRules {
        code: row.try_get("code")?,
        rules_id: row.try_get("rules_id")?,
        rules: NewRules {
            kind: row.try_get("kind")?,
            percent_off_bp: row.try_get("percent_off_bp")?,
            amount_off: row.try_get("amount_off")?,
            currency: row.try_get("currency")?,
            min_order: row.try_get("min_order")?,
            starts_at: row.try_get("starts_at")?,
            ends_at: row.try_get("ends_at")?,
            use_limit: row.try_get("use_limit")?,
            once_per_customer: row.try_get("once_per_customer")?,
        },
        batch: row.try_get("batch")?,
    })
}

/// Inserts a rules row in `tx`; returns its id.
pub async fn insert_rules(tx: &mut sqlx::PgConnection, r: &NewRules) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar(
        "INSERT INTO coupon_rules (kind, percent_off_bp, amount_off, currency, min_order,
             starts_at, ends_at, use_limit, once_per_customer)
         VALUES ($1, $2::integer, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
    )
    .persistent(crate::db::keep_statements())
    .bind(r.kind.as_str())
    .bind(r.percent_off_bp)
    .bind(r.amount_off)
    .bind(&r.currency)
    .bind(r.min_order)
    .bind(r.starts_at)
    .bind(r.ends_at)
    .bind(r.use_limit)
    .bind(r.once_per_customer)
    .fetch_one(tx)
    .await
}

/// Creates a shared code with its rules. `None` when the code exists (shared or one-time).
pub async fn insert_shared(
    db: &PgPool,
    code: &str,
    r: &NewRules,
) -> Result<Option<CodeRules>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let rules_id = insert_rules(&mut tx, r).await?;
    let done = sqlx::query(
        "INSERT INTO coupon_codes (code, rules_id, uses_left) VALUES ($1, $2, $3)
         ON CONFLICT (code) DO NOTHING",
    )
    .persistent(crate::db::keep_statements())
    .bind(code)
    .bind(rules_id)
    .bind(r.use_limit)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() == 0 {
        tx.rollback().await?;
        return Ok(None);
    }
    tx.commit().await?;
    find_rules(db, code).await
}

/// The code's rules, `None` when no such code.
pub async fn find_rules(db: &PgPool, code: &str) -> Result<Option<CodeRules>, sqlx::Error> {
    let row = sqlx::query(&format!(
        "SELECT {RULES_COLUMNS} FROM coupon_codes c
           JOIN coupon_rules r ON r.id = c.rules_id
           LEFT JOIN coupon_batches b ON b.rules_id = r.id
          WHERE c.code = $1"
    ))
    .persistent(crate::db::keep_statements())
    .bind(code)
    .fetch_optional(db)
    .await?;
    row.as_ref().map(rules_of).transpose()
}

/// The code's rules, its uses left and when it was disabled (admin view; reads the counter
/// row).
pub async fn find_with_uses_left(
    db: &PgPool,
    code: &str,
) -> Result<Option<(CodeRules, i64, Option<DateTime<Utc>>)>, sqlx::Error> {
    let row = sqlx::query(&format!(
        "SELECT {RULES_COLUMNS}, c.uses_left, c.disabled_at FROM coupon_codes c
           JOIN coupon_rules r ON r.id = c.rules_id
           LEFT JOIN coupon_batches b ON b.rules_id = r.id
          WHERE c.code = $1"
    ))
    .persistent(crate::db::keep_statements())
    .bind(code)
    .fetch_optional(db)
    .await?;
    row.map(|row| {
        Ok((
            rules_of(&row)?,
            row.try_get("uses_left")?,
            row.try_get("disabled_at")?,
        ))
    })
    .transpose()
}

/// A use to take.
#[derive(Debug, Clone)]
pub struct NewUse<'a> {
    pub id: &'a str,
    pub code: &'a str,
    pub customer: &'a str,
    pub order: &'a str,
    pub cart_total: i64,
    pub discount: i64,
    pub hold_seconds: i64,
    pub idempotency_key: &'a str,
    pub request_fp: &'a str,
}

/// What the take statement decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Take {
    /// One use taken and her use saved as held. `uses_left` and `version` are the counter's
    /// after the take.
    Taken {
        held_until: DateTime<Utc>,
        uses_left: i64,
        version: i64,
    },
    /// Refused: no use left, the code is disabled, she holds / used it already, or the order
    /// has a use of it. See [`refusal`].
    Refused,
}

/// The one atomic step of a use: one statement takes one of the
/// uses left only if any is left (`uses_left > 0`, never below zero), the code is not
/// disabled and the order has no held or used use of the code, and saves her use as held.
/// Once per customer and one use per (code, order) are partial unique indexes over held and
/// used uses (`coupon_uses_once_per_customer`, `coupon_uses_one_per_order`): a second use
/// that slips past the `NOT EXISTS` checks (two at once) fails the insert, which undoes the
/// take of the same statement.
pub async fn take(db: &PgPool, u: &NewUse<'_>) -> Result<Take, sqlx::Error> {
    let row = sqlx::query(
        "WITH take AS (
            UPDATE coupon_codes c SET uses_left = c.uses_left - 1, version = c.version + 1
              FROM coupon_rules r
             WHERE c.code = $2 AND r.id = c.rules_id AND c.uses_left > 0
               AND c.disabled_at IS NULL
               AND NOT EXISTS (
                   SELECT 1 FROM coupon_uses o
                    WHERE o.code = $2 AND o.order_ref = $4 AND o.status IN ('held', 'used'))
               AND NOT (r.once_per_customer AND EXISTS (
                   SELECT 1 FROM coupon_uses u
                    WHERE u.code = $2 AND u.customer_id = $3 AND u.status IN ('held', 'used')))
            RETURNING c.uses_left, c.version, r.once_per_customer
         ), used AS (
            INSERT INTO coupon_uses (id, code, customer_id, order_ref, cart_total, discount,
                status, once_per_customer, held_until, idempotency_key, request_fp)
            SELECT $1, $2, $3, $4, $5, $6, 'held', take.once_per_customer,
                   now() + make_interval(secs => $7::double precision), $8, $9
              FROM take
            RETURNING held_until
         )
         SELECT used.held_until, take.uses_left, take.version FROM used, take",
    )
    .persistent(crate::db::keep_statements())
    .bind(u.id)
    .bind(u.code)
    .bind(u.customer)
    .bind(u.order)
    .bind(u.cart_total)
    .bind(u.discount)
    .bind(u.hold_seconds as f64)
    .bind(u.idempotency_key)
    .bind(u.request_fp)
    .fetch_optional(db)
    .await;
    match row {
        Ok(Some(row)) => Ok(Take::Taken {
            held_until: row.get("held_until"),
            uses_left: row.get("uses_left"),
            version: row.get("version"),
        }),
        Ok(None) => Ok(Take::Refused),
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("23505") => Ok(Take::Refused),
        Err(e) => Err(e),
    }
}

/// A stored use.
#[derive(Debug, Clone)]
pub struct UseRow {
    pub id: String,
    pub code: String,
    pub customer_id: String,
    pub cart_total: i64,
    pub discount: i64,
    pub status: UseStatus,
    pub held_until: DateTime<Utc>,
    pub idempotency_key: String,
    pub request_fp: String,
}

fn use_of(row: &sqlx::postgres::PgRow) -> sqlx::Result<UseRow> {
    Ok(UseRow {
        id: row.try_get("id")?,
        code: row.try_get("code")?,
        customer_id: row.try_get("customer_id")?,
        cart_total: row.try_get("cart_total")?,
        discount: row.try_get("discount")?,
        status: row.try_get("status")?,
        held_until: row.try_get("held_until")?,
        idempotency_key: row.try_get("idempotency_key")?,
        request_fp: row.try_get("request_fp")?,
    })
}

const USE_COLUMNS: &str =
    "id, code, customer_id, cart_total, discount, status, held_until, idempotency_key, request_fp";

/// Why a take was refused, read after it.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// Her held or used use of the code (when once per customer).
    pub mine: Option<UseRow>,
    /// The order's held or used use of the code (one use per (code, order)).
    pub order_use: Option<UseRow>,
    /// The counter: uses left and its version.
    pub uses_left: i64,
    pub version: i64,
    /// True when a manager disabled the code.
    pub disabled: bool,
}

/// Why a take was refused: her use, the order's use, the counter and the disabled flag.
pub async fn refusal(
    db: &PgPool,
    code: &str,
    customer: &str,
    order: &str,
) -> Result<Refusal, sqlx::Error> {
    let mine = sqlx::query(&format!(
        "SELECT {USE_COLUMNS} FROM coupon_uses
          WHERE code = $1 AND customer_id = $2 AND once_per_customer
            AND status IN ('held', 'used')
          LIMIT 1"
    ))
    .persistent(crate::db::keep_statements())
    .bind(code)
    .bind(customer)
    .fetch_optional(db)
    .await?;
    let order_use = sqlx::query(&format!(
        "SELECT {USE_COLUMNS} FROM coupon_uses
          WHERE code = $1 AND order_ref = $2 AND status IN ('held', 'used')
          LIMIT 1"
    ))
    .persistent(crate::db::keep_statements())
    .bind(code)
    .bind(order)
    .fetch_optional(db)
    .await?;
    let (uses_left, version, disabled): (i64, i64, bool) = sqlx::query_as(
        "SELECT uses_left, version, disabled_at IS NOT NULL FROM coupon_codes WHERE code = $1",
    )
    .persistent(crate::db::keep_statements())
    .bind(code)
    .fetch_optional(db)
    .await?
    .unwrap_or((0, 0, false));
    Ok(Refusal {
        mine: mine.as_ref().map(use_of).transpose()?,
        order_use: order_use.as_ref().map(use_of).transpose()?,
        uses_left,
        version,
        disabled,
    })
}

/// A use by id.
pub async fn find_use(db: &PgPool, id: &str) -> Result<Option<UseRow>, sqlx::Error> {
    let row = sqlx::query(&format!(
        "SELECT {USE_COLUMNS} FROM coupon_uses WHERE id = $1"
    ))
    .persistent(crate::db::keep_statements())
    .bind(id)
    .fetch_optional(db)
    .await?;
    row.as_ref().map(use_of).transpose()
}

/// Marks a held use as used (payment went through). Returns the use after the call, whether
/// this call confirmed it or it already was; `None` when no such use.
pub async fn confirm(db: &PgPool, id: &str) -> Result<Option<UseRow>, sqlx::Error> {
    sqlx::query(
        "UPDATE coupon_uses SET status = 'used', updated_at = now()
          WHERE id = $1 AND status = 'held'",
    )
    .persistent(crate::db::keep_statements())
    .bind(id)
    .execute(db)
    .await?;
    find_use(db, id).await
}

/// A use released, with the counter after its use came back.
#[derive(Debug, Clone)]
pub struct Released {
    pub use_id: String,
    pub code: String,
    pub customer_id: String,
    pub uses_left: i64,
    pub version: i64,
    /// True when the code is disabled.
    pub disabled: bool,
}

fn released_of(row: &sqlx::postgres::PgRow) -> Released {
    Released {
        use_id: row.get("id"),
        code: row.get("code"),
        customer_id: row.get("customer_id"),
        uses_left: row.get("uses_left"),
        version: row.get("version"),
        disabled: row.get("disabled"),
    }
}

/// Releases a held use (payment failed): in one statement her use becomes `released` and the
/// count goes back up by 1. Exactly once: only a `held` use is released, and a concurrent
/// release or sweep waits for the row and then finds it released. `None` when this call
/// released nothing (look at the use to say why).
pub async fn release(db: &PgPool, id: &str) -> Result<Option<Released>, sqlx::Error> {
    let row = sqlx::query(
        "WITH u AS (
            UPDATE coupon_uses SET status = 'released', released_by = 'service', updated_at = now()
             WHERE id = $1 AND status = 'held'
            RETURNING id, code, customer_id
         ), c AS (
            UPDATE coupon_codes SET uses_left = coupon_codes.uses_left + 1,
                   version = coupon_codes.version + 1
              FROM u WHERE coupon_codes.code = u.code
            RETURNING coupon_codes.code, coupon_codes.uses_left, coupon_codes.version,
                      coupon_codes.disabled_at IS NOT NULL AS disabled
         )
         SELECT u.id, u.code, u.customer_id, c.uses_left, c.version, c.disabled FROM u JOIN c ON c.code = u.code",
    ).persistent(crate::db::keep_statements())
    .bind(id)
    .fetch_optional(db)
    .await?;
    Ok(row.as_ref().map(released_of))
}

/// Releases up to `limit` held uses past `held_until` (the sweeper), in one statement: rows
/// another transaction holds are skipped (`SKIP LOCKED`) and every use is re-checked to be
/// still `held`, so a use is released exactly once even when the release call and sweepers
/// of several origins race.
pub async fn sweep(db: &PgPool, limit: i64) -> Result<Vec<Released>, sqlx::Error> {
    let rows = sqlx::query(
        "WITH u AS (
            UPDATE coupon_uses SET status = 'released', released_by = 'sweeper', updated_at = now()
             WHERE id IN (SELECT id FROM coupon_uses
                           WHERE status = 'held' AND held_until < now()
                           ORDER BY held_until LIMIT $1
                           FOR UPDATE SKIP LOCKED)
               AND status = 'held'
            RETURNING id, code, customer_id
         ), n AS (SELECT code, count(*) AS n FROM u GROUP BY code),
         c AS (
            UPDATE coupon_codes SET uses_left = coupon_codes.uses_left + n.n,
                   version = coupon_codes.version + 1
              FROM n WHERE coupon_codes.code = n.code
            RETURNING coupon_codes.code, coupon_codes.uses_left, coupon_codes.version,
                      coupon_codes.disabled_at IS NOT NULL AS disabled
         )
         SELECT u.id, u.code, u.customer_id, c.uses_left, c.version, c.disabled FROM u JOIN c ON c.code = u.code",
    ).persistent(crate::db::keep_statements())
    .bind(limit)
    .fetch_all(db)
    .await?;
    Ok(rows.iter().map(released_of).collect())
}
