//! Variants of a campaign: sizes, colours or editions, each with its own stock. A claim on a
//! campaign with variants names one (`{"variant": "42"}`); a customer holds at most one active
//! claim per campaign across its variants, and the campaign's stock is the sum of theirs.

use serde::{Deserialize, Serialize};

use super::campaigns::{CampaignState, MAX_NAME_LEN, MAX_STOCK};
use super::common::is_valid_slug;

/// The most variants one campaign may have.
pub const MAX_VARIANTS: usize = 1_000;

/// One variant in a creation body (`POST /admin/v1/campaigns`, `variants`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewVariant {
    /// Slug `[a-z0-9-]{1,64}` (the rules of a campaign id), unique within the campaign.
    pub id: String,
    /// Display name, 1..=200 characters.
    pub name: String,
    /// Units of this variant, 0..=10,000,000.
    pub stock: i64,
}

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

/// Checks one variant's fields; `Err` names the field.
pub fn check_variant(id: &str, name: &str, stock: i64) -> Result<(), String> {
    if !is_valid_slug(id) {
        return Err("variants: id must match [a-z0-9-]{1,64}".into());
    }
    crate::text::check_free_text("variants: name", name, MAX_NAME_LEN)?;
    if !(0..=MAX_STOCK).contains(&stock) {
        return Err(format!("variants: stock must be between 0 and {MAX_STOCK}"));
    }
    Ok(())
}

/// Checks the variants of a creation body: at most [`MAX_VARIANTS`], ids unique, each valid
/// ([`check_variant`]), their stock summing to 1..=10,000,000. Returns that sum.
pub fn check_variants(variants: &[NewVariant]) -> Result<i64, String> {
    if variants.is_empty() {
        return Err("variants: give at least one variant, or leave the field out".into());
    }
    if variants.len() > MAX_VARIANTS {
        return Err(format!("variants: at most {MAX_VARIANTS} variants"));
    }
    let mut seen = std::collections::HashSet::with_capacity(variants.len());
    let mut sum = 0i64;
    for v in variants {
        check_variant(&v.id, &v.name, v.stock)?;
        if !seen.insert(v.id.as_str()) {
            return Err(format!("variants: duplicate id {}", v.id));
        }
        sum += v.stock;
    }
    if !(1..=MAX_STOCK).contains(&sum) {
        return Err(format!(
            "variants: their stock must sum to between 1 and {MAX_STOCK}"
        ));
    }
    Ok(sum)
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

    fn v(id: &str, stock: i64) -> NewVariant {
        NewVariant {
            id: id.into(),
            name: format!("Size {id}"),
            stock,
        }
    }

    #[test]
    fn variant_rules() {
        assert_eq!(check_variants(&[v("41", 2), v("42", 3)]), Ok(5));
        assert!(check_variants(&[v("41", 2), v("41", 3)]).is_err());
        assert!(check_variants(&[v("41", -1)]).is_err());
        assert!(check_variants(&[v("Bad", 1)]).is_err());
        assert!(check_variants(&[v("41", 0)]).is_err());
        assert!(check_variants(&[]).is_err());
        let many: Vec<_> = (0..=MAX_VARIANTS).map(|i| v(&i.to_string(), 1)).collect();
        assert!(check_variants(&many).is_err());
        assert!(check_variants(&many[..MAX_VARIANTS]).is_ok());
    }

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
