// An AHP client over one WebSocket: JSON-RPC requests and their answers,
// the host's notifications, and answers to the host's own requests (the
// `systemMessageTransform` extension).

export const ROOT = "ahp-root://";

/** An error the host answered a request with. */
export class HostError extends Error {
  /** @param {{code: number, message: string, data?: any}} e */
  constructor(e) {
    super(e.message);
    this.code = e.code;
    this.data = e.data;
  }
}

export class Ahp {
  /**
   * Opens a socket; resolves once open, rejects when the host refuses it.
   * @param {string} url
   * @returns {Promise<WebSocket>}
   */
  static socket(url) {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      const refused = (/** @type {CloseEvent} */ e) => reject(new Error(`the host refused the connection (close ${e.code})`));
      ws.addEventListener("close", refused, { once: true });
      ws.addEventListener("open", () => {
        ws.removeEventListener("close", refused);
        resolve(ws);
      }, { once: true });
    });
  }

  /**
   * The client over `ws`; its listeners and handlers outlive the socket, so
   * a reconnect (`attach`) keeps every pane as it is.
   * @param {WebSocket} ws
   */
  constructor(ws) {
    this.nextId = 1;
    this.clientSeq = 0;
    /** @type {Map<number, {resolve: Function, reject: Function}>} */
    this.pending = new Map();
    /** @type {Map<string, Array<(params: any) => void>>} */
    this.listeners = new Map();
    /** @type {Map<string, (params: any) => Promise<any>>} */
    this.handlers = new Map();
    /**
     * The newest serverSeq this page has seen. The host sends one
     * connection's actions in seq order, so every action before it on the
     * channels subscribed has been seen too: a reconnect resumes from it.
     */
    this.serverSeq = 0;
    /**
     * Each subscribed channel and the newest serverSeq this page has of it
     * (an action applied, or the snapshot it was subscribed with): what a
     * reconnect subscribes again, and what a replay must not apply twice.
     * @type {Map<string, number>}
     */
    this.cursors = new Map();
    /** @type {any[]|null} actions held while a reconnect's answer is awaited */
    this.held = null;
    /** @type {WebSocket} */
    this.ws = ws;
    this.attach(ws);
  }

  /**
   * Speaks over `ws` from now on. The old socket's late events are ignored:
   * only the current one may settle requests or say it closed.
   * @param {WebSocket} ws
   */
  attach(ws) {
    this.ws = ws;
    ws.addEventListener("message", (e) => this.ws === ws && this.receive(String(e.data)));
    ws.addEventListener("close", (e) => this.ws === ws && this.closed(e));
  }

  /** Whether the current socket is open. */
  get open() {
    return this.ws.readyState === WebSocket.OPEN;
  }

  /**
   * `initialize`: a fresh start as `clientId`, subscribed to `channels`.
   * @param {string} clientId
   * @param {string[]} channels
   */
  async initialize(clientId, channels) {
    const init = await this.request("initialize", {
      channel: ROOT,
      protocolVersions: ["1.0.0"],
      clientId,
      clientInfo: { name: "ahp-copilot-bridge console", version: "0.1.0" },
      initialSubscriptions: channels,
    });
    this.cursors.clear();
    this.serverSeq = init.serverSeq || 0;
    for (const c of channels) this.cursors.set(c, this.serverSeq);
    for (const s of init.snapshots || []) this.seen(s.resource, s.fromSeq);
    return init;
  }

  /**
   * Comes back as `clientId` on this (new) socket with AHP `reconnect`: the
   * host replays what was missed, or sends fresh snapshots; either way every
   * listener sees it as if it had never left (replayed actions as `action`,
   * snapshots as `$snapshot`, channels that are gone as `$missing`).
   * Rejects (a HostError) when the host refuses, changing nothing.
   * @param {string} clientId
   * @returns {Promise<string>} how: "replay" or "snapshot"
   */
  async reconnect(clientId) {
    const channels = [...this.cursors.keys()];
    this.held = [];
    try {
      const r = await this.request("reconnect", { clientId, lastSeenServerSeq: this.serverSeq, subscriptions: channels });
      for (const uri of r.missing || []) this.cursors.delete(uri);
      if (r.type === "replay") {
        for (const env of r.actions || []) this.deliver(env);
      } else {
        for (const s of r.snapshots || []) this.snapshot(s);
      }
      for (const uri of r.missing || []) this.emit("$missing", { channel: uri });
      return r.type;
    } finally {
      this.release();
    }
  }

  /**
   * After a refused `reconnect`: `initialize` afresh as `clientId`, then
   * subscribe again to every channel this page had, each one's snapshot
   * given to the listeners (`$snapshot`), each one now refused as `$missing`.
   * @param {string} clientId
   */
  async restart(clientId) {
    const channels = [...this.cursors.keys()].filter((c) => c !== ROOT);
    this.held = [];
    try {
      const init = await this.initialize(clientId, [ROOT]);
      for (const s of init.snapshots || []) this.emit("$snapshot", s);
      for (const channel of channels) {
        try {
          const r = await this.request("subscribe", { channel });
          if (r.snapshot) this.emit("$snapshot", r.snapshot);
        } catch (e) {
          if (!(e instanceof HostError)) throw e;
          this.emit("$missing", { channel });
        }
      }
      return init;
    } finally {
      this.release();
    }
  }

  /** A snapshot from the host: the channel's cursor moves to it. */
  snapshot(s) {
    if (!s?.resource) return;
    this.seen(s.resource, s.fromSeq);
    this.emit("$snapshot", s);
  }

  /**
   * `channel` is known up to `seq` here.
   * @param {string} channel
   * @param {number|undefined} seq
   */
  seen(channel, seq) {
    if (typeof seq !== "number") return;
    this.cursors.set(channel, Math.max(this.cursors.get(channel) ?? 0, seq));
    this.serverSeq = Math.max(this.serverSeq, seq);
  }

  /** The actions held during a reconnect, delivered after what it replayed. */
  release() {
    const held = this.held || [];
    this.held = null;
    for (const env of held) this.deliver(env);
  }

  /**
   * An action envelope, to the listeners, unless this page has it already
   * (a replay overlapping a snapshot or a live action). A refusal carries no
   * seq of its own and always goes through.
   */
  deliver(env) {
    const seq = env?.serverSeq;
    if (typeof seq === "number" && !env.rejectionReason) {
      const known = this.cursors.get(env.channel);
      if (known !== undefined && seq <= known) return;
      if (known !== undefined) this.cursors.set(env.channel, seq);
      this.serverSeq = Math.max(this.serverSeq, seq);
    }
    this.emit("action", env);
  }

  /** @param {string} text */
  receive(text) {
    let msg;
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (msg.method && msg.id !== undefined) this.answerHost(msg);
    else if (msg.method === "action" && this.held) this.held.push(msg.params);
    else if (msg.method === "action") this.deliver(msg.params);
    else if (msg.method) this.emit(msg.method, msg.params);
    else this.settle(msg);
  }

  settle(msg) {
    const waiting = this.pending.get(msg.id);
    if (!waiting) return;
    this.pending.delete(msg.id);
    if (msg.error) waiting.reject(new HostError(msg.error));
    else waiting.resolve(msg.result);
  }

  async answerHost(msg) {
    const handler = this.handlers.get(msg.method);
    if (!handler) {
      this.send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "not handled" } });
      return;
    }
    try {
      this.send({ jsonrpc: "2.0", id: msg.id, result: await handler(msg.params) });
    } catch (e) {
      this.send({ jsonrpc: "2.0", id: msg.id, error: { code: -32000, message: String(e.message || e) } });
    }
  }

  /** @param {CloseEvent} e */
  closed(e) {
    for (const waiting of this.pending.values()) waiting.reject(new Error(`connection closed (${e.code})`));
    this.pending.clear();
    this.emit("$closed", { code: e.code, reason: e.reason });
  }

  /**
   * Sends a message; while the socket is down it is dropped (a request's
   * promise is rejected by then), as the host would never have seen it.
   * @param {any} msg
   */
  send(msg) {
    if (msg.method === "unsubscribe") this.cursors.delete(msg.params?.channel);
    if (this.open) this.ws.send(JSON.stringify(msg));
    else if (msg.id !== undefined && this.pending.has(msg.id)) {
      this.pending.get(msg.id)?.reject(new Error("not connected"));
      this.pending.delete(msg.id);
    }
  }

  /**
   * @param {string} method
   * @param {any} params
   * @returns {Promise<any>}
   */
  async request(method, params) {
    const id = this.nextId++;
    const result = await new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.send({ jsonrpc: "2.0", id, method, params });
    });
    // What a reconnect must resume: every channel subscribed, from its snapshot.
    if (method === "subscribe" && result?.snapshot) {
      this.seen(result.snapshot.resource || params.channel, result.snapshot.fromSeq ?? this.serverSeq);
    }
    return result;
  }

  /**
   * Sends a state action; the host echoes it, with `rejectionReason` when refused.
   * @param {string} channel
   * @param {any} action
   * @returns {number} the clientSeq it went with
   */
  dispatch(channel, action) {
    const clientSeq = ++this.clientSeq;
    this.send({ jsonrpc: "2.0", method: "dispatchAction", params: { channel, clientSeq, action } });
    return clientSeq;
  }

  /**
   * @param {string} method a notification's method, or one of the page's
   *   own: "$closed" (the socket closed), "$snapshot" (a channel's state
   *   afresh, after a reconnect), "$missing" (a channel gone meanwhile)
   * @param {(params: any) => void} fn
   */
  on(method, fn) {
    const list = this.listeners.get(method) || [];
    list.push(fn);
    this.listeners.set(method, list);
  }

  /**
   * Answers the host's requests of `method` with what `fn` resolves to.
   * @param {string} method
   * @param {(params: any) => Promise<any>} fn
   */
  handle(method, fn) {
    this.handlers.set(method, fn);
  }

  emit(method, params) {
    for (const fn of this.listeners.get(method) || []) fn(params);
  }
}
