//! Presence reported by the edge: which tickets polled, sent to the origin in batches, so the
//! origin admits among the customers still there (docs/WAITING-ROOM.md, "Presence").

use serde::{Deserialize, Serialize};

/// Path of campaign `id`'s presence report (`POST`, edge only, signed with the edge secret).
pub fn presence_path(id: &str) -> String {
    format!("/edge/v1/campaigns/{id}/presence")
}

/// Least time between two presence reports of one isolate for one campaign, ms.
pub const REPORT_EVERY_MS: i64 = 1_000;
/// Most tickets in one report; an isolate that saw more sends the rest in its next report.
pub const MAX_REPORT_TICKETS: usize = 2_000;
/// Longest report id, bytes (`[A-Za-z0-9_-]`).
pub const MAX_REPORT_ID_LEN: usize = 64;
/// How long the origin remembers a report id, seconds: longer than the edge signature's
/// accepted skew (60 s), so a report is counted once whenever its signature is still valid.
pub const REPORT_ID_KEPT_S: u64 = 180;

/// A presence report (`POST /edge/v1/campaigns/{id}/presence`): the tickets that polled at this
/// isolate since its last report, each checked by the edge (signature valid, this campaign's).
/// The origin checks each again and refuses the whole report (400/403, nothing stored) when one
/// fails. A retry with the same `report_id` is counted once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PresenceReport {
    /// Unique per report, 1..=64 characters `[A-Za-z0-9_-]`; a retry sends the same one.
    pub report_id: String,
    /// The signed tickets seen, at most [`MAX_REPORT_TICKETS`], each once.
    pub tickets: Vec<String>,
    /// Reserved for joins answered at the edge (counts per order-key interval); must be absent
    /// or empty for now (400 otherwise).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub joins: Vec<JoinCount>,
}

/// Joins an edge issued in one order-key interval (reserved: not accepted yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JoinCount {
    /// Start of the interval, Unix ms.
    pub from_ms: i64,
    /// Joins in it.
    pub count: u64,
}

/// The origin's answer to a presence report (200).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PresenceReceipt {
    /// Tickets whose last-seen time this report set (0 for a retried report).
    pub counted: u64,
    /// True when this `report_id` was counted before (nothing changed).
    pub duplicate: bool,
}

/// True for a report id of 1..=[`MAX_REPORT_ID_LEN`] characters `[A-Za-z0-9_-]`.
pub fn is_valid_report_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_REPORT_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

impl PresenceReport {
    /// Checks the shape: a valid `report_id`, 1..=[`MAX_REPORT_TICKETS`] tickets, no `joins`.
    /// The message of the first broken rule (400 `invalid_request`).
    pub fn validate(&self) -> Result<(), String> {
        if !is_valid_report_id(&self.report_id) {
            return Err("report_id must be 1 to 64 characters [A-Za-z0-9_-]".into());
        }
        if self.tickets.is_empty() || self.tickets.len() > MAX_REPORT_TICKETS {
            return Err(format!(
                "tickets must hold 1 to {MAX_REPORT_TICKETS} tickets"
            ));
        }
        if !self.joins.is_empty() {
            return Err("joins are not accepted yet".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_needs_an_id_tickets_and_no_joins() {
        let ok = PresenceReport {
            report_id: "r-1".into(),
            tickets: vec!["t".into()],
            joins: vec![],
        };
        assert!(ok.validate().is_ok());
        for bad in [
            PresenceReport {
                report_id: String::new(),
                ..ok.clone()
            },
            PresenceReport {
                report_id: "a b".into(),
                ..ok.clone()
            },
            PresenceReport {
                tickets: vec![],
                ..ok.clone()
            },
            PresenceReport {
                joins: vec![JoinCount {
                    from_ms: 0,
                    count: 1,
                }],
                ..ok.clone()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
