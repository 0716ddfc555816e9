//! Joins answered at the edge, in plain Rust: [`issue`] makes a customer's ticket (its
//! sequence number is its order key, [`flashgate_shared::queue::keys`]), and [`Issued`] keeps
//! the tickets an isolate issued until they are reported to the origin in one batch per
//! campaign at most every [`REPORT_EVERY_MS`](flashgate_shared::queue::presence::REPORT_EVERY_MS) ([`IssuedReport`]). The glue sends each report
//! after the answers (`waitUntil`), so no customer waits for it; a join costs the origin
//! nothing of its own.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use flashgate_shared::admission::{Place, Ticket};
use flashgate_shared::api::codes;
use flashgate_shared::queue::joins::{IssuedReport, MAX_ISSUED_TICKETS};
use flashgate_shared::queue::keys::{arrival_key, drawn_key, EDGE_BLOCK};
use flashgate_shared::queue::{QueueStatus, Queueing};

use crate::decide::Answer;
use crate::reporter::Schedule;

/// Campaigns whose batch an isolate keeps at most (beyond, the batches start over; a report
/// due is sent first).
pub const MAX_CAMPAIGNS: usize = 1_000;

/// Tickets kept per campaign between reports at most; a join past it is answered 503
/// `unavailable` (the origin is not taking the reports).
pub const MAX_PENDING: usize = 4 * MAX_ISSUED_TICKETS;

/// The ticket of `customer` joining campaign `campaign` (starting at `starts_at`) at `now_ms`,
/// from the waiting room `queue` as this isolate knows it: an arrival key after the start of a
/// `fifo` queue, else (the `prequeue_seconds` before the start, a `random` queue) her draw,
/// a keyed hash under `secret`. `salt` tells apart two isolates' joins of one millisecond.
/// Error: 409 `conflict` before the prequeue opens.
pub fn issue(
    secret: &[u8],
    campaign: &str,
    customer: &str,
    queue: &QueueStatus,
    starts_at: DateTime<Utc>,
    now_ms: i64,
    salt: u32,
) -> Result<Ticket, Answer> {
    let start_ms = starts_at.timestamp_millis();
    let opens_ms = start_ms.saturating_sub(i64::from(queue.prequeue_seconds) * 1000);
    let drawn = if now_ms >= start_ms {
        queue.queueing == Queueing::Random
    } else if now_ms >= opens_ms && queue.prequeue_seconds > 0 {
        true
    } else {
        let opens = DateTime::from_timestamp_millis(opens_ms).unwrap_or(starts_at);
        return Err(Answer::error(
            409,
            codes::CONFLICT,
            &format!(
                "the waiting room opens at {}",
                opens.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        ));
    };
    let (sequence, w) = if drawn {
        let waiting = queue.drawn.saturating_sub(queue.admitted);
        (
            drawn_key(secret, campaign, customer, queue.now_serving),
            waiting.saturating_add(1),
        )
    } else {
        (arrival_key(now_ms, salt), 0)
    };
    Ok(Ticket {
        place: Place {
            campaign: campaign.to_string(),
            customer: customer.to_string(),
            sequence,
        },
        issued_at_s: now_ms.div_euclid(1000),
        drawn_waiting_at_issue: w,
    })
}

/// What the reporter of one campaign does next ([`Issued::next`]).
pub type Next = crate::reporter::Next<IssuedReport>;

pub use crate::reporter::REPORTER_LIFE_MS;

/// How long an isolate remembers the arrival keys it issued, ms: well past one report interval
/// plus one status TTL, the lag of the origin's line behind a join.
pub const RECENT_KEYS_MS: i64 = 10_000;

/// One campaign's tickets not reported yet.
#[derive(Debug, Default)]
struct Batch {
    tickets: Vec<String>,
    /// When it last sent, and the reporter running.
    schedule: Schedule,
    /// Arrival keys issued here, increasing; those before `recent_from` are forgotten (older
    /// than [`RECENT_KEYS_MS`], or past [`MAX_PENDING`]).
    recent: Vec<u64>,
    /// Where the remembered keys of `recent` start. Forgotten keys are cut off the front only
    /// once they are as many as those kept, so a join moves at most one key on average (at a
    /// few thousand joins a second a cut per join would move tens of thousands).
    recent_from: usize,
}

/// The isolate's batches. Report ids are `<isolate tag>-j<counter>`, unique per isolate run.
#[derive(Debug)]
pub struct Issued {
    tag: String,
    sent: u64,
    batches: HashMap<String, Batch>,
    last_key: u64,
    reporters: u64,
}

impl Issued {
    /// Batches of an isolate named `tag` (`[A-Za-z0-9_-]`, up to 40 bytes).
    pub fn new(tag: &str) -> Self {
        Issued {
            tag: tag.chars().take(40).collect(),
            sent: 0,
            batches: HashMap::new(),
            last_key: 0,
            reporters: 0,
        }
    }

    /// `seq`, or one past the last arrival key this isolate issued when that is not below it:
    /// an isolate's arrival keys increase strictly, so a join answered before another is sent
    /// is ahead of it. Drawn numbers are returned as they are.
    pub fn monotonic(&mut self, seq: u64) -> u64 {
        if seq < EDGE_BLOCK {
            return seq;
        }
        self.last_key = seq.max(self.last_key.saturating_add(1));
        self.last_key
    }

    /// Remembers arrival key `key` issued for `campaign` at `now_ms` ([`Self::recent_keys`]);
    /// drawn numbers are not kept. Keys older than [`RECENT_KEYS_MS`] are forgotten, and at
    /// most [`MAX_PENDING`] are kept.
    pub fn note_key(&mut self, campaign: &str, key: u64, now_ms: i64) {
        if key < EDGE_BLOCK {
            return;
        }
        let b = batch(&mut self.batches, campaign);
        let cutoff = arrival_key(now_ms.saturating_sub(RECENT_KEYS_MS), 0);
        let kept = &b.recent[b.recent_from..];
        let old = kept.partition_point(|&k| k < cutoff);
        let over = (kept.len() - old + 1).saturating_sub(MAX_PENDING);
        b.recent_from += old + over;
        if b.recent_from >= b.recent.len() - b.recent_from {
            b.recent.drain(..b.recent_from);
            b.recent_from = 0;
        }
        b.recent.push(key);
    }

    /// The arrival keys this isolate issued for `campaign` lately, increasing: the joins it
    /// knows of that the origin's line may not count yet.
    pub fn recent_keys(&self, campaign: &str) -> &[u64] {
        self.batches
            .get(campaign)
            .map_or(&[], |b| &b.recent[b.recent_from..])
    }

    /// True when campaign `campaign` has room for another ticket ([`MAX_PENDING`]).
    pub fn has_room(&self, campaign: &str) -> bool {
        self.batches
            .get(campaign)
            .is_none_or(|b| b.tickets.len() < MAX_PENDING)
    }

    /// Keeps signed ticket `ticket` of `campaign` for its next report at `now_ms`. Returns the
    /// number of a reporter to start when none runs for the campaign (or the one running is
    /// older than [`REPORTER_LIFE_MS`]): the caller starts it, and it calls [`Self::next`].
    pub fn add(&mut self, campaign: &str, ticket: String, now_ms: i64) -> Option<u64> {
        if !self.batches.contains_key(campaign) && self.batches.len() >= MAX_CAMPAIGNS {
            self.batches.retain(|_, b| b.schedule.running());
        }
        let b = batch(&mut self.batches, campaign);
        b.tickets.push(ticket);
        b.schedule.wake(&mut self.reporters, now_ms)
    }

    /// Puts back the tickets of a report that could not be delivered (sent again in the next).
    pub fn put_back(&mut self, campaign: &str, mut tickets: Vec<String>) {
        let b = self.batches.entry(campaign.to_string()).or_default();
        tickets.append(&mut b.tickets);
        b.tickets = tickets;
    }

    /// Reporter `reporter`'s next step at `now_ms` ([`Next::Stop`] when another has taken
    /// over): a report of up to [`MAX_ISSUED_TICKETS`] (oldest
    /// first) once the last went [`REPORT_EVERY_MS`](flashgate_shared::queue::presence::REPORT_EVERY_MS) ago, else the wait; [`Next::Stop`] (and the
    /// reporter is marked stopped) when nothing is pending.
    pub fn next(&mut self, campaign: &str, reporter: u64, now_ms: i64) -> Next {
        let Some(b) = self.batches.get_mut(campaign) else {
            return Next::Stop;
        };
        if let Err(next) = b.schedule.turn(reporter, !b.tickets.is_empty(), now_ms) {
            return next;
        }
        let n = b.tickets.len().min(MAX_ISSUED_TICKETS);
        let tickets: Vec<String> = b.tickets.drain(..n).collect();
        self.sent += 1;
        Next::Send(IssuedReport {
            report_id: format!("{}-j{}", self.tag, self.sent),
            tickets,
        })
    }
}

/// The batch of `campaign` in `batches`, made when it has none (its id copied only then).
fn batch<'a>(batches: &'a mut HashMap<String, Batch>, campaign: &str) -> &'a mut Batch {
    if !batches.contains_key(campaign) {
        batches.insert(campaign.to_string(), Batch::default());
    }
    batches.get_mut(campaign).expect("inserted above")
}

#[cfg(test)]
mod tests {
    use super::*;
    use flashgate_shared::queue::keys::arrival_ms;
    use flashgate_shared::queue::RANDOM_BLOCK;

    fn room(queueing: Queueing) -> QueueStatus {
        QueueStatus {
            admit_per_second: 10,
            admission_ttl_seconds: 60,
            queueing,
            prequeue_seconds: 600,
            drawn: 5,
            admitted: 2,
            ..Default::default()
        }
    }

    #[test]
    fn recent_keys_are_kept_ten_seconds() {
        let mut i = Issued::new("iso");
        let k = |ms| arrival_key(ms, 0);
        i.note_key("c", k(1_000), 1_000);
        i.note_key("c", k(5_000), 5_000);
        i.note_key("c", RANDOM_BLOCK + 3, 5_000);
        assert_eq!(i.recent_keys("c"), &[k(1_000), k(5_000)]);
        i.note_key("c", k(12_000), 12_000);
        assert_eq!(
            i.recent_keys("c"),
            &[k(5_000), k(12_000)],
            "older than 10 s forgotten"
        );
        assert!(i.recent_keys("d").is_empty());
    }

    #[test]
    fn recent_keys_stay_right_across_the_cuts() {
        // One join a millisecond for 30 s: the keys of the last 10 s, in order, at every step
        // (the forgotten front is cut off in batches, never seen).
        let mut i = Issued::new("iso");
        for ms in 0..30_000i64 {
            i.note_key("c", arrival_key(ms, 0), ms);
            let kept = i.recent_keys("c");
            let first = (ms - RECENT_KEYS_MS).max(0);
            assert_eq!(kept.len() as i64, ms - first + 1, "at {ms} ms");
            assert_eq!(kept[0], arrival_key(first, 0), "at {ms} ms");
            assert_eq!(kept[kept.len() - 1], arrival_key(ms, 0));
        }
        // And at most MAX_PENDING of them when more come within 10 s.
        let mut j = Issued::new("iso");
        for n in 0..(MAX_PENDING as u64 + 5) {
            j.note_key("c", arrival_key(1_000, 0) + n, 1_000);
        }
        let kept = j.recent_keys("c");
        assert_eq!(kept.len(), MAX_PENDING);
        assert_eq!(kept[0], arrival_key(1_000, 0) + 5);
    }

    #[test]
    fn tickets_by_time_and_order() {
        let start = DateTime::from_timestamp(2_000_000_000, 0).unwrap();
        let at = start.timestamp_millis();
        let fifo = room(Queueing::Fifo);
        let t = issue(b"k", "c", "alice", &fifo, start, at + 5, 7).unwrap();
        assert!(t.place.sequence > EDGE_BLOCK);
        assert_eq!(arrival_ms(t.place.sequence), Some(at + 5));
        assert_eq!(
            (t.issued_at_s, t.drawn_waiting_at_issue),
            (2_000_000_000, 0)
        );
        // The prequeue and a random queue draw: the same number for the same customer.
        let pre = issue(b"k", "c", "alice", &fifo, start, at - 1_000, 7).unwrap();
        let again = issue(b"k", "c", "alice", &fifo, start, at - 10, 9).unwrap();
        assert!(pre.place.sequence < RANDOM_BLOCK);
        assert_eq!(pre.place.sequence, again.place.sequence);
        assert_eq!(pre.drawn_waiting_at_issue, 4);
        let random = issue(b"k", "c", "alice", &room(Queueing::Random), start, at, 1).unwrap();
        assert_eq!(random.place.sequence, pre.place.sequence);
        // Before the prequeue opens: 409.
        let early = issue(b"k", "c", "alice", &fifo, start, at - 600_001, 0).unwrap_err();
        assert_eq!(early.status, 409);
        assert!(
            early.body.contains("2033-05-18T03:23:20Z"),
            "{}",
            early.body
        );
    }

    #[test]
    fn one_report_per_second_and_campaign_with_every_ticket() {
        let mut i = Issued::new("iso");
        let r1 = i
            .add("c", "t1".into(), 0)
            .expect("the first starts a reporter");
        assert_eq!(i.add("c", "t2".into(), 0), None);
        let Next::Send(r) = i.next("c", r1, 1_000) else {
            panic!("due at once")
        };
        assert_eq!((r.report_id.as_str(), r.tickets.len()), ("iso-j1", 2));
        assert_eq!(
            i.add("c", "t3".into(), 1_000),
            None,
            "the reporter still runs"
        );
        assert_eq!(i.next("c", r1, 1_400), Next::Wait(600));
        assert!(
            i.add("d", "x".into(), 1_400).is_some(),
            "another campaign has its own"
        );
        let Next::Send(r) = i.next("c", r1, 2_000) else {
            panic!("a second later")
        };
        assert_eq!(r.tickets, vec!["t3".to_string()]);
        assert_eq!(i.next("c", r1, 2_500), Next::Stop);
        let r2 = i
            .add("c", "t4".into(), 2_500)
            .expect("stopped: the next join starts one");
        assert_eq!(i.next("c", r2, 2_500), Next::Wait(500));
        i.put_back("c", vec!["t0".into()]);
        let Next::Send(r) = i.next("c", r2, 3_000) else {
            panic!("due")
        };
        assert_eq!(r.tickets, vec!["t0".to_string(), "t4".to_string()]);
        // A reporter past its life is replaced; the old one stops at its next step.
        let r3 = i
            .add("c", "t5".into(), 2_500 + REPORTER_LIFE_MS)
            .expect("a new one");
        assert_eq!(i.next("c", r2, 30_000), Next::Stop);
        assert!(matches!(i.next("c", r3, 30_000), Next::Send(_)));
    }

    #[test]
    fn a_report_holds_at_most_the_bound() {
        let mut i = Issued::new("iso");
        for n in 0..MAX_ISSUED_TICKETS + 3 {
            i.add("c", format!("t{n}"), 0);
        }
        let Next::Send(r) = i.next("c", 1, 0) else {
            panic!()
        };
        assert_eq!(r.tickets.len(), MAX_ISSUED_TICKETS);
        let Next::Send(r) = i.next("c", 1, 1_000) else {
            panic!()
        };
        assert_eq!(r.tickets.len(), 3);
        assert!(i.has_room("c"));
        assert_eq!(i.monotonic(EDGE_BLOCK + 10), EDGE_BLOCK + 10);
        assert_eq!(i.monotonic(EDGE_BLOCK + 5), EDGE_BLOCK + 11);
        assert_eq!(i.monotonic(7), 7);
    }
}
