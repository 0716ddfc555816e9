//! A published draw against a real origin over HTTP, real PostgreSQL and real Redis: it stays
//! what was drawn after a restock (which admits nobody more).

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
