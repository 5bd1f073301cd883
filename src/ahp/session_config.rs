//! Session configuration: the schema `resolveSessionConfig` offers (which
//! model a session uses), completions for it, and the values a
//! `createSession.config` may carry, checked against that schema before the
//! session exists. The chosen values live in the session's `config` state,
//! where the agent side reads them.

use ahp_types::actions::StateAction;
use ahp_types::state::SessionConfigState;
use serde_json::{json, Map, Value};

use super::errors::AhpError;
use super::host::Host;
use crate::config::Config;
use crate::jsonrpc::{ErrorCode, RpcError};

/// The model a message chooses, in an action that carries a message.
pub(super) fn chosen_model(action: &StateAction) -> Option<&str> {
    let message = match action {
        StateAction::ChatTurnStarted(a) => &a.message,
        StateAction::ChatPendingMessageSet(a) => &a.message,
        _ => return None,
    };
    message.model.as_ref().map(|m| m.id.as_str())
}

/// The one config property today: the model a session's turns use.
pub const MODEL: &str = "model";

/// The models this host offers, the default first, each once.
pub fn configured_models(cfg: &Config) -> Vec<String> {
    let mut models = vec![cfg.runtime.model.clone()];
    for m in &cfg.runtime.models {
        if !models.contains(m) {
            models.push(m.clone());
        }
    }
    models
}

impl Host {
    /// The models a session may choose, the default first.
    pub(super) fn models(&self) -> &[String] {
        &self.models
    }

    /// The JSON Schema of a session's config.
    fn config_schema(&self) -> Value {
        let models = self.models();
        json!({
            "type": "object",
            "properties": {
                MODEL: {
                    "type": "string",
                    "title": "Model",
                    "description": "The model the session's turns use; a message may choose another for its turn.",
                    "default": models[0],
                    "enum": models,
                    "enumLabels": models,
                    "sessionMutable": true,
                }
            }
        })
    }

    /// `config` checked against the schema, with defaults applied: unknown
    /// keys and values outside the schema are InvalidParams, naming them.
    fn resolved_values(&self, config: Option<&Value>) -> Result<Map<String, Value>, RpcError> {
        let invalid = |m: String| RpcError::new(ErrorCode::InvalidParams, m);
        let mut values = Map::new();
        values.insert(MODEL.into(), Value::from(self.models()[0].clone()));
        let given = match config {
            None | Some(Value::Null) => return Ok(values),
            Some(Value::Object(o)) => o,
            Some(_) => return Err(invalid("field `config` must be an object".into())),
        };
        for (key, v) in given {
            match key.as_str() {
                MODEL => {
                    let id = v
                        .as_str()
                        .ok_or_else(|| invalid(format!("config.{MODEL} must be a string")))?;
                    self.check_model(id)?;
                    values.insert(MODEL.into(), Value::from(id));
                }
                other => {
                    return Err(invalid(format!(
                        "config.{other:?} is not a setting of this host (see resolveSessionConfig)"
                    )))
                }
            }
        }
        Ok(values)
    }

    /// Whether `id` is a model this host offers.
    pub(super) fn check_model(&self, id: &str) -> Result<(), RpcError> {
        if self.models().iter().any(|m| m == id) {
            Ok(())
        } else {
            Err(RpcError::new(
                ErrorCode::InvalidParams,
                format!(
                    "model {id:?} is not offered here; offered: {:?}",
                    self.models()
                ),
            ))
        }
    }

    /// `resolveSessionConfig`: the schema and the values with defaults applied.
    pub(super) fn resolve_session_config(&self, params: &Value) -> Result<Value, RpcError> {
        check_provider(params)?;
        let values = self.resolved_values(params.get("config"))?;
        Ok(json!({"schema": self.config_schema(), "values": values}))
    }

    /// `sessionConfigCompletions`: the values of `property` matching `query`.
    pub(super) fn session_config_completions(&self, params: &Value) -> Result<Value, RpcError> {
        check_provider(params)?;
        let property = params
            .get("property")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if property != MODEL {
            return Err(RpcError::new(
                ErrorCode::InvalidParams,
                format!("property {property:?} is not a setting of this host"),
            ));
        }
        let query = params
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_lowercase();
        let items: Vec<Value> = self
            .models()
            .iter()
            .filter(|m| m.to_lowercase().contains(&query))
            .map(|m| json!({"value": m, "label": m}))
            .collect();
        Ok(json!({ "items": items }))
    }

    /// The config state a new session starts with, from `createSession.config`.
    pub(super) fn session_config_state(&self, config: Option<&Value>) -> Result<Value, RpcError> {
        let values = self.resolved_values(config)?;
        let state = json!({"schema": self.config_schema(), "values": values});
        // Checked against the official type, so the state stays reducible.
        serde_json::from_value::<SessionConfigState>(state.clone())
            .map_err(|e| RpcError::new(ErrorCode::InternalError, format!("session config: {e}")))?;
        Ok(state)
    }

    /// The model a session's turns use unless a message chooses another.
    pub fn session_model(&self, uri: &str) -> Option<String> {
        let st = self.lock();
        let config = st.sessions.get(uri)?.state.config.as_ref()?;
        config.values.get(MODEL)?.as_str().map(String::from)
    }
}

fn check_provider(params: &Value) -> Result<(), RpcError> {
    match params.get("provider").and_then(Value::as_str) {
        None | Some(super::state::PROVIDER) => Ok(()),
        Some(p) => Err(RpcError::new(
            AhpError::ProviderNotFound,
            format!(
                "unknown provider {p:?}; this host has {:?}",
                super::state::PROVIDER
            ),
        )),
    }
}
