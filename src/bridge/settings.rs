//! What the bridge reads of the config once, at start. None of it is
//! reloadable: a reload reaches the bridge only as a
//! [`Reloadable`](crate::config::Reloadable) (its customizations) and
//! through the policy reader, so a key read here needs a restart.

use super::sdk::SdkSettings;
use crate::config::{Config, ProviderConfig, RuntimeConfig};

/// The bridge's start-only settings: `[runtime]` (the pool's processes, a
/// turn's deadlines, a new runtime session's defaults) and the SDK gate's.
pub struct BridgeSettings {
    runtime: RuntimeConfig,
    sdk: Option<SdkSettings>,
}

impl BridgeSettings {
    pub fn from_config(cfg: &Config) -> Self {
        Self {
            runtime: cfg.runtime.clone(),
            sdk: SdkSettings::from_config(cfg),
        }
    }

    /// `[runtime]`, for the pool.
    pub(super) fn runtime(&self) -> &RuntimeConfig {
        &self.runtime
    }

    /// The SDK gate's, with `[sdk]`.
    pub(super) fn sdk(&self) -> Option<&SdkSettings> {
        self.sdk.as_ref()
    }

    pub(super) fn client_tool_timeout(&self) -> std::time::Duration {
        self.runtime.client_tool_timeout
    }

    pub(super) fn turn_inactivity_timeout(&self) -> std::time::Duration {
        self.runtime.turn_inactivity_timeout
    }

    /// `[runtime] model`: a session's when neither it nor its config names one.
    pub(super) fn default_model(&self) -> &str {
        &self.runtime.model
    }

    /// `[runtime] working_directory`: a session's when it names none.
    pub(super) fn default_working_directory(&self) -> Option<&std::path::Path> {
        self.runtime.working_directory.as_deref()
    }

    /// `[runtime.provider]`: the model provider every session uses, if set.
    pub(super) fn provider(&self) -> Option<&ProviderConfig> {
        self.runtime.provider.as_ref()
    }
}
