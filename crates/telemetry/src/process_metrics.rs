//! The standard `process_*` metrics, read from `/proc` at each scrape (the
//! metrics crate has no collector of its own for them).

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

#[derive(Debug)]
pub(super) struct ProcessCollector;

/// What `/proc/self/stat` and friends say of this process now.
#[derive(Debug, Default, PartialEq)]
struct Sample {
    cpu_seconds: f64,
    resident_bytes: i64,
    virtual_bytes: i64,
    start_time_seconds: f64,
    open_fds: i64,
    max_fds: i64,
}

fn sysconf(name: libc::c_int) -> f64 {
    // SAFETY: sysconf(3) reads a constant of the system.
    let v = unsafe { libc::sysconf(name) };
    if v > 0 {
        v as f64
    } else {
        1.0
    }
}

/// The fields after the command name of a `/proc/PID/stat` line (the name
/// may hold spaces and parentheses: everything up to the last `)` is it).
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default()
}

fn sample() -> Sample {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Field 3 (state) is index 0 here: utime 14, stime 15, starttime 22,
    // vsize 23, rss 24 (1-based, as proc(5) numbers them).
    let f = stat_fields(&stat);
    let field = |n: usize| {
        f.get(n - 3)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let ticks = sysconf(libc::_SC_CLK_TCK);
    let boot = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("btime ")
                    .and_then(|v| v.trim().parse::<f64>().ok())
            })
        })
        .unwrap_or(0.0);
    let open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count() as i64 - 1);
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit(2) fills the struct it is given.
    let max_fds = match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } {
        0 => limit.rlim_cur as i64,
        _ => 0,
    };
    Sample {
        cpu_seconds: (field(14) + field(15)) / ticks,
        resident_bytes: (field(24) * sysconf(libc::_SC_PAGESIZE)) as i64,
        virtual_bytes: field(23) as i64,
        start_time_seconds: boot + field(22) / ticks,
        open_fds,
        max_fds,
    }
}

impl Collector for ProcessCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = sample();
        let cpu = ConstCounter::new(s.cpu_seconds);
        let m = enc.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds",
            None,
            cpu.metric_type(),
        )?;
        cpu.encode(m)?;
        let gauges: [(&str, &str, i64); 4] = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                s.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                s.virtual_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                s.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                s.max_fds,
            ),
        ];
        for (name, help, value) in gauges {
            let g = ConstGauge::new(value);
            g.encode(enc.encode_descriptor(name, help, None, g.metric_type())?)?;
        }
        let start = ConstGauge::new(s.start_time_seconds);
        let m = enc.encode_descriptor(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds",
            None,
            start.metric_type(),
        )?;
        start.encode(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_parentheses_does_not_shift_the_fields() {
        let line = "42 (a) b) S 1 2 3";
        assert_eq!(stat_fields(line), vec!["S", "1", "2", "3"]);
    }

    #[test]
    fn this_process_is_sampled() {
        let s = sample();
        assert!(
            s.resident_bytes > 0 && s.virtual_bytes >= s.resident_bytes,
            "{s:?}"
        );
        assert!(s.open_fds > 0 && s.max_fds >= s.open_fds, "{s:?}");
        assert!(s.start_time_seconds > 1.6e9, "{s:?}");
    }
}
