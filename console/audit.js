// The audit pane: the live tail of `x-audit://log` (the audit log's head,
// its last checkpoint, what the syslog shipper missed, the newest records),
// filtered by session or client, each transform's sections with their
// decision and, when the log keeps content, the before/after diff. A
// refusal or a gap is shown in red.

import { h, replace } from "./dom.js";
import { lineDiff } from "./diff.js";
import { reason } from "./notice.js";

export const AUDIT_LOG = "x-audit://log";

export class AuditPane {
  /**
   * @param {import("./chat.js").Context} ctx
   * @param {HTMLElement} el
   */
  constructor(ctx, el) {
    this.ctx = ctx;
    this.el = el;
    /** @type {any[]} */
    this.records = [];
    /** @type {Array<(record: any) => void>} */
    this.watchers = [];
    /** @type {Array<(record: any) => void>} */
    this.tailWatchers = [];
    this.state = {};
    ctx.ahp.on("action", (env) => {
      if (env.channel === AUDIT_LOG && env.action?.type === "x-audit/recordAppended") this.appended(env.action);
    });
    // Back after a drop, too far behind for a replay: the tail afresh.
    ctx.ahp.on("$snapshot", (snap) => {
      if (snap.resource !== AUDIT_LOG || !snap.state) return;
      this.state = snap.state;
      this.records = [...(snap.state.recent || [])];
      this.draw();
      this.replay();
    });
  }

  /** @param {(record: any) => void} fn called with each record appended from now on */
  onRecord(fn) {
    this.watchers.push(fn);
  }

  /**
   * @param {(record: any) => void} fn called with each record of a
   * snapshot's tail (the newest records, oldest first): at the subscription
   * and again after a drop, so the same record may come more than once.
   * Apart from onRecord, whose watchers take each record as new.
   */
  onRecent(fn) {
    this.tailWatchers.push(fn);
  }

  /** The snapshot's tail, to each onRecent watcher. */
  replay() {
    for (const record of this.records) for (const fn of this.tailWatchers) fn(record);
  }

  async render() {
    this.status = h("dl", { id: "audit-status", class: "facts" });
    this.session = h("input", { id: "audit-session", type: "search", on: { input: () => this.draw() } });
    this.client = h("input", { id: "audit-client", type: "search", on: { input: () => this.draw() } });
    this.list = h("ol", { id: "audit-records", "aria-label": "Audit records, newest first", "aria-live": "polite" });
    replace(
      this.el,
      h("h2", {}, "Audit"),
      this.status,
      h("div", { class: "row" },
        h("label", { for: "audit-session" }, "Session"), this.session,
        h("label", { for: "audit-client" }, "Client"), this.client),
      this.list,
    );
    try {
      const r = await this.ctx.ahp.request("subscribe", { channel: AUDIT_LOG });
      this.state = r.snapshot.state;
      this.records = [...(this.state.recent || [])];
      this.draw();
      this.replay();
    } catch (e) {
      replace(this.status, h("p", { class: "refused" }, `The audit log is not shown: ${reason(e)}`));
    }
  }

  appended(a) {
    this.state = { ...this.state, head: a.head, records: a.record.seq, shippingGap: a.shippingGap };
    if (a.record.kind === "checkpoint") this.state.lastCheckpoint = { seq: a.record.seq, signed: !!a.record.signature };
    this.records.push(a.record);
    if (this.records.length > 200) this.records.shift();
    this.draw();
    for (const fn of this.watchers) fn(a.record);
  }

  draw() {
    if (!this.list) return;
    const s = this.state;
    const cp = s.lastCheckpoint;
    replace(this.status,
      h("dt", {}, "Head"), h("dd", { id: "audit-head" }, s.head || "no record yet"),
      h("dt", {}, "Records"), h("dd", {}, String(s.records ?? 0)),
      h("dt", {}, "Last checkpoint"), h("dd", { class: cp && !cp.signed ? "refused" : "" }, cp ? `#${cp.seq}, ${cp.signed ? "signed" : "NOT signed"}` : "none among these records"),
      h("dt", {}, "Shipping gap"), h("dd", { class: s.shippingGap ? "refused" : "" }, String(s.shippingGap ?? 0)));
    const session = this.session.value.trim();
    const client = this.client.value.trim();
    const shown = this.records.filter((r) =>
      (!session || String(r.session || "").includes(session)) &&
      (!client || (r.owners || []).some((o) => String(o.clientId).includes(client))));
    replace(this.list, shown.slice().reverse().map(recordItem));
  }
}

/** One record: its kind and number, and for a transform its sections. */
function recordItem(r) {
  const bad = ["recovered", "shipping_gap"].includes(r.kind);
  return h("li", { class: bad ? "record refused" : "record", "data-seq": r.seq, "data-kind": r.kind },
    h("p", {}, h("strong", {}, `#${r.seq} ${r.kind}`), " ", r.time || "", r.session ? ` ${r.session}` : ""),
    (r.owners || []).map((o) => h("p", { class: o.outcome === "transformed" || o.outcome === "unchanged" ? "owner" : "owner refused" }, `${o.clientId}: ${o.outcome}`)),
    (r.sections || []).map(sectionItem));
}

function sectionItem(s) {
  const refused = String(s.decision).startsWith("refused");
  return h("div", { class: "audit-section", "data-section": s.id, "data-decision": s.decision },
    h("p", { class: refused ? "refused" : "" }, h("code", {}, s.id), `: ${s.decision}`),
    typeof s.contentBefore === "string" && typeof s.contentAfter === "string" && s.contentBefore !== s.contentAfter
      ? h("pre", { class: "diff", "aria-label": `${s.id} before and after` },
          lineDiff(s.contentBefore, s.contentAfter)
            .filter((d) => d.op !== " ")
            .map((d) => h("span", { class: d.op === "+" ? "added" : "removed" }, `${d.op} ${d.line}\n`)))
      : null);
}
