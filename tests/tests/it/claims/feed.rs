//! The claims feed (`GET /admin/v1/campaigns/{id}/claims`) and its CSV export against a real
//! origin over HTTP and real PostgreSQL: paging while claims arrive, the CSV against the JSON,
//! and bad queries (422 `validation_failed`, as on every admin route).

use std::collections::HashSet;
use std::time::Duration;

use flashgate_shared::api::{ClaimFeed, FeedClaim, FEED_CSV_HEADER};
use flashgate_tests::support::{eventually, stop_reconciled, TestOrigin};
use serde_json::{json, Value};

/// `GET path` with the viewer token: status and body text.
async fn get(o: &TestOrigin, path: &str) -> (u16, String) {
    let res = o
        .http
        .get(format!("{}{path}", o.url))
        .bearer_auth(o.viewer_token())
        .send()
        .await
        .expect("request");
    let status = res.status().as_u16();
    (status, res.text().await.expect("body"))
}

/// One page of campaign `c`'s feed after `cursor` (with `query`, e.g. `&status=paid`).
async fn page(o: &TestOrigin, c: &str, cursor: Option<&str>, query: &str) -> ClaimFeed {
    let mut path = format!("/admin/v1/campaigns/{c}/claims?limit=7{query}");
    if let Some(k) = cursor {
        path.push_str(&format!("&cursor={k}"));
    }
    let (s, body) = get(o, &path).await;
    assert_eq!(s, 200, "{body}");
    serde_json::from_str(&body).expect("a ClaimFeed")
}

/// Pages from `cursor` until `has_more` is false; returns the claims and the last cursor.
async fn read_on(
    o: &TestOrigin,
    c: &str,
    mut cursor: Option<String>,
    query: &str,
) -> (Vec<FeedClaim>, Option<String>) {
    let mut all = Vec::new();
    loop {
        let p = page(o, c, cursor.as_deref(), query).await;
        assert!(p.claims.len() <= 7);
        all.extend(p.claims);
        cursor = p.next_cursor.or(cursor);
        if !p.has_more {
            return (all, cursor);
        }
    }
}

async fn ids_in_db(o: &TestOrigin, c: &str) -> Vec<String> {
    sqlx::query_scalar("SELECT id FROM claims WHERE campaign_id = $1 ORDER BY created_at, id")
        .bind(c)
        .fetch_all(&o.db)
        .await
        .expect("claims")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn paging_returns_every_claim_once_while_new_claims_arrive() {
    let o = TestOrigin::start().await;
    let c = o.held_sale(400, 600).await;
    o.winners(&c, 120).await;
    let before: HashSet<String> = ids_in_db(&o, &c).await.into_iter().collect();

    // Claims keep arriving (in bursts of 10) while the feed is read page by page.
    let arrivals = async {
        for _ in 0..15 {
            o.winners(&c, 10).await;
        }
    };
    let ((mut listed, mut cursor), ()) = tokio::join!(read_on(&o, &c, None, ""), arrivals);
    // After the arrivals, the same cursor goes on to the end (the newest claims of a page read
    // come one read later: "The claims feed" in docs/ADMIN.md).
    let total = ids_in_db(&o, &c).await.len();
    for _ in 0..150 {
        let (rest, next) = read_on(&o, &c, cursor.clone(), "").await;
        listed.extend(rest);
        cursor = next;
        if listed.len() >= total {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let ids: Vec<String> = listed.iter().map(|x| x.id.clone()).collect();
    let unique_ids: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique_ids.len(), ids.len(), "a claim was listed twice");
    assert!(
        before.iter().all(|id| unique_ids.contains(id)),
        "a claim was skipped"
    );
    assert!(
        listed
            .windows(2)
            .all(|w| (w[0].created_at, &w[0].id) < (w[1].created_at, &w[1].id)),
        "the order is (created_at, id)"
    );
    assert_eq!(
        ids,
        ids_in_db(&o, &c).await,
        "every claim, each once, in order"
    );
    assert_eq!(ids.len(), 270);
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_export_matches_the_json_feed_and_is_audited() {
    let o = TestOrigin::start().await;
    let c = o.held_sale(20, 600).await;
    let claims = o.winners(&c, 12).await;
    let service = o.config.service_token.expose().to_string();
    // Some paid (one with a reference that needs quoting), some released, the rest held.
    for (i, cl) in claims.iter().enumerate().take(6) {
        let id = cl["id"].as_str().unwrap();
        let (action, body) = match i {
            0 => ("pay", json!({"payment_ref": "order,\"7\""})),
            1..=3 => ("pay", json!({"payment_ref": format!("order-{i}")})),
            _ => ("release", json!({})),
        };
        let (s, b) = o.claim_action(id, action, &service, &body).await;
        assert_eq!(s, 200, "{b}");
    }
    let json_claims = eventually(
        "the feed to list the 12 claims",
        Duration::from_secs(15),
        || {
            let (o, c) = (&o, &c);
            async move {
                let (all, _) = read_on(o, c, None, "").await;
                if all.len() == 12 {
                    Ok(all)
                } else {
                    Err(format!("{} claims listed", all.len()))
                }
            }
        },
    )
    .await;
    let paid: Vec<&FeedClaim> = json_claims
        .iter()
        .filter(|x| x.payment_ref.is_some())
        .collect();
    assert_eq!(paid.len(), 4);
    assert!(paid
        .iter()
        .all(|x| x.paid_at.is_some() && x.status.as_str() == "paid"));

    let (s, csv) = get(&o, &format!("/admin/v1/campaigns/{c}/claims.csv")).await;
    assert_eq!(s, 200, "{csv}");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(FEED_CSV_HEADER));
    let expected: String = json_claims
        .iter()
        .map(flashgate_shared::api::feed_csv_line)
        .collect();
    assert_eq!(csv, format!("{FEED_CSV_HEADER}\n{expected}"), "CSV = JSON");
    assert!(csv.contains(",\"order,\"\"7\"\"\","), "{csv}");

    // Filters apply to both alike.
    let (paid_json, _) = read_on(&o, &c, None, "&status=paid").await;
    let (s, paid_csv) = get(
        &o,
        &format!("/admin/v1/campaigns/{c}/claims.csv?status=paid"),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(paid_csv.lines().count(), 1 + paid_json.len());
    assert_eq!(paid_json.len(), 4);

    // Audited: who and which filters.
    let (s, audit) = o
        .admin(
            reqwest::Method::GET,
            &format!("/admin/v1/campaigns/{c}/audit"),
            Some(o.viewer_token()),
            None,
        )
        .await;
    assert_eq!(s, 200);
    let exports: Vec<&Value> = audit["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "export")
        .collect();
    assert_eq!(exports.len(), 2);
    assert_eq!(exports[0]["params"]["status"], "paid");
    assert_eq!(exports[0]["actor"], "viewer");
    stop_reconciled(o, &c).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_feed_queries_get_422_as_on_every_admin_route_and_change_nothing() {
    let o = TestOrigin::start().await;
    let c = o.held_sale(5, 600).await;
    o.winners(&c, 2).await;
    let audit_rows = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM admin_audit WHERE campaign_id = $1")
            .bind(&c)
            .fetch_one(&o.db)
            .await
            .unwrap()
    };
    let audits = audit_rows().await;
    let feed = format!("/admin/v1/campaigns/{c}/claims");
    let csv = format!("/admin/v1/campaigns/{c}/claims.csv");
    let cases = [
        format!("{feed}?status=shipped"),
        format!("{feed}?since=yesterday"),
        format!("{feed}?since=2026-13-01T00:00:00Z"),
        format!("{feed}?cursor=nope"),
        format!("{feed}?cursor="),
        format!("{feed}?limit=0"),
        format!("{feed}?limit=1001"),
        format!("{feed}?limit=ten"),
        format!("{feed}?status=held&status=paid"),
        format!("{feed}?order=desc"),
        format!("{csv}?status=shipped"),
        format!("{csv}?cursor=x"),
        // The same answer as the other admin routes' bad queries.
        format!("/admin/v1/campaigns/{c}/series?seconds=0"),
    ];
    for path in &cases {
        let (s, body) = get(&o, path).await;
        let b: Value = serde_json::from_str(&body).expect("a JSON error");
        assert_eq!(
            (s, b["result"].as_str()),
            (422, Some("validation_failed")),
            "{path}: {b}"
        );
        assert!(b["message"].is_string());
    }
    let (s, _) = get(&o, "/admin/v1/campaigns/no-such-campaign/claims").await;
    assert_eq!(s, 404);
    let (s, _) = get(&o, "/admin/v1/campaigns/no-such-campaign/claims.csv").await;
    assert_eq!(s, 404);
    let res = o.http.get(format!("{}{feed}", o.url)).send().await.unwrap();
    assert_eq!(res.status().as_u16(), 401);
    assert_eq!(audit_rows().await, audits, "no export was audited");
    // `since` filters by created_at.
    let future = (chrono::Utc::now() + chrono::Duration::hours(1))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let (s, body) = get(&o, &format!("{feed}?since={future}")).await;
    assert_eq!(s, 200, "{body}");
    let p: ClaimFeed = serde_json::from_str(&body).unwrap();
    assert!(p.claims.is_empty() && !p.has_more && p.next_cursor.is_none());
    stop_reconciled(o, &c).await;
}
