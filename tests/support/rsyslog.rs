//! A real rsyslogd (Debian package `rsyslog`), started by a test with its own
//! config: imptcp on a loopback port and on a unix stream socket, every
//! message of the test's APP-NAME (`ahp-bridge-test`) written as its MSG (the
//! record) to `shipped.jsonl`, and its HOSTNAME to `hosts.txt`.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::eventually;

pub(crate) struct Rsyslogd {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Drop for Rsyslogd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Rsyslogd {
    pub(crate) fn shipped(&self) -> PathBuf {
        self.dir.path().join("shipped.jsonl")
    }
    /// The HOSTNAME of each message, one a line.
    pub(crate) fn hosts(&self) -> PathBuf {
        self.dir.path().join("hosts.txt")
    }
    pub(crate) fn socket(dir: &Path) -> PathBuf {
        dir.join("syslog.sock")
    }
}

fn rsyslogd_path() -> PathBuf {
    ["/usr/sbin/rsyslogd", "/sbin/rsyslogd", "/usr/local/sbin/rsyslogd"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("rsyslogd not found: install the Debian package rsyslog (apt-get install -y rsyslog); .ci/run installs it for CI")
        })
}

/// rsyslogd on a loopback port (chosen by itself, written to a file) and on
/// `unix_dir/syslog.sock`; returns it and the port.
pub(crate) async fn start_rsyslogd(dir: tempfile::TempDir) -> (Rsyslogd, u16) {
    let d = dir.path();
    let conf = format!(
        r#"global(workDirectory="{d}" maxMessageSize="256k")
module(load="imptcp")
input(type="imptcp" port="0" address="127.0.0.1" listenPortFileName="{d}/port")
input(type="imptcp" path="{sock}" unlink="on")
template(name="record" type="string" string="%msg%\n")
template(name="host" type="string" string="%hostname%\n")
if $app-name == "ahp-bridge-test" then {{
  action(type="omfile" file="{d}/shipped.jsonl" template="record")
  action(type="omfile" file="{d}/hosts.txt" template="host")
  stop
}}
"#,
        d = d.display(),
        sock = Rsyslogd::socket(d).display()
    );
    std::fs::write(d.join("rsyslog.conf"), conf).unwrap();
    let child = std::process::Command::new(rsyslogd_path())
        .arg("-f")
        .arg(d.join("rsyslog.conf"))
        .arg("-i")
        .arg(d.join("rsyslogd.pid"))
        .arg("-n")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("rsyslogd starts");
    let port_file = d.join("port");
    let sock = Rsyslogd::socket(d);
    eventually("rsyslogd listens", || {
        sock.exists()
            && std::fs::read_to_string(&port_file).is_ok_and(|p| p.trim().parse::<u16>().is_ok())
    })
    .await;
    let port = std::fs::read_to_string(&port_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (Rsyslogd { child, dir }, port)
}
