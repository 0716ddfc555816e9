//! PostgreSQL access of the promo code service (tables of `migrations/0003_coupon_codes.sql`).
//! PostgreSQL is the truth: every take, release and confirm is one conditional statement.

use crate::db::Db;
use crate::webhooks::{self, events::NewEvent};
use chrono::{DateTime, Utc};
use flashgate_shared::api::promo::{CodeKind, UseStatus};
use flashgate_shared::api::webhooks::{CodeUseData, EventType, ReleasedBy};

use super::rules::{CodeRules, NewRules};

/// Inserts a rules row in `tx`; returns its id.
pub async fn insert_rules(tx: &mut crate::db::Conn<'_>, r: &NewRules) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO coupon_rules (kind, percent_off_bp, amount_off, currency, min_order,
             starts_at, ends_at, use_limit, once_per_customer)
         VALUES ($1, $2::bigint::integer, $3, $4, $5, $6, $7, $8, $9) RETURNING id",
        r.kind.as_str(),
        r.percent_off_bp,
        r.amount_off,
        r.currency,
        r.min_order,
        r.starts_at,
        r.ends_at,
        r.use_limit,
        r.once_per_customer,
    )
    .fetch_one(tx)
    .await
}

/// Creates a shared code with its rules. `None` when the code exists (shared or one-time).
pub async fn insert_shared(
    db: &Db,
    code: &str,
    r: &NewRules,
) -> Result<Option<CodeRules>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let rules_id = insert_rules(&mut tx, r).await?;
    let done = sqlx::query!(
        "INSERT INTO coupon_codes (code, rules_id, uses_left) VALUES ($1, $2, $3)
         ON CONFLICT (code) DO NOTHING",
        code,
        rules_id,
        r.use_limit,
    )
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
pub async fn find_rules(db: &Db, code: &str) -> Result<Option<CodeRules>, sqlx::Error> {
    Ok(find_with_uses_left(db, code)
        .await?
        .map(|(rules, _, _)| rules))
}

/// The code's rules, its uses left and when it was disabled (admin view; reads the counter
/// row).
pub async fn find_with_uses_left(
    db: &Db,
    code: &str,
) -> Result<Option<(CodeRules, i64, Option<DateTime<Utc>>)>, sqlx::Error> {
    let row = sqlx::query!(
        r#"SELECT c.code, c.rules_id, r.kind AS "kind: CodeKind",
                  r.percent_off_bp::bigint AS percent_off_bp, r.amount_off, r.currency,
                  r.min_order, r.starts_at, r.ends_at, r.use_limit, r.once_per_customer,
                  b.id AS "batch?", c.uses_left, c.disabled_at
             FROM coupon_codes c
             JOIN coupon_rules r ON r.id = c.rules_id
             LEFT JOIN coupon_batches b ON b.rules_id = r.id
            WHERE c.code = $1"#,
        code
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|row| {
        let rules = CodeRules {
            code: row.code,
            rules_id: row.rules_id,
            rules: NewRules {
                kind: row.kind,
                percent_off_bp: row.percent_off_bp,
                amount_off: row.amount_off,
                currency: row.currency,
                min_order: row.min_order,
                starts_at: row.starts_at,
                ends_at: row.ends_at,
                use_limit: row.use_limit,
                once_per_customer: row.once_per_customer,
            },
            batch: row.batch,
        };
        (rules, row.uses_left, row.disabled_at)
    }))
}

/// The `code_use.*` event of `kind` about a use: `[use id, code, customer, order]`, its
/// `held_until` and who released it (`code_use.released`).
fn use_event(
    kind: EventType,
    [use_id, code, customer, order]: [String; 4],
    held_until: DateTime<Utc>,
    released_by: Option<ReleasedBy>,
) -> NewEvent {
    let status = match kind {
        EventType::CodeUseUsed => UseStatus::Used,
        EventType::CodeUseReleased => UseStatus::Released,
        _ => UseStatus::Held,
    };
    let data = CodeUseData {
        use_id,
        code,
        customer,
        order,
        status,
        held_until,
        released_by,
    };
    NewEvent::code_use(kind, data)
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
/// take of the same statement. A taken use writes its `code_use.held` event in the same
/// transaction.
pub async fn take(db: &Db, u: &NewUse<'_>) -> Result<Take, sqlx::Error> {
    let mut tx = db.begin().await?;
    let row = sqlx::query!(
        r#"WITH take AS (
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
         SELECT used.held_until AS "held_until!", take.uses_left AS "uses_left!",
                take.version AS "version!"
           FROM used, take"#,
        u.id,
        u.code,
        u.customer,
        u.order,
        u.cart_total,
        u.discount,
        u.hold_seconds as f64,
        u.idempotency_key,
        u.request_fp,
    )
    .fetch_optional(&mut *tx)
    .await;
    match row {
        Ok(Some(row)) => {
            let ids = [u.id, u.code, u.customer, u.order].map(str::to_string);
            let event = use_event(EventType::CodeUseHeld, ids, row.held_until, None);
            webhooks::events::emit(&mut tx, &[event]).await?;
            tx.commit().await?;
            Ok(Take::Taken {
                held_until: row.held_until,
                uses_left: row.uses_left,
                version: row.version,
            })
        }
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
    db: &Db,
    code: &str,
    customer: &str,
    order: &str,
) -> Result<Refusal, sqlx::Error> {
    let mine = sqlx::query_as!(
        UseRow,
        r#"SELECT id, code, customer_id, cart_total, discount, status AS "status: UseStatus",
                  held_until, idempotency_key, request_fp
             FROM coupon_uses
            WHERE code = $1 AND customer_id = $2 AND once_per_customer
              AND status IN ('held', 'used')
            LIMIT 1"#,
        code,
        customer,
    )
    .fetch_optional(db)
    .await?;
    let order_use = sqlx::query_as!(
        UseRow,
        r#"SELECT id, code, customer_id, cart_total, discount, status AS "status: UseStatus",
                  held_until, idempotency_key, request_fp
             FROM coupon_uses
            WHERE code = $1 AND order_ref = $2 AND status IN ('held', 'used')
            LIMIT 1"#,
        code,
        order,
    )
    .fetch_optional(db)
    .await?;
    let counter = sqlx::query!(
        r#"SELECT uses_left, version, disabled_at IS NOT NULL AS "disabled!"
             FROM coupon_codes WHERE code = $1"#,
        code
    )
    .fetch_optional(db)
    .await?;
    let (uses_left, version, disabled) =
        counter.map_or((0, 0, false), |c| (c.uses_left, c.version, c.disabled));
    Ok(Refusal {
        mine,
        order_use,
        uses_left,
        version,
        disabled,
    })
}

/// A use by id.
pub async fn find_use(db: &Db, id: &str) -> Result<Option<UseRow>, sqlx::Error> {
    sqlx::query_as!(
        UseRow,
        r#"SELECT id, code, customer_id, cart_total, discount, status AS "status: UseStatus",
                  held_until, idempotency_key, request_fp
             FROM coupon_uses WHERE id = $1"#,
        id
    )
    .fetch_optional(db)
    .await
}

/// Marks a held use as used (payment went through), with its `code_use.used` event in the
/// same transaction. Returns the use after the call, whether this call confirmed it or it
/// already was; `None` when no such use.
pub async fn confirm(db: &Db, id: &str) -> Result<Option<UseRow>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let done = sqlx::query!(
        "UPDATE coupon_uses SET status = 'used', updated_at = now()
          WHERE id = $1 AND status = 'held'
         RETURNING id, code, customer_id, order_ref, held_until",
        id
    )
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(r) = done {
        let ids = [r.id, r.code, r.customer_id, r.order_ref];
        let event = use_event(EventType::CodeUseUsed, ids, r.held_until, None);
        webhooks::events::emit(&mut tx, &[event]).await?;
    }
    tx.commit().await?;
    find_use(db, id).await
}

/// A use released, with the counter after its use came back.
#[derive(Debug, Clone)]
pub struct Released {
    pub use_id: String,
    pub code: String,
    pub customer_id: String,
    pub order_ref: String,
    pub held_until: DateTime<Utc>,
    pub uses_left: i64,
    pub version: i64,
    /// True when the code is disabled.
    pub disabled: bool,
}

/// Releases a held use (payment failed): in one statement her use becomes `released` and the
/// count goes back up by 1. Exactly once: only a `held` use is released, and a concurrent
/// release or sweep waits for the row and then finds it released. `None` when this call
/// released nothing (look at the use to say why).
pub async fn release(db: &Db, id: &str) -> Result<Option<Released>, sqlx::Error> {
    Ok(release_held(db, Some(id), 1).await?.pop())
}

/// Releases up to `limit` held uses past `held_until` (the sweeper), in one statement: rows
/// another transaction holds are skipped (`SKIP LOCKED`) and every use is re-checked to be
/// still `held`, so a use is released exactly once even when the release call and sweepers
/// of several origins race.
pub async fn sweep(db: &Db, limit: i64) -> Result<Vec<Released>, sqlx::Error> {
    release_held(db, None, limit).await
}

/// The one release statement of [`release`] (`id` given: that use, waiting for its row lock;
/// `released_by = 'service'`) and [`sweep`] (`id` `None`: up to `limit` uses past
/// `held_until`, skipping locked rows; `released_by = 'sweeper'`). Each released use gives
/// its unit back to its code's `uses_left` and bumps the code's `version`, in the same
/// statement. Each writes its `code_use.released` event in the same transaction.
async fn release_held(db: &Db, id: Option<&str>, limit: i64) -> Result<Vec<Released>, sqlx::Error> {
    let mut tx = db.begin().await?;
    let released = sqlx::query_as!(
        Released,
        r#"WITH one AS (
            SELECT id FROM coupon_uses WHERE id = $1 AND status = 'held' FOR UPDATE
         ), due AS (
            SELECT id FROM coupon_uses
             WHERE $1::text IS NULL AND status = 'held' AND held_until < now()
             ORDER BY held_until LIMIT $2
             FOR UPDATE SKIP LOCKED
         ), u AS (
            UPDATE coupon_uses
               SET status = 'released', updated_at = now(),
                   released_by = CASE WHEN $1::text IS NULL THEN 'sweeper' ELSE 'service' END
             WHERE id IN (SELECT id FROM one UNION ALL SELECT id FROM due)
               AND status = 'held'
            RETURNING id, code, customer_id, order_ref, held_until
         ), n AS (SELECT code, count(*) AS n FROM u GROUP BY code),
         c AS (
            UPDATE coupon_codes SET uses_left = coupon_codes.uses_left + n.n,
                   version = coupon_codes.version + 1
              FROM n WHERE coupon_codes.code = n.code
            RETURNING coupon_codes.code, coupon_codes.uses_left, coupon_codes.version,
                      coupon_codes.disabled_at IS NOT NULL AS disabled
         )
         SELECT u.id AS "use_id!", u.code AS "code!", u.customer_id AS "customer_id!",
                u.order_ref AS "order_ref!", u.held_until AS "held_until!",
                c.uses_left AS "uses_left!", c.version AS "version!", c.disabled AS "disabled!"
           FROM u JOIN c ON c.code = u.code"#,
        id,
        limit,
    )
    .fetch_all(&mut *tx)
    .await?;
    let by = if id.is_some() {
        ReleasedBy::Service
    } else {
        ReleasedBy::Sweeper
    };
    let events: Vec<NewEvent> = released
        .iter()
        .map(|r| {
            let ids = [&r.use_id, &r.code, &r.customer_id, &r.order_ref].map(String::clone);
            use_event(EventType::CodeUseReleased, ids, r.held_until, Some(by))
        })
        .collect();
    webhooks::events::emit(&mut tx, &events).await?;
    tx.commit().await?;
    Ok(released)
}
