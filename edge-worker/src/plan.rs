//! The claim plan: the order of the rules the edge applies to a checked claim (its request
//! checks and customer token passed, its campaign in the index), once the cached status is
//! known. Plain Rust: the worker's glue and the host's cost example drive the same plan, and
//! the tests below drive it with every outcome.
//!
//! The rules, in order:
//! 1. On a campaign with a waiting room, the claim rate limit of the customer and her address
//!    ([`crate::limit::Action::Claim`]).
//! 2. The sold-out gate ([`decide::gate`]): a fresh cached state `ended`, `paused`, clearly
//!    `not_started` or an unknown campaign is answered. `sold_out` is answered only to a
//!    customer the winners filter rules out ([`Verdict::Loser`]): a possible winner's claim
//!    (her retry) goes on to the origin, which answers it with her first reply; without a
//!    filter ([`Verdict::Unknown`]) the answer is 503 `unavailable` (retry), not a `sold_out`
//!    that could be false to her.
//! 3. A claim of a variant the cached status says is sold out while the campaign is live
//!    ([`decide::variant_gate`]): answered, except to a possible winner.
//! 4. On a campaign with a waiting room, the admission token; an expired one
//!    ([`Admitted::ReplayOnly`]) is forwarded within the replay limit only; last, the pace of
//!    forwarded claims. A possible winner of a sold-out campaign refused here is told
//!    `sold_out`, as everyone.
//! 5. Forward to the origin.
//!
//! Each step that needs the runtime (a rate limit, the winners filter, the admission secret, a
//! forwarding token) is asked of the caller ([`Do`]), which gives back what it found ([`Got`]):
//!
//! ```
//! # use flashgate_edge_worker::plan::{ClaimPlan, Do, Got};
//! # use flashgate_edge_worker::winners::Verdict;
//! let mut plan = ClaimPlan::new(None, false, 0, 0, b"{}");
//! let mut got = Got::Start;
//! let forwarded = loop {
//!     got = match plan.next(got) {
//!         Do::Answer(a) => break Err(a),
//!         Do::Forward => break Ok(()),
//!         Do::Limit { .. } => Got::Limited(Ok(())),
//!         Do::AskWinners => Got::Verdict(Verdict::Loser),
//!         Do::CheckAdmission => unreachable!("no waiting room"),
//!         Do::Pace(_) => Got::Paced(Ok(())),
//!     };
//! };
//! assert_eq!(forwarded, Ok(()));
//! ```

use crate::decide::{self, Answer, Gate};
use crate::limit::Action;
use crate::queue::{self, Admitted};
use crate::status::StatusEntry;
use crate::winners::Verdict;
use flashgate_shared::api::CampaignState;

/// What the plan asks its caller to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Do {
    /// Answer the claim with this, at the edge.
    Answer(Answer),
    /// Forward the claim to the origin.
    Forward,
    /// Take a token of `action`'s rate limit from the customer's bucket and, when
    /// `with_address`, her address's; give back [`Got::Limited`].
    Limit {
        /// Whose limit: [`Action::Claim`] or [`Action::Replay`].
        action: Action,
        /// Whether her address's bucket is taken from too.
        with_address: bool,
    },
    /// Ask the winners filter whether she may have won; give back [`Got::Verdict`].
    AskWinners,
    /// Check her admission token; give back [`Got::Admission`].
    CheckAdmission,
    /// Take a forwarding token of the campaign's pace, at this many admitted claims per
    /// second; give back [`Got::Paced`].
    Pace(u32),
}

/// What the caller found for the plan's last [`Do`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Got {
    /// Nothing yet: the first call.
    Start,
    /// The rate limit of [`Do::Limit`]: `Err` with the answer when over it.
    Limited(Result<(), Answer>),
    /// The winners filter's verdict ([`Do::AskWinners`]).
    Verdict(Verdict),
    /// The admission token ([`Do::CheckAdmission`]): `Err` with the answer when refused.
    Admission(Result<Admitted, Answer>),
    /// The pace ([`Do::Pace`]): `Err` with the answer when past it.
    Paced(Result<(), Answer>),
}

/// The plan of one checked claim (see the module documentation): [`ClaimPlan::new`], then
/// [`ClaimPlan::next`] with what the caller found, until it says [`Do::Answer`] or
/// [`Do::Forward`].
#[derive(Debug)]
pub struct ClaimPlan<'a> {
    entry: Option<&'a StatusEntry>,
    fresh: bool,
    body: &'a [u8],
    /// Admitted claims per second of the campaign's waiting room; `None` without one.
    admit_rate: Option<u32>,
    /// The sold-out gate's answer; taken out when given (or kept in `told`).
    gate: Option<Answer>,
    /// The `sold_out` a possible winner is told if the waiting room refuses her later.
    told: Option<Answer>,
    /// The variant gate, once worked out.
    variant_gate: Option<Gate>,
    /// The steps the caller answered that let the claim through (a refusal ends the plan).
    passed: Passed,
    verdict: Option<Verdict>,
    /// Whether the last [`Do::Limit`] asked was the replay limit's.
    asked_replay: bool,
}

/// The waiting room's steps that let the claim through so far.
#[derive(Debug, Default)]
struct Passed {
    claim_limit: bool,
    admission: Option<Admitted>,
    replay_limit: bool,
    pace: bool,
}

impl<'a> ClaimPlan<'a> {
    /// The plan of a checked claim with body `body` (at most 4 KiB, already checked), given the
    /// cached status `entry` (`fresh`: refreshed within the TTL) at `now_ms` (epoch ms), with
    /// `skew_ms` of clock skew allowed before a start ([`decide::gate`]).
    #[inline]
    pub fn new(
        entry: Option<&'a StatusEntry>,
        fresh: bool,
        now_ms: i64,
        skew_ms: i64,
        body: &'a [u8],
    ) -> Self {
        ClaimPlan {
            entry,
            fresh,
            body,
            admit_rate: queue::admit_rate(entry),
            gate: match decide::gate(entry, fresh, now_ms, skew_ms) {
                Gate::Answer(a) => Some(a),
                Gate::Forward => None,
            },
            told: None,
            variant_gate: None,
            passed: Passed::default(),
            verdict: None,
            asked_replay: false,
        }
    }

    /// The next step, given `got`, what the caller found for the last one ([`Got::Start`] the
    /// first time).
    #[inline]
    pub fn next(&mut self, got: Got) -> Do {
        // A refusal of the waiting room ends the plan; a possible winner of a sold-out
        // campaign is told `sold_out` instead, as everyone.
        let refused = |told: &mut Option<Answer>, a: Answer| Do::Answer(told.take().unwrap_or(a));
        match got {
            Got::Start => {}
            Got::Verdict(v) => self.verdict = Some(v),
            Got::Limited(Ok(())) if self.asked_replay => self.passed.replay_limit = true,
            Got::Limited(Ok(())) => self.passed.claim_limit = true,
            Got::Admission(Ok(admitted)) => self.passed.admission = Some(admitted),
            Got::Paced(Ok(())) => self.passed.pace = true,
            Got::Limited(Err(a)) | Got::Admission(Err(a)) | Got::Paced(Err(a)) => {
                return refused(&mut self.told, a)
            }
        }
        let step = self.decide().err().unwrap_or(Do::Forward);
        if let Do::Limit { action, .. } = step {
            self.asked_replay = action == Action::Replay;
        }
        step
    }

    /// The rules in order: `Err` with the step that stops them (an answer or a question).
    #[inline]
    fn decide(&mut self) -> Result<(), Do> {
        // 1. The waiting room's claim rate limit.
        if self.admit_rate.is_some() && !self.passed.claim_limit {
            return Err(Do::Limit {
                action: Action::Claim,
                with_address: true,
            });
        }
        // 2. The sold-out gate (its answer moved out, not copied, when given).
        if let Some(a) = self.gate.take() {
            let sold_out = self.entry.and_then(StatusEntry::state) == Some(CampaignState::SoldOut);
            if !sold_out {
                return Err(Do::Answer(a));
            }
            match self.verdict {
                None => {
                    self.gate = Some(a);
                    return Err(Do::AskWinners);
                }
                Some(Verdict::Winner) => self.told = Some(a),
                Some(Verdict::Loser) => return Err(Do::Answer(a)),
                Some(Verdict::Unknown) => return Err(Do::Answer(Answer::unavailable())),
            }
        }
        // 3. A sold-out variant.
        if self.told.is_none() {
            let (entry, fresh, body) = (self.entry, self.fresh, self.body);
            let variant = self.variant_gate.get_or_insert_with(|| {
                decide::claimed_variant(body)
                    .map_or(Gate::Forward, |v| decide::variant_gate(entry, fresh, &v))
            });
            if let Gate::Answer(a) = variant {
                if self.verdict.ok_or(Do::AskWinners)? == Verdict::Loser {
                    return Err(Do::Answer(a.clone()));
                }
            }
        }
        // 4. The waiting room's admission token, the replay limit, the pace.
        if let Some(rate) = self.admit_rate {
            let admitted = self.passed.admission.ok_or(Do::CheckAdmission)?;
            if admitted == Admitted::ReplayOnly && !self.passed.replay_limit {
                return Err(Do::Limit {
                    action: Action::Replay,
                    with_address: false,
                });
            }
            if !self.passed.pace {
                return Err(Do::Pace(rate));
            }
        }
        // 5. Forward.
        Ok(())
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
