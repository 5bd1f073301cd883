//! Session configuration: the schema `resolveSessionConfig` offers (which
//! model a session uses, and the backend's own settings), completions for
//! it, and the values a
//! `createSession.config` may carry, checked against that schema before the
//! session exists. The chosen values live in the session's `config` state,
//! where the agent side reads them.

use std::collections::HashMap;

use ahp_types::commands::{
    ResolveSessionConfigParams, ResolveSessionConfigResult, SessionConfigCompletionsParams,
    SessionConfigCompletionsResult, SessionConfigValueItem,
};
use ahp_types::common::JsonObject;
use ahp_types::state::{SessionConfigPropertySchema, SessionConfigSchema, SessionConfigState};
use serde_json::{Map, Value};

use crate::host::sessions::{MODEL_SETTING, PROVIDER, SECTIONS_SETTING};
use crate::host::Host;
use crate::protocol::errors::AhpError;
use ahp_bridge_base::config::AHP_HOST_SECTIONS;
use ahp_bridge_jsonrpc::{ErrorCode, RpcError};
use ahp_bridge_policy::{parse_additions, MAX_ADDED_BYTES};

fn invalid(m: String) -> RpcError {
    RpcError::new(ErrorCode::InvalidParams, m)
}

/// The JSON Schema of a session's config: the model, and in front of the
/// runtime's AHP host the sections it starts with.
fn schema(host: &Host) -> SessionConfigSchema {
    let models = host.models();
    let mut model = property(
        "string",
        "Model",
        "The model the session's turns use; a message may choose another for its turn.".into(),
        true,
    );
    model.default = Some(Value::from(models[0].clone()));
    model.r#enum = Some(models.iter().map(|m| Value::from(m.clone())).collect());
    model.enum_labels = Some(models.to_vec());
    let mut properties = HashMap::from([(MODEL_SETTING.to_owned(), model)]);
    if host.settings().additions() {
        // Text the session starts with, under the operator's policy; fixed
        // for the session's life.
        let sections = property(
            "object",
            "System message sections",
            format!(
                "Text to append or prepend to {} at the session's start, {MAX_ADDED_BYTES} bytes in all; \
                 each section passes the operator's policy, and what it refuses is not sent.",
                AHP_HOST_SECTIONS.join(", ")
            ),
            false,
        );
        properties.insert(SECTIONS_SETTING.to_owned(), sections);
    }
    // The backend's own settings (the runtime's AHP host's `mode`, ...).
    properties.extend(host.settings().backend_config().properties());
    SessionConfigSchema {
        r#type: "object".into(),
        properties,
        required: None,
    }
}

/// A property of type `ty`, with nothing but its words and mutability.
fn property(
    ty: &str,
    title: &str,
    description: String,
    mutable: bool,
) -> SessionConfigPropertySchema {
    SessionConfigPropertySchema {
        r#type: ty.into(),
        title: title.into(),
        description: Some(description),
        default: None,
        r#enum: None,
        enum_labels: None,
        enum_descriptions: None,
        read_only: None,
        items: None,
        min_items: None,
        max_items: None,
        properties: None,
        required: None,
        additional_properties: None,
        enum_dynamic: None,
        session_mutable: Some(mutable),
    }
}

/// `config` checked against the schema, with defaults applied: unknown
/// keys and values outside the schema are InvalidParams, naming them.
fn resolved_values(
    host: &Host,
    config: Option<&JsonObject>,
) -> Result<Map<String, Value>, RpcError> {
    let mut values = Map::new();
    values.insert(MODEL_SETTING.into(), Value::from(host.models()[0].clone()));
    let backend = host.settings().backend_config();
    for (key, p) in backend.properties() {
        if let Some(default) = p.default {
            values.insert(key, default);
        }
    }
    for (key, v) in config.into_iter().flatten() {
        match key.as_str() {
            MODEL_SETTING => {
                let id = v
                    .as_str()
                    .ok_or_else(|| invalid(format!("config.{MODEL_SETTING} must be a string")))?;
                host.check_model(id)?;
                values.insert(MODEL_SETTING.into(), Value::from(id));
            }
            SECTIONS_SETTING if host.settings().additions() => {
                parse_additions(v).map_err(|e| invalid(e.to_string()))?;
                values.insert(SECTIONS_SETTING.into(), v.clone());
            }
            other => match backend.check(other, v, false) {
                Ok(true) => {
                    values.insert(other.to_owned(), v.clone());
                }
                Ok(false) => {
                    return Err(invalid(format!(
                        "config.{other:?} is not a setting of this host (see resolveSessionConfig)"
                    )))
                }
                Err(why) => return Err(invalid(why.0)),
            },
        }
    }
    Ok(values)
}

/// `resolveSessionConfig`: the schema and the values with defaults applied.
pub(crate) fn resolve(
    host: &Host,
    p: ResolveSessionConfigParams,
) -> Result<ResolveSessionConfigResult, RpcError> {
    check_provider(p.provider.as_deref())?;
    let values = resolved_values(host, p.config.as_ref())?;
    Ok(ResolveSessionConfigResult {
        schema: schema(host),
        values,
    })
}

/// `sessionConfigCompletions`: the values of `property` matching `query`.
pub(crate) fn completions(
    host: &Host,
    p: SessionConfigCompletionsParams,
) -> Result<SessionConfigCompletionsResult, RpcError> {
    check_provider(p.provider.as_deref())?;
    let offered: Vec<String> = if p.property == MODEL_SETTING {
        host.models().to_vec()
    } else {
        let Some(setting) = host.settings().backend_config().property(&p.property) else {
            return Err(invalid(format!(
                "property {:?} is not a setting of this host",
                p.property
            )));
        };
        let choices = setting.r#enum.into_iter().flatten();
        choices
            .filter_map(|v| v.as_str().map(String::from))
            .collect()
    };
    let query = p.query.unwrap_or_default().to_lowercase();
    let items = offered
        .iter()
        .filter(|m| m.to_lowercase().contains(&query))
        .map(|m| SessionConfigValueItem {
            value: m.clone(),
            label: m.clone(),
            description: None,
        })
        .collect();
    Ok(SessionConfigCompletionsResult { items })
}

/// The config state a new session starts with, from `createSession.config`.
/// Takes AHP's own `JsonObject`: the protocol's config values are free-form
/// JSON by its schema, checked here against this host's settings.
pub fn initial_state(
    host: &Host,
    config: Option<&JsonObject>,
) -> Result<SessionConfigState, RpcError> {
    Ok(SessionConfigState {
        schema: schema(host),
        values: resolved_values(host, config)?,
    })
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
