//! The claim path: the grouped commit, concurrent claims at the origin, the sold-out fast path, reading a claim back,
//! the claims feed, and the history checker.

mod commit;
mod feed;
mod history_checker;
mod lookup;
mod origin;
mod sold_out_fast_path;
