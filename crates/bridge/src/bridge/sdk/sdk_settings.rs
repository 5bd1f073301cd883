//! What an SDK gate reads of the config, once, at start: `[sdk]`, the
//! `[[principals]]` entry it acts as, and the `[server]` and `[runtime]`
//! bounds its connections keep. Start-only: a reload changes none of it (a
//! restart does). `[policy.customizations] client_mcp_servers`, which a
//! reload does change, is read from the bridge's customizations at each
//! session instead.

use std::sync::Arc;
use std::time::Duration;

use crate::ahp::Principal;
use crate::config::{Config, SdkConfig};

#[derive(Clone)]
pub(crate) struct SdkSettings {
    pub(super) sdk: SdkConfig,
    pub(super) principal: Arc<Principal>,
    pub(super) max_frame_bytes: usize,
    pub(super) handshake_timeout: Duration,
    pub(super) call_timeout: Duration,
    pub(super) max_connections: usize,
}

impl SdkSettings {
    /// `None` without `[sdk]`: no gate, no listener.
    pub(crate) fn from_config(cfg: &Config) -> Option<Self> {
        let sdk = cfg.sdk.clone()?;
        let p = cfg
            .principals
            .iter()
            .find(|p| p.name == sdk.principal)
            .expect("validation refuses an [sdk] principal no [[principals]] entry names");
        let principal = Arc::new(Principal::from_config(p, cfg.server.session_visibility));
        Some(Self {
            sdk,
            principal,
            max_frame_bytes: cfg.runtime.max_frame_bytes,
            handshake_timeout: cfg.server.handshake_timeout,
            call_timeout: cfg.runtime.call_timeout,
            max_connections: cfg.server.max_connections.unwrap_or(1024),
        })
    }
}
