//! This isolate's name: a random tag that makes the ids of the reports it sends to the origin
//! (joins, presence, answers) its own, so a retried report is told from another isolate's.

use worker::js_sys;

/// A random name for this isolate's report ids (two draws of `Math.random`: unique enough to
/// tell isolates apart; it needs no secrecy).
pub(super) fn isolate_tag() -> String {
    let a = (js_sys::Math::random() * 1e15) as u64;
    let b = (js_sys::Math::random() * 1e15) as u64;
    format!("{a:x}{b:x}")
}
