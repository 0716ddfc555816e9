//! The options of `flashgate admin create` that say who may claim: a waiting room with its
//! challenge and invites (docs/ACCESS.md, docs/WAITING-ROOM.md) and a draw (docs/DRAWS.md).
//! They build the `waiting_room`, `access` and `draw` fields of the campaign; their bounds are
//! the admin API's (a 422 `validation_failed` names the field).

use chrono::{DateTime, Utc};
use clap::{ArgGroup, Args};
use flashgate_shared::api::draws::{CampaignAccess, DrawSettings};
use flashgate_shared::queue::access::{ChallengeFailure, ChallengeKind};
use flashgate_shared::queue::WaitingRoom;

use crate::admin::time::parse_cli_time;

/// Waiting room, challenge, invites and draw options of `create`. The challenge and invite
/// flags need `--waiting-room` or `--admit-per-second` (the group `room`).
#[derive(Debug, Clone, Default, Args)]
#[command(group(ArgGroup::new("room").args(["waiting_room", "admit_per_second"]).multiple(true)))]
pub struct AccessArgs {
    /// The whole `waiting_room` option as JSON (e.g. `{"admit_per_second":200,
    /// "queueing":"random"}`); the flags below change its fields.
    #[arg(long, value_parser = parse_waiting_room, help_heading = "Waiting room")]
    pub waiting_room: Option<WaitingRoom>,
    /// A waiting room admitting this many customers per second.
    #[arg(long, help_heading = "Waiting room")]
    pub admit_per_second: Option<u32>,
    /// The challenge at the join: `none`, `pow` or `turnstile` (needs a waiting room).
    #[arg(long, value_parser = parse_wire::<ChallengeKind>, requires = "room",
        help_heading = "Waiting room")]
    pub challenge: Option<ChallengeKind>,
    /// Difficulty of a `pow` challenge, bits (default 18).
    #[arg(long, requires = "room", help_heading = "Waiting room")]
    pub pow_difficulty: Option<u8>,
    /// A join whose Turnstile provider times out or errs gets a normal ticket (fail open).
    #[arg(long, requires = "room", help_heading = "Waiting room")]
    pub challenge_fail_open: bool,
    /// What a failed join gets: `infinite_queue` (default) or `forbidden`.
    #[arg(long, value_parser = parse_wire::<ChallengeFailure>, requires = "room",
        help_heading = "Waiting room")]
    pub challenge_failure: Option<ChallengeFailure>,
    /// Joins need the shop's signed invite.
    #[arg(long, requires = "room", help_heading = "Waiting room")]
    pub invite_only: bool,
    /// `first_come` (default) or `draw` (needs `--entries-open-at` and `--entries-close-at`).
    #[arg(long, value_parser = parse_wire::<CampaignAccess>, help_heading = "Draw")]
    pub access: Option<CampaignAccess>,
    /// A draw's first instant of entries, in the forms of `--starts-at`.
    #[arg(long, value_parser = parse_cli_time, requires = "entries_close_at",
        help_heading = "Draw")]
    pub entries_open_at: Option<DateTime<Utc>>,
    /// A draw's end of entries (the draw runs then), in the forms of `--starts-at`.
    #[arg(long, value_parser = parse_cli_time, requires = "entries_open_at",
        help_heading = "Draw")]
    pub entries_close_at: Option<DateTime<Utc>>,
    /// How long a winner may claim once admitted, seconds (1..=172,800; default 86,400).
    #[arg(long, requires = "entries_open_at", help_heading = "Draw")]
    pub buying_window_seconds: Option<i64>,
}

/// Parses a wire name (`"pow"`, `"forbidden"`, `"draw"`) as its JSON string.
fn parse_wire<T: serde::de::DeserializeOwned>(s: &str) -> Result<T, String> {
    serde_json::from_value(serde_json::Value::String(s.to_string()))
        .map_err(|_| format!("'{s}' is not one of the documented values"))
}

/// Parses `--waiting-room` (unknown fields refused, as the admin API does).
fn parse_waiting_room(s: &str) -> Result<WaitingRoom, String> {
    serde_json::from_str(s).map_err(|e| format!("not a waiting_room option: {e}"))
}

impl AccessArgs {
    /// The campaign's `waiting_room` option: `--waiting-room`, or one admitting
    /// `--admit-per-second`, with the challenge and invite flags applied; `None` without either.
    pub fn waiting_room(&self) -> Option<WaitingRoom> {
        let mut room = self.waiting_room.or_else(|| {
            let admit = self.admit_per_second?;
            serde_json::from_value(serde_json::json!({ "admit_per_second": admit })).ok()
        })?;
        if let Some(n) = self.admit_per_second {
            room.admit_per_second = n;
        }
        if let Some(c) = self.challenge {
            room.challenge = c;
        }
        if let Some(d) = self.pow_difficulty {
            room.pow_difficulty = d;
        }
        room.challenge_fail_open |= self.challenge_fail_open;
        if let Some(f) = self.challenge_failure {
            room.challenge_failure = f;
        }
        room.invite_only |= self.invite_only;
        Some(room)
    }

    /// The campaign's `draw` option, when both entry times are given.
    pub fn draw(&self) -> Option<DrawSettings> {
        Some(DrawSettings {
            entries_open_at: self.entries_open_at?,
            entries_close_at: self.entries_close_at?,
            buying_window_seconds: self.buying_window_seconds,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct T {
        #[command(flatten)]
        a: AccessArgs,
    }

    fn parse(args: &[&str]) -> Result<AccessArgs, clap::Error> {
        let mut all = vec!["t"];
        all.extend_from_slice(args);
        T::try_parse_from(all).map(|t| t.a)
    }

    #[test]
    fn wire_names_and_json_are_parsed_and_unknown_ones_refused() {
        assert_eq!(parse_wire::<ChallengeKind>("pow"), Ok(ChallengeKind::Pow));
        assert_eq!(
            parse_wire::<ChallengeFailure>("forbidden"),
            Ok(ChallengeFailure::Forbidden)
        );
        assert_eq!(
            parse_wire::<CampaignAccess>("draw"),
            Ok(CampaignAccess::Draw)
        );
        assert!(parse_wire::<ChallengeKind>("captcha").is_err());
        assert!(parse_waiting_room(r#"{"admit_per_second":5,"nope":1}"#).is_err());
        assert!(parse(&["--entries-open-at", "2030-01-01T00:00:00Z"]).is_err());
        let a = parse(&[]).unwrap();
        assert_eq!((a.waiting_room(), a.draw()), (None, None));
    }
}
