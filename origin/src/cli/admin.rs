//! `flashgate admin …`: the admin API from a terminal or a script.
//!
//! Every subcommand makes one HTTP call to the origin (`--origin-url` /
//! `FLASHGATE_ORIGIN_URL`) with an admin token (`--token` / `FLASHGATE_ADMIN_TOKEN`), prints
//! the JSON answer on stdout (pretty; nothing for a 204) and exits 0 on a 2xx answer. Otherwise it prints
//! `error: <status> <result>: <message>` on stderr and exits with the code of
//! [`super::exit::for_status`] (2 a missing or refused token, 3 not found, 4 refused, 5 the
//! origin unreachable or 5xx). The token is never printed.

use std::time::Duration;

use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use flashgate_shared::api::promo::CodeChange;
use flashgate_shared::api::{
    CampaignKind, ChangeAction, ChangeRequest, NewCampaign, NewVariant, SetVariant,
};
use reqwest::Method;
use serde_json::Value;

use super::exit;
use crate::admin::time::parse_cli_time;
use crate::secret::Secret;

/// `flashgate admin` options and subcommand.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// Base URL of the origin.
    #[arg(
        long,
        env = "FLASHGATE_ORIGIN_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub origin_url: String,
    /// Admin token (manager for writes; viewer is enough for list, show and audit).
    #[arg(
        long,
        env = "FLASHGATE_ADMIN_TOKEN",
        hide_env_values = true,
        global = true
    )]
    pub token: Option<Secret>,
    /// `Idempotency-Key` sent with a write: the same key and command again (e.g. a retry after
    /// a lost reply) gets the first reply instead of applying the write twice.
    #[arg(long, global = true)]
    pub idempotency_key: Option<String>,
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// The admin operations.
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// List campaigns with live counts (remaining, held, paid/issued, claims in the last minute).
    List,
    /// Show one campaign with live counts.
    Show { campaign: String },
    /// Create a campaign.
    Create {
        /// Slug `[a-z0-9-]{1,64}`.
        #[arg(long)]
        id: String,
        #[arg(long)]
        name: String,
        /// `sale` or `giveaway`.
        #[arg(long, value_parser = parse_kind)]
        kind: CampaignKind,
        /// Total units (1..=10,000,000). With `--variant`, the sum of theirs (leave it out).
        #[arg(long, required_unless_present = "variants")]
        stock: Option<i64>,
        /// Start (default: now): RFC 3339, or a local time in an IANA zone
        /// (`"2026-03-29T23:59 Europe/Paris"`, `"Sunday 23:59 Europe/Paris"`).
        #[arg(long, value_parser = parse_cli_time)]
        starts_at: Option<DateTime<Utc>>,
        /// End, in the forms of `--starts-at`.
        #[arg(long, value_parser = parse_cli_time)]
        ends_at: DateTime<Utc>,
        /// Sale only: hold length in seconds (default 600).
        #[arg(long)]
        hold_seconds: Option<i64>,
        /// Shards of the Redis gate, 1..=1024 (default: chosen from the stock).
        #[arg(long)]
        gate_shards: Option<i64>,
        /// A variant `ID:NAME:STOCK` (e.g. `42:Size 42:50`); repeat for each, at most 1,000.
        /// The campaign's stock is the sum of theirs.
        #[arg(long = "variant", value_parser = parse_variant)]
        variants: Vec<NewVariant>,
        /// A waiting room (challenge, invites) or a draw.
        #[command(flatten)]
        access: super::access::AccessArgs,
    },
    /// Add a variant to a campaign with variants, or change one's name and stock (never below
    /// its units already claimed).
    Variant {
        campaign: String,
        /// The variant id, a slug.
        variant: String,
        #[arg(long)]
        name: String,
        #[arg(long)]
        stock: i64,
    },
    /// Pause: claims are answered `paused` until resumed.
    Pause { campaign: String },
    /// Resume a paused campaign.
    Resume { campaign: String },
    /// End the campaign now.
    Close { campaign: String },
    /// Add units to stock and remaining.
    Restock {
        campaign: String,
        /// Units to add (1..=10,000,000).
        #[arg(long)]
        add: i64,
    },
    /// Set the total stock (never below the units already claimed).
    SetStock { campaign: String, stock: i64 },
    /// Move the end of the campaign (in the forms of `create --ends-at`).
    SetEndsAt {
        campaign: String,
        #[arg(value_parser = parse_cli_time)]
        ends_at: DateTime<Utc>,
    },
    /// The campaign's audit trail, newest first.
    Audit { campaign: String },
    /// The campaign's reconciliation report (units, ledger, gate vs PostgreSQL).
    Reconcile { campaign: String },
    /// Delete the Redis keys of an ended campaign now, instead of after
    /// FLASHGATE_ENDED_KEYS_GRACE_SECONDS (refused while it is live or holds are outstanding;
    /// PostgreSQL keeps everything).
    Purge { campaign: String },
    /// Disable a promo code: every origin refuses it (`not_applicable`, reason `disabled`).
    DisableCode { code: String },
    /// Enable a disabled promo code again.
    EnableCode { code: String },
    /// Webhook endpoints and their deliveries ([`super::webhooks`]).
    Webhooks {
        #[command(subcommand)]
        command: super::webhooks::WebhooksCommand,
    },
}

/// Parses `--kind`: the wire name of a [`CampaignKind`].
fn parse_kind(s: &str) -> Result<CampaignKind, String> {
    CampaignKind::parse(s).ok_or_else(|| format!("unknown kind '{s}' (sale, giveaway)"))
}

/// Parses `--variant ID:NAME:STOCK` (the name may hold colons: the id is before the first,
/// the stock after the last).
fn parse_variant(s: &str) -> Result<NewVariant, String> {
    let usage = || format!("'{s}' is not ID:NAME:STOCK");
    let (id, rest) = s.split_once(':').ok_or_else(usage)?;
    let (name, stock) = rest.rsplit_once(':').ok_or_else(usage)?;
    Ok(NewVariant {
        id: id.to_string(),
        name: name.to_string(),
        stock: stock.trim().parse().map_err(|_| usage())?,
    })
}

/// A typed body as the JSON sent.
fn body(b: impl serde::Serialize) -> Option<Value> {
    Some(serde_json::to_value(b).expect("request bodies serialise"))
}

impl AdminCommand {
    /// Method, path and body of the call.
    fn request(&self) -> (Method, String, Option<Value>) {
        let one = |c: &str| format!("/admin/v1/campaigns/{c}");
        let change = |c: &str, req: ChangeRequest| (Method::PATCH, one(c), body(req));
        let code = |c: &str, action: &str| {
            let req = CodeChange {
                action: action.into(),
            };
            (Method::PATCH, format!("/admin/v1/codes/{c}"), body(req))
        };
        match self {
            AdminCommand::List => (Method::GET, "/admin/v1/campaigns".into(), None),
            AdminCommand::Show { campaign } => (Method::GET, one(campaign), None),
            AdminCommand::Create {
                id,
                name,
                kind,
                stock,
                starts_at,
                ends_at,
                hold_seconds,
                gate_shards,
                variants,
                access,
            } => {
                let new = NewCampaign {
                    id: id.clone(),
                    name: name.clone(),
                    kind: *kind,
                    stock: stock.unwrap_or(0),
                    starts_at: starts_at.unwrap_or_else(Utc::now),
                    ends_at: *ends_at,
                    hold_seconds: *hold_seconds,
                    hold_extension_seconds: None,
                    gate_shards: *gate_shards,
                    waiting_room: access.waiting_room(),
                    access: access.access,
                    draw: access.draw(),
                    variants: (!variants.is_empty()).then(|| variants.clone()),
                };
                (Method::POST, "/admin/v1/campaigns".into(), body(new))
            }
            AdminCommand::Variant {
                campaign,
                variant,
                name,
                stock,
            } => {
                let set = SetVariant {
                    name: name.clone(),
                    stock: *stock,
                };
                (
                    Method::PUT,
                    format!("{}/variants/{variant}", one(campaign)),
                    body(set),
                )
            }
            AdminCommand::Pause { campaign } => {
                change(campaign, ChangeRequest::action(ChangeAction::Pause))
            }
            AdminCommand::Resume { campaign } => {
                change(campaign, ChangeRequest::action(ChangeAction::Resume))
            }
            AdminCommand::Close { campaign } => {
                change(campaign, ChangeRequest::action(ChangeAction::Close))
            }
            AdminCommand::Restock { campaign, add } => {
                change(campaign, ChangeRequest::restock(*add))
            }
            AdminCommand::SetStock { campaign, stock } => {
                change(campaign, ChangeRequest::set_stock(*stock))
            }
            AdminCommand::SetEndsAt { campaign, ends_at } => {
                change(campaign, ChangeRequest::ends_at(*ends_at))
            }
            AdminCommand::Audit { campaign } => {
                (Method::GET, format!("{}/audit", one(campaign)), None)
            }
            AdminCommand::Reconcile { campaign } => {
                (Method::GET, format!("{}/reconcile", one(campaign)), None)
            }
            AdminCommand::Purge { campaign } => {
                (Method::POST, format!("{}/purge", one(campaign)), None)
            }
            AdminCommand::DisableCode { code: c } => code(c, "disable"),
            AdminCommand::EnableCode { code: c } => code(c, "enable"),
            AdminCommand::Webhooks { command } => command.request(),
        }
    }
}

/// Runs one admin command; returns the process exit code.
pub async fn run(args: AdminArgs) -> i32 {
    let Some(token) = args.token.as_ref() else {
        eprintln!("error: no admin token: pass --token or set FLASHGATE_ADMIN_TOKEN");
        return exit::USAGE;
    };
    let (method, path, body) = args.command.request();
    let url = format!("{}{path}", args.origin_url.trim_end_matches('/'));
    let http = match reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
    {
        Ok(h) => h,
        Err(e) => {
            eprintln!("error: {e}");
            return exit::UNREACHABLE;
        }
    };
    let mut req = http.request(method, &url).bearer_auth(token.expose());
    if let Some(key) = &args.idempotency_key {
        req = req.header(flashgate_shared::IDEMPOTENCY_KEY_HEADER, key);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = match req.send().await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot reach the origin at {url}: {e}");
            return exit::UNREACHABLE;
        }
    };
    let status = res.status();
    let text = res.text().await.unwrap_or_default();
    let parsed: Option<Value> = serde_json::from_str(&text).ok();
    if status.is_success() {
        let out = match parsed {
            Some(v) => serde_json::to_string_pretty(&v).unwrap_or(text),
            None => text,
        };
        // A 204 prints nothing.
        if out.is_empty() {
            exit::OK
        } else {
            exit::print_or_code(&out)
        }
    } else {
        let (result, message) = parsed
            .as_ref()
            .map(|v| {
                (
                    v["result"].as_str().unwrap_or("error").to_string(),
                    v["message"].as_str().unwrap_or("").to_string(),
                )
            })
            .unwrap_or_else(|| ("error".into(), text.chars().take(200).collect()));
        eprintln!("error: {} {result}: {message}", status.as_u16());
        exit::for_status(status.as_u16())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        admin: AdminArgs,
    }

    /// `args`, after `t --token x`, as clap parses them.
    fn parse(args: &[&str]) -> Result<T, clap::Error> {
        let mut all = vec!["t", "--token", "x"];
        all.extend_from_slice(args);
        T::try_parse_from(all)
    }

    fn req(args: &[&str]) -> (Method, String, Option<Value>) {
        parse(args).expect("parses").admin.command.request()
    }

    /// `create` of campaign `s` of `kind` ending in 2030, and `more`.
    fn create<'a>(kind: &'a str, more: &[&'a str]) -> Vec<&'a str> {
        let mut all = vec!["create", "--id", "s", "--name", "S", "--kind", kind];
        all.extend_from_slice(&["--ends-at", "2030-01-01T00:00:00Z"]);
        all.extend_from_slice(more);
        all
    }

    #[test]
    fn commands_map_to_admin_api_calls() {
        assert_eq!(req(&["list"]).1, "/admin/v1/campaigns");
        assert_eq!(
            req(&["pause", "s1"]),
            (
                Method::PATCH,
                "/admin/v1/campaigns/s1".into(),
                Some(json!({"action":"pause"}))
            )
        );
        assert_eq!(
            req(&["restock", "s1", "--add", "5"]).2,
            Some(json!({"action":"restock","add":5}))
        );
        assert_eq!(
            req(&["set-stock", "s1", "7"]).2,
            Some(json!({"set_stock":7}))
        );
        assert_eq!(req(&["audit", "s1"]).1, "/admin/v1/campaigns/s1/audit");
        assert_eq!(
            req(&["disable-code", "SPRING10"]),
            (
                Method::PATCH,
                "/admin/v1/codes/SPRING10".into(),
                Some(json!({"action":"disable"}))
            )
        );
        assert_eq!(
            req(&["enable-code", "SPRING10"]).2,
            Some(json!({"action":"enable"}))
        );
        assert_eq!(
            req(&["webhooks", "rotate", "e1"]).1,
            "/admin/v1/webhooks/endpoints/e1/rotate"
        );
        assert_eq!(
            req(&["reconcile", "s1"]).1,
            "/admin/v1/campaigns/s1/reconcile"
        );
        let (m, p, b) = req(&create("sale", &["--stock", "3"]));
        assert_eq!((m, p.as_str()), (Method::POST, "/admin/v1/campaigns"));
        assert_eq!(b.unwrap()["stock"], 3);
        // The admin API's one time parser: a local time in a zone, sent as an instant.
        let zoned = req(&["set-ends-at", "s1", "2030-01-01T01:00 Europe/Paris"]).2;
        assert_eq!(zoned, Some(json!({"ends_at": "2030-01-01T00:00:00Z"})));
        let e = parse(&["set-ends-at", "s1", "soon"])
            .err()
            .expect("refused")
            .to_string();
        assert!(e.contains("Sunday 23:59 Europe/Paris"), "{e}");
        assert!(parse(&create("raffle", &["--stock", "1"])).is_err());
    }

    #[test]
    fn create_takes_a_waiting_room_its_challenge_and_a_draw() {
        let (_, _, b) = req(&create(
            "sale",
            &[
                "--stock",
                "3",
                "--admit-per-second",
                "50",
                "--challenge",
                "pow",
            ],
        ));
        let room = &b.unwrap()["waiting_room"];
        assert_eq!(
            (room["admit_per_second"].clone(), room["challenge"].clone()),
            (json!(50), json!("pow"))
        );
        let json_room = r#"{"admit_per_second":7,"queueing":"random"}"#;
        let (_, _, b) = req(&create(
            "sale",
            &[
                "--stock",
                "3",
                "--waiting-room",
                json_room,
                "--challenge",
                "turnstile",
                "--challenge-fail-open",
                "--challenge-failure",
                "forbidden",
                "--invite-only",
                "--pow-difficulty",
                "20",
            ],
        ));
        let room = &b.unwrap()["waiting_room"];
        assert_eq!(room["queueing"], "random");
        assert_eq!(room["admit_per_second"], 7);
        assert_eq!(room["challenge"], "turnstile");
        assert_eq!(room["challenge_fail_open"], true);
        assert_eq!(room["challenge_failure"], "forbidden");
        assert_eq!(room["invite_only"], true);
        assert_eq!(room["pow_difficulty"], 20);
        let (_, _, b) = req(&create(
            "sale",
            &[
                "--stock",
                "100",
                "--access",
                "draw",
                "--entries-open-at",
                "2029-01-01T12:00:00Z",
                "--entries-close-at",
                "2029-01-02T12:00 UTC",
                "--buying-window-seconds",
                "3600",
            ],
        ));
        let b = b.unwrap();
        assert_eq!(b["access"], "draw");
        assert_eq!(
            b["draw"],
            json!({"entries_open_at":"2029-01-01T12:00:00Z",
                   "entries_close_at":"2029-01-02T12:00:00Z","buying_window_seconds":3600})
        );
        assert!(b.get("waiting_room").is_none_or(Value::is_null));
        // Usage errors: a challenge without a waiting room, an unknown value, half a window.
        assert!(parse(&create("sale", &["--stock", "1", "--challenge", "pow"])).is_err());
        assert!(parse(&create("sale", &["--stock", "1", "--access", "raffle"])).is_err());
        let half = ["--stock", "1", "--entries-close-at", "2029-01-02T12:00:00Z"];
        assert!(parse(&create("sale", &half)).is_err());
    }

    #[test]
    fn create_takes_variants_and_variant_sets_one() {
        let (_, _, b) = req(&create(
            "sale",
            &[
                "--variant",
                "41:Size 41:2",
                "--variant",
                "42:Size 42: wide:3",
            ],
        ));
        let b = b.unwrap();
        assert_eq!(b["stock"], 0);
        assert_eq!(
            b["variants"],
            json!([{"id":"41","name":"Size 41","stock":2},
                   {"id":"42","name":"Size 42: wide","stock":3}])
        );
        assert_eq!(
            req(&["variant", "shoes", "43", "--name", "Size 43", "--stock", "4"]),
            (
                Method::PUT,
                "/admin/v1/campaigns/shoes/variants/43".into(),
                Some(json!({"name":"Size 43","stock":4}))
            )
        );
        assert!(parse_variant("42:50").is_err());
        assert!(parse_variant("42:Size:many").is_err());
        // Without --stock and without variants: a usage error.
        assert!(parse(&create("sale", &[])).is_err());
    }
}
