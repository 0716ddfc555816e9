//! Host unit tests of [`crate::access`].

use super::*;
use crate::queue::tests::ticket;
use crate::status::from_origin;
use crate::status::tests::{status, t};
use flashgate_shared::admission::sign_ticket;
use flashgate_shared::api::CampaignState;
use flashgate_shared::invite::{invite_key, sign, Invite};

const K: &[u8] = b"an edge secret of at least 32 bytes!";

fn pow_access(failure: ChallengeFailure) -> JoinAccess {
    JoinAccess {
        challenge: ChallengeKind::Pow,
        pow_difficulty: 8,
        challenge_failure: failure,
        ..JoinAccess::default()
    }
}

fn now_s() -> i64 {
    t("2026-03-01T11:00:00Z").timestamp()
}

#[test]
fn a_solved_challenge_passes_and_every_bad_answer_fails_by_reason() {
    let a = pow_access(ChallengeFailure::InfiniteQueue);
    let c = challenge(K, &a, "spring", "ana", [3; 16], now_s()).unwrap();
    assert_eq!(c.difficulty, 8);
    assert_eq!(c.expires_at.timestamp(), now_s() + CHALLENGE_TTL_S);
    let n = pow::solve(&c.challenge, 8, 1 << 20).unwrap().to_string();
    let body = |ch: &str, s: &str| JoinBody {
        challenge: Some(ch.into()),
        solution: Some(s.into()),
        ..JoinBody::default()
    };
    assert_eq!(
        check_pow(K, &body(&c.challenge, &n), "spring", "ana", now_s()),
        Ok(())
    );
    let cases = [
        (JoinBody::default(), "ana", now_s(), Failure::Missing),
        (body(&c.challenge, &n), "bo", now_s(), Failure::Foreign),
        (
            body(&c.challenge, &n),
            "ana",
            now_s() + 300,
            Failure::Expired,
        ),
        (body("x.y", &n), "ana", now_s(), Failure::Malformed),
    ];
    for (b, who, at, want) in cases {
        assert_eq!(check_pow(K, &b, "spring", who, at), Err(want));
    }
    let forged = challenge(
        b"another edge secret of 32 bytes!!!",
        &a,
        "spring",
        "ana",
        [3; 16],
        now_s(),
    )
    .unwrap();
    assert_eq!(
        check_pow(K, &body(&forged.challenge, &n), "spring", "ana", now_s()),
        Err(Failure::Forged)
    );
    let unsolved = (0u64..)
        .find(|&m| pow::leading_zero_bits(&pow::work_hash(&c.challenge, m)) < 8)
        .unwrap();
    assert_eq!(
        check_pow(
            K,
            &body(&c.challenge, &unsolved.to_string()),
            "spring",
            "ana",
            now_s()
        ),
        Err(Failure::Unsolved)
    );
    // No `pow` challenge on the campaign: 409.
    assert_eq!(
        challenge(K, &JoinAccess::default(), "spring", "ana", [0; 16], 0)
            .unwrap_err()
            .status,
        409
    );
}

#[test]
fn failures_go_to_the_infinite_queue_or_403_and_fail_open_passes_provider_errors() {
    let iq = pow_access(ChallengeFailure::InfiniteQueue);
    let fb = pow_access(ChallengeFailure::Forbidden);
    assert_eq!(gate(&iq, Ok(())), Ok(Gate::Pass));
    assert_eq!(
        gate(&iq, Err(Failure::Forged)),
        Ok(Gate::InfiniteQueue(Failure::Forged))
    );
    let refused = gate(&fb, Err(Failure::Unsolved)).unwrap_err();
    assert_eq!(refused.status, 403);
    assert!(refused.body.contains("unsolved"), "{}", refused.body);
    let open = JoinAccess {
        challenge_fail_open: true,
        ..fb
    };
    assert_eq!(gate(&open, Err(Failure::ProviderError)), Ok(Gate::Pass));
    assert_eq!(gate(&open, Err(Failure::Rejected)).unwrap_err().status, 403);
    assert_eq!(
        gate(&fb, Err(Failure::ProviderError)).unwrap_err().status,
        403
    );
}

#[test]
fn siteverify_answers_as_documented() {
    let ok = |b: &str| Siteverify::Answered(200, b.as_bytes().to_vec());
    assert_eq!(
        turnstile_verdict(&ok(r#"{"success":true,"error-codes":[],"hostname":"x"}"#)),
        Ok(())
    );
    assert_eq!(
        turnstile_verdict(&ok(
            r#"{"success":false,"error-codes":["invalid-input-response"]}"#
        )),
        Err(Failure::Rejected)
    );
    for bad in [
        ok("<html>"),
        ok(r#"{"success":"yes"}"#),
        Siteverify::Answered(500, b"{\"success\":true}".to_vec()),
        Siteverify::TimedOut,
        Siteverify::Failed,
    ] {
        assert_eq!(
            turnstile_verdict(&bad),
            Err(Failure::ProviderError),
            "{bad:?}"
        );
    }
    let b: serde_json::Value =
        serde_json::from_str(&siteverify_body("sec", "tok", Some("192.0.2.1"))).unwrap();
    assert_eq!(
        (
            b["secret"].as_str(),
            b["response"].as_str(),
            b["remoteip"].as_str()
        ),
        (Some("sec"), Some("tok"), Some("192.0.2.1"))
    );
}

#[test]
fn invites_are_checked_only_when_needed_and_refused_403() {
    let a = JoinAccess {
        invite_only: true,
        ..JoinAccess::default()
    };
    let key = invite_key(K, "spring");
    let inv = |c: &str, u: &str| Invite {
        campaign: c.into(),
        customer: u.into(),
        expires_at_s: now_s() + 60,
        jti: "i1".into(),
    };
    let body = |s: String| JoinBody {
        invite: Some(s),
        ..JoinBody::default()
    };
    let good = body(sign(&key, &inv("spring", "ana")));
    assert_eq!(
        check_invite(K, &a, &good, "spring", "ana", now_s()),
        Ok(Some("i1".into()))
    );
    assert_eq!(
        check_invite(
            K,
            &JoinAccess::default(),
            &JoinBody::default(),
            "spring",
            "ana",
            0
        ),
        Ok(None)
    );
    let other_campaign = body(sign(&invite_key(K, "fall"), &inv("fall", "ana")));
    for (b, who) in [
        (&good, "bo"),
        (&JoinBody::default(), "ana"),
        (&other_campaign, "ana"),
        (&body(sign(b"not the key", &inv("spring", "ana"))), "ana"),
    ] {
        let e = check_invite(K, &a, b, "spring", who, now_s()).unwrap_err();
        assert_eq!(e.status, 403, "{}", e.body);
    }
    let mut m = InviteMemo::new(2);
    m.put("spring", "ana", "i1", "T1".into());
    assert_eq!(m.get("spring", "ana", "i1"), Some("T1"));
    assert_eq!(m.get("spring", "bo", "i1"), None);
    assert_eq!(parse_body(b" ").unwrap(), JoinBody::default());
    assert_eq!(parse_body(b"{\"x\":1}").unwrap_err().status, 400);
    assert_eq!(parse_body(b"").unwrap(), JoinBody::default());
    assert_eq!(parse_body(b" {} ").unwrap(), JoinBody::default());
    for bad in [
        &b"{"[..],
        b"null",
        b"[]",
        b"[\"c\",\"1\"]",
        b"\"x\"",
        b"1",
        b"hello",
        b"{\"foo\":1}",
    ] {
        let a = parse_body(bad).unwrap_err();
        assert_eq!(
            (a.status, a.body.contains("invalid_json")),
            (400, true),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn an_infinite_queue_ticket_waits_where_it_would_be_admitted() {
    let mut v = serde_json::to_value(status(CampaignState::Active)).unwrap();
    v["remaining"] = 50.into();
    v["queue"] = serde_json::json!({"now_serving": 100, "admit_per_second": 10,
        "admission_ttl_seconds": 120});
    let e = from_origin("spring", 200, v.to_string().as_bytes(), 0).unwrap();
    let shadow = shadow_secret(K);
    let now = t("2026-03-01T11:00:00Z").timestamp_millis();
    let admitted = shadow_poll(&e, &ticket(90), &shadow, now).unwrap();
    assert_eq!(
        (
            admitted.reply.state,
            admitted.reply.position,
            admitted.reply.admitted
        ),
        (QueueState::Waiting, 1, false)
    );
    assert_eq!(admitted.reply.admission_token, None);
    // Behind the line it reads as any waiting ticket.
    let waiting = shadow_poll(&e, &ticket(150), &shadow, now).unwrap();
    assert_eq!(waiting, queue::poll(&e, &ticket(150), K, now, &[]).unwrap());
    // The shadow key is not the edge secret: the origin cannot open its tickets.
    let raw = sign_ticket(&shadow, &ticket(150));
    assert!(open_ticket(K, &raw, "spring").is_err());
    // The edge opens it with the key it derives, and only as a shadow ticket of its campaign.
    assert_eq!(open_shadow(K, &raw, "spring"), Some((ticket(150), shadow)));
    assert_eq!(open_shadow(K, &raw, "summer"), None);
    assert_eq!(
        open_shadow(K, &sign_ticket(K, &ticket(150)), "spring"),
        None
    );
}

#[test]
fn failures_are_counted_by_outcome_and_reason() {
    let mut c = FailureCounts::default();
    c.add(Failure::Forged, false);
    c.add(Failure::Forged, false);
    c.add(Failure::ProviderError, true);
    let text = c.render();
    assert!(text.contains(
        "flashgate_edge_join_challenge_failures_total{outcome=\"infinite_queue\",reason=\"forged\"} 2\n"
    ));
    assert!(text.contains("{outcome=\"forbidden\",reason=\"provider_error\"} 1\n"));
}
