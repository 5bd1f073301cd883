//! Where a bridged session lives on the runtime: its runtime session id,
//! the runtime of the pool it stays on, the binding of the live runtime
//! session (and the process generation it lives in), whether the runtime
//! keeps it on disk, its model and custom agent, and the runtime events
//! already seen. Owned by [`super::session::BridgedSession`]; the turn's
//! life is there.

use super::binding::Binding;
use crate::runtime::Repeats;

pub(super) struct Placement {
    runtime_id: String,
    /// The runtime of the pool it lives on, for its whole life.
    slot: usize,
    /// The binding of the live runtime session, and the runtime process
    /// generation it lives in; `None`: create or resume first.
    bound: Option<(Binding, u64)>,
    /// The runtime keeps the session on disk (it has had a message):
    /// re-binding resumes it. Before that there is nothing to resume.
    persisted: bool,
    /// The model the runtime session was last given (at bind or by a
    /// switch), or the one its first turn chose.
    model: Option<String>,
    /// The custom agent selected in the runtime session (see [`Self::agent`]).
    agent: Option<Option<String>>,
    /// The latest runtime events' ids: while the session moves to another
    /// connection both may tell of it, and a repeat must not be shown.
    seen: Repeats,
}

impl Placement {
    pub(super) fn new(runtime_id: String, slot: usize, persisted: bool) -> Self {
        Self {
            runtime_id,
            slot,
            bound: None,
            persisted,
            model: None,
            agent: Some(None),
            seen: Repeats::default(),
        }
    }

    /// Whether the runtime event `id` is new for this session (else a
    /// repeat, to drop); remembers it.
    pub(super) fn first_arrival(&mut self, id: Option<&str>) -> bool {
        self.seen.first_arrival(id)
    }

    pub(super) fn runtime_id(&self) -> &str {
        &self.runtime_id
    }

    pub(super) fn slot(&self) -> usize {
        self.slot
    }

    pub(super) fn is_bound(&self) -> bool {
        self.bound.is_some()
    }

    /// The binding, if it lives in runtime process `generation`.
    pub(super) fn binding_in(&self, generation: u64) -> Option<&Binding> {
        self.bound
            .as_ref()
            .filter(|(_, g)| *g == generation)
            .map(|(b, _)| b)
    }

    /// Bound (created or resumed) as `binding` in `generation` with `model`.
    pub(super) fn bound(&mut self, binding: Binding, generation: u64, model: String) {
        self.bound = Some((binding, generation));
        self.model = Some(model);
        // A resumed session may bring back the agent its history selected.
        self.agent = None;
    }

    /// The custom agent the runtime session has selected, by name: `None`
    /// when not known (after a resume), `Some(None)` when none.
    pub(super) fn agent(&self) -> Option<Option<&str>> {
        self.agent.as_ref().map(Option::as_deref)
    }

    pub(super) fn set_agent(&mut self, agent: Option<&str>) {
        self.agent = Some(agent.map(String::from));
    }

    pub(super) fn persisted(&self) -> bool {
        self.persisted
    }

    /// The runtime has the session on disk now; true the first time.
    pub(super) fn persist(&mut self) -> bool {
        !std::mem::replace(&mut self.persisted, true)
    }

    pub(super) fn model(&self) -> Option<&str> {
        self.model.as_deref()
    }

    pub(super) fn set_model(&mut self, model: &str) {
        self.model = Some(model.to_owned());
    }

    /// The client that contributed the session's tool `name`, if any.
    pub(super) fn tool_owner(&self, name: &str) -> Option<&str> {
        self.bound.as_ref()?.0.tool_owner(name)
    }

    /// A turn chose `model` before the session is bound: it is the one to
    /// bind with (bound, a change of model is a switch instead).
    pub(super) fn model_unless_bound(&mut self, model: &str) {
        if self.bound.is_none() {
            self.model = Some(model.to_owned());
        }
    }

    /// Its runtime process `generation` died: unbound if it lived there
    /// (true), else nothing changes (false).
    pub(super) fn lost(&mut self, generation: u64) -> bool {
        if self.binding_in(generation).is_none() {
            return false;
        }
        self.bound = None;
        true
    }
}
