//! The runtime pool: how many runtime processes serve the sessions, or which
//! running runtimes the bridge connects to (`[runtime] processes`, `connect`).

use serde::Deserialize;

use super::{bad, ConfigError, RuntimeConfig};

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

impl RuntimeConfig {
    /// How many runtimes serve the sessions.
    pub fn pool_size(&self) -> usize {
        match &self.connect {
            Some(a) => a.list().len(),
            None => self.processes,
        }
    }

    /// The address runtime `slot` is reached at, when the pool is `connect`.
    pub fn address_of(&self, slot: usize) -> Option<&str> {
        self.connect
            .as_ref()
            .and_then(|a| a.list().get(slot).copied())
    }

    pub(super) fn validate_pool(&self) -> Result<(), ConfigError> {
        if self.processes == 0 || self.processes > MAX_PROCESSES {
            return Err(bad(
                "runtime.processes",
                format!("must be between 1 and {MAX_PROCESSES}"),
            ));
        }
        let Some(addrs) = &self.connect else {
            return Ok(());
        };
        let list = addrs.list();
        if list.is_empty() {
            return Err(bad("runtime.connect", "must name at least one address"));
        }
        if self.processes != 1 && self.processes != list.len() {
            return Err(bad(
                "runtime.processes",
                format!(
                    "with runtime.connect the pool is its {} address(es); leave processes unset",
                    list.len()
                ),
            ));
        }
        // An AHP host's URL is checked with the rest of `[runtime.ahp]`.
        let jsonrpc = self.protocol == super::RuntimeProtocol::Jsonrpc;
        for addr in list.into_iter().filter(|_| jsonrpc) {
            if addr.parse::<std::net::SocketAddr>().is_err() {
                return Err(bad(
                    "runtime.connect",
                    format!("{addr:?} is not host:port, e.g. \"127.0.0.1:3000\""),
                ));
            }
        }
        Ok(())
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
