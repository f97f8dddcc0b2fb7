// The transparency page: talks only to boundmem's own API with a personal access token, which names one user and
// expires (minted by the operator with the tenant key: POST /v1/users/{user}/tokens). The token comes typed in or in
// the URL fragment (#token=..., which browsers never send to the server) and is dropped from the address bar at
// once. The tenant API key is refused here: it would open every user of the tenant. All stored text is inserted
// with textContent: a remembered sentence is user input and must never become markup.
"use strict";

const state = { key: "", user: "", schema: null, optOuts: [], consents: [], names: {} };
const $ = (id) => document.getElementById(id);

function setStatus(text, isError) {
  const s = $("status");
  s.textContent = text;
  s.className = isError ? "error" : "";
}

async function api(method, path, body) {
  const headers = { Authorization: "Bearer " + state.key, Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  let data = null;
  try { data = await r.json(); } catch (_) { /* empty body */ }
  if (!r.ok) {
    const msg = (data && (data.message || (typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail)))) || r.statusText;
    throw new Error(r.status + ": " + msg);
  }
  return data;
}

const userPath = () => "/v1/users/" + encodeURIComponent(state.user);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-")) e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function fmtTime(iso) {
  const d = new Date(iso);
  return isNaN(d) ? iso : d.toLocaleString();
}

const pathOf = (x) => x.path.main + "/" + x.path.sub + "/" + x.path.detail;

// the value as the user reads it: the server words it with its polarity ("Dislikes: Jazz", "Avoids: Highways")
const reads = (p) => p.display || p.attribute;

function renderPreferences(prefs) {
  const body = $("prefs").querySelector("tbody");
  body.replaceChildren();
  for (const p of prefs) {
    const del = el("button", { type: "button", class: "delete", title: "Delete this preference" }, "Delete");
    del.addEventListener("click", () => deletePreference(p, del));
    body.append(el("tr", { "data-id": p.id, "data-path": pathOf(p), "data-polarity": p.polarity || "like" },
      el("td", { class: "category" }, p.category),
      el("td", { class: "attribute " + (p.polarity || "like") }, reads(p),
        ...(p.edited ? [" ", el("span", { class: "edited", title: "You corrected this value" }, "edited")] : [])),
      el("td", { class: "sentence" }, p.sentence ? (p.edited ? "before your edit: " : "") + "\u201c" + p.sentence + "\u201d" : ""),
      el("td", { class: "when", title: p.conversation_id ? "from conversation " + p.conversation_id : "" }, fmtTime(p.updated_at)),
      el("td", {}, del)));
  }
  $("prefs").hidden = prefs.length === 0;
  $("empty").hidden = prefs.length !== 0;
  $("count").textContent = "(" + prefs.length + ")";
}

// one-off choices, grouped by what was chosen: "you chose Jazz in 2 conversations"
function groupObservations(observations) {
  const groups = new Map();
  for (const o of observations) {
    const key = [pathOf(o), o.attribute, o.polarity].join("\u0000");
    if (!groups.has(key)) groups.set(key, { first: o, items: [], conversations: new Set() });
    const g = groups.get(key);
    g.items.push(o);
    g.conversations.add(o.conversation_id || "observation " + o.id);
  }
  return [...groups.values()];
}

function renderObservations(observations) {
  const list = $("observations");
  list.replaceChildren();
  const groups = groupObservations(observations);
  for (const g of groups) {
    const o = g.first, n = g.conversations.size;
    const yes = el("button", { type: "button", class: "confirm", title: "Remember this as a preference" }, "Remember");
    const no = el("button", { type: "button", class: "dismiss", title: "Erase this and do not remember it" }, "Dismiss");
    yes.addEventListener("click", () => confirmObservation(g, yes, no));
    no.addEventListener("click", () => dismissObservation(g, yes, no));
    const said = el("ul", { class: "said" });
    for (const sentence of new Set(g.items.map((i) => i.sentence))) said.append(el("li", {}, el("q", { class: "sentence" }, sentence)));
    list.append(el("li", { "data-path": pathOf(o), "data-ids": g.items.map((i) => i.id).join(" "), "data-polarity": o.polarity },
      el("span", { class: "category" }, o.label || o.category), ": ",
      el("span", { class: "choice" }, (o.display || "you chose " + o.attribute) + " in " + n + (n === 1 ? " conversation" : " conversations")),
      " ", yes, " ", no, said));
  }
  $("observed-section").hidden = groups.length === 0;
  $("observed-count").textContent = "(" + groups.length + ")";
}

// the opt-out rule covering a category prefix, if any (a rule on a parent covers its children)
function coveringRule(prefix) {
  return state.optOuts.find((r) => prefix === r || prefix.startsWith(r + "/"));
}

function categoryBox(prefix, name, level) {
  const rule = coveringRule(prefix);
  const box = el("input", { type: "checkbox", checked: !rule, disabled: !!rule && rule !== prefix, "data-category": prefix });
  box.addEventListener("change", () => toggleCategory(prefix, name, box));
  const label = el("label", { class: "cat " + level, title: prefix }, box, name);
  if (rule && rule !== prefix) label.append(el("span", { class: "why" }, "(off with " + (state.names[rule] || rule) + ")"));
  return label;
}

// a category as people read it: the schema's label (a cleaned name by default), not the extractor's wording
const label = (c) => c.label || c.name;

function renderCategories() {
  const root = $("categories");
  root.replaceChildren();
  for (const m of state.schema.mains) {
    const fs = el("fieldset", {}, el("legend", {}, categoryBox(m.key, label(m), "main")));
    const subs = el("ul");
    for (const s of m.subs) {
      const sp = m.key + "/" + s.key;
      const details = el("ul");
      for (const d of s.details) details.append(el("li", {}, categoryBox(sp + "/" + d.key, label(d), "detail")));
      subs.append(el("li", {}, categoryBox(sp, label(s), "sub"), details));
    }
    fs.append(subs);
    root.append(fs);
  }
}

// each opt-out with its consent record: what the user said (consent by voice) or how it was given, and when
function renderConsents() {
  const list = $("consents");
  list.replaceChildren();
  for (const c of state.consents) {
    const said = c.utterance ? el("q", { class: "utterance" }, c.utterance)
      : el("span", { class: "muted" }, c.cause === "erased" ? "(record erased with your memory)" : "switched off here or by request");
    list.append(el("li", { "data-prefix": c.prefix },
      el("span", { class: "category" }, state.names[c.prefix] || c.prefix), ": ",
      c.utterance ? "you said " : "", said,
      el("span", { class: "when muted" }, c.at ? " \u2014 " + fmtTime(c.at) : "")));
  }
  $("consent-section").hidden = state.consents.length === 0;
}

async function refresh() {
  const [prefs, observed, outs] = await Promise.all([api("GET", userPath() + "/preferences"),
    api("GET", userPath() + "/observations"), api("GET", userPath() + "/opt-outs")]);
  state.optOuts = outs.opt_outs;
  state.consents = outs.consents || [];
  renderPreferences(prefs.preferences);
  renderObservations(observed.observations);
  renderCategories();
  renderConsents();
}

async function load() {
  state.key = $("token").value.trim();
  if (!state.key) { setStatus("Enter your access token.", true); return; }
  setStatus("Loading\u2026");
  try {
    const me = await api("GET", "/v1/whoami");
    if (me.kind !== "user") {
      state.key = "";
      $("token").value = "";
      throw new Error("this page takes a personal access token, not the tenant API key");
    }
    state.user = me.user;
    $("who").textContent = me.user + (me.expires_at ? " (access until " + fmtTime(me.expires_at) + ")" : "");
    state.schema = await api("GET", "/v1/schema");
    state.names = {};
    for (const m of state.schema.mains) {
      state.names[m.key] = label(m);
      for (const s of m.subs) {
        state.names[m.key + "/" + s.key] = label(s);
        for (const d of s.details) state.names[m.key + "/" + s.key + "/" + d.key] = label(d);
      }
    }
    await refresh();
    $("memory").hidden = false;
    setStatus("Showing what is stored for " + state.user + ".");
  } catch (e) {
    $("memory").hidden = true;
    setStatus("Could not load: " + e.message, true);
  }
}

async function deletePreference(p, button) {
  button.disabled = true;
  try {
    await api("DELETE", userPath() + "/preferences/" + encodeURIComponent(p.id));
    await refresh();
    setStatus("Deleted \u201c" + reads(p) + "\u201d (" + p.category + ").");
  } catch (e) {
    button.disabled = false;
    setStatus("Could not delete: " + e.message, true);
  }
}

// confirming remembers the choice as a preference at once
async function confirmObservation(g, yes, no) {
  yes.disabled = no.disabled = true;
  const o = g.items[g.items.length - 1];
  try {
    const p = await api("POST", userPath() + "/observations/" + encodeURIComponent(o.id) + "/confirm");
    await refresh();
    setStatus("Remembered: " + (p.label || p.category) + ": " + reads(p) + ".");
  } catch (e) {
    yes.disabled = no.disabled = false;
    setStatus("Could not remember it: " + e.message, true);
  }
}

// dismissing erases every observation of that choice, so the row goes
async function dismissObservation(g, yes, no) {
  yes.disabled = no.disabled = true;
  try {
    for (const o of g.items) await api("DELETE", userPath() + "/observations/" + encodeURIComponent(o.id));
    await refresh();
    setStatus("Dismissed: " + (g.first.display || g.first.attribute) + ".");
  } catch (e) {
    yes.disabled = no.disabled = false;
    setStatus("Could not dismiss it: " + e.message, true);
    await refresh().catch(() => {});
  }
}

async function toggleCategory(prefix, name, box) {
  box.disabled = true;
  try {
    const path = userPath() + "/opt-outs/" + prefix.split("/").map(encodeURIComponent).join("/");
    if (box.checked) {
      await api("DELETE", path);
      setStatus(name + " may be remembered again.");
    } else {
      const r = await api("PUT", path);
      setStatus(name + " will not be remembered; erased " + r.purged.length + " stored preference(s).");
    }
    await refresh();
  } catch (e) {
    box.checked = !box.checked;
    box.disabled = false;
    setStatus("Could not change " + name + ": " + e.message, true);
  }
}

async function downloadExport() {
  try {
    const data = await api("GET", userPath() + "/export");
    const url = URL.createObjectURL(new Blob([JSON.stringify(data, null, 2)], { type: "application/json" }));
    const a = el("a", { href: url, download: "boundmem-" + state.user + ".json" });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 1000);
  } catch (e) {
    setStatus("Could not export: " + e.message, true);
  }
}

async function forgetMe() {
  if (!window.confirm("Erase everything stored about " + state.user + "? This cannot be undone.")) return;
  try {
    const r = await api("DELETE", userPath());
    await refresh();
    setStatus("Forgotten: " + r.erased + " preference(s) erased.");
  } catch (e) {
    setStatus("Could not forget: " + e.message, true);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("connect").addEventListener("submit", (ev) => { ev.preventDefault(); load(); });
  $("export").addEventListener("click", downloadExport);
  $("forget").addEventListener("click", forgetMe);
  // #token=... is the link the API hands out (page_url); drop it from the address bar at once. A key in the
  // fragment or the query is never read.
  const frag = new URLSearchParams(window.location.hash.slice(1));
  if (frag.get("token")) $("token").value = frag.get("token");
  if (window.location.hash || window.location.search) history.replaceState(null, "", window.location.pathname);
  if ($("token").value) load();
});
