//! A real Prometheus server (Debian's `prometheus`), on loopback with a
//! config of its own, scraping the given targets every second.

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::http;

pub(crate) struct Prometheus {
    child: Child,
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Prometheus {
    /// Starts Prometheus scraping `/metrics` of each target, and waits
    /// until it answers.
    pub(crate) fn start(targets: &[SocketAddr]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let list: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n\
             scrape_configs:\n  - job_name: bridge\n    static_configs:\n      - targets: [{}]\n",
            list.join(", ")
        );
        let file = dir.path().join("prometheus.yml");
        std::fs::write(&file, config).unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", http::free_port()).parse().unwrap();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prometheus runs (Debian package `prometheus`)");
        let p = Self {
            child,
            addr,
            _dir: dir,
        };
        p.wait_for("Prometheus answers", |p| {
            http::get(p.addr, "/-/ready", &[]).is_ok_and(|a| a.status == 200)
        });
        p
    }

    /// The value of an instant query with one result, if it has one.
    pub(crate) fn query(&self, expr: &str) -> Option<f64> {
        let encoded: String = expr
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let a = http::get(self.addr, &format!("/api/v1/query?query={encoded}"), &[]).ok()?;
        let v: Value = serde_json::from_str(&a.body).ok()?;
        let result = v["data"]["result"].as_array()?;
        result.first()?["value"][1].as_str()?.parse().ok()
    }

    /// Polls `cond` until true, at most a minute (scrapes come every second).
    pub(crate) fn wait_for(&self, what: &str, mut cond: impl FnMut(&Self) -> bool) {
        let started = Instant::now();
        while !cond(self) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "timed out waiting for: {what}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
