//! Gift fulfilment exactly once, with truly concurrent requests against a real origin and
//! PostgreSQL: one key five times at once, five keys at once, 200 subscribers × 5, a key
//! reused for another subscriber, and the ledger refusing UPDATE and DELETE.

use flashgate_tests::gifts::{
    self, campaign, fulfil, fulfil_following_retry_after, key, members, msisdn, row_counts,
};
use futures::future::join_all;

const ONE_PER_DAY: &[(i32, i32)] = &[(1, 1)];

#[tokio::test]
async fn five_simultaneous_requests_with_one_key_grant_once_and_replay_byte_for_byte() {
    let (o, c, m) = gifts::one_member_one_a_day().await;
    let k = key();
    let replies = join_all((0..5).map(|_| fulfil(&o, &c, &k, &m))).await;
    for r in &replies {
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        assert_eq!(
            r.body, replies[0].body,
            "every reply is the first, byte for byte"
        );
    }
    let body = replies[0].json();
    assert_eq!(body["result"], "granted");
    assert_eq!(body["fulfilment"]["msisdn"], m.as_str());
    assert_eq!(body["fulfilment"]["segment"], "s1");
    assert_eq!(body["fulfilment"]["gift"]["amount"], 2_000);
    assert_eq!(body["fulfilment"]["gift"]["currency"], "EGP");
    assert_eq!(body["fulfilment"]["gift"]["kind"], "mobile_credit");
    assert_eq!(body["fulfilment"]["status"], "pending");
    assert_eq!(body["fulfilment"]["created_at"], "2026-06-11T12:00:00Z");
    // One ledger row, one record, one outbox row.
    let counts = row_counts(&o, &c).await;
    assert_eq!(&counts[..3], &[1, 1, 1]);
    // A sixth, later, takes the fast path: same bytes, nothing written.
    let again = fulfil(&o, &c, &k, &m).await;
    assert_eq!(again, replies[0]);
    assert_eq!(row_counts(&o, &c).await, counts);
    // The fulfilment is readable with its delivery status.
    let id = body["fulfilment"]["id"].as_str().unwrap();
    let shown: serde_json::Value = o
        .http
        .get(format!("{}/api/v1/fulfilments/{id}", o.url))
        .bearer_auth(o.config.service_token.expose())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Its status may have moved on if a relay of another test is running; the rest is the grant.
    let mut expected = body["fulfilment"].clone();
    expected["status"] = shown["status"].clone();
    assert_eq!(shown, expected);
    assert!(["pending", "delivered"].contains(&shown["status"].as_str().unwrap()));
    o.stop().await;
}

#[tokio::test]
async fn five_simultaneous_requests_with_five_keys_grant_once_and_refuse_four_with_cap_reached() {
    let (o, c, m) = gifts::one_member_one_a_day().await;
    let replies = join_all((0..5).map(|_| {
        let k = key();
        let (o, c, m) = (&o, &c, &m);
        async move { fulfil(o, c, &k, m).await }
    }))
    .await;
    let granted = replies.iter().filter(|r| r.status == 201).count();
    let capped: Vec<_> = replies.iter().filter(|r| r.status == 409).collect();
    assert_eq!(granted, 1);
    assert_eq!(capped.len(), 4);
    for r in capped {
        let b = r.json();
        assert_eq!(b["result"], "cap_reached");
        assert_eq!(b["next_eligible_at"], "2026-06-12T12:00:00Z");
    }
    // One grant (ledger, outbox) and five recorded replies: the grant and four refusals.
    assert_eq!(&row_counts(&o, &c).await[..3], &[1, 5, 1]);
    o.stop().await;
}

#[tokio::test]
async fn two_hundred_subscribers_times_five_concurrent_requests_make_exactly_200_grants() {
    let o = gifts::gift_origin().await;
    let c = campaign(&o, &[("s1", 2_000, ONE_PER_DAY)]).await;
    let subscribers: Vec<String> = (0..200).map(|_| msisdn()).collect();
    let added = members(&o, &c, "s1", &subscribers).await;
    assert_eq!(added["added"], 200);
    // 5 requests per subscriber (one key each: a double-tap resubmitted by a client), all
    // 1,000 sent at once. A 503 under the burst (the pool's wait ran out on a loaded machine)
    // is sent again after its Retry-After, as a client would: still one grant per subscriber.
    let sent = join_all(subscribers.iter().flat_map(|m| {
        let k = key();
        let (o, c) = (&o, &c);
        (0..5).map(move |_| {
            let k = k.clone();
            async move { (m.clone(), fulfil_following_retry_after(o, c, &k, m).await) }
        })
    }))
    .await;
    let unavailable: u32 = sent.iter().map(|(_, (_, n))| n).sum();
    println!("1,000 concurrent fulfilments: {unavailable} answers 503 on the way, sent again");
    let all: Vec<_> = sent.into_iter().map(|(m, (r, _))| (m, r)).collect();
    let bad: Vec<String> = all
        .iter()
        .filter(|(_, r)| r.status != 201)
        .map(|(_, r)| format!("{} {}", r.status, String::from_utf8_lossy(&r.body)))
        .collect();
    assert!(
        bad.is_empty(),
        "every reply is the grant or its replay: {bad:?}"
    );
    assert_eq!(&row_counts(&o, &c).await[..3], &[200, 200, 200]);
    let per_subscriber: Vec<(String, i64)> = sqlx::query_as(
        "SELECT msisdn, count(*) FROM gift_ledger WHERE campaign_id = $1 GROUP BY msisdn",
    )
    .bind(&c)
    .fetch_all(&o.db)
    .await
    .unwrap();
    assert_eq!(per_subscriber.len(), 200);
    assert!(per_subscriber.iter().all(|(_, n)| *n == 1));
    o.stop().await;
}

#[tokio::test]
async fn a_key_used_for_another_subscriber_is_refused_and_writes_nothing() {
    let o = gifts::gift_origin().await;
    let c = campaign(&o, &[("s1", 2_000, ONE_PER_DAY)]).await;
    let (a, b) = (msisdn(), msisdn());
    members(&o, &c, "s1", &[a.clone(), b.clone()]).await;
    let k = key();
    assert_eq!(fulfil(&o, &c, &k, &a).await.status, 201);
    let before = row_counts(&o, &c).await;
    let r = fulfil(&o, &c, &k, &b).await;
    assert_eq!(r.status, 422);
    assert_eq!(r.json()["result"], "idempotency_key_reused");
    assert_eq!(row_counts(&o, &c).await, before);
    o.stop().await;
}

#[tokio::test]
async fn the_ledger_refuses_update_and_delete_and_a_second_grant_for_a_request() {
    let (o, c, m) = gifts::one_member_one_a_day().await;
    let k = key();
    assert_eq!(fulfil(&o, &c, &k, &m).await.status, 201);
    let upd = sqlx::query("UPDATE gift_ledger SET amount = amount + 1 WHERE campaign_id = $1")
        .bind(&c)
        .execute(&o.db)
        .await;
    assert!(upd.unwrap_err().to_string().contains("append-only"));
    let del = sqlx::query("DELETE FROM gift_ledger WHERE campaign_id = $1")
        .bind(&c)
        .execute(&o.db)
        .await;
    assert!(del.unwrap_err().to_string().contains("append-only"));
    // Layer 4 on its own: a second ledger row for the same request is refused by the
    // database, whatever wrote it.
    let dup = sqlx::query(
        "INSERT INTO gift_ledger (id, campaign_id, segment_id, msisdn, idempotency_key, amount,
                                  currency, kind, created_at)
         VALUES (gen_random_uuid(), $1, 's1', $2, $3, 2000, 'EGP', 'mobile_credit', now())",
    )
    .bind(&c)
    .bind(&m)
    .bind(&k)
    .execute(&o.db)
    .await;
    let e = dup.unwrap_err();
    assert_eq!(
        e.as_database_error().and_then(|d| d.code()).as_deref(),
        Some("23505")
    );
    let amounts: Vec<i64> =
        sqlx::query_scalar("SELECT amount FROM gift_ledger WHERE campaign_id = $1")
            .bind(&c)
            .fetch_all(&o.db)
            .await
            .unwrap();
    assert_eq!(amounts, vec![2_000]);
    o.stop().await;
}
