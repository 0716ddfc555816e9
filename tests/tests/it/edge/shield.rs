//! Edge shielding (issue 19) with the built worker inside workerd in front of a real origin:
//! unknown campaign ids are answered 404 by the edge from its campaign index (fetched at most
//! once per TTL per isolate), a new campaign shows within one TTL plus one round trip, ids of
//! the wrong shape never cause a lookup, and CORS answers for allowed and other origins at the
//! edge and at the origin. Also the origin's index route and its figures for 100,000
//! campaigns (printed, not asserted on time).

use std::time::{Duration, Instant};

use flashgate_shared::campaign_index::{CampaignIndex, CONTENT_TYPE, INDEX_PATH};
use flashgate_tests::support::{
    edge_headers, edge_with as edge, get, own_services, reply, send_claim, signed_test_config,
    status_url, unique, ClaimReq, EdgeSettings, Reply, TestEdge, TestOrigin, TEST_EDGE_SECRET,
};
use futures::future::join_all;

fn index_fetches(o: &TestOrigin) -> u64 {
    o.origin_count(|m| &m.index_requests)
}

/// `n` requests made by `make(i)`, at most 50 at a time; their answers.
async fn many<F, Fut>(n: usize, make: F) -> Vec<Reply>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = Reply> + Send + 'static,
{
    let mut out = Vec::with_capacity(n);
    let mut i = 0;
    while i < n {
        let batch: Vec<_> = (i..(i + 50).min(n))
            .map(|k| tokio::spawn(make(k)))
            .collect();
        for r in join_all(batch).await {
            out.push(r.expect("task"));
        }
        i += 50;
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn random_campaign_ids_cost_the_origin_one_index_fetch_per_ttl() {
    let ttl_ms = 1_000;
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", 5).await;
    let e = edge(
        &o.url,
        EdgeSettings {
            ttl_ms,
            ..Default::default()
        },
    );
    let ghost = unique("ghost");
    let origin_404 = get(&o.http, &status_url(&o.url, &ghost)).await;
    assert_eq!(origin_404.status, 404);

    let (status_before, claims_before, index_before) =
        (o.status_requests(), o.claim_requests(), index_fetches(&o));
    let t0 = Instant::now();
    let run = unique("ghost");
    let gets = many(2_000, |i| {
        let (http, url) = (o.http.clone(), status_url(&e.url, &format!("{run}-{i}")));
        async move { get(&http, &url).await }
    })
    .await;
    let claims = many(300, |i| {
        let (http, base) = (o.http.clone(), e.url.clone());
        let req = ClaimReq::good(&o, &format!("cust-{i}"), "k1");
        let id = format!("{run}-claim-{i}");
        async move { send_claim(&http, &base, &id, &req, false).await }
    })
    .await;
    // The other per-campaign paths: queue poll and join, claims/mine, HEAD.
    let others = many(100, |i| {
        let (http, base, id) = (o.http.clone(), e.url.clone(), format!("{run}-other-{i}"));
        let token = o.token("someone");
        async move {
            let url = format!("{base}/api/v1/campaigns/{id}");
            let req = match i % 4 {
                0 => http.get(format!("{url}/queue")),
                1 => http.post(format!("{url}/queue")).bearer_auth(token),
                2 => http.get(format!("{url}/claims/mine")).bearer_auth(token),
                _ => http.head(url),
            };
            reply(req.send().await.expect("request")).await
        }
    })
    .await;
    let elapsed = t0.elapsed();
    let fetches = index_fetches(&o) - index_before;
    let statuses = o.status_requests() - status_before;
    let forwarded = o.claim_requests() - claims_before;
    println!(
        "2,000 random-id GETs + 300 random-id claims + 100 other paths in {elapsed:?}: \
         {fetches} index fetch(es), {statuses} status and {forwarded} claim requests at the origin"
    );
    for r in gets.iter().chain(&claims).chain(&others) {
        assert_eq!((r.status, r.by.as_str()), (404, "edge"), "{:?}", r.json());
    }
    // Same bytes as the origin's 404 (the id differs, so compare the shape).
    let body = gets[0].json();
    assert_eq!(body["result"], origin_404.json()["result"]);
    assert_eq!(body["message"], format!("no campaign {run}-0"));
    assert_eq!((statuses, forwarded), (0, 0));
    let most = elapsed.as_millis() as u64 / ttl_ms + 1;
    assert!(
        (1..=most).contains(&fetches),
        "{fetches} index fetches in {elapsed:?}, at most {most} (one per TTL)"
    );
    // The real campaign is still served.
    let real = get(&o.http, &status_url(&e.url, &c)).await;
    assert_eq!(
        (real.status, real.json()["id"].as_str()),
        (200, Some(c.as_str()))
    );
    drop(e);

    // Ids of the wrong shape: 404 at the edge, no index fetch, no status request (a fresh
    // isolate, which holds no index yet).
    let e = edge(&o.url, EdgeSettings::default());
    let (status_before, index_before) = (o.status_requests(), index_fetches(&o));
    let long = "x".repeat(65);
    for id in ["Bad_Id", long.as_str(), "%E2%82%AC", "spr%ZZing"] {
        for path in ["", "/queue", "/claims/mine"] {
            let r = get(&o.http, &format!("{}/api/v1/campaigns/{id}{path}", e.url)).await;
            assert_eq!((r.status, r.by.as_str()), (404, "edge"), "{id}{path}");
        }
        let r = o
            .http
            .post(format!("{}/api/v1/campaigns/{id}/queue", e.url))
            .send()
            .await
            .expect("join");
        assert_eq!(r.status(), 404, "{id} join");
    }
    assert_eq!(index_fetches(&o) - index_before, 0);
    assert_eq!(o.status_requests() - status_before, 0);
    // A percent-encoded real id is the same campaign: its status from the edge's cache.
    let enc = format!("%{:02X}{}", c.as_bytes()[0], &c[1..]);
    let r = get(&o.http, &format!("{}/api/v1/campaigns/{enc}", e.url)).await;
    assert_eq!((r.status, r.by.as_str()), (200, "edge"));
    assert_eq!(r.json()["id"].as_str(), Some(c.as_str()));
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_new_campaign_is_served_within_one_ttl_plus_a_round_trip() {
    let ttl_ms = 1_000;
    let o = TestOrigin::start_signed().await;
    let e = edge(
        &o.url,
        EdgeSettings {
            ttl_ms,
            ..Default::default()
        },
    );
    // The isolate holds an index (a miss fetched it).
    let miss = get(&o.http, &status_url(&e.url, &unique("ghost"))).await;
    assert_eq!((miss.status, miss.by.as_str()), (404, "edge"));
    let t0 = Instant::now();
    let c = o.campaign("sale", 3).await;
    let created = t0.elapsed();
    let mut misses = 0;
    let seen = loop {
        let r = get(&o.http, &status_url(&e.url, &c)).await;
        if r.status == 200 {
            assert_eq!(r.json()["id"], c.as_str());
            break t0.elapsed();
        }
        assert_eq!((r.status, r.by.as_str()), (404, "edge"));
        misses += 1;
        assert!(t0.elapsed() < Duration::from_secs(10), "never served");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    println!(
        "new campaign (created in {created:?}) served by the edge {seen:?} after its creation \
         began, after {misses} edge 404s (TTL {ttl_ms} ms)"
    );
    // One TTL plus one round trip (the creation's own request included), with room for a
    // loaded machine's scheduling.
    assert!(
        seen <= Duration::from_millis(ttl_ms) + created + Duration::from_millis(750),
        "{seen:?}"
    );
    let won = send_claim(
        &o.http,
        &e.url,
        &c,
        &ClaimReq::good(&o, &unique("alice"), "k1"),
        false,
    )
    .await;
    assert_eq!((won.status, won.by.as_str()), (201, "origin"));
    o.stop().await;
}

const SHOP: &str = "https://shop.example";
const OTHER: &str = "https://other.example";

fn cors_of(r: &Reply) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = r
        .headers
        .iter()
        .filter(|(n, _)| n.as_str().starts_with("access-control-"))
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("").to_string()))
        .collect();
    v.sort();
    v
}

async fn preflight(http: &reqwest::Client, url: &str, origin: &str) -> Reply {
    let r = http
        .request(reqwest::Method::OPTIONS, url)
        .header("origin", origin)
        .header("access-control-request-method", "POST")
        .header(
            "access-control-request-headers",
            "authorization,content-type,idempotency-key",
        )
        .send()
        .await
        .expect("preflight");
    reply(r).await
}

async fn get_from(http: &reqwest::Client, url: &str, origin: &str) -> Reply {
    reply(
        http.get(url)
            .header("origin", origin)
            .send()
            .await
            .expect("GET"),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cors_for_allowed_and_other_origins_at_the_edge_and_the_origin() {
    let mut config = signed_test_config();
    config.cors_origins = SHOP.into();
    let o = TestOrigin::start_with(config).await;
    let c = o.campaign("sale", 5).await;
    let e = TestEdge::start(
        &o.url,
        &[
            ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.into()),
            // As wrangler.toml's [vars] list (a JSON value binding, not a string).
            (
                "FLASHGATE_CORS_ORIGINS",
                format!(r#"["{SHOP}", "http://localhost:3000"]"#),
            ),
        ],
    );
    let claims_path = format!("/api/v1/campaigns/{c}/claims");
    let mut preflights = Vec::new();
    for (who, base) in [("edge", e.url.as_str()), ("origin", o.url.as_str())] {
        let pre = preflight(&o.http, &format!("{base}{claims_path}"), SHOP).await;
        assert_eq!(pre.status, 200, "{who} preflight");
        assert!(pre.body.is_empty());
        let h = |n: &str| pre.header(n).map(str::to_string);
        assert_eq!(
            h("access-control-allow-origin").as_deref(),
            Some(SHOP),
            "{who}"
        );
        assert_eq!(
            h("access-control-allow-methods").as_deref(),
            Some("GET,HEAD,POST")
        );
        let allowed = h("access-control-allow-headers").unwrap_or_default();
        for name in ["authorization", "content-type", "idempotency-key"] {
            assert!(allowed.contains(name), "{who}: {allowed}");
        }
        assert_eq!(h("access-control-max-age").as_deref(), Some("600"));
        assert!(h("vary").unwrap_or_default().contains("origin"), "{who}");
        preflights.push(cors_of(&pre));

        // Another origin: answered, but without a single Access-Control-* header.
        let other = preflight(&o.http, &format!("{base}{claims_path}"), OTHER).await;
        assert_eq!(other.status, 200, "{who}");
        assert_eq!(cors_of(&other), vec![], "{who}");

        // Ordinary answers: the status, an error, an unknown campaign.
        let status = get_from(&o.http, &status_url(base, &c), SHOP).await;
        assert_eq!(status.status, 200);
        assert_eq!(
            status.header("access-control-allow-origin"),
            Some(SHOP),
            "{who}"
        );
        let exposed = status.header("access-control-expose-headers").unwrap_or("");
        assert!(exposed.contains("retry-after"), "{who}: {exposed}");
        let unknown = get_from(&o.http, &status_url(base, &unique("ghost")), SHOP).await;
        assert_eq!(unknown.status, 404);
        assert_eq!(
            unknown.header("access-control-allow-origin"),
            Some(SHOP),
            "{who}"
        );
        let refused = reply(
            o.http
                .post(format!("{base}{claims_path}"))
                .header("origin", SHOP)
                .header("content-type", "application/json")
                .body("{}")
                .send()
                .await
                .expect("claim"),
        )
        .await;
        // The edge: no token; the origin (signed): no edge signature.
        let expected = if who == "edge" { 401 } else { 403 };
        assert_eq!(refused.status, expected, "{who}");
        assert_eq!(
            refused.header("access-control-allow-origin"),
            Some(SHOP),
            "{who}"
        );
        for r in [
            get_from(&o.http, &status_url(base, &c), OTHER).await,
            get_from(&o.http, &status_url(base, &unique("ghost")), OTHER).await,
        ] {
            assert_eq!(cors_of(&r), vec![], "{who}");
        }
    }
    // The edge and the origin give a browser the same preflight.
    assert_eq!(preflights[0], preflights[1]);

    // Through the edge, an origin answer (a win) carries the edge's CORS headers once; the
    // second allowed origin works at the edge.
    let req = ClaimReq::good(&o, &unique("alice"), "k1");
    let won = reply(
        o.http
            .post(format!("{}{claims_path}", e.url))
            .header("origin", "http://localhost:3000")
            .bearer_auth(req.token.clone().unwrap_or_default())
            .header("idempotency-key", "k1")
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .expect("claim"),
    )
    .await;
    assert_eq!((won.status, won.by.as_str()), (201, "origin"));
    assert_eq!(
        won.headers
            .get_all("access-control-allow-origin")
            .iter()
            .collect::<Vec<_>>(),
        ["http://localhost:3000"]
    );
    drop(e);

    // Without allowed origins (the default): no CORS at either; OPTIONS is a 405 with Allow.
    let plain = TestOrigin::start_signed().await;
    let e = edge(&plain.url, EdgeSettings::default());
    for base in [e.url.as_str(), plain.url.as_str()] {
        let pre = preflight(&plain.http, &format!("{base}{claims_path}"), SHOP).await;
        assert_eq!(pre.status, 405, "{base}");
        assert_eq!(pre.header("allow"), Some("POST"));
        assert_eq!(cors_of(&pre), vec![]);
        let status = get_from(&plain.http, &status_url(base, &c), SHOP).await;
        assert_eq!(cors_of(&status), vec![]);
    }
    plain.stop().await;
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_index_route_takes_the_edge_or_the_service_token_and_answers_304_when_unchanged() {
    let o = TestOrigin::start_signed().await;
    let c = o.campaign("sale", 1).await;
    let url = format!("{}{INDEX_PATH}", o.url);
    let bare = o.http.get(&url).send().await.expect("index");
    assert_eq!(bare.status(), 401);
    let wrong = o.http.get(&url).bearer_auth("x".repeat(40)).send().await;
    assert_eq!(wrong.expect("index").status(), 403);
    let mut signed = o.http.get(&url);
    for (n, v) in edge_headers(
        "y".repeat(32).as_str(),
        "GET",
        INDEX_PATH,
        b"",
        None,
        None,
        None,
    ) {
        signed = signed.header(n, v);
    }
    assert_eq!(signed.send().await.expect("index").status(), 403);

    let mut by_edge = o.http.get(&url);
    for (n, v) in edge_headers(TEST_EDGE_SECRET, "GET", INDEX_PATH, b"", None, None, None) {
        by_edge = by_edge.header(n, v);
    }
    let full = reply(by_edge.send().await.expect("index")).await;
    assert_eq!(full.status, 200);
    assert_eq!(full.header("content-type"), Some(CONTENT_TYPE));
    assert_eq!(full.header("cache-control"), Some("private, no-store"));
    let index = CampaignIndex::decode(&full.body).expect("an index");
    assert!(index.may_contain(&c));
    let tag = full.header("etag").expect("etag").to_string();
    let service = o.config.service_token.expose().to_string();
    // The index again with the service token, asking for it only if it changed since `tag`.
    let if_changed = || async {
        reply(
            o.http
                .get(&url)
                .bearer_auth(&service)
                .header("if-none-match", &tag)
                .send()
                .await
                .expect("index"),
        )
        .await
    };
    let again = if_changed().await;
    assert_eq!((again.status, again.body.len()), (304, 0));
    // A campaign created through this origin is listed at once (a new tag).
    let d = o.campaign("sale", 1).await;
    let changed = if_changed().await;
    assert_eq!(changed.status, 200);
    assert!(CampaignIndex::decode(&changed.body)
        .expect("index")
        .may_contain(&d));
    assert_ne!(changed.header("etag"), Some(tag.as_str()));
    o.stop().await;
}

/// The index's size and refresh cost for 100,000 campaigns at a real origin over HTTP, printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn index_figures_for_100_000_campaigns() {
    let own = own_services(signed_test_config(), "index100k").await;
    let pool = sqlx::PgPool::connect(own.direct_url()).await.expect("pool");
    // Ended yesterday: listed (kept 7 days), and no gate to load at start-up.
    sqlx::query(
        "INSERT INTO campaigns (id, name, kind, stock, remaining, starts_at, ends_at, hold_seconds)
         SELECT 'campaign-' || i, 'Campaign ' || i, 'sale', 10, 10,
                now() - interval '2 days', now() - interval '1 day', 600
           FROM generate_series(1, 100000) AS i",
    )
    .execute(&pool)
    .await
    .expect("100,000 campaigns");
    // The origin's query alone (what a rebuild costs PostgreSQL).
    let t = Instant::now();
    let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM campaigns WHERE ends_at > $1")
        .bind(chrono::Utc::now() - chrono::Duration::days(8))
        .fetch_all(&pool)
        .await
        .expect("ids");
    let query_t = t.elapsed();
    assert_eq!(ids.len(), 100_000);
    let o = TestOrigin::start_with(own.config.clone()).await;
    let url = format!("{}{INDEX_PATH}", o.url);
    let service = o.config.service_token.expose().to_string();
    let fetch = |tag: Option<String>| {
        let mut req = o.http.get(&url).bearer_auth(&service);
        if let Some(t) = tag {
            req = req.header("if-none-match", t);
        }
        async move {
            let t = Instant::now();
            let r = reply(req.send().await.expect("index")).await;
            (r, t.elapsed())
        }
    };
    let (cold, cold_t) = fetch(None).await;
    assert_eq!(cold.status, 200);
    let t = Instant::now();
    let index = CampaignIndex::decode(&cold.body).expect("index");
    let decode_t = t.elapsed();
    assert!(index.may_contain("campaign-1") && index.may_contain("campaign-100000"));
    assert!(index.len() >= 99_990);
    assert_eq!(cold.body.len(), 8 + 4 * index.len());
    let tag = cold.header("etag").map(str::to_string);
    let (warm, warm_t) = fetch(None).await;
    assert_eq!(warm.status, 200);
    let (same, same_t) = fetch(tag.clone()).await;
    assert_eq!(same.status, 304);
    // Past the origin's cache time (at least 1 s): rebuilt from PostgreSQL, still unchanged.
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (rebuilt, rebuilt_t) = fetch(tag).await;
    assert_eq!(rebuilt.status, 304);
    println!(
        "campaign index of 100,000 campaigns over HTTP: {} fingerprints, body {} bytes; \
         cold fetch (query + build + send) {cold_t:?}, cached 200 {warm_t:?}, \
         cached 304 {same_t:?}, rebuilt 304 (query + build, no body) {rebuilt_t:?}; \
         the query alone {query_t:?}; decode (test build) {decode_t:?}",
        index.len(),
        cold.body.len(),
    );
    o.stop().await;
    pool.close().await;
    own.release().await;
}
