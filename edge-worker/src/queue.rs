//! The waiting room at the edge, in plain Rust: a queue poll answered from the ticket and the
//! cached status, and the admission check of claims on a campaign with a waiting room.
//!
//! The status reply follows from the ticket's sequence number and the cached `queue` fields
//! ([`QueueStatus::position`], [`QueueStatus::state`], [`QueueStatus::eta_seconds`]):
//! `position = sequence - now_serving` for arrival-ordered numbers (an estimate for numbers
//! drawn at random), `eta_seconds = ceil(position / admit_per_second)` (plus the time to
//! `starts_at` while the campaign is scheduled), admitted when `sequence <= now_serving` on an
//! active campaign. It is stock-aware: a `sold_out` status
//! answers `sold_out` to every ticket, and a waiting position beyond
//! [`UNLIKELY_FACTOR`] × `remaining` gets the outlook `unlikely`.

use crate::decide::Answer;
use crate::status::StatusEntry;
use flashgate_shared::admission::{self, AdmissionError, Ticket};
use flashgate_shared::api::{codes, CampaignStatus};
use flashgate_shared::queue::{
    Outlook, QueueState, QueueStatus, StatusReply, NO_WAITING_ROOM, QUEUED,
    SECOND_WAVE_RETRY_AFTER_S,
};

/// A waiting position is `unlikely` to get a unit when it is more than this many times the
/// remaining stock: even if every other person ahead walked away, there would be nothing left.
pub const UNLIKELY_FACTOR: u64 = 2;
/// Longest `Retry-After` of a queue answer, seconds.
pub const MAX_RETRY_AFTER_S: u32 = 30;
/// `Retry-After` of a claim refused 429 `queued` (no admission token), seconds.
pub const QUEUED_RETRY_AFTER_S: u32 = 5;
/// `Retry-After` while admission is paused, seconds. One second: nobody knows when admission
/// resumes, and the edge may still say paused for up to one status TTL after it did; a
/// customer sent away for longer would come back to find herself admitted together with
/// everyone admitted meanwhile, and those claims would all reach the origin at once (see
/// `docs/WAITING-ROOM.md`, "The bound on claims at the origin"). The polls cost the origin
/// nothing.
pub const PAUSED_RETRY_AFTER_S: u32 = 1;

/// The edge's answer to a queue poll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Poll {
    /// The JSON reply (`admission_token` set when admitted).
    pub reply: StatusReply,
    /// `Retry-After`, 1..=[`MAX_RETRY_AFTER_S`] seconds.
    pub retry_after_s: u32,
}

/// The error answers of the waiting room.
fn refusal(e: AdmissionError, what: &str) -> Answer {
    let code = if e.http_status() == 400 {
        codes::INVALID_REQUEST
    } else {
        codes::FORBIDDEN
    };
    Answer::error(e.http_status(), code, &e.message(what))
}

/// 409 `{"result":"no_waiting_room","message":…}`: a queue request on a campaign without one.
pub fn no_waiting_room(id: &str) -> Answer {
    Answer::error(
        409,
        NO_WAITING_ROOM,
        &format!("campaign {id} has no waiting room"),
    )
}

/// Checks the ticket of a poll on campaign `id`: 400 `invalid_request` when missing or
/// malformed, 403 `forbidden` when forged or for another campaign.
pub fn check_ticket(secret: &[u8], ticket: Option<&str>, id: &str) -> Result<Ticket, Answer> {
    let Some(t) = ticket.filter(|t| !t.trim().is_empty()) else {
        return Err(Answer::error(
            400,
            codes::INVALID_REQUEST,
            "missing Flashgate-Ticket header (or ticket query parameter)",
        ));
    };
    admission::open_ticket(secret, t, id).map_err(|e| refusal(e, "ticket"))
}

/// Tickets this isolate has checked, so that a customer's repeated polls skip the base64,
/// HMAC and JSON of her ticket: a hit is only the very same ticket string, checked with the
/// isolate's one secret, and its campaign is compared again on every use. Holds at most
/// `capacity` tickets and starts over when full.
#[derive(Debug, Default)]
pub struct TicketCache {
    checked: std::collections::HashMap<String, Ticket>,
    capacity: usize,
}

impl TicketCache {
    /// An empty cache holding at most `capacity` tickets (0 disables it).
    pub fn new(capacity: usize) -> Self {
        TicketCache {
            checked: std::collections::HashMap::new(),
            capacity,
        }
    }

    /// Same result as [`check_ticket`] for the same secret, ticket and campaign.
    pub fn check(
        &mut self,
        secret: &[u8],
        ticket: Option<&str>,
        id: &str,
    ) -> Result<Ticket, Answer> {
        if let Some(t) = ticket.and_then(|raw| self.checked.get(raw)) {
            if t.place.campaign == id {
                return Ok(t.clone());
            }
        }
        let t = check_ticket(secret, ticket, id)?;
        if let (Some(raw), true) = (ticket, self.capacity > 0) {
            if self.checked.len() >= self.capacity {
                self.checked.clear();
            }
            self.checked.insert(raw.to_string(), t.clone());
        }
        Ok(t)
    }
}

/// The campaign and its waiting room from a cached entry. Errors: the cached 404 of an
/// unknown campaign, 409 `no_waiting_room`.
pub fn waiting_room(entry: &StatusEntry) -> Result<(&CampaignStatus, &QueueStatus), Answer> {
    let Some((status, queue)) = entry.found() else {
        return Err(Answer {
            status: 404,
            body: entry.body().to_string(),
            retry_after_s: None,
        });
    };
    let Some(queue) = queue else {
        return Err(no_waiting_room(&status.id));
    };
    Ok((status, queue))
}

/// Answers a poll with a checked `ticket` from the cached `entry` at `now_ms`, as far as the
/// entry's reveal point ([`crate::reveal`]) shows the admissions. Errors: the cached 404 of
/// an unknown campaign, 409 `no_waiting_room`. Mints the admission token with `secret` when
/// the customer is admitted.
pub fn poll(
    entry: &StatusEntry,
    ticket: &Ticket,
    secret: &[u8],
    now_ms: i64,
) -> Result<Poll, Answer> {
    let (status, known) = waiting_room(entry)?;
    // What this isolate has revealed of the admissions so far (spread at the admit rate).
    let queue = &entry
        .reveal
        .map_or(known.clone(), |r| r.visible(known, now_ms));
    let seq = ticket.place.sequence;
    // Passed while she was away and not admitted since: next in line once she is seen again.
    let skipped = seq <= queue.now_serving && queue.is_skipped(seq);
    let position = if skipped {
        1
    } else {
        queue.position_of(seq, ticket.drawn_waiting_at_issue)
    };
    // The admission's expiry is fixed when it is granted (the status's grant timeline): a
    // poll never renews it, and once it has passed the unit is the next customer's.
    let expires_at_s = queue.admission_expiry_s(seq, now_ms);
    let state = match queue.state(status.state, position) {
        QueueState::Admitted if now_ms.div_euclid(1000) >= expires_at_s => QueueState::Lapsed,
        state => state,
    };
    let to_start_ms = status.starts_at.timestamp_millis().saturating_sub(now_ms);
    let remaining = u64::try_from(status.remaining).unwrap_or(0);
    let eta_seconds = queue.eta_seconds(state, position, remaining, to_start_ms, now_ms);
    let outlook = match state {
        QueueState::Waiting if position > remaining.saturating_mul(UNLIKELY_FACTOR) => {
            Some(Outlook::Unlikely)
        }
        QueueState::Waiting => Some(Outlook::Likely),
        QueueState::SoldOut => Some(queue.sold_out_outlook()),
        _ => None,
    };
    let held_until = queue
        .held_until
        .filter(|_| outlook == Some(Outlook::MayReturn));
    let admitted = state == QueueState::Admitted;
    let retry_after_s = match state {
        QueueState::Waiting => clamp_retry(eta_seconds / 2),
        QueueState::Admitted => clamp_retry(u64::from(queue.admission_ttl_seconds / 2)),
        QueueState::Paused => PAUSED_RETRY_AFTER_S,
        QueueState::SoldOut if held_until.is_some() => SECOND_WAVE_RETRY_AFTER_S,
        QueueState::SoldOut | QueueState::Ended | QueueState::Lapsed => MAX_RETRY_AFTER_S,
    };
    let admission_token =
        admitted.then(|| admission::mint_admission_until(secret, ticket, expires_at_s));
    Ok(Poll {
        reply: StatusReply {
            position: if admitted || state == QueueState::Lapsed {
                0
            } else {
                position
            },
            eta_seconds,
            state,
            admitted,
            admission_token,
            outlook,
            held_until,
            variants: entry.variants().to_vec(),
        },
        retry_after_s,
    })
}

/// `Retry-After` in 1..=[`MAX_RETRY_AFTER_S`] seconds.
fn clamp_retry(s: u64) -> u32 {
    u32::try_from(s.clamp(1, u64::from(MAX_RETRY_AFTER_S))).unwrap_or(MAX_RETRY_AFTER_S)
}

/// How long after its expiry a genuine admission token still carries a claim to the origin,
/// seconds: long enough for a client to retry a claim whose reply it lost, short enough that a
/// token does not become a standing pass. Only the recorded answer of an already decided claim
/// comes back (the origin refuses a new key 403), so this bounds load, not correctness.
pub const REPLAY_GRACE_S: i64 = 600;
/// Claims with an expired admission token forwarded per customer per second (the bucket of
/// [`crate::limit::Action::Replay`]).
pub const REPLAY_PER_S: u32 = 1;

/// What a claim's admission token lets through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// A valid token: the claim goes to the origin.
    Now,
    /// A genuine token (signed, this customer's and campaign's) that expired less than
    /// [`REPLAY_GRACE_S`] ago: the claim may only be a retry of a decided one, which the origin
    /// answers from its record (403 there for a new key). Forwarded at most [`REPLAY_PER_S`]
    /// per customer per second.
    ReplayOnly,
}

/// 429 `{"result":"queued"}` + `Retry-After: retry_after_s`.
fn queued(retry_after_s: u32) -> Answer {
    Answer {
        status: 429,
        body: format!(r#"{{"result":"{QUEUED}"}}"#),
        retry_after_s: Some(retry_after_s),
    }
}

/// The answer to an admitted claim that the isolate's forwarding pace refused: 429
/// `{"result":"queued"}` + `Retry-After` (whole seconds until the pace lets one more through,
/// at least 1). An isolate forwards the claims of a campaign with a waiting room through a
/// token bucket of `admit_per_second` tokens per second and one second's burst
/// ([`crate::limit::Action::Forward`], keyed by campaign), so in any one-second window it
/// forwards at most `2 × admit_per_second` of them, however the claims bunch up (after a
/// stall of the machine, say). The admission token stays valid; the customer claims again
/// after the delay.
pub fn paced(retry_after_s: u32) -> Answer {
    queued(retry_after_s.max(1))
}

/// The admission rate of this cached campaign's waiting room (customers per second); `None`
/// without one.
pub fn admit_rate(entry: Option<&StatusEntry>) -> Option<u32> {
    entry
        .and_then(StatusEntry::found)
        .and_then(|(_, q)| q.map(|q| q.admit_per_second))
}

/// True when claims on this cached campaign need an admission token.
pub fn has_waiting_room(entry: Option<&StatusEntry>) -> bool {
    admit_rate(entry).is_some()
}

/// Checks the admission token of a checked claim by `customer` on campaign `id`: 429
/// `{"result":"queued"}` + `Retry-After` without one, 400 `invalid_request` when malformed,
/// 403 `forbidden` when forged, another customer's or campaign's, or expired more than
/// [`REPLAY_GRACE_S`] ago; [`Admitted::ReplayOnly`] when expired within it.
pub fn check_claim_admission(
    secret: &[u8],
    token: Option<&str>,
    id: &str,
    customer: &str,
    now_ms: i64,
) -> Result<Admitted, Answer> {
    let Some(token) = token.filter(|t| !t.trim().is_empty()) else {
        return Err(queued(QUEUED_RETRY_AFTER_S));
    };
    let a = admission::open_admission(secret, token, id, customer)
        .map_err(|e| refusal(e, "admission token"))?;
    let now_s = now_ms.div_euclid(1000);
    if now_s < a.expires_at_s {
        Ok(Admitted::Now)
    } else if now_s.saturating_sub(a.expires_at_s) < REPLAY_GRACE_S {
        Ok(Admitted::ReplayOnly)
    } else {
        Err(refusal(AdmissionError::Expired, "admission token"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::from_origin;
    use crate::status::tests::{status, t};
    use flashgate_shared::admission::{sign_ticket, Place};
    use flashgate_shared::api::CampaignState;

    const K: &[u8] = b"edge-secret";

    fn entry(state: CampaignState, remaining: i64, now_serving: u64, paused: bool) -> StatusEntry {
        let mut v = serde_json::to_value(status(state)).unwrap();
        v["remaining"] = remaining.into();
        v["queue"] = serde_json::json!({"now_serving": now_serving, "admit_per_second": 10,
            "admission_ttl_seconds": 120, "paused": paused});
        from_origin("spring", 200, v.to_string().as_bytes(), 0).unwrap()
    }

    pub(super) fn ticket(seq: u64) -> Ticket {
        Ticket {
            place: Place {
                campaign: "spring".into(),
                customer: "ana".into(),
                sequence: seq,
            },
            issued_at_s: 0,
            drawn_waiting_at_issue: 0,
        }
    }

    /// 2026-03-01T11:00:00Z: after the start (10:00), before the end (12:00).
    pub(super) fn now() -> i64 {
        t("2026-03-01T11:00:00Z").timestamp_millis()
    }

    #[test]
    fn waiting_position_eta_and_outlook() {
        let e = entry(CampaignState::Active, 50, 100, false);
        let p = poll(&e, &ticket(150), K, now()).unwrap();
        assert_eq!(
            (p.reply.position, p.reply.eta_seconds, p.reply.state),
            (50, 5, QueueState::Waiting)
        );
        assert_eq!((p.reply.admitted, p.reply.admission_token), (false, None));
        assert_eq!(p.reply.outlook, Some(Outlook::Likely));
        assert_eq!(p.retry_after_s, 2);
        // Far beyond the remaining stock (more than 2 x 50 ahead): unlikely.
        let far = poll(&e, &ticket(201), K, now()).unwrap();
        assert_eq!(far.reply.outlook, Some(Outlook::Unlikely));
        assert_eq!(far.reply.position, 101);
        let very_far = poll(&e, &ticket(100_000), K, now()).unwrap();
        assert_eq!(very_far.retry_after_s, MAX_RETRY_AFTER_S);
    }

    #[test]
    fn polls_never_renew_an_admission() {
        let mut v = serde_json::to_value(status(CampaignState::Active)).unwrap();
        v["queue"] = serde_json::json!({"now_serving": 100, "admit_per_second": 10,
            "admission_ttl_seconds": 10,
            "grants": [{"n": 90, "at_ms": now() - 5_000}, {"n": 100, "at_ms": now() - 3_000}]});
        let e = from_origin("spring", 200, v.to_string().as_bytes(), 0).unwrap();
        let expiry = now() / 1000 - 3 + 10;
        for later_ms in [0, 2_000, 6_999] {
            let p = poll(&e, &ticket(95), K, now() + later_ms).unwrap();
            assert_eq!(p.reply.state, QueueState::Admitted, "+{later_ms} ms");
            let token = p.reply.admission_token.unwrap();
            let a = admission::check_admission(K, &token, "spring", "ana", now() / 1000).unwrap();
            assert_eq!(a.expires_at_s, expiry, "+{later_ms} ms");
        }
        // Past the expiry fixed at the grant: lapsed, no token, no refresh.
        let p = poll(&e, &ticket(95), K, now() + 7_000).unwrap();
        assert_eq!(
            (p.reply.state, p.reply.admitted, p.reply.admission_token),
            (QueueState::Lapsed, false, None)
        );
        assert_eq!((p.reply.position, p.retry_after_s), (0, MAX_RETRY_AFTER_S));
    }

    #[test]
    fn admitted_gets_a_token_for_its_place() {
        let e = entry(CampaignState::Active, 50, 100, false);
        let p = poll(&e, &ticket(100), K, now()).unwrap();
        assert_eq!(
            (p.reply.state, p.reply.admitted, p.reply.position),
            (QueueState::Admitted, true, 0)
        );
        assert_eq!((p.reply.outlook, p.retry_after_s), (None, 30));
        let token = p.reply.admission_token.unwrap();
        let a = admission::check_admission(K, &token, "spring", "ana", now() / 1000).unwrap();
        assert_eq!(
            (a.place.sequence, a.expires_at_s),
            (100, now() / 1000 + 120)
        );
        assert_eq!(
            check_claim_admission(K, Some(&token), "spring", "ana", now()),
            Ok(Admitted::Now)
        );
        // Expired: within the grace only a retry the origin answers from its record.
        for after_s in [120, 120 + REPLAY_GRACE_S - 1] {
            assert_eq!(
                check_claim_admission(K, Some(&token), "spring", "ana", now() + after_s * 1000),
                Ok(Admitted::ReplayOnly)
            );
        }
        let refused = |tok: Option<&str>, id, who, at| {
            let a = check_claim_admission(K, tok, id, who, at).unwrap_err();
            (a.status, a.body)
        };
        assert_eq!(
            refused(None, "spring", "ana", now()),
            (429, r#"{"result":"queued"}"#.into())
        );
        let forbidden = |m: &str| (403, format!(r#"{{"result":"forbidden","message":"{m}"}}"#));
        assert_eq!(
            refused(Some(&token), "spring", "bob", now()),
            forbidden("admission token belongs to another customer")
        );
        assert_eq!(
            refused(Some(&token), "autumn", "ana", now()),
            forbidden("admission token belongs to another campaign")
        );
        assert_eq!(
            refused(
                Some(&token),
                "spring",
                "ana",
                now() + (120 + REPLAY_GRACE_S) * 1000
            ),
            forbidden("admission token has expired")
        );
        let forged = admission::mint_admission(b"guess", &ticket(100), now() / 1000, 120);
        assert_eq!(
            refused(Some(&forged), "spring", "ana", now()),
            forbidden("admission token signature is invalid")
        );
        assert_eq!(refused(Some("junk"), "spring", "ana", now()).0, 400);
    }

    #[test]
    fn stock_and_campaign_states() {
        let state = |e: &StatusEntry, seq| poll(e, &ticket(seq), K, now()).unwrap();
        let sold = entry(CampaignState::SoldOut, 0, 100, false);
        let p = state(&sold, 5);
        assert_eq!(
            (p.reply.state, p.reply.admitted),
            (QueueState::SoldOut, false)
        );
        assert_eq!((p.reply.admission_token, p.retry_after_s), (None, 30));
        let active_empty = entry(CampaignState::Active, 0, 100, false);
        assert_eq!(
            state(&active_empty, 101).reply.outlook,
            Some(Outlook::Unlikely)
        );
        let paused = entry(CampaignState::Active, 5, 100, true);
        assert_eq!(state(&paused, 1).reply.state, QueueState::Paused);
        let ended = entry(CampaignState::Ended, 5, 100, false);
        assert_eq!(state(&ended, 1).reply.state, QueueState::Ended);
        // Before the start: waiting, the ETA counts the time to the start.
        let early = entry(CampaignState::Scheduled, 5, 0, false);
        let before = t("2026-03-01T09:59:00Z").timestamp_millis();
        let p = poll(&early, &ticket(20), K, before).unwrap();
        assert_eq!(
            (p.reply.state, p.reply.eta_seconds),
            (QueueState::Waiting, 62)
        );
    }

    #[test]
    fn admissions_are_revealed_at_the_rate() {
        // 100 admitted (rate 10/s); a new isolate adopting it with TTL 1 s hides the last 10,
        // and reveals them at 10 per second.
        let mut v: serde_json::Value =
            serde_json::from_str(entry(CampaignState::Active, 50, 100, false).body()).unwrap();
        v["queue"]["admitted"] = 100.into();
        let fetched = from_origin("spring", 200, v.to_string().as_bytes(), now()).unwrap();
        let e = crate::status::adopt(None, fetched, now(), 1_000);
        let at = |seq, ms| poll(&e, &ticket(seq), K, now() + ms).unwrap().reply;
        assert_eq!(
            (at(90, 0).state, at(90, 0).position),
            (QueueState::Admitted, 0)
        );
        let early = at(95, 0);
        assert_eq!((early.state, early.position), (QueueState::Waiting, 5));
        assert_eq!(early.admission_token, None);
        assert_eq!(at(95, 499).state, QueueState::Waiting);
        assert_eq!(at(95, 500).state, QueueState::Admitted);
        assert_eq!(at(100, 1_000).state, QueueState::Admitted);
        // The sold-out learned from a claim keeps the reveal point; sold_out answers everyone.
        let sold = crate::status::learn_from_claim(
            Some(&e),
            crate::status::Decided::Now,
            409,
            br#"{"result":"sold_out"}"#,
            now(),
        )
        .unwrap();
        assert_eq!(sold.reveal, e.reveal);
        assert_eq!(
            poll(&sold, &ticket(95), K, now()).unwrap().reply.state,
            QueueState::SoldOut
        );
    }

    #[test]
    fn a_drawn_ticket_polled_before_the_status_knows_its_draw() {
        use flashgate_shared::queue::RANDOM_BLOCK;
        // The cached status predates every draw (now_serving 0, drawn 0); her ticket was drawn
        // halfway through the block with 600 drawn customers waiting (her included).
        let e = entry(CampaignState::Scheduled, 5, 0, false);
        let mut drawn = ticket(RANDOM_BLOCK / 2);
        drawn.drawn_waiting_at_issue = 600;
        let before = t("2026-03-01T09:59:00Z").timestamp_millis();
        let p = poll(&e, &drawn, K, before).unwrap();
        assert_eq!(
            (p.reply.state, p.reply.position, p.reply.eta_seconds),
            (QueueState::Waiting, 300, 60 + 30)
        );
    }

    #[test]
    fn no_waiting_room_and_unknown_campaign() {
        let plain = crate::status::tests::entry(CampaignState::Active, 0);
        assert!(!has_waiting_room(Some(&plain)));
        assert!(has_waiting_room(Some(&entry(
            CampaignState::Active,
            1,
            1,
            false
        ))));
        let a = poll(&plain, &ticket(1), K, now()).unwrap_err();
        assert_eq!(
            (a.status, a.body.as_str()),
            (
                409,
                r#"{"result":"no_waiting_room","message":"campaign spring has no waiting room"}"#
            )
        );
        let nf = from_origin("spring", 404, br#"{"result":"not_found"}"#, 0).unwrap();
        assert_eq!(poll(&nf, &ticket(1), K, now()).unwrap_err().status, 404);
    }

    #[test]
    fn cached_tickets_give_the_same_answers() {
        let good = sign_ticket(K, &ticket(3));
        let forged = sign_ticket(b"other", &ticket(3));
        let mut cache = TicketCache::new(2);
        for _ in 0..2 {
            for (raw, id) in [
                (Some(good.as_str()), "spring"),
                (Some(good.as_str()), "autumn"),
                (Some(forged.as_str()), "spring"),
                (None, "spring"),
                (Some("x.y"), "spring"),
            ] {
                assert_eq!(cache.check(K, raw, id), check_ticket(K, raw, id));
            }
        }
        let other = sign_ticket(K, &ticket(4));
        assert_eq!(cache.check(K, Some(&other), "spring"), Ok(ticket(4)));
        assert_eq!(cache.check(K, Some(&good), "spring"), Ok(ticket(3)));
        assert!(cache.checked.len() <= 2);
    }

    #[test]
    fn tickets_are_checked() {
        let good = sign_ticket(K, &ticket(3));
        assert_eq!(check_ticket(K, Some(&good), "spring"), Ok(ticket(3)));
        assert_eq!(check_ticket(K, None, "spring").unwrap_err().status, 400);
        assert_eq!(
            check_ticket(K, Some("x.y"), "spring").unwrap_err().status,
            400
        );
        assert_eq!(
            check_ticket(b"other", Some(&good), "spring")
                .unwrap_err()
                .status,
            403
        );
        assert_eq!(
            check_ticket(K, Some(&good), "autumn").unwrap_err().status,
            403
        );
    }

    #[test]
    fn queue_fields_survive_a_learned_state() {
        let e = entry(CampaignState::Active, 5, 7, false);
        let flipped = crate::status::learn_from_claim(
            Some(&e),
            crate::status::Decided::Now,
            409,
            br#"{"result":"sold_out"}"#,
            1,
        )
        .unwrap();
        let again = from_origin("spring", 200, flipped.body().as_bytes(), 1).unwrap();
        assert_eq!(again.found().unwrap().1.map(|q| q.now_serving), Some(7));
        assert_eq!(again.state(), Some(CampaignState::SoldOut));
    }
}

#[cfg(test)]
#[path = "queue_wave_tests.rs"]
mod wave_tests;
