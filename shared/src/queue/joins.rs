//! Joins grouped at the edge: an isolate sends the joins that arrive while its previous group
//! is with the origin as one signed request, so a join is a share of one origin request and
//! one Redis step, not one of each (docs/WAITING-ROOM.md, "Joins").

use serde::{Deserialize, Serialize};

use super::JoinReply;

/// Path of campaign `id`'s grouped joins (`POST`, edge only, signed with the edge secret).
pub fn joins_path(id: &str) -> String {
    format!("/edge/v1/campaigns/{id}/joins")
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
