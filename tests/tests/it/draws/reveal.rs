//! A published draw against a real origin over HTTP, real PostgreSQL and real Redis: it stays
//! what was drawn after a restock (which admits nobody more), and its two verifiers
//! (`flashgate draw verify` and the Python of docs/DRAWS.md) refuse a status whose commitment
//! is not its result's, and say so of a draw not drawn yet.

use flashgate_shared::draw::{self, DrawResult};
use flashgate_tests::support::draws::{
    enter, get, open_draw, origin, patch, run_now, status, verify_both,
};
use flashgate_tests::support::unique;
use serde_json::json;

#[tokio::test]
async fn a_restock_after_the_draw_leaves_the_published_result_as_drawn() {
    let o = origin().await;
    let c = open_draw(&o, "restock", 2).await;
    for i in 0..6 {
        assert_eq!(enter(&o, &c, &format!("{c}-p{i}")).await.0, 201);
    }
    let (s, drawn) = run_now(&o, &c).await;
    assert_eq!(s, 200, "{drawn}");
    let (_, published) = status(&o, &c).await;
    let (s, b) = patch(&o, &c, json!({"action": "restock", "add": 3})).await;
    assert_eq!((s, &b["campaign"]["stock"]), (200, &json!(5)), "{b}");
    let (s, after) = status(&o, &c).await;
    assert_eq!(s, 200, "{after}");
    assert_eq!(after["result"], published["result"], "{after}");
    let result: DrawResult = serde_json::from_value(after["result"].clone()).unwrap();
    assert_eq!((result.stock, result.winners.len()), (2, 2));
    assert_eq!(draw::verify(&result), Ok(()));
    // Both verifiers take it.
    let dir = std::env::temp_dir().join(unique("reveal"));
    std::fs::create_dir_all(&dir).unwrap();
    let [cli, py] = verify_both(&dir, &after);
    assert_eq!((cli.0, py.0), (0, 0), "{cli:?} {py:?}");
    let _ = std::fs::remove_dir_all(&dir);
    // The first of the waitlist is still waiting: the restock admitted nobody.
    let mine = format!("/api/v1/campaigns/{c}/draw/entries/mine");
    let next = &result.waitlist[0];
    let (s, b) = get(&o, &mine, Some(&o.token(next))).await;
    assert_eq!(
        (s, b["outcome"].as_str(), b["place"].as_i64()),
        (200, Some("waitlisted"), Some(3)),
        "{b}"
    );
    o.stop().await;
}

#[tokio::test]
async fn the_verifiers_refuse_a_status_whose_commitment_is_not_the_results() {
    let o = origin().await;
    let c = open_draw(&o, "verify", 1).await;
    let dir = std::env::temp_dir().join(unique("verify"));
    std::fs::create_dir_all(&dir).unwrap();
    // Not drawn yet: both say so, as a usage error.
    let (_, open) = status(&o, &c).await;
    let [cli, py] = verify_both(&dir, &open);
    println!("not drawn: {}{}", cli.2, py.2);
    for (code, _, err) in [&cli, &py] {
        assert_eq!(*code, 2, "{err}");
        assert!(err.contains("has no result yet (state open)"), "{err}");
    }
    for p in ["ana", "bea"] {
        assert_eq!(enter(&o, &c, p).await.0, 201);
    }
    assert_eq!(run_now(&o, &c).await.0, 200);
    let (_, published) = status(&o, &c).await;
    let [cli, py] = verify_both(&dir, &published);
    assert_eq!((cli.0, py.0), (0, 0), "{cli:?} {py:?}");
    // A top-level commitment that is not the result's fails both.
    let mut forged = published.clone();
    forged["commitment"] = json!("0".repeat(64));
    let [cli, py] = verify_both(&dir, &forged);
    println!("forged commitment: {}{}", cli.2, py.2);
    for (code, out, err) in [&cli, &py] {
        assert_eq!(*code, 1, "{out}{err}");
        assert!(
            err.contains("the status's commitment does not match the result's"),
            "{err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    o.stop().await;
}
