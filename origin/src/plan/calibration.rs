//! The per-operation costs the capacity plan multiplies its rates by: a JSON object of the
//! shape of [`Calibration`] (every field required, unknown fields refused). The default
//! ([`Calibration::default`]) is `origin/src/plan/calibration.json`, compiled in; its figures
//! come from docs/BENCHMARKS.md (docs/SCALING.md, "Capacity plan", names the source of each and
//! which are estimates). `flashgate plan --calibration FILE` replaces it; `bench_origin
//! --write-calibration FILE` writes one from its measured legs.

use serde::{Deserialize, Serialize};

/// Smallest value of a field that must be above 0 (a rate or a latency): smaller ones would
/// make the plan's figures overflow.
pub const MIN_POSITIVE: f64 = 0.001;
/// Largest value of any cost, rate, count or size in a calibration.
pub const MAX_FIGURE: f64 = 1e9;

/// The compiled-in calibration's text.
pub const DEFAULT_JSON: &str = include_str!("calibration.json");

/// Per-operation costs. Units are in the field names: `core_us` = CPU time in
/// core-microseconds, `per_core_second` = requests one fully busy core answers per second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Calibration {
    /// Where the figures come from (free text, printed with the plan).
    pub source: String,
    /// Origin CPU per winning claim: HTTP exchange, token, gate take and confirm, reply.
    pub origin_core_us_per_winner: f64,
    /// Origin CPU per `sold_out` answered from the origin's memory (the fast path).
    pub origin_core_us_per_sold_out: f64,
    /// Origin CPU per other claim answer that reads Redis (a replay, `in_progress`).
    pub origin_core_us_per_other_claim_answer: f64,
    /// Origin CPU per report of the tickets an edge isolate issued (the request, its signature,
    /// one Redis script): an isolate sends one per campaign and second at most.
    pub origin_core_us_per_join_report: f64,
    /// Origin CPU per ticket in such a report (its signature checked again).
    pub origin_core_us_per_reported_ticket: f64,
    /// Origin CPU per presence report (the request, its signature, one Redis step).
    pub origin_core_us_per_presence_report: f64,
    /// Origin CPU per ticket in a presence report (its HMAC checked again).
    pub origin_core_us_per_presence_ticket: f64,
    /// Origin CPU per status fetch of an edge isolate (answered from the campaign cache).
    pub origin_core_us_per_status_fetch: f64,
    /// PostgreSQL CPU per durable claim (its share of the grouped commit included).
    pub postgres_core_us_per_claim: f64,
    /// Time of one grouped commit (fsync included), in milliseconds: the claims arriving at an
    /// origin meanwhile share the next commit.
    pub postgres_commit_latency_ms: f64,
    /// Most claims in one grouped commit (`FLASHGATE_COMMIT_BATCH_MAX`).
    pub commit_batch_max: u32,
    /// Redis commands per winner (key stamp, take script, confirm script).
    pub redis_ops_per_winner: f64,
    /// Redis commands per other claim answer reaching the origin's claim path.
    pub redis_ops_per_other_claim_answer: f64,
    /// Redis commands per report of issued tickets.
    pub redis_ops_per_join_report: f64,
    /// Redis commands per presence report.
    pub redis_ops_per_presence_report: f64,
    /// Redis commands per admitted claim beyond the winner's (the claims' pace bucket).
    pub redis_ops_per_admitted_claim: f64,
    /// Redis commands per second of one live waiting room (the admitting step every 100 ms).
    pub redis_ops_per_second_per_waiting_room: f64,
    /// Redis CPU per command.
    pub redis_core_us_per_op: f64,
    /// Redis CPU per ticket inside a report's script (its arrival key added to the line).
    pub redis_core_us_per_reported_ticket: f64,
    /// Redis CPU per ticket inside a presence report's script.
    pub redis_core_us_per_presence_ticket: f64,
    /// Redis memory per winner: her holder and her stored reply, in bytes.
    pub redis_bytes_per_winner: f64,
    /// Redis memory per claim reaching the gate for its key stamp (`fg:idem:…`), in bytes.
    pub redis_bytes_per_key_stamp: f64,
    /// Redis memory per joiner of a waiting room (her arrival key in `fg:{c}:q:keys`), in bytes.
    pub redis_bytes_per_queued_visitor: f64,
    /// Redis memory per ticket in the presence set (`fg:{c}:q:present`), in bytes.
    pub redis_bytes_per_present_ticket: f64,
    /// Redis memory of one campaign's fixed keys (gate counters, flags, queue counters), bytes.
    pub redis_bytes_per_campaign: f64,
    /// Edge: cached status GETs one core answers per second.
    pub edge_status_requests_per_core_second: f64,
    /// Edge: waiting-room polls one core answers per second.
    pub edge_polls_per_core_second: f64,
    /// Edge: joins one core answers per second (token, rate limit, the ticket signed).
    pub edge_joins_per_core_second: f64,
    /// Edge: `sold_out` claim answers one core gives per second.
    pub edge_sold_out_answers_per_core_second: f64,
    /// Edge: claims one core forwards to the origin per second.
    pub edge_claims_forwarded_per_core_second: f64,
    /// Edge → origin → edge, in milliseconds: after the sell-out an isolate keeps forwarding
    /// claims until the first `sold_out` answer comes back.
    pub edge_origin_round_trip_ms: f64,
    /// Share (0..=1) of the claims after the sell-out the edge still forwards (the winners
    /// filter's false positives and winners retrying).
    pub edge_forward_share_after_sold_out: f64,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration::parse(DEFAULT_JSON).expect("the compiled-in calibration is valid")
    }
}

impl Calibration {
    /// Parses and checks a calibration. Errors name the field: a JSON error (missing or unknown
    /// field, wrong type) or a value that is negative, not finite, or out of its range.
    pub fn parse(text: &str) -> Result<Self, String> {
        let c: Calibration = serde_json::from_str(text).map_err(|e| e.to_string())?;
        c.check()?;
        Ok(c)
    }

    /// Every cost finite and ≥ 0; capacities per core and latencies > 0; the share in 0..=1.
    pub fn check(&self) -> Result<(), String> {
        let positive = [
            (
                "edge_status_requests_per_core_second",
                self.edge_status_requests_per_core_second,
            ),
            (
                "edge_polls_per_core_second",
                self.edge_polls_per_core_second,
            ),
            (
                "edge_joins_per_core_second",
                self.edge_joins_per_core_second,
            ),
            (
                "edge_sold_out_answers_per_core_second",
                self.edge_sold_out_answers_per_core_second,
            ),
            (
                "edge_claims_forwarded_per_core_second",
                self.edge_claims_forwarded_per_core_second,
            ),
            (
                "postgres_commit_latency_ms",
                self.postgres_commit_latency_ms,
            ),
        ];
        for (name, v) in positive {
            if !(MIN_POSITIVE..=MAX_FIGURE).contains(&v) {
                return Err(format!(
                    "{name} must be between {MIN_POSITIVE} and {MAX_FIGURE}, not {v}"
                ));
            }
        }
        let non_negative = [
            ("origin_core_us_per_winner", self.origin_core_us_per_winner),
            (
                "origin_core_us_per_sold_out",
                self.origin_core_us_per_sold_out,
            ),
            (
                "origin_core_us_per_other_claim_answer",
                self.origin_core_us_per_other_claim_answer,
            ),
            (
                "origin_core_us_per_join_report",
                self.origin_core_us_per_join_report,
            ),
            (
                "origin_core_us_per_reported_ticket",
                self.origin_core_us_per_reported_ticket,
            ),
            (
                "origin_core_us_per_presence_report",
                self.origin_core_us_per_presence_report,
            ),
            (
                "origin_core_us_per_presence_ticket",
                self.origin_core_us_per_presence_ticket,
            ),
            (
                "origin_core_us_per_status_fetch",
                self.origin_core_us_per_status_fetch,
            ),
            (
                "postgres_core_us_per_claim",
                self.postgres_core_us_per_claim,
            ),
            ("redis_ops_per_winner", self.redis_ops_per_winner),
            (
                "redis_ops_per_other_claim_answer",
                self.redis_ops_per_other_claim_answer,
            ),
            ("redis_ops_per_join_report", self.redis_ops_per_join_report),
            (
                "redis_ops_per_presence_report",
                self.redis_ops_per_presence_report,
            ),
            (
                "redis_ops_per_admitted_claim",
                self.redis_ops_per_admitted_claim,
            ),
            (
                "redis_ops_per_second_per_waiting_room",
                self.redis_ops_per_second_per_waiting_room,
            ),
            ("redis_core_us_per_op", self.redis_core_us_per_op),
            (
                "redis_core_us_per_reported_ticket",
                self.redis_core_us_per_reported_ticket,
            ),
            (
                "redis_core_us_per_presence_ticket",
                self.redis_core_us_per_presence_ticket,
            ),
            ("redis_bytes_per_winner", self.redis_bytes_per_winner),
            ("redis_bytes_per_key_stamp", self.redis_bytes_per_key_stamp),
            (
                "redis_bytes_per_queued_visitor",
                self.redis_bytes_per_queued_visitor,
            ),
            (
                "redis_bytes_per_present_ticket",
                self.redis_bytes_per_present_ticket,
            ),
            ("redis_bytes_per_campaign", self.redis_bytes_per_campaign),
            ("edge_origin_round_trip_ms", self.edge_origin_round_trip_ms),
        ];
        for (name, v) in non_negative {
            if !(0.0..=MAX_FIGURE).contains(&v) {
                return Err(format!(
                    "{name} must be between 0 and {MAX_FIGURE}, not {v}"
                ));
            }
        }
        let share = self.edge_forward_share_after_sold_out;
        if !(0.0..=1.0).contains(&share) {
            return Err(format!(
                "edge_forward_share_after_sold_out must be between 0 and 1, not {share}"
            ));
        }
        if self.commit_batch_max == 0 {
            return Err("commit_batch_max must be at least 1".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_in_calibration_parses_and_round_trips() {
        let c = Calibration::default();
        assert_eq!(c.origin_core_us_per_winner, 120.0);
        assert_eq!(c.redis_bytes_per_queued_visitor, 117.7);
        let again = Calibration::parse(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(again, c);
    }

    #[test]
    fn a_bad_calibration_names_its_field() {
        let mut v: serde_json::Value = serde_json::from_str(DEFAULT_JSON).unwrap();
        v["origin_core_us_per_winner"] = (-1.0).into();
        let e = Calibration::parse(&v.to_string()).unwrap_err();
        assert!(e.contains("origin_core_us_per_winner"), "{e}");
        v["origin_core_us_per_winner"] = 1.0.into();
        v["edge_forward_share_after_sold_out"] = 1.5.into();
        let e = Calibration::parse(&v.to_string()).unwrap_err();
        assert!(e.contains("edge_forward_share_after_sold_out"), "{e}");
        v.as_object_mut()
            .unwrap()
            .remove("edge_forward_share_after_sold_out");
        let e = Calibration::parse(&v.to_string()).unwrap_err();
        assert!(e.contains("edge_forward_share_after_sold_out"), "{e}");
        assert!(Calibration::parse("{").is_err());
    }
}
