//! The container image, built and run with the real tools: `bash
//! scripts/build-image.sh` (debootstrap and buildah, as root) writes
//! target/image/ahp-copilot-bridge.oci.tar; podman (vfs storage, the runc
//! runtime: crun fails on these machines' hybrid cgroups) loads and runs it
//! with only a test config bind-mounted (`[state]` off, no volumes), on the
//! host's network; the official AHP client holds a conversation with the
//! Copilot CLI inside it, on the scripted model. Needs root and the Debian
//! packages debootstrap, buildah, podman and runc
//! (scripts/install-test-packages.sh); without them it FAILS.

mod support;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ahp_bridge_join::ScriptedModel;
use support::e2e::{ready_session, run_turn};
use support::process::*;
use support::*;

const IMAGE: &str = "localhost/ahp-copilot-bridge:0.1.0";

fn podman(args: &[&str]) -> (bool, String) {
    let out = Command::new("podman")
        .args(["--storage-driver", "vfs"])
        .args(args)
        .output()
        .expect("podman runs (Debian package podman)");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// The container, removed when dropped.
struct Container(String);

impl Drop for Container {
    fn drop(&mut self) {
        let _ = podman(&["rm", "-f", &self.0]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_builds_and_a_client_converses_with_the_runtime_inside_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The binary this test build made: this tests the packing, and CI
    // builds one profile, once (a release build here would be another).
    let mut build = Command::new("bash");
    build
        .arg(root.join("scripts/build-image.sh"))
        .args(["--binary", env!("CARGO_BIN_EXE_ahp-copilot-bridge")])
        .current_dir(root);
    let built = build.output().expect("bash runs");
    assert!(
        built.status.success(),
        "scripts/build-image.sh (as root): {}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    let archive = root.join("target/image/ahp-copilot-bridge.oci.tar");
    let (ok, out) = podman(&["load", "-i", archive.to_str().unwrap()]);
    assert!(ok, "{out}");

    let model = ScriptedModel::start().await.unwrap();
    let port = http::free_port();
    let home = Path::new("/var/lib/ahp-copilot-bridge-home");
    let config = format!(
        "[server]\nlisten = \"127.0.0.1:{port}\"\ndrain = \"0s\"\n{}\n[state]\nenabled = false\n{}",
        ide_principal(),
        offline_runtime_toml_with(&model, home, ""),
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bridge.toml");
    std::fs::write(&file, config).unwrap();
    let name = format!("ahp-bridge-test-{port}");
    let mount = format!("{}:/etc/ahp-copilot-bridge/bridge.toml:ro", file.display());
    let (ok, out) = podman(&[
        "run",
        "-d",
        "--name",
        &name,
        "--runtime",
        "runc",
        "--network",
        "host",
        "--ulimit",
        "nofile=8192:8192",
        "--ulimit",
        "nproc=4096:4096",
        "-v",
        &mount,
        IMAGE,
    ]);
    assert!(ok, "podman run: {out}");
    let _container = Container(name.clone());
    let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let started = Instant::now();
    while std::net::TcpStream::connect(addr).is_err() {
        let (_, logs) = podman(&["logs", &name]);
        assert!(
            started.elapsed() < DEADLINE,
            "the bridge in the container never listened:\n{logs}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let c = connect(addr, "ide").await;
    ready_session(&c, "ahp-session:/img", None).await;
    let end = run_turn(&c, "img", "t1", "hello from outside").await;
    let (_, logs) = podman(&["logs", &name]);
    assert_eq!(end.kind, "complete", "{end:?}\n{logs}");
    assert!(!end.text.is_empty(), "the runtime in the image answered");
    // The process inside runs as the image's non-root user.
    let (ok, uid) = podman(&["exec", &name, "/usr/bin/id", "-u"]);
    assert!(ok, "{uid}");
    assert_eq!(uid.trim(), "10001");
}
