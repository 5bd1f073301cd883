//! Files: read-only `resourceRead`/`resourceList`/`resourceResolve` and
//! `completions`, confined to the working directories of the sessions the
//! caller sees. The official client over a real socket, real files in a
//! temporary directory, no runtime.

use crate::support;

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use ahp::Client;
use ahp_bridge_join::config::{Config, PrincipalConfig, Role, Visibility};
use serde_json::{json, Value};
use support::*;

const LIMIT: usize = 1024;

/// `wd` (the working directory) and `outside` beside it.
struct Tree {
    _t: tempfile::TempDir,
    wd: PathBuf,
    outside: PathBuf,
}

fn tree() -> Tree {
    let t = tempfile::tempdir().unwrap();
    let wd = t.path().join("wd");
    let outside = t.path().join("outside");
    std::fs::create_dir_all(wd.join("src")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(wd.join("hello.txt"), "hello, files\n").unwrap();
    std::fs::write(wd.join("src/main.rs"), "fn main() {}\n").unwrap();
    std::fs::write(wd.join("src/map.rs"), "").unwrap();
    std::fs::write(wd.join("blob.bin"), [0u8, 159, 146, 150]).unwrap();
    std::fs::write(wd.join("big.txt"), "x".repeat(LIMIT + 1)).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    symlink(outside.join("secret.txt"), wd.join("escape.txt")).unwrap();
    Tree { _t: t, wd, outside }
}

fn uri(p: &Path) -> String {
    format!("file://{}", p.display())
}

fn config() -> Config {
    let mut cfg = test_config();
    cfg.server.max_resource_bytes = LIMIT;
    cfg
}

async fn session_in(c: &Client, session: &str, wd: &Path) {
    c.request::<_, Value>(
        "createSession",
        json!({"channel": session, "provider": "copilot", "workingDirectories": [uri(wd)]}),
    )
    .await
    .expect("createSession");
}

async fn call(c: &Client, method: &str, params: Value) -> Result<Value, i32> {
    c.request::<_, Value>(method, params)
        .await
        .map_err(|e| rpc_code(&e))
}

async fn read(c: &Client, p: &str) -> Result<Value, i32> {
    call(
        c,
        "resourceRead",
        json!({"channel": "ahp-root://", "uri": p}),
    )
    .await
}

#[tokio::test]
async fn reads_inside_the_working_directory_and_nowhere_else() {
    let t = tree();
    let r = start_host(config()).await;
    let c = initialized(&r, "files").await;
    session_in(&c, "ahp-session:/f", &t.wd).await;

    let got = read(&c, &uri(&t.wd.join("hello.txt"))).await.unwrap();
    assert_eq!(got["data"], "hello, files\n");
    assert_eq!(got["encoding"], "utf-8");
    assert_eq!(got["contentType"], "text/plain");
    // Not UTF-8, or asked for: base64.
    let blob = read(&c, &uri(&t.wd.join("blob.bin"))).await.unwrap();
    assert_eq!(
        (blob["data"].as_str(), blob["encoding"].as_str()),
        (Some("AJ+Slg=="), Some("base64"))
    );
    let b64 = call(&c, "resourceRead", json!({"channel": "ahp-root://", "uri": uri(&t.wd.join("hello.txt")), "encoding": "base64"})).await.unwrap();
    assert_eq!(b64["data"], "aGVsbG8sIGZpbGVzCg==");

    // `..`, an absolute path outside, a symlink to outside: PermissionDenied.
    for escape in [
        format!("{}/../outside/secret.txt", uri(&t.wd)),
        uri(&t.outside.join("secret.txt")),
        uri(&t.wd.join("escape.txt")),
        "file:///etc/passwd".to_string(),
    ] {
        assert_eq!(read(&c, &escape).await.unwrap_err(), -32009, "{escape}");
    }
    // Missing inside: NotFound; over the bound: refused whole, naming the key.
    assert_eq!(
        read(&c, &uri(&t.wd.join("nope.txt"))).await.unwrap_err(),
        -32008
    );
    let e = c
        .request::<_, Value>(
            "resourceRead",
            json!({"channel": "ahp-root://", "uri": uri(&t.wd.join("big.txt"))}),
        )
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&e), -32009);
    assert!(e.to_string().contains("max_resource_bytes"), "{e}");
    // Not a file URI: InvalidParams.
    assert_eq!(read(&c, "relative.txt").await.unwrap_err(), -32602);

    // A listing leaves the escaping symlink out.
    let list = call(
        &c,
        "resourceList",
        json!({"channel": "ahp-root://", "uri": uri(&t.wd)}),
    )
    .await
    .unwrap();
    let names: Vec<&str> = list["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["big.txt", "blob.bin", "hello.txt", "src"]);
    assert_eq!(list["entries"][3]["type"], "directory");
    assert_eq!(
        call(
            &c,
            "resourceList",
            json!({"channel": "ahp-root://", "uri": uri(&t.outside)})
        )
        .await
        .unwrap_err(),
        -32009
    );

    let res = call(
        &c,
        "resourceResolve",
        json!({"channel": "ahp-root://", "uri": uri(&t.wd.join("src/main.rs"))}),
    )
    .await
    .unwrap();
    assert_eq!(
        (res["type"].as_str(), res["size"].as_u64()),
        (Some("file"), Some(13))
    );
    assert!(res["mtime"].as_str().is_some());
    let link = call(&c, "resourceResolve", json!({"channel": "ahp-root://", "uri": uri(&t.wd.join("escape.txt")), "followSymlinks": false})).await.unwrap();
    assert_eq!(link["type"], "symlink");
    assert_eq!(
        call(
            &c,
            "resourceResolve",
            json!({"channel": "ahp-root://", "uri": uri(&t.wd.join("escape.txt"))})
        )
        .await
        .unwrap_err(),
        -32009
    );

    // Read access may be asked for; write access is refused.
    assert_eq!(
        call(
            &c,
            "resourceRequest",
            json!({"channel": "ahp-root://", "uri": uri(&t.wd), "read": true})
        )
        .await
        .unwrap(),
        json!({})
    );
    assert_eq!(
        call(
            &c,
            "resourceRequest",
            json!({"channel": "ahp-root://", "uri": uri(&t.wd), "write": true})
        )
        .await
        .unwrap_err(),
        -32009
    );
}

#[tokio::test]
async fn completions_list_matching_files() {
    let t = tree();
    let r = start_host(config()).await;
    let c = initialized(&r, "comp").await;
    session_in(&c, "ahp-session:/c", &t.wd).await;
    let ask = |text: &str| json!({"channel": "ahp-session:/c", "kind": "userMessage", "text": text, "offset": text.encode_utf16().count()});
    let got = call(&c, "completions", ask("look at @src/ma"))
        .await
        .unwrap();
    let items = got["items"].as_array().unwrap();
    let inserts: Vec<&str> = items
        .iter()
        .map(|i| i["insertText"].as_str().unwrap())
        .collect();
    assert_eq!(inserts, vec!["@src/main.rs", "@src/map.rs"]);
    assert_eq!(
        (
            items[0]["rangeStart"].as_i64(),
            items[0]["rangeEnd"].as_i64()
        ),
        (Some(8), Some(15))
    );
    assert_eq!(items[0]["attachment"]["type"], "resource");
    let file = items[0]["attachment"]["uri"].as_str().unwrap().to_owned();
    assert_eq!(read(&c, &file).await.unwrap()["data"], "fn main() {}\n");
    // The escaping symlink is never offered; a word that is no path gets nothing.
    let top = call(&c, "completions", ask("@e")).await.unwrap();
    assert_eq!(top["items"], json!([]));
    assert_eq!(
        call(&c, "completions", ask("hello there")).await.unwrap()["items"],
        json!([])
    );
    assert_eq!(
        call(&c, "completions", ask("@../outside/")).await.unwrap()["items"],
        json!([])
    );
    // A bad offset is InvalidParams.
    let bad =
        json!({"channel": "ahp-session:/c", "kind": "userMessage", "text": "@s", "offset": 9});
    assert_eq!(call(&c, "completions", bad).await.unwrap_err(), -32602);
}

const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789ab";
const DASH: &str = "dash-token-0123456789ab";
const NOBODY: &str = "nobody-token-0123456789";

#[tokio::test]
async fn a_caller_reads_only_where_a_session_it_sees_works() {
    let t = tree();
    let default_wd = t.wd.parent().unwrap().join("default");
    std::fs::create_dir_all(&default_wd).unwrap();
    std::fs::write(default_wd.join("d.txt"), "default").unwrap();
    let mut cfg = config();
    cfg.runtime.working_directory = Some(default_wd.clone());
    cfg.server.session_visibility = Visibility::Owner;
    let (obs, part) = (Role::Observe, Role::Participate);
    cfg.principals = vec![
        token_principal("alice", ALICE, &[obs, part]),
        token_principal("bob", BOB, &[obs, part]),
        PrincipalConfig {
            session_visibility: Some(Visibility::All),
            ..token_principal("dash", DASH, &[obs])
        },
        token_principal("nobody", NOBODY, &[Role::Transform]),
    ];
    let r = start_host(cfg).await;
    let alice = initialized_with_token(r.addr, ALICE, "alice").await;
    let bob = initialized_with_token(r.addr, BOB, "bob").await;
    let dash = initialized_with_token(r.addr, DASH, "dash").await;
    let nobody = initialized_with_token(r.addr, NOBODY, "nobody").await;
    let hello = uri(&t.wd.join("hello.txt"));
    let default_file = uri(&default_wd.join("d.txt"));

    // Before any session: the participants read the configured default
    // (they could start a session there), the observer reads nothing.
    assert_eq!(
        read(&alice, &default_file).await.unwrap()["data"],
        "default"
    );
    assert_eq!(read(&dash, &default_file).await.unwrap_err(), -32009);
    assert_eq!(read(&alice, &hello).await.unwrap_err(), -32009);

    session_in(&alice, "ahp-session:/alice", &t.wd).await;
    assert_eq!(
        read(&alice, &hello).await.unwrap()["data"],
        "hello, files\n"
    );
    // Bob does not see Alice's session: her directory is closed to him, and
    // through her session's channel it does not exist.
    assert_eq!(read(&bob, &hello).await.unwrap_err(), -32009);
    let through = json!({"channel": "ahp-session:/alice", "uri": hello});
    assert_eq!(
        call(&bob, "resourceRead", through.clone())
            .await
            .unwrap_err(),
        -32001
    );
    // The dashboard sees every session, so it reads there too.
    assert_eq!(read(&dash, &hello).await.unwrap()["data"], "hello, files\n");
    assert_eq!(
        call(&dash, "resourceRead", through).await.unwrap()["data"],
        "hello, files\n"
    );
    // Through a session's channel, only that session's directories count.
    session_in(&alice, "ahp-session:/plain", &default_wd).await;
    let scoped = json!({"channel": "ahp-session:/plain", "uri": hello});
    assert_eq!(
        call(&alice, "resourceRead", scoped).await.unwrap_err(),
        -32009
    );
    // Without `observe`, nothing: the role is named.
    let e = nobody
        .request::<_, Value>(
            "resourceRead",
            json!({"channel": "ahp-root://", "uri": hello}),
        )
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&e), -32009);
    assert!(e.to_string().contains("`observe`"), "{e}");
    let e = nobody
        .request::<_, Value>(
            "completions",
            json!({"channel": "ahp-root://", "kind": "userMessage", "text": "@", "offset": 1}),
        )
        .await
        .unwrap_err();
    assert_eq!(rpc_code(&e), -32009);
}
