//! Group commit of winners: claims that passed the gate at about the same time are written to
//! PostgreSQL in one transaction, so the durable path runs at batch speed, not at one fsync per
//! claim (docs/ARCHITECTURE.md, "Grouped commits"; `bench_origin` in tests/ measures the
//! durable claims/s of this path).
//!
//! One transaction per campaign per batch:
//! 1. `INSERT … SELECT FROM UNNEST(…) RETURNING` (with each claim's variant, on a campaign with
//!    variants) — the unique index over active (campaign, customer) claims, and the unique
//!    coupon code, refuse duplicates. A refusal rolls the batch back and it is written again
//!    with `ON CONFLICT DO NOTHING`, which leaves the refused claims out ([`try_commit`]);
//! 2. one ledger row per claim;
//! 3. one `claim.held` (`coupon.issued`) event per claim ([`crate::webhooks::events`]);
//! 4. `UPDATE campaigns SET remaining = remaining − n WHERE … remaining >= n AND NOT paused AND
//!    starts_at <= now() AND ends_at > now()` — the record decides. Every batch of the
//!    campaign locks this row, so it comes after the writes that need no lock of it: the
//!    lock is held for steps 4–6 and the commit only;
//! 5. on a campaign with variants, `UPDATE campaign_variants SET remaining = remaining − n
//!    WHERE … remaining >= n` per variant ([`take_variants`]): a variant short of units
//!    refuses the batch as step 4 does;
//! 6. `campaign.sold_out` when the batch took the last unit.
//!
//! If step 4 or 5 refuses, the batch rolls back and each claim is retried in a transaction of its
//! own, so one refusal never sinks the others. Each waiting request is answered only after the
//! commit that contains its claim. The workers run as their own tasks: a client that
//! disconnects cannot interrupt a transaction.

use std::collections::HashMap;
use std::sync::Arc;

use crate::db::Db;
use flashgate_shared::api::{CampaignKind, ClaimStatus};
use tokio::sync::{mpsc, oneshot, Mutex};

use super::store::{self, ClaimRow};
use crate::campaigns::store as campaigns;
use crate::campaigns::CampaignRow;
use crate::metrics::Metrics;
use crate::webhooks::{self, events::NewEvent};
use flashgate_shared::api::webhooks::{CampaignData, EventType};

/// A claim that passed the gate, to be written.
#[derive(Debug, Clone)]
pub struct NewClaim {
    pub id: String,
    pub campaign_id: String,
    pub customer_id: String,
    pub kind: CampaignKind,
    /// Sale: hold length in seconds.
    pub hold_seconds: Option<i32>,
    /// Giveaway: the coupon code.
    pub code: Option<String>,
    pub idempotency_key: String,
    pub request_fp: String,
    /// The variant claimed, on a campaign with variants.
    pub variant: Option<String>,
}

/// What PostgreSQL decided for one claim.
#[derive(Debug)]
pub enum Outcome {
    /// Written; she won.
    Committed(ClaimRow),
    /// She already has an active claim on the campaign (the unique index refused).
    AlreadyClaimed(ClaimRow),
    /// The record refused: no unit left, or the campaign is paused, not started or ended.
    /// Carries the campaign as it is now.
    Refused(CampaignRow),
    /// The coupon code is taken by another claim: draw a new one and try again.
    CodeTaken,
}

struct Job {
    claim: NewClaim,
    reply: oneshot::Sender<sqlx::Result<Outcome>>,
}

/// Handle to the commit workers.
#[derive(Clone)]
pub struct Committer {
    tx: mpsc::Sender<Job>,
}

impl Committer {
    /// Starts `workers` commit tasks that take up to `batch_max` claims per transaction; each
    /// batch's size and time go to `metrics` (`flashgate_commit_batch_size`,
    /// `flashgate_commit_duration_seconds`).
    pub fn start(db: Db, workers: usize, batch_max: usize, metrics: Arc<Metrics>) -> Self {
        let (tx, rx) = mpsc::channel::<Job>(batch_max * 4);
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..workers.max(1) {
            let (db, rx, metrics) = (db.clone(), rx.clone(), metrics.clone());
            tokio::spawn(async move {
                loop {
                    let batch = {
                        let mut rx = rx.lock().await;
                        let Some(first) = rx.recv().await else { return };
                        let mut batch = vec![first];
                        while batch.len() < batch_max {
                            match rx.try_recv() {
                                Ok(job) => batch.push(job),
                                Err(_) => break,
                            }
                        }
                        batch
                    };
                    // A panic inside the driver drops the batch's reply senders (each waiting
                    // request answers 503; its transaction rolled back) and the worker goes on.
                    let (size, t0) = (batch.len(), std::time::Instant::now());
                    crate::panics::catch("commit batch", run_batch(&db, batch)).await;
                    metrics.commit(size, t0.elapsed());
                }
            });
        }
        Committer { tx }
    }

    /// Writes `claim` in the next batch and waits for PostgreSQL's decision.
    pub async fn commit(&self, claim: NewClaim) -> sqlx::Result<Outcome> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job { claim, reply })
            .await
            .map_err(|_| sqlx::Error::PoolClosed)?;
        rx.await.unwrap_or(Err(sqlx::Error::PoolClosed))
    }
}

async fn run_batch(db: &Db, batch: Vec<Job>) {
    let mut by_campaign: HashMap<String, Vec<Job>> = HashMap::new();
    for job in batch {
        by_campaign
            .entry(job.claim.campaign_id.clone())
            .or_default()
            .push(job);
    }
    for (_, jobs) in by_campaign {
        commit_group(db, jobs).await;
    }
}

async fn commit_group(db: &Db, jobs: Vec<Job>) {
    let claims: Vec<&NewClaim> = jobs.iter().map(|j| &j.claim).collect();
    match try_commit(db, &claims).await {
        Ok(Some(decided)) => {
            for (job, outcome) in jobs.into_iter().zip(decided) {
                let _ = job.reply.send(Ok(outcome));
            }
        }
        Ok(None) if jobs.len() > 1 => {
            // The record refused the whole batch: decide claim by claim.
            for job in jobs {
                let outcome = match try_commit(db, &[&job.claim]).await {
                    Ok(Some(mut one)) => Ok(one.remove(0)),
                    Ok(None) => refused(db, &job.claim.campaign_id).await,
                    Err(e) => Err(e),
                };
                let _ = job.reply.send(outcome);
            }
        }
        Ok(None) => {
            // A batch of one that the record refused.
            for job in jobs {
                let _ = job.reply.send(refused(db, &job.claim.campaign_id).await);
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "claim batch failed");
            for job in jobs {
                let _ = job.reply.send(Err(sqlx::Error::PoolClosed));
            }
        }
    }
}

/// Step 5 of the module documentation: takes the units of the claims `inserted` from their
/// variants (`of`: claim id → variant), in the batch's transaction. Returns false when a
/// variant has fewer units than the batch takes of it (the caller rolls back). Nothing to do
/// (true) on a campaign without variants.
async fn take_variants(
    conn: &mut crate::db::Conn<'_>,
    c: &str,
    of: &HashMap<&str, &str>,
    inserted: &[ClaimRow],
) -> sqlx::Result<bool> {
    if of.is_empty() {
        return Ok(true);
    }
    let mut counts: HashMap<&str, i64> = HashMap::new();
    for row in inserted {
        if let Some(&v) = of.get(row.id.as_str()) {
            *counts.entry(v).or_default() += 1;
        }
    }
    if counts.is_empty() {
        return Ok(true);
    }
    let (names, takes): (Vec<&str>, Vec<i64>) = counts.into_iter().unzip();
    let taken: Vec<(String,)> = sqlx::query_as(
        "UPDATE campaign_variants v SET remaining = v.remaining - t.n, updated_at = now()
           FROM UNNEST($2::text[], $3::bigint[]) AS t(id, n)
          WHERE v.campaign_id = $1 AND v.id = t.id AND v.remaining >= t.n
          RETURNING v.id",
    )
    .bind(c)
    .bind(&names)
    .bind(&takes)
    .fetch_all(&mut *conn)
    .await?;
    Ok(taken.len() == names.len())
}

async fn refused(db: &Db, c: &str) -> sqlx::Result<Outcome> {
    campaigns::find(db, c)
        .await?
        .map(Outcome::Refused)
        .ok_or(sqlx::Error::RowNotFound)
}

/// Writes `claims` (all of one campaign) in one transaction: first with a plain `INSERT`, and
/// only when a unique index refuses one of them (a customer's second active claim, a taken
/// coupon code: rare, the gate sees to it) again with `ON CONFLICT DO NOTHING`, which checks
/// every unique index before each row (docs/ARCHITECTURE.md, "Grouped commits").
/// `Ok(None)`: the campaign row refused (rolled back). Otherwise one outcome per claim, in order.
async fn try_commit(db: &Db, claims: &[&NewClaim]) -> sqlx::Result<Option<Vec<Outcome>>> {
    match write(db, claims, Insert::Plain).await? {
        Decision::Decided(outcomes) => Ok(Some(outcomes)),
        Decision::Refused => Ok(None),
        Decision::Taken => match write(db, claims, Insert::SkipTaken).await? {
            Decision::Decided(outcomes) => Ok(Some(outcomes)),
            // `SkipTaken` never answers `Taken`.
            Decision::Refused | Decision::Taken => Ok(None),
        },
    }
}

/// How [`write`] inserts the claims.
#[derive(Clone, Copy)]
enum Insert {
    /// Every claim or none: a unique index's refusal ends the transaction ([`Decision::Taken`]).
    Plain,
    /// `ON CONFLICT DO NOTHING`: a refused claim is left out, the others are written.
    SkipTaken,
}

/// What one transaction of [`write`] decided.
enum Decision {
    /// Committed: one outcome per claim, in order.
    Decided(Vec<Outcome>),
    /// The campaign row (or a variant's) refused the batch; rolled back.
    Refused,
    /// A unique index refused a claim of an [`Insert::Plain`] batch; rolled back.
    Taken,
}

fn is_unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d) if d.is_unique_violation())
}

/// One transaction for `claims` (all of one campaign), inserted as `insert` says.
async fn write(db: &Db, claims: &[&NewClaim], insert: Insert) -> sqlx::Result<Decision> {
    let c = &claims[0].campaign_id;
    let kind = claims[0].kind;
    let hold = claims[0].hold_seconds;
    let ids: Vec<&str> = claims.iter().map(|x| x.id.as_str()).collect();
    let customers: Vec<&str> = claims.iter().map(|x| x.customer_id.as_str()).collect();
    let codes: Vec<Option<&str>> = claims.iter().map(|x| x.code.as_deref()).collect();
    let keys: Vec<&str> = claims.iter().map(|x| x.idempotency_key.as_str()).collect();
    let fps: Vec<&str> = claims.iter().map(|x| x.request_fp.as_str()).collect();
    let variants: Vec<Option<&str>> = claims.iter().map(|x| x.variant.as_deref()).collect();
    let status = match kind {
        CampaignKind::Sale => ClaimStatus::Held,
        CampaignKind::Giveaway => ClaimStatus::Issued,
    };

    let mut tx = db.begin().await?;
    // Runs `INSERT … SELECT FROM UNNEST(…)` with `$on_conflict` before its `RETURNING`: the
    // statement is the same in both modes but for that clause.
    macro_rules! insert_claims {
        ($on_conflict:tt) => {
            sqlx::query_as!(
                ClaimRow,
                r#"INSERT INTO claims (id, campaign_id, customer_id, status, held_until, code,
                                     idempotency_key, request_fp, variant)
                 SELECT t.id, $1, t.customer_id, $2,
                        CASE WHEN $3::int IS NULL THEN NULL
                             ELSE now() + make_interval(secs => $3::int) END,
                        t.code, t.idem, t.fp, t.variant
                   FROM UNNEST($4::text[], $5::text[], $6::text[], $7::text[], $8::text[],
                               $9::text[]) AS t(id, customer_id, code, idem, fp, variant) "#
                    + $on_conflict
                    + r#"
                 RETURNING id, campaign_id, customer_id, status AS "status: ClaimStatus",
                           held_until, code, idempotency_key, request_fp, created_at"#,
                c,
                status.as_str(),
                hold,
                &ids[..] as &[&str],
                &customers[..] as &[&str],
                &codes[..] as &[Option<&str>],
                &keys[..] as &[&str],
                &fps[..] as &[&str],
                &variants[..] as &[Option<&str>],
            )
            .fetch_all(&mut *tx)
            .await
        };
    }
    let inserted = match insert {
        Insert::Plain => match insert_claims!("") {
            Err(e) if is_unique_violation(&e) => {
                tx.rollback().await?;
                return Ok(Decision::Taken);
            }
            done => done?,
        },
        Insert::SkipTaken => insert_claims!("ON CONFLICT DO NOTHING")?,
    };

    if !inserted.is_empty() {
        // The ledger and the claims' events first: the campaign row (every batch's hot row)
        // is locked last, so its lock is held for the take and the commit only.
        let won_ids: Vec<&str> = inserted.iter().map(|r| r.id.as_str()).collect();
        let won_customers: Vec<&str> = inserted.iter().map(|r| r.customer_id.as_str()).collect();
        let event = if kind == CampaignKind::Sale {
            "claimed"
        } else {
            "issued"
        };
        sqlx::query!(
            "INSERT INTO ledger (claim_id, campaign_id, customer_id, event, actor, reason)
             SELECT t.id, $1, t.customer_id, $2, 'customer', 'claim request'
               FROM UNNEST($3::text[], $4::text[]) AS t(id, customer_id)",
            c,
            event,
            &won_ids[..] as &[&str],
            &won_customers[..] as &[&str],
        )
        .execute(&mut *tx)
        .await?;
        let (event, status) = match kind {
            CampaignKind::Sale => (EventType::ClaimHeld, ClaimStatus::Held),
            CampaignKind::Giveaway => (EventType::CouponIssued, ClaimStatus::Issued),
        };
        // Each claim's variant as this batch wrote it (none without variants): the events
        // name it, none is read back.
        let variant_of: HashMap<&str, &str> = claims
            .iter()
            .filter_map(|x| x.variant.as_deref().map(|v| (x.id.as_str(), v)))
            .collect();
        let events: Vec<NewEvent> = inserted
            .iter()
            .map(|r| {
                NewEvent::claim(event, c, &r.id, &r.customer_id, status, r.held_until, None)
                    .with_variant(variant_of.get(r.id.as_str()).copied())
                    .of_new_object()
            })
            .collect();
        webhooks::events::emit(&mut tx, &events).await?;
        let n = inserted.len() as i64;
        let took = sqlx::query!(
            "UPDATE campaigns SET remaining = remaining - $2, updated_at = now()
              WHERE id = $1 AND remaining >= $2 AND NOT paused
                AND starts_at <= now() AND ends_at > now()
              RETURNING stock, remaining, paused, ends_at",
            c,
            n,
        )
        .fetch_optional(&mut *tx)
        .await?;
        let Some(took) = took else {
            tx.rollback().await?;
            return Ok(Decision::Refused);
        };
        if !take_variants(&mut tx, c, &variant_of, &inserted).await? {
            tx.rollback().await?;
            return Ok(Decision::Refused);
        }
        if took.remaining == 0 {
            let data = CampaignData {
                stock: took.stock,
                remaining: 0,
                paused: took.paused,
                ends_at: took.ends_at,
            };
            let sold_out = NewEvent::campaign(EventType::CampaignSoldOut, c, data);
            webhooks::events::emit(&mut tx, &[sold_out]).await?;
        }
    }
    tx.commit().await?;

    let mut by_id: HashMap<String, ClaimRow> =
        inserted.into_iter().map(|r| (r.id.clone(), r)).collect();
    let mut outcomes = Vec::with_capacity(claims.len());
    for claim in claims {
        let outcome = match by_id.remove(&claim.id) {
            Some(row) => Outcome::Committed(row),
            None => match store::find_active(db, c, &claim.customer_id).await? {
                Some(existing) => Outcome::AlreadyClaimed(existing),
                None => Outcome::CodeTaken,
            },
        };
        outcomes.push(outcome);
    }
    Ok(Decision::Decided(outcomes))
}
