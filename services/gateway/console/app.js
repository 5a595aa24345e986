// The teaspill console: paste a key, see the tenant's agents, open one to replay its
// timeline and follow it live. Routes live in the URL hash:
//   #/                      the agents
//   #/agents/<address>      one agent
//   #/agents/<address>/<n>  one agent, at event n

import { Api, ApiError, saveKey, savedKey } from "./api.js";
import { agentHref, h } from "./render.js";
import { AgentPage } from "./agent.js";

const main = document.getElementById("main");
const banner = document.getElementById("error");
const who = document.getElementById("who");
const logout = document.getElementById("logout");
let session = null; // { api, me }
let page = null; // what is on screen; has close()

export function showError(message) {
  banner.textContent = message;
  banner.hidden = !message;
}

function mount(next) {
  if (page && page.close) page.close();
  page = next;
  main.replaceChildren(next.node);
}

async function signIn(key) {
  const api = new Api(key);
  const me = await api.get("/v1/me");
  saveKey(key);
  session = { api, me };
  who.textContent = `tenant ${me.tenant} · ${me.scope} key ${me.key_id}`;
  logout.hidden = false;
}

function loginPage(sentence) {
  const input = h("input", { type: "password", id: "key", autocomplete: "off", placeholder: "tsk_…", "aria-label": "API key" });
  const form = h("form", { class: "login" },
    h("h1", {}, "Sign in with an API key"),
    h("p", { class: "notice" }, "The key is kept for this browser tab only."),
    input,
    h("button", { type: "submit", class: "primary" }, "Open console"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      await signIn(input.value.trim());
      showError("");
      route();
    } catch (error) {
      showError(error.message);
      input.focus();
    }
  });
  if (sentence) showError(sentence);
  return { node: form, focus: () => input.focus() };
}

const STATUSES = ["", "idle", "running", "waiting", "parked"];

function agentsPage(api) {
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
    note.textContent = rows.length ? `${shown.length} of ${rows.length} agents` : "No agents yet.";
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
          mount(loginPage(error.message));
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
  mount(address ? new AgentPage(session.api, session.me, address, seq, showError) : agentsPage(session.api));
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
