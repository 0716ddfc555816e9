//! Customer tokens from an identity provider at the origin: RS256 / ES256 keys from
//! a JWKS served by a local stand-in provider, issuer and audience checks, HS256 key ids,
//! rotation, a key replaced under its key id, the fetch bound under a flood of unknown key
//! ids or bad signatures, algorithm confusion, the
//! leeway, a JWKS endpoint that is down (since start-up: 503), an identity-provider-only setup
//! (no HS256 secret), a chunked JWKS past the size bound, and `flashgate token` refusing a
//! lifetime the origin would refuse.

use std::time::Duration;

use futures::FutureExt;

use flashgate_origin::config::Config;
use flashgate_origin::secret::Secret;
use flashgate_shared::token::keys::NO_KEYS;
use flashgate_shared::token::SigningKey;
use flashgate_tests::idp::{self, claim_with, ChunkedJwks, Idp};
use flashgate_tests::support::{eventually, test_config, unique, TestOrigin};

const ISS: &str = "https://idp.flashgate.test/";
const AUD: &str = "flashgate-shop";

/// The test configuration checking [`ISS`] and [`AUD`], with the JWKS at `jwks_url`.
fn config(jwks_url: Option<&str>, min_refresh_s: u64, ttl_s: u64) -> Config {
    let mut c = test_config();
    c.tokens.jwt_issuer = Some(ISS.into());
    c.tokens.jwt_audience = Some(AUD.into());
    c.tokens.jwks_url = jwks_url.map(Into::into);
    c.tokens.jwks_min_refresh_seconds = min_refresh_s;
    c.tokens.jwks_ttl_seconds = ttl_s;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_tokens_are_accepted_and_every_bad_one_is_refused_with_401() {
    let (rs, es) = (idp::rsa_key("rs-1"), idp::ec_key("ec-1"));
    let provider = Idp::start(&[&rs, &es]).await;
    let o = TestOrigin::start_with(config(Some(&provider.url), 30, 600)).await;
    let c = o.campaign("sale", 1_000).await;
    for (case, token) in idp::acceptances(&rs, &es, ISS, AUD, &o.customer_secret()) {
        assert_eq!(
            claim_with(&o.http, &o.url, &c, &token).await.0,
            201,
            "{case}"
        );
    }
    for (case, token, message) in idp::refusals(&rs, &es, ISS, AUD, &o.customer_secret()) {
        assert_eq!(
            claim_with(&o.http, &o.url, &c, &token).await,
            (401, message.to_string()),
            "{case}"
        );
    }
    let accepted = idp::acceptances(&rs, &es, ISS, AUD, &o.customer_secret()).len() as i64;
    assert_eq!(
        o.claim_rows(&c, &[]).await,
        accepted,
        "refusals change nothing"
    );
    // One fetch served every key id.
    assert_eq!(provider.fetches(), 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_issuer_and_audience_settings_todays_tokens_work_as_before() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 10).await;
    let t = o.token(&unique("ana"));
    assert_eq!(claim_with(&o.http, &o.url, &c, &t).await.0, 201);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotation_the_old_kid_works_until_removed_and_a_new_kid_is_fetched_once() {
    let (old, new) = (idp::ec_key("2026-old"), idp::rsa_key("2026-new"));
    let provider = Idp::start(&[&old]).await;
    // Unknown kids refetch at once (no interval); the TTL makes removals show within 1 s.
    let o = TestOrigin::start_with(config(Some(&provider.url), 0, 1)).await;
    let c = o.campaign("sale", 1_000).await;
    let token = |k: &SigningKey| k.sign(&idp::claims(&unique("cust"), ISS, AUD));
    assert_eq!(claim_with(&o.http, &o.url, &c, &token(&old)).await.0, 201);
    assert_eq!(provider.fetches(), 1);
    provider.publish(&[&old, &new]);
    assert_eq!(claim_with(&o.http, &o.url, &c, &token(&new)).await.0, 201);
    assert_eq!(provider.fetches(), 2, "the new kid was fetched");
    for _ in 0..5 {
        assert_eq!(claim_with(&o.http, &o.url, &c, &token(&new)).await.0, 201);
        assert_eq!(claim_with(&o.http, &o.url, &c, &token(&old)).await.0, 201);
    }
    assert!(provider.fetches() <= 3, "known kids fetch only on the TTL");
    provider.publish(&[&new]);
    eventually(
        "the removed kid is refused",
        Duration::from_secs(10),
        || {
            let (o, c, t) = (&o, &c, token(&old));
            async move {
                match claim_with(&o.http, &o.url, c, &t).await {
                    (401, m) if m == "customer token key id is unknown" => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            }
        },
    )
    .await;
    assert_eq!(claim_with(&o.http, &o.url, &c, &token(&new)).await.0, 201);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_unknown_kids_causes_one_fetch_per_interval() {
    let known = idp::ec_key("known");
    let provider = Idp::start(&[&known]).await;
    // The first fetch takes 400 ms, so most of the flood arrives while it is under way: they
    // wait for it and are judged against the keys it brings (401), never a 503.
    provider.set_delay_ms(400);
    let o = TestOrigin::start_with(config(Some(&provider.url), 30, 600)).await;
    let c = o.campaign("sale", 10).await;
    let forged: Vec<String> = (0..200)
        .map(|i| idp::ec_key(&format!("made-up-{i}")).sign(&idp::claims("m", ISS, AUD)))
        .collect();
    let (lead, rest) = forged.split_first().expect("200 tokens");
    let replies = futures::future::join_all(
        std::iter::once(claim_with(&o.http, &o.url, &c, lead).boxed()).chain(rest.iter().map(
            |t| {
                let (o, c) = (&o, &c);
                async move {
                    // The lead's fetch has started by then.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    claim_with(&o.http, &o.url, c, t).await
                }
                .boxed()
            },
        )),
    )
    .await;
    for r in &replies {
        assert_eq!(r, &(401, "customer token key id is unknown".to_string()));
    }
    assert_eq!(
        provider.fetches(),
        1,
        "one fetch for 200 concurrent unknown kids"
    );
    let t = known.sign(&idp::claims(&unique("cust"), ISS, AUD));
    assert_eq!(claim_with(&o.http, &o.url, &c, &t).await.0, 201);
    assert_eq!(provider.fetches(), 1);
    assert_eq!(o.claim_rows(&c, &[]).await, 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jwks_outage_keeps_the_cached_keys() {
    let key = idp::rsa_key("rs-outage");
    let provider = Idp::start(&[&key]).await;
    let o = TestOrigin::start_with(config(Some(&provider.url), 1, 1)).await;
    let c = o.campaign("sale", 1_000).await;
    let token = || key.sign(&idp::claims(&unique("cust"), ISS, AUD));
    assert_eq!(claim_with(&o.http, &o.url, &c, &token()).await.0, 201);
    provider.set_down(true);
    let before = provider.fetches();
    // Past the TTL the origin tries again, fails, and goes on with the keys it holds.
    eventually("a refetch was tried", Duration::from_secs(10), || {
        let (o, c, t) = (&o, &c, token());
        let provider = &provider;
        async move {
            let r = claim_with(&o.http, &o.url, c, &t).await;
            if r.0 != 201 {
                return Err(format!("refused during the outage: {r:?}"));
            }
            if provider.fetches() > before {
                Ok(())
            } else {
                Err("no refetch yet".into())
            }
        }
    })
    .await;
    assert_eq!(claim_with(&o.http, &o.url, &c, &token()).await.0, 201);
    o.stop().await;
}

/// The 503 body of the documented error shape.
const UNAVAILABLE: &str = "a dependency is unavailable; retry after the given delay";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_only_origin_answers_503_until_it_has_the_keys_then_401_for_unknown_kids() {
    let key = idp::rsa_key("rs-late");
    let provider = Idp::start(&[&key]).await;
    provider.set_down(true);
    // The identity provider alone: no HS256 secret (unknown kids refetch at once).
    let mut cfg = config(Some(&provider.url), 0, 600);
    cfg.customer_token_secret = None;
    let o = TestOrigin::start_with(cfg).await;
    let c = o.campaign("sale", 10).await;
    let token = |k: &SigningKey| k.sign(&idp::claims(&unique("cust"), ISS, AUD));
    // Down since start-up: the keys are missing, not the token's.
    let a = idp::claim_answer(&o.http, &o.url, &c, &token(&key)).await;
    assert_eq!((a.status, a.message.as_str()), (503, UNAVAILABLE), "{a:?}");
    assert!(a.retry_after.parse::<u64>().is_ok_and(|s| s >= 1), "{a:?}");
    assert!(provider.fetches() >= 1, "the origin tried the provider");
    assert_eq!(o.claim_rows(&c, &[]).await, 0, "a 503 changes nothing");
    provider.set_down(false);
    let a = idp::claim_answer(&o.http, &o.url, &c, &token(&key)).await;
    assert_eq!(a.status, 201, "{a:?}");
    // Keys held: an unknown key id is the token's fault (401), also while the provider is
    // down again; an HS256 token has no secret to match.
    provider.set_down(true);
    let stranger = idp::ec_key("not-published");
    let a = idp::claim_answer(&o.http, &o.url, &c, &token(&stranger)).await;
    assert_eq!(
        (a.status, a.message.as_str()),
        (401, "customer token key id is unknown")
    );
    let hs = SigningKey::hs256(None, b"some-customer-secret-0123456789abcdef");
    let a = idp::claim_answer(&o.http, &o.url, &c, &hs.sign(&idp::claims("ana", ISS, AUD))).await;
    assert_eq!(
        (a.status, a.message.as_str()),
        (401, "customer token algorithm is not accepted for its key")
    );
    assert_eq!(o.claim_rows(&c, &[]).await, 1);
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_without_any_customer_token_key_refuses_to_start() {
    let mut cfg = config(None, 30, 600);
    cfg.customer_token_secret = None;
    assert_eq!(cfg.validate(), Err(NO_KEYS.to_string()));
    let e = flashgate_origin::server::spawn(cfg)
        .await
        .err()
        .expect("no key at all: serve refuses to start");
    assert!(e.to_string().contains(NO_KEYS), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunked_jwks_is_read_up_to_256_kib_and_no_further() {
    let key = idp::ec_key("chunky");
    let token = || key.sign(&idp::claims(&unique("cust"), ISS, AUD));
    // Chunked (no Content-Length) and under the bound: read whole.
    let small = ChunkedJwks::start(&[&key], 64 * 1024).await;
    let o = TestOrigin::start_with(config(Some(&small.url), 30, 600)).await;
    let c = o.campaign("sale", 10).await;
    assert_eq!(
        idp::claim_answer(&o.http, &o.url, &c, &token())
            .await
            .status,
        201
    );
    o.stop().await;
    // 64 MiB without Content-Length: refused past 256 KiB, the rest never read; the origin
    // holds no provider key yet, so the token is answered 503.
    let big = ChunkedJwks::start(&[&key], 64 << 20).await;
    let o = TestOrigin::start_with(config(Some(&big.url), 30, 600)).await;
    let c = o.campaign("sale", 10).await;
    let a = idp::claim_answer(&o.http, &o.url, &c, &token()).await;
    assert_eq!((a.status, a.message.as_str()), (503, UNAVAILABLE), "{a:?}");
    assert!(
        big.served() < 16 << 20,
        "the provider sent {} bytes: the body was read past the bound",
        big.served()
    );
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hs256_secrets_with_key_ids_and_an_inline_jwks_work_offline() {
    let es = idp::ec_key("inline-ec");
    let mut cfg = config(None, 30, 600);
    cfg.tokens.jwks = Some(idp::jwks(&[&es]).to_string());
    cfg.tokens.customer_token_secrets =
        Some(Secret::new("next:next-customer-secret-0123456789abcdefgh"));
    let o = TestOrigin::start_with(cfg).await;
    let c = o.campaign("sale", 10).await;
    let claims = || idp::claims(&unique("cust"), ISS, AUD);
    let next = SigningKey::hs256(
        Some("next".into()),
        b"next-customer-secret-0123456789abcdefgh",
    );
    let today = SigningKey::hs256(None, &o.customer_secret());
    for (case, t) in [
        ("inline ES256", es.sign(&claims())),
        ("HS256 kid next", next.sign(&claims())),
        ("HS256 single secret", today.sign(&claims())),
    ] {
        assert_eq!(claim_with(&o.http, &o.url, &c, &t).await.0, 201, "{case}");
    }
    // The next secret under another kid, or the old secret naming kid "next": refused.
    let wrong = SigningKey::hs256(Some("next".into()), &o.customer_secret());
    assert_eq!(
        claim_with(&o.http, &o.url, &c, &wrong.sign(&claims())).await,
        (401, "customer token signature is invalid".into())
    );
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flashgate_token_mints_es256_tokens_from_a_pem_key() {
    use p256::pkcs8::{EncodePrivateKey, LineEnding};
    let dir = std::env::temp_dir().join(unique("pem"));
    std::fs::create_dir_all(&dir).unwrap();
    let pem_path = dir.join("ec.pem");
    let key = p256::ecdsa::SigningKey::random(&mut rand_core::OsRng);
    std::fs::write(
        &pem_path,
        key.to_pkcs8_pem(LineEnding::LF).unwrap().as_bytes(),
    )
    .unwrap();
    let args = |jwks: bool, sub: &str| flashgate_origin::cli::token::TokenArgs {
        sub: Some(sub.into()),
        ttl_seconds: 600,
        jwt_max_lifetime_seconds: flashgate_shared::token::DEFAULT_MAX_LIFETIME_SECONDS,
        alg: "ES256".into(),
        key: Some(pem_path.clone()),
        kid: Some("demo".into()),
        iss: Some(ISS.into()),
        aud: Some(AUD.into()),
        jwks,
        customer_token_secret: None,
    };
    let mut cfg = config(None, 30, 600);
    cfg.tokens.jwks = Some(args(true, "x").run().unwrap());
    let o = TestOrigin::start_with(cfg).await;
    let c = o.campaign("sale", 10).await;
    let t = args(false, &unique("cust")).run().unwrap();
    assert_eq!(claim_with(&o.http, &o.url, &c, &t).await.0, 201);
    let e = flashgate_origin::cli::token::TokenArgs {
        key: None,
        ..args(false, "x")
    }
    .run()
    .unwrap_err();
    assert_eq!(e.to_string(), "ES256 needs --key <PEM file>");
    o.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_swapped_under_its_kid_is_accepted_within_the_refresh_interval() {
    let (old, new) = (idp::rsa_key("k1"), idp::rsa_key("k1"));
    let provider = Idp::start(&[&old]).await;
    let interval = Duration::from_secs(2);
    let o = TestOrigin::start_with(config(Some(&provider.url), 2, 600)).await;
    let c = o.campaign("sale", 1_000).await;
    let token = |k: &SigningKey| k.sign(&idp::claims(&unique("cust"), ISS, AUD));
    assert_eq!(claim_with(&o.http, &o.url, &c, &token(&old)).await.0, 201);
    assert_eq!(provider.fetches(), 1);
    // The provider replaces the key of k1 (same kid, new key).
    provider.publish(&[&new]);
    eventually(
        "the new key of k1 is accepted",
        interval + Duration::from_secs(2),
        || {
            let (o, c, t) = (&o, &c, token(&new));
            async move {
                match claim_with(&o.http, &o.url, c, &t).await {
                    (201, _) => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            }
        },
    )
    .await;
    assert_eq!(provider.fetches(), 2, "one fetch picked up the new key");
    assert_eq!(
        claim_with(&o.http, &o.url, &c, &token(&old)).await,
        (401, "customer token signature is invalid".into()),
        "the replaced key no longer signs for k1"
    );
    o.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_bad_signatures_on_a_known_kid_causes_at_most_one_fetch_per_interval() {
    let (real, forger) = (idp::ec_key("k1"), idp::ec_key("k1"));
    let provider = Idp::start(&[&real]).await;
    let interval_s = 2;
    let o = TestOrigin::start_with(config(Some(&provider.url), interval_s, 600)).await;
    let c = o.campaign("sale", 10).await;
    let t = real.sign(&idp::claims(&unique("cust"), ISS, AUD));
    assert_eq!(claim_with(&o.http, &o.url, &c, &t).await.0, 201);
    assert_eq!(provider.fetches(), 1);
    // Past the interval, 200 tokens of k1 with bad signatures at once.
    tokio::time::sleep(Duration::from_millis(interval_s * 1_000 + 100)).await;
    let forged: Vec<String> = (0..200)
        .map(|_| forger.sign(&idp::claims("mallory", ISS, AUD)))
        .collect();
    let started = std::time::Instant::now();
    let replies =
        futures::future::join_all(forged.iter().map(|t| claim_with(&o.http, &o.url, &c, t))).await;
    let took_ms = started.elapsed().as_millis() as u64;
    for r in &replies {
        assert_eq!(r, &(401, "customer token signature is invalid".to_string()));
    }
    let fetched = provider.fetches() - 1;
    assert!(fetched >= 1, "a bad signature on a known kid refetches");
    assert!(
        fetched <= 1 + took_ms / (interval_s * 1_000),
        "{fetched} fetches in {took_ms} ms"
    );
    assert_eq!(o.claim_rows(&c, &[]).await, 1, "refusals change nothing");
    o.stop().await;
}

/// `flashgate token --sub <sub> <args>` (the real binary) with the origin's HS256 secret and
/// no other setting: its exit code, stdout (the token) and stderr.
fn mint(o: &TestOrigin, sub: &str, args: &[&str]) -> (Option<i32>, String, String) {
    let secret = String::from_utf8(o.customer_secret()).expect("a text secret");
    let out = std::process::Command::new(flashgate_tests::support::flashgate_bin())
        .args(["token", "--sub", sub])
        .args(args)
        .env_clear()
        .env("FLASHGATE_CUSTOMER_TOKEN_SECRET", secret)
        .output()
        .expect("flashgate runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).trim().to_string(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_refuses_a_token_lifetime_the_origin_would_refuse() {
    let o = TestOrigin::start().await;
    let c = o.campaign("sale", 10).await;
    // The origin's default longest lifetime (86,400 s): the CLI mints it, the origin takes it.
    let (code, day, err) = mint(&o, &unique("ana"), &["--ttl-seconds", "86400"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(claim_with(&o.http, &o.url, &c, &day).await.0, 201);
    // Two days: a usage error naming the setting, and no token.
    let (code, two_days, err) = mint(&o, &unique("ben"), &["--ttl-seconds", "172800"]);
    assert_eq!(code, Some(2), "{two_days}");
    assert!(two_days.is_empty());
    assert!(err.contains("FLASHGATE_JWT_MAX_LIFETIME_SECONDS"), "{err}");
    // Told the origin's max is two days, the CLI mints it; this origin (one day) refuses it.
    let (code, two_days, err) = mint(
        &o,
        &unique("cy"),
        &[
            "--ttl-seconds",
            "172800",
            "--jwt-max-lifetime-seconds",
            "172800",
        ],
    );
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(claim_with(&o.http, &o.url, &c, &two_days).await.0, 401);
    o.stop().await;
}
