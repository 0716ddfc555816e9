//! Each gate script (origin/src/gate/lua.rs) run directly against a real Redis (one server, or
//! the cluster when `REDIS_URL` names one), through the gate functions that call it, on gates
//! set up by hand: take at zero, give-back exactly once, adjust across zero, the take
//! across shards (correct-down reads PostgreSQL: `gate_shards.rs`), and a claim's idempotency
//! record begun with the take and finished with the confirmation, each in one script whose keys
//! share one hash tag (one Redis Cluster slot).

use flashgate_origin::gate::{self, Begun, Gate, Keys, Take};
use flashgate_origin::idempotency;
use flashgate_tests::support::{redis_conn, unique};

/// Writes a loaded gate of `remaining` units per shard for a new campaign; returns its id.
async fn gate_of(r: &mut Gate, remaining: &[i64]) -> String {
    let c = unique("lua");
    for (s, units) in (0u16..).zip(remaining) {
        let k = Keys::shard(&c, s);
        let _: () = redis::pipe()
            .set(&k.remaining, units)
            .set(&k.loaded, "test")
            .query_async(r)
            .await
            .unwrap();
    }
    let _: () = redis::cmd("SET")
        .arg(Keys::of(&c).shards)
        .arg(remaining.len())
        .query_async(r)
        .await
        .unwrap();
    c
}

async fn get(r: &mut Gate, key: &str) -> Option<i64> {
    redis::cmd("GET").arg(key).query_async(r).await.unwrap()
}

async fn remaining(r: &mut Gate, c: &str) -> Vec<i64> {
    gate::shard_states(r, c)
        .await
        .unwrap()
        .iter()
        .map(|s| s.remaining)
        .collect()
}

/// A gate of one shard and one unit, taken by "ana": the handle, the campaign, her token.
async fn one_unit_taken_by_ana() -> (Gate, String, String) {
    let mut r = Gate::new(redis_conn().await);
    let c = gate_of(&mut r, &[1]).await;
    let t = gate::pending_token();
    let took = gate::take(&mut r, &c, "ana", &t).await.unwrap();
    assert_eq!(took, Take::Taken);
    (r, c, t)
}

#[tokio::test]
async fn take_at_zero_sets_the_flag_once_and_refuses() {
    let (mut r, c, t) = one_unit_taken_by_ana().await;
    let k = Keys::of(&c);
    assert_eq!(remaining(&mut r, &c).await, vec![0]);
    // The take of the last unit set the flag.
    let g = get(&mut r, &k.sold_out)
        .await
        .expect("flag set on the last unit");
    let again = gate::take(&mut r, &c, "ana", &gate::pending_token()).await;
    assert_eq!(again.unwrap(), Take::AlreadyHolds(t.clone()));
    let bob = gate::take(&mut r, &c, "bob", &gate::pending_token()).await;
    assert_eq!(bob.unwrap(), Take::SoldOut { generation: g });
    assert_eq!(gate::holder(&mut r, &c, "bob").await.unwrap(), None);
    assert_eq!(remaining(&mut r, &c).await, vec![0]);
    // Confirm turns her pending holder into the claim id.
    assert!(gate::confirm(&mut r, &c, "ana", &t, "claim-1", None)
        .await
        .unwrap());
    assert_eq!(
        gate::holder(&mut r, &c, "ana").await.unwrap().as_deref(),
        Some("claim-1")
    );
    // Not loaded: refused, nothing written.
    let _: () = redis::cmd("DEL")
        .arg(&k.loaded)
        .query_async(&mut r)
        .await
        .unwrap();
    let carl = gate::take(&mut r, &c, "carl", &gate::pending_token()).await;
    assert_eq!(carl.unwrap(), Take::NotLoaded);
    assert_eq!(gate::holder(&mut r, &c, "carl").await.unwrap(), None);
}

#[tokio::test]
async fn give_back_returns_a_unit_exactly_once_and_clears_the_flag() {
    let (mut r, c, t) = one_unit_taken_by_ana().await;
    let k = Keys::of(&c);
    assert!(get(&mut r, &k.sold_out).await.is_some());
    assert!(!gate::give_back(&mut r, &c, "ana", "p:other", None, 1)
        .await
        .unwrap());
    assert_eq!(remaining(&mut r, &c).await, vec![0]);
    assert!(gate::give_back(&mut r, &c, "ana", &t, None, 1)
        .await
        .unwrap());
    assert!(!gate::give_back(&mut r, &c, "ana", &t, None, 1)
        .await
        .unwrap());
    assert_eq!(remaining(&mut r, &c).await, vec![1]);
    assert_eq!(get(&mut r, &k.sold_out).await, None);
    assert_eq!(gate::holder(&mut r, &c, "ana").await.unwrap(), None);
    let pending: i64 = redis::cmd("ZCARD")
        .arg(&k.pending)
        .query_async(&mut r)
        .await
        .unwrap();
    assert_eq!(pending, 0);
}

#[tokio::test]
async fn adjust_across_zero_moves_the_flag_with_a_new_generation() {
    for shards in [1usize, 4] {
        let mut r = Gate::new(redis_conn().await);
        let c = gate_of(&mut r, &vec![0; shards]).await;
        let k = Keys::of(&c);
        let t = gate::pending_token();
        let first = gate::take(&mut r, &c, "ana", &t).await.unwrap();
        let Take::SoldOut { generation: g1 } = first else {
            panic!("{shards} shards: {first:?}");
        };
        assert_eq!(gate::holder(&mut r, &c, "ana").await.unwrap(), None);
        assert_eq!(gate::adjust(&mut r, &c, 3, 3).await.unwrap(), Some(3));
        assert_eq!(get(&mut r, &k.sold_out).await, None, "{shards} shards");
        assert_eq!(remaining(&mut r, &c).await.iter().sum::<i64>(), 3);
        // Down by more than there is: zero, flag set with a newer generation.
        assert_eq!(gate::adjust(&mut r, &c, -5, 0).await.unwrap(), Some(0));
        let g2 = get(&mut r, &k.sold_out).await.expect("flag at zero");
        assert!(g2 > g1, "{shards} shards: generation {g2} after {g1}");
        assert!(remaining(&mut r, &c).await.iter().all(|u| *u == 0));
        let _: () = redis::cmd("DEL")
            .arg(&k.loaded)
            .query_async(&mut r)
            .await
            .unwrap();
        assert_eq!(gate::adjust(&mut r, &c, 1, 1).await.unwrap(), None);
    }
}

#[tokio::test]
async fn no_give_back_or_raise_takes_the_gate_above_its_bound() {
    for shards in [1usize, 4] {
        let mut r = Gate::new(redis_conn().await);
        let c = gate_of(&mut r, &vec![1; shards]).await;
        // PostgreSQL has as many units as the gate: a stock change of +5 whose PostgreSQL
        // remaining is only 3 more raises the gate to that bound, not beyond.
        let n = shards as i64;
        assert_eq!(
            gate::adjust(&mut r, &c, 5, n + 3).await.unwrap(),
            Some(n + 3),
            "{shards} shards"
        );
        // Already at the bound: a raise moves nothing, and never lowers.
        assert_eq!(gate::adjust(&mut r, &c, 2, n).await.unwrap(), Some(n + 3));
        // A give-back whose holder matches but whose unit PostgreSQL does not have (a bound
        // already reached on her shard) drops her holder and returns nothing.
        let t = gate::pending_token();
        assert_eq!(
            gate::take(&mut r, &c, "ana", &t).await.unwrap(),
            Take::Taken
        );
        let before = remaining(&mut r, &c).await;
        let own = usize::from(gate::bucket("ana", shards as u16));
        assert!(gate::give_back(&mut r, &c, "ana", &t, None, before[own])
            .await
            .unwrap());
        assert_eq!(remaining(&mut r, &c).await, before, "{shards} shards");
        assert_eq!(gate::holder(&mut r, &c, "ana").await.unwrap(), None);
        // Moves down are never cut: to zero, not below.
        assert_eq!(gate::adjust(&mut r, &c, -100, 0).await.unwrap(), Some(0));
    }
}

#[tokio::test]
async fn a_take_finds_the_last_unit_on_any_shard_and_undoes_her_entry_when_none_is_left() {
    let mut r = Gate::new(redis_conn().await);
    // 8 shards, one unit, on the last shard.
    let mut units = vec![0; 8];
    units[7] = 1;
    let c = gate_of(&mut r, &units).await;
    let k = Keys::of(&c);
    // A customer whose own shard is not shard 7.
    let ana = (0..)
        .map(|i| format!("ana{i}"))
        .find(|n| gate::bucket(n, 8) != 7)
        .unwrap();
    let t = gate::pending_token();
    assert_eq!(gate::take(&mut r, &c, &ana, &t).await.unwrap(), Take::Taken);
    assert_eq!(remaining(&mut r, &c).await, vec![0; 8]);
    assert_eq!(
        gate::holder(&mut r, &c, &ana).await.unwrap(),
        Some(t.clone())
    );
    // Nothing left anywhere: sold out, the flag is set, her entry undone.
    let bob = gate::take(&mut r, &c, "bob", &gate::pending_token())
        .await
        .unwrap();
    let g = get(&mut r, &k.sold_out)
        .await
        .expect("flag set when every shard is empty");
    assert_eq!(bob, Take::SoldOut { generation: g });
    assert_eq!(gate::holder(&mut r, &c, "bob").await.unwrap(), None);
    let states = gate::shard_states(&mut r, &c).await.unwrap();
    assert_eq!(
        states.iter().map(|s| s.pending).sum::<i64>(),
        1,
        "only ana's take pends"
    );
    // Her unit goes back to her own shard, once; the flag clears; bob can take it.
    assert!(gate::give_back(&mut r, &c, &ana, &t, None, 1)
        .await
        .unwrap());
    assert!(!gate::give_back(&mut r, &c, &ana, &t, None, 1)
        .await
        .unwrap());
    let mut expect = vec![0; 8];
    expect[usize::from(gate::bucket(&ana, 8))] = 1;
    assert_eq!(remaining(&mut r, &c).await, expect);
    assert_eq!(get(&mut r, &k.sold_out).await, None);
    let bob = gate::take(&mut r, &c, "bob", &gate::pending_token())
        .await
        .unwrap();
    assert_eq!(bob, Take::Taken);
}

#[tokio::test]
async fn the_last_unit_is_found_on_any_of_256_shards() {
    let mut r = Gate::new(redis_conn().await);
    for round in 0..5u16 {
        // One unit, on a shard that is not the customer's own.
        let who = format!("solo-{round}");
        let own = gate::bucket(&who, 256);
        let at = (own + 1 + round * 37) % 256;
        let mut units = vec![0; 256];
        units[usize::from(at)] = 1;
        let c = gate_of(&mut r, &units).await;
        let took = gate::take(&mut r, &c, &who, &gate::pending_token()).await;
        assert_eq!(
            took.unwrap(),
            Take::Taken,
            "round {round}: unit on shard {at}"
        );
        assert!(remaining(&mut r, &c).await.iter().all(|u| *u == 0));
    }
}

/// The hash tag of a Redis key (the part between the first `{` and the next `}`), which alone
/// decides its Redis Cluster slot; the whole key when it has none.
fn hash_tag(key: &str) -> &str {
    key.split_once('{')
        .and_then(|(_, rest)| rest.split_once('}'))
        .map(|(tag, _)| tag)
        .filter(|tag| !tag.is_empty())
        .unwrap_or(key)
}

async fn get_bytes(r: &mut Gate, key: &str) -> Option<Vec<u8>> {
    redis::cmd("GET").arg(key).query_async(r).await.unwrap()
}

/// The seconds `key` has left to live (`TTL`: -1 without expiry, -2 when it is gone).
async fn ttl_seconds(r: &mut Gate, key: &str) -> i64 {
    redis::cmd("TTL").arg(key).query_async(r).await.unwrap()
}

/// [`gate::begin_take`] on the customer's own shard, found first as the claim path does.
async fn begin(
    r: &mut Gate,
    c: &str,
    customer: &str,
    token: &str,
    key: &str,
    fp: &str,
    ttl_seconds: u64,
) -> redis::RedisResult<Begun> {
    let own = gate::own_shard(r, c, customer).await?.expect("loaded");
    gate::begin_take(r, c, &own, customer, token, key, fp, ttl_seconds).await
}

#[tokio::test]
async fn begin_take_writes_the_record_with_the_take_and_confirm_finishes_it() {
    let mut r = Gate::new(redis_conn().await);
    let c = gate_of(&mut r, &[1]).await;
    let k = Keys::of(&c);
    let (t, fresh) = (gate::pending_token(), gate::pending_token());
    let begun = begin(&mut r, &c, "ana", &t, "key-1", "fp-a", 30).await;
    assert_eq!(begun.unwrap(), Begun::Took(Take::Taken));
    let record = gate::record_key(&mut r, &c, "ana", "key-1")
        .await
        .unwrap()
        .expect("loaded");
    assert_eq!(record, k.idempotency("ana", "key-1"));
    assert_eq!(get_bytes(&mut r, &record).await.unwrap(), b"fp-a\npending");
    let ttl = ttl_seconds(&mut r, &record).await;
    assert!(
        (1..=30).contains(&ttl),
        "pending record lives 30 s, has {ttl}"
    );
    assert_eq!(remaining(&mut r, &c).await, vec![0]);
    // The same key again: the record, nothing taken or written.
    let again = begin(&mut r, &c, "ana", &fresh, "key-1", "fp-a", 30);
    assert_eq!(
        again.await.unwrap(),
        Begun::Existing(b"fp-a\npending".to_vec())
    );
    assert_eq!(
        gate::holder(&mut r, &c, "ana").await.unwrap(),
        Some(t.clone())
    );
    // The confirmation writes the final record in the same script.
    let done = b"fp-a\n201\n{}".as_slice();
    let confirmed = gate::confirm(&mut r, &c, "ana", &t, "claim-1", Some((&record, done, 600)));
    assert!(confirmed.await.unwrap());
    assert_eq!(get_bytes(&mut r, &record).await.unwrap(), done);
    let ttl = ttl_seconds(&mut r, &record).await;
    assert!(
        ttl > 30 && ttl <= 600,
        "final record lives 600 s, has {ttl}"
    );
    assert_eq!(
        gate::holder(&mut r, &c, "ana").await.unwrap().as_deref(),
        Some("claim-1")
    );
    // A stale confirmation (another token) still writes the record, not the holder.
    let stale = gate::confirm(
        &mut r,
        &c,
        "ana",
        "p:old",
        "claim-2",
        Some((&record, done, 600)),
    );
    assert!(!stale.await.unwrap());
    assert_eq!(
        gate::holder(&mut r, &c, "ana").await.unwrap().as_deref(),
        Some("claim-1")
    );
    // Sold out: bob's record is written with the flag's answer to come; no unit.
    let bob = begin(&mut r, &c, "bob", &fresh, "k", "fp-b", 30).await;
    let g = get(&mut r, &k.sold_out).await.expect("flag");
    assert_eq!(bob.unwrap(), Begun::Took(Take::SoldOut { generation: g }));
    assert_eq!(
        get_bytes(&mut r, &k.idempotency("bob", "k")).await.unwrap(),
        b"fp-b\npending"
    );
    // Not loaded: nothing written, not even the record.
    let _: () = redis::cmd("DEL")
        .arg(&k.loaded)
        .query_async(&mut r)
        .await
        .unwrap();
    let carl = begin(&mut r, &c, "carl", &fresh, "k", "fp-c", 30);
    assert_eq!(carl.await.unwrap(), Begun::Took(Take::NotLoaded));
    assert_eq!(get_bytes(&mut r, &k.idempotency("carl", "k")).await, None);
}

#[tokio::test]
async fn begin_take_keeps_her_record_on_her_own_shard_and_takes_from_any() {
    let mut r = Gate::new(redis_conn().await);
    // 8 shards, one unit, on a shard that is not hers.
    let ana = (0..)
        .map(|i| format!("ana{i}"))
        .find(|n| gate::bucket(n, 8) != 3)
        .unwrap();
    let mut units = vec![0; 8];
    units[3] = 1;
    let c = gate_of(&mut r, &units).await;
    let own = Keys::shard(&c, gate::bucket(&ana, 8));
    let t = gate::pending_token();
    let begun = begin(&mut r, &c, &ana, &t, "k", "fp", 30).await;
    assert_eq!(begun.unwrap(), Begun::Took(Take::Taken));
    let record = gate::record_key(&mut r, &c, &ana, "k")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(record, own.idempotency(&ana, "k"));
    assert_eq!(get_bytes(&mut r, &record).await.unwrap(), b"fp\npending");
    assert_eq!(remaining(&mut r, &c).await, vec![0; 8]);
    // One slot per script: the record shares the hash tag of every key of her shard.
    for key in [&own.loaded, &own.remaining, &own.holders, &own.pending] {
        assert_eq!(hash_tag(key), hash_tag(&record), "{key} vs {record}");
    }
    let one = Keys::of(&c);
    for key in [&one.sold_out, &one.sold_out_gen, &one.loaded] {
        assert_eq!(hash_tag(key), hash_tag(&one.idempotency("x", "k")), "{key}");
    }
    let common = idempotency::record_key("ana", "k");
    assert_eq!(hash_tag(&common), common, "the common key stamp has no tag");
}

#[tokio::test]
async fn a_key_stamped_by_one_request_is_refused_to_another() {
    let r = redis_conn().await;
    let mut other = r.clone();
    let customer = unique("stamp");
    let own = |fp: &'static str| {
        let (mut r, customer) = (r.clone(), customer.clone());
        async move {
            idempotency::own_key(&mut r, &customer, "k", fp, 60)
                .await
                .unwrap()
        }
    };
    assert!(own("fp-a").await, "first use");
    assert!(own("fp-a").await, "the same request again");
    assert!(!own("fp-b").await, "another campaign or body");
    idempotency::abandon(&mut other, &customer, "k")
        .await
        .unwrap();
    assert!(own("fp-b").await, "free again once abandoned");
}
