// The policy pane: the effective policy from `x-policy://effective` (each
// section's access, mode, limits and rules, who may transform, the limits
// of a request), its hash and when it was loaded; a reload redraws it.

import { h, replace } from "./dom.js";
import { reason } from "./notice.js";

export const POLICY = "x-policy://effective";

export class PolicyPane {
  /**
   * @param {import("./chat.js").Context} ctx
   * @param {HTMLElement} el
   */
  constructor(ctx, el) {
    this.ctx = ctx;
    this.el = el;
    /** @type {string|null} */
    this.session = null;
    this.customizations = h("section", { id: "customizations", "aria-label": "Customizations of the open session" });
    ctx.ahp.on("action", (env) => {
      if (env.channel === POLICY && env.action?.type === "x-policy/loaded") this.draw(env.action);
      if (env.channel === this.session && String(env.action?.type).startsWith("session/customization")) this.setSession(this.session);
    });
    // Back after a drop, too far behind for a replay: the policy afresh.
    ctx.ahp.on("$snapshot", (snap) => {
      if (snap.resource === POLICY && snap.state) this.draw(snap.state);
      if (snap.resource === this.session && this.session) this.setSession(this.session);
    });
  }

  /**
   * The open session's customizations, as its state holds them.
   * @param {string|null} uri
   */
  async setSession(uri) {
    this.session = uri;
    if (!uri) return replace(this.customizations);
    try {
      const r = await this.ctx.ahp.request("subscribe", { channel: uri });
      const toggle = (id, on) => this.ctx.ahp.dispatch(uri, { type: "session/customizationToggled", id, enablement: [{ kind: "session", enabled: on }] });
      replace(this.customizations, customizationList(r.snapshot?.state?.customizations || [], toggle));
    } catch (e) {
      replace(this.customizations, h("p", { class: "refused" }, reason(e)));
    }
  }

  async render() {
    replace(this.el, h("h2", {}, "Policy"), h("p", {}, "loading"), this.customizations);
    try {
      const r = await this.ctx.ahp.request("subscribe", { channel: POLICY });
      this.draw(r.snapshot.state);
    } catch (e) {
      replace(this.el, h("h2", {}, "Policy"), h("p", { class: "refused", id: "policy-refused" }, `The policy is not shown: ${reason(e)}`), this.customizations);
    }
  }

  /** @param {{policy: any, sha256: string, loadedAt: string}} s */
  draw(s) {
    const p = s.policy || {};
    replace(
      this.el,
      h("h2", {}, "Policy"),
      h("dl", { class: "facts" },
        h("dt", {}, "SHA-256"), h("dd", { id: "policy-sha" }, s.sha256),
        h("dt", {}, "Loaded"), h("dd", { id: "policy-loaded" }, s.loadedAt),
        h("dt", {}, "Transform deadline"), h("dd", {}, `${p.transformTimeoutMs} ms`),
        h("dt", {}, "Sections per answer"), h("dd", {}, String(p.maxSections)),
        h("dt", {}, "Bytes per answer"), h("dd", {}, String(p.maxResponseBytes))),
      sectionTable(p.sections || {}),
      principalList(p.transformPrincipals || {}),
      this.customizations,
    );
  }
}

const count = (/** @type {any} */ list) => String((list || []).length);

function sectionTable(sections) {
  const head = ["Section", "Access", "Mode", "Max growth", "Max shrink", "Must keep", "Deny", "Redact", "Fixed by operator"];
  return h("table", { id: "policy-sections" },
    h("caption", {}, "Each section's effective rules"),
    h("thead", {}, h("tr", {}, head.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, Object.entries(sections).map(([id, r]) =>
      h("tr", { "data-section": id },
        h("th", { scope: "row" }, id),
        h("td", { class: r.access === "transform" ? "" : "refused" }, r.access),
        h("td", {}, r.mode),
        h("td", {}, r.maxGrowthBytes ?? "any"),
        h("td", {}, r.maxShrinkBytes ?? "any"),
        h("td", {}, count(r.mustKeep)),
        h("td", {}, count(r.deny)),
        h("td", {}, count(r.redact)),
        h("td", {}, r.override ? `${r.override.action}` : "")))));
}

function principalList(principals) {
  const entries = Object.entries(principals);
  return h("section", { "aria-label": "Who may transform" },
    h("h3", {}, "Who may transform"),
    entries.length
      ? h("ul", { id: "policy-principals" }, entries.map(([name, sections]) =>
          h("li", {}, h("strong", {}, name), ": ", Array.isArray(sections) ? sections.join(", ") : "any section")))
      : h("p", {}, "any principal with the transform role, any section"));
}

/** Whether a container is on: its first enablement decides, else its own flag. */
const enabled = (c) => c.enablement?.[0]?.enabled ?? c.enabled ?? true;

/**
 * Each customization container: kind, name, source, load state, what it
 * holds, and a toggle for this session.
 * @param {any[]} list
 * @param {(id: string, on: boolean) => void} toggle
 */
function customizationList(list, toggle) {
  return [
    h("h3", {}, "Customizations of the open session"),
    list.length
      ? h("ul", { class: "customizations" }, list.map((c) => {
          const id = `custom-${c.id}`;
          const load = c.load ? `${c.load.kind}${c.load.message ? `: ${c.load.message}` : ""}` : "not loaded yet";
          const children = Array.isArray(c.children) ? c.children.map((k) => `${k.type} ${k.name}`).join(", ") : "";
          return h("li", { "data-customization": c.id },
            h("input", { type: "checkbox", id, checked: enabled(c), on: { change: (e) => toggle(c.id, e.target.checked) } }),
            h("label", { for: id }, h("strong", {}, c.name || c.id), ` (${c.type || "customization"})`),
            " ", h("code", {}, c.uri || ""),
            h("span", { class: c.load?.kind === "error" ? "refused" : "" }, ` ${load}`),
            children ? h("p", { class: "hint" }, children) : null);
        }))
      : h("p", {}, "none"),
  ];
}
