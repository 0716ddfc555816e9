//! Customer tokens from an identity provider at the edge, the worker running in
//! workerd: the same accept / refuse list as the origin, answered by the edge; rotation with
//! one fetch for a new key id; at most one JWKS fetch per interval under a flood of unknown
//! key ids; a key replaced under the same key id fetched after a bad signature, at most once
//! per interval under a flood of bad signatures; a JWKS outage keeping the cached keys; a provider down since start-up (503, the
//! edge without an HS256 secret). The origin behind it holds every key inline
//! (it never fetches), so the stand-in provider counts the edge's fetches alone.

use futures::StreamExt;
use std::time::{Duration, Instant};

use flashgate_shared::token::SigningKey;
use flashgate_tests::idp::{self, Idp};
use flashgate_tests::support::{
    claim_via, eventually, signed_test_config, unique, TestEdge, TestOrigin, TEST_EDGE_SECRET,
};

const ISS: &str = "https://idp.flashgate.test/";
const AUD: &str = "flashgate-shop";

/// An origin checking [`ISS`] / [`AUD`] with `keys` inline, and an edge in front of it
/// fetching the JWKS from `provider` (least interval `min_refresh_s`, TTL `ttl_s`).
async fn start(
    provider: &Idp,
    keys: &[&SigningKey],
    min_refresh_s: u64,
    ttl_s: u64,
) -> (TestOrigin, TestEdge) {
    let mut c = signed_test_config();
    c.tokens.jwt_issuer = Some(ISS.into());
    c.tokens.jwt_audience = Some(AUD.into());
    c.tokens.jwks = Some(idp::jwks(keys).to_string());
    let o = TestOrigin::start_with(c).await;
    let e = TestEdge::start(
        &o.url,
        &[
            ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.into()),
            ("FLASHGATE_JWT_ISSUER", ISS.into()),
            ("FLASHGATE_JWT_AUDIENCE", AUD.into()),
            ("FLASHGATE_JWKS_URL", provider.url.clone()),
            (
                "FLASHGATE_JWKS_MIN_REFRESH_SECONDS",
                min_refresh_s.to_string(),
            ),
            ("FLASHGATE_JWKS_TTL_SECONDS", ttl_s.to_string()),
        ],
    );
    (o, e)
}

/// Status, who answered and the error message of one claim with `token`.
async fn claim(o: &TestOrigin, e: &TestEdge, c: &str, token: &str) -> (u16, String, String) {
    let (status, by, body) = claim_via(&o.http, &e.url, token, c, &unique("k")).await;
    let message = body["message"].as_str().unwrap_or_default().to_string();
    (status, by, message)
}

/// Claims with each of `tokens` at once, 50 on the wire at a time (enough to pile onto one
/// key fetch; a runtime on a busy CI machine reset some of 200 connections opened at once);
/// the answers in order.
async fn flood(
    o: &TestOrigin,
    e: &TestEdge,
    c: &str,
    tokens: &[String],
) -> Vec<(u16, String, String)> {
    futures::stream::iter(tokens.iter().map(|t| claim(o, e, c, t)))
        .buffered(50)
        .collect()
        .await
}

/// Claims with fresh tokens of `key` until one is accepted (201), for at most `within`.
async fn until_accepted(o: &TestOrigin, e: &TestEdge, c: &str, key: &SigningKey, within: Duration) {
    eventually("a token of the new key is accepted", within, || {
        let t = key.sign(&idp::claims(&unique("cust"), ISS, AUD));
        async move {
            match claim(o, e, c, &t).await {
                (201, ..) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_edge_accepts_provider_tokens_and_refuses_every_bad_one_itself() {
    let (rs, es) = (idp::rsa_key("rs-1"), idp::ec_key("ec-1"));
    let provider = Idp::start(&[&rs, &es]).await;
    let (o, e) = start(&provider, &[&rs, &es], 30, 600).await;
    let c = o.campaign("sale", 1_000).await;
    let secret = o.customer_secret();
    for (case, token) in idp::acceptances(&rs, &es, ISS, AUD, &secret) {
        let r = claim(&o, &e, &c, &token).await;
        assert_eq!((r.0, r.1.as_str()), (201, "origin"), "{case}: {r:?}");
    }
    for (case, token, message) in idp::refusals(&rs, &es, ISS, AUD, &secret) {
        let r = claim(&o, &e, &c, &token).await;
        assert_eq!(r, (401, "edge".into(), message.into()), "{case}");
    }
    assert_eq!(provider.fetches(), 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_unknown_kids_makes_the_edge_fetch_once() {
    let known = idp::ec_key("known");
    let provider = Idp::start(&[&known]).await;
    let (o, e) = start(&provider, &[&known], 30, 600).await;
    let c = o.campaign("sale", 10).await;
    let forged: Vec<String> = (0..100)
        .map(|i| idp::ec_key(&format!("made-up-{i}")).sign(&idp::claims("m", ISS, AUD)))
        .collect();
    let replies = flood(&o, &e, &c, &forged).await;
    for r in &replies {
        assert_eq!(
            r,
            &(
                401,
                "edge".into(),
                "customer token key id is unknown".into()
            )
        );
    }
    assert_eq!(
        provider.fetches(),
        1,
        "one fetch for 100 concurrent unknown kids"
    );
    let t = known.sign(&idp::claims(&unique("cust"), ISS, AUD));
    assert_eq!(claim(&o, &e, &c, &t).await.0, 201);
    assert_eq!(provider.fetches(), 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotation_at_the_edge_fetches_a_new_kid_once_and_drops_a_removed_one() {
    let (old, new) = (idp::ec_key("old"), idp::rsa_key("new"));
    let provider = Idp::start(&[&old]).await;
    let (o, e) = start(&provider, &[&old, &new], 1, 2).await;
    let c = o.campaign("sale", 1_000).await;
    let token = |k: &SigningKey| k.sign(&idp::claims(&unique("cust"), ISS, AUD));
    assert_eq!(claim(&o, &e, &c, &token(&old)).await.0, 201);
    assert_eq!(provider.fetches(), 1);
    provider.publish(&[&old, &new]);
    // Within a second of the last fetch the new kid is refused without a fetch; then fetched.
    until_accepted(&o, &e, &c, &new, Duration::from_secs(10)).await;
    assert_eq!(provider.fetches(), 2, "the new kid was fetched once");
    assert_eq!(
        claim(&o, &e, &c, &token(&old)).await.0,
        201,
        "the old kid still works"
    );
    provider.publish(&[&new]);
    eventually(
        "the removed kid is refused",
        Duration::from_secs(15),
        || {
            let t = token(&old);
            let (o, e, c) = (&o, &e, &c);
            async move {
                match claim(o, e, c, &t).await {
                    (401, by, m) if by == "edge" && m == "customer token key id is unknown" => {
                        Ok(())
                    }
                    other => Err(format!("{other:?}")),
                }
            }
        },
    )
    .await;
    assert_eq!(claim(&o, &e, &c, &token(&new)).await.0, 201);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_key_replaced_under_its_kid_is_refetched_at_most_once_per_interval_at_the_edge() {
    const MIN_REFRESH_S: u64 = 2;
    let (old, new) = (idp::ec_key("k1"), idp::ec_key("k1"));
    let provider = Idp::start(&[&old]).await;
    // A TTL far past the test, so only a bad signature can make the edge fetch again. The
    // origin holds the replacement alone (it never fetches).
    let (o, e) = start(&provider, &[&new], MIN_REFRESH_S, 600).await;
    let c = o.campaign("sale", 1_000).await;
    let token = |k: &SigningKey| k.sign(&idp::claims(&unique("cust"), ISS, AUD));
    // The edge holds k1's old key: it lets a token of it through (the origin refuses it).
    let r = claim(&o, &e, &c, &token(&old)).await;
    assert_eq!(r.1, "origin", "{r:?}");
    assert_eq!(provider.fetches(), 1);
    provider.publish(&[&new]);
    let within = Duration::from_secs(MIN_REFRESH_S + 2);
    until_accepted(&o, &e, &c, &new, within).await;
    let fetched = provider.fetches();
    assert_eq!(fetched, 2, "the replaced key was fetched once");
    // Once an interval has passed since that fetch, 200 concurrent tokens with bad signatures
    // on k1: refused at the edge, with one fetch per interval they span, and at least one.
    tokio::time::sleep(Duration::from_secs(MIN_REFRESH_S)).await;
    let forger = idp::ec_key("k1");
    let forged: Vec<String> = (0..200).map(|_| token(&forger)).collect();
    let started = Instant::now();
    let replies = flood(&o, &e, &c, &forged).await;
    let intervals = started.elapsed().as_secs() / MIN_REFRESH_S + 1;
    for r in &replies {
        assert_eq!(
            r,
            &(
                401,
                "edge".into(),
                "customer token signature is invalid".into()
            )
        );
    }
    let flood_fetches = provider.fetches() - fetched;
    assert!(
        (1..=intervals).contains(&flood_fetches),
        "{flood_fetches} JWKS fetches for 200 bad signatures in {intervals} interval(s)"
    );
    assert_eq!(claim(&o, &e, &c, &token(&new)).await.0, 201);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_jwks_outage_keeps_the_edges_cached_keys() {
    let key = idp::rsa_key("rs-outage");
    let provider = Idp::start(&[&key]).await;
    let (o, e) = start(&provider, &[&key], 1, 1).await;
    let c = o.campaign("sale", 1_000).await;
    let token = || key.sign(&idp::claims(&unique("cust"), ISS, AUD));
    assert_eq!(claim(&o, &e, &c, &token()).await.0, 201);
    provider.set_down(true);
    let before = provider.fetches();
    eventually("a refetch was tried", Duration::from_secs(15), || {
        let t = token();
        let (o, e, c, p) = (&o, &e, &c, &provider);
        async move {
            let r = claim(o, e, c, &t).await;
            if r.0 != 201 {
                return Err(format!("refused during the outage: {r:?}"));
            }
            if p.fetches() > before {
                Ok(())
            } else {
                Err("no refetch yet".into())
            }
        }
    })
    .await;
    assert_eq!(claim(&o, &e, &c, &token()).await.0, 201);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_provider_only_edge_answers_503_until_it_has_the_keys_then_401_for_unknown_kids() {
    let key = idp::rsa_key("rs-edge-late");
    let provider = Idp::start(&[&key]).await;
    provider.set_down(true);
    let mut c = signed_test_config();
    c.tokens.jwt_issuer = Some(ISS.into());
    c.tokens.jwt_audience = Some(AUD.into());
    c.tokens.jwks = Some(idp::jwks(&[&key]).to_string());
    let o = TestOrigin::start_with(c).await;
    // The identity provider alone at the edge: the HS256 secret set empty counts as unset.
    let e = TestEdge::start(
        &o.url,
        &[
            ("FLASHGATE_CUSTOMER_TOKEN_SECRET", String::new()),
            ("FLASHGATE_EDGE_SECRET", TEST_EDGE_SECRET.into()),
            ("FLASHGATE_JWT_ISSUER", ISS.into()),
            ("FLASHGATE_JWT_AUDIENCE", AUD.into()),
            ("FLASHGATE_JWKS_URL", provider.url.clone()),
            ("FLASHGATE_JWKS_MIN_REFRESH_SECONDS", "1".into()),
        ],
    );
    let c = o.campaign("sale", 10).await;
    let token = |k: &SigningKey| k.sign(&idp::claims(&unique("cust"), ISS, AUD));
    let a = idp::claim_answer(&o.http, &e.url, &c, &token(&key)).await;
    assert_eq!(
        (a.status, a.by.as_str(), a.message.as_str()),
        (
            503,
            "edge",
            "a dependency is unavailable; retry after the given delay"
        ),
        "{a:?}"
    );
    assert!(a.retry_after.parse::<u64>().is_ok_and(|s| s >= 1), "{a:?}");
    assert!(provider.fetches() >= 1, "the edge tried the provider");
    provider.set_down(false);
    eventually("the edge got the keys", Duration::from_secs(15), || {
        let t = token(&key);
        let (o, e, c) = (&o, &e, &c);
        async move {
            match idp::claim_answer(&o.http, &e.url, c, &t).await {
                a if a.status == 201 => Ok(()),
                a => Err(format!("{a:?}")),
            }
        }
    })
    .await;
    // Keys held: an unknown key id is 401 at the edge, also while the provider is down again.
    provider.set_down(true);
    let stranger = idp::ec_key("not-published");
    let a = idp::claim_answer(&o.http, &e.url, &c, &token(&stranger)).await;
    assert_eq!(
        (a.status, a.by.as_str(), a.message.as_str()),
        (401, "edge", "customer token key id is unknown")
    );
    assert_eq!(o.claim_rows(&c, &[]).await, 1);
    o.stop().await;
}
