//! `flashgate admin webhooks …`: webhook endpoints and their deliveries (docs/WEBHOOKS.md) over
//! the admin API, one HTTP call per subcommand, run and answered as every `flashgate admin`
//! command ([`super::admin`]: JSON on stdout, `error: <status> <result>: <message>` on stderr,
//! the exit codes of [`super::exit`]).
//!
//! Values are checked by the origin (a URL that is not https, an unknown event type, a secret
//! of the wrong length: 422 `validation_failed`, exit 4), so the CLI and the API refuse the
//! same things.

use chrono::{DateTime, Utc};
use clap::Subcommand;
use flashgate_shared::api::webhooks::{DeliveryState, EndpointChange, NewEndpoint, ReplayRequest};
use reqwest::Method;
use serde_json::Value;

use crate::admin::time::parse_cli_time;

/// `flashgate admin webhooks` subcommands.
#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// List the endpoints (viewer; no secrets).
    List,
    /// Show one endpoint (viewer; no secret).
    Show {
        /// The endpoint's id (UUID).
        endpoint: String,
    },
    /// Register an endpoint (manager); prints it with its secret, shown only here.
    Create {
        /// Where events are posted: `https://…`.
        #[arg(long)]
        url: String,
        /// Event types sent to it, comma-separated (`claim.held,claim.paid`).
        #[arg(long, value_delimiter = ',', required = true)]
        events: Vec<String>,
        /// Free text for humans (at most 500 characters).
        #[arg(long, default_value = "")]
        description: String,
        /// Register it disabled (no event is sent until `change --enable`).
        #[arg(long)]
        disabled: bool,
        /// Its secret (`whsec_` + base64 of 24..=64 bytes); made at random when absent.
        #[arg(long)]
        secret: Option<String>,
    },
    /// Change an endpoint (manager): only the options given.
    Change {
        /// The endpoint's id (UUID).
        endpoint: String,
        /// A new URL.
        #[arg(long)]
        url: Option<String>,
        /// New event types, comma-separated.
        #[arg(long, value_delimiter = ',')]
        events: Option<Vec<String>>,
        /// A new description.
        #[arg(long)]
        description: Option<String>,
        /// Enable it.
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        /// Disable it.
        #[arg(long)]
        disable: bool,
    },
    /// Delete an endpoint and its deliveries (manager).
    Delete {
        /// The endpoint's id (UUID).
        endpoint: String,
    },
    /// Rotate an endpoint's secret (manager); prints the new secret. The old one keeps signing
    /// for `FLASHGATE_WEBHOOK_ROTATION_OVERLAP_SECONDS`.
    Rotate {
        /// The endpoint's id (UUID).
        endpoint: String,
    },
    /// The endpoint's newest deliveries (viewer): status, attempts, last response code, time.
    Deliveries {
        /// The endpoint's id (UUID).
        endpoint: String,
        /// Only `pending`, `delivered` or `failed` ones.
        #[arg(long, value_parser = parse_state)]
        status: Option<DeliveryState>,
    },
    /// Send events to the endpoint again (manager): one event, or every event of its types
    /// since a time.
    Replay {
        /// The endpoint's id (UUID).
        endpoint: String,
        /// The event to send again (its `webhook-id`).
        #[arg(long, required_unless_present = "since", conflicts_with = "since")]
        event: Option<String>,
        /// Every event since this time: RFC 3339, or a local time in an IANA zone
        /// (`"2026-03-29T23:59 Europe/Paris"`).
        #[arg(long, value_parser = parse_cli_time)]
        since: Option<DateTime<Utc>>,
    },
}

/// Parses `--status`: the wire name of a [`DeliveryState`].
fn parse_state(s: &str) -> Result<DeliveryState, String> {
    DeliveryState::parse(s)
        .ok_or_else(|| format!("unknown status '{s}' (pending, delivered, failed)"))
}

/// A typed body as the JSON sent.
fn body(b: impl serde::Serialize) -> Option<Value> {
    Some(serde_json::to_value(b).expect("request bodies serialise"))
}

impl WebhooksCommand {
    /// Method, path and body of the call.
    pub fn request(&self) -> (Method, String, Option<Value>) {
        let all = "/admin/v1/webhooks/endpoints";
        let one = |e: &str| format!("{all}/{e}");
        match self {
            WebhooksCommand::List => (Method::GET, all.into(), None),
            WebhooksCommand::Show { endpoint } => (Method::GET, one(endpoint), None),
            WebhooksCommand::Create {
                url,
                events,
                description,
                disabled,
                secret,
            } => {
                let new = NewEndpoint {
                    url: url.clone(),
                    event_types: events.clone(),
                    description: description.clone(),
                    enabled: !disabled,
                    secret: secret.clone(),
                };
                (Method::POST, all.into(), body(new))
            }
            WebhooksCommand::Change {
                endpoint,
                url,
                events,
                description,
                enable,
                disable,
            } => {
                let change = EndpointChange {
                    url: url.clone(),
                    event_types: events.clone(),
                    description: description.clone(),
                    enabled: (*enable || *disable).then_some(*enable),
                };
                (Method::PATCH, one(endpoint), body(change))
            }
            WebhooksCommand::Delete { endpoint } => (Method::DELETE, one(endpoint), None),
            WebhooksCommand::Rotate { endpoint } => {
                (Method::POST, format!("{}/rotate", one(endpoint)), None)
            }
            WebhooksCommand::Deliveries { endpoint, status } => {
                let filter = status.map_or(String::new(), |s| format!("?status={}", s.as_str()));
                (
                    Method::GET,
                    format!("{}/deliveries{filter}", one(endpoint)),
                    None,
                )
            }
            WebhooksCommand::Replay {
                endpoint,
                event,
                since,
            } => {
                let req = ReplayRequest {
                    event_id: event.clone(),
                    since: *since,
                };
                (Method::POST, format!("{}/replay", one(endpoint)), body(req))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use serde_json::json;

    #[derive(Parser)]
    struct T {
        #[command(subcommand)]
        webhooks: WebhooksCommand,
    }

    fn req(args: &[&str]) -> (Method, String, Option<Value>) {
        let mut all = vec!["t"];
        all.extend_from_slice(args);
        T::parse_from(all).webhooks.request()
    }

    const E: &str = "/admin/v1/webhooks/endpoints";

    #[test]
    fn commands_map_to_admin_api_calls() {
        assert_eq!(req(&["list"]), (Method::GET, E.into(), None));
        assert_eq!(req(&["show", "e1"]).1, format!("{E}/e1"));
        let (m, p, b) = req(&[
            "create",
            "--url",
            "https://shop.example/hooks",
            "--events",
            "claim.held,claim.paid",
        ]);
        assert_eq!((m, p.as_str()), (Method::POST, E));
        assert_eq!(
            b,
            Some(
                json!({"url": "https://shop.example/hooks", "description": "",
                        "event_types": ["claim.held", "claim.paid"], "enabled": true,
                        "secret": null})
            )
        );
        assert_eq!(
            req(&["change", "e1", "--disable"]),
            (
                Method::PATCH,
                format!("{E}/e1"),
                Some(
                    json!({"url": null, "event_types": null, "description": null,
                            "enabled": false})
                )
            )
        );
        assert_eq!(
            req(&["change", "e1", "--enable"]).2.unwrap()["enabled"],
            true
        );
        assert_eq!(
            req(&["change", "e1", "--description", "x"]).2.unwrap()["enabled"],
            Value::Null
        );
        assert_eq!(
            req(&["delete", "e1"]),
            (Method::DELETE, format!("{E}/e1"), None)
        );
        assert_eq!(
            req(&["rotate", "e1"]),
            (Method::POST, format!("{E}/e1/rotate"), None)
        );
        assert_eq!(
            req(&["deliveries", "e1", "--status", "failed"]).1,
            format!("{E}/e1/deliveries?status=failed")
        );
        assert_eq!(
            req(&["replay", "e1", "--event", "ev1"]),
            (
                Method::POST,
                format!("{E}/e1/replay"),
                Some(json!({"event_id": "ev1", "since": null}))
            )
        );
        let since = req(&["replay", "e1", "--since", "2030-01-01T01:00 Europe/Paris"]).2;
        assert_eq!(since.unwrap()["since"], "2030-01-01T00:00:00Z");
        for bad in [
            &["replay", "e1"][..],
            &[
                "replay",
                "e1",
                "--event",
                "a",
                "--since",
                "2030-01-01T00:00:00Z",
            ],
            &["deliveries", "e1", "--status", "lost"],
            &["change", "e1", "--enable", "--disable"],
            &["create", "--url", "https://x.example"],
        ] {
            let mut all = vec!["t"];
            all.extend_from_slice(bad);
            assert!(T::try_parse_from(all).is_err(), "{bad:?} refused");
        }
    }
}
