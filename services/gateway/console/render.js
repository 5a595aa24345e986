// One timeline event as DOM, built with createElement and text nodes only, so text
// from agents and tools can never become markup.

export const RESULT_CUT = 2000;

export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export const agentHref = (address) => `#/agents/${encodeURIComponent(address)}`;

export function kindSelect(kinds, chosen) {
  return h("select", { id: "kind", "aria-label": "Kind" },
    kinds.map((k) => h("option", { value: k.kind, selected: k.kind === chosen }, `${k.kind} (v${k.version}, ${k.model})`)));
}

const kind = (text) => h("span", { class: "kind" }, text);

export function cut(text, limit = RESULT_CUT) {
  if (text.length <= limit) return text;
  return `${text.slice(0, limit)}… (${text.length - limit} more characters cut)`;
}

function oneLine(text, width = 90) {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length <= width ? flat : `${flat.slice(0, width - 1)}…`;
}

export function usage(u) {
  if (!u) return "";
  return `${u.prompt_tokens} prompt (${u.cached_tokens || 0} cached), ${u.completion_tokens} completion tokens`;
}

function collapsible(summary, detail, open = false) {
  return h("details", { open }, h("summary", {}, summary), h("pre", {}, detail));
}

const BODIES = {
  turn_started: (e, b) => h("div", { class: "user" }, kind(`turn ${e.turn}`),
    h("span", { class: "text" }, b.text),
    b.parent ? h("span", { class: "usage" }, " from ", h("a", { href: agentHref(b.parent) }, b.parent)) : null),
  message_queued: (e, b) => h("div", { class: "user" }, kind("queued"), h("span", { class: "text" }, b.text)),
  message_steered: (e, b) => h("div", { class: "user" }, kind("joined the turn"), h("span", { class: "text" }, b.text)),
  message_rejected: (e, b) => h("div", { class: "warn" }, kind("rejected"), h("span", { class: "text" }, b.text),
    b.message ? ` (${b.message})` : ""),
  agent_paused: (e, b) => h("div", { class: "warn" }, kind("paused"), b.by ? `by ${b.by}` : "nothing runs until resumed"),
  agent_resumed: (e, b) => h("div", {}, kind("resumed"), b.by ? `by ${b.by}` : ""),
  agent_forked: (e, b) => h("div", {}, kind("forked"), `from ${b.source} at seq ${b.seq}`, b.by ? ` by ${b.by}` : ""),
  model_message: (e, b) => h("div", {}, kind(b.model),
    b.text ? h("span", { class: "text" }, b.text) : null,
    (b.tool_calls || []).map((c) => h("div", {}, kind("asks for"), `${c.name}(${oneLine(JSON.stringify(c.arguments || {}), 60)})`)),
    (b.memories || []).length
      ? h("div", { class: "usage" }, `shown ${b.memories.length === 1 ? "a memory" : `${b.memories.length} memories`}: ${b.memories.join(", ")}`)
      : null,
    h("div", { class: "usage" }, usage(b.usage))),
  tool_called: (e, b) => collapsible(
    [kind("tool call"), `${b.name}(${oneLine(JSON.stringify(b.arguments || {}), 60)})`],
    JSON.stringify(b.arguments || {}, null, 2)),
  tool_finished: (e, b) => collapsible(
    [kind("tool result"), h("span", { class: b.status === "ok" ? "good" : "bad" },
      `${b.name} → ${b.status === "error" ? "refused or failed" : b.status}`),
      `: ${b.name === "search_docs" && b.status === "ok" ? citations(b.content) : oneLine(b.content, 70)}`],
    cut(b.content)),
  child_spawned: (e, b) => h("div", {}, kind(b.stage || "spawned"), h("a", { href: agentHref(b.child) }, b.child),
    b.kind ? h("span", { class: "usage" }, ` runs ${b.kind}`) : null, `: ${oneLine(b.task)}`),
  handed_off: (e, b) => h("div", {}, kind("handed off"), `from ${b.from_kind} to `,
    h("strong", {}, b.kind), h("span", { class: "usage" }, ` v${b.version}: the next messages go to it`)),
  child_reported: (e, b) => h("div", {}, kind("child reported"), h("a", { href: agentHref(b.child) }, b.child),
    ` ${b.outcome}: `, h("span", { class: "text" }, b.reply)),
  waiting: (e, b) => h("div", {}, kind("waiting"), `for ${b.pending.join(", ")}`),
  approval_answered: (e, b) => h("div", {}, kind("approval"),
    h("span", { class: b.approve ? "good" : "bad" }, `${b.request_id} ${b.approve ? "approved" : "denied"}`),
    b.by ? ` by ${b.by}` : "", b.note ? `: “${b.note}”` : ""),
  approval_abandoned: (e, b) => h("div", { class: "warn" }, kind("approval"),
    `${b.request_id} abandoned: its outcome is unknown`),
  approval_refused: (e, b) => h("div", { class: "warn" }, kind("approval"),
    `${b.request_id}: the ${b.approve ? "approval" : "denial"} changed nothing`,
    b.by ? ` (by ${b.by})` : "", `: ${b.message || b.reason.replace(/_/g, " ")}`),
  stop_refused: (e, b) => h("div", { class: "warn" }, kind("stop"), `refused: ${b.message || "no turn was in progress"}`),
  page_call_claimed: (e, b) => h("div", {}, kind("page"), `${b.request_id} claimed by page ${b.page}`),
  turn_parked: (e, b) => h("div", { class: "warn" }, kind(`turn ${e.turn}`), `parked, still waiting for ${b.request_id}`),
  model_fallback: (e, b) => h("div", { class: "warn" }, kind("fallback"),
    `${b.model} failed (${oneLine(b.reason, 70)}); the round starts again on ${b.next}`),
  context_folded: (e, b) => collapsible(
    [kind("context folded"), turnsCovered(b),
      h("span", { class: "usage" }, ` · ${b.tokens_before} → ${b.tokens_after} prompt tokens · ${b.extractive
        ? `extractive summary${b.reason ? ` (${oneLine(b.reason, 50)})` : ""}` : `summary by ${b.model}`}`)],
    b.summary),
  memories_extracted: (e, b) => h("div", b.problem ? { class: "warn" } : {}, kind("memory"),
    `kept ${b.ids.length} ${b.ids.length === 1 ? "fact" : "facts"} in the ${b.scope} scope`,
    b.problem ? `: ${oneLine(b.problem, 70)}` : ""),
  artifact_written: (e, b) => h("div", {}, kind("wrote"), h("span", { class: "text" }, b.path),
    h("span", { class: "usage" }, ` ${b.size} bytes · sha256 ${b.sha256.slice(0, 12)}…`)),
};

// The documents a search_docs result gave the model, each with the passages it quoted,
// from the tool's own JSON; anything else is shown as it came.
function citations(content) {
  let passages;
  try {
    passages = JSON.parse(content).passages;
  } catch {
    return oneLine(content, 70);
  }
  if (!Array.isArray(passages)) return oneLine(content, 70);
  if (!passages.length) return "no passage found";
  const cited = new Map();
  for (const p of passages) cited.set(p.title, [...(cited.get(p.title) || []), `§${p.passage}`]);
  return [...cited].map(([title, at]) => `“${title}” ${at.join(" ")}`).join("; ");
}

function turnsCovered(b) {
  return b.first_turn === b.last_turn ? `turn ${b.first_turn} summarised`
    : `turns ${b.first_turn}-${b.last_turn} summarised`;
}

function turnEnded(e, b, context) {
  const cls = b.outcome === "succeeded" ? "good" : b.outcome === "failed" ? "bad" : "warn";
  const children = context.children(e.turn);
  return h("div", {}, kind(`turn ${e.turn}`), h("span", { class: cls }, `ended ${b.outcome}`),
    b.reason ? h("span", { class: "reason" }, `: ${b.reason}`) : null,
    h("div", { class: "usage" }, usage(b.usage)),
    children.length ? tree(children) : null);
}

// The turn's children as a tree: one branch per child, its stage when a composition
// started it; each child's own page draws its children the same way.
function tree(children) {
  return h("ul", { class: "tree", "aria-label": "children" },
    children.map((c) => h("li", {}, c.stage ? h("span", { class: "kind" }, c.stage) : null,
      h("a", { href: agentHref(c.child) }, c.child), c.kind ? h("span", { class: "usage" }, ` (${c.kind})`) : null)));
}

// A request the turn waits on: a call to approve, or (`ask_user`) the model's question to
// the person, answered with its form and declined instead of denied.
function approvalRequested(e, b, context) {
  if (b.page) return pageCall(b, context);
  const asking = b.name === "ask_user";
  const node = asking
    ? h("div", {}, kind("question"), h("span", { class: "usage" }, b.request_id))
    : h("div", {}, kind("needs approval"), `${b.name}(${oneLine(JSON.stringify(b.arguments || {}), 60)})`,
      h("span", { class: "usage" }, ` ${b.request_id}`));
  const state = context.approval(b.request_id);
  if (state.settled) return node;
  if (state.sent) {
    node.append(h("div", { class: "notice" }, state.sent));
    return node;
  }
  const questions = Object.entries(b.questions || {});
  for (const [, q] of questions) node.append(h("div", { class: "notice" }, q.url ? `${q.message} ${q.url}` : q.message));
  if (!context.canWrite) return node;
  const note = h("input", { type: "text", placeholder: "Note for the model (optional)", "aria-label": `Note for ${b.request_id}` });
  const forms = questions.filter(([, q]) => !q.url).map(([key, q]) => [key, questionFields(key, q.schema || {})]);
  for (const [, form] of forms) node.append(form.node);
  const answers = () => Object.fromEntries(forms.map(([key, form]) => [key, form.values()]));
  const answer = (approve) => context.answer(b.request_id, approve, note.value, approve && forms.length ? answers() : undefined);
  node.append(h("div", { class: "approval" },
    h("button", { type: "button", class: "primary", onclick: () => answer(true) }, asking ? "Answer" : "Approve"),
    h("button", { type: "button", class: "danger", onclick: () => answer(false) }, asking ? "Decline" : "Deny"),
    note,
    state.error ? h("span", { class: "bad" }, state.error) : null));
  return node;
}

// A tool that runs in the conversation's page: a page claims it and posts its result, so
// the console shows the request and offers no answer of its own.
function pageCall(b, context) {
  const node = h("div", {}, kind("runs in the page"), `${b.name}(${oneLine(JSON.stringify(b.arguments || {}), 60)})`,
    h("span", { class: "usage" }, ` ${b.request_id}`));
  if (!context.approval(b.request_id).settled) {
    node.append(h("div", { class: "notice" }, "Waiting for a page of this conversation to run it."));
  }
  return node;
}

// A form of a tool's question: one labelled input per field of its schema; a field left
// empty is left out, so the gateway's check names what is missing.
function questionFields(key, schema) {
  const fields = Object.entries(schema.properties || {}).map(([name, prop]) => {
    const label = `${name}${(schema.required || []).includes(name) ? " (required)" : ""}`;
    const aria = `${key} ${name}`;
    let input;
    if (Array.isArray(prop.enum)) input = h("select", { "aria-label": aria }, h("option", { value: "" }, ""), prop.enum.map((v) => h("option", { value: String(v) }, String(v))));
    else if (prop.type === "boolean") input = h("input", { type: "checkbox", "aria-label": aria });
    else input = h("input", { type: prop.type === "integer" || prop.type === "number" ? "number" : "text", "aria-label": aria });
    const value = () => {
      if (prop.type === "boolean") return input.checked;
      if (input.value === "") return undefined;
      if (prop.type === "integer" || prop.type === "number") return Number(input.value);
      return input.value;
    };
    return { name, value, node: h("label", {}, label, " ", input) };
  });
  const values = () => Object.fromEntries(fields.map((f) => [f.name, f.value()]).filter(([, v]) => v !== undefined));
  return { values, node: h("div", { class: "approval" }, fields.map((f) => f.node)) };
}

export function eventBody(e, context) {
  const b = e.body;
  if (b.type === "turn_ended") return turnEnded(e, b, context);
  if (b.type === "approval_requested") return approvalRequested(e, b, context);
  const make = BODIES[b.type];
  if (make) return make(e, b);
  return collapsible([kind(b.type)], JSON.stringify(b, null, 2));
}
