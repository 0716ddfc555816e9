//! The isolate's memos of the two SHA-256 digests a sold-out answer would otherwise compute on
//! every request: a campaign id's fingerprint in the campaign index
//! ([`flashgate_shared::campaign_index::fingerprint`]) and a customer's key in the winners
//! filter ([`flashgate_shared::winners_filter::key`]). Both depend on the id alone, never on
//! the index's or the filter's version, so a value once computed stays right. Each memo holds
//! at most [`MAX_IDS`] ids and is emptied when full, so its memory stays bounded (about
//! 0.3 MB each) whatever the number of customers.

use std::cell::RefCell;
use std::collections::HashMap;

use flashgate_shared::{campaign_index, winners_filter};

/// Most ids a memo holds (the size of the isolate's verified-token cache).
pub const MAX_IDS: usize = 4_096;

/// Ids and their digests; emptied when [`MAX_IDS`] are held and a new one comes.
#[derive(Debug)]
pub struct Memo<V> {
    values: HashMap<String, V>,
    capacity: usize,
}

impl<V: Copy> Memo<V> {
    /// An empty memo of at most `capacity` ids (at least 1).
    pub fn new(capacity: usize) -> Self {
        Memo {
            values: HashMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// The value of `id`: the one held, else `compute(id)`, then held.
    pub fn get(&mut self, id: &str, compute: impl FnOnce(&str) -> V) -> V {
        if let Some(v) = self.values.get(id) {
            return *v;
        }
        if self.values.len() >= self.capacity {
            self.values.clear();
        }
        let v = compute(id);
        self.values.insert(id.to_owned(), v);
        v
    }

    /// Ids held.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// True when no id is held.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

thread_local! {
    static FINGERPRINTS: RefCell<Memo<u32>> = RefCell::new(Memo::new(MAX_IDS));
    static WINNER_KEYS: RefCell<Memo<u64>> = RefCell::new(Memo::new(MAX_IDS));
}

/// Campaign `id`'s fingerprint in the campaign index, from the isolate's memo.
pub fn campaign_fingerprint(id: &str) -> u32 {
    FINGERPRINTS.with(|m| m.borrow_mut().get(id, campaign_index::fingerprint))
}

/// `customer`'s key in a winners filter, from the isolate's memo.
pub fn winners_key(customer: &str) -> u64 {
    WINNER_KEYS.with(|m| m.borrow_mut().get(customer, winners_filter::key))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memoised_digests_are_the_digests_themselves() {
        for id in ["spring-sale", "a", "x-1", "spring-sale"] {
            assert_eq!(campaign_fingerprint(id), campaign_index::fingerprint(id));
            assert_eq!(winners_key(id), winners_filter::key(id));
        }
    }

    #[test]
    fn a_full_memo_is_emptied_and_stays_within_its_capacity() {
        let mut m = Memo::new(3);
        let mut computed = 0;
        for round in 0..2 {
            for id in ["a", "b", "c"] {
                let v = m.get(id, |s| {
                    computed += 1;
                    s.len()
                });
                assert_eq!(v, 1, "round {round}");
            }
        }
        assert_eq!(computed, 3, "the second round is served from the memo");
        assert_eq!(m.get("d", |_| 7), 7);
        assert_eq!(m.len(), 1, "emptied when full, then d held");
        assert!(m.len() <= 3);
    }
}
