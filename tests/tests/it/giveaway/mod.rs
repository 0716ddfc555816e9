//! Giveaway coupons redeemed in store.

mod redeem;
