//! The router's view of an SDK app: one client, `sdk:<connection>`, acting
//! as the `[sdk] principal`, owning the sections each of its sessions
//! transforms itself; asked with the runtime's own `systemMessage.transform`
//! request, as the app expects it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::oneshot;

use super::app_conn::{AppConn, AppReply, OWN_ID};
use crate::ahp::Principal;
use crate::policy::ClientKind;
use crate::policy::OptIn;
use crate::runtime::TransformSections;
use crate::transform::{AskError, AskFuture, ClientAnswer, Sections, TransformClients};

pub(super) struct AppClients {
    shared: Arc<AppConn>,
    principal: Arc<Principal>,
}

impl AppClients {
    pub(super) fn new(shared: Arc<AppConn>, principal: Arc<Principal>) -> Self {
        Self { shared, principal }
    }
}

impl TransformClients for AppClients {
    fn opt_ins(&self, session: &str) -> Vec<OptIn> {
        let sections = self
            .shared
            .sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(session)
            .cloned()
            .unwrap_or_default();
        vec![OptIn {
            client_id: self.shared.client.clone(),
            sections,
            allowed: self.principal.transform_sections(),
            subject: self
                .principal
                .subject(Some(&self.shared.client), ClientKind::Sdk),
        }]
    }

    fn ask(
        &self,
        _client_id: &str,
        session: &str,
        sections: &Sections,
        timeout: Duration,
    ) -> AskFuture {
        let shared = self.shared.clone();
        let n = shared.next_ask.fetch_add(1, Ordering::Relaxed);
        let key = format!("{OWN_ID}{n}");
        let params = json!({
            "sessionId": session,
            "sections": sections.iter().map(|(k, v)| (k.clone(), json!({"content": v}))).collect::<serde_json::Map<_, _>>(),
        });
        let frame = json!({"jsonrpc": "2.0", "id": key, "method": "systemMessage.transform", "params": params}).to_string();
        Box::pin(async move {
            let (tx, rx) = oneshot::channel();
            shared
                .asks
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(key.clone(), tx);
            let forget = || {
                shared
                    .asks
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&key);
            };
            if !shared.app(frame).await {
                forget();
                return Err(AskError::Disconnected);
            }
            let reply = tokio::select! {
                r = tokio::time::timeout(timeout, rx) => r,
                _ = shared.closed.cancelled() => { forget(); return Err(AskError::Disconnected) }
            };
            match reply {
                Err(_) => {
                    forget();
                    Err(AskError::Timeout)
                }
                Ok(Err(_)) => Err(AskError::Disconnected),
                Ok(Ok(AppReply::Error)) => Err(AskError::Failed),
                Ok(Ok(AppReply::Result(raw))) => {
                    let bytes = raw.get().len();
                    match serde_json::from_str::<TransformSections>(raw.get()) {
                        Ok(t) => Ok(ClientAnswer {
                            sections: t
                                .sections
                                .into_iter()
                                .map(|(k, v)| (k, v.content))
                                .collect(),
                            bytes,
                        }),
                        Err(_) => Err(AskError::Malformed { bytes }),
                    }
                }
            }
        })
    }
}
