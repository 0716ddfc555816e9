//! Joins grouped at the edge, in plain Rust: the joins that arrive at an isolate while its
//! previous group of a campaign is with the origin wait for it, then go as one group
//! ([`flashgate_shared::queue::joins::JoinGroup`]): one origin request and one Redis step for
//! many joins, with one group in flight per campaign and isolate (as a grouped commit does for
//! writes). A join waits at most for the group in flight plus its own.
//!
//! The glue drives it: each join [`JoinGroups::enqueue`]s, then either
//! [`JoinGroups::lead`]s a group (sends it, [`JoinGroups::settle`]s every answer) or waits on
//! a short timer until [`JoinGroups::take`] has its answer or no group is in flight.

use std::collections::{HashMap, VecDeque};

use flashgate_shared::queue::joins::MAX_GROUP_JOINS;

/// A join's answer, as the glue relays it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// HTTP status: 201/200 with her ticket, else the group's error.
    pub status: u16,
    /// The JSON body.
    pub body: Vec<u8>,
    /// `Retry-After` to relay, seconds.
    pub retry_after: Option<String>,
    /// True when the origin gave it (her place, or its refusal of the group); false when the
    /// edge made it (the origin could not be reached).
    pub from_origin: bool,
}

/// One campaign's joins at this isolate.
#[derive(Debug, Default)]
struct Campaign {
    /// Waiting to be sent: (join id, customer), in arrival order.
    pending: VecDeque<(u64, String)>,
    /// When the group in flight was sent (epoch ms); `None` when none is.
    leading_since_ms: Option<i64>,
    /// Answers not taken yet, by join id.
    done: HashMap<u64, Outcome>,
}

/// The isolate's joins, per campaign.
#[derive(Debug, Default)]
pub struct JoinGroups {
    next_id: u64,
    campaigns: HashMap<String, Campaign>,
}

impl JoinGroups {
    /// No joins yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues a join of `customer` (whose token the edge verified) on `campaign`; returns its id.
    pub fn enqueue(&mut self, campaign: &str, customer: &str) -> u64 {
        self.next_id = self.next_id.wrapping_add(1);
        let id = self.next_id;
        self.campaigns
            .entry(campaign.to_string())
            .or_default()
            .pending
            .push_back((id, customer.to_string()));
        id
    }

    /// The next group of `campaign` to send, when none is in flight (or the one in flight was
    /// sent more than `stale_ms` ago: its leader gave up) and joins are pending: up to
    /// [`MAX_GROUP_JOINS`] of them, oldest first. The caller sends it and then calls
    /// [`Self::settle`].
    pub fn lead(
        &mut self,
        campaign: &str,
        now_ms: i64,
        stale_ms: i64,
    ) -> Option<Vec<(u64, String)>> {
        let c = self.campaigns.get_mut(campaign)?;
        if c.leading_since_ms.is_some_and(|t| now_ms - t < stale_ms) || c.pending.is_empty() {
            return None;
        }
        let n = c.pending.len().min(MAX_GROUP_JOINS);
        c.leading_since_ms = Some(now_ms);
        Some(c.pending.drain(..n).collect())
    }

    /// Files the answers of a group of `campaign` (`answers[i]` for `ids[i]`) and ends its flight.
    pub fn settle(&mut self, campaign: &str, ids: &[u64], answers: Vec<Outcome>) {
        let c = self.campaigns.entry(campaign.to_string()).or_default();
        c.leading_since_ms = None;
        c.done.extend(ids.iter().copied().zip(answers));
    }

    /// Takes join `id`'s answer, once it has one.
    pub fn take(&mut self, campaign: &str, id: u64) -> Option<Outcome> {
        let c = self.campaigns.get_mut(campaign)?;
        let answer = c.done.remove(&id);
        self.forget_if_idle(campaign);
        answer
    }

    /// True while join `id` of `campaign` has no answer and a group is in flight (so it waits).
    pub fn should_wait(&self, campaign: &str, id: u64, now_ms: i64, stale_ms: i64) -> bool {
        self.campaigns.get(campaign).is_some_and(|c| {
            !c.done.contains_key(&id) && c.leading_since_ms.is_some_and(|t| now_ms - t < stale_ms)
        })
    }

    /// Drops join `id` (its request gave up): not sent if still pending, its answer not kept.
    pub fn abandon(&mut self, campaign: &str, id: u64) {
        if let Some(c) = self.campaigns.get_mut(campaign) {
            c.pending.retain(|(i, _)| *i != id);
            c.done.remove(&id);
        }
        self.forget_if_idle(campaign);
    }

    /// Campaigns with anything pending, in flight or unanswered (the isolate keeps no more).
    pub fn campaigns(&self) -> usize {
        self.campaigns.len()
    }

    fn forget_if_idle(&mut self, campaign: &str) {
        if self.campaigns.get(campaign).is_some_and(|c| {
            c.pending.is_empty() && c.done.is_empty() && c.leading_since_ms.is_none()
        }) {
            self.campaigns.remove(campaign);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(n: u8) -> Outcome {
        Outcome {
            status: 201,
            body: vec![n],
            retry_after: None,
            from_origin: true,
        }
    }

    #[test]
    fn joins_during_a_flight_go_in_the_next_group() {
        let mut g = JoinGroups::new();
        let a = g.enqueue("c", "alice");
        let group = g.lead("c", 0, 5_000).unwrap();
        assert_eq!(group, vec![(a, "alice".to_string())]);
        // Arrivals while the group is in flight wait; nobody else may lead.
        let b = g.enqueue("c", "bob");
        let b2 = g.enqueue("c", "bob");
        assert!(g.lead("c", 10, 5_000).is_none());
        assert!(g.should_wait("c", b, 10, 5_000));
        g.settle("c", &[a], vec![ok(1)]);
        assert_eq!(g.take("c", a), Some(ok(1)));
        assert!(!g.should_wait("c", b, 20, 5_000));
        // The next leader sends both of bob's joins in one group, in arrival order.
        let next = g.lead("c", 20, 5_000).unwrap();
        assert_eq!(next, vec![(b, "bob".into()), (b2, "bob".into())]);
        g.settle("c", &[b, b2], vec![ok(2), ok(3)]);
        assert_eq!(g.take("c", b2), Some(ok(3)));
        assert_eq!(g.take("c", b), Some(ok(2)));
        assert_eq!(g.take("c", b), None);
        assert_eq!(g.campaigns(), 0, "an idle campaign is forgotten");
    }

    #[test]
    fn a_group_holds_at_most_the_bound_and_campaigns_are_apart() {
        let mut g = JoinGroups::new();
        for i in 0..MAX_GROUP_JOINS + 3 {
            g.enqueue("c", &format!("u{i}"));
        }
        g.enqueue("d", "x");
        assert_eq!(g.lead("c", 0, 5_000).unwrap().len(), MAX_GROUP_JOINS);
        assert_eq!(
            g.lead("d", 0, 5_000).unwrap().len(),
            1,
            "d does not wait for c"
        );
        assert!(g.lead("c", 1, 5_000).is_none());
    }

    #[test]
    fn a_stale_flight_lets_another_lead_and_an_abandoned_join_is_not_sent() {
        let mut g = JoinGroups::new();
        g.enqueue("c", "a");
        g.lead("c", 0, 5_000).unwrap();
        let b = g.enqueue("c", "b");
        let c = g.enqueue("c", "c");
        g.abandon("c", b);
        assert!(g.should_wait("c", c, 4_999, 5_000));
        assert!(!g.should_wait("c", c, 5_000, 5_000));
        assert_eq!(g.lead("c", 5_000, 5_000).unwrap(), vec![(c, "c".into())]);
        g.settle("c", &[c], vec![ok(9)]);
        g.abandon("c", c);
        assert_eq!(g.take("c", c), None, "an abandoned answer is not kept");
    }
}
