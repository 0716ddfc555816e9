//! Whose ticket is whose: one customer holds at most one admission at a time
//! ([`super::advance`]). A customer who joins many times (at the edge, each join without her
//! ticket gets a new, later place) has many tickets; without this, all of them could be
//! admitted and keep units from the customers behind her for an admission TTL.
//!
//! Per campaign `c`, under the queue's hash tag:
//! - `fg:{c}:q:who`     — hash sequence number → the customer's [`fingerprint`], written when
//!   a ticket joins the line (the edge's report of the tickets it issued, a join at the origin)
//!   and when a presence report names a ticket not known yet (a lost report, a reopened queue).
//!   About 96 bytes per ticket in Redis 7 (a dict entry with a 16-digit field and a 16-character
//!   value): 96,388,736 bytes measured for 1,000,000 tickets (docs/BENCHMARKS.md, "Presence
//!   memory in Redis").
//! - `fg:{c}:q:holders` — hash fingerprint → the sequence number of her latest admission: she
//!   holds it while that number is in `fg:{c}:q:unclaimed` (neither used nor lapsed) or in
//!   `fg:{c}:q:used` (it won a claim: one claim per customer). One entry
//!   per customer admitted, not per ticket.
//!
//! Both keys live [`KEPT_S`] from their last write. A ticket whose customer is not known (its
//! entry lost with the queue) is admitted as before.

use sha2::{Digest, Sha256};

/// How long the two keys live after their last write, seconds (a week: longer than a sale's
/// queue lives unwritten).
pub const KEPT_S: u64 = 7 * 24 * 3600;

/// The customer's fingerprint: the first 8 bytes of SHA-256 of her id, 16 hex digits (fixed
/// size whatever the id's length; two customers share one with odds of about 2^-64 a pair).
pub fn fingerprint(customer: &str) -> String {
    let d = Sha256::digest(customer.as_bytes());
    d[..8].iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_are_fixed_size_and_tell_customers_apart() {
        let (a, b) = (fingerprint("hog"), fingerprint("honest"));
        assert_eq!((a.len(), b.len()), (16, 16));
        assert_ne!(a, b);
        assert_eq!(a, fingerprint("hog"));
        assert_eq!(fingerprint(&"x".repeat(128)).len(), 16);
    }
}
