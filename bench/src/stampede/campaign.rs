//! The stampede's campaign: created at the origin from the flags, and its status read back
//! from the origin or the edge.

use anyhow::{anyhow, bail, Context};
use chrono::Utc;
use flashgate_shared::api::{CampaignKind, CampaignStatus, NewCampaign};
use rand::Rng;

use super::{base, Args};

/// Creates the campaign of `args` (kind `kind`, its variants, its waiting room) at the origin
/// and returns its status there.
pub(super) async fn create(
    http: &reqwest::Client,
    args: &Args,
    kind: CampaignKind,
) -> anyhow::Result<CampaignStatus> {
    let token = args.admin_token.as_deref().ok_or_else(|| {
        anyhow!("--admin-token (FLASHGATE_ADMIN_TOKEN) is needed to create the campaign")
    })?;
    let now = Utc::now();
    let id = format!(
        "stampede-{}-{:04x}",
        now.format("%Y%m%d-%H%M%S"),
        rand::rng().random::<u16>()
    );
    let starts_at = if args.starts_in > 0.0 {
        now + chrono::Duration::milliseconds((args.starts_in * 1000.0) as i64)
    } else {
        now - chrono::Duration::seconds(2)
    };
    let body = NewCampaign {
        id: id.clone(),
        name: format!("Stampede {}", now.format("%Y-%m-%d %H:%M:%S")),
        kind,
        stock: args.stock,
        starts_at,
        ends_at: now + chrono::Duration::hours(2),
        hold_seconds: args.hold_seconds,
        hold_extension_seconds: None,
        gate_shards: args.gate_shards,
        waiting_room: super::waiting_room::option(args)?,
        access: None,
        draw: None,
        variants: super::variants::list(args.stock, args.variants),
    };
    let resp = http
        .post(format!("{}/admin/v1/campaigns", base(&args.origin)))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .context("creating the campaign at the origin")?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if status.as_u16() != 201 {
        bail!("creating campaign {id}: origin answered {status}: {text}");
    }
    read_status(http, &args.origin, &id).await
}

/// The public status of campaign `id` at `url` (an origin or the edge).
pub(super) async fn read_status(
    http: &reqwest::Client,
    url: &str,
    id: &str,
) -> anyhow::Result<CampaignStatus> {
    let resp = http
        .get(format!("{}/api/v1/campaigns/{id}", base(url)))
        .send()
        .await
        .with_context(|| format!("GET campaign {id} from {url}"))?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        bail!("GET campaign {id} from {url}: {status}: {text}");
    }
    serde_json::from_str(&text).with_context(|| format!("campaign status from {url}: {text}"))
}
