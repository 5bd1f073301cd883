//! What ships for a fleet, checked as plain files with the real tools:
//! `deploy/haproxy/haproxy.cfg` with `haproxy -c` (Debian package haproxy),
//! every manifest of `deploy/kubernetes/` with `kubernetes-validate --strict`
//! (PyPI; the Prometheus Operator's kinds have no schema there, so their
//! content is held to `deploy/alerts.yml` here instead), and the ConfigMap's
//! `bridge.toml` with the bridge's own `config check`. Installed by
//! scripts/install-test-packages.sh; without them these tests FAIL.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

/// Runs `cmd`; (succeeded, stdout and stderr).
fn run(cmd: &mut Command) -> (bool, String) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} does not run: {e}"));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// The YAML documents of `path`, as JSON (PyYAML: kubernetes-validate's own).
fn yaml(path: &Path) -> Vec<Value> {
    let script = "import sys, json, yaml\n\
                  print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))";
    let (ok, out) = run(Command::new("python3").args(["-c", script]).arg(path));
    assert!(ok, "{}: {out}", path.display());
    serde_json::from_str(&out).unwrap()
}

fn manifests() -> Vec<PathBuf> {
    let k = yaml(&repo("deploy/kubernetes/kustomization.yaml"));
    k[0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| repo("deploy/kubernetes").join(r.as_str().unwrap()))
        .collect()
}

#[test]
fn the_haproxy_example_passes_haproxy_c_as_shipped() {
    let (ok, out) = run(Command::new("haproxy")
        .args(["-c", "-f"])
        .arg(repo("deploy/haproxy/haproxy.cfg")));
    assert!(ok, "{out}");
}

#[test]
fn every_manifest_is_listed_and_validates_strictly() {
    let listed = manifests();
    let mut on_disk: Vec<PathBuf> = std::fs::read_dir(repo("deploy/kubernetes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.ends_with("kustomization.yaml"))
        .collect();
    on_disk.sort();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(sorted, on_disk, "kustomization.yaml lists every manifest");
    for m in &listed {
        let kind = yaml(m)[0]["kind"].as_str().unwrap().to_owned();
        let (ok, out) = run(Command::new("kubernetes-validate").arg("--strict").arg(m));
        assert!(ok, "{}: {out}", m.display());
        let operator = matches!(kind.as_str(), "ServiceMonitor" | "PrometheusRule");
        assert!(
            operator || out.contains("passed"),
            "{kind} validated against a schema: {out}"
        );
    }
}

/// The manifests' documents by kind.
fn of_kind(kind: &str) -> Value {
    manifests()
        .iter()
        .flat_map(|m| yaml(m))
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn the_configmap_is_a_valid_config_with_only_the_token_from_the_environment() {
    let cm = of_kind("ConfigMap");
    let toml = cm["data"]["bridge.toml"].as_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bridge.toml");
    std::fs::write(&file, toml).unwrap();
    let check = |token: Option<&str>| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ahp-copilot-bridge"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap())
            .current_dir(dir.path())
            .args(["config", "check"])
            .arg(&file);
        if let Some(t) = token {
            cmd.env("AHP_BRIDGE_TOKEN", t);
        }
        run(&mut cmd)
    };
    let (ok, out) = check(Some("a-token-of-at-least-16-chars"));
    assert!(ok, "{out}");
    // The token is not in the file: without it an exposed listener is refused.
    let (ok, out) = check(None);
    assert!(!ok && out.contains("server.listen"), "{out}");
    // Off loopback under the transport rules: TLS on both listeners.
    assert!(toml.contains("[server.tls]") && toml.contains("[admin.tls]"));
    assert!(toml.contains("reload_on_change = true"));

    // The pod: the ConfigMap as a directory (a subPath never sees an update),
    // a grace period above the drain and the shutdown.
    let sts = of_kind("StatefulSet");
    let pod = &sts["spec"]["template"]["spec"];
    let mounts = pod["containers"][0]["volumeMounts"].as_array().unwrap();
    let config = mounts.iter().find(|m| m["name"] == "config").unwrap();
    assert_eq!(config["mountPath"], "/etc/ahp-copilot-bridge");
    assert!(config.get("subPath").is_none());
    let secs = |key: &str| -> u64 {
        let line = toml.lines().find(|l| l.starts_with(key)).unwrap();
        let v = line.split('"').nth(1).unwrap();
        humantime::parse_duration(v).unwrap().as_secs()
    };
    let grace = pod["terminationGracePeriodSeconds"].as_u64().unwrap();
    assert!(
        grace > secs("drain") + secs("shutdown_timeout"),
        "terminationGracePeriodSeconds {grace}"
    );
    let c = &pod["containers"][0]["securityContext"];
    assert_eq!(c["readOnlyRootFilesystem"], true);
    assert_eq!(c["allowPrivilegeEscalation"], false);
    assert_eq!(c["capabilities"]["drop"][0], "ALL");
    let claims: Vec<&str> = sts["spec"]["volumeClaimTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(claims, ["state", "home"]);
}

#[test]
fn the_prometheus_rule_holds_exactly_the_sample_alerts() {
    let rule = of_kind("PrometheusRule");
    let alerts = yaml(&repo("deploy/alerts.yml"));
    assert_eq!(rule["spec"]["groups"], alerts[0]["groups"]);
}
