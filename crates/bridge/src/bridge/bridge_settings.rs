//! What the bridge reads of the config once, at start. None of it is
//! reloadable: a reload reaches the bridge only as a
//! [`Reloadable`](crate::config::Reloadable) (its customizations) and
//! through the policy reader, so a key read here needs a restart.

use super::sdk::SdkSettings;
use crate::config::{Config, RuntimeConfig};
use crate::runtime::ModelProvider;

/// The bridge's start-only settings: `[runtime]` (the pool's processes, a
/// turn's deadlines, a new runtime session's defaults) and the SDK gate's.
pub struct BridgeSettings {
    /// `[runtime]`.
    pub(super) runtime: RuntimeConfig,
    /// The SDK gate's, with `[sdk]`.
    pub(super) sdk: Option<SdkSettings>,
}

impl BridgeSettings {
    pub fn from_config(cfg: &Config) -> Self {
        Self {
            runtime: cfg.runtime.clone(),
            sdk: SdkSettings::from_config(cfg),
        }
    }

    /// `[runtime.provider]` as a runtime session is given it (its key read
    /// from the environment at each bind, so a rotated key is taken).
    pub(super) fn model_provider(&self) -> Option<ModelProvider> {
        self.runtime.provider.as_ref().map(|p| ModelProvider {
            kind: p.kind.clone(),
            base_url: p.base_url.clone(),
            api_key: p.resolved_api_key(),
        })
    }
}
