//! South to north: what the runtime sends on its own, typed by the runtime
//! side, routed to the bridge's handlers.

use std::sync::Weak;

use tracing::{debug, info};

use super::transform_clients::HostClients;
use super::Bridge;
use crate::runtime::connection::{ReplyFuture, RuntimeHandler};
use crate::runtime::wire::{RuntimeAnswer, RuntimeEvent, RuntimeRequest, UserInputAnswer};

/// The bridge as the runtime connection's handler (weak: the connection must
/// not keep the bridge alive).
pub(super) struct RuntimeEvents {
    bridge: Weak<Bridge>,
}

impl RuntimeEvents {
    pub fn new(bridge: Weak<Bridge>) -> Self {
        Self { bridge }
    }
}

impl RuntimeHandler for RuntimeEvents {
    fn event(&self, runtime_id: &str, event: RuntimeEvent) {
        let Some(b) = self.bridge.upgrade() else {
            return;
        };
        let Some(uri) = b.session_of_runtime(runtime_id) else {
            debug!(runtime_id, "event for an unknown runtime session");
            return;
        };
        match &event {
            RuntimeEvent::PermissionRequested(p) => b.permission_requested(&uri, runtime_id, p),
            RuntimeEvent::ExternalToolRequested {
                request_id,
                tool_call_id,
                tool_name,
                arguments,
            } => b.external_tool_requested(
                &uri,
                runtime_id,
                request_id,
                tool_call_id,
                tool_name,
                arguments,
            ),
            RuntimeEvent::Warning { warning_type } => {
                info!(session = %uri, warning = %warning_type, "runtime warning")
            }
            // A client's own tool is opened by external_tool.requested, with its owner.
            RuntimeEvent::ToolStarted { tool_name, .. }
                if b.client_tool_owner(&uri, tool_name).is_some() => {}
            _ => b.turn_event(&uri, &event),
        }
    }

    fn request(&self, request: RuntimeRequest) -> ReplyFuture {
        let bridge = self.bridge.clone();
        Box::pin(async move {
            let b = bridge.upgrade();
            // Counted until answered, so a shutdown can wait for the answer.
            let _answering = b.as_ref().map(|b| b.in_flight.enter());
            let uri_of = |id: &str| b.as_ref().and_then(|b| b.session_of_runtime(id));
            match request {
                RuntimeRequest::Transform {
                    session_id,
                    sections,
                } => match (uri_of(&session_id), &b) {
                    (Some(uri), Some(b)) => {
                        let clients = HostClients(b.host());
                        let merged = b.router.route(&clients, &uri, &session_id, &sections).await;
                        RuntimeAnswer::Transformed(merged)
                    }
                    // Unknown session, or shutting down: the runtime gets its text back.
                    _ => RuntimeAnswer::Transformed(sections),
                },
                RuntimeRequest::UserInput {
                    session_id,
                    question,
                    choices,
                    allow_freeform,
                } => match (uri_of(&session_id), &b) {
                    (Some(uri), Some(b)) => RuntimeAnswer::UserInput(
                        b.ask_user(&uri, question.as_deref(), choices, allow_freeform)
                            .await,
                    ),
                    _ => RuntimeAnswer::UserInput(UserInputAnswer::NoResponse),
                },
                RuntimeRequest::Hooks => RuntimeAnswer::Hooks,
            }
        })
    }
}
