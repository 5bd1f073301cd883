//! The runtime pool's types: how many runtime processes serve the sessions,
//! or which running runtimes the bridge connects to (`[runtime] processes`,
//! `connect`; `RuntimeConfig` in runtime.rs reads and checks them).

use serde::Deserialize;

/// The most runtime processes a pool may have: each is a Node process of a
/// few hundred MB.
pub const MAX_PROCESSES: usize = 64;

/// `[runtime] connect`: one address, or a list that forms the pool.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum RuntimeAddresses {
    One(String),
    Many(Vec<String>),
}

impl From<String> for RuntimeAddresses {
    fn from(s: String) -> Self {
        Self::One(s)
    }
}

impl RuntimeAddresses {
    pub fn list(&self) -> Vec<&str> {
        match self {
            Self::One(a) => vec![a.as_str()],
            Self::Many(v) => v.iter().map(String::as_str).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    #[test]
    fn one_address_a_list_or_processes() {
        let c = Config::parse("[runtime]\nconnect = \"127.0.0.1:1\"").unwrap();
        c.validate().unwrap();
        assert_eq!(c.runtime.pool_size(), 1);
        let c = Config::parse("[runtime]\nconnect = [\"127.0.0.1:1\", \"127.0.0.1:2\"]").unwrap();
        c.validate().unwrap();
        assert_eq!(c.runtime.pool_size(), 2);
        assert_eq!(c.runtime.address_of(1), Some("127.0.0.1:2"));
        let c = Config::parse("[runtime]\nprocesses = 3").unwrap();
        c.validate().unwrap();
        assert_eq!((c.runtime.pool_size(), c.runtime.address_of(0)), (3, None));
        for (toml, key) in [
            ("[runtime]\nprocesses = 0", "runtime.processes"),
            ("[runtime]\nconnect = []", "runtime.connect"),
            ("[runtime]\nconnect = [\"nope\"]", "runtime.connect"),
            (
                "[runtime]\nprocesses = 2\nconnect = [\"127.0.0.1:1\"]",
                "runtime.processes",
            ),
        ] {
            let e = Config::parse(toml).unwrap().validate().unwrap_err();
            assert_eq!(e.key, key, "{toml}");
        }
    }
}
