// The token: taken once from the URL fragment (`#token=...`, which no
// request carries), then kept in sessionStorage only, so it leaves with the
// tab. It is sent in one place only, the `Authorization` header of
// `POST /ticket`; the WebSocket gets a one-use ticket instead, so no token
// ever rides in a URL (where logs, history and proxies would keep it).

const KEY = "ahp-console-token";

/**
 * The token this tab has, moving one from the fragment into storage and out
 * of the address bar.
 * @returns {string|null}
 */
export function currentToken() {
  const match = /^#token=([^&]*)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(KEY, decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + location.search);
  }
  return sessionStorage.getItem(KEY);
}

/** @param {string} token */
export function rememberToken(token) {
  sessionStorage.setItem(KEY, token);
}

export function forgetToken() {
  sessionStorage.removeItem(KEY);
}

/**
 * What `POST /ticket` granted: the ticket, and who this page is.
 * @typedef {{ticket: string, expiresIn: number, principal: string, roles: string[]}} Grant
 */

/** Why no ticket was granted; `kind` says what the page should do about it. */
export class TicketRefused extends Error {
  /**
   * @param {"credentials"|"forbidden"|"unavailable"} kind credentials: ask
   *   the token again; forbidden: this origin is refused, a token will not
   *   help; unavailable: try again later
   * @param {string} message the host's own words, shown as text
   */
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

/**
 * Trades the token (or this browser's client certificate, or nothing on a
 * host without authentication) for a one-use ticket.
 * @param {string|null} token
 * @returns {Promise<Grant>}
 */
export async function askTicket(token) {
  /** @type {Record<string, string>} */
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  let r;
  try {
    r = await fetch("/ticket", { method: "POST", headers, cache: "no-store" });
  } catch (e) {
    throw new TicketRefused("unavailable", `the host cannot be reached (${e instanceof Error ? e.message : e})`);
  }
  let body = {};
  try {
    body = await r.json();
  } catch {
    // A body that is not JSON says nothing more than the status does.
  }
  if (r.ok && typeof body.ticket === "string") {
    return {
      ticket: body.ticket,
      expiresIn: Number(body.expiresIn) || 0,
      principal: String(body.principal ?? ""),
      roles: Array.isArray(body.roles) ? body.roles.map(String) : [],
    };
  }
  const said = typeof body.error === "string" ? body.error : `HTTP ${r.status}`;
  if (r.status === 401) throw new TicketRefused("credentials", said);
  if (r.status === 403) throw new TicketRefused("forbidden", said);
  throw new TicketRefused("unavailable", said);
}

/**
 * The WebSocket address of this host with a ticket (a browser cannot set
 * headers on a WebSocket; a ticket is good once, for seconds).
 * @param {string} ticket
 */
export function ticketUrl(ticket) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/?ticket=${encodeURIComponent(ticket)}`;
}
