// The prompt-sections pane: the section catalogue (restricted ones marked),
// this console's opt-in for the open session, and every
// `systemMessageTransform` request as it arrives, each section in an editor
// to rewrite before the answer goes back.

import { h, replace } from "./dom.js";
import { lacking, reason } from "./notice.js";

export class SectionsPane {
  /**
   * @param {import("./chat.js").Context} ctx
   * @param {HTMLElement} el
   */
  constructor(ctx, el) {
    this.ctx = ctx;
    this.el = el;
    /** @type {string|null} */
    this.session = null;
    this.seen = 0;
    /** @type {Array<{channel: string, outcome: HTMLElement}>} answered, their audit record not seen yet */
    this.awaiting = [];
    ctx.ahp.handle("systemMessageTransform", (params) => this.ask(params));
    ctx.ahp.on("action", (env) => this.onAction(env));
    ctx.ahp.on("$snapshot", (snap) => {
      if (snap.resource === this.session && this.list) this.showOptIn(this.mine(snap.state)?.systemMessageTransform?.sections || []);
    });
    ctx.ahp.on("$resumed", () => this.showRoles());
  }

  /** This console's entry among the session's active clients. */
  mine(/** @type {any} */ state) {
    return (state?.activeClients || []).find((/** @type {any} */ c) => c.clientId === this.ctx.clientId);
  }

  /** This console's opt-in as the host took it, or refused it. */
  onAction(env) {
    const a = env.action || {};
    if (env.channel !== this.session || a.type !== "session/activeClientSet") return;
    if (a.activeClient?.clientId !== this.ctx.clientId || !this.optInState) return;
    if (env.rejectionReason) {
      this.optInState.textContent = `opt-in refused: ${env.rejectionReason}`;
      this.optInState.className = "refused";
      this.showRoles();
      return;
    }
    this.showOptIn(a.activeClient.systemMessageTransform?.sections || []);
  }

  /** The opt-in in force: its boxes checked, and said. */
  showOptIn(/** @type {string[]} */ sections) {
    for (const box of this.list.querySelectorAll("input")) {
      const input = /** @type {HTMLInputElement} */ (box);
      input.checked = sections.includes(input.value);
    }
    this.optInState.textContent = `session ${this.session}: opted in to ${sections.join(", ") || "nothing"}`;
    this.optInState.className = "";
  }

  /** This console's opt-in in `uri` as the session's state holds it. */
  async loadOptIn(/** @type {string} */ uri) {
    try {
      const s = await this.ctx.ahp.request("subscribe", { channel: uri });
      if (this.session === uri && this.list) this.showOptIn(this.mine(s.snapshot?.state)?.systemMessageTransform?.sections || []);
    } catch (e) {
      if (this.optInState) this.optInState.textContent = `session ${uri}: ${reason(e)}`;
    }
  }

  catalogue() {
    return this.ctx.root.agents.flatMap((a) => a.systemMessageSections || []);
  }

  render() {
    const boxes = this.catalogue().map((s) => {
      const id = `section-${s.id}`;
      return h("li", {},
        h("input", { type: "checkbox", id, value: s.id, disabled: !!s.restricted, "data-restricted": String(!!s.restricted), "aria-describedby": "opt-in-role" }),
        h("label", { for: id }, s.label || s.id, " ", h("code", {}, s.id)),
        s.restricted ? h("span", { class: "badge" }, "restricted by policy") : null,
        s.description ? h("p", { class: "hint" }, s.description) : null);
    });
    this.list = h("ul", { id: "catalogue", class: "catalogue" }, boxes);
    this.optInState = h("p", { id: "opt-in-state", role: "status" }, "not opted in");
    this.roleNote = h("p", { id: "opt-in-role", class: "note", role: "status" });
    this.save = h("button", { type: "button", id: "opt-in", on: { click: () => this.optIn() } }, "Save opt-in");
    this.requests = h("ol", { id: "requests", "aria-label": "Transform requests", "aria-live": "polite" });
    replace(
      this.el,
      h("h2", {}, "Prompt sections"),
      h("fieldset", {},
        h("legend", {}, "Sections this console rewrites in the open session"),
        this.roleNote,
        this.list,
        this.save),
      this.optInState,
      h("h3", {}, "Transform requests"),
      this.requests,
    );
    this.showRoles();
  }

  /**
   * Without the transform role the opt-in would only be refused: its
   * controls say so and are off. A section the policy restricts stays off.
   */
  showRoles() {
    if (!this.list) return;
    this.roleNote.textContent = lacking(this.ctx, "transform", "this principal may not rewrite prompt sections (opting in needs the transform role)");
    this.roleNote.hidden = !this.roleNote.textContent;
    const may = !this.roleNote.textContent;
    this.save.disabled = !may;
    for (const box of this.list.querySelectorAll("input")) {
      const input = /** @type {HTMLInputElement} */ (box);
      input.disabled = !may || input.dataset.restricted === "true";
    }
  }

  /** @param {string|null} uri */
  setSession(uri) {
    this.session = uri;
    if (this.optInState) this.optInState.textContent = uri ? `session ${uri}: not opted in` : "no session";
    if (uri) this.loadOptIn(uri);
  }

  optIn() {
    if (!this.session) return;
    const sections = [...this.list.querySelectorAll("input:checked")].map((i) => /** @type {HTMLInputElement} */ (i).value);
    this.ctx.ahp.dispatch(this.session, {
      type: "session/activeClientSet",
      activeClient: { clientId: this.ctx.clientId, tools: [], systemMessageTransform: { sections } },
    });
    this.optInState.textContent = `session ${this.session}: opt-in sent`;
  }

  /**
   * An audit record: the decision on a request this pane answered.
   * @param {any} record
   */
  recordSeen(record) {
    if (record.kind !== "transform") return;
    const at = this.awaiting.findIndex((a) => a.channel === record.session);
    if (at < 0) return;
    const { outcome } = this.awaiting.splice(at, 1)[0];
    const refused = (record.sections || []).filter((s) => String(s.decision).startsWith("refused"));
    const said = (record.sections || []).map((s) => `${s.id}: ${s.decision}`).join(", ");
    outcome.textContent = `${refused.length ? "refused" : "applied"}: ${said} (audit record #${record.seq})`;
    outcome.dataset.outcome = refused.length ? "refused" : "applied";
    outcome.classList.toggle("refused", refused.length > 0);
  }

  /**
   * One request from the host: shown until the operator answers it.
   * @param {{channel: string, sections: Record<string, {content: string}>, _meta?: {timeoutMs?: number}}} params
   * @returns {Promise<any>}
   */
  ask(params) {
    return new Promise((resolve) => {
      const n = ++this.seen;
      const editors = Object.entries(params.sections || {}).map(([id, s]) => sectionEditor(n, id, s.content));
      const outcome = h("p", { class: "outcome", role: "status" }, "waiting for your answer");
      const clock = countdown(params._meta?.timeoutMs, () => {
        outcome.textContent = "too late: the host stopped waiting and kept the original text";
        outcome.classList.add("refused");
        card.dataset.answered = "late";
        disable();
      });
      const disable = () => {
        for (const b of card.querySelectorAll("button, textarea, input")) /** @type {any} */ (b).disabled = true;
      };
      const done = (/** @type {any} */ result, /** @type {string} */ said) => {
        clock.stop();
        disable();
        outcome.textContent = `${said}; what the host decided shows here once audited`;
        card.dataset.answered = "true";
        this.awaiting.push({ channel: params.channel, outcome });
        resolve(result);
      };
      const rewrite = () => {
        const sections = Object.fromEntries(editors.map((e) => [e.id, { content: e.text.value }]));
        done({ sections }, "rewrite sent");
      };
      const keep = () => {
        const sections = Object.fromEntries(Object.entries(params.sections).map(([id, s]) => [id, { content: s.content }]));
        done({ sections }, "original kept");
      };
      const card = h("li", { class: "request", "data-request": n },
        h("p", {}, "for ", h("code", {}, params.channel), " ", clock.el),
        editors.map((e) => e.el),
        h("button", { type: "button", class: "send-rewrite", on: { click: rewrite } }, "Send rewrite"),
        h("button", { type: "button", class: "keep", on: { click: keep } }, "Keep original"),
        outcome);
      this.requests.prepend(card);
    });
  }
}

/**
 * One section's editor: its text, and two quick modes (append a line,
 * replace a text).
 * @param {number} n
 * @param {string} id
 * @param {string} content
 */
function sectionEditor(n, id, content) {
  const key = `r${n}-${id}`;
  const text = /** @type {HTMLTextAreaElement} */ (h("textarea", { id: `${key}-text`, class: "section-text", "data-section": id, rows: 6, value: content }));
  const line = /** @type {HTMLInputElement} */ (h("input", { id: `${key}-line`, class: "append-line" }));
  const from = /** @type {HTMLInputElement} */ (h("input", { id: `${key}-from`, class: "replace-from" }));
  const to = /** @type {HTMLInputElement} */ (h("input", { id: `${key}-to`, class: "replace-to" }));
  const append = () => {
    text.value = `${text.value}\n${line.value}`;
  };
  const substitute = () => {
    if (from.value) text.value = text.value.split(from.value).join(to.value);
  };
  const el = h("div", { class: "section" },
    h("label", { for: `${key}-text` }, "Section ", h("code", {}, id)), text,
    h("div", { class: "row" },
      h("label", { for: `${key}-line` }, "Line to append"), line,
      h("button", { type: "button", class: "do-append", on: { click: append } }, "Append")),
    h("div", { class: "row" },
      h("label", { for: `${key}-from` }, "Replace"), from,
      h("label", { for: `${key}-to` }, "with"), to,
      h("button", { type: "button", class: "do-replace", on: { click: substitute } }, "Replace")));
  return { id, el, text };
}

/**
 * The time left until the host's deadline, shown each quarter second;
 * `expired` runs once when it passes. Without a deadline, nothing counts.
 * @param {number|undefined} ms
 * @param {() => void} expired
 */
function countdown(ms, expired) {
  const el = h("span", { class: "countdown", role: "timer" });
  if (!ms) return { el, stop() {} };
  const until = Date.now() + ms;
  const tick = () => {
    const left = until - Date.now();
    el.textContent = `${Math.max(0, left / 1000).toFixed(1)} s left`;
    if (left <= 0) {
      clearInterval(timer);
      expired();
    }
  };
  const timer = setInterval(tick, 250);
  tick();
  return { el, stop: () => clearInterval(timer) };
}
