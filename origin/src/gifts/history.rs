//! The delivery history of an outbox row (table `delivery_attempts`, migrations/
//! 0011_delivery_attempts.sql): one append-only entry per provider call and per change of the
//! delivery's course (it gave up, a manager retried it). The outbox row keeps the current
//! state only; its `attempts` count starts again at a manager's retry, this history does not.
//! Written in the same transaction as the outbox change it explains, so the two never
//! disagree. Keyed by ([`Outbox`], row id): other outboxes keep their history in the same table.

use flashgate_shared::api::gifts::{DeliveryAttempt, DeliveryOutcome};
use uuid::Uuid;

use crate::db::{Conn, Db};

/// Which outbox a history entry belongs to (the `outbox` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outbox {
    /// `gift_outbox`, keyed by the fulfilment id.
    Gift,
}

impl Outbox {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Outbox::Gift => "gift",
        }
    }
}

/// One entry to append: a call (`attempt` set) or a change of course.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<'a> {
    pub outcome: DeliveryOutcome,
    pub attempt: Option<i32>,
    pub answer: Option<&'a str>,
    pub actor: Option<&'a str>,
}

impl<'a> Entry<'a> {
    /// Call number `attempt` of its round ended with `outcome` and the provider's `answer`.
    pub fn call(attempt: i32, outcome: DeliveryOutcome, answer: &'a str) -> Self {
        Entry {
            outcome,
            attempt: Some(attempt),
            answer: Some(answer),
            actor: None,
        }
    }

    /// The delivery gave up after the provider's last `answer`.
    pub fn failed(answer: &'a str) -> Self {
        Entry {
            outcome: DeliveryOutcome::Failed,
            attempt: None,
            answer: Some(answer),
            actor: None,
        }
    }
}

/// Appends `entry` to the history of row `id` of `outbox`, inside the caller's transaction.
pub async fn append(
    conn: &mut Conn<'_>,
    outbox: Outbox,
    id: Uuid,
    entry: &Entry<'_>,
) -> sqlx::Result<()> {
    sqlx::query!(
        "INSERT INTO delivery_attempts (outbox, outbox_id, outcome, attempt, answer, actor)
         VALUES ($1, $2, $3, $4, $5, $6)",
        outbox.as_str(),
        id,
        entry.outcome.as_str(),
        entry.attempt,
        entry.answer,
        entry.actor,
    )
    .execute(conn)
    .await?;
    Ok(())
}

/// The whole history of row `id` of `outbox`, oldest first (empty for an unknown row).
pub async fn of(db: &Db, outbox: Outbox, id: Uuid) -> sqlx::Result<Vec<DeliveryAttempt>> {
    sqlx::query_as!(
        DeliveryAttempt,
        r#"SELECT outcome AS "outcome: DeliveryOutcome", attempt, answer, actor, at
             FROM delivery_attempts WHERE outbox = $1 AND outbox_id = $2 ORDER BY seq"#,
        outbox.as_str(),
        id,
    )
    .fetch_all(db)
    .await
}
