//! `stampede --variants N`: the campaign is created with `N` variants `v0` .. `v{N-1}` (its
//! stock split evenly, the first ones a unit more when it does not divide), each try's claim
//! names one (`{"variant":"v3"}`, picked from its idempotency key, so a same-key double tap
//! sends the same body and a new-key tap may pick another variant), and the per-variant counts
//! are read back from PostgreSQL, printed and checked: never more active claims of a variant
//! than its stock, and each variant's `remaining = stock − active claims`.

use anyhow::Context;
use flashgate_shared::api::{ClaimStatus, NewVariant, MAX_VARIANTS};
use sqlx::postgres::PgPoolOptions;

use super::report::{self, Report, TryOutcome};

/// Refuses a count past the documented bound.
pub fn check_count(n: u32) -> anyhow::Result<()> {
    if n as usize > MAX_VARIANTS {
        anyhow::bail!("--variants must be at most {MAX_VARIANTS}");
    }
    Ok(())
}

/// The variants of a campaign of `stock` units split over `n` (none when `n` is 0).
pub fn list(stock: i64, n: u32) -> Option<Vec<NewVariant>> {
    if n == 0 {
        return None;
    }
    let n64 = i64::from(n);
    Some(
        (0..n)
            .map(|i| NewVariant {
                id: id(i),
                name: format!("Variant {i}"),
                stock: stock / n64 + i64::from(i64::from(i) < stock % n64),
            })
            .collect(),
    )
}

/// The index of the variant the try with idempotency-key index `key` names (a fixed mix of
/// the key, so every attempt of a key names the same one); `None` without variants.
pub fn pick(n: u32, key: u32) -> Option<u32> {
    if n == 0 {
        return None;
    }
    let mut x = u64::from(key).wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    Some((x % u64::from(n)) as u32)
}

/// The id of variant index `i`: `v{i}`.
pub fn id(i: u32) -> String {
    format!("v{i}")
}

/// The claim body of the try with idempotency-key index `key`: `{}` without variants, else
/// `{"variant":"v3"}` with the variant its key picks ([`pick`]).
pub fn body(n: u32, key: u32) -> String {
    match pick(n, key) {
        None => "{}".into(),
        Some(i) => format!(r#"{{"variant":"{}"}}"#, id(i)),
    }
}

/// One variant read back: id, stock, remaining, active claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantFacts {
    pub id: String,
    pub stock: i64,
    pub remaining: i64,
    pub active: i64,
}

/// Each variant of `campaign` with its active claims, by id (empty without variants).
pub async fn read_back(database_url: &str, campaign: &str) -> anyhow::Result<Vec<VariantFacts>> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(std::time::Duration::from_secs(10))
        .connect(database_url)
        .await
        .context("connecting to PostgreSQL for the variants' read-back")?;
    let rows: Vec<(String, i64, i64, i64)> = sqlx::query_as(
        "SELECT v.id, v.stock, v.remaining,
                (SELECT count(*) FROM claims a WHERE a.campaign_id = v.campaign_id
                    AND a.variant = v.id AND a.status = ANY($2))
           FROM campaign_variants v WHERE v.campaign_id = $1
          ORDER BY length(v.id), v.id",
    )
    .bind(campaign)
    .bind(&ClaimStatus::active_names()[..])
    .fetch_all(&pool)
    .await
    .context("reading the variants")?;
    pool.close().await;
    Ok(rows
        .into_iter()
        .map(|(id, stock, remaining, active)| VariantFacts {
            id,
            stock,
            remaining,
            active,
        })
        .collect())
}

/// The per-variant counts as one line: `v0 20/20, v1 19/20, …` (active claims / stock).
pub fn counts(vs: &[VariantFacts]) -> String {
    vs.iter()
        .map(|v| format!("{} {}/{}", v.id, v.active, v.stock))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The per-variant lines of the report from the crowd's outcomes (nothing without variants);
/// [`check`] adds their units.
pub fn tally(report: &mut Report, n: u32, outcomes: &[TryOutcome]) {
    if n > 0 {
        let ids: Vec<String> = (0..n).map(id).collect();
        report.variants = Some(report::variants::compute(&ids, outcomes));
    }
}

/// Reads the variants of `campaign` back, puts their units on the report's lines and adds
/// their checks (nothing on a campaign without variants). `holds`: holds expire during the
/// run (then a variant's claims are not compared with min(stock, demand)).
pub async fn check(
    report: &mut Report,
    database_url: &str,
    campaign: &str,
    holds: bool,
) -> anyhow::Result<()> {
    let vs = read_back(database_url, campaign).await?;
    add_checks(report, &vs);
    if vs.is_empty() {
        return Ok(());
    }
    let lines = report.variants.get_or_insert_with(Vec::new);
    for v in &vs {
        if let Some(l) = lines.iter_mut().find(|l| l.id == v.id) {
            (l.stock, l.claims, l.remaining) = (Some(v.stock), Some(v.active), Some(v.remaining));
        }
    }
    if holds {
        report.add_skip(
            "claims = min(stock, demand) per variant",
            "holds expire during the run (--hold-seconds)",
        );
        return Ok(());
    }
    let off: Vec<String> = report
        .variants
        .iter()
        .flatten()
        .filter_map(|l| {
            let (stock, claims) = (l.stock?, l.claims?);
            let want = stock.min(l.demand as i64);
            (claims != want).then(|| format!("{}: {claims} != min({stock}, {})", l.id, l.demand))
        })
        .collect();
    report.add_check(
        "claims = min(stock, demand) per variant (demand: customers who asked for it without holding a claim)",
        off.is_empty(),
        if off.is_empty() {
            format!("{} variants", vs.len())
        } else {
            off.join("; ")
        },
    );
    Ok(())
}

/// Adds the edge's check of a variant run: for every variant that sold out, the edge answered
/// at least `min_share` of the tries naming it sent after its own sell-out (winners' taps
/// apart). The campaign's figure counts from the first variant's sell-out, when the others
/// still sell at the origin, so it is not the check here.
pub fn add_edge_check(report: &mut Report, min_share: f64) {
    let lines = report.variants.clone().unwrap_or_default();
    let figured: Vec<_> = lines
        .iter()
        .filter_map(|l| Some((l, l.edge_share_after_sold_out?)))
        .collect();
    let low: Vec<String> = figured
        .iter()
        .filter(|(_, s)| *s < min_share)
        .map(|(l, s)| {
            format!(
                "{} {:.2} % ({} of {})",
                l.id,
                s * 100.0,
                l.edge_answered_after_sold_out,
                l.tries_after_sold_out
            )
        })
        .collect();
    let (edge, after) = figured.iter().fold((0, 0), |(e, a), (l, _)| {
        (
            e + l.edge_answered_after_sold_out,
            a + l.tries_after_sold_out,
        )
    });
    report.add_check(
        format!(
            "edge answered >= {:.0} % of the tries sent after their variant sold out, each variant (winners' taps apart)",
            min_share * 100.0
        ),
        !figured.is_empty() && low.is_empty(),
        if figured.is_empty() {
            "no variant sold out, or no try after it".to_string()
        } else if low.is_empty() {
            format!(
                "{} variants sold out; in all {edge} of {after} ({:.2} %), the lowest {:.2} %",
                figured.len(),
                edge as f64 * 100.0 / after.max(1) as f64,
                figured.iter().map(|(_, s)| *s).fold(1.0, f64::min) * 100.0
            )
        } else {
            format!("below: {}", low.join(", "))
        },
    );
}

/// Adds the per-variant checks (nothing without variants).
pub fn add_checks(report: &mut Report, vs: &[VariantFacts]) {
    if vs.is_empty() {
        return;
    }
    let over: Vec<String> = vs
        .iter()
        .filter(|v| v.active > v.stock)
        .map(|v| format!("{} {} > {}", v.id, v.active, v.stock))
        .collect();
    report.add_check(
        "no oversell per variant: active claims <= stock (claims/stock)",
        over.is_empty(),
        if over.is_empty() {
            counts(vs)
        } else {
            format!("oversold: {}", over.join(", "))
        },
    );
    let off: Vec<String> = vs
        .iter()
        .filter(|v| v.remaining != v.stock - v.active)
        .map(|v| {
            format!(
                "{}: remaining {} vs {} - {}",
                v.id, v.remaining, v.stock, v.active
            )
        })
        .collect();
    report.add_check(
        "remaining = stock - active claims per variant",
        off.is_empty(),
        if off.is_empty() {
            format!("{} variants", vs.len())
        } else {
            off.join("; ")
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stock_is_split_and_keys_pick_every_variant() {
        let vs = list(1_003, 10).unwrap();
        assert_eq!(vs.iter().map(|v| v.stock).sum::<i64>(), 1_003);
        assert_eq!((vs[0].stock, vs[3].stock, vs[9].stock), (101, 100, 100));
        assert!(list(10, 0).is_none());
        assert_eq!(body(0, 7), "{}");
        assert_eq!(body(10, 7), body(10, 7));
        let picked: std::collections::HashSet<String> = (0..200).map(|k| body(10, k)).collect();
        assert_eq!(picked.len(), 10);
        assert!(check_count(1_000).is_ok() && check_count(1_001).is_err());
    }
}
