// One agent: its timeline replayed from seq 1 (pages fetched as the view needs them) and
// followed live, with live text, approvals, stop and a message box. An agent that does not
// exist yet gets an invitation instead: its first message, with a published kind, starts it.

import { ApiError, agentPath, publishedKinds } from "./api.js";
import { agentHref, eventBody, h, kindSelect } from "./render.js";
import { TimelineView } from "./timeline.js";

const PAGE = 200;
const IN_A_TURN = ["running", "waiting", "parked", "paused"];

export class AgentPage {
  constructor(api, me, address, seq, showError, kind = "") {
    this.api = api;
    this.me = me;
    this.address = address;
    this.wantedKind = kind;
    this.kindChoice = null;
    this.canWrite = me.scope !== "read";
    this.showError = showError;
    this.live = new Map();
    this.approvals = new Map();
    this.requests = new Map();
    this.children = new Map();
    this.endings = new Map();
    this.loading = new Set();
    this.followFrom = null;
    this.follower = null;
    this.closed = false;
    this.build();
    this.view = new TimelineView(this.scroller, {
      rowHref: (n) => `${agentHref(address)}/${n}`,
      body: (event) => eventBody(event, this.context()),
      need: (n) => this.loadPage(n - 1),
    });
    this.scroller.append(this.liveNode);
    this.start(seq);
  }

  build() {
    this.statusNode = h("span", { class: "status" }, "…");
    this.metaNode = h("span", { class: "meta" });
    this.connNode = h("span", { class: "conn", "aria-live": "polite" });
    this.noticeNode = h("p", { class: "notice", "aria-live": "polite" });
    this.scroller = h("div", { class: "scroller", tabindex: "0", "aria-label": "Timeline" });
    this.liveNode = h("div", { class: "live-area", "aria-live": "polite" });
    const head = h("div", { class: "agent-head" },
      h("h1", {}, this.address), this.statusNode, this.metaNode, this.connNode,
      this.canWrite ? h("button", { type: "button", class: "danger", id: "stop", hidden: true, onclick: () => this.stop() }, "Stop") : null,
      this.canWrite ? h("button", { type: "button", id: "hold", hidden: true, onclick: () => this.hold() }, "Pause") : null,
      h("a", { href: "#/" }, "All agents"));
    this.node = h("section", { class: "agent" }, head, this.noticeNode, this.scroller,
      this.canWrite ? this.composer() : null);
    this.node.style.cssText = "display:flex;flex-direction:column;flex:1;min-height:0";
  }

  composer() {
    this.input = h("textarea", { id: "message", placeholder: "Message (Ctrl+Enter sends)", "aria-label": "Message" });
    this.kindSlot = h("span", { class: "kind-slot" });
    const form = h("form", { class: "composer" }, this.input, this.kindSlot,
      h("button", { type: "submit", class: "primary", id: "send" }, "Send"));
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.send();
    });
    this.input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
        event.preventDefault();
        this.send();
      }
    });
    return form;
  }

  context() {
    return {
      canWrite: this.canWrite,
      approval: (id) => this.approvals.get(id) || {},
      answer: (id, approve, note, answers) => this.answer(id, approve, note, answers),
      children: (turn) => this.children.get(turn) || [],
    };
  }

  focus() {
    (this.input || this.scroller).focus();
  }

  close() {
    this.closed = true;
    if (this.follower) this.follower.close();
    clearTimeout(this.refreshTimer);
  }

  async start(seq) {
    let row = null;
    try {
      row = await this.api.get(agentPath(this.address));
      this.showRow(row);
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 404) throw error;
      await this.invite();
      return;
    }
    const last = row ? row.last_seq : 0;
    const from = seq ? Math.max(0, seq - 20) : Math.max(0, last - PAGE);
    const page = await this.loadPage(from);
    if (this.closed) return;
    this.followFrom = Math.max(last, page ? page.last_seq : 0);
    this.view.setTotal(this.followFrom);
    if (seq) this.view.scrollToSeq(seq);
    else this.view.scrollToBottom();
    this.startFollow();
  }

  // The page of an agent nobody has written to: what starts it, for a key that may.
  async invite() {
    this.statusNode.textContent = "new";
    this.statusNode.className = "status new";
    if (!this.canWrite) {
      this.noticeNode.textContent = `There is no agent ${this.address} yet.`;
      return;
    }
    let kinds = [];
    try {
      kinds = await publishedKinds(this.api);
    } catch (error) {
      this.showError(error.message);
    }
    if (this.closed) return;
    if (!kinds.length) {
      this.noticeNode.replaceChildren(`${this.address} does not exist yet, and a first message needs a published kind; `,
        `tenant ${this.me.tenant} has none. Whoever runs the deployment publishes one with `,
        h("code", {}, `teaspill specs publish ${this.me.tenant} <spec file>`), ".");
      return;
    }
    const chosen = kinds.some((k) => k.kind === this.wantedKind) ? this.wantedKind : kinds[0].kind;
    this.kindChoice = kindSelect(kinds, chosen);
    this.kindSlot.replaceChildren(this.kindChoice);
    this.noticeNode.textContent = `${this.address} is new: your first message starts it, running the kind you choose beside Send.`;
  }

  startFollow() {
    if (this.follower) this.follower.close();
    this.follower = this.api.follow(this.address, this.view.total, {
      event: (e) => this.recorded(e),
      delta: (d) => this.delta(d),
      retract: (r) => this.retract(r),
      state: (state, why) => { this.connNode.textContent = state === "live" ? "● live" : `${state} ${why}`; },
      error: (error) => this.showError(error.message),
    });
  }

  goTo(seq) {
    if (seq) this.view.scrollToSeq(seq);
  }

  async loadPage(after) {
    if (this.loading.has(after) || (this.followFrom !== null && after >= this.followFrom)) return null;
    this.loading.add(after);
    try {
      const page = await this.api.get(`${agentPath(this.address)}/timeline?after=${after}&limit=${PAGE}`);
      if (this.closed) return page;
      for (const event of page.events) this.take(event);
      if (this.followFrom === null || page.last_seq <= this.followFrom) this.view.setTotal(page.last_seq);
      return page;
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 404) this.showError(error.message);
      return null;
    } finally {
      this.loading.delete(after);
    }
  }

  // Every recorded event passes here once, whether it came from a page or the stream.
  take(event) {
    if (!this.view.put(event)) return;
    const b = event.body;
    if (b.type === "approval_requested") this.requests.set(b.request_id, event.seq);
    if (["approval_answered", "approval_abandoned", "approval_refused"].includes(b.type)) {
      this.approvals.set(b.request_id, { settled: true });
      const asked = this.requests.get(b.request_id);
      if (asked) this.view.invalidate(asked);
    }
    if (b.type === "child_spawned") {
      this.children.set(event.turn, [...(this.children.get(event.turn) || []), b]);
      const ended = this.endings.get(event.turn);
      if (ended) this.view.invalidate(ended);
    }
    if (b.type === "turn_ended") this.endings.set(event.turn, event.seq);
    if (b.type === "model_message" || b.type === "turn_ended") this.settleLive(event);
  }

  recorded(event) {
    this.take(event);
    clearTimeout(this.refreshTimer);
    this.refreshTimer = setTimeout(() => this.refreshRow(), 300);
  }

  async refreshRow() {
    try {
      this.showRow(await this.api.get(agentPath(this.address)));
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 404) this.showError(error.message);
    }
  }

  showRow(row) {
    this.showStatus(row.status);
    const queued = row.queued ? ` · ${row.queued} queued` : "";
    this.metaNode.textContent = `${row.kind} v${row.spec_version} · turn ${row.turn} · ${row.last_seq} events${queued}`;
  }

  // Stop shows only while a turn is under way.
  showStatus(status) {
    this.statusNode.textContent = status;
    this.statusNode.className = `status ${status}`;
    const stop = this.node.querySelector("#stop");
    if (stop) stop.hidden = !IN_A_TURN.includes(status);
    const hold = this.node.querySelector("#hold");
    if (hold) {
      hold.hidden = status === "new";
      hold.textContent = status === "paused" ? "Resume" : "Pause";
    }
  }

  settleLive(event) {
    const whole = event.body.type === "turn_ended";
    for (const [key, entry] of this.live) {
      if (entry.turn < event.turn || (entry.turn === event.turn && (whole || entry.round <= event.round))) {
        this.live.delete(key);
      }
    }
    this.drawLive();
  }

  delta(d) {
    const key = `${d.turn}:${d.round}`;
    const entry = this.live.get(key) || { turn: d.turn, round: d.round, attempt: d.attempt, text: "" };
    if (entry.attempt !== d.attempt) {
      entry.attempt = d.attempt;
      entry.text = "";
      entry.retracted = true;
    }
    if (d.offset > entry.text.length) return;
    entry.text = entry.text.slice(0, d.offset) + d.text;
    this.live.set(key, entry);
    this.drawLive();
  }

  retract(r) {
    const key = `${r.turn}:${r.round}`;
    const entry = this.live.get(key) || { turn: r.turn, round: r.round, text: "" };
    entry.text = "";
    entry.attempt = null;
    entry.retracted = true;
    this.live.set(key, entry);
    this.drawLive();
  }

  drawLive() {
    const stick = this.view.atBottom();
    this.liveNode.replaceChildren(...[...this.live.values()].map((entry) => h("div", {
      class: "live", "data-live": `${entry.turn}:${entry.round}`,
    }, h("span", { class: "kind" }, `turn ${entry.turn} · round ${entry.round} · writing…`),
    entry.retracted ? h("div", { class: "retracted" }, "The round started again; the text so far was taken back.") : null,
    h("span", { class: "text" }, entry.text))));
    if (stick) this.scroller.scrollTop = this.scroller.scrollHeight;
  }

  async send() {
    const text = this.input.value.trim();
    if (!text) return;
    const body = { text };
    if (this.kindChoice) body.kind = this.kindChoice.value;
    try {
      await this.api.post(`${agentPath(this.address)}/messages`, body);
      this.input.value = "";
      this.noticeNode.textContent = "Message sent; the reply shows here as the agent writes it.";
      this.showError("");
      if (this.kindChoice) this.started();
      else if (this.follower && this.follower.failed) this.startFollow();
      this.view.scrollToBottom();
    } catch (error) {
      this.showError(error.message);
    }
  }

  // The first message created the agent: follow it from its first event.
  started() {
    this.kindChoice = null;
    this.kindSlot.replaceChildren();
    this.followFrom = 0;
    this.showStatus("running");
    this.startFollow();
  }

  async answer(id, approve, note, answers) {
    try {
      const body = answers ? { approve, note, answers } : { approve, note };
      await this.api.post(`${agentPath(this.address)}/approvals/${encodeURIComponent(id)}`, body);
      if (!(this.approvals.get(id) || {}).settled) {
        this.approvals.set(id, { sent: `${approve ? "Approval" : "Denial"} sent; the outcome shows on the timeline.` });
      }
      this.showError("");
    } catch (error) {
      this.approvals.set(id, { error: error.message });
      this.showError(error.message);
    }
    const seq = this.requests.get(id);
    if (seq) this.view.invalidate(seq);
  }

  // Pause holds the agent after its running round; Resume runs it again (both one-way).
  async hold() {
    const resume = this.statusNode.textContent === "paused";
    try {
      const answer = await this.api.post(`${agentPath(this.address)}/${resume ? "resume" : "pause"}`);
      this.noticeNode.textContent = answer.message;
      this.showError("");
    } catch (error) {
      this.showError(error.message);
    }
  }

  async stop() {
    try {
      const answer = await this.api.post(`${agentPath(this.address)}/stop`);
      this.noticeNode.textContent = answer.message || "Stop sent; the turn's end shows on the timeline.";
      this.showError("");
    } catch (error) {
      this.showError(error.message);
    }
  }
}
