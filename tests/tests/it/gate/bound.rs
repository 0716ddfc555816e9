//! Every change of a gate's count goes through one bounded step (origin/src/gate/lua.rs,
//! `move`): a correction racing commits, a restock whose Redis write fails, and give-backs
//! racing each other and new claims never leave the gate allowing more than PostgreSQL.
//! Against a real origin (its background audit running), PostgreSQL and Redis, with truly
//! concurrent requests. While the crowd after the restock runs, a sampler reads PostgreSQL's
//! `remaining` and then the gate's: the gate's `remaining` may only be at or below it (takes
//! leave the gate before their commit; no unit comes back meanwhile). The repair times are
//! printed; only the documented bound is waited for.
//!
//! Redis refuses the restock's writes through an ACL user of the test's own, the origin's only:
//! `CONFIG SET maxmemory` would refuse every writer of the server, every other test's too.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flashgate_origin::db::Db;
use flashgate_origin::gate::{self, Keys};
use flashgate_shared::api::{ChangeRequest, ReleaseRequest};
use flashgate_tests::support::{
    assert_reconciled, count_replies, customers, eventually_timed, gate_remaining, own_services,
    redis_conn, redis_url, test_config, unique, OwnServices, TestOrigin,
};

/// The documented bound on repairing drift (docs/ARCHITECTURE.md, "Gate audit").
const REPAIRED_WITHIN: Duration = Duration::from_secs(5);

/// A running sampler: its stop flag, and its task, which returns every (gate, PostgreSQL) pair
/// where the gate allowed more than PostgreSQL, and how many samples it took.
type Sampler = (
    Arc<AtomicBool>,
    tokio::task::JoinHandle<(Vec<(i64, i64)>, usize)>,
);

/// Samples PostgreSQL's `remaining` of `c`, then the gate's, until stopped ([`Sampler`]).
fn sampler(o: &TestOrigin, c: &str) -> Sampler {
    let stop = Arc::new(AtomicBool::new(false));
    let (db, mut redis, c, flag) = (
        Db::from(o.db.clone()),
        o.origin.state.gate.clone(),
        c.to_string(),
        stop.clone(),
    );
    let task = tokio::spawn(async move {
        let (mut over, mut n) = (Vec::new(), 0);
        while !flag.load(Ordering::Relaxed) {
            let pg = gate::pg_remaining(&db, &c).await.unwrap().unwrap();
            let states = gate::shard_states(&mut redis, &c).await.unwrap_or_default();
            if states.iter().all(|s| s.loaded) && !states.is_empty() {
                let g: i64 = states.iter().map(|s| s.remaining).sum();
                if g > pg {
                    over.push((g, pg));
                }
                n += 1;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        (over, n)
    });
    (stop, task)
}

async fn stop_sampler(s: Sampler, what: &str) {
    s.0.store(true, Ordering::Relaxed);
    let (over, n) = s.1.await.unwrap();
    println!("{what}: {n} samples of PostgreSQL then the gate");
    assert!(n > 0, "{what}: the sampler saw the gate loaded");
    assert!(
        over.is_empty(),
        "{what}: the gate allowed more than PostgreSQL (gate, PostgreSQL): {over:?}"
    );
}

/// Waits up to the documented bound until the gate of `c` promises exactly PostgreSQL's
/// remaining (its `remaining` plus the takes in flight, none by then); prints how long.
async fn gate_agrees(o: &TestOrigin, c: &str) {
    eventually_timed(
        "the gate back in line with PostgreSQL",
        REPAIRED_WITHIN,
        || async {
            let pg = o.remaining(c).await;
            let mut r = o.origin.state.gate.clone();
            let states = gate::shard_states(&mut r, c).await.unwrap();
            let g: i64 = states.iter().map(|s| s.remaining + s.pending).sum();
            if g == pg {
                Ok(())
            } else {
                Err(format!("gate {g}, PostgreSQL {pg}"))
            }
        },
    )
    .await;
}

/// A Redis ACL user of this test's own (every command, key and channel), whose writes can be
/// refused and allowed again; removed when dropped.
struct WriteSwitch {
    name: String,
    password: String,
}

impl WriteSwitch {
    async fn new() -> Self {
        let s = WriteSwitch {
            name: unique("fg-bound"),
            password: unique("pw"),
        };
        s.acl(&["on", &format!(">{}", s.password), "~*", "&*", "+@all"])
            .await;
        s
    }

    /// `ACL SETUSER <name> <rules>`; it applies to the user's open connections at once.
    async fn acl(&self, rules: &[&str]) {
        let mut r = redis_conn().await;
        let _: () = redis::cmd("ACL")
            .arg("SETUSER")
            .arg(&self.name)
            .arg(rules)
            .query_async(&mut r)
            .await
            .unwrap();
    }

    /// `url` (a Redis URL), logged in as this user.
    fn url(&self, url: &str) -> String {
        let (scheme, rest) = url.split_once("://").expect("a Redis URL");
        let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
        format!("{scheme}://{}:{}@{host}", self.name, self.password)
    }
}

impl Drop for WriteSwitch {
    fn drop(&mut self) {
        let deleted = redis::Client::open(redis_url())
            .and_then(|c| c.get_connection())
            .and_then(|mut c| {
                redis::cmd("ACL")
                    .arg("DELUSER")
                    .arg(&self.name)
                    .query::<i64>(&mut c)
            });
        if let Err(e) = deleted {
            eprintln!("ACL DELUSER {}: {e}", self.name);
        }
    }
}

/// An origin on a fresh database and Redis database of their own (the returned services keep
/// them): the gate audit passes over every live campaign of its database each second, and by
/// the time these tests run the suite's database holds hundreds, which made a pass longer than
/// the bound waited for here.
async fn own_origin(tag: &str) -> (TestOrigin, OwnServices) {
    let own = own_services(test_config(), tag).await;
    (TestOrigin::start_with(own.config.clone()).await, own)
}

#[tokio::test]
async fn a_correction_racing_commits_lowers_the_gate_to_postgresql_and_no_further() {
    let (o, _own) = own_origin("bound_correction").await;
    for shards in [1, 4] {
        let c = o.sharded_campaign("sale", 40, shards).await;
        // The gate promises 30 units PostgreSQL does not have (a lost take), on shard 0.
        let mut r = o.origin.state.gate.clone();
        let _: () = redis::cmd("INCRBY")
            .arg(Keys::of(&c).remaining)
            .arg(30)
            .query_async(&mut r)
            .await
            .unwrap();
        // 120 customers at once: 40 commits race the corrections of the refused takes.
        let people = customers(120);
        let replies = o.stampede(&c, &people).await;
        let won = count_replies(&replies, 201, "claimed");
        assert_eq!(won, 40, "{shards} shards: every unit sold, none twice");
        assert_eq!(count_replies(&replies, 409, "sold_out"), 80);
        assert_eq!(o.remaining(&c).await, 0);
        gate_agrees(&o, &c).await;
        let report = assert_reconciled(&o, &c).await;
        println!("{shards} shards: drift {:?}", report.drift);
    }
    o.stop().await;
}

#[tokio::test]
async fn a_restock_whose_redis_write_fails_reaches_the_gate_by_the_audit_and_no_further() {
    let writes = WriteSwitch::new().await;
    let own = own_services(test_config(), "bound_restock").await;
    let mut config = own.config.clone();
    config.redis_url = writes.url(&own.config.redis_url);
    let o = TestOrigin::start_with(config).await;
    let c = o.campaign("sale", 10).await;
    let first = customers(10);
    assert_eq!(
        count_replies(&o.stampede(&c, &first).await, 201, "claimed"),
        10
    );
    let sampling = sampler(&o, &c);
    // Redis refuses the origin's writes while a manager restocks by 5: PostgreSQL has them,
    // the gate not.
    writes.acl(&["-@write"]).await;
    let (status, reply) = o.change(&c, ChangeRequest::restock(5)).await;
    writes.acl(&["+@all"]).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["gate"], "pending", "{reply}");
    let restocked = Instant::now();
    assert_eq!(o.remaining(&c).await, 5);
    assert_eq!(gate_remaining(&o, &c).await, Some(0), "the write failed");
    // A crowd keeps trying while the audit repairs: 5 more win, never a sixth.
    let crowd = customers(30);
    let tries = async {
        let (mut won, mut all_sold) = (0, None);
        while restocked.elapsed() < REPAIRED_WITHIN + Duration::from_secs(1) {
            let batch: Vec<String> = crowd
                .iter()
                .map(|p| format!("{p}-{}", unique("t")))
                .collect();
            won += count_replies(&o.stampede(&c, &batch[..6]).await, 201, "claimed");
            if won >= 5 && all_sold.is_none() {
                all_sold = Some(restocked.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (won, all_sold)
    };
    let (won, all_sold) = tries.await;
    println!("the restock's 5 units were all sold {all_sold:?} after the refused write");
    assert_eq!(won, 5, "the restocked units, sold once each");
    stop_sampler(sampling, "restock with a failed Redis write").await;
    let report = assert_reconciled(&o, &c).await;
    assert!(
        report.drift.raised >= 5,
        "the audit's repair is reported: {:?}",
        report.drift
    );
    assert!(report.drift.last_repair_at.is_some());
    o.stop().await;
}

#[tokio::test]
async fn give_backs_racing_each_other_and_new_claims_never_lift_the_gate_above_postgresql() {
    let (o, _own) = own_origin("bound_give_backs").await;
    let c = o.held_sale(20, 600).await;
    let holders = o.winners(&c, 20).await;
    // Every hold released twice at once, while 40 new customers claim at the same time.
    let token = o.config.service_token.expose().to_string();
    let release = |id: String| {
        let (o, token) = (&o, token.clone());
        async move {
            let body = ReleaseRequest {
                reason: Some("customer_cancelled".into()),
            };
            o.claim_action(&id, "release", &token, &body).await.0
        }
    };
    let releases = futures::future::join_all(
        holders
            .iter()
            .flat_map(|h| {
                let id = h["id"].as_str().unwrap().to_string();
                [id.clone(), id]
            })
            .map(release),
    );
    let crowd = customers(40);
    let (released, replies) = tokio::join!(releases, o.stampede(&c, &crowd));
    assert!(released.iter().all(|s| *s == 200), "{released:?}");
    let won = count_replies(&replies, 201, "claimed");
    assert!(won <= 20, "{won} new claims for 20 units");
    // A give-back PostgreSQL never freed a unit for (a forged holder) moves nothing.
    let mut g = o.origin.state.gate.clone();
    let forged = unique("mallory");
    let pg = o.remaining(&c).await;
    let _: () = redis::cmd("HSET")
        .arg(Keys::of(&c).holders)
        .arg(&forged)
        .arg("c_forged")
        .query_async(&mut g)
        .await
        .unwrap();
    let db = Db::from(o.db.clone());
    let matched = gate::give_back_bounded(&mut g, &db, &c, &forged, "c_forged", None)
        .await
        .unwrap();
    assert!(matched, "the holder was hers");
    let after = gate::shard_states(&mut g, &c).await.unwrap()[0].remaining;
    assert!(
        after <= pg,
        "gate {after} after a forged give-back, PostgreSQL {pg}"
    );
    // The rest of the units go to a second crowd; then nothing is left anywhere.
    let more = customers(40);
    let won2 = count_replies(&o.stampede(&c, &more).await, 201, "claimed");
    assert_eq!(won + won2, 20, "every released unit sold once");
    gate_agrees(&o, &c).await;
    assert_reconciled(&o, &c).await;
    o.stop().await;
}
