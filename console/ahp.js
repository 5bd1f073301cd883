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
   * Opens the socket; resolves once open, rejects when the host refuses it.
   * @param {string} url
   * @returns {Promise<Ahp>}
   */
  static open(url) {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.addEventListener("open", () => resolve(new Ahp(ws)), { once: true });
      ws.addEventListener(
        "close",
        (e) => reject(new Error(`the host refused the connection (close ${e.code})`)),
        { once: true },
      );
    });
  }

  /** @param {WebSocket} ws */
  constructor(ws) {
    this.ws = ws;
    this.nextId = 1;
    this.clientSeq = 0;
    /** @type {Map<number, {resolve: Function, reject: Function}>} */
    this.pending = new Map();
    /** @type {Map<string, Array<(params: any) => void>>} */
    this.listeners = new Map();
    /** @type {Map<string, (params: any) => Promise<any>>} */
    this.handlers = new Map();
    ws.addEventListener("message", (e) => this.receive(String(e.data)));
    ws.addEventListener("close", (e) => this.closed(e));
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

  /** @param {any} msg */
  send(msg) {
    this.ws.send(JSON.stringify(msg));
  }

  /**
   * @param {string} method
   * @param {any} params
   * @returns {Promise<any>}
   */
  request(method, params) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.send({ jsonrpc: "2.0", id, method, params });
    });
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
   * @param {string} method a notification's method, or "$closed"
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
