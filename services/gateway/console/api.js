// The gateway's HTTP API for one key: JSON calls, and a timeline followed over SSE.
// The key lives in sessionStorage only: it is gone when the tab is closed.

const STORE = "teaspill.key";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function savedKey() {
  return sessionStorage.getItem(STORE) || "";
}

export function saveKey(key) {
  if (key) sessionStorage.setItem(STORE, key);
  else sessionStorage.removeItem(STORE);
}

export const agentPath = (address) => `/v1/agents/${encodeURIComponent(address)}`;

// The tenant's published kinds, newest version of each, as the deployment lists them.
export async function publishedKinds(api) {
  return (await api.get("/v1/deployment")).kinds;
}

async function failure(response) {
  let message = `the gateway answered ${response.status}`;
  try {
    const body = await response.json();
    if (body && body.error && body.error.message) message = body.error.message;
  } catch (_) { /* not JSON: keep the status sentence */ }
  return new ApiError(response.status, message);
}

export class Api {
  constructor(key) {
    this.key = key;
  }

  headers(extra = {}) {
    return { Authorization: `Bearer ${this.key}`, ...extra };
  }

  async call(method, path, body) {
    const init = { method, headers: this.headers() };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers["Content-Type"] = "application/json";
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (error) {
      throw new ApiError(0, `the gateway does not answer (${error.message})`);
    }
    if (!response.ok) throw await failure(response);
    return response.json();
  }

  get(path) { return this.call("GET", path); }
  post(path, body) { return this.call("POST", path, body); }

  // Follow an agent's timeline after `after`: recorded events, live deltas, retractions.
  // A dropped connection is resumed with Last-Event-ID, so nothing repeats or goes
  // missing. Returns { close() }.
  follow(address, after, handlers) {
    const follower = new Follower(this, address, after, handlers);
    follower.run();
    return follower;
  }
}

class Follower {
  constructor(api, address, after, handlers) {
    this.api = api;
    this.address = address;
    this.last = after;
    this.handlers = handlers;
    this.closed = false;
    this.controller = null;
    this.delay = 200;
  }

  close() {
    this.closed = true;
    if (this.controller) this.controller.abort();
  }

  async run() {
    while (!this.closed) {
      try {
        await this.connect();
      } catch (error) {
        if (this.closed) return;
        if (error instanceof ApiError && error.status >= 400 && error.status !== 503) {
          this.failed = true;
          this.handlers.state("failed", error.message);
          this.handlers.error(error);
          return;
        }
      }
      if (this.closed) return;
      this.handlers.state("reconnecting", "");
      await new Promise((done) => setTimeout(done, this.delay));
      this.delay = Math.min(this.delay * 2, 3000);
    }
  }

  async connect() {
    this.controller = new AbortController();
    const headers = this.api.headers({ Accept: "text/event-stream", "Last-Event-ID": String(this.last) });
    let response;
    try {
      response = await fetch(`${agentPath(this.address)}/events`, { headers, signal: this.controller.signal });
    } catch (error) {
      throw new ApiError(0, `the gateway does not answer (${error.message})`);
    }
    if (!response.ok) throw await failure(response);
    this.handlers.state("live", "");
    this.delay = 200;
    await this.read(response.body.getReader());
  }

  async read(reader) {
    const decoder = new TextDecoder();
    let buffer = "";
    let fields = {};
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, cut).replace(/\r$/, "");
        buffer = buffer.slice(cut + 1);
        if (line === "") {
          this.frame(fields);
          fields = {};
        } else if (!line.startsWith(":")) {
          const colon = line.indexOf(":");
          const name = colon < 0 ? line : line.slice(0, colon);
          const data = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          fields[name] = name === "data" && fields.data !== undefined ? `${fields.data}\n${data}` : data;
        }
      }
    }
  }

  frame(fields) {
    if (fields.data === undefined || this.closed) return;
    const item = JSON.parse(fields.data);
    if (fields.event === "delta") this.handlers.delta(item);
    else if (fields.event === "retract") this.handlers.retract(item);
    else if (fields.id !== undefined) {
      if (item.seq <= this.last) return;
      this.last = item.seq;
      this.handlers.event(item);
    }
  }
}
