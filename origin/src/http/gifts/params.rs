//! Checks of the gift routes' path and query values, shared by the subscriber and the admin
//! handlers; each is answered before any query.

use flashgate_shared::api::gifts::{is_valid_gift_id, is_valid_msisdn};

use crate::error::{ApiError, ApiResult};

/// 404 for a campaign id that cannot exist (checked before any query).
pub fn campaign_id(id: &str) -> ApiResult<()> {
    tracing::Span::current().record("campaign", id);
    if is_valid_gift_id(id) {
        Ok(())
    } else {
        Err(unknown_campaign(id))
    }
}

/// 404 `not_found` for campaign `id`.
pub fn unknown_campaign(id: &str) -> ApiError {
    ApiError::NotFound(format!(
        "no gift campaign {}",
        id.chars().take(64).collect::<String>()
    ))
}

/// 422 unless `m` is an MSISDN (E.164 digits without `+`, 8 to 15).
pub fn msisdn(m: &str) -> ApiResult<()> {
    if is_valid_msisdn(m) {
        Ok(())
    } else {
        Err(ApiError::validation(
            "msisdn must be E.164 digits without '+', 8 to 15 of them",
        ))
    }
}

/// 404 `not_found` unless `raw` is a UUID.
pub fn fulfilment_id(raw: &str) -> ApiResult<uuid::Uuid> {
    uuid::Uuid::parse_str(raw).map_err(|_| ApiError::NotFound("no such fulfilment".into()))
}
