//! Paging: `listSessions` pages newest first with `limit` and an opaque
//! cursor that only its principal can use; `fetchTurns` refuses cursors it
//! never issued. The official client over a real socket, no runtime.

use crate::support;

use ahp::Client;
use ahp_bridge_join::config::{Role, Visibility};
use serde_json::{json, Value};
use support::*;

async fn list(c: &Client, params: Value) -> Result<Value, ahp::ClientError> {
    let mut p = json!({"channel": "ahp-root://"});
    p.as_object_mut()
        .unwrap()
        .extend(params.as_object().unwrap().clone());
    c.request::<_, Value>("listSessions", p).await
}

fn uris(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["resource"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn list_sessions_pages_newest_first() {
    let r = start_host(test_config()).await;
    let c = initialized(&r, "pager").await;
    for i in 0..25 {
        create_session(&c, &format!("ahp-session:/s{i:02}"), None).await;
    }
    // A change makes s05 the most recently modified (the dispatch is applied
    // before the next request on this connection is read).
    dispatch_raw(
        &c,
        "ahp-session:/s05",
        1,
        json!({"type": "session/titleChanged", "title": "touched"}),
    )
    .await;
    let mut want: Vec<String> = vec!["ahp-session:/s05".into()];
    want.extend(
        (0..25)
            .rev()
            .filter(|i| *i != 5)
            .map(|i| format!("ahp-session:/s{i:02}")),
    );

    let mut got = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = Vec::new();
    for _ in 0..3 {
        let mut p = json!({"limit": 10});
        if let Some(c) = &cursor {
            p["cursor"] = json!(c);
        }
        let page = list(&c, p).await.expect("listSessions");
        pages.push(uris(&page).len());
        got.extend(uris(&page));
        cursor = page["nextCursor"].as_str().map(String::from);
    }
    assert_eq!(pages, vec![10, 10, 5]);
    assert_eq!(cursor, None, "the third page is the last");
    assert_eq!(got, want, "newest first, nothing twice, nothing lost");

    // Without `limit`, one page of everything.
    let all = list(&c, json!({})).await.unwrap();
    assert_eq!(uris(&all), want);
    assert!(all.get("nextCursor").is_none());

    // A page boundary holds while sessions change: the first page's cursor
    // still yields the same next page after a new session arrives on top.
    let first = list(&c, json!({"limit": 10})).await.unwrap();
    let cur = first["nextCursor"].as_str().unwrap().to_owned();
    create_session(&c, "ahp-session:/late", None).await;
    let second = list(&c, json!({"limit": 10, "cursor": cur})).await.unwrap();
    assert_eq!(uris(&second), want[10..20].to_vec());

    // Bad inputs: exactly InvalidParams.
    for bad in [
        json!({"cursor": "bogus"}),
        json!({"cursor": ""}),
        json!({"cursor": 7}),
        json!({"limit": 0}),
        json!({"limit": "10"}),
    ] {
        let e = list(&c, bad.clone()).await.unwrap_err();
        assert_eq!(rpc_code(&e), -32602, "{bad}");
    }
    let e = list(&c, json!({"cursor": "bogus"})).await.unwrap_err();
    assert!(e.to_string().contains("cursor"), "{e}");
}

#[tokio::test]
async fn fetch_turns_rejects_cursors_it_never_issued() {
    let r = start_host(test_config()).await;
    let c = initialized(&r, "turns").await;
    create_session(&c, "ahp-session:/t", None).await;
    let ok: Value = c
        .request("fetchTurns", json!({"channel": chat_of("ahp-session:/t")}))
        .await
        .expect("no cursor: nothing to load");
    assert_eq!(ok, json!({}));
    for bogus in [json!("bogus"), json!(""), json!(12)] {
        let e = c
            .request::<_, Value>(
                "fetchTurns",
                json!({"channel": chat_of("ahp-session:/t"), "cursor": bogus}),
            )
            .await
            .unwrap_err();
        assert_eq!(rpc_code(&e), -32602, "{bogus}");
    }
    // An unknown chat is not found, cursor or not.
    let e = c
        .request::<_, Value>(
            "fetchTurns",
            json!({"channel": chat_of("ahp-session:/nope"), "cursor": "x"}),
        )
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&e), -32001);
}

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";

#[tokio::test]
async fn a_cursor_is_its_principals_alone() {
    let mut cfg = test_config();
    cfg.server.session_visibility = Visibility::Owner;
    let both = [Role::Observe, Role::Participate];
    cfg.principals = vec![
        token_principal("alice", ALICE, &both),
        token_principal("bob", BOB, &both),
    ];
    let r = start_host(cfg).await;
    let alice = initialized_with_token(r.addr, ALICE, "alice-1").await;
    let bob = initialized_with_token(r.addr, BOB, "bob-1").await;
    for i in 0..3 {
        create_session(&alice, &format!("ahp-session:/a{i}"), None).await;
        create_session(&bob, &format!("ahp-session:/b{i}"), None).await;
    }
    let page = list(&alice, json!({"limit": 1})).await.unwrap();
    assert_eq!(uris(&page), vec!["ahp-session:/a2"]);
    let cur = page["nextCursor"].as_str().unwrap().to_owned();
    // Bob gets what garbage gets, and nothing of Alice's.
    let e = list(&bob, json!({"limit": 1, "cursor": cur}))
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&e), -32602);
    assert!(!e.to_string().contains("ahp-session:/a"), "{e}");
    // Alice, on another connection of hers, goes on.
    let alice2 = initialized_with_token(r.addr, ALICE, "alice-2").await;
    let next = list(&alice2, json!({"limit": 5, "cursor": cur}))
        .await
        .unwrap();
    assert_eq!(uris(&next), vec!["ahp-session:/a1", "ahp-session:/a0"]);
    assert!(next.get("nextCursor").is_none());
    // Bob's own list holds only his.
    let mine = list(&bob, json!({})).await.unwrap();
    assert_eq!(
        uris(&mine),
        vec!["ahp-session:/b2", "ahp-session:/b1", "ahp-session:/b0"]
    );
}
