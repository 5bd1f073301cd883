// The chat pane: sessions (create with a model, dispose), a turn's streamed
// answer, tool calls to confirm or deny, cancel. Everything the model or the
// host says is shown as text.

import { h, plainText, replace } from "./dom.js";
import { lacking, reason, refused } from "./notice.js";
import { questionBlock } from "./questions.js";
import { markdown } from "./md.js";

/**
 * The connection and who this page is: `principal` and `roles` come with
 * each ticket, so a pane can say what the principal may not do before it
 * tries; `clientId` changes when a reconnect had to start afresh.
 * @typedef {{ahp: import("./ahp.js").Ahp, clientId: string, root: any, meta: any, principal: string, roles: string[]}} Context
 */

/** The chat of a session, as the host derives it (base64url of the URI). */
export function chatOf(/** @type {string} */ session) {
  const b64 = btoa(String.fromCharCode(...new TextEncoder().encode(session)));
  return `ahp-chat://default/${b64.replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")}`;
}

/**
 * The custom agents a session lists, in containers and entries that are on.
 * @param {any[]} customizations the session state's `customizations`
 * @returns {{uri: string, name: string}[]}
 */
export function agentsOf(customizations) {
  const on = (/** @type {any} */ c) => c.enabled !== false && !(c.enablement || []).some((/** @type {any} */ e) => e.enabled === false);
  return customizations.filter(on).flatMap((c) => (c.children || [])
    .filter((/** @type {any} */ k) => k.type === "agent" && k.enabled !== false)
    .map((/** @type {any} */ k) => ({ uri: k.uri, name: k.name })));
}

export class ChatPane {
  /**
   * @param {Context} ctx
   * @param {HTMLElement} el
   * @param {(session: string|null) => void} onSession
   */
  constructor(ctx, el, onSession) {
    this.ctx = ctx;
    this.el = el;
    this.onSession = onSession;
    /** @type {string|null} */
    this.session = null;
    /** @type {string|null} */
    this.runningTurn = null;
    /** @type {Map<string, HTMLElement>} */
    this.turns = new Map();
    /** @type {Map<string, HTMLElement>} */
    this.parts = new Map();
    /** @type {Map<string, HTMLElement>} */
    this.tools = new Map();
    ctx.ahp.on("action", (env) => this.onAction(env));
    // Sessions another client creates or disposes, as the root tells of them.
    ctx.ahp.on("root/sessionAdded", (p) => this.sessionPick && this.addSessionOption(p.summary?.resource, p.summary?.title, p.summary?._meta?.sdk === true));
    ctx.ahp.on("root/sessionRemoved", (p) => this.sessionGone(p.session));
    // Back after a drop: what was missed came as actions, or as snapshots.
    ctx.ahp.on("$snapshot", (snap) => this.resync(snap));
    ctx.ahp.on("$missing", (m) => m.channel === this.session && this.sessionGone(m.channel));
    ctx.ahp.on("$closed", () => this.updateSend());
    ctx.ahp.on("$resumed", () => {
      this.showRoles();
      this.listSessions();
    });
  }

  /** @param {any} snap a channel's state afresh, after a reconnect */
  resync(snap) {
    if (!this.session || !this.sessionPick) return;
    if (snap.resource === this.session) {
      this.showLifecycle(snap.state?.lifecycle);
      this.showAgents(snap.state?.customizations || []);
    } else if (snap.resource === chatOf(this.session)) {
      this.showChat(snap.state);
    }
  }

  /** @param {string} uri a session disposed, here or elsewhere */
  sessionGone(uri) {
    if (!this.sessionPick) return;
    [...this.sessionPick.options].find((o) => o.value === uri)?.remove();
    if (this.session === uri) this.open(this.sessionPick.value || null);
  }

  models() {
    return this.ctx.root.agents.flatMap((a) => a.models.map((m) => ({ ...m, agent: a.provider })));
  }

  render() {
    const models = this.models();
    this.modelPick = h("select", { id: "model" }, models.map((m) => h("option", { value: `${m.agent}\n${m.id}` }, m.name || m.id)));
    this.sessionPick = h("select", { id: "session", on: { change: () => this.open(this.sessionPick.value || null) } });
    this.state = h("p", { id: "session-state", role: "status" }, "no session");
    this.transcript = h("ol", { id: "transcript", "aria-label": "Turns", "aria-live": "polite" });
    this.prompt = h("textarea", { id: "prompt", rows: 3, "aria-describedby": "composer-note", on: { keydown: (e) => this.key(e) } });
    this.note = h("p", { id: "composer-note", class: "note", role: "status" });
    this.send = h("button", { type: "submit", id: "send", disabled: true }, "Send");
    this.cancel = h("button", { type: "button", id: "cancel", disabled: true, on: { click: () => this.cancelTurn() } }, "Cancel turn");
    this.sendAs = h("select", { id: "send-as" },
      h("option", { value: "turn" }, "a new turn"),
      h("option", { value: "queued" }, "queued: a turn after this one"),
      h("option", { value: "steering" }, "steering: into the running turn"));
    this.pending = h("ul", { id: "pending", "aria-label": "Pending messages" });
    this.agentPick = h("select", { id: "agent" }, h("option", { value: "" }, "none"));
    replace(
      this.el,
      h("h2", {}, "Chat"),
      h("div", { class: "row" },
        h("label", { for: "model" }, "Model"), this.modelPick,
        h("button", { type: "button", id: "create", on: { click: () => this.create() } }, "New session"),
        h("label", { for: "session" }, "Session"), this.sessionPick,
        h("button", { type: "button", id: "dispose", on: { click: () => this.dispose() } }, "Dispose")),
      this.state,
      this.transcript,
      this.composer = h("form", { class: "composer", on: { submit: (e) => { e.preventDefault(); this.startTurn(); } } },
        h("label", { for: "prompt" }, "Message (Enter sends, Shift+Enter starts a new line)"), this.prompt, this.note,
        h("div", { class: "row" }, h("label", { for: "send-as" }, "Send as"), this.sendAs,
          h("label", { for: "agent" }, "Custom agent"), this.agentPick),
        this.send, this.cancel, this.pending),
    );
    this.showRoles();
    this.listSessions();
  }

  /** What this principal may not do here, said before it tries. */
  showRoles() {
    this.note.textContent = lacking(this.ctx, "participate", "this principal may watch, not send (sending needs the participate role)");
    this.note.hidden = !this.note.textContent;
    this.updateSend();
  }

  /**
   * Send is offered only when it can work: a ready session, the role, a
   * connection, and not an SDK app's session (the app drives its turns).
   */
  updateSend() {
    if (!this.send) return;
    const sdk = this.sessionPick?.selectedOptions[0]?.dataset.sdk === "true";
    const may = this.ctx.roles.includes("participate") && this.ctx.ahp.open && !sdk;
    this.send.disabled = !may || this.state.dataset.lifecycle !== "ready";
    this.cancel.disabled = !may || !this.runningTurn;
  }

  /**
   * Enter sends, Shift+Enter starts a new line (the textarea's own). Not
   * while an input method composes a character: its Enter picks the character.
   * @param {KeyboardEvent} e
   */
  key(e) {
    if (e.key !== "Enter" || e.shiftKey || e.isComposing) return;
    e.preventDefault();
    if (!this.send.disabled) this.composer.requestSubmit();
  }

  async listSessions() {
    try {
      const r = await this.ctx.ahp.request("listSessions", { limit: 50 });
      for (const s of r.items || r.sessions || []) this.addSessionOption(s.resource || s.channel, s.title, s._meta?.sdk === true);
      if (!this.session && this.sessionPick.value) this.open(this.sessionPick.value);
    } catch (e) {
      refused("listSessions", reason(e));
    }
  }

  /**
   * @param {string} uri
   * @param {string} [title]
   * @param {boolean} [sdk] an SDK app's session: watched here, driven by the app
   */
  addSessionOption(uri, title, sdk = false) {
    if (!uri || [...this.sessionPick.options].some((o) => o.value === uri)) return;
    const label = title ? `${title} (${uri})` : uri;
    const attrs = sdk ? { value: uri, "data-sdk": "true" } : { value: uri };
    this.sessionPick.append(h("option", attrs, sdk ? `SDK app · ${label}` : label));
  }

  async create() {
    const [provider, model] = this.modelPick.value.split("\n");
    const uri = `ahp-session:/${crypto.randomUUID()}`;
    try {
      await this.ctx.ahp.request("createSession", { channel: uri, provider, config: model ? { model } : undefined });
    } catch (e) {
      refused("createSession", reason(e));
      return;
    }
    this.addSessionOption(uri, "");
    this.sessionPick.value = uri;
    await this.open(uri);
  }

  async dispose() {
    if (!this.session) return;
    const uri = this.session;
    try {
      await this.ctx.ahp.request("disposeSession", { channel: uri });
      this.sessionGone(uri);
    } catch (e) {
      refused("disposeSession", reason(e));
    }
  }

  /** @param {string|null} uri */
  async open(uri) {
    if (this.session) {
      this.ctx.ahp.send({ jsonrpc: "2.0", method: "unsubscribe", params: { channel: chatOf(this.session) } });
    }
    this.session = uri;
    this.turns.clear();
    this.parts.clear();
    this.tools.clear();
    replace(this.transcript);
    this.onSession(uri);
    if (!uri) {
      this.state.textContent = "no session";
      return;
    }
    try {
      const s = await this.ctx.ahp.request("subscribe", { channel: uri });
      this.showLifecycle(s.snapshot?.state?.lifecycle);
      this.showAgents(s.snapshot?.state?.customizations || []);
      const c = await this.ctx.ahp.request("subscribe", { channel: chatOf(uri) });
      this.showChat(c.snapshot?.state);
    } catch (e) {
      refused(`subscribe ${uri}`, reason(e));
    }
  }

  /** The agents a message may be sent with, keeping the one chosen. */
  showAgents(/** @type {any[]} */ customizations) {
    const chosen = this.agentPick.value;
    replace(this.agentPick, h("option", { value: "" }, "none"),
      agentsOf(customizations).map((a) => h("option", { value: a.uri }, a.name)));
    this.agentPick.value = [...this.agentPick.options].some((o) => o.value === chosen) ? chosen : "";
  }

  /** The session's customizations changed: its agents are read again. */
  async refreshAgents() {
    const uri = this.session;
    if (!uri) return;
    try {
      const s = await this.ctx.ahp.request("subscribe", { channel: uri });
      if (this.session === uri) this.showAgents(s.snapshot?.state?.customizations || []);
    } catch (e) {
      refused(`subscribe ${uri}`, reason(e));
    }
  }

  showLifecycle(lifecycle) {
    this.state.textContent = `session ${this.session}: ${lifecycle || "unknown"}`;
    this.state.dataset.lifecycle = lifecycle || "";
    this.updateSend();
  }

  /**
   * The chat as its state holds it: the turns, each with how it ended, and
   * the running one, whose next deltas then go on where it stands.
   * @param {any} state the chat channel's state
   */
  showChat(state) {
    this.turns.clear();
    this.parts.clear();
    this.tools.clear();
    this.runningTurn = null;
    replace(this.transcript);
    replace(this.pending);
    for (const turn of state?.turns || []) this.showPastTurn(turn);
    const active = state?.activeTurn;
    if (active) {
      this.showParts(this.turnElement(active.id, plainText(active.message?.text)), active.id, active.responseParts);
      this.running(active.id);
    }
    for (const m of state?.queuedMessages || []) this.showPending({ type: "chat/pendingMessageSet", kind: "queued", id: m.id, message: m.message });
    const steering = state?.steeringMessage;
    if (steering) this.showPending({ type: "chat/pendingMessageSet", kind: "steering", id: steering.id, message: steering.message });
    this.updateSend();
  }

  showPastTurn(turn) {
    const el = this.turnElement(turn.id, plainText(turn.message?.text));
    this.showParts(el, turn.id, turn.responseParts);
    const end = { complete: "turnComplete", cancelled: "turnCancelled", error: "error" }[turn.state];
    if (end) el.dataset.end = end;
  }

  /**
   * A turn's text parts, each kept so that a later delta extends it, and
   * its tool calls, one waiting for confirmation with Allow and Deny.
   * @param {HTMLElement} el
   * @param {string} turnId
   * @param {any[]} parts
   */
  showParts(el, turnId, parts) {
    for (const part of parts || []) {
      if (typeof part.content === "string") this.part(el, part.id, part.content);
      const t = part.toolCall;
      if (!t?.toolCallId) continue;
      this.tool(el, t.toolCallId).querySelector(".tool-name").textContent = t.displayName || t.toolName;
      this.toolReady(el, { ...t, turnId, confirmed: t.status !== "pending-confirmation" });
      if (t.status === "completed") this.toolDone(el, { toolCallId: t.toolCallId, result: t });
    }
  }

  turnElement(turnId, text) {
    let el = this.turns.get(turnId);
    if (!el) {
      el = h("li", { class: "turn", "data-turn": turnId }, h("p", { class: "user" }, text));
      this.turns.set(turnId, el);
      this.transcript.append(el);
    }
    return el;
  }

  startTurn() {
    const text = this.prompt.value.trim();
    if (!text || !this.session) return;
    if (!this.ctx.ahp.open) {
      // Kept in the field, to send once connected again.
      refused("send", "not connected: the console is reconnecting; send again once connected");
      return;
    }
    if (this.sendAs.value !== "turn") return this.sendPending(this.sendAs.value, text);
    const turnId = crypto.randomUUID();
    this.ctx.ahp.dispatch(chatOf(this.session), {
      type: "chat/turnStarted",
      turnId,
      startedAt: new Date().toISOString(),
      message: this.message(text),
    });
    this.prompt.value = "";
  }

  /** A user message, with the custom agent chosen, if any. */
  message(/** @type {string} */ text) {
    const agent = this.agentPick.value;
    return agent ? { text, origin: { kind: "user" }, agent: { uri: agent } } : { text, origin: { kind: "user" } };
  }

  /** A queued or steering message: the host starts or injects it. */
  sendPending(kind, text) {
    const message = this.message(text);
    this.ctx.ahp.dispatch(chatOf(/** @type {string} */ (this.session)), { type: "chat/pendingMessageSet", kind, id: crypto.randomUUID(), message });
    this.prompt.value = "";
  }

  /** The chat's pending messages, as the host echoes them. */
  showPending(a) {
    const key = `${a.kind}/${a.id}`;
    const old = [...this.pending.children].find((li) => /** @type {HTMLElement} */ (li).dataset.pending === key);
    if (a.type === "chat/pendingMessageRemoved") return old?.remove();
    if (!old) this.pending.append(h("li", { "data-pending": key }, `${a.kind}: ${plainText(a.message?.text)}`));
  }

  cancelTurn() {
    if (!this.session || !this.runningTurn) return;
    this.ctx.ahp.dispatch(chatOf(this.session), { type: "chat/turnCancelled", turnId: this.runningTurn, duration: 0 });
  }

  /** @param {any} env an action envelope */
  onAction(env) {
    if (!this.session) return;
    if (env.channel === this.session) {
      const t = env.action.type;
      if (t === "session/ready") this.showLifecycle("ready");
      if (t === "session/creationFailed") this.showLifecycle("failed");
      if (t.startsWith("session/customization")) this.refreshAgents();
      return;
    }
    if (env.channel !== chatOf(this.session)) return;
    if (env.rejectionReason) {
      this.showRefusal(env.action, env.rejectionReason);
      return;
    }
    this.applyChat(env.action);
  }

  /** A refused action, in the turn it belongs to (a refused turn shows as one). */
  showRefusal(a, why) {
    if (!a.turnId) return;
    const turn = this.turnElement(a.turnId, plainText(a.message?.text));
    turn.append(h("p", { class: "refused" }, `${a.type} refused: ${why}`));
    if (a.type === "chat/turnStarted") turn.dataset.end = "refused";
    this.updateSend();
  }

  applyChat(a) {
    if (a.type === "chat/inputRequested") return this.question(a.request);
    if (a.type === "chat/pendingMessageSet" || a.type === "chat/pendingMessageRemoved") return this.showPending(a);
    if (a.type === "chat/inputCompleted") {
      this.el.querySelector(`.question[data-request="${CSS.escape(a.requestId)}"]`)?.replaceChildren(h("p", { class: "end" }, "answered"));
      return;
    }
    const turn = a.turnId ? this.turnElement(a.turnId, plainText(a.message?.text)) : null;
    if (!turn) return;
    switch (a.type) {
      case "chat/turnStarted":
        this.running(a.turnId);
        break;
      case "chat/responsePart":
        if (typeof a.part?.content === "string") this.part(turn, a.part.id, a.part.content);
        break;
      case "chat/delta":
        this.part(turn, a.partId, a.content);
        break;
      case "chat/toolCallStart":
        this.tool(turn, a.toolCallId).querySelector(".tool-name").textContent = a.displayName || a.toolName;
        break;
      case "chat/toolCallReady":
        this.toolReady(turn, a);
        break;
      case "chat/toolCallConfirmed":
        this.tool(turn, a.toolCallId).querySelector(".tool-actions")?.replaceChildren(a.approved ? "approved" : "denied");
        break;
      case "chat/toolCallComplete":
        this.toolDone(turn, a);
        break;
      case "chat/turnComplete":
      case "chat/turnCancelled":
      case "chat/error":
        this.ended(turn, a);
        break;
    }
  }

  /** A question of the agent, in the running turn. */
  question(request) {
    const turn = this.runningTurn && this.turns.get(this.runningTurn);
    if (!turn || !this.session) return;
    const chat = chatOf(this.session);
    turn.append(questionBlock(request, (answers) =>
      this.ctx.ahp.dispatch(chat, { type: "chat/inputCompleted", requestId: request.id, response: "accept", answers })));
  }

  running(turnId) {
    this.runningTurn = turnId;
    this.updateSend();
  }

  ended(turn, a) {
    const kind = a.type.slice("chat/".length);
    turn.dataset.end = kind;
    turn.append(h("p", { class: kind === "turnComplete" ? "end" : "end refused" }, a.type === "chat/error" ? `error: ${plainText(a.part?.error?.message)}` : kind));
    if (this.runningTurn === a.turnId) {
      this.runningTurn = null;
      this.updateSend();
    }
  }

  /** A response part's text grows; it is shown again as markdown. */
  part(turn, partId, text) {
    const key = `${turn.dataset.turn}/${partId}`;
    let el = this.parts.get(key);
    if (!el) {
      el = h("div", { class: "part answer" });
      el.dataset.text = "";
      this.parts.set(key, el);
      turn.append(el);
    }
    el.dataset.text += text;
    replace(el, markdown(el.dataset.text));
  }

  tool(turn, id) {
    let el = this.tools.get(id);
    if (!el) {
      el = h("div", { class: "tool", "data-tool": id }, h("p", { class: "tool-name" }, "tool"), h("pre", { class: "tool-input" }), h("div", { class: "tool-actions" }), h("pre", { class: "tool-output" }));
      this.tools.set(id, el);
      turn.append(el);
    }
    return el;
  }

  toolReady(turn, a) {
    const el = this.tool(turn, a.toolCallId);
    el.querySelector(".tool-input").textContent = [plainText(a.invocationMessage), plainText(a.toolInput)].filter(Boolean).join("\n");
    if (a.confirmed) return;
    const answer = (/** @type {boolean} */ approved) => () => {
      const action = approved
        ? { type: "chat/toolCallConfirmed", turnId: a.turnId, toolCallId: a.toolCallId, approved, confirmed: "user-action" }
        : { type: "chat/toolCallConfirmed", turnId: a.turnId, toolCallId: a.toolCallId, approved };
      this.ctx.ahp.dispatch(chatOf(/** @type {string} */ (this.session)), action);
    };
    el.querySelector(".tool-actions").replaceChildren(
      h("button", { type: "button", class: "approve", on: { click: answer(true) } }, "Allow"),
      h("button", { type: "button", class: "deny", on: { click: answer(false) } }, "Deny"),
    );
  }

  toolDone(turn, a) {
    const el = this.tool(turn, a.toolCallId);
    const r = a.result || {};
    const text = (r.content || []).map((c) => c.text || "").join("\n");
    el.dataset.success = String(!!r.success);
    el.querySelector(".tool-output").textContent = [plainText(r.pastTenseMessage), text].filter(Boolean).join("\n");
  }
}
