/**
 * strata-client.js: a small, dependency-free client of Strata's JSON-RPC 2.0
 * protocol over a localhost websocket. Copy this one file into a renderer;
 * it is a plain ES module with no build step.
 *
 * @example
 *   import { StrataClient, StrataRpcError } from "./strata-client.js";
 *   const client = await StrataClient.connect("ws://127.0.0.1:8765/", token);
 *   const off = client.onNotification("$/progress", (p) => console.log(p.done, p.total));
 *   try {
 *     const info = await client.call("system:info", {}, { timeoutMs: 5000 });
 *   } catch (err) {
 *     if (err instanceof StrataRpcError && err.dataCode === "REQUEST_CANCELLED") { ... }
 *   }
 *   off();
 *
 *   // Answer the server's own requests, e.g. the completions it asks for:
 *   client.onRequest("llm:complete", async ({ purpose, messages, maxTokens }, { signal }) => {
 *     const text = await myModel(messages, { maxTokens, signal });
 *     return { content: text };
 *   });
 *   await client.declareCapabilities({ completions: true });
 *   client.close();
 *
 * Protocol notes:
 * - The token travels as the `?token=` query parameter, because browsers
 *   cannot set headers on a websocket handshake. The server also checks the
 *   page's Origin and the Host header.
 * - Every error that the server sends carries a stable string code in
 *   `error.data.code`; it is exposed as {@link StrataRpcError#dataCode}.
 * - Cancelling a call (AbortSignal or timeout) sends the notification
 *   `$/cancelRequest {"id": X}`. The server answers the cancelled request with
 *   error -32800 / REQUEST_CANCELLED; the client does not wait for that reply
 *   and rejects at once with the same error, so the outcome is the same
 *   whichever comes first. A late reply for a cancelled id is dropped.
 * - The server may send requests too (ids like `"s1"`), e.g. `llm:complete`
 *   `{purpose, messages: [{role, content}], maxTokens}` once this client has
 *   declared `{completions: true}` with {@link StrataClient#declareCapabilities};
 *   answer with `{content: "text"}` (a plain string and MCP's
 *   `{content: {type: "text", text}}` are accepted too). A handler registered
 *   with {@link StrataClient#onRequest} answers: its return value is the
 *   result; if it throws, the reply is error -32603 "Request handler failed"
 *   (the thrown message is not sent), unless it throws a
 *   {@link StrataRpcError}, whose code, message and data are sent. A request
 *   with no handler is answered -32601 METHOD_NOT_FOUND. When the server
 *   stops waiting it sends `$/cancelRequest {"id": "s1"}`: the handler's
 *   `signal` aborts and no reply is sent.
 */

/** JSON-RPC code of a cancelled request (LSP's RequestCancelled). */
export const REQUEST_CANCELLED = -32800;

/** Notification method used to cancel an in-flight request. */
export const CANCEL_METHOD = "$/cancelRequest";

const JSONRPC = "2.0";
const WS_OPEN = 1;

/**
 * An error reported by the server in a JSON-RPC reply, or the client-side
 * equivalent for a cancelled call.
 */
export class StrataRpcError extends Error {
  /**
   * @param {number} code JSON-RPC error code, e.g. -32602 or -32800.
   * @param {string} message Human-readable message (safe to show).
   * @param {unknown} [data] The error's `data` member, usually `{code, ...fields}`.
   * @param {{cause?: unknown}} [options]
   */
  constructor(code, message, data, options) {
    super(message, options);
    this.name = "StrataRpcError";
    /** @type {number} */
    this.code = code;
    /** @type {unknown} */
    this.data = data;
    /** @type {string | null} Stable string code from `error.data.code`, or null. */
    this.dataCode =
      data !== null && typeof data === "object" && typeof data.code === "string" ? data.code : null;
  }

  /**
   * Build from a JSON-RPC `error` member, tolerating malformed ones.
   * @param {any} error
   * @returns {StrataRpcError}
   */
  static fromWire(error) {
    if (error === null || typeof error !== "object") {
      return new StrataRpcError(-32603, "Malformed error reply", { code: "INTERNAL" });
    }
    const code = typeof error.code === "number" ? error.code : -32603;
    const message = typeof error.message === "string" ? error.message : "Unknown error";
    return new StrataRpcError(code, message, error.data);
  }
}

/**
 * The connection could not be opened, or it closed (or was never open) while
 * a call needed it. Not a server-reported error: there is no JSON-RPC reply.
 */
export class StrataConnectionError extends Error {
  /**
   * @param {string} message
   * @param {{closeCode?: number, closeReason?: string, cause?: unknown}} [details]
   */
  constructor(message, details = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = "StrataConnectionError";
    /** @type {number | null} The websocket close code, when there was one (1006: abnormal). */
    this.closeCode = details.closeCode ?? null;
    /** @type {string} */
    this.closeReason = details.closeReason ?? "";
  }
}

/**
 * @typedef {object} ConnectOptions
 * @property {typeof WebSocket} [WebSocket] A WebSocket constructor (default: globalThis.WebSocket).
 * @property {number} [timeoutMs] Give up opening after this many ms (default 10000; 0 = never).
 */

/**
 * @typedef {object} CallOptions
 * @property {AbortSignal} [signal] Aborting it cancels the call on the server too.
 * @property {number} [timeoutMs] Cancel the call after this many ms.
 */

/**
 * @typedef {object} CloseInfo
 * @property {number} code The websocket close code.
 * @property {string} reason The close reason, possibly empty.
 * @property {boolean} wasClean Whether the closing handshake completed.
 * @property {boolean} byClient True if {@link StrataClient#close} started it.
 */

/**
 * @callback NotificationHandler
 * @param {any} params The notification's params (object, array or undefined).
 * @param {{method: string, params?: any}} message The whole notification.
 * @returns {void}
 */

/**
 * @callback RequestHandler
 * @param {any} params The request's params (object, array or undefined).
 * @param {{id: string | number, method: string, signal: AbortSignal}} context The request's id
 *   and method, and a signal that aborts when the server cancels the request or the
 *   connection closes.
 * @returns {any} The result (or a promise of it); JSON-serializable, `undefined` sent as null.
 */

/**
 * @typedef {object} Pending
 * @property {string} method
 * @property {(value: any) => void} resolve
 * @property {(reason: any) => void} reject
 * @property {() => void} cleanup Removes the abort listener and the timer.
 */

/** Strip the token from a URL before putting it in a message. */
function redact(url) {
  try {
    const u = new URL(url);
    if (u.searchParams.has("token")) u.searchParams.set("token", "***");
    return u.toString();
  } catch {
    return "(invalid url)";
  }
}

/** Report an error from user code (a handler) without breaking the reader. */
function report(err) {
  if (typeof globalThis.reportError === "function") {
    globalThis.reportError(err);
  } else {
    setTimeout(() => {
      throw err;
    }, 0);
  }
}

/**
 * The error member answering a server request whose handler threw: a
 * StrataRpcError's own code, message and data, else -32603 without the
 * thrown message (which may hold the writer's text or a key).
 * @param {unknown} err
 * @returns {{code: number, message: string, data?: unknown}}
 */
function handlerError(err) {
  if (err instanceof StrataRpcError && Number.isInteger(err.code)) {
    const error = { code: err.code, message: String(err.message) };
    if (err.data !== undefined) error.data = err.data;
    return error;
  }
  return { code: -32603, message: "Request handler failed", data: { code: "INTERNAL" } };
}

/** A JSON-RPC 2.0 client of one Strata websocket connection. */
export class StrataClient {
  /**
   * Open a connection. Resolves once the websocket is open; rejects with a
   * {@link StrataConnectionError} if the server refuses the handshake (wrong
   * token, disallowed Origin, wrong port), is unreachable, or `timeoutMs`
   * passes. Browsers do not expose the HTTP status of a refused handshake,
   * so the error names the likely causes instead.
   *
   * @param {string} url The server's websocket URL, e.g. `ws://127.0.0.1:8765/`.
   * @param {string} token The session token; sent as `?token=`.
   * @param {ConnectOptions} [options]
   * @returns {Promise<StrataClient>}
   */
  static connect(url, token, options = {}) {
    const Ctor = options.WebSocket ?? globalThis.WebSocket;
    const timeoutMs = options.timeoutMs ?? 10000;
    return new Promise((resolve, reject) => {
      if (typeof Ctor !== "function") {
        reject(new StrataConnectionError("No WebSocket implementation: pass options.WebSocket"));
        return;
      }
      if (typeof token !== "string" || token === "") {
        reject(new StrataConnectionError("A non-empty token is required"));
        return;
      }
      let target;
      try {
        target = new URL(url);
      } catch (err) {
        reject(new StrataConnectionError(`Invalid server URL: ${String(url)}`, { cause: err }));
        return;
      }
      target.searchParams.set("token", token);
      const shown = redact(target.toString());

      let ws;
      try {
        ws = new Ctor(target.toString());
      } catch (err) {
        reject(new StrataConnectionError(`Cannot open a websocket to ${shown}`, { cause: err }));
        return;
      }

      let settled = false;
      let timer = null;
      const finish = () => {
        settled = true;
        if (timer !== null) clearTimeout(timer);
        ws.removeEventListener("open", onOpen);
        ws.removeEventListener("close", onClose);
      };
      const onOpen = () => {
        if (settled) return;
        finish();
        resolve(new StrataClient(ws));
      };
      const onClose = (event) => {
        if (settled) return;
        finish();
        reject(
          new StrataConnectionError(
            `Could not connect to Strata at ${shown} (websocket close code ${event.code}): ` +
              "the server refused the handshake or is not reachable. " +
              "Check the token, that this page's Origin is allowed, and the port.",
            { closeCode: event.code, closeReason: event.reason },
          ),
        );
      };
      // An "error" event is always followed by "close", which carries the code.
      ws.addEventListener("open", onOpen);
      ws.addEventListener("close", onClose);
      if (timeoutMs > 0) {
        timer = setTimeout(() => {
          if (settled) return;
          finish();
          ws.close();
          reject(new StrataConnectionError(`Timed out after ${timeoutMs} ms connecting to ${shown}`));
        }, timeoutMs);
      }
    });
  }

  /**
   * Wrap an already open websocket. Most code should use
   * {@link StrataClient.connect} instead.
   * @param {WebSocket} ws
   */
  constructor(ws) {
    /** @private */
    this._ws = ws;
    /** @private */
    this._nextId = 1;
    /** @private @type {Map<number, Pending>} */
    this._pending = new Map();
    /** @private @type {Set<number>} ids cancelled locally whose server reply is still due */
    this._cancelled = new Set();
    /** @private @type {Map<string, Set<NotificationHandler>>} */
    this._handlers = new Map();
    /** @private @type {Map<string, RequestHandler>} */
    this._requestHandlers = new Map();
    /** @private @type {Map<string | number, AbortController>} server requests being answered */
    this._serving = new Map();
    /** @private */
    this._closedByClient = false;
    /** @private @type {CloseInfo | null} */
    this._closeInfo = null;

    /**
     * Called once when the connection closes, for any reason.
     * @type {((info: CloseInfo) => void) | null}
     */
    this.onclose = null;

    /**
     * Called with a reply that matches no call (e.g. a parse error with
     * `id: null`) or a frame that is not JSON. Default: ignored.
     * @type {((message: unknown) => void) | null}
     */
    this.onunmatched = null;

    ws.addEventListener("message", (event) => this._onMessage(event.data));
    ws.addEventListener("close", (event) => this._onClose(event));
  }

  /** True while the websocket is open. @returns {boolean} */
  get isOpen() {
    return this._closeInfo === null && this._ws.readyState === WS_OPEN;
  }

  /** How many calls await a reply. @returns {number} */
  get pendingCount() {
    return this._pending.size;
  }

  /**
   * Call a method. Resolves with the reply's `result`; rejects with a
   * {@link StrataRpcError} for an error reply (or a cancellation), or a
   * {@link StrataConnectionError} if the connection is or becomes closed.
   *
   * @param {string} method e.g. `"context:assemble"`.
   * @param {object | any[]} [params] Omitted from the request when undefined.
   * @param {CallOptions} [options]
   * @returns {Promise<any>}
   */
  call(method, params, options = {}) {
    return this._request(method, params, options, (message) => this._send(message));
  }

  /**
   * Send several calls in one batch frame. Returns one promise per entry, in
   * order, each settling like {@link StrataClient#call}. The server answers
   * with one array; its replies are routed by id.
   *
   * @param {Array<{method: string, params?: object | any[]}>} entries
   * @param {CallOptions} [options] Applied to every entry.
   * @returns {Array<Promise<any>>}
   */
  batch(entries, options = {}) {
    const messages = [];
    const promises = entries.map((entry) =>
      this._request(entry.method, entry.params, options, (message) => messages.push(message)),
    );
    if (messages.length > 0) {
      try {
        this._send(messages);
      } catch (err) {
        for (const message of messages) this._fail(message.id, err);
      }
    }
    return promises;
  }

  /**
   * Send a notification (no reply, no id).
   * @param {string} method
   * @param {object | any[]} [params]
   * @throws {StrataConnectionError} if the connection is not open.
   */
  notify(method, params) {
    const message = { jsonrpc: JSONRPC, method };
    if (params !== undefined) message.params = params;
    this._send(message);
  }

  /**
   * Listen to server-to-client notifications with this method name, e.g.
   * `"$/progress"`. Several handlers may listen to one method.
   * @param {string} method
   * @param {NotificationHandler} handler
   * @returns {() => void} Call it to unsubscribe.
   */
  onNotification(method, handler) {
    let set = this._handlers.get(method);
    if (set === undefined) {
      set = new Set();
      this._handlers.set(method, set);
    }
    const entry = (params, message) => handler(params, message);
    set.add(entry);
    return () => {
      const current = this._handlers.get(method);
      if (current === undefined) return;
      current.delete(entry);
      if (current.size === 0) this._handlers.delete(method);
    };
  }

  /**
   * Answer the server's requests with this method name, e.g. `"llm:complete"`.
   * One handler per method: a later one replaces it. The handler's return
   * value (or the value its promise resolves to) is the result; a throw is an
   * error reply (see the protocol notes at the top of this file).
   * @param {string} method
   * @param {RequestHandler} handler
   * @returns {() => void} Call it to remove this handler (requests then get -32601).
   */
  onRequest(method, handler) {
    const entry = (params, context) => handler(params, context);
    this._requestHandlers.set(method, entry);
    return () => {
      if (this._requestHandlers.get(method) === entry) this._requestHandlers.delete(method);
    };
  }

  /**
   * Tell the server what this client can do for it; replaces the previous
   * declaration. With `completions: true` the server may send `llm:complete`
   * requests, which a handler from {@link StrataClient#onRequest} should
   * answer; `completionTimeoutMs` (1000..120000) is how long it waits for an
   * answer. Resolves with `{capabilities: [...]}`, what the server accepted.
   * @param {{completions?: boolean, completionTimeoutMs?: number}} capabilities
   * @param {CallOptions} [options]
   * @returns {Promise<{capabilities: string[]}>}
   */
  declareCapabilities(capabilities, options = {}) {
    const params = { completions: capabilities.completions === true };
    if (capabilities.completionTimeoutMs !== undefined) {
      params.completionTimeoutMs = capabilities.completionTimeoutMs;
    }
    return this.call("system:capabilities", params, options);
  }

  /**
   * Close the connection. Every pending call rejects with a
   * {@link StrataConnectionError} at once; `onclose` fires when the socket
   * has closed. Safe to call more than once.
   * @param {number} [code] Websocket close code (default 1000).
   * @param {string} [reason]
   */
  close(code = 1000, reason = "") {
    this._closedByClient = true;
    this._abortServing();
    this._rejectAll(new StrataConnectionError("The connection was closed by the client", { closeCode: code, closeReason: reason }));
    if (this._ws.readyState <= WS_OPEN) this._ws.close(code, reason);
  }

  // --- internals ------------------------------------------------------------

  /**
   * @private
   * @param {string} method
   * @param {any} params
   * @param {CallOptions} options
   * @param {(message: object) => void} transmit
   * @returns {Promise<any>}
   */
  _request(method, params, options, transmit) {
    const { signal, timeoutMs } = options;
    return new Promise((resolve, reject) => {
      if (signal?.aborted) {
        reject(this._cancellation(null, "aborted", signal.reason));
        return;
      }
      if (!this.isOpen) {
        reject(this._notOpen());
        return;
      }
      const id = this._nextId++;
      const message = { jsonrpc: JSONRPC, method, id };
      if (params !== undefined) message.params = params;

      let timer = null;
      const onAbort = () => this._cancel(id, "aborted", signal?.reason);
      const cleanup = () => {
        if (timer !== null) clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
      };
      this._pending.set(id, { method, resolve, reject, cleanup });
      try {
        transmit(message);
      } catch (err) {
        this._fail(id, err);
        return;
      }
      signal?.addEventListener("abort", onAbort, { once: true });
      if (timeoutMs !== undefined && timeoutMs !== null && Number.isFinite(timeoutMs)) {
        timer = setTimeout(() => this._cancel(id, "timeout", undefined, timeoutMs), Math.max(0, timeoutMs));
      }
    });
  }

  /**
   * Cancel a pending call: tell the server, reject locally.
   * @private
   */
  _cancel(id, reason, cause, timeoutMs) {
    const pending = this._pending.get(id);
    if (pending === undefined) return;
    this._pending.delete(id);
    pending.cleanup();
    if (this.isOpen) {
      this._cancelled.add(id);
      try {
        this._send({ jsonrpc: JSONRPC, method: CANCEL_METHOD, params: { id } });
      } catch {
        this._cancelled.delete(id);
      }
    }
    pending.reject(this._cancellation(id, reason, cause, timeoutMs));
  }

  /** @private */
  _cancellation(id, reason, cause, timeoutMs) {
    const data = { code: "REQUEST_CANCELLED", reason };
    if (id !== null) data.id = id;
    if (timeoutMs !== undefined) data.timeoutMs = timeoutMs;
    const message = reason === "timeout" ? `Request timed out after ${timeoutMs} ms` : "Request cancelled";
    return new StrataRpcError(REQUEST_CANCELLED, message, data, cause === undefined ? undefined : { cause });
  }

  /** @private */
  _notOpen() {
    const info = this._closeInfo;
    return new StrataConnectionError("The connection is not open", {
      closeCode: info?.code,
      closeReason: info?.reason,
    });
  }

  /**
   * Serialize and send; throws StrataConnectionError or TypeError (bad JSON).
   * @private
   */
  _send(message) {
    if (!this.isOpen) throw this._notOpen();
    this._ws.send(JSON.stringify(message));
  }

  /** @private */
  _fail(id, err) {
    const pending = this._pending.get(id);
    if (pending === undefined) return;
    this._pending.delete(id);
    pending.cleanup();
    pending.reject(err);
  }

  /** @private */
  _onMessage(raw) {
    if (typeof raw !== "string") {
      this._unmatched(raw);
      return;
    }
    let message;
    try {
      message = JSON.parse(raw);
    } catch {
      this._unmatched(raw);
      return;
    }
    if (Array.isArray(message)) {
      for (const entry of message) this._route(entry);
    } else {
      this._route(message);
    }
  }

  /** @private */
  _route(message) {
    if (message === null || typeof message !== "object") {
      this._unmatched(message);
      return;
    }
    if (typeof message.method === "string") {
      if ("id" in message) {
        this._serve(message);
        return;
      }
      if (message.method === CANCEL_METHOD) this._stopServing(message.params);
      this._dispatchNotification(message);
      return;
    }
    const id = message.id;
    const pending = typeof id === "number" ? this._pending.get(id) : undefined;
    if (pending === undefined) {
      if (typeof id === "number" && this._cancelled.delete(id)) return; // late reply to a cancelled call
      this._unmatched(message);
      return;
    }
    this._pending.delete(id);
    pending.cleanup();
    if ("error" in message) {
      pending.reject(StrataRpcError.fromWire(message.error));
    } else {
      pending.resolve(message.result);
    }
  }

  /**
   * Answer one server request with its handler's result or error.
   * @private
   */
  _serve(message) {
    const { id, method, params } = message;
    const handler = this._requestHandlers.get(method);
    if (handler === undefined || this._serving.has(id)) {
      // No handler (or a repeated id): answer at once so the server is not left waiting.
      const error = handler === undefined
        ? { code: -32601, message: "Method not found", data: { code: "METHOD_NOT_FOUND" } }
        : { code: -32600, message: "Invalid Request: id already in use", data: { code: "INVALID_REQUEST" } };
      this._answer({ jsonrpc: JSONRPC, id, error });
      return;
    }
    const controller = new AbortController();
    this._serving.set(id, controller);
    const context = { id, method, signal: controller.signal };
    new Promise((resolve) => resolve(handler(params, context)))
      .then(
        (result) => ({ jsonrpc: JSONRPC, id, result: result === undefined ? null : result }),
        (err) => ({ jsonrpc: JSONRPC, id, error: handlerError(err) }),
      )
      .then((reply) => {
        if (this._serving.get(id) !== controller) return; // cancelled, or the connection closed
        this._serving.delete(id);
        if (controller.signal.aborted) return;
        try {
          this._answer(reply);
        } catch {
          // the result is not JSON (e.g. a BigInt or a cycle): still answer
          this._answer({ jsonrpc: JSONRPC, id, error: handlerError(null) });
        }
      });
  }

  /**
   * The server cancelled one of its requests: abort its handler, send no reply.
   * @private
   */
  _stopServing(params) {
    const id = params !== null && typeof params === "object" ? params.id : undefined;
    const controller = this._serving.get(id);
    if (controller === undefined) return;
    this._serving.delete(id);
    controller.abort(new StrataRpcError(REQUEST_CANCELLED, "Request cancelled by the server",
      { code: "REQUEST_CANCELLED" }));
  }

  /**
   * Send a reply to a server request; throws TypeError if it is not JSON.
   * @private
   */
  _answer(reply) {
    if (!this.isOpen) return; // closed meanwhile: nothing to answer on
    try {
      this._send(reply);
    } catch (err) {
      if (err instanceof StrataConnectionError) return;
      throw err;
    }
  }

  /** @private */
  _dispatchNotification(message) {
    const handlers = this._handlers.get(message.method);
    if (handlers === undefined) return;
    for (const handler of [...handlers]) {
      try {
        handler(message.params, message);
      } catch (err) {
        report(err);
      }
    }
  }

  /** @private */
  _unmatched(message) {
    if (this.onunmatched === null) return;
    try {
      this.onunmatched(message);
    } catch (err) {
      report(err);
    }
  }

  /** @private */
  _rejectAll(err) {
    const pending = [...this._pending.values()];
    this._pending.clear();
    this._cancelled.clear();
    for (const p of pending) {
      p.cleanup();
      p.reject(err);
    }
  }

  /** @private */
  _abortServing() {
    const serving = [...this._serving.values()];
    this._serving.clear();
    for (const controller of serving) {
      controller.abort(new StrataConnectionError("The connection closed"));
    }
  }

  /** @private */
  _onClose(event) {
    if (this._closeInfo !== null) return;
    this._closeInfo = {
      code: event.code,
      reason: event.reason,
      wasClean: event.wasClean,
      byClient: this._closedByClient,
    };
    this._abortServing();
    this._rejectAll(
      new StrataConnectionError(`The connection closed (code ${event.code})`, {
        closeCode: event.code,
        closeReason: event.reason,
      }),
    );
    if (this.onclose !== null) {
      try {
        this.onclose({ ...this._closeInfo });
      } catch (err) {
        report(err);
      }
    }
  }
}
