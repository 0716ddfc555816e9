//! The invariants, read back from PostgreSQL (the truth) after the crowd is gone.

use std::collections::{HashMap, HashSet};

use anyhow::Context;
use flashgate_shared::api::ClaimStatus;
use sqlx::postgres::PgPoolOptions;
use sqlx::Row;

use super::customer_id;
use super::report::{Report, TryOutcome};

/// What PostgreSQL says about one campaign.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub stock: i64,
    pub remaining: i64,
    pub active_claims: i64,
    pub all_claims: i64,
    /// Customers with more than one active claim.
    pub customers_with_two_active: i64,
    /// Every claim of the campaign: id → customer.
    pub claims: HashMap<String, String>,
}

/// Reads the campaign's row and its claims.
pub async fn read_back(database_url: &str, campaign: &str) -> anyhow::Result<Facts> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(std::time::Duration::from_secs(10))
        .connect(database_url)
        .await
        .context("connecting to PostgreSQL for the read-back")?;
    // The statuses that hold a unit: the one list of them.
    let active = ClaimStatus::active_names();
    // One statement, so one snapshot: holds that expire between two reads (a run with
    // `--hold-seconds`) would otherwise show `remaining` from before their expiry beside the
    // active claims after it.
    let row = sqlx::query(
        "SELECT c.stock::bigint AS stock, c.remaining::bigint AS remaining, \
                k.active, k.all_claims \
           FROM campaigns c CROSS JOIN LATERAL ( \
                SELECT count(*) FILTER (WHERE status::text = ANY($2)) AS active, \
                       count(*) AS all_claims \
                  FROM claims WHERE campaign_id = c.id) k \
          WHERE c.id::text = $1",
    )
    .bind(campaign)
    .bind(&active[..])
    .fetch_one(&pool)
    .await
    .context("reading the campaign row and counting its claims")?;
    let mut f = Facts {
        stock: row.try_get("stock")?,
        remaining: row.try_get("remaining")?,
        active_claims: row.try_get("active")?,
        all_claims: row.try_get("all_claims")?,
        ..Facts::default()
    };
    f.customers_with_two_active = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT customer_id FROM claims \
         WHERE campaign_id::text = $1 AND status::text = ANY($2) \
         GROUP BY customer_id HAVING count(*) > 1) AS twice",
    )
    .bind(campaign)
    .bind(&active[..])
    .fetch_one(&pool)
    .await
    .context("looking for customers with two active claims")?;
    let rows = sqlx::query(
        "SELECT id::text AS id, customer_id::text AS customer FROM claims WHERE campaign_id::text = $1",
    )
    .bind(campaign)
    .fetch_all(&pool)
    .await
    .context("reading the claims")?;
    for r in rows {
        f.claims.insert(r.try_get("id")?, r.try_get("customer")?);
    }
    pool.close().await;
    Ok(f)
}

/// Adds the invariant checks comparing the database with what the crowd was told. `holds`:
/// the campaign's holds expire during the run (then units may come back after the crowd left,
/// and the claims are not compared with min(stock, customers who tried)).
pub fn add_checks(report: &mut Report, f: &Facts, outcomes: &[TryOutcome], holds: bool) {
    let tried = report.distinct_customers as i64;
    let expected = f.stock.min(tried);
    report.add_check(
        "no oversell: active claims <= stock",
        f.active_claims <= f.stock,
        format!("{} active claims, stock {}", f.active_claims, f.stock),
    );
    if holds {
        report.add_skip(
            "claims = min(stock, customers who tried)",
            "holds expire during the run (--hold-seconds): units that came back after the crowd stay remaining",
        );
    } else {
        report.add_check(
            "claims = min(stock, customers who tried)",
            f.active_claims == expected,
            format!(
                "{} = min({}, {}) = {}",
                f.active_claims, f.stock, tried, expected
            ),
        );
    }
    report.add_check(
        "no customer holds two active claims",
        f.customers_with_two_active == 0,
        format!("{} customers found", f.customers_with_two_active),
    );
    report.add_check(
        "remaining = stock - active claims",
        f.remaining == f.stock - f.active_claims,
        format!(
            "remaining {} vs {} - {} = {}",
            f.remaining,
            f.stock,
            f.active_claims,
            f.stock - f.active_claims
        ),
    );
    let mut ids = HashSet::new();
    let mut missing = 0u64;
    let mut wrong = 0u64;
    for o in outcomes.iter().filter(|o| o.status == 201) {
        let Some((id, _)) = &o.claim else {
            missing += 1;
            continue;
        };
        ids.insert(id.as_str());
        match f.claims.get(id) {
            None => missing += 1,
            Some(c) if *c != customer_id(o.customer) => wrong += 1,
            Some(_) => {}
        }
    }
    report.add_check(
        "every 201's claim id exists with that customer",
        missing == 0 && wrong == 0,
        format!(
            "{} claim ids in 201s: {} missing in PostgreSQL, {} under another customer",
            ids.len(),
            missing,
            wrong
        ),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stampede::plan::{Plan, TapKind};
    use crate::stampede::report::{compute, Answerer, RunInfo};

    fn won(customer: u32, id: &str) -> TryOutcome {
        TryOutcome {
            customer,
            kind: TapKind::First,
            variant: None,
            due_us: 0,
            sent_us: Some(1),
            last_sent_us: Some(1),
            answered_us: Some(2),
            status: 201,
            result: "claimed".into(),
            answered_by: Answerer::Origin,
            attempts: 1,
            retries_unavailable: 0,
            retries_in_progress: 0,
            claim: Some((id.into(), customer_id(customer))),
            latencies: vec![],
            unexpected: None,
        }
    }

    fn run(facts: &Facts, outs: &[TryOutcome]) -> Report {
        let info = RunInfo {
            campaign: "x".into(),
            kind: "sale".into(),
            stock: facts.stock,
            target: "t".into(),
            edge_runtime: None,
            concurrency: 1,
            open_loop: false,
            seed: 1,
            window_ms: 1,
        };
        let mut r = compute(&info, &Plan::default(), outs);
        add_checks(&mut r, facts, outs, false);
        r
    }

    fn facts() -> Facts {
        Facts {
            stock: 2,
            remaining: 0,
            active_claims: 2,
            all_claims: 2,
            customers_with_two_active: 0,
            claims: [("a", customer_id(1)), ("b", customer_id(2))]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
        }
    }

    #[test]
    fn consistent_database_passes() {
        let outs = [won(1, "a"), won(2, "b"), won(1, "a")];
        let r = run(&facts(), &outs);
        assert!(r.passed, "{}", r.render());
    }

    #[test]
    fn each_broken_invariant_fails() {
        let outs = [won(1, "a"), won(2, "b")];
        let mut f = facts();
        f.active_claims = 3;
        assert!(!run(&f, &outs).passed);
        let mut f = facts();
        f.remaining = 1;
        assert!(!run(&f, &outs).passed);
        let mut f = facts();
        f.customers_with_two_active = 1;
        assert!(!run(&f, &outs).passed);
        // A 201 whose claim is not in the database, or is someone else's.
        assert!(!run(&facts(), &[won(1, "a"), won(2, "zz")]).passed);
        assert!(!run(&facts(), &[won(1, "b"), won(2, "a")]).passed);
        // Fewer claims than min(stock, customers who tried).
        let mut f = facts();
        f.active_claims = 1;
        f.remaining = 1;
        assert!(!run(&f, &outs).passed);
    }
}
