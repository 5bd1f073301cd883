// The console's start: the token, the connection, `initialize`, then the
// panes. Every refusal the host sends (a `rejectionReason`, an error) is
// listed, so a refused action never looks done.

import { Ahp, ROOT } from "./ahp.js";
import { replace } from "./dom.js";
import { reason, refused } from "./notice.js";
import { currentToken, forgetToken, rememberToken, socketUrl } from "./token.js";
import { ChatPane } from "./chat.js";
import { SectionsPane } from "./transform.js";
import { AuditPane } from "./audit.js";
import { PolicyPane } from "./policy.js";
import { HostPane } from "./host.js";

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));

/** @param {string} text */
function status(text) {
  $("status").textContent = text;
}

function askToken(why) {
  $("token-form").hidden = false;
  $("token-error").textContent = why || "";
  /** @type {HTMLInputElement} */ ($("token-input")).focus();
}

async function connect() {
  const token = currentToken();
  status("connecting");
  let ahp;
  try {
    ahp = await Ahp.open(socketUrl(token));
  } catch (e) {
    status("not connected");
    forgetToken();
    askToken(token ? `${reason(e)}: wrong token?` : `${reason(e)}: this host needs a token`);
    return;
  }
  $("token-form").hidden = true;
  const clientId = `console-${crypto.randomUUID()}`;
  const init = await ahp.request("initialize", {
    channel: ROOT,
    protocolVersions: ["1.0.0"],
    clientId,
    clientInfo: { name: "ahp-copilot-bridge console", version: "0.1.0" },
    initialSubscriptions: [ROOT],
  });
  ahp.on("$closed", (e) => status(`disconnected (${e.code}${e.reason ? `: ${e.reason}` : ""})`));
  ahp.on("action", (env) => {
    if (env.rejectionReason) refused(env.action?.type || "action", env.rejectionReason);
  });
  const root = init.snapshots.find((s) => s.resource === ROOT)?.state || { agents: [] };
  status(`connected as ${clientId}, protocol ${init.protocolVersion}`);
  start({ ahp, clientId, root, meta: init._meta || {} });
}

/** @param {import("./chat.js").Context} ctx */
function start(ctx) {
  const sections = new SectionsPane(ctx, $("pane-sections"));
  const policy = new PolicyPane(ctx, $("pane-policy"));
  const chat = new ChatPane(ctx, $("pane-chat"), (uri) => {
    sections.setSession(uri);
    policy.setSession(uri);
  });
  const audit = new AuditPane(ctx, $("pane-audit"));
  audit.onRecord((record) => sections.recordSeen(record));
  chat.render();
  sections.render();
  audit.render();
  policy.render();
  new HostPane(ctx, $("pane-host")).render();
  showTabs();
}

function showTabs() {
  const tabs = [
    ["tab-chat", "pane-chat"],
    ["tab-sections", "pane-sections"],
    ["tab-audit", "pane-audit"],
    ["tab-policy", "pane-policy"],
    ["tab-host", "pane-host"],
  ];
  const select = (/** @type {string} */ chosen) => {
    for (const [tab, pane] of tabs) {
      $(tab).setAttribute("aria-pressed", String(tab === chosen));
      $(pane).hidden = tab !== chosen;
    }
  };
  for (const [tab] of tabs) $(tab).addEventListener("click", () => select(tab));
  $("tabs").hidden = false;
  select("tab-chat");
}

$("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  rememberToken(/** @type {HTMLInputElement} */ ($("token-input")).value);
  connect();
});
$("refusals").hidden = true;
replace($("refusal-list"));
connect();
