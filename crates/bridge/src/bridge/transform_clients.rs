//! The transform core's view of the AHP host: each active client's opt-in,
//! and the `systemMessageTransform` request to one of them, in the wire
//! shapes of [`crate::ahp::extension`].

use std::sync::Arc;
use std::time::Duration;

use crate::ahp::Host;
use crate::ahp::{TransformParams, TransformResult, TRANSFORM_METHOD};
use crate::jsonrpc::CallError;
use crate::policy::OptIn;
use crate::telemetry::metrics;
use crate::transform::{AskError, AskFuture, ClientAnswer, Sections, TransformClients};

/// The host's clients, or none when the host is gone (shutting down).
pub struct HostClients(pub Option<Arc<Host>>);

impl TransformClients for HostClients {
    fn opt_ins(&self, session: &str) -> Vec<OptIn> {
        self.0
            .as_ref()
            .map(|h| {
                h.for_backend()
                    .active_clients(session)
                    .iter()
                    .map(OptIn::from)
                    .collect()
            })
            .unwrap_or_default()
    }

    fn ask(
        &self,
        client_id: &str,
        session: &str,
        sections: &Sections,
        timeout: Duration,
    ) -> AskFuture {
        let peer = self
            .0
            .as_ref()
            .and_then(|h| h.connections().client_peer(client_id));
        let session = session.to_owned();
        let sections = sections.clone();
        Box::pin(async move {
            let Some(peer) = peer else {
                return Err(AskError::Disconnected);
            };
            let params = TransformParams::new(&session, &sections, timeout);
            let sent = std::time::Instant::now();
            let answer = match peer.call_sized(TRANSFORM_METHOD, &params, timeout).await {
                Ok(answer) => {
                    metrics().transform_client_answered(sent.elapsed());
                    answer
                }
                Err(CallError::Timeout(_)) => return Err(AskError::Timeout),
                Err(CallError::Closed) => return Err(AskError::Disconnected),
                Err(CallError::Rpc(_)) => return Err(AskError::Failed),
            };
            // The size of the message the client sent.
            let bytes = answer.bytes;
            match TransformResult::parse(answer.value) {
                Some(sections) => Ok(ClientAnswer { sections, bytes }),
                None => Err(AskError::Malformed { bytes }),
            }
        })
    }
}
