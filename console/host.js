// The host pane: `x-host://status`: the bridge's version, its runtimes (up
// or down, how often replaced), how many clients and sessions it holds.

import { h, replace } from "./dom.js";
import { reason } from "./notice.js";

export const HOST_STATUS = "x-host://status";

export class HostPane {
  /**
   * @param {import("./chat.js").Context} ctx
   * @param {HTMLElement} el
   */
  constructor(ctx, el) {
    this.ctx = ctx;
    this.el = el;
    ctx.ahp.on("action", (env) => {
      if (env.channel === HOST_STATUS && env.action?.type === "x-host/statusChanged") this.draw(env.action);
    });
    ctx.ahp.on("$snapshot", (snap) => {
      if (snap.resource === HOST_STATUS && snap.state) this.draw(snap.state);
    });
  }

  async render() {
    replace(this.el, h("h2", {}, "Host"), h("p", {}, "loading"));
    try {
      const r = await this.ctx.ahp.request("subscribe", { channel: HOST_STATUS });
      this.draw(r.snapshot.state);
    } catch (e) {
      replace(this.el, h("h2", {}, "Host"), h("p", { class: "refused" }, `The host's status is not shown: ${reason(e)}`));
    }
  }

  draw(s) {
    replace(
      this.el,
      h("h2", {}, "Host"),
      h("dl", { class: "facts" },
        h("dt", {}, "Version"), h("dd", {}, `ahp-copilot-bridge ${s.version}, AHP ${s.protocol}`),
        h("dt", {}, "Started"), h("dd", {}, s.startedAt),
        h("dt", {}, "Clients"), h("dd", { id: "host-clients" }, String(s.clients)),
        h("dt", {}, "Sessions"), h("dd", { id: "host-sessions" }, String(s.sessions))),
      h("table", { id: "host-runtimes" },
        h("caption", {}, "Runtimes"),
        h("thead", {}, h("tr", {}, ["Runtime", "State", "Restarts"].map((c) => h("th", { scope: "col" }, c)))),
        h("tbody", {}, (s.runtimes || []).map((r) =>
          h("tr", { "data-runtime": r.runtime },
            h("th", { scope: "row" }, String(r.runtime)),
            h("td", { class: r.up ? "" : "refused" }, r.up ? "up" : "down"),
            h("td", {}, String(r.restarts)))))),
    );
  }
}
