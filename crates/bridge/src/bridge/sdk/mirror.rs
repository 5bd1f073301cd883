//! SDK sessions on the AHP side: each session an SDK app creates (or
//! resumes) is an AHP session too, `ahp-session:/sdk-<sessionId>`, owned by
//! the `[sdk] principal`, with a chat whose turns are the app's: its
//! `session.send` starts one (the prompt as the message), the runtime's
//! events stream into it through the same mapping as a bridged session's
//! ([`crate::bridge::turn_mapper::TurnMapper`]). Observers with the `observe`
//! role list and watch them; the state's `_meta` marks them (`sdk`). The
//! app drives them; the AHP side only watches (an admin may dispose one:
//! the app is told, see [`super::SdkGate::disposed`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use ahp_types::actions::{SessionReadyAction, StateAction};
use serde_json::value::RawValue;
use tracing::debug;

use crate::ahp::config_schema;
use crate::ahp::session_commands::new_session;
use crate::ahp::sessions::WATCHED_ONLY;
use crate::ahp::uri::chat_uri_of;
use crate::ahp::Host;
use crate::ahp::Principal;
use crate::bridge::turn_mapper::{user_turn_started, TurnMapper};
use crate::runtime::Mismatch;
use crate::runtime::Repeats;
use crate::runtime::{Arrived, RuntimeEvent, SESSION_EVENT};

/// The AHP session an SDK session is shown as.
pub(crate) fn uri_of(session_id: &str) -> String {
    format!("ahp-session:/sdk-{session_id}")
}

/// The SDK session an AHP session shows, if it shows one.
pub(crate) fn session_of(uri: &str) -> Option<&str> {
    uri.strip_prefix("ahp-session:/sdk-")
}

pub(super) struct Mirror {
    host: Weak<Host>,
    principal: Arc<Principal>,
    /// SDK session id -> its running turn.
    turns: Mutex<HashMap<String, MirroredTurn>>,
}

struct MirroredTurn {
    mapper: TurnMapper,
    started: Instant,
    /// The turn's events so far, by id: a repeat is dropped.
    seen: Repeats,
}

impl MirroredTurn {
    /// How long it has run, as the chat's actions state durations.
    fn elapsed_ms(&self) -> i64 {
        i64::try_from(self.started.elapsed().as_millis()).unwrap_or(i64::MAX)
    }
}

impl Mirror {
    pub(super) fn new(host: Weak<Host>, principal: Arc<Principal>) -> Self {
        Self {
            host,
            principal,
            turns: Mutex::new(HashMap::new()),
        }
    }

    /// The app created or resumed `session_id`: shown, ready.
    pub(super) fn session(&self, session_id: &str) {
        let Some(host) = self.host.upgrade() else {
            return;
        };
        let uri = uri_of(session_id);
        if host
            .session_list()
            .sessions_owned_by(&self.principal.name)
            .contains(&uri)
        {
            return;
        }
        let Ok(config) = config_schema::initial_state(&host, None) else {
            return;
        };
        let mut new = new_session(&uri, &self.principal, vec![], config);
        new.state.title = format!("SDK session {session_id}");
        let mut meta = ahp_types::common::JsonObject::new();
        meta.insert(WATCHED_ONLY.into(), serde_json::Value::Bool(true));
        new.state.meta = Some(meta);
        if host.session_list().add_watched_session(new).is_ok() {
            let _ = host.dispatch(&uri, StateAction::SessionReady(SessionReadyAction {}));
        }
    }

    /// The app sent `prompt` to `session_id`: a turn starts in its chat.
    pub(super) fn send(&self, session_id: &str, prompt: &str) {
        let Some(host) = self.host.upgrade() else {
            return;
        };
        let chat = chat_uri_of(&uri_of(session_id));
        let turn_id = uuid::Uuid::new_v4().to_string();
        let started = user_turn_started(turn_id.clone(), prompt.to_owned());
        if host.dispatch(&chat, started).is_ok() {
            let turn = MirroredTurn {
                mapper: TurnMapper::new(turn_id),
                started: Instant::now(),
                seen: Repeats::default(),
            };
            self.lock().insert(session_id.to_owned(), turn);
        }
    }

    /// A `session.event` the runtime sent the app: into the chat's turn.
    pub(super) fn event(&self, params: &RawValue) {
        let mut de = serde_json::Deserializer::from_str(params.get());
        let Arrived {
            session_id,
            id,
            event,
        } = match RuntimeEvent::parse(&mut de) {
            Ok(a) => a,
            Err(m) => {
                m.report();
                return;
            }
        };
        let Some(host) = self.host.upgrade() else {
            return;
        };
        let chat = chat_uri_of(&uri_of(&session_id));
        let actions = {
            let mut turns = self.lock();
            let Some(turn) = turns.get_mut(&session_id) else {
                return;
            };
            if !turn.seen.first_arrival(id.as_deref()) {
                Mismatch::repeated(SESSION_EVENT, id.as_deref()).report();
                return;
            }
            let ms = turn.elapsed_ms();
            let actions = turn.mapper.map(&event, ms);
            if turn.mapper.ended {
                turns.remove(&session_id);
            }
            actions
        };
        for a in actions {
            if let Err(e) = host.dispatch(&chat, a) {
                debug!(session = %crate::telemetry::Escaped(&session_id), "an SDK turn's action was refused: {e}");
            }
        }
    }

    /// Ends `session_id`'s running turn with an error (the bridge stops, or
    /// an admin disposed the session); whether one was running.
    pub(super) fn end(&self, session_id: &str, error_type: &str, message: &str) -> bool {
        let Some(mut turn) = self.lock().remove(session_id) else {
            return false;
        };
        if let Some(host) = self.host.upgrade() {
            let ms = turn.elapsed_ms();
            for a in turn.mapper.error(error_type, message, ms) {
                let _ = host.dispatch(&chat_uri_of(&uri_of(session_id)), a);
            }
        }
        true
    }

    /// The app went away: a turn of `sessions` still running is shown
    /// cancelled (the runtime was told to abort it).
    pub(super) fn app_gone(&self, sessions: &[String]) {
        let Some(host) = self.host.upgrade() else {
            return;
        };
        for s in sessions {
            let Some(mut turn) = self.lock().remove(s) else {
                continue;
            };
            let ms = turn.elapsed_ms();
            for a in turn.mapper.cancelled(ms) {
                let _ = host.dispatch(&chat_uri_of(&uri_of(s)), a);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, MirroredTurn>> {
        self.turns.lock().unwrap_or_else(|e| e.into_inner())
    }
}
