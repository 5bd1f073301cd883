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
    ctx.ahp.on("action", (env) => {
      if (env.channel === POLICY && env.action?.type === "x-policy/loaded") this.draw(env.action);
    });
  }

  async render() {
    replace(this.el, h("h2", {}, "Policy"), h("p", {}, "loading"));
    try {
      const r = await this.ctx.ahp.request("subscribe", { channel: POLICY });
      this.draw(r.snapshot.state);
    } catch (e) {
      replace(this.el, h("h2", {}, "Policy"), h("p", { class: "refused", id: "policy-refused" }, `The policy is not shown: ${reason(e)}`));
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
