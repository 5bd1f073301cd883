// The policy pane: the effective policy from `x-policy://effective` (each
// section's access, mode, limits and rules, who may transform, the limits
// of a request, the operator's Rego policy in force), its hash and when it
// was loaded; a reload redraws it. Below, the latest Rego decisions, from
// the audit log's records as they come.

import { h, replace } from "./dom.js";
import { reason } from "./notice.js";

export const POLICY = "x-policy://effective";

/** The most Rego decisions the pane lists. */
const MAX_DECISIONS = 50;

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
    /** @type {Decision[]} the latest Rego decisions, newest first */
    this.decisions = [];
    this.decisionList = h("ol", { id: "policy-decisions", "aria-label": "Rego decisions, newest first", "aria-live": "polite" });
    this.decisionNone = h("p", { id: "policy-decisions-none", class: "hint" }, "No Rego decision among the audit records seen so far");
    this.latest = h("section", { "aria-label": "Latest Rego decisions" },
      h("h3", {}, "Latest decisions"), this.decisionNone, this.decisionList);
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

  /**
   * An audit record: its Rego decisions (a `decision` record's, each
   * transform section's `regoDecision`) join the latest, newest first. A
   * record seen before (a snapshot repeats the log's tail) is not added twice.
   * @param {any} record
   */
  recordSeen(record) {
    const fresh = regoDecisions(record).filter((d) => !this.decisions.some((k) => k.key === d.key));
    if (!fresh.length) return;
    this.decisions = [...fresh, ...this.decisions].sort((a, b) => b.seq - a.seq).slice(0, MAX_DECISIONS);
    this.drawDecisions();
  }

  drawDecisions() {
    this.decisionNone.hidden = this.decisions.length > 0;
    replace(this.decisionList, this.decisions.map(decisionItem));
  }

  async render() {
    replace(this.el, h("h2", {}, "Policy"), h("p", {}, "loading"), this.latest, this.customizations);
    try {
      const r = await this.ctx.ahp.request("subscribe", { channel: POLICY });
      this.draw(r.snapshot.state);
    } catch (e) {
      replace(this.el, h("h2", {}, "Policy"), h("p", { class: "refused", id: "policy-refused" }, `The policy is not shown: ${reason(e)}`), this.latest, this.customizations);
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
      regoFacts(p.rego),
      this.latest,
      sectionTable(p.sections || {}),
      principalList(p.transformPrincipals || {}),
      this.customizations,
    );
  }
}

/**
 * The Rego policy in force: its revision (SHA-256 of its modules and
 * data), whether a deny refuses or is only reported, its deadline, its
 * modules and the points it decides; or that there is none.
 * @param {any} rego
 */
function regoFacts(rego) {
  if (!rego) {
    return h("section", { "aria-label": "Rego policy" },
      h("h3", {}, "Rego policy"),
      h("p", { id: "policy-rego-none" }, "No Rego policy ([policy.rego] is not set)"));
  }
  const revision = String(rego.revision ?? "");
  const list = (/** @type {any} */ items, /** @type {string} */ id) =>
    Array.isArray(items) && items.length
      ? h("ul", { id, class: "plain" }, items.map((i) => h("li", {}, h("code", {}, String(i)))))
      : "none";
  return h("section", { "aria-label": "Rego policy" },
    h("h3", {}, "Rego policy"),
    h("dl", { class: "facts", id: "policy-rego" },
      h("dt", {}, "Revision"), h("dd", { id: "policy-rego-revision" }, revision),
      h("dt", {}, "Enforcement"),
      h("dd", { id: "policy-rego-enforcement", class: rego.enforcement === "report" ? "note" : "" }, String(rego.enforcement ?? "")),
      h("dt", {}, "Deadline"), h("dd", {}, `${rego.timeoutMs} ms`),
      h("dt", {}, "Points"), h("dd", {}, list(rego.points, "policy-rego-points")),
      h("dt", {}, "Modules"), h("dd", {}, list(rego.modules, "policy-rego-modules"))));
}

/**
 * One Rego decision as the pane keeps it.
 * @typedef {{key: string, seq: number, time: string, session: string, about: string, d: any}} Decision
 */

/**
 * The Rego decisions an audit record holds: a `decision` record is one;
 * a transform record (kind `transform`, or none in older logs) holds one
 * in each section Rego denied, would have denied, warned on or erred on.
 * @param {any} r
 * @returns {Decision[]}
 */
function regoDecisions(r) {
  if (!r || typeof r !== "object") return [];
  const seq = Number(r.seq) || 0;
  if (r.kind === "decision") {
    return [{ key: `${seq}`, seq, time: r.time || "", session: r.session || "", about: r.about || "", d: r }];
  }
  if (r.kind && r.kind !== "transform") return [];
  return (Array.isArray(r.sections) ? r.sections : [])
    .filter((s) => s && s.regoDecision)
    .map((s) => ({ key: `${seq}:${s.id}`, seq, time: r.time || "", session: r.session || "", about: String(s.id), d: s.regoDecision }));
}

/** What each outcome means, said in the list. */
const OUTCOMES = {
  denied: "denied",
  would_deny: "would deny (report only)",
  warned: "warned",
  error: "error (refuses when enforced)",
};

/**
 * One decision: when, at which point, on what, its outcome, who asked,
 * its messages; a deny or an error in red. Every string goes in as text.
 * @param {Decision} x
 */
function decisionItem(x) {
  const d = x.d;
  const outcome = String(d.outcome || "");
  const refused = outcome === "denied" || outcome === "error";
  const messages = [
    ...(Array.isArray(d.deny) ? d.deny : []).map((m) => ["deny", m]),
    ...(Array.isArray(d.warn) ? d.warn : []).map((m) => ["warn", m]),
    ...(d.error ? [["error", d.error]] : []),
  ];
  const revision = String(d.revision || "");
  return h("li", { class: refused ? "decision refused" : "decision", "data-outcome": outcome, "data-point": d.point, "data-seq": x.seq },
    h("p", {},
      h("strong", {}, OUTCOMES[outcome] || outcome), " ",
      h("code", {}, String(d.point || "")), " on ", h("code", {}, x.about),
      ` by ${d.principal ?? "nobody known"}`),
    h("p", { class: "hint" },
      h("time", { datetime: x.time || undefined }, x.time),
      x.session ? ` in ${x.session}` : "",
      ` (audit record #${x.seq}`,
      revision ? [", revision ", h("code", { title: revision }, revision.slice(0, 12))] : "",
      ")"),
    messages.length
      ? h("ul", { class: "messages" }, messages.map(([kind, m]) =>
          h("li", { "data-kind": kind }, `${kind}: ${m}`)))
      : null);
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
