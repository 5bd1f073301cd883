//! The transform core's view of the AHP host: each active client's opt-in,
//! and the `systemMessageTransform` request to one of them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};

use crate::ahp::extension::TRANSFORM_METHOD;
use crate::ahp::host::Host;
use crate::jsonrpc::CallError;
use crate::transform::policy::OptIn;
use crate::transform::router::{AskFuture, TransformClients};

/// The host's clients, or none when the host is gone (shutting down).
pub struct HostClients(pub Option<Arc<Host>>);

impl TransformClients for HostClients {
    fn opt_ins(&self, session: &str) -> Vec<OptIn> {
        self.0
            .as_ref()
            .map(|h| h.active_clients(session).iter().map(OptIn::from).collect())
            .unwrap_or_default()
    }

    fn ask(
        &self,
        client_id: &str,
        session: &str,
        sections: &BTreeMap<String, String>,
        timeout: Duration,
    ) -> AskFuture {
        let peer = self.0.as_ref().and_then(|h| h.client_peer(client_id));
        let sections: Map<String, Value> = sections
            .iter()
            .map(|(id, c)| (id.clone(), json!({"content": c})))
            .collect();
        let params = json!({"channel": session, "sections": sections});
        Box::pin(async move {
            match peer {
                Some(p) => p.call(TRANSFORM_METHOD, params, timeout).await,
                None => Err(CallError::Closed),
            }
        })
    }
}
