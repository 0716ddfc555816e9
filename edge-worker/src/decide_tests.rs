//! Host unit tests of [`crate::decide`].

use super::*;
use crate::status::tests::{entry, t};
use flashgate_shared::token::{mint, CustomerClaims};

const SECRET: &[u8] = b"k";
const NOW: i64 = 1_900_000_000;

/// Today's verifier of [`SECRET`], exact time checks (no leeway).
fn v() -> token::Verifier {
    token::Verifier::hs256(SECRET).with_leeway_seconds(0)
}

fn at(seconds: i64) -> token::NumericDate {
    seconds.into()
}

fn tok(exp: i64) -> String {
    let c = CustomerClaims {
        sub: "cust-7".into(),
        exp: exp.into(),
        nbf: None,
    };
    format!("Bearer {}", mint(&c, SECRET))
}

#[test]
fn client_ip_is_forwarded_only_when_it_is_an_address() {
    assert_eq!(
        client_ip(Some(" 203.0.113.7 ")).as_deref(),
        Some("203.0.113.7")
    );
    assert_eq!(
        client_ip(Some("2001:DB8::1")).as_deref(),
        Some("2001:db8::1")
    );
    for bad in [None, Some(""), Some("203.0.113.7, 10.0.0.1"), Some("x")] {
        assert_eq!(client_ip(bad), None, "{bad:?}");
    }
}

#[test]
fn routes() {
    assert_eq!(
        route("GET", "/api/v1/campaigns/spring"),
        Route::Status { id: "spring" }
    );
    assert_eq!(
        route("POST", "/api/v1/campaigns/Bad_Id/claims"),
        Route::Claim { id: "Bad_Id" }
    );
    assert_eq!(
        claim_campaign_check("Bad_Id").unwrap_err().body,
        r#"{"result":"not_found","message":"no campaign with this id (a campaign id is [a-z0-9-]{1,64})"}"#
    );
    assert_eq!(
        route("POST", "/api/v1/campaigns/spring/claims"),
        Route::Claim { id: "spring" }
    );
    assert_eq!(
        route("GET", "/api/v1/campaigns/Spring%20"),
        Route::NoSuchCampaign { id: "Spring%20" }
    );
    assert_eq!(
        route("POST", "/api/v1/campaigns//claims"),
        Route::NoSuchRoute
    );
    assert_eq!(
        route("GET", "/api/v1/campaigns/Spring"),
        Route::NoSuchCampaign { id: "Spring" }
    );
    assert_eq!(
        route("GET", "/api/v1/campaigns/spring/claims"),
        Route::WrongMethod { allow: "POST" }
    );
    assert_eq!(
        route("PUT", "/api/v1/campaigns/spring"),
        Route::WrongMethod { allow: "GET, HEAD" }
    );
    assert_eq!(
        route("OPTIONS", "/api/v1/campaigns/spring/queue"),
        Route::WrongMethod {
            allow: "GET, HEAD, POST"
        }
    );
    assert_eq!(
        route("HEAD", "/api/v1/campaigns/spring"),
        Route::Status { id: "spring" }
    );
    assert_eq!(route("GET", "/api/v1/claims/c_1"), Route::PassThrough);
    assert_eq!(route("HEAD", "/api/v1/claims/c_1"), Route::PassThrough);
    assert_eq!(route("POST", "/api/v1/claims/c_1/pay"), Route::PassThrough);
    assert_eq!(
        route("POST", "/api/v1/claims/c_1/extend"),
        Route::PassThrough
    );
    assert_eq!(
        route("GET", "/api/v1/claims/c_1/extend"),
        Route::WrongMethod { allow: "POST" }
    );
    assert_eq!(
        route("GET", "/api/v1/campaigns/spring/claims/mine"),
        Route::CampaignPassThrough {
            id: "spring".into()
        }
    );
    // An encoded id that decodes to a slug is routed as the plain id (RFC 3986 §6.2.2.2).
    assert_eq!(
        canonical_path("/api/v1/campaigns/spr%69ng/claims").as_deref(),
        Some("/api/v1/campaigns/spring/claims")
    );
    assert_eq!(
        canonical_path("/api/v1/campaigns/%74shirt").as_deref(),
        Some("/api/v1/campaigns/tshirt")
    );
    assert_eq!(
        canonical_path("/api/v1/campaigns/wr-%31/queue").as_deref(),
        Some("/api/v1/campaigns/wr-1/queue")
    );
    assert_eq!(canonical_path("/api/v1/campaigns/spring/claims"), None);
    assert_eq!(canonical_path("/api/v1/campaigns/%53pring"), None);
    assert_eq!(canonical_path("/api/v1/campaigns/%ff/claims"), None);
    assert_eq!(canonical_path("/api/v1/claims/c%5F1"), None);
    assert_eq!(
        route("POST", "/api/v1/campaigns/%53pring/claims"),
        Route::NoSuchCampaign { id: "%53pring" }
    );
    // Without canonicalising, an encoded slug still goes through the index.
    assert_eq!(
        route("POST", "/api/v1/campaigns/spr%69ng/claims"),
        Route::CampaignPassThrough {
            id: "spring".into()
        }
    );
    assert_eq!(
        route("POST", "/api/v1/campaigns/%ff/claims"),
        Route::NoSuchCampaign { id: "%ff" }
    );
    // Only a claim keeps an id that is not a slug (checked after the request checks).
    assert_eq!(
        route("POST", "/api/v1/campaigns/Bad_Id/queue"),
        Route::NoSuchCampaign { id: "Bad_Id" }
    );
    assert_eq!(
        route("GET", "/api/v1/campaigns/Bad_Id/claims/mine"),
        Route::NoSuchCampaign { id: "Bad_Id" }
    );
    assert_eq!(route("GET", "/api/v1/fulfilments/f1"), Route::PassThrough);
    assert_eq!(route("GET", "/api/v1/fulfilments/f1/x"), Route::NoSuchRoute);
    assert_eq!(route("GET", "/api/v1/nothing-here"), Route::NoSuchRoute);
    assert_eq!(route("GET", "/api/v1/coupons/"), Route::NoSuchRoute);
    assert_eq!(
        route("GET", "/api/v1/campaigns/spring/queue"),
        Route::QueuePoll { id: "spring" }
    );
    assert_eq!(
        route("POST", "/api/v1/campaigns/spring/queue"),
        Route::QueueJoin { id: "spring" }
    );
    assert_eq!(
        route("GET", "/api/v1/campaigns/spring/queue/challenge"),
        Route::QueueChallenge { id: "spring" }
    );
    assert_eq!(
        route("GET", "/api/v1/campaigns/spring/draw"),
        Route::Draw { id: "spring" }
    );
    assert_eq!(
        route("HEAD", "/api/v1/campaigns/spring/draw"),
        Route::CampaignPassThrough {
            id: "spring".into()
        }
    );
    assert_eq!(
        route("POST", "/api/v1/campaigns/spring/queue/challenge"),
        Route::WrongMethod { allow: "GET" }
    );
    assert_eq!(route("GET", "/admin/v1/campaigns"), Route::NoSuchRoute);
    assert_eq!(route("GET", "/metrics"), Route::NoSuchRoute);
    assert_eq!(route("GET", ""), Route::NoSuchRoute);
}

#[test]
fn the_openapi_document_is_passed_through_for_get_and_head_only() {
    assert_eq!(route("GET", "/openapi.json"), Route::PassThrough);
    assert_eq!(route("HEAD", "/openapi.json"), Route::PassThrough);
    assert_eq!(
        route("POST", "/openapi.json"),
        Route::WrongMethod { allow: "GET, HEAD" }
    );
    assert_eq!(route("GET", "/openapi.json/x"), Route::NoSuchRoute);
    assert_eq!(route("GET", "/openapi.yaml"), Route::NoSuchRoute);
}

fn input<'a>(auth: Option<&'a str>, key: Option<&'a [u8]>, body: &'a [u8]) -> ClaimInput<'a> {
    ClaimInput {
        authorization: auth,
        idempotency_key: key,
        content_type: Some("application/json; charset=utf-8"),
        content_length: None,
        body: Some(body),
    }
}

#[test]
fn accepts_a_good_claim() {
    let a = tok(NOW + 60);
    let r = check_claim(
        &input(Some(&a), Some(b"k-1"), b"{}"),
        &mut TokenCache::new(8),
        &v(),
        at(NOW),
    );
    assert_eq!(r, Ok("cust-7".to_string()));
}

#[test]
fn refuses_bad_claims_with_origin_codes() {
    let good = tok(NOW + 60);
    let expired = tok(NOW);
    let big = vec![b' '; MAX_CLAIM_BODY_BYTES + 1];
    let cases: Vec<(ClaimInput<'_>, u16, &str)> = vec![
        (
            input(Some(&good), Some(b"k"), &big),
            413,
            "payload_too_large",
        ),
        (input(None, Some(b"k"), b"{}"), 401, "unauthorized"),
        (
            input(Some("Bearer x.y.z"), Some(b"k"), b"{}"),
            401,
            "unauthorized",
        ),
        (
            input(Some(&expired), Some(b"k"), b"{}"),
            401,
            "unauthorized",
        ),
        (
            input(Some(&good), None, b"{}"),
            400,
            "invalid_idempotency_key",
        ),
        (
            input(Some(&good), Some(b"has space"), b"{}"),
            400,
            "invalid_idempotency_key",
        ),
        (input(Some(&good), Some(b"k"), b"{"), 400, "invalid_json"),
        (
            input(Some(&good), Some(b"k"), br#"{"quantity":-1}"#),
            400,
            "invalid_json",
        ),
        (
            input(Some(&good), Some(b"k"), br#"{"n":1e999999}"#),
            400,
            "invalid_json",
        ),
        (
            input(Some(&good), Some(b"k"), b"99999999999999999999999"),
            400,
            "invalid_json",
        ),
        (input(Some(&good), Some(b"k"), b""), 400, "invalid_json"),
    ];
    let plain = ClaimInput {
        content_type: Some("text/plain"),
        ..input(Some(&good), Some(b"k"), b"{}")
    };
    let none = ClaimInput {
        content_type: None,
        ..input(Some(&good), Some(b"k"), b"{}")
    };
    let mut cases = cases;
    cases.push((plain, 415, "unsupported_media_type"));
    cases.push((none, 415, "unsupported_media_type"));
    for (i, (inp, status, code)) in cases.into_iter().enumerate() {
        let a = check_claim(&inp, &mut TokenCache::new(8), &v(), at(NOW)).unwrap_err();
        let body: ErrorBody = serde_json::from_str(&a.body).unwrap();
        assert_eq!((a.status, body.result.as_str()), (status, code), "case {i}");
    }
}

#[test]
fn token_cache_gives_the_same_results_as_verify() {
    let mut cache = TokenCache::new(2);
    let c = |exp: i64, nbf: Option<i64>| CustomerClaims {
        sub: "cust-7".into(),
        exp: exp.into(),
        nbf: nbf.map(Into::into),
    };
    let live = mint(&c(NOW + 60, None), SECRET);
    let later = mint(&c(NOW + 60, Some(NOW + 30)), SECRET);
    for _ in 0..2 {
        // First round fills the cache, the second answers from it.
        assert_eq!(cache.verify(&live, &v(), at(NOW)), Ok("cust-7".into()));
        assert_eq!(
            cache.verify(&later, &v(), at(NOW)),
            Err(token::TokenError::NotYetValid)
        );
    }
    assert_eq!(cache.len(), 1);
    // Expiry is checked on every use of a cached token.
    assert_eq!(
        cache.verify(&live, &v(), at(NOW + 60)),
        Err(token::TokenError::Expired)
    );
    // Another secret never hits: the token is verified again and refused.
    let mut fresh = TokenCache::new(2);
    assert_eq!(
        fresh.verify(&live, &token::Verifier::hs256(b"other"), at(NOW)),
        Err(token::TokenError::BadSignature)
    );
    assert!(fresh.is_empty());
    // Full: starts over.
    let a = mint(&c(NOW + 61, None), SECRET);
    let b = mint(&c(NOW + 62, None), SECRET);
    cache.verify(&a, &v(), at(NOW)).unwrap();
    cache.verify(&b, &v(), at(NOW)).unwrap();
    assert_eq!(cache.len(), 1);
}

#[test]
fn content_length_is_checked_before_reading() {
    let good = tok(NOW + 60);
    for (cl, status) in [
        ("4097", 413),
        ("99999999999999999999999999", 413),
        // Not a number: ignored, the (empty) body decides.
        ("-1", 400),
        ("x", 400),
    ] {
        let inp = ClaimInput {
            content_length: Some(cl),
            body: None,
            ..input(Some(&good), Some(b"k"), b"")
        };
        assert_eq!(
            check_claim(&inp, &mut TokenCache::new(8), &v(), at(NOW))
                .unwrap_err()
                .status,
            status,
            "{cl}"
        );
    }
    assert_eq!(check_content_length(Some("4096")), Ok(()));
    assert!(drain_before_refusing(Some("5000")));
    assert!(!drain_before_refusing(Some("65537")));
    assert!(!drain_before_refusing(Some("x")));
}

#[test]
fn gate_answers_closed_states_at_the_edge() {
    let now = t("2026-03-01T11:00:00Z").timestamp_millis();
    let answer = |s| match gate(Some(&entry(s, now)), true, now, 2_000) {
        Gate::Answer(a) => Some((a.status, a.body)),
        Gate::Forward => None,
    };
    assert_eq!(
        answer(CampaignState::SoldOut),
        Some((409, r#"{"result":"sold_out"}"#.into()))
    );
    assert_eq!(
        answer(CampaignState::Ended),
        Some((409, r#"{"result":"ended"}"#.into()))
    );
    assert_eq!(
        answer(CampaignState::Paused),
        Some((409, r#"{"result":"paused"}"#.into()))
    );
    assert_eq!(answer(CampaignState::Active), None);
    // Stale or missing state: forward, never a made-up answer.
    let so = entry(CampaignState::SoldOut, now);
    assert_eq!(gate(Some(&so), false, now, 2_000), Gate::Forward);
    assert_eq!(gate(None, true, now, 2_000), Gate::Forward);
}

#[test]
fn not_started_only_when_clearly_early() {
    // starts_at is 2026-03-01T10:00:00Z.
    let e = entry(CampaignState::Scheduled, 0);
    let start = t("2026-03-01T10:00:00Z").timestamp_millis();
    let Gate::Answer(a) = gate(Some(&e), true, start - 2_001, 2_000) else {
        panic!("forwarded")
    };
    assert_eq!(
        (a.status, a.body.as_str()),
        (
            409,
            r#"{"result":"not_started","starts_at":"2026-03-01T10:00:00Z"}"#
        )
    );
    assert_eq!(gate(Some(&e), true, start - 2_000, 2_000), Gate::Forward);
    assert_eq!(gate(Some(&e), true, start + 5, 2_000), Gate::Forward);
    assert_eq!(gate(Some(&e), true, i64::MAX, 2_000), Gate::Forward);
}

#[test]
fn unknown_campaign_answers_the_origin_404() {
    let e = crate::status::from_origin("x", 404, br#"{"result":"not_found","message":"m"}"#, 0)
        .unwrap();
    let Gate::Answer(a) = gate(Some(&e), true, 0, 0) else {
        panic!()
    };
    assert_eq!(
        (a.status, a.body.as_str()),
        (404, r#"{"result":"not_found","message":"m"}"#)
    );
    let u = Answer::unavailable();
    assert_eq!((u.status, u.retry_after_s), (503, Some(1)));
    assert!(u.body.starts_with(r#"{"result":"unavailable","#));
}

#[test]
fn pass_through_bodies_past_the_origin_limit_are_refused() {
    assert!(check_pass_through_body(MAX_PASS_THROUGH_BODY_BYTES).is_ok());
    let refused = check_pass_through_body(MAX_PASS_THROUGH_BODY_BYTES + 1).unwrap_err();
    assert_eq!(refused.status, 413);
}

#[test]
fn only_safe_or_keyed_requests_are_sent_again_after_a_connection_failure() {
    assert!(may_resend("GET", false));
    assert!(may_resend("HEAD", false));
    assert!(may_resend("head", false));
    assert!(may_resend("POST", true));
    assert!(may_resend("PATCH", true));
    assert!(!may_resend("POST", false));
    assert!(!may_resend("PATCH", false));
    assert!(!may_resend("DELETE", false));
}

#[test]
fn hop_by_hop_headers_expect_and_the_edges_own_are_kept_back() {
    for name in [
        "host",
        "content-length",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",
        "x-forwarded-for",
        "cf-connecting-ip",
        flashgate_shared::EDGE_SIGNATURE_HEADER,
        flashgate_shared::CLIENT_IP_HEADER,
    ] {
        assert!(!passes_on(name), "{name} must not be passed on");
    }
    for name in [
        "authorization",
        "idempotency-key",
        "content-type",
        "x-request-id",
        "traceparent",
    ] {
        assert!(passes_on(name), "{name} must be passed on");
    }
}

#[test]
fn an_unreadable_pass_through_body_is_the_origins_400() {
    let a = unreadable_body();
    assert_eq!(a.status, 400);
    assert!(
        a.body.contains(r#""result":"invalid_request""#),
        "{}",
        a.body
    );
}

/// A fresh entry of a campaign in `state` with variants `41` (1 left) and `42` (none left),
/// read from an origin body as the edge reads it.
fn with_variants(state: CampaignState) -> StatusEntry {
    let mut body = serde_json::to_value(crate::status::tests::status(state)).unwrap();
    body["variants"] = serde_json::json!([
        {"id": "41", "name": "Size 41", "stock": 5, "remaining": 1, "state": "active"},
        {"id": "42", "name": "Size 42", "stock": 5, "remaining": 0, "state": "sold_out"},
    ]);
    crate::status::from_origin("spring", 200, body.to_string().as_bytes(), 0).unwrap()
}

#[test]
fn a_sold_out_variant_is_answered_at_the_edge_while_the_others_sell() {
    let e = with_variants(CampaignState::Active);
    let Gate::Answer(a) = variant_gate(Some(&e), true, "42") else {
        panic!("not answered");
    };
    assert_eq!(a.status, 409);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&a.body).unwrap(),
        serde_json::json!({"result": "sold_out", "variant": "42"})
    );
    assert_eq!(variant_gate(Some(&e), true, "41"), Gate::Forward);
    assert_eq!(
        variant_gate(Some(&e), true, "43"),
        Gate::Forward,
        "unknown: the origin's 422"
    );
    assert_eq!(variant_gate(Some(&e), false, "42"), Gate::Forward, "stale");
    let paused = with_variants(CampaignState::Paused);
    assert_eq!(variant_gate(Some(&paused), true, "42"), Gate::Forward);
    assert_eq!(
        claimed_variant(br#"{"variant":"42"}"#).as_deref(),
        Some("42")
    );
    assert_eq!(claimed_variant(b"{}"), None);
}

#[test]
fn a_variant_sold_out_answer_is_learned_for_that_variant_only() {
    use crate::status::{learn_from_claim, Decided, Known};
    let e = with_variants(CampaignState::Active);
    let answer = br#"{"result":"sold_out","variant":"41"}"#;
    let learned = learn_from_claim(Some(&e), Decided::Now, 409, answer, 5).expect("learned");
    let Known::Found {
        status,
        variants,
        body,
        ..
    } = &learned.known
    else {
        panic!("not found");
    };
    assert_eq!(
        status.state,
        CampaignState::Active,
        "the campaign stays live"
    );
    assert!(variants.iter().all(|v| v.remaining == 0));
    assert!(body.contains("\"variants\""), "{body}");
    assert!(matches!(
        variant_gate(Some(&learned), true, "41"),
        Gate::Answer(_)
    ));
    assert_eq!(
        learn_from_claim(Some(&learned), Decided::Now, 409, answer, 6),
        None
    );
}
