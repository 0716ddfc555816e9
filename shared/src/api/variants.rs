//! Variants of a campaign: sizes, colours or editions, each with its own stock. A claim on a
//! campaign with variants names one (`{"variant": "42"}`); a customer holds at most one active
//! claim per campaign across its variants, and the campaign's stock is the sum of theirs.
//!
//! Here: a variant's change, its status and its state. The variants of a creation body and the
//! checks of a variant's fields belong to that body ([`super::campaigns::NewVariant`],
//! [`super::campaigns::check_variant`]).

use serde::{Deserialize, Serialize};

use super::campaigns::CampaignState;

/// `PUT /admin/v1/campaigns/{id}/variants/{variant}` body: adds the variant or changes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SetVariant {
    /// Display name, 1..=200 characters.
    pub name: String,
    /// Units of this variant, 0..=10,000,000; not below the units claimed (409).
    pub stock: i64,
}

/// A variant as the public status and the admin answers show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VariantStatus {
    /// Variant id.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Units of this variant.
    pub stock: i64,
    /// Units of this variant not claimed.
    pub remaining: i64,
    /// The variant's state: the campaign's, except `sold_out` when this variant has none left.
    pub state: CampaignState,
}

/// `PUT /admin/v1/campaigns/{id}/variants/{variant}` 200 body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct VariantReply {
    /// False when the variant already was that way (nothing written, no audit row).
    pub changed: bool,
    /// The variant after the change.
    pub variant: VariantStatus,
    /// The `set_variant` audit row; `null` when nothing changed.
    pub audit: Option<super::admin::AuditEntry>,
    /// How the Redis gate followed.
    pub gate: super::admin::GateFollow,
}

/// The state of a variant of a campaign in state `campaign`: `sold_out` when the variant has
/// no unit left while the campaign is active, else the campaign's.
pub fn variant_state(campaign: CampaignState, remaining: i64) -> CampaignState {
    match campaign {
        CampaignState::Active if remaining <= 0 => CampaignState::SoldOut,
        s => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variant_is_sold_out_alone() {
        assert_eq!(
            variant_state(CampaignState::Active, 0),
            CampaignState::SoldOut
        );
        assert_eq!(
            variant_state(CampaignState::Active, 1),
            CampaignState::Active
        );
        assert_eq!(variant_state(CampaignState::Ended, 1), CampaignState::Ended);
    }
}
