//! The worker side of [`crate::telemetry`]: the claim answers, the joins' challenge failures
//! and the rate-limit bindings' answers counted per isolate, and the metrics route.

use std::cell::RefCell;

use flashgate_shared::ANSWERED_BY_HEADER;
use worker::{Headers, Request, Response, Result};

use crate::access::{Failure, FailureCounts};
use crate::config::EdgeConfig;
use crate::decide::Answer;
use crate::shared_limit::{self, Budget, Outcome};
use crate::telemetry::{check_reader, Counts};

thread_local! {
    static COUNTS: RefCell<Counts> = RefCell::new(Counts::default());
    /// Joins that failed their challenge here, by outcome and reason.
    static FAILURES: RefCell<FailureCounts> = RefCell::new(FailureCounts::default());
    /// What the rate-limit bindings answered this isolate, by budget and outcome.
    static SHARED: RefCell<shared_limit::Counts> = RefCell::new(shared_limit::Counts::default());
}

/// The edge's own answer `a` to a claim on campaign `id`, counted ([`Counts::add`]) as
/// answered by the edge and for the campaign's answer report ([`super::answers::count`]),
/// then built ([`super::answer`]): nothing is read back from the response (each read would be
/// a call into the runtime).
pub(super) fn edge_answer(id: &str, a: &Answer) -> Result<Response> {
    let body = a.body.as_bytes();
    COUNTS.with(|c| c.borrow_mut().add(body, "edge"));
    super::answers::count(id, &crate::telemetry::result_of(body));
    super::answer(a)
}

/// Counts a claim answer relayed from the origin: its body (JSON `result`) and its
/// `Flashgate-Answered-By` (absent counts as the origin).
pub(super) fn count_relayed(body: &[u8], answered_by: Option<&str>) {
    COUNTS.with(|c| c.borrow_mut().add(body, answered_by.unwrap_or("origin")));
}

/// Counts a join to campaign `id` that failed its challenge with `f`, answered with a 403
/// (`forbidden`) or an infinite-queue ticket ([`FailureCounts::add`]); reported as
/// `challenge_<reason>` in the campaign's answer report.
pub(super) fn challenge_failed(id: &str, f: Failure, forbidden: bool) {
    FAILURES.with(|c| c.borrow_mut().add(f, forbidden));
    super::answers::count(id, &flashgate_shared::answers::challenge_result(f.label()));
}

/// Counts `outcome` of `budget`'s binding ([`shared_limit::Counts::add`]): the count so far of
/// that pair.
pub(super) fn shared_limit(budget: Budget, outcome: Outcome) -> u64 {
    SHARED.with(|c| c.borrow_mut().add(budget, outcome))
}

/// `GET /__flashgate/metrics`: this isolate's counts in the Prometheus text format, for the
/// bearer of `FLASHGATE_EDGE_METRICS_TOKEN`; 401 for anyone else, 404 when no token is set.
pub(super) fn serve(req: &Request, cfg: &EdgeConfig) -> Result<Response> {
    let authorization = req.headers().get("authorization")?;
    if let Err(a) = check_reader(cfg.metrics_token.as_deref(), authorization.as_deref()) {
        return super::answer(&a);
    }
    let headers = Headers::new();
    headers.set("content-type", "text/plain; version=0.0.4")?;
    headers.set("cache-control", flashgate_shared::PRIVATE_CACHE_CONTROL)?;
    headers.set(ANSWERED_BY_HEADER, "edge")?;
    let mut text = COUNTS.with(|c| c.borrow().render());
    text.push_str(&FAILURES.with(|f| f.borrow().render()));
    text.push_str(&SHARED.with(|s| s.borrow().render()));
    Ok(Response::ok(text)?.with_headers(headers))
}
