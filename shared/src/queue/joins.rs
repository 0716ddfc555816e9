//! Joins answered at the edge: an isolate issues each ticket itself and reports the tickets it
//! issued to the origin in batches ([`IssuedReport`]), at most one per second per campaign, so
//! a join costs the origin nothing per customer (docs/WAITING-ROOM.md, "Joins"). The same route
//! still takes a group of joins for the origin to place ([`JoinGroup`], from older edges).

use serde::{Deserialize, Serialize};

use super::JoinReply;

/// Path of campaign `id`'s grouped joins (`POST`, edge only, signed with the edge secret).
pub fn joins_path(id: &str) -> String {
    format!("/edge/v1/campaigns/{id}/joins")
}

/// Most tickets in one report of issued tickets; an isolate that issued more sends the rest
/// in its next report. With one report per second, this is the most joins per second one
/// isolate answers for one campaign without falling behind (then, past its backlog, 503).
pub const MAX_ISSUED_TICKETS: usize = 10_000;

/// Tickets one isolate issued since its last report (`POST /edge/v1/campaigns/{id}/joins`),
/// each signed by the edge, with its order key as sequence number
/// ([`super::keys`]). The origin checks each again and refuses the whole report (400/403,
/// nothing stored) when one fails. A retry with the same `report_id` is counted once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct IssuedReport {
    /// Unique per report, 1..=64 characters `[A-Za-z0-9_-]`; a retry sends the same one.
    pub report_id: String,
    /// The signed tickets issued, 1..=[`MAX_ISSUED_TICKETS`].
    pub tickets: Vec<String>,
}

impl IssuedReport {
    /// Checks the shape: a valid `report_id`, 1..=[`MAX_ISSUED_TICKETS`] tickets. The message
    /// of the first broken rule (400 `invalid_request`).
    pub fn validate(&self) -> Result<(), String> {
        if !super::presence::is_valid_report_id(&self.report_id) {
            return Err("report_id must be 1 to 64 characters [A-Za-z0-9_-]".into());
        }
        if self.tickets.is_empty() || self.tickets.len() > MAX_ISSUED_TICKETS {
            return Err(format!(
                "tickets must hold 1 to {MAX_ISSUED_TICKETS} tickets"
            ));
        }
        Ok(())
    }
}

/// The body of `POST /edge/v1/campaigns/{id}/joins`: a report of issued tickets, or a group of
/// joins for the origin to place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(untagged)]
pub enum JoinsBody {
    /// `{"report_id", "tickets"}`: answered with a `PresenceReceipt`-shaped
    /// `{"counted", "duplicate"}`.
    Issued(IssuedReport),
    /// `{"customers"}`: answered with a [`JoinGroupReply`].
    Group(JoinGroup),
}

/// Most joins in one group; an isolate holding more sends the rest in its next group.
pub const MAX_GROUP_JOINS: usize = 500;

/// Joins of one group (`POST /edge/v1/campaigns/{id}/joins`): the customers whose tokens the
/// edge verified, in arrival order. A customer may appear twice (a double tap): she gets the
/// same place both times. Idempotent: a retried group gets the same places (200 for places
/// already given).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct JoinGroup {
    /// Customer ids (the verified tokens' `sub`), 1..=[`MAX_GROUP_JOINS`] of them.
    pub customers: Vec<String>,
}

impl JoinGroup {
    /// Checks the shape: 1..=[`MAX_GROUP_JOINS`] customers, each a valid customer id
    /// ([`crate::token::is_valid_customer_id`]). The message of the first broken rule (400
    /// `invalid_request`).
    pub fn validate(&self) -> Result<(), String> {
        if self.customers.is_empty() || self.customers.len() > MAX_GROUP_JOINS {
            return Err(format!(
                "customers must hold 1 to {MAX_GROUP_JOINS} customer ids"
            ));
        }
        match self
            .customers
            .iter()
            .position(|c| !crate::token::is_valid_customer_id(c))
        {
            Some(i) => Err(format!(
                "customers[{i}] is not a customer id (1 to 128 visible ASCII characters)"
            )),
            None => Ok(()),
        }
    }
}

/// The origin's answer to a group (200): one join per customer, in the group's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JoinGroupReply {
    /// The answer to each customer's join, in the order of [`JoinGroup::customers`].
    pub joins: Vec<GroupedJoin>,
}

/// One customer's answer in a [`JoinGroupReply`]: what her own join would have answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GroupedJoin {
    /// 201 for a new place, 200 for the place she had.
    pub status: u16,
    /// Her ticket and place.
    pub reply: JoinReply,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_a_report_or_a_group() {
        let r: JoinsBody = serde_json::from_str(r#"{"report_id":"a-1","tickets":["t"]}"#).unwrap();
        assert!(matches!(&r, JoinsBody::Issued(i) if i.validate().is_ok()));
        let g: JoinsBody = serde_json::from_str(r#"{"customers":["a"]}"#).unwrap();
        assert!(matches!(g, JoinsBody::Group(_)));
        assert!(serde_json::from_str::<JoinsBody>(r#"{"report_id":"a","x":1}"#).is_err());
        let bad = IssuedReport {
            report_id: "a b".into(),
            tickets: vec!["t".into()],
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn a_group_needs_one_to_max_valid_customers() {
        let ok = JoinGroup {
            customers: vec!["alice".into(), "alice".into()],
        };
        assert!(ok.validate().is_ok());
        let too_many = JoinGroup {
            customers: vec!["c".into(); MAX_GROUP_JOINS + 1],
        };
        for bad in [
            JoinGroup { customers: vec![] },
            too_many,
            JoinGroup {
                customers: vec!["a".into(), "b c".into()],
            },
            JoinGroup {
                customers: vec!["x".repeat(129)],
            },
        ] {
            assert!(bad.validate().is_err(), "{:?}", bad.customers.len());
        }
        assert_eq!(
            JoinGroup {
                customers: vec!["a".into(), String::new()]
            }
            .validate(),
            Err("customers[1] is not a customer id (1 to 128 visible ASCII characters)".into())
        );
    }
}
