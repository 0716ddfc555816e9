//! Leg 1c: the rows the grouped commit writes per claim — the claim, its ledger row and its
//! `claim.held` outbox event — loaded with `COPY … FROM STDIN` into the same tables, with
//! every index, constraint and trigger they have, in transactions of the grouped commit's
//! size and count. No statement planning, no `ON CONFLICT`, no `RETURNING`, no campaign row:
//! the most rows of this schema this machine's PostgreSQL takes, the baseline of leg 1b.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use chrono::{Duration as ChronoDuration, Utc};
use flashgate_origin::claims::store::new_claim_id;
use flashgate_origin::webhooks::events::NewEvent;
use flashgate_shared::api::webhooks::EventType;
use flashgate_shared::api::ClaimStatus;
use sqlx::PgPool;

use super::measure::{for_secs, Leg};

/// `writers` transactions at once, each loading `batch` claims (and their ledger and event
/// rows), for `secs`; the leg's operations are claims.
pub async fn copy_rows(
    db: &PgPool,
    campaign: &str,
    writers: usize,
    batch: usize,
    secs: u64,
) -> Leg {
    let rows = Arc::new(AtomicU64::new(0));
    let (db, c, counted) = (db.clone(), campaign.to_string(), rows.clone());
    let mut run = for_secs(writers, secs, move |w, i| {
        let (db, c, counted) = (db.clone(), c.clone(), counted.clone());
        async move {
            let data = Rows::new(&c, &format!("copy-{w}-{i}"), batch);
            let mut tx = db.begin().await.expect("begin");
            for (statement, text) in [
                (CLAIMS, &data.claims),
                (LEDGER, &data.ledger),
                (EVENTS, &data.events),
            ] {
                let mut copy = tx.copy_in_raw(statement).await.expect("copy");
                copy.send(text.as_bytes()).await.expect("copy data");
                copy.finish().await.expect("copy end");
            }
            tx.commit().await.expect("commit");
            counted.fetch_add(batch as u64, Ordering::Relaxed);
        }
    })
    .await;
    run.ops = rows.load(Ordering::Relaxed);
    if let Some(b) = run.by_process {
        let ops = run.ops.max(1) as f64;
        println!(
            "  (core-us per claim: this process {:.0}, PostgreSQL {:.0})",
            b.this * 1e6 / ops,
            b.postgres * 1e6 / ops
        );
    }
    Leg {
        name: format!("COPY of the same rows, {writers} x {batch} per tx"),
        run,
        hist: None,
    }
}

const CLAIMS: &str = "COPY claims (id, campaign_id, customer_id, status, held_until, \
                      idempotency_key, request_fp) FROM STDIN";
const LEDGER: &str =
    "COPY ledger (claim_id, campaign_id, customer_id, event, actor, reason) FROM STDIN";
const EVENTS: &str = "COPY webhook_events (id, type, campaign_id, object_kind, object_id, \
                      sequence, payload) FROM STDIN";

/// One transaction's rows in `COPY`'s text format (tab-separated; none of the values holds a
/// tab, a newline or a backslash: ids, constants and compact JSON of such values).
struct Rows {
    claims: String,
    ledger: String,
    events: String,
}

impl Rows {
    fn new(campaign: &str, prefix: &str, n: usize) -> Self {
        let held_until = Utc::now() + ChronoDuration::minutes(10);
        let until = held_until.to_rfc3339();
        let (mut claims, mut ledger, mut events) = (String::new(), String::new(), String::new());
        for k in 0..n {
            let id = new_claim_id();
            let customer = format!("{prefix}-{k}");
            let _ = writeln!(claims, "{id}\t{campaign}\t{customer}\theld\t{until}\tk\tfp");
            let _ = writeln!(
                ledger,
                "{id}\t{campaign}\t{customer}\tclaimed\tcustomer\tclaim request"
            );
            let event = NewEvent::claim(
                EventType::ClaimHeld,
                campaign,
                &id,
                &customer,
                ClaimStatus::Held,
                Some(held_until),
                None,
            );
            let payload = serde_json::to_string(&event.data).expect("event data");
            let _ = writeln!(
                events,
                "{}\t{}\t{campaign}\tclaim\t{id}\t1\t{payload}",
                uuid::Uuid::new_v4(),
                EventType::ClaimHeld.as_str()
            );
        }
        Rows {
            claims,
            ledger,
            events,
        }
    }
}
