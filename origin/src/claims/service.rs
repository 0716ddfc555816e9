//! The claim decision: [`answer_early`] runs step 1 of the claim path (campaign state: the
//! cached campaign, then the local sold-out flag) and [`claim`] steps 2–3 (one Lua step in the
//! Redis gate: idempotency record and take; the grouped commit), then lets the gate and the
//! record learn the outcome, in the order listed in [`crate::claims`].
//!
//! Steps 2–3 and the settling run in a task of their own, so a client that disconnects cannot
//! leave a unit taken without a claim row, nor a half-written record.

use std::time::Duration;

use crate::redis_conn::RedisConn;
use flashgate_shared::api::{CampaignKind, CampaignState, ClaimReply};

use super::commit::{NewClaim, Outcome as Committed};
use super::store::{self, ClaimRow};
use crate::campaigns::CampaignRow;
use crate::claims::commit::Committer;
use crate::error::{ApiError, ApiResult};
use crate::gate::flags::SoldOutFlags;
use crate::gate::loader::GateLoader;
use crate::gate::takes::{InFlight, Takes};
use crate::gate::{self, flags::Local, Begun, Take};
use crate::idempotency::{self, Begin};
use crate::metrics::{AnsweredFrom, Metrics};
use crate::reply::{Outcome, Reply};
use std::sync::Arc;
use tokio_util::task::TaskTracker;

/// The handles the claim path uses (built by [`crate::state::AppState::claims`]).
#[derive(Clone)]
pub struct ClaimService {
    pub db: crate::db::Db,
    pub redis: RedisConn,
    /// The gate's handle (the same Redis).
    pub gate: gate::Gate,
    pub campaigns: Arc<crate::campaigns::CampaignCache>,
    pub flags: Arc<SoldOutFlags>,
    pub committer: Committer,
    pub metrics: Arc<Metrics>,
    pub gate_loader: GateLoader,
    /// The claim task of each request runs here, so shutdown joins it.
    pub tasks: TaskTracker,
    /// This origin's takes in flight (what the orphaned-take settlement leaves alone).
    pub takes: Takes,
    /// `FLASHGATE_IDEMPOTENCY_TTL_SECONDS`: how long a final reply is kept for its key.
    pub idempotency_ttl_seconds: u64,
}

/// A validated claim request.
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    pub campaign: String,
    pub customer: String,
    pub idempotency_key: String,
    /// The body bytes as sent (already checked to be `{}`-shaped).
    pub body: Vec<u8>,
    /// The variant asked for, on a campaign with variants (checked to be one of its own).
    pub variant: Option<String>,
}

/// How long a second tab waits for the first tab's claim to commit, in total.
const WAIT_FOR_OTHER_TAB: Duration = Duration::from_secs(5);
/// Most coupon-code draws before giving up (a collision among 2^60 codes is already rare).
const MAX_CODE_DRAWS: usize = 5;

/// Step 1 of the claim path (campaign state), from memory alone: the answer when the campaign
/// is not active by the origin's clock, or when this origin's fresh sold-out flag says she is
/// not a winner; `None` when the claim must go to the gate ([`claim`]).
pub fn answer_early(
    flags: &SoldOutFlags,
    metrics: &Metrics,
    campaign: &CampaignRow,
    customer: &str,
) -> Option<Reply> {
    let now = chrono::Utc::now();
    // Remaining is left to the gate: the cached count may be stale.
    let state_now = CampaignState::decide(
        now,
        campaign.starts_at,
        campaign.ends_at,
        campaign.paused,
        1,
    );
    if let Some(reply) = ClaimReply::for_state(state_now, campaign.starts_at) {
        metrics.claim(Outcome::of_claim(&reply), AnsweredFrom::Memory);
        return Some(Reply::claim(&reply));
    }
    if flags.check(&campaign.id, customer) == Local::SoldOut {
        metrics.claim(Outcome::SoldOut, AnsweredFrom::Memory);
        return Some(Reply::sold_out());
    }
    None
}

/// Runs the gate and the commit for a claim on `campaign` (its row from the cache) that
/// [`answer_early`] did not answer (the caller asked it first). Errors: 422
/// `idempotency_key_reused`; 503 when PostgreSQL or Redis fail or the gate is loading.
pub async fn claim(
    svc: ClaimService,
    campaign: Arc<CampaignRow>,
    req: ClaimRequest,
) -> ApiResult<Reply> {
    let tasks = svc.tasks.clone();
    tasks
        .spawn(async move { claim_at_gate(&svc, &campaign, &req).await })
        .await
        .map_err(|e| ApiError::Unavailable(format!("claim task: {e}")))?
}

async fn claim_at_gate(
    svc: &ClaimService,
    campaign: &CampaignRow,
    req: &ClaimRequest,
) -> ApiResult<Reply> {
    let (mut redis, mut gate) = (svc.redis.clone(), svc.gate.clone());
    let c = &campaign.id;
    let fp = idempotency::fingerprint(&req.campaign, &req.body);
    // Her tokens stay in flight until this request ends, so the settlement leaves them alone.
    let mut flight = svc.takes.begin();
    let token = flight.token().to_string();
    // Her own shard, found once for every step of this claim (from the handle's memory once it
    // has met the campaign); `None` when the gate is not loaded.
    let own = gate::own_shard(&mut gate, c, &req.customer).await?;
    let (owned, begun) = {
        let mut stamp = svc.redis.clone();
        let begin = async {
            let Some(own) = &own else {
                return Ok(Begun::Took(Take::NotLoaded));
            };
            let begin = gate::begin_take_with(
                &mut gate,
                c,
                own,
                &req.customer,
                &token,
                (&req.idempotency_key, &fp, idempotency::PENDING_TTL_SECONDS),
                req.variant.as_deref(),
            );
            svc.metrics.gate_op("take", begin).await
        };
        let (owned, begun) = tokio::join!(
            idempotency::own_key(
                &mut stamp,
                &req.customer,
                &req.idempotency_key,
                &fp,
                svc.idempotency_ttl_seconds,
            ),
            begin
        );
        (owned?, begun?)
    };
    let record = own
        .as_ref()
        .map(|own| own.keys.idempotency(&req.customer, &req.idempotency_key));
    let first = match begun {
        Begun::Existing(value) => match idempotency::existing(&value, &fp) {
            Begin::Reused => return Err(key_reused()),
            Begin::Replay(reply) => {
                svc.metrics.idempotency_replays.inc();
                svc.metrics.claim(Outcome::Replay, AnsweredFrom::Gate);
                return Ok(reply);
            }
            Begin::InProgress | Begin::New => {
                svc.metrics.in_progress.inc();
                svc.metrics.claim(Outcome::InProgress, AnsweredFrom::Gate);
                return Ok(Reply::claim(&ClaimReply::InProgress));
            }
        },
        Begun::Took(_) if !owned => {
            // The key belongs to another campaign or request: undo this one's begin and take.
            if let Some(record) = &record {
                let _ = idempotency::abandon_at(&mut redis, record).await;
            }
            if let Begun::Took(Take::Taken) = begun {
                gate::give_back_bounded(&mut gate, &svc.db, c, &req.customer, &token, None).await?;
            }
            return Err(key_reused());
        }
        Begun::Took(take) => take,
    };
    let result = match (&own, record.as_deref()) {
        (Some(own), Some(record)) => {
            let ticket = Ticket {
                fp: &fp,
                own,
                record,
                ttl_seconds: svc.idempotency_ttl_seconds,
            };
            decide(svc, &mut gate, campaign, req, &ticket, first, &mut flight).await
        }
        // Not loaded: begin_take had no shard, so it took nothing and wrote no record.
        _ => Err(not_loaded(svc, c)),
    };
    match (&result, record.as_deref()) {
        (Ok((_, Recorded::Yes)), _) => {}
        // A pause or a schedule answer is not final for the key: a retry is decided again.
        (Ok((reply, Recorded::No)), Some(record))
            if !matches!(
                reply.outcome,
                Outcome::Paused | Outcome::NotStarted | Outcome::Ended
            ) =>
        {
            // The reply stands without its record (a claim is in PostgreSQL, which a retry
            // finds); a Redis fault here must not turn a final answer into a 503.
            if let Err(e) =
                idempotency::finish_at(&mut redis, record, &fp, reply, svc.idempotency_ttl_seconds)
                    .await
            {
                tracing::warn!(campaign = %c, error = %e, "idempotency record not written");
            }
        }
        (_, record) => {
            // No final answer: let a retry run again (with this or another request).
            let mut stamp = svc.redis.clone();
            let forget_record = async {
                match record {
                    Some(record) => idempotency::abandon_at(&mut redis, record).await,
                    None => Ok(()),
                }
            };
            let _ = tokio::join!(
                forget_record,
                idempotency::abandon(&mut stamp, &req.customer, &req.idempotency_key)
            );
        }
    }
    result.map(|(reply, _)| reply)
}

fn key_reused() -> ApiError {
    ApiError::Unprocessable(
        flashgate_shared::api::codes::IDEMPOTENCY_KEY_REUSED,
        "this Idempotency-Key was used with another campaign or body".into(),
    )
}

/// Her idempotency record for this request, on a loaded gate: the fingerprint, her own shard,
/// the record's key and how long a final reply is kept.
struct Ticket<'a> {
    fp: &'a str,
    own: &'a gate::OwnShard,
    record: &'a str,
    ttl_seconds: u64,
}

/// 503 for a campaign whose gate is not loaded; its load is started (one per campaign).
fn not_loaded(svc: &ClaimService, c: &str) -> ApiError {
    svc.gate_loader.spawn(c);
    ApiError::Unavailable(format!("gate of {c} is loading"))
}

/// Whether a reply was already written to the idempotency record (with the gate's
/// confirmation, in one script).
enum Recorded {
    Yes,
    No,
}

async fn decide(
    svc: &ClaimService,
    redis: &mut gate::Gate,
    campaign: &CampaignRow,
    req: &ClaimRequest,
    ticket: &Ticket<'_>,
    first: Take,
    flight: &mut InFlight,
) -> ApiResult<(Reply, Recorded)> {
    let c = &campaign.id;
    let fp = ticket.fp;
    let deadline = tokio::time::Instant::now() + WAIT_FOR_OTHER_TAB;
    let (mut taken, mut token) = (first, flight.token().to_string());
    loop {
        let no = |reply| Ok((reply, Recorded::No));
        match taken {
            Take::NotLoaded => return Err(not_loaded(svc, c)),
            Take::SoldOut { generation } => {
                svc.metrics.claim(Outcome::SoldOut, AnsweredFrom::Gate);
                if svc.flags.note(c, generation) {
                    let (flags, mut r, c) = (svc.flags.clone(), redis.clone(), c.clone());
                    svc.tasks.spawn(async move {
                        let _ = flags.load_winners(&mut r, &c, generation).await;
                    });
                }
                return no(Reply::sold_out());
            }
            Take::VariantSoldOut => {
                svc.metrics.claim(Outcome::SoldOut, AnsweredFrom::Gate);
                return no(variant_sold_out(req.variant.as_deref().unwrap_or_default()));
            }
            Take::AlreadyHolds(holder) if holder.starts_with(gate::PENDING_PREFIX) => {
                // Her other tab is committing: wait for its outcome, then answer with it.
                if tokio::time::Instant::now() >= deadline {
                    return Err(ApiError::Unavailable("other tab still committing".into()));
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Take::AlreadyHolds(claim_id) => {
                let row = store::find(&svc.db, &claim_id).await?;
                match row {
                    Some(row) if row.is_active() && row.customer_id == req.customer => {
                        return no(existing_claim_reply(
                            &svc.db,
                            &svc.metrics,
                            row,
                            (&req.idempotency_key, fp),
                            req.variant.is_some(),
                        )
                        .await?);
                    }
                    Some(row) if row.customer_id == req.customer => {
                        // Her claim was released or expired, and its give-back to the gate
                        // was lost: do it now (exactly once, it checks the holder), then take.
                        gate::give_back_bounded(redis, &svc.db, c, &req.customer, &claim_id, None)
                            .await?;
                    }
                    _ => {
                        // The gate remembers a claim that PostgreSQL no longer has active:
                        // PostgreSQL wins; reload the gate and let her retry.
                        svc.gate_loader.spawn_reload(c);
                        return Err(ApiError::Unavailable(format!(
                            "gate of {c} disagreed; reloading"
                        )));
                    }
                }
            }
            Take::Taken => {
                let _pending = svc.metrics.pending_take();
                return commit_taken(svc, redis, campaign, req, ticket, &token).await;
            }
        }
        token = flight.renew().to_string();
        let take = gate::take_with(redis, c, &req.customer, &token, req.variant.as_deref());
        taken = svc.metrics.gate_op("take", take).await?;
    }
}

/// The answer to a claim on a variant with no unit left while the campaign has others:
/// 409 `{"result":"sold_out","variant":"<id>"}`.
pub fn variant_sold_out(variant: &str) -> Reply {
    Reply::json(
        axum::http::StatusCode::CONFLICT,
        Outcome::SoldOut,
        &serde_json::json!({"result": "sold_out", "variant": variant}),
    )
}

/// Her existing active claim `row`, as the answer to a request with `key` and request
/// fingerprint `fp`: the first reply again when it was made with this very key and request
/// (Redis lost the idempotency record), else 409 `already_claimed` with her claim. With
/// `variants` (the campaign has some) the claim carries its variant, read from PostgreSQL;
/// a PostgreSQL error is returned.
pub async fn existing_claim_reply(
    db: &crate::db::Db,
    metrics: &Metrics,
    row: ClaimRow,
    (key, fp): (&str, &str),
    variants: bool,
) -> ApiResult<Reply> {
    let same_request = row.idempotency_key == key && row.request_fp == fp;
    let mut claim = row.to_claim();
    if variants {
        claim.variant = crate::campaigns::variants::of_claim(db, &row.id).await?;
    }
    let reply = if same_request {
        // A replay: marked so (`Idempotent-Replayed`), as a replay from the record would be.
        Reply {
            outcome: Outcome::Replay,
            ..Reply::claim(&ClaimReply::Claimed { claim })
        }
    } else {
        Reply::claim(&ClaimReply::AlreadyClaimed { claim })
    };
    metrics.claim(reply.outcome, AnsweredFrom::Store);
    Ok(reply)
}

async fn commit_taken(
    svc: &ClaimService,
    redis: &mut gate::Gate,
    campaign: &CampaignRow,
    req: &ClaimRequest,
    ticket: &Ticket<'_>,
    token: &str,
) -> ApiResult<(Reply, Recorded)> {
    let c = &campaign.id;
    let fp = ticket.fp;
    let kind = campaign.kind();
    let mut new = NewClaim {
        id: store::new_claim_id(),
        campaign_id: c.clone(),
        customer_id: req.customer.clone(),
        kind,
        hold_seconds: campaign.hold_seconds,
        code: None,
        idempotency_key: req.idempotency_key.clone(),
        request_fp: fp.to_string(),
        variant: req.variant.clone(),
    };
    for _ in 0..MAX_CODE_DRAWS {
        if kind == CampaignKind::Giveaway {
            new.code = Some(crate::giveaway::draw::draw_code());
        }
        let outcome = match svc.committer.commit(new.clone()).await {
            Ok(o) => o,
            Err(e) => {
                let _ =
                    gate::give_back_bounded(redis, &svc.db, c, &req.customer, token, None).await;
                return Err(e.into());
            }
        };
        match outcome {
            Committed::Committed(row) => {
                svc.metrics.claim(Outcome::Claimed, AnsweredFrom::Store);
                let mut claim = row.to_claim();
                claim.variant = req.variant.clone();
                let reply = Reply::claim(&ClaimReply::Claimed { claim });
                // The confirmation and her record in one script (one slot).
                let value = idempotency::record_value(fp, &reply);
                let record = Some((ticket.record, value.as_slice(), ticket.ttl_seconds));
                let keys = &ticket.own.keys;
                let confirm = gate::confirm_on(redis, keys, &req.customer, token, &row.id, record);
                // Her claim is committed: that is the answer. A confirmation lost to a Redis
                // fault leaves her pending holder to the orphaned-take settlement (her token
                // leaves the in-flight set when this request ends), which finds the claim.
                let recorded = match svc.metrics.gate_op("confirm", confirm).await {
                    Ok(_) => Recorded::Yes,
                    Err(e) => {
                        tracing::warn!(campaign = %c, error = %e, "gate confirmation failed");
                        Recorded::No
                    }
                };
                return Ok((reply, recorded));
            }
            Committed::AlreadyClaimed(row) => {
                // The gate had lost her: give the unit back and remember her claim.
                gate::give_back_bounded(redis, &svc.db, c, &req.customer, token, Some(&row.id))
                    .await?;
                return Ok((
                    existing_claim_reply(
                        &svc.db,
                        &svc.metrics,
                        row,
                        (&req.idempotency_key, fp),
                        req.variant.is_some(),
                    )
                    .await?,
                    Recorded::No,
                ));
            }
            Committed::Refused(now) => {
                // PostgreSQL's answer stands whatever the correction does; a correction that
                // failed leaves her pending holder to the stale-take settlement.
                if let Err(e) = gate::correct_down(redis, &svc.db, c, &req.customer, token).await {
                    tracing::warn!(campaign = %c, error = %e, "gate correction failed");
                }
                svc.campaigns.invalidate(c).await;
                let at = chrono::Utc::now();
                let decided = ClaimReply::for_state(now.state_at(at), now.starts_at);
                if let (None, Some(v)) = (&decided, req.variant.as_deref()) {
                    // The campaign is live: her variant is what ran out.
                    correct_variant(svc, redis, c, v).await;
                    svc.metrics.claim(Outcome::SoldOut, AnsweredFrom::Store);
                    return Ok((variant_sold_out(v), Recorded::No));
                }
                let reply = decided.unwrap_or(ClaimReply::SoldOut);
                svc.metrics
                    .claim(Outcome::of_claim(&reply), AnsweredFrom::Store);
                return Ok((Reply::claim(&reply), Recorded::No));
            }
            Committed::CodeTaken => continue,
        }
    }
    let _ = gate::give_back_bounded(redis, &svc.db, c, &req.customer, token, None).await;
    Err(ApiError::Unavailable(
        "no free coupon code after several draws".into(),
    ))
}

/// PostgreSQL refused a take of variant `v` the gate allowed: the gate's counts of the variant
/// go to zero when PostgreSQL has none of it left ([`gate::variants::correct_variant`]). A
/// failure is logged: PostgreSQL's refusals stand meanwhile.
async fn correct_variant(svc: &ClaimService, redis: &mut gate::Gate, c: &str, v: &str) {
    let left: sqlx::Result<Option<(i64,)>> = sqlx::query_as(
        "SELECT remaining FROM campaign_variants WHERE campaign_id = $1 AND id = $2",
    )
    .bind(c)
    .bind(v)
    .fetch_optional(&svc.db)
    .await;
    match left {
        Ok(Some((left,))) => {
            if let Err(e) = gate::variants::correct_variant(redis, c, v, left).await {
                tracing::warn!(campaign = %c, variant = %v, error = %e, "variant correction failed");
            }
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(campaign = %c, variant = %v, error = %e, "variant not read"),
    }
}
