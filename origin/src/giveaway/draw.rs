//! Coupon codes drawn for giveaway claims: each giveaway winner gets one single-use code, redeemed
//! in store.

use flashgate_shared::code::{from_random_bytes, GENERATED_LEN};
use rand::RngCore;

/// Draws a 12-symbol code from the 32-symbol alphabet of [`flashgate_shared::code::ALPHABET`]
/// with the thread-local CSPRNG (`rand::rng()`: ChaCha12, seeded and periodically reseeded from
/// the operating system). Uniqueness is enforced by the database (a collision is redrawn by the
/// caller).
pub fn draw_code() -> String {
    let mut bytes = [0u8; GENERATED_LEN];
    rand::rng().fill_bytes(&mut bytes);
    from_random_bytes(&bytes)
}
