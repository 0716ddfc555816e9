//! Draw campaigns (`access: "draw"`): the creation option, the entry receipt, the draw's
//! public status and a customer's view of her entry. The draw's rules are in
//! [`crate::draw`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::draw::DrawResult;

stored_enum! {
    /// How customers get to claim a campaign.
    #[derive(Default)]
    pub enum CampaignAccess {
        /// First come, first served (with or without a waiting room).
        #[default]
        FirstCome = "first_come",
        /// Customers enter during an entry window; a verifiable draw picks `stock` winners.
        Draw = "draw",
    }
}

/// Longest buying window of a draw, seconds (48 hours).
pub const MAX_BUYING_WINDOW_SECONDS: i64 = 172_800;
/// Shortest buying window of a draw, seconds.
pub const MIN_BUYING_WINDOW_SECONDS: i64 = 1;
/// Buying window of a draw that does not set one, seconds (24 hours).
pub const DEFAULT_BUYING_WINDOW_SECONDS: i64 = 86_400;

/// Why a draw campaign is refused a waiting room, at creation and by a manager's change.
pub const NO_WAITING_ROOM: &str = "a draw campaign has no waiting_room";

/// The `draw` option of a campaign created with `access: "draw"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct DrawSettings {
    /// First instant an entry is taken (RFC 3339 UTC).
    pub entries_open_at: DateTime<Utc>,
    /// First instant an entry is refused, after `entries_open_at` and before the campaign's
    /// `ends_at` (RFC 3339 UTC); the draw runs then.
    pub entries_close_at: DateTime<Utc>,
    /// How long a winner may claim from the moment she is admitted, seconds,
    /// [`MIN_BUYING_WINDOW_SECONDS`]..=[`MAX_BUYING_WINDOW_SECONDS`]; absent:
    /// [`DEFAULT_BUYING_WINDOW_SECONDS`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buying_window_seconds: Option<i64>,
}

impl DrawSettings {
    /// The buying window, seconds.
    pub fn buying_window(&self) -> i64 {
        self.buying_window_seconds
            .unwrap_or(DEFAULT_BUYING_WINDOW_SECONDS)
    }

    /// Checks the window's order, its years, that it closes before the campaign's `ends_at`,
    /// and the buying window's range. The message names the field.
    pub fn validate(&self, ends_at: DateTime<Utc>) -> Result<(), String> {
        super::check_year("draw.entries_open_at", self.entries_open_at)?;
        super::check_year("draw.entries_close_at", self.entries_close_at)?;
        if self.entries_open_at >= self.entries_close_at {
            return Err("draw.entries_open_at must be before draw.entries_close_at".into());
        }
        if self.entries_close_at >= ends_at {
            return Err("draw.entries_close_at must be before ends_at".into());
        }
        // (The same rule as a later change of the end, [`check_end_after_entries`].)
        let w = self.buying_window();
        if !(MIN_BUYING_WINDOW_SECONDS..=MAX_BUYING_WINDOW_SECONDS).contains(&w) {
            return Err(format!(
                "draw.buying_window_seconds must be between {MIN_BUYING_WINDOW_SECONDS} and \
                 {MAX_BUYING_WINDOW_SECONDS}"
            ));
        }
        Ok(())
    }
}

/// Checks a campaign's `access` against its `draw` option and waiting room: `draw` needs the
/// option, the option needs `draw`, and a draw has no waiting room. The message names the field.
pub fn check_access(
    access: Option<CampaignAccess>,
    draw: Option<&DrawSettings>,
    waiting_room: bool,
    ends_at: DateTime<Utc>,
) -> Result<(), String> {
    match (access.unwrap_or_default(), draw) {
        (CampaignAccess::FirstCome, None) => Ok(()),
        (CampaignAccess::FirstCome, Some(_)) => {
            Err("draw applies to campaigns with access \"draw\" only".into())
        }
        (CampaignAccess::Draw, None) => Err("access \"draw\" needs the draw option".into()),
        (CampaignAccess::Draw, Some(_)) if waiting_room => Err(NO_WAITING_ROOM.into()),
        (CampaignAccess::Draw, Some(d)) => d.validate(ends_at),
    }
}

/// Checks that a new draw's entry window closes after `now`: one closed already would be drawn
/// at once, with no entries. The message names the field.
pub fn check_entries_ahead(d: &DrawSettings, now: DateTime<Utc>) -> Result<(), String> {
    if d.entries_close_at > now {
        Ok(())
    } else {
        Err(format!(
            "draw.entries_close_at must be in the future ({} is not after now, {}): a window \
             closed already would be drawn at once, with no entries",
            d.entries_close_at
                .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true),
            now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ))
    }
}

/// Checks a new `ends_at` of a draw campaign whose entries close at `entries_close_at`: the
/// rule of creation ([`DrawSettings::validate`]), the end after the entry window.
pub fn check_end_after_entries(
    entries_close_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
) -> Result<(), String> {
    if entries_close_at < ends_at {
        Ok(())
    } else {
        Err(format!(
            "ends_at must be after draw.entries_close_at ({}): the draw's entries close before \
             the campaign ends",
            entries_close_at.to_rfc3339()
        ))
    }
}

/// Where a draw is, by the origin's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DrawState {
    /// Before `entries_open_at`: the commitment is published, entries are refused.
    Scheduled,
    /// Entries are taken.
    Open,
    /// The window has closed; the draw is about to run.
    Closed,
    /// Drawn: the seed, the digest and the order are published.
    Drawn,
}

/// `GET /api/v1/campaigns/{id}/draw`: the draw's public status. `result` is present once
/// drawn (the reveal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DrawStatus {
    /// Campaign id.
    pub campaign: String,
    /// Where the draw is.
    pub state: DrawState,
    /// RFC 3339 UTC.
    pub entries_open_at: DateTime<Utc>,
    /// RFC 3339 UTC.
    pub entries_close_at: DateTime<Utc>,
    /// How long a winner may claim once admitted, seconds.
    pub buying_window_seconds: i64,
    /// Lowercase hex SHA-256 of the secret seed, fixed when the campaign was created.
    pub commitment: String,
    /// When the draw ran (RFC 3339 UTC); absent before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drawn_at: Option<DateTime<Utc>>,
    /// The published result (seed, digest, winners, waitlist); absent before the draw.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<DrawResult>,
}

/// `POST /api/v1/campaigns/{id}/draw/entries` body (201 the first time, 200 after): her entry
/// receipt. Entering again returns the same receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EntryReceipt {
    /// Receipt id, `e_` + 32 hex digits.
    pub entry_id: String,
    /// Campaign id.
    pub campaign: String,
    /// Customer id (the customer token's `sub`).
    pub customer: String,
    /// When she first entered (RFC 3339 UTC).
    pub entered_at: DateTime<Utc>,
    /// The draw's commitment, to check at the reveal.
    pub commitment: String,
    /// When the entry window closes and the draw runs (RFC 3339 UTC).
    pub entries_close_at: DateTime<Utc>,
}

/// Her standing in a draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum EntryOutcome {
    /// Not drawn yet.
    Entered,
    /// Admitted: among the first `stock` of the order, or a unit passed to her from the
    /// waitlist; she may claim with `admission` until `buying_until`.
    Won,
    /// On the waitlist, not admitted (yet).
    Waitlisted,
    /// Admitted, but her buying window ended without a claim (or her hold ended unpaid after
    /// it): her unit passed to the next on the waitlist.
    Lapsed,
}

/// `GET /api/v1/campaigns/{id}/draw/entries/mine`: her entry and, once drawn, her outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MyEntry {
    /// Her receipt.
    pub receipt: EntryReceipt,
    /// Entered (not drawn yet), won or waitlisted.
    pub outcome: EntryOutcome,
    /// Her 1-based place in the draw's order, once drawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub place: Option<i64>,
    /// When `won`: the end of her buying window (RFC 3339 UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buying_until: Option<DateTime<Utc>>,
    /// When `won`: her admission token, sent as `Flashgate-Admission` on her claim (as a
    /// waiting room's); it expires at `buying_until`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission: Option<String>,
}

/// `GET /admin/v1/campaigns/{id}/draw`: a manager's view of a draw: its public status without
/// the result (state, windows, commitment, `drawn_at`) and the counts of its entries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DrawProgress {
    /// The draw's status, without `result`.
    pub draw: DrawStatus,
    /// Entries (one per customer).
    pub entries: i64,
    /// Entries drawn among the first `stock` places (0 before the draw).
    pub winners: i64,
    /// Entries drawn after them: the waitlist (0 before the draw).
    pub waitlist: i64,
    /// Entries whose buying window opened: the winners and those the waitlist passed units to.
    pub admitted: i64,
    /// Of `admitted`, those on the waitlist: how far units have passed down it.
    pub admitted_from_waitlist: i64,
    /// Admitted entries whose customer holds a held or paid claim of the campaign.
    pub claimed: i64,
    /// Admitted entries whose buying window ended unused: their units passed on.
    pub lapsed: i64,
}
