//! Session configuration: the schema `resolveSessionConfig` offers (which
//! model a session uses), completions for it, and the values a
//! `createSession.config` may carry, checked against that schema before the
//! session exists. The chosen values live in the session's `config` state,
//! where the agent side reads them.

use ahp_types::commands::{ResolveSessionConfigParams, SessionConfigCompletionsParams};
use ahp_types::common::JsonObject;
use ahp_types::state::SessionConfigState;
use serde_json::{json, Map, Value};

use crate::ahp::host::sessions::{MODEL_SETTING, PROVIDER};
use crate::ahp::host::Host;
use crate::ahp::protocol::errors::AhpError;
use crate::jsonrpc::{ErrorCode, RpcError};

fn invalid(m: String) -> RpcError {
    RpcError::new(ErrorCode::InvalidParams, m)
}

/// The JSON Schema of a session's config.
fn schema(host: &Host) -> Value {
    let models = host.models();
    json!({
        "type": "object",
        "properties": {
            MODEL_SETTING: {
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
fn resolved_values(
    host: &Host,
    config: Option<&JsonObject>,
) -> Result<Map<String, Value>, RpcError> {
    let mut values = Map::new();
    values.insert(MODEL_SETTING.into(), Value::from(host.models()[0].clone()));
    for (key, v) in config.into_iter().flatten() {
        match key.as_str() {
            MODEL_SETTING => {
                let id = v
                    .as_str()
                    .ok_or_else(|| invalid(format!("config.{MODEL_SETTING} must be a string")))?;
                host.check_model(id)?;
                values.insert(MODEL_SETTING.into(), Value::from(id));
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

/// `resolveSessionConfig`: the schema and the values with defaults applied.
pub fn resolve(host: &Host, p: ResolveSessionConfigParams) -> Result<Value, RpcError> {
    check_provider(p.provider.as_deref())?;
    let values = resolved_values(host, p.config.as_ref())?;
    Ok(json!({"schema": schema(host), "values": values}))
}

/// `sessionConfigCompletions`: the values of `property` matching `query`.
pub fn completions(host: &Host, p: SessionConfigCompletionsParams) -> Result<Value, RpcError> {
    check_provider(p.provider.as_deref())?;
    if p.property != MODEL_SETTING {
        return Err(invalid(format!(
            "property {:?} is not a setting of this host",
            p.property
        )));
    }
    let query = p.query.unwrap_or_default().to_lowercase();
    let items: Vec<Value> = host
        .models()
        .iter()
        .filter(|m| m.to_lowercase().contains(&query))
        .map(|m| json!({"value": m, "label": m}))
        .collect();
    Ok(json!({ "items": items }))
}

/// The config state a new session starts with, from `createSession.config`.
pub fn initial_state(host: &Host, config: Option<&Value>) -> Result<Value, RpcError> {
    let config = match config {
        None | Some(Value::Null) => None,
        Some(Value::Object(o)) => Some(o),
        Some(_) => return Err(invalid("field `config` must be an object".into())),
    };
    let values = resolved_values(host, config)?;
    let state = json!({"schema": schema(host), "values": values});
    // Checked against the official type, so the state stays reducible.
    serde_json::from_value::<SessionConfigState>(state.clone())
        .map_err(|e| RpcError::new(ErrorCode::InternalError, format!("session config: {e}")))?;
    Ok(state)
}

fn check_provider(provider: Option<&str>) -> Result<(), RpcError> {
    match provider {
        None | Some(PROVIDER) => Ok(()),
        Some(p) => Err(RpcError::new(
            AhpError::ProviderNotFound,
            format!("unknown provider {p:?}; this host has {PROVIDER:?}"),
        )),
    }
}
