// The teaspill console: paste a key, see the tenant's agents, open one to replay its
// timeline and follow it live. Routes live in the URL hash:
//   #/                      the agents
//   #/agents/<address>      one agent
//   #/agents/<address>/<n>  one agent, at event n

import { Api, ApiError, publishedKinds, saveKey, savedKey } from "./api.js";
import { agentHref, h, kindSelect } from "./render.js";
import { AgentPage } from "./agent.js";

const main = document.getElementById("main");
const banner = document.getElementById("error");
const who = document.getElementById("who");
const logout = document.getElementById("logout");
let session = null; // { api, me }
let page = null; // what is on screen; has close()
let starting = null; // { address, kind }: chosen in New conversation, for the page it opens

export function showError(message) {
  banner.textContent = message;
  banner.hidden = !message;
}

function mount(next) {
  if (page && page.close) page.close();
  page = next;
  main.replaceChildren(next.node);
}

const KEY_SHAPE = /^tsk_[a-z0-9]{12}_[A-Za-z0-9_-]{32,64}$/;
const MAKE_KEY = "teaspill keys create <tenant> --scope write --name <your name>";

// What a person pasted, as a key: surrounding space and a copied "Bearer " go.
function pastedKey(text) {
  return text.trim().replace(/^bearer\s+/i, "").trim();
}

// A sentence about the key the person pasted, never about an HTTP header.
export function keyProblem(key) {
  if (!key) return "Paste a key first: it starts with tsk_.";
  if (KEY_SHAPE.test(key)) return "";
  const shape = "a key is tsk_, then 12 letters and digits, an underscore, and 32 or more letters, digits, - and _ (tsk_0a1b2c3d4e5f_…). Paste all of it.";
  if (key.startsWith("tsk_")) return `That key is cut short or has a character no key has: ${shape}`;
  return `That is not a teaspill key: ${shape}`;
}

function signInSentence(error) {
  if (!(error instanceof ApiError) || error.status !== 401) return error.message;
  if (/revoked/.test(error.message)) return `This key was revoked and works no more: make a new one with \`${MAKE_KEY}\`.`;
  if (/unknown/.test(error.message)) return "This deployment does not know that key: it may have been made for another deployment, or mistyped.";
  return error.message;
}

async function signIn(key) {
  const api = new Api(key);
  const me = await api.get("/v1/me");
  saveKey(key);
  session = { api, me };
  const named = me.key_name ? `${me.key_name} (${me.key_id})` : me.key_id;
  who.textContent = `tenant ${me.tenant} · ${me.scope} key ${named}`;
  logout.hidden = false;
}

function loginPage(sentence) {
  const input = h("input", { type: "password", id: "key", autocomplete: "off", placeholder: "tsk_…", "aria-label": "API key" });
  const form = h("form", { class: "login" },
    h("h1", {}, "Sign in with an API key"),
    h("p", {}, "A key looks like ", h("code", {}, "tsk_0a1b2c3d4e5f_…"), " and belongs to one tenant. ",
      "Whoever runs the deployment makes one with ", h("code", { id: "make-key" }, MAKE_KEY),
      " (a read key only looks; a write key also talks to agents); it is shown once."),
    h("p", { class: "notice" }, "The key is kept for this browser tab only."),
    input,
    h("button", { type: "submit", class: "primary" }, "Open console"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const key = pastedKey(input.value);
    const problem = keyProblem(key);
    if (problem) {
      showError(problem);
      input.focus();
      return;
    }
    try {
      await signIn(key);
      showError("");
      route();
    } catch (error) {
      showError(signInSentence(error));
      input.focus();
    }
  });
  if (sentence) showError(sentence);
  return { node: form, focus: () => input.focus() };
}

const STATUSES = ["", "idle", "running", "waiting", "parked", "paused", "archived"];
const NAME_SHAPE = /^[a-z0-9][a-z0-9_-]{0,47}$/; // an address segment (schemas/address.py)

// Write keys only: a name and one of the published kinds open the page of an agent that
// does not exist yet; its first message creates it.
function newConversation(api, me) {
  const holder = h("div", { class: "new-conversation" });
  const open = h("button", { type: "button", class: "primary", id: "new-conversation" }, "New conversation");
  open.addEventListener("click", async () => {
    open.disabled = true;
    try {
      const kinds = await publishedKinds(api);
      holder.replaceChildren(kinds.length ? startForm(me, kinds) : h("p", { class: "notice" },
        `No kind is published for tenant ${me.tenant} yet, and a conversation runs one. Whoever runs the deployment publishes one with `,
        h("code", {}, `teaspill specs publish ${me.tenant} <spec file>`), "."));
    } catch (error) {
      showError(error.message);
      open.disabled = false;
    }
  });
  holder.append(open);
  return holder;
}

function startForm(me, kinds) {
  const name = h("input", { type: "text", id: "new-name", placeholder: "name, e.g. helper", "aria-label": "Name", autocomplete: "off" });
  const kind = kindSelect(kinds, kinds[0].kind);
  const form = h("form", { class: "filters" },
    h("label", { for: "new-name" }, `${me.tenant}.`), name, kind,
    h("button", { type: "submit", class: "primary", id: "start" }, "Start"));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const wanted = name.value.trim().toLowerCase();
    if (!NAME_SHAPE.test(wanted)) {
      showError("A name is 1 to 48 of a-z 0-9 - _, starting with a letter or digit, e.g. helper.");
      name.focus();
      return;
    }
    showError("");
    starting = { address: `${me.tenant}.${wanted}`, kind: kind.value };
    location.hash = agentHref(starting.address);
  });
  setTimeout(() => name.focus(), 0);
  return form;
}

function agentsPage(api, me) {
  const filter = h("input", { type: "search", id: "filter", placeholder: "Filter by address or kind  ( / )", "aria-label": "Filter agents" });
  const status = h("select", { "aria-label": "Status" }, STATUSES.map((s) => h("option", { value: s }, s || "any status")));
  const body = h("tbody");
  const note = h("p", { class: "notice" });
  let rows = [];
  let timer = 0;
  let closed = false;
  const draw = () => {
    const text = filter.value.trim().toLowerCase();
    const shown = rows.filter((a) => (!status.value || a.status === status.value)
      && (!text || a.address.toLowerCase().includes(text) || a.kind.toLowerCase().includes(text)));
    body.replaceChildren(...shown.map((a) => h("tr", { "data-address": a.address },
      h("td", {}, h("a", { href: agentHref(a.address) }, a.address)),
      h("td", {}, h("span", { class: `status ${a.status}` }, a.status)),
      h("td", {}, `${a.kind} v${a.spec_version}`),
      h("td", {}, a.turn),
      h("td", {}, a.last_outcome || "–"),
      h("td", {}, new Date(a.last_activity).toLocaleString()))));
    const none = me.scope === "read" ? "No agents yet." : "No agents yet: start a conversation with New conversation.";
    note.textContent = rows.length ? `${shown.length} of ${rows.length} agents` : none;
  };
  const load = async () => {
    try {
      const all = [];
      let after = "";
      do {
        const answer = await api.get(`/v1/agents?limit=200&after=${encodeURIComponent(after)}`);
        all.push(...answer.agents);
        after = answer.next;
      } while (after);
      rows = all;
      showError("");
      draw();
    } catch (error) {
      showError(error.message);
    }
    if (!closed) timer = setTimeout(load, 2000);
  };
  filter.addEventListener("input", draw);
  status.addEventListener("change", draw);
  load();
  const node = h("section", {},
    h("h1", {}, "Agents"),
    me.scope === "read" ? null : newConversation(api, me),
    h("div", { class: "filters" }, filter, status),
    note,
    h("table", { class: "agents" },
      h("thead", {}, h("tr", {}, ["Address", "Status", "Kind", "Turn", "Last outcome", "Last activity"].map((t) => h("th", { scope: "col" }, t)))),
      body));
  return { node, close: () => { closed = true; clearTimeout(timer); }, focus: () => filter.focus(), filter };
}

function parseHash() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "agents" && parts[1]) return { address: parts[1], seq: Number(parts[2]) || 0 };
  return {};
}

async function route() {
  if (!session) {
    const key = savedKey();
    if (key) {
      try {
        await signIn(key);
      } catch (error) {
        saveKey("");
        if (!(error instanceof ApiError) || error.status === 401) {
          mount(loginPage(signInSentence(error)));
          return;
        }
        showError(error.message);
      }
    }
    if (!session) {
      mount(loginPage(""));
      page.focus();
      return;
    }
  }
  const { address, seq } = parseHash();
  if (address && page instanceof AgentPage && page.address === address) {
    page.goTo(seq);
    return;
  }
  showError("");
  const kind = starting && starting.address === address ? starting.kind : "";
  starting = null;
  mount(address ? new AgentPage(session.api, session.me, address, seq, showError, kind) : agentsPage(session.api, session.me));
  if (page.focus) page.focus();
}

logout.addEventListener("click", () => {
  saveKey("");
  session = null;
  who.textContent = "";
  logout.hidden = true;
  location.hash = "#/";
  route();
});

document.addEventListener("keydown", (event) => {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
  if (event.key === "/" && !typing && page && page.filter) {
    event.preventDefault();
    page.filter.focus();
  }
});

window.addEventListener("hashchange", route);
window.addEventListener("unhandledrejection", (event) => {
  showError(event.reason && event.reason.message ? event.reason.message : String(event.reason));
  event.preventDefault();
});
route();
