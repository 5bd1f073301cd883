//! Tool calls that wait on a client: the runtime's permission prompts
//! (answered by a client's confirmation) and client tools (run by the client
//! that contributed them). Each is mirrored in the session's `inputNeeded`
//! while it waits, and each is answered towards the runtime whatever happens:
//! confirmed, completed, the turn cancelled, or its owner gone.

use ahp_types::state::{ToolCallResult, ToolResultContent};
use serde_json::{json, Value};
use tracing::warn;

use super::session::{mirror_id, unmirror};
use super::Bridge;
use crate::runtime::wire::{self, method, PermissionRequest, ToolOutcome};

impl Bridge {
    /// The client that contributed the session's tool `name`, if any.
    pub(super) fn client_tool_owner(&self, uri: &str, name: &str) -> Option<String> {
        self.sessions().get(uri).and_then(|s| {
            s.bound
                .as_ref()
                .and_then(|(b, _)| b.tool_owner(name).map(String::from))
        })
    }

    /// Mirrors a tool call that waits on a client (its confirmation, or its
    /// execution by the owning client) into the session's `inputNeeded`, so
    /// that clients subscribed only to the session see it. The entry carries
    /// the tool call as the chat state has it now.
    fn mirror_tool(&self, uri: &str, chat: &str, tool_call_id: &str, executor: Option<&str>) {
        let Some(host) = self.host() else { return };
        let Some(state) = host.snapshot(chat).map(|mut s| s["state"].take()) else {
            return;
        };
        let Some((turn_id, tool_call)) = pending_tool_call(&state, tool_call_id) else {
            return;
        };
        let id = mirror_id(tool_call_id);
        let mut request = json!({"id": id, "chat": chat, "turnId": turn_id, "toolCall": tool_call});
        match executor {
            Some(client) => {
                request["kind"] = json!("toolClientExecution");
                request["clientId"] = json!(client);
            }
            None => request["kind"] = json!("toolConfirmation"),
        }
        // Set only while the call still waits, checked and set under the
        // session lock: an answer or a removal that came first (and took the
        // entry out) must not be followed by a stale entry.
        let sessions = self.sessions();
        let waiting = sessions.get(uri).is_some_and(|s| {
            s.permissions.contains_key(tool_call_id) || s.client_tools.contains_key(tool_call_id)
        });
        if waiting {
            self.emit(
                uri,
                vec![json!({"type": "session/inputNeededSet", "request": request})],
            );
        }
    }

    /// `permission.requested`: a pending confirmation in the running turn.
    pub(super) fn permission_requested(&self, uri: &str, runtime_id: &str, p: &PermissionRequest) {
        let tool_name = p.tool_name.clone().unwrap_or_else(|| p.kind.clone());
        // A client's own tool: the owning client decides by running it.
        if p.kind == "custom-tool" && self.client_tool_owner(uri, &tool_name).is_some() {
            let params = wire::permission_answer(runtime_id, &p.request_id, true);
            self.spawn_call(runtime_id, method::ANSWER_PERMISSION, params);
            return;
        }
        let tool_call_id = p
            .tool_call_id
            .clone()
            .unwrap_or_else(|| p.request_id.clone());
        let detail = p
            .intention
            .as_deref()
            .or(p.full_command_text.as_deref())
            .unwrap_or("");
        let input = p
            .full_command_text
            .as_ref()
            .map(|c| json!(c))
            .or_else(|| p.args.clone())
            .unwrap_or(Value::Null);
        let asked = {
            let mut sessions = self.sessions();
            let Some(s) = sessions.get_mut(uri) else {
                return;
            };
            let asked = s.running().map(|t| {
                let message = format!("Allow {}: {detail}", p.kind);
                let actions =
                    t.mapper
                        .ask_confirmation(&tool_call_id, &tool_name, &input, &message);
                (t.chat.clone(), actions)
            });
            if asked.is_some() {
                s.permissions
                    .insert(tool_call_id.clone(), p.request_id.clone());
            }
            asked
        };
        match asked {
            Some((chat, actions)) => {
                self.emit(&chat, actions);
                self.mirror_tool(uri, &chat, &tool_call_id, None);
            }
            None => {
                // No turn to ask in: deny rather than leave the runtime waiting.
                let params = wire::permission_answer(runtime_id, &p.request_id, false);
                self.spawn_call(runtime_id, method::ANSWER_PERMISSION, params);
            }
        }
    }

    /// `external_tool.requested`: a client tool call, run by its owner if it
    /// is still an active client, failed at once otherwise.
    pub(super) fn external_tool_requested(
        &self,
        uri: &str,
        runtime_id: &str,
        request_id: &str,
        tool_call_id: &str,
        name: &str,
        arguments: &Value,
    ) {
        let host = self.host();
        let owner = self.client_tool_owner(uri, name).filter(|o| {
            host.as_ref()
                .is_some_and(|h| h.active_clients(uri).iter().any(|c| &c.client_id == o))
        });
        // Record the owner before the call is announced, so its completion is accepted.
        if let (Some(h), Some(o)) = (&host, &owner) {
            h.set_tool_owner(uri, tool_call_id, o);
        }
        let contributor = owner
            .as_ref()
            .map(|o| json!({"kind": "client", "clientId": o}));
        let opened = {
            let mut sessions = self.sessions();
            let Some(s) = sessions.get_mut(uri) else {
                return;
            };
            if let Some(o) = &owner {
                s.client_tools
                    .insert(tool_call_id.to_owned(), (request_id.to_owned(), o.clone()));
            }
            s.running().map(|t| {
                let mut a = t.mapper.open_tool(
                    tool_call_id,
                    name,
                    arguments,
                    contributor,
                    Some("not-needed"),
                    &format!("Running {name}"),
                );
                if owner.is_none() {
                    a.extend(t.mapper.complete_tool(
                        tool_call_id,
                        false,
                        "the client that provides this tool is gone",
                        name,
                    ));
                }
                (t.chat.clone(), a)
            })
        };
        if let Some((chat, actions)) = opened {
            self.emit(&chat, actions);
            if let Some(o) = &owner {
                self.mirror_tool(uri, &chat, tool_call_id, Some(o));
            }
        }
        if owner.is_some() {
            // Connected is not answering: the call has a deadline of its own
            // (a no-op if the call is over by then).
            let me = self.me.clone();
            let limit = self.cfg.runtime.client_tool_timeout;
            let (uri, id, request, name) = (
                uri.to_owned(),
                tool_call_id.to_owned(),
                request_id.to_owned(),
                name.to_owned(),
            );
            tokio::spawn(async move {
                tokio::time::sleep(limit).await;
                if let Some(b) = me.upgrade() {
                    b.client_tool_timed_out(&uri, &id, &request, &name);
                }
            });
        } else {
            let why = format!("Tool {name} is unavailable: the client that provides it is gone.");
            let outcome = ToolOutcome {
                error: Some(json!("client gone")),
                ..ToolOutcome::failed(&why)
            };
            self.answer_tool(runtime_id, request_id, &outcome);
        }
    }

    /// The owner completed its tool call in AHP: answer the runtime.
    pub(super) fn client_tool_completed(
        &self,
        uri: &str,
        tool_call_id: &str,
        result: &ToolCallResult,
    ) {
        let (runtime_id, request) = {
            let mut sessions = self.sessions();
            let Some(s) = sessions.get_mut(uri) else {
                return;
            };
            if let Some(t) = s.running() {
                t.mapper.mark_completed(tool_call_id);
            }
            (s.runtime_id.clone(), s.client_tools.remove(tool_call_id))
        };
        let Some((request_id, _)) = request else {
            return;
        };
        self.emit(uri, vec![unmirror(tool_call_id)]);
        let text = result
            .content
            .iter()
            .flatten()
            .filter_map(|c| match c {
                ToolResultContent::Text(t) => Some(t.text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        let outcome = ToolOutcome {
            success: result.success,
            text,
            error: result
                .error
                .as_ref()
                .and_then(|e| serde_json::to_value(e).ok()),
        };
        self.answer_tool(&runtime_id, &request_id, &outcome);
    }

    /// A client approved or denied a permission prompt: answer the runtime.
    pub(super) fn tool_call_confirmed(&self, uri: &str, tool_call_id: &str, approved: bool) {
        let Some((runtime_id, request_id)) = self.sessions().get_mut(uri).and_then(|s| {
            if !approved {
                // A denied call is cancelled in AHP: the runtime's failure event must not complete it.
                if let Some(t) = s.running() {
                    t.mapper.mark_completed(tool_call_id);
                }
            }
            s.permissions
                .remove(tool_call_id)
                .map(|r| (s.runtime_id.clone(), r))
        }) else {
            return;
        };
        self.emit(uri, vec![unmirror(tool_call_id)]);
        let params = wire::permission_answer(&runtime_id, &request_id, approved);
        self.spawn_call(&runtime_id, method::ANSWER_PERMISSION, params);
    }

    /// An active client left the session (however it left): its in-flight
    /// tool calls fail now, in AHP and towards the runtime.
    pub(super) fn active_client_removed(&self, uri: &str, client_id: &str) {
        const WHY: &str = "the client that provides this tool left";
        self.fail_client_tools(uri, |_, (_, owner)| owner == client_id, WHY, "client gone");
    }

    /// Fails a client tool call its owner has not completed within
    /// `[runtime] client_tool_timeout` (the owner may still be connected).
    fn client_tool_timed_out(&self, uri: &str, tool_call_id: &str, request_id: &str, name: &str) {
        let limit = humantime::format_duration(self.cfg.runtime.client_tool_timeout);
        let why = format!("the client did not complete tool {name} within {limit} ([runtime] client_tool_timeout)");
        let failed = self.fail_client_tools(
            uri,
            |id, (request, _)| id == tool_call_id && request == request_id,
            &why,
            "timeout",
        );
        if failed > 0 {
            warn!(session = %uri, tool_call_id = ?tool_call_id, "client tool call timed out after {limit}");
        }
    }

    /// Fails the pending client tool calls `pick` selects (tool call id,
    /// (runtime request id, owner)): in AHP, and towards the runtime.
    /// Returns how many it failed.
    fn fail_client_tools(
        &self,
        uri: &str,
        pick: impl Fn(&str, &(String, String)) -> bool,
        why: &str,
        error: &str,
    ) -> usize {
        let (runtime_id, chat, actions, gone, requests) = {
            let mut sessions = self.sessions();
            let Some(s) = sessions.get_mut(uri) else {
                return 0;
            };
            let gone: Vec<String> = s
                .client_tools
                .iter()
                .filter(|(id, entry)| pick(id, entry))
                .map(|(id, _)| id.clone())
                .collect();
            let requests: Vec<String> = gone
                .iter()
                .filter_map(|id| s.client_tools.remove(id).map(|(r, _)| r))
                .collect();
            let runtime_id = s.runtime_id.clone();
            let (chat, actions) = match s.running() {
                Some(t) => (
                    Some(t.chat.clone()),
                    gone.iter()
                        .flat_map(|id| t.mapper.complete_tool(id, false, why, "tool"))
                        .collect(),
                ),
                None => (None, Vec::new()),
            };
            (runtime_id, chat, actions, gone, requests)
        };
        if let Some(chat) = chat {
            self.emit(&chat, actions);
        }
        self.emit(uri, gone.iter().map(|id| unmirror(id)).collect());
        let outcome = ToolOutcome {
            error: Some(json!(error)),
            ..ToolOutcome::failed(why)
        };
        for request_id in &requests {
            self.answer_tool(&runtime_id, request_id, &outcome);
        }
        requests.len()
    }

    /// Answers the runtime's pending external tool call, in the background.
    fn answer_tool(&self, runtime_id: &str, request_id: &str, outcome: &ToolOutcome) {
        let params = wire::tool_answer(runtime_id, request_id, outcome);
        self.spawn_call(runtime_id, method::ANSWER_TOOL_CALL, params);
    }
}

/// The active turn's id and the JSON of one of its tool calls, from a chat state.
fn pending_tool_call(chat_state: &Value, tool_call_id: &str) -> Option<(String, Value)> {
    let turn = &chat_state["activeTurn"];
    let part = turn["responseParts"]
        .as_array()?
        .iter()
        .find(|p| p["toolCall"]["toolCallId"] == tool_call_id)?;
    Some((turn["id"].as_str()?.to_owned(), part["toolCall"].clone()))
}
