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
