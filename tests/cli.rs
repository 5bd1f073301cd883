//! The binary: config errors name the key and exit non-zero; the example config is valid.

use std::process::Command;

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ahp-copilot-bridge"))
}

#[test]
fn example_config_is_valid() {
    let out = bin()
        .args(["config", "check", "config/bridge.toml"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bad_configs_exit_non_zero_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    for (text, needle) in [
        ("[server]\nlisten = \"0.0.0.0:8421\"\n", "server.listen"),
        ("[server]\nlistne = \"127.0.0.1:1\"\n", "listne"),
        ("[policy]\ntransform_timeout = \"later\"\n", "later"),
        (
            "[policy.overrides.tone]\naction = \"replace\"\n",
            "policy.overrides.tone",
        ),
    ] {
        let p = dir.path().join("c.toml");
        std::fs::write(&p, text).unwrap();
        for args in [vec!["config", "check"], vec!["serve", "--config"]] {
            let out = bin()
                .args(&args)
                .arg(&p)
                .env_remove("AHP_BRIDGE_TOKEN")
                .output()
                .unwrap();
            assert!(!out.status.success(), "{text}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains(needle), "{args:?} {text}: {err}");
        }
    }
}
