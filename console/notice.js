// Refusals, where the operator sees them: every `rejectionReason` and every
// error the host answers, so a refused action never looks done.

import { HostError } from "./ahp.js";
import { h } from "./dom.js";

/**
 * Lists a refusal at the top of the refusals list.
 * @param {string} what
 * @param {string} why
 */
export function refused(what, why) {
  const box = document.getElementById("refusals");
  if (box) box.hidden = false;
  document.getElementById("refusal-list")?.prepend(h("li", { class: "refused" }, h("strong", {}, what), ": ", why));
}

/**
 * What an error says, with the host's code when it is the host's.
 * @param {unknown} e
 */
export function reason(e) {
  if (e instanceof HostError) return `${e.message} (${e.code})`;
  return e instanceof Error ? e.message : String(e);
}

/**
 * Why this page's principal may not do something, said before it tries
 * (the roles come with its ticket); "" when it may.
 * @param {{principal: string, roles: string[]}} who
 * @param {string} role the role it needs
 * @param {string} cannot what it therefore cannot do
 */
export function lacking(who, role, cannot) {
  if (who.roles.includes(role)) return "";
  return `signed in as ${who.principal || "anonymous"} (${who.roles.join(", ") || "no role"}): ${cannot}`;
}
