// The token: taken once from the URL fragment (`#token=...`, which no
// request carries), then kept in sessionStorage only, so it leaves with the tab.

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
 * The WebSocket address of this host, with the token as `?token=` (a
 * browser cannot set headers on a WebSocket).
 * @param {string|null} token
 */
export function socketUrl(token) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const query = token ? `?token=${encodeURIComponent(token)}` : "";
  return `${scheme}//${location.host}/${query}`;
}
