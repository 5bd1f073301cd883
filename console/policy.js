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
      replace(this.customizations, customizationList(r.snapshot?.state?.customizations || []));
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

/** Each customization container: its kind, name, source, and whatever state it reports. */
function customizationList(list) {
  const facts = (c) => Object.entries(c)
    .filter(([k, v]) => !["id", "type", "name", "uri", "icons", "range", "_meta", "children"].includes(k) && typeof v !== "object")
    .map(([k, v]) => `${k}: ${v}`);
  return [
    h("h3", {}, "Customizations of the open session"),
    list.length
      ? h("ul", {}, list.map((c) =>
          h("li", { "data-customization": c.id },
            h("strong", {}, c.name || c.id), ` (${c.type || "customization"}) `, h("code", {}, c.uri || ""),
            facts(c).length ? ` ${facts(c).join(", ")}` : "",
            Array.isArray(c.children) ? `, ${c.children.length} inside` : "")))
      : h("p", {}, "none"),
  ];
}
