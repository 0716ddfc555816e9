//! When an isolate's reporter of one campaign sends, in plain Rust: the schedule shared by the
//! reports of issued tickets ([`crate::joins`]) and of the edge's own answers
//! ([`crate::answers`]). A reporter runs after the answers (`waitUntil`), sends at most one
//! report every [`REPORT_EVERY_MS`], and stops when nothing is pending; the next thing to
//! report starts another. One that ran for [`REPORTER_LIFE_MS`] is replaced (a task carried by
//! `waitUntil` may be cut off after about 30 s).

use flashgate_shared::queue::presence::REPORT_EVERY_MS;

/// How long one reporter runs at most, ms: a task carried by `waitUntil` may be cut off after
/// about 30 s, so something to report after this starts a new reporter (the old one stops at
/// its next step).
pub const REPORTER_LIFE_MS: i64 = 20_000;

/// What the reporter of one campaign does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next<R> {
    /// Send this report now.
    Send(R),
    /// Wait this many ms, then ask again.
    Wait(i64),
    /// Nothing pending: the reporter stops (the next thing to report starts another).
    Stop,
}

/// One campaign's reporter: when it last sent, and the running reporter's number and start.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Schedule {
    last_sent_ms: Option<i64>,
    reporter: Option<(u64, i64)>,
}

impl Schedule {
    /// Something to report came in at `now_ms`: the number of a reporter to start (taken from
    /// `counter`) when none runs or the one running is older than [`REPORTER_LIFE_MS`]; the
    /// caller starts it.
    pub fn wake(&mut self, counter: &mut u64, now_ms: i64) -> Option<u64> {
        if self
            .reporter
            .is_some_and(|(_, since)| now_ms.saturating_sub(since) < REPORTER_LIFE_MS)
        {
            return None;
        }
        *counter += 1;
        self.reporter = Some((*counter, now_ms));
        Some(*counter)
    }

    /// True while a reporter runs.
    pub fn running(&self) -> bool {
        self.reporter.is_some()
    }

    /// Reporter `reporter`'s turn at `now_ms`, with something `pending` or not: `Ok(())` to
    /// send now (noted as the last send), else the [`Next`] to return ([`Next::Stop`] when
    /// another reporter took over, or nothing is pending: then none runs).
    pub fn turn<R>(&mut self, reporter: u64, pending: bool, now_ms: i64) -> Result<(), Next<R>> {
        if self.reporter.map(|(n, _)| n) != Some(reporter) {
            return Err(Next::Stop);
        }
        if !pending {
            self.reporter = None;
            return Err(Next::Stop);
        }
        if let Some(at) = self.last_sent_ms {
            let wait = at.saturating_add(REPORT_EVERY_MS).saturating_sub(now_ms);
            if wait > 0 {
                return Err(Next::Wait(wait));
            }
        }
        self.last_sent_ms = Some(now_ms);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reporter_sends_once_a_second_until_nothing_is_pending() {
        let mut s = Schedule::default();
        let mut counter = 0;
        let r1 = s.wake(&mut counter, 0).expect("none runs: start one");
        assert_eq!(s.wake(&mut counter, 10), None);
        assert_eq!(s.turn::<()>(r1, true, 0), Ok(()));
        assert_eq!(s.turn::<()>(r1, true, 400), Err(Next::Wait(600)));
        assert_eq!(s.turn::<()>(r1, true, 1_000), Ok(()));
        assert_eq!(s.turn::<()>(r1, false, 1_500), Err(Next::Stop));
        assert!(!s.running());
        let r2 = s.wake(&mut counter, 1_600).expect("stopped: start another");
        assert_eq!(s.turn::<()>(r2, true, 1_600), Err(Next::Wait(400)));
        let r3 = s
            .wake(&mut counter, 1_600 + REPORTER_LIFE_MS)
            .expect("past its life: replaced");
        assert_eq!(s.turn::<()>(r2, true, 30_000), Err(Next::Stop));
        assert_eq!(s.turn::<()>(r3, true, 30_000), Ok(()));
    }
}
