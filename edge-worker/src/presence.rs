//! Presence at the edge, in plain Rust: the tickets that polled at this isolate, per campaign,
//! gathered into one report ([`PresenceReport`]) at most every [`REPORT_EVERY_MS`] per
//! campaign, which the glue sends to the origin after the poll's answer (`waitUntil`), so no
//! customer waits for it. Only tickets the edge checked (signed, this campaign's) are given to
//! [`Presence::seen`].

use std::collections::{BTreeSet, HashMap};

use flashgate_shared::queue::presence::{PresenceReport, MAX_REPORT_TICKETS, REPORT_EVERY_MS};

/// Campaigns whose batch an isolate keeps at most (a campaign dropped and seen again starts a
/// new batch).
pub const MAX_CAMPAIGNS: usize = 1_000;

/// One campaign's batch: tickets seen since the last report, and when that was sent.
#[derive(Debug, Default)]
struct Batch {
    tickets: BTreeSet<String>,
    last_sent_ms: Option<i64>,
}

/// The isolate's batches. Report ids are `<isolate tag>-<counter>`, unique per isolate run.
#[derive(Debug)]
pub struct Presence {
    tag: String,
    sent: u64,
    batches: HashMap<String, Batch>,
}

impl Presence {
    /// Batches of an isolate named `tag` (random per isolate; `[A-Za-z0-9_-]`, up to 40 bytes).
    pub fn new(tag: &str) -> Self {
        Presence {
            tag: tag.chars().take(40).collect(),
            sent: 0,
            batches: HashMap::new(),
        }
    }

    /// Notes that checked ticket `ticket` of campaign `campaign` polled at `now_ms`. Returns the
    /// report to send now when the campaign's last one went [`REPORT_EVERY_MS`] ago or more
    /// (this ticket included); else keeps it for the next. At most [`MAX_REPORT_TICKETS`] are
    /// kept per campaign between reports (the others are reported at their next poll).
    pub fn seen(&mut self, campaign: &str, ticket: &str, now_ms: i64) -> Option<PresenceReport> {
        if !self.batches.contains_key(campaign) && self.batches.len() >= MAX_CAMPAIGNS {
            self.batches.clear();
        }
        let batch = self.batches.entry(campaign.to_string()).or_default();
        if batch.tickets.len() < MAX_REPORT_TICKETS {
            batch.tickets.insert(ticket.to_string());
        }
        let due = batch
            .last_sent_ms
            .is_none_or(|at| now_ms.saturating_sub(at) >= REPORT_EVERY_MS);
        if !due {
            return None;
        }
        batch.last_sent_ms = Some(now_ms);
        let tickets: Vec<String> = std::mem::take(&mut batch.tickets).into_iter().collect();
        self.sent += 1;
        Some(PresenceReport {
            report_id: format!("{}-{}", self.tag, self.sent),
            tickets,
            joins: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_report_per_campaign_per_interval_with_every_ticket_seen() {
        let mut p = Presence::new("iso");
        let first = p.seen("a", "t1", 1_000).expect("the first poll reports");
        assert_eq!(
            (first.report_id.as_str(), first.tickets.len()),
            ("iso-1", 1)
        );
        assert!(p.seen("a", "t2", 1_500).is_none());
        assert!(p.seen("a", "t2", 1_600).is_none());
        // Another campaign has its own interval.
        assert!(p.seen("b", "t9", 1_700).is_some());
        let next = p.seen("a", "t3", 2_000).expect("a second later");
        assert_eq!(next.tickets, vec!["t2".to_string(), "t3".to_string()]);
        assert_eq!(next.report_id, "iso-3");
        assert!(next.joins.is_empty());
    }

    #[test]
    fn a_batch_keeps_at_most_the_report_limit() {
        let mut p = Presence::new("iso");
        p.seen("a", "first", 0);
        for i in 0..MAX_REPORT_TICKETS + 10 {
            assert!(p.seen("a", &format!("t{i}"), 1).is_none());
        }
        let r = p.seen("a", "late", 1_000).unwrap();
        assert_eq!(r.tickets.len(), MAX_REPORT_TICKETS);
    }
}
