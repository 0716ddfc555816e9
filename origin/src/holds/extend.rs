//! Extension of one hold (`POST /api/v1/claims/{id}/extend`): `held_until` moves later by up to
//! the campaign's `hold_extension_seconds`, once per claim, only while the hold is still held.
//!
//! The extension is one conditional `UPDATE` of `claims.held_until` (see [`extend_hold`]), so
//! the two decisions that read `held_until` see the new end as soon as it commits:
//! - the expiry sweeper ([`super::expiry::expire_due`]) picks `held_until <= now()` rows with
//!   `FOR UPDATE SKIP LOCKED`: a row being extended is skipped, and a row extended after the
//!   sweeper's snapshot is re-checked on its new version (no longer due);
//! - `pay` ([`super::change::pay`]) pays while `held_until > now()`.
//!
//! Whichever of an extend and a sweep locks the row first wins; the other's condition no
//! longer matches and it changes nothing (the extend then answers `hold_expired`). Redis keeps
//! no per-hold deadline (the gate holds units and holders, not times), so nothing else follows.

use flashgate_shared::api::{ClaimStatus, HoldReply};

use super::change::find_life;
use crate::claims::store::ClaimRow;
use crate::db::{Conn, Db};
use crate::webhooks::{self, events::NewEvent};
use flashgate_shared::api::webhooks::EventType;

/// What an extend call ends with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extend {
    /// A [`HoldReply`]: `extended` (200), or `already_extended`, `hold_expired`, `released`,
    /// `already_paid`, `not_a_hold` (409).
    Reply(HoldReply),
    /// The campaign's `hold_extension_seconds` is 0: its holds cannot be extended (422).
    Off,
    /// The request's `seconds` is not 1..=the campaign's `hold_extension_seconds` (`max`) (422).
    TooLong {
        /// The campaign's `hold_extension_seconds`.
        max: i64,
    },
    /// The claim was extended with this `Idempotency-Key` and another body (422
    /// `idempotency_key_reused`).
    KeyReused,
}

/// Extends hold `claim_id` by `seconds` (`None`: the campaign's `hold_extension_seconds`) in
/// one statement: the conditional `UPDATE … WHERE status = 'held' AND held_until > now() AND
/// extended_at IS NULL` joined to the campaign's limit, and its `extended` ledger row (by
/// `actor`, recording `key` and the request's fingerprint `fp`). Runs in the caller's
/// transaction (`conn`).
///
/// The `claim.extended` event of this change is written right after this statement, in the
/// same transaction ([`extend`]).
///
/// The extended row, or `None` when this call may not extend the claim (unknown, not held,
/// past `held_until`, extended before, extension off, `seconds` past the limit).
pub async fn extend_hold(
    conn: &mut Conn<'_>,
    claim_id: &str,
    seconds: Option<i32>,
    key: &str,
    fp: &str,
    actor: &str,
) -> sqlx::Result<Option<ClaimRow>> {
    sqlx::query_as!(
        ClaimRow,
        r#"WITH c AS (
            UPDATE claims c
               SET held_until = c.held_until
                       + make_interval(secs => COALESCE($2::int, k.hold_extension_seconds)),
                   extended_at = now(), extend_key = $3, extend_fp = $5, updated_at = now()
              FROM campaigns k
             WHERE c.id = $1 AND k.id = c.campaign_id
               AND c.status = 'held' AND c.held_until > now() AND c.extended_at IS NULL
               AND k.hold_extension_seconds > 0
               AND COALESCE($2::int, k.hold_extension_seconds)
                   BETWEEN 1 AND k.hold_extension_seconds
            RETURNING c.*, COALESCE($2::int, k.hold_extension_seconds) AS added
         ), l AS (
            INSERT INTO ledger (claim_id, campaign_id, customer_id, event, actor, reason)
            SELECT id, campaign_id, customer_id, 'extended', $4,
                   'held_until + ' || added || ' s'
              FROM c
         )
         SELECT id AS "id!", campaign_id AS "campaign_id!", customer_id AS "customer_id!",
                status AS "status!: ClaimStatus", held_until, code,
                idempotency_key AS "idempotency_key!", request_fp AS "request_fp!",
                created_at AS "created_at!"
           FROM c"#,
        claim_id,
        seconds,
        key,
        actor,
        fp,
    )
    .fetch_optional(&mut *conn)
    .await
}

/// The facts a refused extend is answered from.
#[derive(Debug, Clone)]
struct Refused {
    row: ClaimRow,
    /// The `Idempotency-Key` of the claim's extension, if it was extended.
    extend_key: Option<String>,
    /// The fingerprint of that extension's request (`None` for one made before it was kept).
    extend_fp: Option<String>,
    /// Whether `held_until` has passed (by PostgreSQL's clock, as the sweeper reads it).
    past: bool,
    /// The campaign's `hold_extension_seconds`.
    limit: i64,
}

async fn find_refused(db: &Db, claim_id: &str) -> sqlx::Result<Option<Refused>> {
    let Some(life) = find_life(db, claim_id).await? else {
        return Ok(None);
    };
    let r = sqlx::query!(
        r#"SELECT c.extend_key, c.extend_fp, COALESCE(c.held_until <= now(), false) AS "past!",
                  k.hold_extension_seconds
             FROM claims c JOIN campaigns k ON k.id = c.campaign_id WHERE c.id = $1"#,
        claim_id
    )
    .fetch_one(db)
    .await?;
    Ok(Some(Refused {
        row: life.row,
        extend_key: r.extend_key,
        extend_fp: r.extend_fp,
        past: r.past,
        limit: i64::from(r.hold_extension_seconds),
    }))
}

/// The answer to a refused extend of `key` (request fingerprint `fp`) asking for `seconds`,
/// from the claim as it is now.
fn refusal(r: Refused, key: &str, fp: &str, seconds: Option<i32>) -> Extend {
    if r.extend_key.as_deref() == Some(key) {
        if r.extend_fp.as_deref().is_some_and(|first| first != fp) {
            return Extend::KeyReused;
        }
        // The same request again: the same 200, with the claim as it is now.
        return Extend::Reply(HoldReply::Extended {
            held_until: r.row.held_until.unwrap_or(r.row.created_at),
            claim: r.row.to_claim(),
        });
    }
    let claim = r.row.to_claim();
    Extend::Reply(match r.row.status {
        ClaimStatus::Issued | ClaimStatus::Redeemed => HoldReply::NotAHold,
        ClaimStatus::Paid => HoldReply::AlreadyPaid { claim },
        ClaimStatus::Released => HoldReply::Released { claim },
        ClaimStatus::Expired => HoldReply::HoldExpired,
        ClaimStatus::Held if r.past => HoldReply::HoldExpired,
        ClaimStatus::Held if r.extend_key.is_some() => HoldReply::AlreadyExtended { claim },
        ClaimStatus::Held if r.limit == 0 => return Extend::Off,
        ClaimStatus::Held if !(1..=r.limit).contains(&i64::from(seconds.unwrap_or(1))) => {
            return Extend::TooLong { max: r.limit }
        }
        // Not reachable by any transition (the statement above would have extended it);
        // answered as over, changing nothing.
        ClaimStatus::Held => HoldReply::HoldExpired,
    })
}

/// Extends hold `claim_id` by `seconds` (`None`: all the campaign allows) for the request with
/// Idempotency-Key `key` and fingerprint `fp` ([`crate::idempotency::fingerprint`] of the
/// claim and the parsed body). `Ok(None)`: no such claim (404).
///
/// Answers: `extended` with the new `held_until` (also for the same `key` and body again;
/// [`Extend::KeyReused`] for the same `key` with another body);
/// `already_extended` (extended before with another key), `hold_expired` (past `held_until`
/// or expired), `released`, `already_paid`, `not_a_hold`; [`Extend::Off`] and
/// [`Extend::TooLong`] for a campaign that does not allow it.
pub async fn extend(
    db: &Db,
    claim_id: &str,
    seconds: Option<i32>,
    key: &str,
    fp: &str,
    actor: &str,
) -> sqlx::Result<Option<Extend>> {
    let mut tx = db.begin().await?;
    let extended = extend_hold(&mut tx, claim_id, seconds, key, fp, actor).await?;
    if let Some(r) = &extended {
        let event = NewEvent::claim(
            EventType::ClaimExtended,
            &r.campaign_id,
            &r.id,
            &r.customer_id,
            r.status,
            r.held_until,
            None,
        );
        webhooks::events::emit(&mut tx, &[event]).await?;
    }
    tx.commit().await?;
    if let Some(row) = extended {
        return Ok(Some(Extend::Reply(HoldReply::Extended {
            held_until: row.held_until.unwrap_or(row.created_at),
            claim: row.to_claim(),
        })));
    }
    Ok(find_refused(db, claim_id)
        .await?
        .map(|r| refusal(r, key, fp, seconds)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::Utc;

    fn refused(status: ClaimStatus, key: Option<&str>, past: bool, limit: i64) -> Refused {
        Refused {
            row: ClaimRow {
                id: "c_1".into(),
                campaign_id: "s".into(),
                customer_id: "ana".into(),
                status,
                held_until: Some(Utc::now()),
                code: None,
                idempotency_key: "k".into(),
                request_fp: "fp".into(),
                created_at: Utc::now(),
            },
            extend_key: key.map(str::to_string),
            extend_fp: key.map(|_| "fp1".to_string()),
            past,
            limit,
        }
    }

    fn result(e: &Extend) -> String {
        match e {
            Extend::Reply(r) => serde_json::to_value(r).unwrap()["result"]
                .as_str()
                .unwrap()
                .to_string(),
            Extend::Off => "off".into(),
            Extend::TooLong { max } => format!("too_long {max}"),
            Extend::KeyReused => "key_reused".into(),
        }
    }

    #[test]
    fn refusals_name_what_happened_to_the_hold() {
        use ClaimStatus::*;
        #[rustfmt::skip]
        let cases = [
            (refused(Held, Some("k1"), false, 60), None, "extended"),
            (refused(Paid, Some("k1"), false, 60), None, "extended"),
            (refused(Held, Some("k0"), false, 60), None, "already_extended"),
            (refused(Held, Some("k0"), true, 60), None, "hold_expired"),
            (refused(Held, None, true, 60), None, "hold_expired"),
            (refused(Expired, None, true, 60), None, "hold_expired"),
            (refused(Released, None, false, 60), None, "released"),
            (refused(Paid, None, false, 60), None, "already_paid"),
            (refused(Issued, None, false, 0), None, "not_a_hold"),
            (refused(Held, None, false, 0), None, "off"),
            (refused(Held, None, false, 60), Some(61), "too_long 60"),
            (refused(Held, None, false, 60), Some(0), "too_long 60"),
        ];
        for (r, seconds, want) in cases {
            assert_eq!(result(&refusal(r, "k1", "fp1", seconds)), want);
        }
        let r = refused(Held, Some("k1"), false, 60);
        assert_eq!(result(&refusal(r, "k1", "fp2", None)), "key_reused");
        let mut r = refused(Held, Some("k1"), false, 60);
        r.extend_fp = None;
        assert_eq!(result(&refusal(r, "k1", "fp2", None)), "extended");
    }
}
