//! The link to the runtime's AHP host, kept up: the first connection made
//! before the bridge serves (so a host that cannot start or refuses the
//! token stops the start, in its own words), then events read in order
//! until the connection ends or a ping goes unanswered; then the turns in
//! flight end with [`LINK_LOST`](super::LINK_LOST), and the link is made
//! again with backoff (a host the bridge started is started again if it
//! died): a fresh `initialize`, a fresh challenge, a fresh sealed token,
//! and every relayed session subscribed again. The host keeps its sessions,
//! so nothing the clients held is lost.

use std::sync::Arc;
use std::time::Duration;

use ahp::ClientEventStream;
use ahp_types::state::SnapshotState;
use tracing::{info, warn};

use super::relay_error::RelayError;
use super::{config, upstream_events, Relay, RelaySettings, LINK_LOST};
use crate::ahp::Host;
use crate::upstream;
use crate::upstream::{link, Target, UpstreamError};

/// The first wait before linking again, and the longest.
const BACKOFF_FIRST: Duration = Duration::from_millis(250);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// Links to the host (starting it without `connect`) and authenticates
/// before it returns, so a wrong token or a host that cannot start fails
/// the bridge's start with the host's own words; then keeps the link up.
pub(crate) async fn start(
    host: &Arc<Host>,
    settings: RelaySettings,
) -> Result<Arc<Relay>, RelayError> {
    let relay = Relay::new(host, settings);
    let events = Supervisor::connect(&relay).await?;
    tokio::spawn(Supervisor::run(relay.clone(), events));
    Ok(relay)
}

/// The link's keeper.
struct Supervisor;

impl Supervisor {
    /// Reads events until the link ends, then links again, until the relay
    /// stops.
    async fn run(relay: Arc<Relay>, mut events: ClientEventStream) {
        let metrics = crate::telemetry::metrics();
        metrics.runtime_up(0, true);
        loop {
            pump(&relay, &mut events).await;
            relay.set_client(None);
            metrics.runtime_up(0, false);
            if relay.stop.is_cancelled() {
                return;
            }
            for (r, turn) in relay.sessions.take_running() {
                relay.end_turn_north(&r.north, &turn.id, LINK_LOST);
            }
            warn!("the link to the agent host was lost; linking again");
            let mut wait = BACKOFF_FIRST;
            events = loop {
                tokio::select! {
                    _ = relay.stop.cancelled() => return,
                    _ = tokio::time::sleep(wait) => {}
                }
                match Self::connect(&relay).await {
                    Ok(ev) => break ev,
                    Err(e) => {
                        wait = (wait * 2).min(BACKOFF_MAX);
                        warn!(retry_in = ?wait, "linking to the agent host failed: {e}");
                    }
                }
            };
            metrics.runtime_restarted(0);
            metrics.runtime_up(0, true);
            info!("linked to the agent host again");
        }
    }

    /// Starts the host if the bridge runs it and it is not running,
    /// connects, authenticates, and subscribes every relayed session again.
    async fn connect(relay: &Arc<Relay>) -> Result<ClientEventStream, RelayError> {
        let rt = &relay.settings.runtime;
        let (url, token) = match rt.ahp_url() {
            Some(url) => (url.to_owned(), relay.settings.connection_token.clone()),
            None => {
                let (url, token) = relay
                    .process
                    .running(&relay.settings.runtime, &relay.settings.home)
                    .await?;
                (url, Some(token))
            }
        };
        let github = relay.settings.github.read()?;
        let target = Target {
            url: &url,
            token: token.as_ref(),
            call_timeout: rt.call_timeout,
            max_frame_bytes: rt.max_frame_bytes,
        };
        let linked = link(&target, &relay.client_id, &github).await?;
        // The host's own session settings, offered to the bridge's clients.
        match upstream::config_schema(&linked.client).await {
            Ok(schema) => {
                if let Some(host) = relay.host() {
                    host.settings()
                        .backend_config()
                        .set(config::offered(schema));
                }
            }
            Err(e) => warn!("the agent host did not give its session settings: {e}"),
        }
        let mut left_active = Vec::new();
        let mut lost = Vec::new();
        for r in relay.sessions.all() {
            let state = match upstream::session_state(&linked.client, &r.up).await {
                Ok(state) => state,
                // Started afresh once linked (below): one session the host
                // lost must not keep every other one unlinked.
                Err(UpstreamError::NotFound { .. }) => {
                    lost.push((r.north, r.up));
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let Some(chat) = &upstream::default_chat(&state) else {
                continue;
            };
            relay.sessions.set_up_chat(&r.north, chat);
            if let Some(SnapshotState::Chat(c)) = upstream::subscribe(&linked.client, chat).await? {
                // A host killed mid-turn can bring that turn back as still
                // active, and refuses the next until it is cancelled. The
                // bridge ended it when the link was lost.
                if let Some(t) = c.active_turn.filter(|_| r.turn.is_none()) {
                    left_active.push((r.north.clone(), t.id));
                }
            }
        }
        relay.set_client(Some(linked.client));
        for (north, turn) in left_active {
            relay.cancel_upstream(&north, turn);
        }
        for (north, up) in lost {
            relay.start_afresh(&north, &up).await;
        }
        info!(%url, sessions = relay.sessions.len(), "linked to the agent host");
        Ok(linked.events)
    }
}

/// Reads `events` until the link ends, a ping goes unanswered, or the relay
/// stops.
async fn pump(relay: &Arc<Relay>, events: &mut ClientEventStream) {
    let rt = &relay.settings.runtime;
    let every = (!rt.health_interval.is_zero()).then_some(rt.health_interval);
    let mut ticks = every.map(|e| tokio::time::interval_at(tokio::time::Instant::now() + e, e));
    // Silent turns are looked for ten times per timeout (at most once a
    // second): a turn ends within a tenth of the timeout past it.
    let look = (rt.turn_inactivity_timeout / 10).max(Duration::from_secs(1));
    let mut silence = tokio::time::interval_at(tokio::time::Instant::now() + look, look);
    loop {
        let tick = async {
            match ticks.as_mut() {
                Some(t) => {
                    t.tick().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = relay.stop.cancelled() => return,
            ev = events.recv() => match ev {
                Some(ev) => upstream_events::handle(relay, ev).await,
                None => return,
            },
            _ = silence.tick() => relay.end_silent_turns(),
            _ = tick => {
                let Some(client) = relay.client() else { return };
                if !matches!(tokio::time::timeout(rt.health_timeout, client.ping()).await, Ok(Ok(()))) {
                    warn!(timeout = ?rt.health_timeout, "the agent host did not answer a ping");
                    client.shutdown().await;
                    return;
                }
            }
        }
    }
}
