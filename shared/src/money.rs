//! Discount arithmetic in integer minor units ("the discount is 10% of $60 = $6"). Shared so that the origin and the edge compute the same cents.
//!
//! Money is an `i64` count of the currency's minor unit (cents for USD/EUR): `6000` is $60.00.
//! Percentages are basis points: `1000` is 10 %, `750` is 7.5 %, `10_000` is 100 %.
//!
//! The rule, in full:
//! - a percentage discount is `cart_total × basis_points / 10 000`, rounded **half up** to the
//!   minor unit (computed exactly in `i128`, so no overflow and no floating point):
//!   10 % of 6000 → 600; 15 % of 3490 = 523.5 → 524; 7.5 % of 999 999 = 74 999.925 → 75 000;
//!   10 % of 1 = 0.1 → 0;
//! - an amount discount is its amount;
//! - either is then clamped to `0 ..= cart_total`: a discount is never above the cart total
//!   and never negative;
//! - `total = cart_total − discount`, so `discount + total = cart_total` always.

/// Basis points in a whole (100 %).
pub const BASIS_POINTS_PER_WHOLE: i64 = 10_000;

/// What a coupon code takes off a cart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discount {
    /// A percentage in basis points (1..=10 000).
    Percent {
        /// 1..=10 000 (10 000 = 100 %).
        basis_points: i64,
    },
    /// A fixed amount in minor units (> 0).
    Amount {
        /// Minor units, > 0.
        minor_units: i64,
    },
}

/// The result of applying a discount to a cart, in minor units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    /// What the customer saves: `0 ..= cart_total`.
    pub discount: i64,
    /// What she pays: `cart_total - discount`.
    pub total: i64,
}

/// `amount × basis_points / 10 000`, rounded half up to the minor unit. `amount` and
/// `basis_points` must be non-negative (negative inputs give 0).
pub fn percent_of(amount: i64, basis_points: i64) -> i64 {
    if amount <= 0 || basis_points <= 0 {
        return 0;
    }
    let whole = BASIS_POINTS_PER_WHOLE as i128;
    let exact = amount as i128 * basis_points as i128;
    let rounded = (exact + whole / 2) / whole;
    rounded.min(i64::MAX as i128) as i64
}

/// Applies `discount` to `cart_total` (minor units, ≥ 0; a negative total is treated as 0)
/// by the rule of this module.
pub fn apply(discount: Discount, cart_total: i64) -> Applied {
    let cart_total = cart_total.max(0);
    let raw = match discount {
        Discount::Percent { basis_points } => percent_of(cart_total, basis_points),
        Discount::Amount { minor_units } => minor_units,
    };
    let discount = raw.clamp(0, cart_total);
    Applied {
        discount,
        total: cart_total - discount,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pct(bp: i64, cart: i64) -> Applied {
        apply(Discount::Percent { basis_points: bp }, cart)
    }

    #[test]
    fn examples_of_the_issue() {
        assert_eq!(
            pct(1000, 6000),
            Applied {
                discount: 600,
                total: 5400
            }
        );
        assert_eq!(
            pct(1500, 3490),
            Applied {
                discount: 524,
                total: 2966
            }
        );
        assert_eq!(pct(750, 999_999).discount, 75_000);
        assert_eq!(
            pct(1000, 1),
            Applied {
                discount: 0,
                total: 1
            }
        );
        // Minimum-order examples: 10 % of 5000 and of 5556.
        assert_eq!(pct(1000, 5000).discount, 500);
        assert_eq!(pct(1000, 5556).discount, 556);
    }

    #[test]
    fn half_rounds_up_and_amounts_clamp() {
        assert_eq!(percent_of(5, 1000), 1); // 0.5 → 1
        assert_eq!(percent_of(4, 1000), 0); // 0.4 → 0
        assert_eq!(percent_of(i64::MAX, 10_000), i64::MAX);
        let a = apply(Discount::Amount { minor_units: 2000 }, 1500);
        assert_eq!(
            a,
            Applied {
                discount: 1500,
                total: 0
            }
        );
        let a = apply(Discount::Amount { minor_units: 2000 }, 6000);
        assert_eq!(a.total, 4000);
    }

    proptest! {
        #[test]
        fn percent_adds_up(cart in 0i64..=1_000_000_000_000, bp in 0i64..=10_000) {
            let a = pct(bp, cart);
            prop_assert_eq!(a.discount + a.total, cart);
            prop_assert!(0 <= a.discount && a.discount <= cart);
        }

        #[test]
        fn amount_adds_up(cart in 0i64..=i64::MAX / 2, amount in 0i64..=i64::MAX / 2) {
            let a = apply(Discount::Amount { minor_units: amount }, cart);
            prop_assert_eq!(a.discount + a.total, cart);
            prop_assert!(0 <= a.discount && a.discount <= cart);
        }

        #[test]
        fn percent_is_within_half_a_unit(cart in 0i64..=1_000_000_000, bp in 0i64..=10_000) {
            // Half up: discount × 10 000 lies in (exact − 5 000, exact + 5 000].
            let d = pct(bp, cart).discount as i128;
            let exact = cart as i128 * bp as i128;
            let diff = d * 10_000 - exact;
            prop_assert!(-5_000 < diff && diff <= 5_000);
        }
    }
}
