// A windowed timeline: only the rows in view (and a few around them) are in the DOM, so
// a timeline of 10,000+ events scrolls as smoothly as one of ten. Rows are positioned by
// seq (seqs run 1..total without gaps); heights are measured once rendered and estimated
// before; rows not loaded yet show a placeholder and are asked for through `need`.

import { h } from "./render.js";

const ESTIMATE = 40;
const OVERSCAN = 8;

export class TimelineView {
  constructor(scroller, { rowHref, body, need }) {
    this.scroller = scroller;
    this.spacer = h("div", { class: "spacer" });
    scroller.append(this.spacer);
    this.rowHref = rowHref;
    this.body = body;
    this.need = need;
    this.events = new Map();
    this.heights = [];
    this.total = 0;
    this.offsets = new Float64Array(1);
    this.dirty = true;
    this.nodes = new Map();
    this.target = 0;
    this.pending = false;
    this.follow = true;
    // A row that opens or closes (a <details>) changes height: measure again. `toggle`
    // does not bubble, so it is caught on its way down.
    this.spacer.addEventListener("toggle", () => this.schedule(), true);
    scroller.addEventListener("scroll", () => {
      if (this.atBottom()) this.follow = true;
      this.schedule();
    });
  }

  setTotal(total) {
    if (total <= this.total) return;
    for (let i = this.total; i < total; i++) this.heights.push(ESTIMATE);
    this.total = total;
    this.dirty = true;
    this.schedule();
  }

  put(event) {
    if (this.events.has(event.seq)) return false;
    this.events.set(event.seq, event);
    this.setTotal(event.seq);
    this.invalidate(event.seq);
    return true;
  }

  invalidate(seq) {
    const node = this.nodes.get(seq);
    if (node) {
      node.remove();
      this.nodes.delete(seq);
    }
    this.schedule();
  }

  refreshAll() {
    for (const seq of [...this.nodes.keys()]) this.invalidate(seq);
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.render();
    });
  }

  layout() {
    if (!this.dirty) return;
    const offsets = new Float64Array(this.total + 1);
    for (let i = 0; i < this.total; i++) offsets[i + 1] = offsets[i] + this.heights[i];
    this.offsets = offsets;
    this.spacer.style.height = `${offsets[this.total]}px`;
    this.dirty = false;
  }

  indexAt(y) {
    let lo = 0;
    let hi = this.total;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.offsets[mid + 1] <= y) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  atBottom() {
    const s = this.scroller;
    return s.scrollHeight - s.scrollTop - s.clientHeight < 30;
  }

  render() {
    const stick = this.stick;
    this.layout();
    const top = this.scroller.scrollTop;
    const first = Math.max(0, this.indexAt(top) - OVERSCAN);
    const last = Math.min(this.total, this.indexAt(top + this.scroller.clientHeight) + 1 + OVERSCAN);
    const anchor = Math.min(this.indexAt(top), Math.max(0, this.total - 1));
    const anchorShift = top - this.offsets[anchor];
    for (const [seq, node] of this.nodes) {
      if (seq <= first || seq > last) {
        node.remove();
        this.nodes.delete(seq);
      }
    }
    let missing = 0;
    for (let i = first; i < last; i++) {
      const seq = i + 1;
      if (!this.events.has(seq) && !missing) missing = seq;
      if (!this.nodes.has(seq)) this.nodes.set(seq, this.spacer.appendChild(this.row(seq)));
    }
    this.measure(first, last);
    const wanted = stick ? this.scroller.scrollHeight - this.scroller.clientHeight : this.offsets[anchor] + anchorShift;
    if ((stick || top > 0) && Math.abs(this.scroller.scrollTop - wanted) > 1) {
      this.scroller.scrollTop = wanted;
    }
    if (missing) this.need(missing);
  }

  measure(first, last) {
    let changed = false;
    for (let i = first; i < last; i++) {
      const node = this.nodes.get(i + 1);
      const height = node.offsetHeight;
      if (height && height !== this.heights[i]) {
        this.heights[i] = height;
        changed = true;
      }
    }
    if (!changed) return;
    this.dirty = true;
    this.layout();
    for (let i = first; i < last; i++) this.nodes.get(i + 1).style.top = `${this.offsets[i]}px`;
  }

  row(seq) {
    const event = this.events.get(seq);
    const node = h("div", {
      class: `row${event ? "" : " placeholder"}${seq === this.target ? " target" : ""}`,
      "data-seq": seq,
      id: `event-${seq}`,
    }, h("a", { class: "seq", href: this.rowHref(seq), title: "Link to this event" }, `#${seq}`),
    h("div", { class: "body" }, event ? this.body(event) : "loading…"));
    node.style.top = `${this.offsets[seq - 1]}px`;
    return node;
  }

  // Keep the view pinned to the newest event while it is there.
  get stick() {
    return this.follow && this.atBottom();
  }

  scrollToSeq(seq) {
    this.target = seq;
    this.follow = false;
    this.layout();
    this.scroller.scrollTop = Math.max(0, this.offsets[seq - 1] - this.scroller.clientHeight / 3);
    this.refreshAll();
  }

  scrollToBottom() {
    this.follow = true;
    this.layout();
    this.scroller.scrollTop = this.scroller.scrollHeight;
    this.schedule();
  }
}
