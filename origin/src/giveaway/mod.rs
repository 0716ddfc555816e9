//! Giveaway coupons: a giveaway claim is issued with a coupon code, redeemed once in store.
//!
//! ```text
//! issued ──redeem──▶ redeemed
//! ```
//!
//! - [`draw`]: drawing a coupon's code;
//! - [`redeem`]: redeem in store (with the point-of-sale idempotency key) and the coupon lookup.

pub mod draw;
pub mod redeem;
