//! Workers glue of the edge's answer reports (wasm32 only): the answers this isolate gave
//! itself, counted per campaign, second and result ([`crate::answers::Tally`]), sent to the
//! origin in one report per campaign and second (`POST /edge/v1/campaigns/{id}/answers`,
//! edge-signed) by a reporter that runs after the answers (`waitUntil`).

use super::isolate::isolate_tag;
use super::now_ms;
use super::origin::post_report;
use crate::answers::Tally;
use crate::config::EdgeConfig;
use crate::reporter::Next;
use flashgate_shared::answers::answers_path;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;
use worker::Delay;

/// Tries of one report (the same report id each time: the origin counts it once).
const REPORT_TRIES: u32 = 3;

thread_local! {
    static TALLY: RefCell<Tally> = RefCell::new(Tally::new(&isolate_tag()));
    /// Campaigns whose reporter is to start after this request's answer (`waitUntil`).
    static STARTS: RefCell<Vec<(String, u64)>> = const { RefCell::new(Vec::new()) };
}

/// Counts an answer with `result` given for campaign `id` now ([`Tally::add`]).
pub(super) fn count(id: &str, result: &str) {
    if let Some(reporter) = TALLY.with(|t| t.borrow_mut().add(id, result, now_ms())) {
        STARTS.with(|s| s.borrow_mut().push((id.to_string(), reporter)));
    }
}

/// The reporters to start (campaign id, reporter number), taken out.
pub(super) fn take_starts() -> Vec<(String, u64)> {
    STARTS.with(|s| std::mem::take(&mut *s.borrow_mut()))
}

/// Reporter `reporter` of campaign `id` at this isolate: sends its counts, one report at most
/// every second, until none is pending or a newer reporter took over. A report that got no
/// answer or a 5xx is tried again with the same id; one that never got through is put back
/// for the next report.
pub(super) async fn report(cfg: Rc<EdgeConfig>, id: String, reporter: u64) {
    loop {
        let next = TALLY.with(|t| t.borrow_mut().next(&id, reporter, now_ms()));
        match next {
            Next::Stop => return,
            Next::Wait(ms) => {
                Delay::from(Duration::from_millis(u64::try_from(ms).unwrap_or(0))).await;
            }
            Next::Send(r) => {
                let body = serde_json::to_vec(&r).unwrap_or_default();
                let path = answers_path(&id);
                if !post_report(&cfg, "answers report", &id, &path, &body, REPORT_TRIES).await {
                    TALLY.with(|t| t.borrow_mut().put_back(&id, r.counts));
                }
            }
        }
    }
}
