//! The claims feed of a campaign (`GET /admin/v1/campaigns/{id}/claims` and its CSV export
//! `…/claims.csv`): every claim in a stable order, paged with an opaque cursor, for the shop to
//! reconcile its orders against.
//!
//! The order is `(created_at, id)`, both fixed when the claim is written, so a claim never
//! moves between pages: paging with `cursor` returns each claim at most once however many
//! claims are written meanwhile (new claims come after the ones already listed, or in a later
//! page).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::claims::ClaimStatus;

/// Claims in a page when `limit` is not given.
pub const DEFAULT_FEED_LIMIT: i64 = 100;
/// Most claims in one page.
pub const MAX_FEED_LIMIT: i64 = 1_000;

/// One claim of the feed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FeedClaim {
    /// Claim id.
    pub id: String,
    /// Customer id (the `sub` of the customer token).
    pub customer: String,
    /// The claim's status now.
    pub status: ClaimStatus,
    /// Sale: end of the hold (RFC 3339 UTC, after an extension the extended end); `null` for a
    /// giveaway.
    pub held_until: Option<DateTime<Utc>>,
    /// When the hold was paid (RFC 3339 UTC); `null` unless `status` is `paid`.
    pub paid_at: Option<DateTime<Utc>>,
    /// The payment's reference as `pay` got it; `null` unless `status` is `paid`.
    pub payment_ref: Option<String>,
    /// When the claim was written (RFC 3339 UTC): the feed's order, with `id`.
    pub created_at: DateTime<Utc>,
    /// The variant it took, on a campaign with variants (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
}

/// `GET /admin/v1/campaigns/{id}/claims` body: one page of the feed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClaimFeed {
    /// The campaign id.
    pub campaign: String,
    /// At most `limit` claims, oldest first (by `created_at`, then `id`).
    pub claims: Vec<FeedClaim>,
    /// The cursor after the last claim of this page (pass it as `cursor` for the next page);
    /// the request's own cursor when the page is empty, `null` when that was absent too.
    pub next_cursor: Option<String>,
    /// True when more claims followed this page when it was read.
    pub has_more: bool,
}

/// A position in the feed: after the claim with this `created_at` and `id`. On the wire an
/// opaque string (base64url of the two).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedCursor {
    /// `created_at` of the last claim listed.
    pub created_at: DateTime<Utc>,
    /// `id` of the last claim listed.
    pub id: String,
}

impl FeedCursor {
    /// The cursor after `claim`.
    pub fn after(claim: &FeedClaim) -> Self {
        FeedCursor {
            created_at: claim.created_at,
            id: claim.id.clone(),
        }
    }

    /// The opaque wire form.
    pub fn encode(&self) -> String {
        let raw = format!("{}.{}", self.created_at.timestamp_micros(), self.id);
        URL_SAFE_NO_PAD.encode(raw)
    }

    /// Reads a cursor made by [`FeedCursor::encode`]; `None` for anything else.
    pub fn decode(s: &str) -> Option<Self> {
        if s.is_empty() || s.len() > 256 {
            return None;
        }
        let raw = String::from_utf8(URL_SAFE_NO_PAD.decode(s).ok()?).ok()?;
        let (micros, id) = raw.split_once('.')?;
        let created_at = DateTime::from_timestamp_micros(micros.parse().ok()?)?;
        if !super::is_claim_id_shape(id) {
            return None;
        }
        Some(FeedCursor {
            created_at,
            id: id.to_string(),
        })
    }
}

/// The header line of the CSV export.
/// `variant` is last, so the columns before it keep their places; it is empty on a campaign
/// without variants.
pub const FEED_CSV_HEADER: &str =
    "id,customer,status,held_until,paid_at,payment_ref,created_at,variant";

/// One CSV line (with its `\n`) of `claim`, fields as in [`FEED_CSV_HEADER`]: times RFC 3339
/// UTC exactly as the JSON feed writes them, `null` as an empty field, and a field quoted
/// (with `"` doubled) when it holds `,`, `"`, a line break, or starts with `=`, `+`, `-`, `@`
/// (so a spreadsheet does not read it as a formula, the text is prefixed with `'`).
pub fn feed_csv_line(claim: &FeedClaim) -> String {
    let time = |t: Option<DateTime<Utc>>| {
        t.map(|t| {
            serde_json::to_value(t)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        })
        .unwrap_or_default()
    };
    let fields = [
        csv_field(&claim.id),
        csv_field(&claim.customer),
        claim.status.as_str().to_string(),
        time(claim.held_until),
        time(claim.paid_at),
        csv_field(claim.payment_ref.as_deref().unwrap_or_default()),
        time(Some(claim.created_at)),
        csv_field(claim.variant.as_deref().unwrap_or_default()),
    ];
    let mut line = fields.join(",");
    line.push('\n');
    line
}

fn csv_field(s: &str) -> String {
    let s = if s.starts_with(['=', '+', '-', '@']) {
        format!("'{s}")
    } else {
        s.to_string()
    };
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(customer: &str, payment_ref: Option<&str>) -> FeedClaim {
        FeedClaim {
            id: "c_0123456789abcdef0123456789abcdef".into(),
            customer: customer.into(),
            status: ClaimStatus::Paid,
            held_until: Some("2026-01-01T12:10:00Z".parse().unwrap()),
            paid_at: Some("2026-01-01T12:05:00.123456Z".parse().unwrap()),
            payment_ref: payment_ref.map(str::to_string),
            created_at: "2026-01-01T12:00:00.5Z".parse().unwrap(),
            variant: None,
        }
    }

    #[test]
    fn cursor_round_trips_and_refuses_anything_else() {
        let c = FeedCursor::after(&claim("ana", None));
        assert_eq!(FeedCursor::decode(&c.encode()), Some(c));
        for bad in [
            "",
            "x",
            "!!!",
            &URL_SAFE_NO_PAD.encode("12.no-pe"),
            &"a".repeat(300),
        ] {
            assert_eq!(FeedCursor::decode(bad), None, "{bad}");
        }
    }

    #[test]
    fn csv_lines_quote_what_needs_it() {
        assert_eq!(
            feed_csv_line(&claim("ana", Some("p-1"))),
            "c_0123456789abcdef0123456789abcdef,ana,paid,2026-01-01T12:10:00Z,\
             2026-01-01T12:05:00.123456Z,p-1,2026-01-01T12:00:00.500Z,\n"
        );
        let sized = FeedClaim {
            variant: Some("42".into()),
            ..claim("ana", None)
        };
        assert!(feed_csv_line(&sized).ends_with(",2026-01-01T12:00:00.500Z,42\n"));
        let line = feed_csv_line(&claim("a,\"b\"", Some("=1+1")));
        assert!(line.contains(",\"a,\"\"b\"\"\",paid,"), "{line}");
        assert!(line.contains(",'=1+1,"), "{line}");
    }
}
