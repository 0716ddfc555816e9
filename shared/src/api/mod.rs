//! Request and response bodies of the public and admin API, shared by origin and edge so that
//! both give byte-for-byte the same bodies for the same results. One file per area:
//!
//! - [`common`]: the request-error body and its result codes, field rules used by several areas;
//! - [`campaigns`]: kind, state, public status, the creation body and its limits;
//! - [`draws`]: draw campaigns (the `draw` option, entry receipts, the draw's status);
//! - [`claims`]: the claim, its request and its answers;
//! - [`holds`]: pay and release of a sale's hold;
//! - [`giveaway`]: giveaway coupons (redeem, coupon view, QR payload);
//! - [`gifts`]: gift fulfilment (gift campaigns, segments, caps, eligibility, fulfilments);
//! - [`promo`]: the coupon-code service (promo codes: check, use, confirm, release, batches);
//! - [`variants`]: a campaign's variants (sizes, colours) and their rules;
//! - [`webhooks`]: signed lifecycle webhooks (event types, event bodies, endpoints);
//! - [`admin`]: the admin bodies (campaign views, change request and reply, audit, reconcile).
//!
//! Every item is also re-exported here, so `flashgate_shared::api::X` names it whatever its
//! area.
//!
//! Every non-2xx answer has one of two shapes:
//! - a business result: `{"result": "<code>", ...fields of that result}` (e.g. 409 `sold_out`);
//! - a request error: `{"result": "<code>", "message": "<text for humans>"}` ([`ErrorBody`]).
//!
//! Times are RFC 3339 in UTC; counts are plain integers; money is integer minor units.

/// Declares a unit enum that is sent on the wire and stored in PostgreSQL (`text`) under one
/// name per variant, written once as `Variant = "name"`: the derives (serde with that name;
/// `sqlx::Type` with the `sqlx` feature), `as_str` (the name) and `parse` (`None` for any
/// other text). Attributes pass through: `#[derive(Default)]` on the enum with `#[default]` on
/// a variant gives it a default.
macro_rules! stored_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "sqlx", derive(sqlx::Type), sqlx(type_name = "text"))]
        pub enum $name {
            $(
                $(#[$vmeta])*
                #[serde(rename = $text)]
                #[cfg_attr(feature = "sqlx", sqlx(rename = $text))]
                $variant,
            )+
        }

        impl $name {
            /// The wire name, also the value stored in PostgreSQL.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }

            /// Parses the wire (or stored) name; `None` for anything else.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $( $text => Some($name::$variant), )+
                    _ => None,
                }
            }
        }

        // The OpenAPI schema by hand, from the same names: utoipa's derive does not see the
        // `serde(rename)` a macro passes it.
        #[cfg(feature = "openapi")]
        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                utoipa::openapi::ObjectBuilder::new()
                    .schema_type(utoipa::openapi::schema::Type::String)
                    .enum_values(Some([$($text),+]))
                    .into()
            }
        }

        #[cfg(feature = "openapi")]
        impl utoipa::ToSchema for $name {}
    };
}

pub mod admin;
pub mod campaigns;
pub mod claims;
pub mod common;
pub mod draws;
pub mod feed;
pub mod gifts;
pub mod giveaway;
pub mod holds;
pub mod promo;
pub mod variants;
pub mod webhooks;

pub use admin::*;
pub use campaigns::*;
pub use claims::*;
pub use common::*;
pub use draws::*;
pub use feed::*;
pub use giveaway::*;
pub use holds::*;
pub use variants::*;

#[cfg(test)]
mod stored_enum_tests {
    use super::promo::{CodeKind, UseStatus};
    use super::*;

    /// Checks that every variant's name is its JSON string, parses back, and nothing else does.
    fn names<T>(all: &[T], name: fn(T) -> &'static str, parse: fn(&str) -> Option<T>) -> Vec<String>
    where
        T: Copy + PartialEq + std::fmt::Debug + serde::Serialize + serde::de::DeserializeOwned,
    {
        for &v in all {
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{}\"", name(v)));
            assert_eq!(serde_json::from_str::<T>(&json).unwrap(), v);
            assert_eq!(parse(name(v)), Some(v));
            assert_eq!(parse(&name(v).to_uppercase()), None);
        }
        assert_eq!(parse(""), None);
        all.iter().map(|&v| name(v).to_string()).collect()
    }

    #[test]
    fn each_variant_has_one_name_on_the_wire_in_storage_and_in_parse() {
        let claims = names(
            &[
                ClaimStatus::Held,
                ClaimStatus::Paid,
                ClaimStatus::Released,
                ClaimStatus::Expired,
                ClaimStatus::Issued,
                ClaimStatus::Redeemed,
            ],
            ClaimStatus::as_str,
            ClaimStatus::parse,
        );
        assert_eq!(
            claims,
            ["held", "paid", "released", "expired", "issued", "redeemed"]
        );
        let kinds = names(
            &[CampaignKind::Sale, CampaignKind::Giveaway],
            CampaignKind::as_str,
            CampaignKind::parse,
        );
        assert_eq!(kinds, ["sale", "giveaway"]);
        let codes = names(
            &[CodeKind::Shared, CodeKind::OneTime],
            CodeKind::as_str,
            CodeKind::parse,
        );
        assert_eq!(codes, ["shared", "one_time"]);
        let uses = names(
            &[UseStatus::Held, UseStatus::Used, UseStatus::Released],
            UseStatus::as_str,
            UseStatus::parse,
        );
        assert_eq!(uses, ["held", "used", "released"]);
        let gifts = names(
            &[gifts::GiftKind::MobileCredit],
            gifts::GiftKind::as_str,
            gifts::GiftKind::parse,
        );
        assert_eq!(gifts, ["mobile_credit"]);
        assert_eq!(gifts::GiftKind::default(), gifts::GiftKind::MobileCredit);
    }
}
