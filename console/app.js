// The console's start: a ticket for the token, the connection, `initialize`,
// then the panes; a dropped connection comes back by itself (`reconnect`).
// Every refusal the host sends (a `rejectionReason`, an error) is listed,
// so a refused action never looks done.

import { Ahp, HostError, ROOT } from "./ahp.js";
import { replace } from "./dom.js";
import { reason, refused } from "./notice.js";
import { askTicket, currentToken, forgetToken, rememberToken, ticketUrl, TicketRefused } from "./token.js";
import { ChatPane } from "./chat.js";
import { SectionsPane } from "./transform.js";
import { AuditPane } from "./audit.js";
import { PolicyPane } from "./policy.js";
import { HostPane } from "./host.js";

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));

/** The first wait before reconnecting, doubled after each failure up to the longest. */
const FIRST_WAIT_MS = 500;
const LONGEST_WAIT_MS = 10_000;
/**
 * How many times a refused `reconnect` is tried again before starting
 * afresh: the host may not yet have seen the old socket go, and then says
 * the client id is still in use.
 */
const RECONNECT_TRIES = 3;

/** @type {import("./chat.js").Context|null} the connection, once there has been one */
let ctx = null;
/** Whether a connection is being made: one at a time. */
let connecting = false;
/** `reconnect` refusals in a row. */
let refusedReconnects = 0;

/** @param {string} text */
function status(text) {
  $("status").textContent = text;
}

/** @param {string} why shown as text */
function askToken(why) {
  $("token-form").hidden = false;
  $("token-error").textContent = why || "";
  /** @type {HTMLInputElement} */ ($("token-input")).focus();
}

/**
 * `ms`, or less when the browser says it is back online.
 * @param {number} ms
 */
function pause(ms) {
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      removeEventListener("online", done);
      resolve(undefined);
    };
    const timer = setTimeout(done, ms);
    addEventListener("online", done);
  });
}

/**
 * Connects, trying again with a growing wait until it is connected, or
 * until only the person can help (a token refused, an origin forbidden).
 * @param {number} wait before the first try, in ms
 */
async function connect(wait) {
  if (connecting) return;
  connecting = true;
  let said = "";
  try {
    for (let attempt = 1; ; attempt++) {
      if (wait) {
        status(`${ctx ? "reconnecting…" : "not connected"} (${said}; next try in ${(wait / 1000).toFixed(1)} s)`);
        await pause(wait);
      }
      status(ctx ? `reconnecting… (try ${attempt})` : "connecting");
      try {
        await once();
        return;
      } catch (e) {
        if (e instanceof TicketRefused && e.kind !== "unavailable") return loginRefused(e);
        said = reason(e);
        wait = Math.min(Math.max(wait * 2, FIRST_WAIT_MS), LONGEST_WAIT_MS);
      }
    }
  } finally {
    connecting = false;
  }
}

/**
 * One try: a ticket for the token, a socket with the ticket, then
 * `initialize` the first time and `reconnect` after. A socket that did not
 * get that far is closed.
 */
async function once() {
  const grant = await askTicket(currentToken());
  const ws = await Ahp.socket(ticketUrl(grant.ticket));
  $("token-form").hidden = true;
  try {
    if (ctx) await resume(ctx, ws, grant);
    else await begin(ws, grant);
  } catch (e) {
    ws.close();
    throw e;
  }
}

/**
 * The first connection: `initialize`, then the panes.
 * @param {WebSocket} ws
 * @param {import("./token.js").Grant} grant
 */
async function begin(ws, grant) {
  const ahp = new Ahp(ws);
  const clientId = `console-${crypto.randomUUID()}`;
  const init = await ahp.initialize(clientId, [ROOT]);
  const root = init.snapshots.find((s) => s.resource === ROOT)?.state || { agents: [] };
  const c = { ahp, clientId, root, meta: init._meta || {}, principal: grant.principal, roles: grant.roles };
  ctx = c;
  ahp.on("action", (env) => {
    if (env.rejectionReason) refused(env.action?.type || "action", env.rejectionReason);
  });
  ahp.on("$snapshot", (s) => {
    if (s.resource === ROOT && s.state) c.root = s.state;
  });
  ahp.on("$closed", (e) => {
    status(`reconnecting… (connection lost: close ${e.code}${e.reason ? `, ${e.reason}` : ""})`);
    connect(FIRST_WAIT_MS);
  });
  connected(c, `protocol ${init.protocolVersion}`);
  start(c);
}

/**
 * Back on a new socket as the same client: `reconnect`, so the host replays
 * what this page missed (or sends snapshots) and the subscriptions resume.
 * Refused, it starts afresh: `initialize` as a new client, subscribed again.
 * @param {import("./chat.js").Context} c
 * @param {WebSocket} ws
 * @param {import("./token.js").Grant} grant
 */
async function resume(c, ws, grant) {
  c.principal = grant.principal;
  c.roles = grant.roles;
  c.ahp.attach(ws);
  let protocol = "";
  try {
    const how = await c.ahp.reconnect(c.clientId);
    refusedReconnects = 0;
    protocol = `resumed by ${how}`;
  } catch (e) {
    // A socket that closed again is tried again; a refusal, a few times.
    if (!(e instanceof HostError)) throw e;
    if (++refusedReconnects < RECONNECT_TRIES && e.code === -32600) throw e;
    refusedReconnects = 0;
    refused("reconnect", `${reason(e)}; started afresh as a new client`);
    c.clientId = `console-${crypto.randomUUID()}`;
    const init = await c.ahp.restart(c.clientId);
    protocol = `protocol ${init.protocolVersion}`;
  }
  c.ahp.emit("$resumed", {});
  connected(c, protocol);
}

/**
 * @param {import("./chat.js").Context} c
 * @param {string} how
 */
function connected(c, how) {
  status(`connected as ${c.principal || "anonymous"} (${c.roles.join(", ") || "no role"}), client ${c.clientId}, ${how}`);
}

/**
 * No ticket, and waiting will not change that: a refused token is asked
 * again, with the host's words; a forbidden origin is said.
 * @param {TicketRefused} e
 */
function loginRefused(e) {
  if (e.kind === "forbidden") {
    status(`not connected: ${e.message}`);
    return;
  }
  const token = currentToken();
  status("not connected: the host wants a token");
  forgetToken();
  askToken(token ? `the host refused the token: ${e.message}` : `the host wants a token: ${e.message}`);
}

/** @param {import("./chat.js").Context} c */
function start(c) {
  const sections = new SectionsPane(c, $("pane-sections"));
  const policy = new PolicyPane(c, $("pane-policy"));
  const chat = new ChatPane(c, $("pane-chat"), (uri) => {
    sections.setSession(uri);
    policy.setSession(uri);
  });
  const audit = new AuditPane(c, $("pane-audit"));
  audit.onRecord((record) => {
    sections.recordSeen(record);
    policy.recordSeen(record);
  });
  // The tail a snapshot brings is no answer to a request of this page:
  // only the policy pane's latest decisions take it.
  audit.onRecent((record) => policy.recordSeen(record));
  chat.render();
  sections.render();
  audit.render();
  policy.render();
  new HostPane(c, $("pane-host")).render();
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
  connect(0);
});
$("refusals").hidden = true;
replace($("refusal-list"));
connect(0);
