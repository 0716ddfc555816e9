//! The report's section of the lost-reply retries (`--lost-reply`; the retries themselves are
//! in [`crate::stampede::lost_reply`]).

use serde::Serialize;

/// What the lost-reply retries got.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LostReplyReport {
    /// The share of winners asked to retry (`--lost-reply`).
    pub share: f64,
    /// Winners in the crowd's answers.
    pub winners: u64,
    /// Winners that retried with the key of their 201.
    pub retried: u64,
    /// Retries answered 201 with the very claim of the first reply.
    pub got_their_201: u64,
    /// Retries the edge answered itself (a winner told `sold_out` by the edge, or worse).
    pub answered_by_edge: u64,
    /// Retries sent after the sell-out moment (all, when the campaign sold out).
    pub after_sell_out: u64,
    /// Up to five retries that did not get their 201: customer, status and result.
    pub failures: Vec<String>,
}
