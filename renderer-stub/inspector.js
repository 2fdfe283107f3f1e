/**
 * inspector.js: Strata's debug inspector panel. Plain ES module, no framework,
 * no build step; it speaks the protocol only through ./strata-client.js.
 *
 * It connects with the inspector token (typed in, or read once from
 * `location.hash` as `#token=...` and removed from the address bar at once, so
 * it never lands in a URL that is logged or shared), then lets a developer
 * pick a project, a document and a cursor, run `context:inspect`, and see why
 * the prompt is what it is. Nothing about a profile is hard-coded: the
 * sections, their order, roles and colours come from each result, so any
 * profile (`profile:list`) shows as it was assembled; a profile editor edits
 * the project's profiles as JSON. Everything the user or the server provided
 * is put into the page with textContent, never as HTML.
 */

import { StrataClient, StrataConnectionError, StrataRpcError } from "./strata-client.js";

const SEPARATOR = "\n\n";
const DEFAULT_PROFILE = "novel";
/** Sections with a colour of their own in the stylesheet (the novel profile's four). */
const NAMED_COLOURS = new Set(["rules", "settings", "retrieved", "immediate"]);
/** Colours for any other section, given out in the profile's order. */
const PALETTE = ["#c2410c", "#db2777", "#65a30d", "#0f766e", "#92400e", "#4338ca", "#be123c", "#0891b2",
  "#7c3aed", "#ca8a04"];
const DEFAULT_SKILLS = ["continue", "polish", "expand", "rewrite"];
const SKILL_NAMES = { continue: "续写", polish: "润色", expand: "扩写", rewrite: "改写" };
const SEGMENT_NAMES = {
  system: "system prompt",
  joins: "section joins",
  free: "free",
  reserve: "output reserve",
};

const $ = (id) => {
  const node = document.getElementById(id);
  if (node === null) throw new Error(`missing #${id}`);
  return node;
};

/**
 * Build an element. `attrs` values: strings become attributes, except
 * `text` (textContent), `class`, `dataset` (object) and `on*` (listeners).
 */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "class") node.className = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const fmt = (n) => (Number.isFinite(n) ? Math.round(n).toLocaleString("en-US") : String(n));
const encoder = new TextEncoder();
const byteLength = (s) => encoder.encode(s).length;

function signed(n) {
  if (n === 0) return "±0";
  return (n > 0 ? "+" : "−") + fmt(Math.abs(n));
}

/** Code points in `text` before UTF-16 index `u` (a split pair counts whole). */
function utf16ToCodePoints(text, u) {
  let count = 0;
  for (let i = 0; i < u && i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    count++;
  }
  return count;
}

/** UTF-16 index of code point `cp` in `text` (clamped to the end). */
function codePointsToUtf16(text, cp) {
  let i = 0;
  let n = 0;
  while (n < cp && i < text.length) {
    const c = text.charCodeAt(i);
    i += c >= 0xd800 && c <= 0xdbff && i + 1 < text.length && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00 ? 2 : 1;
    n++;
  }
  return i;
}

/** UTF-16 index in `text` where its UTF-8 encoding reaches byte `b`. */
function bytesToUtf16(text, b) {
  let bytes = 0;
  let i = 0;
  while (i < text.length && bytes < b) {
    const cp = text.codePointAt(i);
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    i += cp > 0xffff ? 2 : 1;
  }
  return i;
}

const codePointLength = (text) => utf16ToCodePoints(text, text.length);

// --- state -----------------------------------------------------------------

const state = {
  client: /** @type {StrataClient | null} */ (null),
  token: "",
  projectId: "",
  documentId: "",
  text: "",
  textCodePoints: 0,
  cursor: 0,
  labels: new Map(),
  constraints: [],
  newConstraints: new Set(),
  profile: null,
  conflict: null,
  budgetKeys: [],
  profiles: [],
  profileId: DEFAULT_PROFILE,
  profileInfo: null,
  resolved: new Map(),
  editor: null,
  editorConflict: null,
  assembling: false,
  base: null,
  baseRequest: null,
  baseCompare: null,
  whatIf: null,
  view: "base",
  prefixes: new Map(),
  seq: 0,
  busy: 0,
};

function setBusy(delta) {
  state.busy = Math.max(0, state.busy + delta);
  document.body.dataset.busy = String(state.busy);
}

// --- errors ----------------------------------------------------------------

/** Show any failure; server errors always with their data.code and data. */
function report(action, err) {
  const list = $("error-list");
  const time = new Date().toLocaleTimeString("en-GB");
  let item;
  if (err instanceof StrataRpcError) {
    const code = err.dataCode ?? "NO_DATA_CODE";
    const data = err.data === undefined ? "" : JSON.stringify(err.data, null, 1);
    item = el("li", { dataset: { code, rpc: String(err.code) } },
      el("span", { class: "muted", text: `${time} · ${action} · ` }),
      el("span", { class: "err-code", text: code }),
      ` (${err.code}) ${err.message}`,
      data ? el("div", { class: "err-data", text: `data: ${data}` }) : null);
  } else if (err instanceof StrataConnectionError) {
    item = el("li", { dataset: { code: "CONNECTION" } },
      el("span", { class: "muted", text: `${time} · ${action} · ` }),
      el("span", { class: "err-code", text: "CONNECTION" }),
      ` ${err.message}`,
      err.closeCode !== null ? el("div", { class: "err-data", text: `close code: ${err.closeCode}` }) : null);
  } else {
    item = el("li", { dataset: { code: "CLIENT" } },
      el("span", { class: "muted", text: `${time} · ${action} · ` }),
      el("span", { class: "err-code", text: "CLIENT" }),
      ` ${err instanceof Error ? err.message : String(err)}`);
  }
  list.prepend(item);
  while (list.children.length > 30) list.lastElementChild.remove();
  $("errors").hidden = false;
}

$("clear-errors").addEventListener("click", () => {
  $("error-list").replaceChildren();
  $("errors").hidden = true;
});

/** Run an async action: busy flag on, every failure reported, never throws. */
async function guarded(action, fn) {
  setBusy(1);
  try {
    return await fn();
  } catch (err) {
    report(action, err);
    return undefined;
  } finally {
    setBusy(-1);
  }
}

function call(method, params) {
  if (state.client === null || !state.client.isOpen) {
    return Promise.reject(new StrataConnectionError("Not connected"));
  }
  return state.client.call(method, params, { timeoutMs: 30000 });
}

// --- connection ------------------------------------------------------------

function setStatus(text, kind = "") {
  const node = $("conn-status");
  node.textContent = text;
  node.className = `status ${kind}`;
}

function setConnected(on) {
  document.body.dataset.connected = String(on);
  $("connect").hidden = on;
  $("disconnect").hidden = !on;
  for (const id of ["project", "document"]) $(id).disabled = !on;
  if (!on) {
    for (const id of ["assemble", "whatif-run", "budget-save", "budget-reload", "c-add", "cursor", "cursor-end",
      "profile-id", "pe-name", "pe-open", "pe-new"]) {
      $(id).disabled = true;
    }
    setEditorEnabled();
  }
}

function defaultServerUrl() {
  if ((location.protocol === "http:" || location.protocol === "https:") && /\/inspector\/?$/.test(location.pathname)) {
    return `ws://${location.host}/`;
  }
  return "";
}

async function connect(url, token) {
  if (state.client !== null) state.client.close();
  state.client = null;
  setStatus("Connecting…");
  setBusy(1);
  try {
    const client = await StrataClient.connect(url, token);
    state.client = client;
    state.token = token;
    client.onclose = (info) => {
      if (state.client !== client) return;
      state.client = null;
      setConnected(false);
      setStatus(`Disconnected (websocket close code ${info.code}).`, info.byClient ? "" : "bad");
    };
    const info = await client.call("system:info");
    const debugNote = info.debug ? "debug mode" : "NOT in debug mode: context:inspect will be refused";
    setStatus(`Connected to ${url} · ${info.name} ${info.version} · ${debugNote} · tokenizer ${info.tokenizer.encoding}` +
      (info.tokenizer.exact ? "" : " (estimate)"), info.debug ? "ok" : "bad");
    setConnected(true);
    $("token").value = "";
    await loadProjects();
  } catch (err) {
    setStatus("Not connected.", "bad");
    setConnected(false);
    report("connect", err);
  } finally {
    setBusy(-1);
  }
}

$("connect-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const url = $("server-url").value.trim();
  const token = $("token").value.trim() || state.token;
  if (url === "" || token === "") {
    report("connect", new Error("Enter the server's websocket URL and the inspector token."));
    return;
  }
  void connect(url, token);
});

$("disconnect").addEventListener("click", () => {
  state.client?.close();
});

// --- projects and documents -----------------------------------------------

async function loadProjects() {
  const { projects } = await call("project:list");
  const select = $("project");
  select.replaceChildren(
    el("option", { value: "", text: projects.length ? "— pick a project —" : "no projects: open one with project:open" }),
    ...projects.map((p) => el("option", { value: p.projectId, text: `${p.name} · ${p.projectId}` })),
  );
  const keep = projects.find((p) => p.projectId === state.projectId) ?? (projects.length === 1 ? projects[0] : null);
  select.value = keep ? keep.projectId : "";
  await selectProject(select.value);
}

$("project").addEventListener("change", (event) => {
  void guarded("open project", () => selectProject(event.target.value));
});

async function selectProject(projectId) {
  state.projectId = projectId;
  state.documentId = "";
  state.text = "";
  state.profile = null;
  state.conflict = null;
  state.newConstraints.clear();
  state.labels = new Map();
  state.constraints = [];
  state.profiles = [];
  state.profileInfo = null;
  state.resolved = new Map();
  clearResults();
  renderDocument();
  for (const id of ["cursor", "cursor-end"]) $(id).disabled = true;
  $("document").replaceChildren();
  $("constraint-list").replaceChildren();
  fillBudgetForm(null);
  openInEditor(null);
  const enabled = projectId !== "";
  $("c-add").disabled = !enabled;
  $("budget-reload").disabled = !enabled;
  fillProfileLists();
  updateAssemble();
  if (!enabled) return;
  await Promise.all([
    guarded("document:list", loadDocuments),
    guarded("context:budget:get", loadBudget),
    guarded("constraints:list", loadConstraints),
    guarded("profile:list", () => loadProfiles(state.profileId)),
    loadLabels(),
  ]);
}

async function loadDocuments() {
  const { documents, truncated } = await call("document:list", { projectId: state.projectId });
  const select = $("document");
  select.replaceChildren(
    el("option", { value: "", text: documents.length ? "— pick a document —" : "no documents" }),
    ...documents.map((d) => el("option", { value: d.documentId, text: `${d.documentId} (${fmt(d.size)} B)` })),
  );
  if (truncated) select.append(el("option", { value: "", disabled: true, text: "… list truncated at 5,000" }));
  select.value = "";
}

$("document").addEventListener("change", (event) => {
  void guarded("document:read", () => selectDocument(event.target.value));
});

async function selectDocument(documentId) {
  state.documentId = documentId;
  state.text = "";
  state.textCodePoints = 0;
  clearResults();
  if (documentId !== "") {
    const { text } = await call("document:read", { projectId: state.projectId, documentId });
    if (state.documentId !== documentId) return;
    state.text = text;
    state.textCodePoints = codePointLength(text);
    state.cursor = state.textCodePoints;
  }
  const has = documentId !== "";
  $("cursor").disabled = !has;
  $("cursor-end").disabled = !has;
  updateAssemble();
  renderDocument();
  scrollCaretIntoView();
}

/** Labels that say what a candidate is (its text or name), where we know it. */
async function loadLabels() {
  const projectId = state.projectId;
  const [entities, rules, episodes] = await Promise.allSettled([
    call("kg:entity:list", { projectId }),
    call("memory:semantic:list", { projectId }),
    call("memory:episodic:list", { projectId, limit: 200 }),
  ]);
  if (state.projectId !== projectId) return;
  const labels = new Map([...state.labels].filter(([key]) => key.startsWith("constraint:")));
  labels.set("settings:narrative", "narrative person (project settings)");
  labels.set("window", "text around the cursor");
  if (entities.status === "fulfilled") {
    for (const e of entities.value.entities) labels.set(`entity:${e.id}`, `${e.name} (${e.kind})`);
  } else report("kg:entity:list", entities.reason);
  if (rules.status === "fulfilled") {
    for (const r of rules.value.rules) labels.set(`semantic:${r.id}`, r.text);
  } else report("memory:semantic:list", rules.reason);
  if (episodes.status === "fulfilled") {
    for (const e of episodes.value.episodes) labels.set(`episode:${e.id}`, e.instruction || e.output.slice(0, 80));
  } else report("memory:episodic:list", episodes.reason);
  state.labels = labels;
}

// --- document view and cursor ---------------------------------------------

const docView = $("doc-view");
let docNodes = null;

function renderDocument() {
  if (state.documentId === "") {
    docView.replaceChildren();
    docNodes = null;
    $("cursor-info").textContent = "";
    $("cursor").value = "0";
    return;
  }
  const split = codePointsToUtf16(state.text, state.cursor);
  const before = document.createTextNode(state.text.slice(0, split));
  const caret = el("span", { class: "caret", "aria-hidden": "true" });
  const after = document.createTextNode(state.text.slice(split));
  docView.replaceChildren(before, caret, after);
  docNodes = { before, caret, after };
  $("cursor").value = String(state.cursor);
  $("cursor").max = String(state.textCodePoints);
  const line = state.text.slice(0, split).split("\n").length;
  $("cursor-info").textContent = `of ${fmt(state.textCodePoints)} · line ${line}`;
  docView.dataset.cursor = String(state.cursor);
}

function scrollCaretIntoView() {
  docNodes?.caret.scrollIntoView({ block: "nearest", inline: "nearest" });
}

function setCursor(cp) {
  const next = Math.max(0, Math.min(state.textCodePoints, Math.trunc(Number(cp) || 0)));
  state.cursor = next;
  renderDocument();
}

/** The UTF-16 index in the document text under a click, or null. */
function textIndexAt(x, y) {
  let node = null;
  let offset = 0;
  if (typeof document.caretPositionFromPoint === "function") {
    const pos = document.caretPositionFromPoint(x, y);
    if (pos) ({ offsetNode: node, offset } = pos);
  } else if (typeof document.caretRangeFromPoint === "function") {
    const range = document.caretRangeFromPoint(x, y);
    if (range) ({ startContainer: node, startOffset: offset } = range);
  }
  if (node === null || docNodes === null) return null;
  const beforeLength = docNodes.before.data.length;
  if (node === docNodes.before) return offset;
  if (node === docNodes.after) return beforeLength + offset;
  if (node === docNodes.caret) return beforeLength;
  if (node === docView) return offset === 0 ? 0 : offset >= 3 ? state.text.length : beforeLength;
  return null;
}

docView.addEventListener("click", (event) => {
  if (docNodes === null) return;
  const selection = window.getSelection();
  if (selection !== null && !selection.isCollapsed) return; // selecting text to copy, not placing the cursor
  const index = textIndexAt(event.clientX, event.clientY);
  if (index === null) return;
  setCursor(utf16ToCodePoints(state.text, index));
});

docView.addEventListener("keydown", (event) => {
  if (docNodes === null) return;
  const moves = { ArrowLeft: -1, ArrowRight: 1 };
  if (event.key in moves) {
    event.preventDefault();
    setCursor(state.cursor + moves[event.key]);
    scrollCaretIntoView();
  } else if (event.key === "Home" || event.key === "End") {
    event.preventDefault();
    setCursor(event.key === "Home" ? 0 : state.textCodePoints);
    scrollCaretIntoView();
  }
});

$("cursor").addEventListener("change", (event) => {
  setCursor(event.target.value);
  scrollCaretIntoView();
});

$("cursor-end").addEventListener("click", () => {
  setCursor(state.textCodePoints);
  scrollCaretIntoView();
});

// --- profiles: the picker and the variables ------------------------------------

/** Whether a resolved (flattened) profile document has a document window anywhere. */
function hasDocumentWindow(resolved) {
  return Object.values(resolved?.sections ?? {}).some((section) =>
    section?.source === "document.window" || (section?.parts ?? []).some((part) => part?.source === "document.window"));
}

/** Whether the chosen profile needs a document, a cursor and a skill (true while unknown). */
function needsDocument() {
  const info = state.profileInfo;
  return info === null || info.name !== state.profileId || info.needsDocument;
}

function isConnected() {
  return state.client !== null && state.client.isOpen;
}

/** Enable Assemble when everything the chosen profile needs is there; show what is optional. */
function updateAssemble() {
  const needs = needsDocument();
  $("assemble").disabled = !isConnected() || state.projectId === "" || state.assembling || (needs && state.documentId === "");
  $("skill").disabled = !needs;
  $("doc-optional").hidden = needs;
  $("source-panel").classList.toggle("optional", !needs);
}

/** The project's profiles (built-in ones included) into the picker and the editor's list. */
async function loadProfiles(prefer = state.profileId) {
  const projectId = state.projectId;
  let listed;
  try {
    listed = await call("profile:list", { projectId });
  } catch (err) {
    if (state.projectId === projectId) {
      state.profiles = [];
      fillProfileLists(prefer);
      await chooseProfile($("profile-id").value, false);
    }
    throw err;
  }
  if (state.projectId !== projectId) return;
  state.profiles = listed.profiles;
  fillProfileLists(prefer);
  await guarded("profile:get", () => chooseProfile($("profile-id").value));
}

function profileOption(p) {
  const tags = [p.builtIn ? "built-in" : `v${p.version}`, p.extends ? `extends ${p.extends}` : null].filter(Boolean).join(", ");
  return el("option", { value: p.name, title: p.description ?? "", text: `${p.name} (${tags})` });
}

function fillProfileLists(prefer = state.profileId) {
  const profiles = state.profiles.length > 0 ? state.profiles
    : [{ name: DEFAULT_PROFILE, builtIn: true, description: "", extends: null, version: null }];
  const picker = $("profile-id");
  picker.replaceChildren(...profiles.map(profileOption));
  const names = profiles.map((p) => p.name);
  picker.value = names.includes(prefer) ? prefer : names.includes(DEFAULT_PROFILE) ? DEFAULT_PROFILE : names[0];
  const editorList = $("pe-name");
  const keep = editorList.value;
  editorList.replaceChildren(...profiles.map(profileOption));
  editorList.value = names.includes(keep) ? keep : picker.value;
  const on = isConnected() && state.projectId !== "";
  picker.disabled = !on;
  editorList.disabled = !on;
  $("pe-open").disabled = !on;
  $("pe-new").disabled = !on;
}

/** Make `name` the profile Assemble uses; learn from profile:get whether it has a document window. */
async function chooseProfile(name, fetch = true) {
  const projectId = state.projectId;
  state.profileId = name;
  if (state.profileInfo?.name !== name) state.profileInfo = null;
  updateAssemble();
  renderProfileNote();
  if (!fetch || projectId === "") return;
  const got = await call("profile:get", { projectId, name });
  if (state.projectId !== projectId || state.profileId !== name) return;
  state.profileInfo = {
    name, resolved: got.resolved, builtIn: got.builtIn, version: got.version,
    needsDocument: hasDocumentWindow(got.resolved),
  };
  state.resolved.set(name, got.resolved);
  setDeclaredVariables(got.resolved?.variables ?? {});
  updateAssemble();
  renderProfileNote();
}

$("profile-id").addEventListener("change", (event) => {
  void guarded("profile:get", () => chooseProfile(event.target.value));
});

function renderProfileNote() {
  const info = state.profileInfo;
  const note = $("profile-note");
  if (info === null || info.name !== state.profileId) {
    note.textContent = state.projectId === "" ? "" : `Profile ${state.profileId}.`;
    delete note.dataset.window;
    return;
  }
  const sections = Object.entries(info.resolved?.sections ?? {})
    .sort(([a, x], [b, y]) => (x.order ?? 0) - (y.order ?? 0) || (a < b ? -1 : a > b ? 1 : 0))
    .map(([id]) => id);
  note.dataset.window = String(info.needsDocument);
  note.replaceChildren(
    info.resolved?.description ? el("span", { text: `${info.resolved.description} ` }) : null,
    el("span", { text: `Sections: ${sections.join(", ") || "none"}. ` }),
    info.needsDocument
      ? el("span", { text: "It has a document window: pick a document, place the cursor, choose a skill." })
      : el("b", { text: "No document window: the document, cursor and skill are not needed (not sent)." }));
}

function variableRow(name = "", value = "", spec = null) {
  const row = el("div", { class: "var-row", dataset: { declared: spec === null ? "false" : "true" }, title: spec?.description ?? "" },
    el("input", { class: "var-name mono", type: "text", value: name, placeholder: "name", spellcheck: "false", "aria-label": "variable name" }),
    el("input", { class: "var-value", type: "text", value, spellcheck: "false", "aria-label": `value of ${name || "the variable"}`,
      placeholder: spec?.default ? `default: ${spec.default}` : "value" }));
  row.append(el("button", { type: "button", class: "small", text: "Remove", "aria-label": "remove variable",
    onclick: () => row.remove() }));
  return row;
}

const varName = (row) => row.querySelector(".var-name").value.trim();
const varValue = (row) => row.querySelector(".var-value").value;

/** One row per variable the profile declares (keeping values typed so far), then the user's own rows. */
function setDeclaredVariables(declared) {
  const rows = [...$("variables").children];
  const typed = new Map(rows.map((row) => [varName(row), varValue(row)]));
  const names = new Set(Object.keys(declared));
  const own = rows.filter((row) => !names.has(varName(row)) && (row.dataset.declared !== "true" || varValue(row) !== "")
    && (varName(row) !== "" || varValue(row) !== ""));
  $("variables").replaceChildren(
    ...Object.entries(declared).map(([name, spec]) => variableRow(name, typed.get(name) ?? "", spec ?? {})),
    ...own);
}

/** The variables to send: rows with a name and a value. */
function collectVariables() {
  const out = {};
  for (const row of $("variables").children) {
    const name = varName(row);
    const value = varValue(row);
    if (name !== "" && value !== "") out[name] = value;
  }
  return out;
}

$("var-add").addEventListener("click", () => {
  const row = variableRow();
  $("variables").append(row);
  row.querySelector(".var-name").focus();
});

// --- assembling --------------------------------------------------------------

function currentRequest() {
  const params = { projectId: state.projectId, profileId: state.profileId };
  if (needsDocument()) {
    params.documentId = state.documentId;
    params.cursorPosition = state.cursor;
    params.skillId = $("skill").value;
  }
  const instruction = $("instruction").value;
  if (instruction.trim() !== "") params.additionalInput = instruction;
  const variables = collectVariables();
  if (Object.keys(variables).length > 0) params.variables = variables;
  return params;
}

function clearResults() {
  state.base = null;
  state.baseRequest = null;
  state.baseCompare = null;
  state.whatIf = null;
  state.view = "base";
  $("whatif-result").replaceChildren();
  $("whatif-note").textContent = "";
  $("whatif-run").disabled = true;
  $("whatif-clear").disabled = true;
  renderResult();
}

/** The result's section ids, in prompt order. */
function sectionIds(r) {
  return Array.isArray(r.sections) ? r.sections.map((s) => s.id) : Object.keys(r.layers);
}

/** The result's sections by id (id, role, tokens, truncated, items, steps). */
function sectionsById(r) {
  const byId = new Map((r.sections ?? []).map((s) => [s.id, s]));
  for (const id of Object.keys(r.layers)) {
    if (!byId.has(id)) byId.set(id, { id, role: "user", tokens: r.layers[id].tokens, truncated: r.layers[id].truncated, items: 0, steps: [] });
  }
  return byId;
}

/** A colour per section: the novel four keep theirs, any other gets the next of the palette. */
function sectionColours(ids) {
  const colours = new Map();
  let next = 0;
  for (const id of ids) colours.set(id, NAMED_COLOURS.has(id) ? null : PALETTE[next++ % PALETTE.length]);
  return colours;
}

/** Give `node` the colour of section `id` (as the custom property --sec). */
function tint(node, id, colours) {
  node.classList.add("sec");
  if (NAMED_COLOURS.has(id)) node.classList.add(`sec-${id}`);
  else node.style.setProperty("--sec", colours.get(id) ?? PALETTE[0]);
  return node;
}

/** The stable sections of a result (the first ones of the profile). */
function stableIds(r) {
  const ids = sectionIds(r);
  const resolved = state.resolved.get(r.profileId);
  if (resolved?.sections) return ids.filter((id) => resolved.sections[id]?.stable === true);
  // Without the profile at hand: up to the first section whose end hash is the stable prefix's.
  const at = ids.findIndex((id) => r.prefixHashes[id] === r.stablePrefixHash);
  return at < 0 ? [] : ids.slice(0, at + 1);
}

/** The stable sections' texts, `[id, text]` in order: what the stable prefix is made of. */
function stableParts(r) {
  return stableIds(r).map((id) => [id, r.layerTexts[id] ?? ""]);
}

/** Where two stable prefixes first differ, measured like the server does. */
function prefixDivergence(previous, current) {
  const measure = (parts) => {
    const texts = [];
    const ends = new Map();
    let offset = 0;
    for (const [id, text] of parts) {
      if (text !== "") {
        if (texts.length > 0) offset += byteLength(SEPARATOR);
        offset += byteLength(text);
        texts.push(text);
      }
      ends.set(id, offset);
    }
    return { bytes: encoder.encode(texts.join(SEPARATOR)), ends };
  };
  const a = measure(previous);
  const b = measure(current);
  const n = Math.min(a.bytes.length, b.bytes.length);
  let i = 0;
  while (i < n && a.bytes[i] === b.bytes[i]) i++;
  if (i === a.bytes.length && i === b.bytes.length) return null;
  const ids = [...new Set([...current.map(([id]) => id), ...previous.map(([id]) => id)])];
  const layer = ids.find((id) => i < Math.max(a.ends.get(id) ?? 0, b.ends.get(id) ?? 0)) ?? ids[ids.length - 1] ?? "";
  return { layer, byteOffset: i };
}

function updateSkillsFrom(err) {
  const known = err instanceof StrataRpcError && err.dataCode === "SKILL_NOT_FOUND" ? err.data?.known : null;
  if (!Array.isArray(known)) return;
  const select = $("skill");
  const value = select.value;
  select.replaceChildren(...known.map((s) => el("option", { value: s, text: SKILL_NAMES[s] ? `${s} ${SKILL_NAMES[s]}` : s })));
  if (known.includes(value)) select.value = value;
}

async function inspect(params, action) {
  try {
    return await call("context:inspect", params);
  } catch (err) {
    updateSkillsFrom(err);
    report(action, err);
    return null;
  }
}

/** Run context:inspect for `params` as the new base, and re-run an active what-if. */
async function runBase(params) {
  setBusy(1);
  state.assembling = true;
  updateAssemble();
  try {
    const result = await inspect(params, "context:inspect");
    if (result === null || !stillShowing(params)) return;
    const key = [params.projectId, result.profileId, params.documentId ?? "", params.skillId ?? ""].join("\u0000");
    const current = { hash: result.stablePrefixHash, parts: stableParts(result) };
    const previous = state.prefixes.get(key);
    state.baseCompare = previous === undefined ? null : {
      changed: previous.hash !== current.hash,
      divergence: previous.hash === current.hash ? null : prefixDivergence(previous.parts, current.parts),
    };
    state.prefixes.set(key, current);
    state.base = result;
    state.baseRequest = params;
    $("whatif-run").disabled = false;
    if ($("whatif-total").value === "") $("whatif-total").value = String(Math.max(1, Math.floor(result.budget.total / 4)));
    if (state.whatIf !== null) {
      await runWhatIf(state.whatIf.total);
    } else {
      state.view = "base";
      renderResult();
    }
  } finally {
    state.assembling = false;
    updateAssemble();
    setBusy(-1);
  }
}

/** Whether the page still shows the project (and document, if any) a request was made for. */
function stillShowing(params) {
  return params.projectId === state.projectId && (params.documentId === undefined || params.documentId === state.documentId);
}

async function reinspect() {
  if (state.baseRequest !== null && state.baseRequest.projectId === state.projectId) {
    await runBase(state.baseRequest);
  }
}

$("assemble").addEventListener("click", () => {
  if ($("assemble").disabled) return;
  void runBase(currentRequest());
});

// --- what-if -----------------------------------------------------------------

async function runWhatIf(total) {
  if (state.base === null || state.baseRequest === null) return;
  const budget = state.base.budget;
  const contextWindow = total + budget.outputReserve + budget.systemPromptTokens;
  const budgetOverride = { contextWindow };
  // The budget table may not hold a minimum above its window: lower those to the window, and say so.
  const minimums = state.profile?.minimums ?? {};
  const lowered = Object.keys(minimums).filter((l) => Math.round(minimums[l]) > contextWindow);
  if (lowered.length > 0) budgetOverride.minimums = Object.fromEntries(lowered.map((l) => [l, contextWindow]));
  $("whatif-note").textContent =
    `total ${fmt(total)} = context window ${fmt(contextWindow)} − output reserve ${fmt(budget.outputReserve)} ` +
    `− system prompt ${fmt(budget.systemPromptTokens)} (budgetOverride, not saved)` +
    (lowered.length ? `; minimums above the window lowered to it: ${lowered.map((l) =>
      `${l} ${fmt(minimums[l])} → ${fmt(contextWindow)}`).join(", ")}` : "");
  setBusy(1);
  try {
    const request = state.baseRequest;
    const result = await inspect({ ...request, budgetOverride }, "context:inspect (what-if)");
    if (result === null || request !== state.baseRequest) return;
    state.whatIf = { total, budgetOverride, result };
    state.view = "whatif";
    $("whatif-clear").disabled = false;
    renderWhatIf();
    renderResult();
  } finally {
    setBusy(-1);
  }
}

$("whatif-run").addEventListener("click", () => {
  const total = Math.trunc(Number($("whatif-total").value));
  if (!Number.isFinite(total) || total < 1) {
    report("what-if", new Error("The what-if total must be a whole number of tokens, at least 1."));
    return;
  }
  void runWhatIf(total);
});

$("whatif-clear").addEventListener("click", () => {
  state.whatIf = null;
  state.view = "base";
  $("whatif-result").replaceChildren();
  $("whatif-note").textContent = "";
  $("whatif-clear").disabled = true;
  renderResult();
});

function candidateKey(c) {
  return `${c.layer}\u0000${c.id}`;
}

function fateText(c) {
  if (c === undefined) return "absent";
  const kept = c.fate === "trimmed" ? ` ${fmt(c.keptTokens)}/${fmt(c.tokens)}` : "";
  return `${c.fate}${kept}${c.reason ? ` (${c.reason})` : ""}`;
}

function renderWhatIf() {
  const box = $("whatif-result");
  if (state.whatIf === null || state.base === null) {
    box.replaceChildren();
    return;
  }
  const base = state.base;
  const what = state.whatIf.result;
  const ids = [...new Set([...sectionIds(base), ...sectionIds(what)])];
  const rows = [
    ...ids.map((id) => [id, base.layers[id]?.tokens ?? 0, what.layers[id]?.tokens ?? 0]),
    ["prompt", base.tokenCount, what.tokenCount],
    ["total budget", base.budget.total, what.budget.total],
  ];
  const table = el("table", { class: "data", id: "whatif-deltas" },
    el("thead", {}, el("tr", {},
      el("th", { scope: "col", text: "tokens" }), el("th", { class: "num", scope: "col", text: "saved" }),
      el("th", { class: "num", scope: "col", text: "what-if" }), el("th", { class: "num", scope: "col", text: "Δ" }))),
    el("tbody", {}, rows.map(([name, a, b]) => el("tr", { dataset: { layer: name } },
      el("th", { scope: "row", text: name }),
      el("td", { class: "num", text: fmt(a) }),
      el("td", { class: "num", text: fmt(b) }),
      el("td", { class: `num ${b > a ? "diff-up" : b < a ? "diff-down" : ""}`, text: signed(b - a) })))));

  const before = new Map(base.candidates.map((c) => [candidateKey(c), c]));
  const after = new Map(what.candidates.map((c) => [candidateKey(c), c]));
  const changed = [];
  for (const key of new Set([...before.keys(), ...after.keys()])) {
    const a = before.get(key);
    const b = after.get(key);
    if (a && b && a.fate === b.fate && a.keptTokens === b.keptTokens && a.reason === b.reason) continue;
    changed.push({ a, b, any: a ?? b });
  }
  const list = changed.length === 0
    ? el("p", { class: "none", text: "No candidate changes its fate." })
    : el("table", { class: "data", id: "whatif-changes" },
      el("thead", {}, el("tr", {},
        el("th", { scope: "col", text: "candidate" }), el("th", { scope: "col", text: "saved" }),
        el("th", { scope: "col", text: "what-if" }))),
      el("tbody", {}, changed.map(({ a, b, any }) => el("tr", { dataset: { id: any.id, layer: any.layer } },
        el("td", {}, el("span", { class: "mono", text: any.id }), " ",
          el("span", { class: "muted", text: `${any.layer}${state.labels.has(any.id) ? ` · ${state.labels.get(any.id)}` : ""}` })),
        el("td", {}, el("span", { class: `badge ${a?.fate ?? "neutral"}`, text: fateText(a) })),
        el("td", {}, el("span", { class: `badge ${b?.fate ?? "neutral"}`, text: fateText(b) }))))));

  const added = what.warnings.filter((w) => !base.warnings.includes(w));
  const gone = base.warnings.filter((w) => !what.warnings.includes(w));
  const warningDiff = added.length + gone.length === 0 ? null : el("ul", { class: "warnings" },
    added.map((w) => el("li", { text: `+ ${w}` })), gone.map((w) => el("li", { text: `− ${w}` })));

  box.replaceChildren(...[
    el("h3", { text: `Saved total ${fmt(base.budget.total)} → what-if ${fmt(what.budget.total)}` }),
    el("div", { class: "table-wrap" }, table),
    el("h3", { text: `Candidates whose fate changes (${changed.length})` }),
    el("div", { class: "table-wrap" }, list),
    warningDiff ? el("h3", { text: "Warnings" }) : null,
    warningDiff,
  ].filter((node) => node !== null));
  box.dataset.changes = String(changed.length);
}

// --- rendering the result ----------------------------------------------------

function shown() {
  if (state.view === "whatif" && state.whatIf !== null) return state.whatIf.result;
  return state.base;
}

for (const [id, view] of [["view-base", "base"], ["view-whatif", "whatif"]]) {
  $(id).addEventListener("click", () => {
    state.view = view;
    renderResult();
  });
}

function renderResult() {
  const result = shown();
  const isWhatIf = result !== null && result === state.whatIf?.result;
  $("result-empty").hidden = result !== null;
  $("result").hidden = result === null;
  $("prompt-panel").hidden = result === null;
  $("view-switch").hidden = state.whatIf === null;
  $("view-base").setAttribute("aria-pressed", String(!isWhatIf));
  $("view-whatif").setAttribute("aria-pressed", String(isWhatIf));
  state.seq += 1;
  $("result").dataset.seq = String(state.seq);
  $("result").dataset.view = isWhatIf ? "whatif" : "base";
  if (result === null) {
    for (const id of ["summary", "budget-bar", "budget-legend", "prefix", "warnings", "arithmetic", "layers",
      "system-prompt", "prompt", "message-list"]) {
      $(id).replaceChildren();
    }
    $("messages-summary").textContent = "Messages";
    delete $("result").dataset.profile;
    return;
  }
  const colours = sectionColours(sectionIds(result));
  $("result").dataset.profile = result.profileId ?? "";
  renderSummary(result, isWhatIf);
  renderBudgetBar(result, colours);
  renderPrefix(result, isWhatIf);
  renderWarnings(result);
  renderArithmetic(result, colours);
  renderLayers(result, colours);
  renderPrompt(result, isWhatIf, colours);
  renderMessages(result);
}

function renderSummary(r, isWhatIf) {
  const req = state.baseRequest;
  const times = Object.entries(r.timingsMs ?? {}).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(", ");
  const where = req.documentId !== undefined
    ? ` · ${req.documentId} @ ${fmt(req.cursorPosition)} · ${req.skillId}`
    : " · no document window";
  const variables = Object.keys(req.variables ?? {});
  $("summary").replaceChildren(el("span", {},
    isWhatIf ? el("span", { class: "badge trimmed", text: "what-if, not saved" }) : null,
    isWhatIf ? " " : null,
    el("b", { text: fmt(r.tokenCount) }), ` of `, el("b", { text: fmt(r.budget.total) }), " tokens",
    " · profile ", el("b", { id: "summary-profile", text: r.profileId ?? req.profileId }),
    where,
    variables.length ? ` · variables ${variables.join(", ")}` : "",
    ` · ${r.tokenizer.encoding}${r.tokenizer.exact ? "" : " (estimate)"}`,
    times ? el("span", { class: "muted", text: ` · ms: ${times}` }) : null,
  ));
}

function renderBudgetBar(r, colours) {
  const b = r.budget;
  const ids = sectionIds(r);
  const sectionSum = ids.reduce((sum, id) => sum + r.layers[id].tokens, 0);
  const segments = [
    ["system", b.systemPromptTokens, false],
    ...ids.map((id) => [id, r.layers[id].tokens, true]),
    ["joins", r.tokenCount - sectionSum, false],
    ["free", b.total - r.tokenCount, false],
    ["reserve", b.outputReserve, false],
  ];
  const name = (id, isSection) => (isSection ? id : SEGMENT_NAMES[id]);
  const paint = (node, id, isSection) => (isSection ? tint(node, id, colours) : (node.classList.add(`seg-${id}`), node));
  const window = Math.max(1, b.contextWindow);
  const bar = $("budget-bar");
  bar.replaceChildren(...segments.filter(([, n]) => n > 0).map(([id, n, isSection]) => {
    const seg = paint(el("div", {
      class: "seg", title: `${name(id, isSection)}: ${fmt(n)} tokens`,
      dataset: { segment: id, tokens: String(n), ...(isSection ? { section: id } : {}) },
    }), id, isSection);
    seg.style.flex = `0 0 ${(100 * n) / window}%`;
    return seg;
  }));
  bar.setAttribute("aria-label", segments.map(([id, n, isSection]) => `${name(id, isSection)} ${n}`).join(", ") + ` of ${b.contextWindow}`);
  $("budget-legend").replaceChildren(
    ...segments.filter(([id, n]) => n !== 0 || id !== "joins").map(([id, n, isSection]) => el("li", { dataset: { segment: id } },
      paint(el("span", { class: "swatch" }), id, isSection),
      `${name(id, isSection)} `, el("b", { text: fmt(n) }))),
    el("li", { class: "muted", text: `= context window ${fmt(b.contextWindow)}` }),
  );
}

function divergenceText(d) {
  return d === null || d === undefined ? "" : `first differs in ${d.layer} at byte ${fmt(d.byteOffset)}`;
}

function renderPrefix(r, isWhatIf) {
  // Unchanged, changed (with where), or nothing to compare with: the server names a
  // divergence whenever there was an earlier context:assemble of this document and skill.
  const serverBadge = r.stablePrefixUnchanged
    ? el("span", { class: "badge same", text: "unchanged" })
    : r.prefixDivergence
      ? el("span", { class: "badge changed", text: "changed" })
      : el("span", { class: "badge neutral", text: "no earlier assembly" });
  const serverNote = r.stablePrefixUnchanged ? ""
    : r.prefixDivergence ? ` · ${divergenceText(r.prefixDivergence)}`
      : " of this profile, document and skill to compare with";
  let local;
  if (isWhatIf) {
    const same = state.base !== null && state.base.stablePrefixHash === r.stablePrefixHash;
    const d = same || state.base === null ? null : prefixDivergence(stableParts(state.base), stableParts(r));
    local = [el("span", { class: `badge ${same ? "same" : "changed"}`, text: same ? "same as saved budget" : "differs from saved budget" }),
      d ? ` · ${divergenceText(d)}` : ""];
  } else if (state.baseCompare === null) {
    local = [el("span", { class: "badge neutral", text: "first inspection" })];
  } else {
    local = [el("span", { class: `badge ${state.baseCompare.changed ? "changed" : "same"}`, text: state.baseCompare.changed ? "changed" : "unchanged" }),
      state.baseCompare.divergence ? ` · ${divergenceText(state.baseCompare.divergence)}` : ""];
  }
  const stable = stableIds(r);
  const hashes = sectionIds(r).map((id) => `${id} ${(r.prefixHashes[id] ?? "").slice(0, 12)}`).join(" · ");
  $("prefix").replaceChildren(
    el("dt", { text: "stable prefix hash" }), el("dd", { class: "hash", id: "prefix-hash", text: r.stablePrefixHash }),
    el("dt", { text: "stable sections" }), el("dd", { id: "prefix-sections", text: stable.length ? stable.join(", ") : "none" }),
    el("dt", { text: "since last context:assemble" }), el("dd", { id: "prefix-server" }, serverBadge, serverNote),
    el("dt", { text: isWhatIf ? "vs saved budget" : "since previous inspection" }), el("dd", { id: "prefix-local" }, ...local),
    el("dt", { text: "hash up to end of" }), el("dd", { class: "hash muted", id: "prefix-hashes", text: hashes }),
  );
}

function renderWarnings(r) {
  const box = $("warnings");
  if (r.warnings.length === 0) {
    box.replaceChildren(el("p", { class: "none", text: "No warnings." }));
    return;
  }
  box.replaceChildren(el("h3", { text: `Warnings (${r.warnings.length})` }), el("ul", { class: "warnings", id: "warning-list" },
    r.warnings.map((w) => {
      const match = /^([A-Z][A-Z0-9_]+)(.*)$/s.exec(w);
      return el("li", { dataset: { code: match ? match[1] : "" } },
        match ? el("span", { class: "code", text: match[1] }) : null, match ? match[2] : w);
    })));
}

function stepText(s) {
  return `${s.step} ${fmt(s.tokensBefore)} → ${fmt(s.tokensAfter)}`;
}

/** Per section, in prompt order: role, stable or not, share, minimum, used, items and the steps taken. */
function renderArithmetic(r, colours) {
  const a = r.arithmetic;
  const ids = sectionIds(r);
  const byId = sectionsById(r);
  const stable = new Set(stableIds(r));
  const num = (value) => (value === undefined ? "" : fmt(value));
  const rows = ids.map((id) => {
    const s = byId.get(id);
    return el("tr", { dataset: { section: id, role: s.role } },
      el("th", { scope: "row" }, tint(el("span", { class: "swatch" }), id, colours), ` ${id}`),
      el("td", {}, el("span", { class: `badge role role-${s.role}`, text: s.role })),
      el("td", { text: stable.has(id) ? "stable" : "" }),
      el("td", { class: "num", text: num(a?.shares?.[id]) }),
      el("td", { class: "num", text: num(a?.minimums?.[id]) }),
      el("td", { class: "num", text: num(a?.used?.[id] ?? s.tokens) }),
      el("td", { class: "num", text: fmt(s.items) }),
      el("td", { class: "steps-cell" }, s.steps.length === 0 ? el("span", { class: "muted", text: "—" })
        : s.steps.map((step) => el("span", { class: "step", dataset: { step: step.step }, text: stepText(step) }))));
  });
  const used = ids.reduce((sum, id) => sum + (a?.used?.[id] ?? byId.get(id).tokens), 0);
  const table = el("table", { class: "data", id: "arithmetic-table" },
    el("thead", {}, el("tr", {},
      el("th", { scope: "col", text: "section" }), el("th", { scope: "col", text: "role" }),
      el("th", { scope: "col", text: "prefix" }), el("th", { class: "num", scope: "col", text: "share" }),
      el("th", { class: "num", scope: "col", text: "minimum" }), el("th", { class: "num", scope: "col", text: "used" }),
      el("th", { class: "num", scope: "col", text: "items" }), el("th", { scope: "col", text: "reduction steps" }))),
    el("tbody", {}, rows),
    el("tfoot", {}, el("tr", {},
      el("th", { scope: "row", colspan: "3", text: "total budget · used" }),
      el("td", { class: "num", title: "the total budget", text: fmt(a?.total ?? r.budget.total) }), el("td"),
      el("td", { class: "num", title: "tokens the sections use", text: fmt(used) }), el("td"), el("td"))));
  const reductions = r.reductions ?? [];
  $("arithmetic").replaceChildren(
    el("h3", { text: `Budget arithmetic · profile ${r.profileId ?? ""} · ${ids.length} sections` }),
    el("div", { class: "table-wrap" }, table),
    reductions.length === 0
      ? el("p", { class: "none", id: "reductions-none", text: "No reduction steps were needed." })
      : el("details", { class: "reductions" },
        el("summary", { text: `Reduction steps in the order taken (${reductions.length})` }),
        el("ol", { id: "reduction-list" }, reductions.map((s) => el("li", { dataset: { section: s.section, step: s.step } },
          el("span", { class: "mono", text: s.section }), ` ${stepText(s)}`)))),
  );
}

function keyText(c) {
  const value = Number.isInteger(c.key) ? String(c.key) : c.key.toFixed(3).replace(/0+$/, "").replace(/\.$/, "");
  return `${c.keyName} ${value}`;
}

function renderLayers(r, colours) {
  const a = r.arithmetic;
  const byId = sectionsById(r);
  const ids = sectionIds(r);
  const sections = ids.map((layer) => {
    const info = r.layers[layer];
    const section = byId.get(layer);
    const items = r.candidates.filter((c) => c.layer === layer);
    const head = el("div", { class: "layer-head" },
      tint(el("span", { class: "swatch" }), layer, colours),
      el("h3", { text: layer[0].toUpperCase() + layer.slice(1) }),
      el("span", { class: `badge role role-${section.role}`, title: "the role this section speaks in", text: section.role }),
      el("span", { class: "muted", text: `${fmt(info.tokens)} tokens · share ${fmt(a.shares[layer])} · minimum ${fmt(a.minimums[layer])}` +
        ` · ${fmt(section.items)} items` + ("chunks" in info ? ` · ${info.chunks} chunks` : "") }),
      info.truncated ? el("span", { class: "badge trimmed", text: "truncated" }) : null);
    const steps = section.steps.length === 0 ? null : el("p", { class: "layer-steps", dataset: { section: layer } },
      el("span", { class: "muted", text: "reduction steps: " }),
      section.steps.map((s) => el("span", { class: "step", dataset: { step: s.step }, text: stepText(s) })));
    if (items.length === 0) {
      return el("section", { class: "layer", dataset: { layer, role: section.role } }, head, steps,
        el("p", { class: "none", text: "No candidates." }));
    }
    const table = el("table", { class: "data layer-table", dataset: { layer } },
      el("thead", {}, el("tr", {},
        el("th", { scope: "col", text: "source" }),
        el("th", { scope: "col", text: "item" }),
        el("th", { class: "num", scope: "col", text: "tokens" }),
        el("th", { scope: "col", text: "ordering key" }),
        el("th", { scope: "col", text: "fate" }),
        el("th", { scope: "col", text: "reason" }),
        el("th", { class: "num", scope: "col", text: "kept" }))),
      el("tbody", {}, items.map((c) => {
        const isNew = c.id.startsWith("constraint:") && state.newConstraints.has(Number(c.id.slice(11)));
        return el("tr", { class: `fate-${c.fate}${isNew ? " is-new" : ""}`, dataset: { id: c.id, fate: c.fate } },
          el("td", { class: "source", dataset: { label: "source" } }, el("span", { text: c.source }),
            el("span", { class: "muted", text: ` ${c.section}` })),
          el("td", { class: "label", dataset: { label: "item" } }, el("span", { class: "mono", text: c.id }),
            isNew ? el("span", { class: "badge new", text: "new" }) : null,
            state.labels.has(c.id) ? el("div", { text: state.labels.get(c.id) }) : null),
          el("td", { class: "num", dataset: { label: "tokens" }, text: fmt(c.tokens) }),
          el("td", { class: "mono", dataset: { label: "key" }, text: keyText(c) }),
          el("td", { class: "fate", dataset: { label: "fate" } }, el("span", { class: `badge ${c.fate}`, text: c.fate })),
          el("td", { class: "mono", dataset: { label: "reason" }, text: c.reason ?? "" }),
          el("td", { class: "num", dataset: { label: "kept" }, text: fmt(c.keptTokens) }));
      })));
    return el("section", { class: "layer", dataset: { layer, role: section.role } }, head, steps,
      el("div", { class: "table-wrap" }, table));
  });
  $("layers").replaceChildren(...sections);
}

function renderPrompt(r, isWhatIf, colours) {
  $("system-prompt").replaceChildren(
    el("div", { class: "prompt-tag" }, el("span", { text: `system prompt · ${fmt(r.budget.systemPromptTokens)} tokens · sent beside the prompt` })),
    el("pre", { class: "prompt-text", text: r.systemPrompt }));
  const byId = sectionsById(r);
  const texts = sectionIds(r).map((id) => [id, r.layerTexts[id] ?? ""]).filter(([, text]) => text !== "");
  const joined = texts.map(([, text]) => text).join(SEPARATOR);
  const box = $("prompt");
  if (joined !== r.prompt) {
    box.replaceChildren(el("p", { class: "none", text: "The section texts do not join to the prompt; showing the prompt as sent." }),
      el("pre", { class: "prompt-text", text: r.prompt }));
    return;
  }
  const divergence = isWhatIf
    ? (state.base && state.base.stablePrefixHash !== r.stablePrefixHash ? prefixDivergence(stableParts(state.base), stableParts(r)) : null)
    : (state.baseCompare?.divergence ?? r.prefixDivergence ?? null);
  const stable = new Set(stableIds(r));
  const lastStable = texts.reduce((last, [id], index) => (stable.has(id) ? index : last), -1);
  const boundary = (bytes) => el("p", { class: "boundary",
    text: `▲ end of the stable prefix (${fmt(bytes)} bytes, hash ${r.stablePrefixHash.slice(0, 16)}…)` });
  const blocks = lastStable < 0 ? [boundary(0)] : [];
  let offset = 0;
  for (const [index, [layer, text]] of texts.entries()) {
    if (index > 0) offset += byteLength(SEPARATOR);
    const start = offset;
    const size = byteLength(text);
    offset += size;
    const pre = el("pre", { class: "prompt-text" });
    if (divergence !== null && divergence.byteOffset >= start && divergence.byteOffset <= offset && layer === divergence.layer) {
      const at = bytesToUtf16(text, divergence.byteOffset - start);
      pre.append(text.slice(0, at), el("mark", { class: "diverge", title: "the stable prefix first differs here", "aria-label": "first difference" }), text.slice(at));
    } else {
      pre.textContent = text;
    }
    const role = byId.get(layer)?.role ?? "";
    blocks.push(tint(el("div", { class: "prompt-block", dataset: { layer, role } },
      el("div", { class: "prompt-tag" },
        el("span", { text: `${layer} · ${role} · ${fmt(r.layers[layer].tokens)} tokens · bytes ${fmt(start)}–${fmt(offset)}` }),
        el("span", { class: "hash", text: `hash to here ${(r.prefixHashes[layer] ?? "").slice(0, 16)}…` })),
      pre), layer, colours));
    if (index === lastStable) blocks.push(boundary(offset));
  }
  box.replaceChildren(...blocks);
}

function renderMessages(r) {
  const messages = r.messages ?? [];
  const roles = [...new Set(messages.map((m) => m.role))];
  $("messages-summary").textContent = `Messages (${messages.length}${roles.length ? `: ${messages.map((m) => m.role).join(", ")}` : ""})`;
  $("message-list").replaceChildren(...(messages.length === 0
    ? [el("p", { class: "none", text: "No messages." })]
    : messages.map((m, index) => el("div", { class: `message role-${m.role}`, dataset: { role: m.role, index: String(index) } },
      el("div", { class: "prompt-tag" },
        el("span", { class: `badge role role-${m.role}`, text: m.role }),
        el("span", { text: `message ${index + 1} · ${fmt(m.content.length)} chars` })),
      el("pre", { class: "prompt-text", text: m.content })))));
}

// --- budget profile ----------------------------------------------------------

const budgetRows = $("budget-rows");

/** One row per section the budget table has (the keys of its ratios), built from the profile itself. */
function buildBudgetRows(keys) {
  if (keys.length === state.budgetKeys.length && keys.every((k, i) => k === state.budgetKeys[i])) return;
  state.budgetKeys = keys;
  const colours = sectionColours(keys);
  budgetRows.replaceChildren(...keys.map((key) => el("tr", {},
    el("th", { scope: "row" }, tint(el("span", { class: "swatch" }), key, colours), ` ${key}`),
    el("td", {}, el("input", { id: `b-ratio-${key}`, type: "number", min: "0", max: "1", step: "0.01", disabled: true, "aria-label": `${key} ratio` })),
    el("td", {}, el("input", { id: `b-min-${key}`, type: "number", min: "0", step: "1", disabled: true, "aria-label": `${key} minimum` })))));
}

function budgetInputs() {
  return [$("b-contextWindow"), $("b-outputReserve"), ...state.budgetKeys.flatMap((l) => [$(`b-ratio-${l}`), $(`b-min-${l}`)])];
}

function fillBudgetForm(profile) {
  if (profile !== null) buildBudgetRows(Object.keys(profile.ratios));
  for (const input of budgetInputs()) input.disabled = profile === null;
  $("budget-save").disabled = profile === null;
  $("budget-conflict").hidden = true;
  if (profile === null) {
    for (const input of budgetInputs()) input.value = "";
    $("budget-version").textContent = "";
    $("budget-version").dataset.version = "";
    $("budget-status").textContent = "";
    updateRatioSum();
    return;
  }
  $("b-contextWindow").value = String(profile.contextWindow);
  $("b-outputReserve").value = String(profile.outputReserve);
  for (const layer of state.budgetKeys) {
    $(`b-ratio-${layer}`).value = String(profile.ratios[layer]);
    $(`b-min-${layer}`).value = String(Math.round(profile.minimums[layer]));
  }
  $("budget-version").textContent = `version ${profile.version}`;
  $("budget-version").dataset.version = String(profile.version);
  updateRatioSum();
}

function readBudgetForm() {
  const int = (id) => Math.trunc(Number($(id).value));
  return {
    contextWindow: int("b-contextWindow"),
    outputReserve: int("b-outputReserve"),
    ratios: Object.fromEntries(state.budgetKeys.map((l) => [l, Number($(`b-ratio-${l}`).value)])),
    minimums: Object.fromEntries(state.budgetKeys.map((l) => [l, int(`b-min-${l}`)])),
  };
}

/**
 * The fields the user changed relative to `base`, as a context:budget:update
 * patch. Ratios travel together (they must sum to 1), minimums one by one.
 */
function budgetPatch(base, form) {
  const keys = state.budgetKeys;
  const patch = {};
  if (form.contextWindow !== base.contextWindow) patch.contextWindow = form.contextWindow;
  if (form.outputReserve !== base.outputReserve) patch.outputReserve = form.outputReserve;
  if (keys.some((l) => form.ratios[l] !== base.ratios[l])) patch.ratios = { ...form.ratios };
  const minimums = Object.fromEntries(keys.filter((l) => form.minimums[l] !== Math.round(base.minimums[l])).map((l) => [l, form.minimums[l]]));
  if (Object.keys(minimums).length > 0) patch.minimums = minimums;
  return patch;
}

/** `profile` with `patch` applied, as the form shows it before a reapply. */
function withPatch(profile, patch) {
  return {
    ...profile,
    ...patch,
    ratios: { ...profile.ratios, ...patch.ratios },
    minimums: { ...profile.minimums, ...patch.minimums },
  };
}

/** Patch or profile as flat `field -> value` pairs, for comparing. */
function flatBudget(p) {
  const flat = {};
  if (p.contextWindow !== undefined) flat.contextWindow = p.contextWindow;
  if (p.outputReserve !== undefined) flat.outputReserve = p.outputReserve;
  for (const l of Object.keys(p.ratios ?? {})) flat[`ratios.${l}`] = p.ratios[l];
  for (const l of Object.keys(p.minimums ?? {})) flat[`minimums.${l}`] = Math.round(p.minimums[l]);
  return flat;
}

function updateRatioSum() {
  const cell = $("ratio-sum");
  const values = state.budgetKeys.map((l) => $(`b-ratio-${l}`).value);
  if (values.length === 0 || values.some((v) => v === "")) {
    cell.textContent = "";
    return;
  }
  const sum = values.reduce((s, v) => s + Number(v), 0);
  const off = Math.abs(sum - 1) > 1e-6;
  cell.textContent = String(Math.round(sum * 10000) / 10000);
  cell.className = `num ${off ? "bad" : ""}`;
  cell.title = off ? "the ratios must sum to 1" : "";
}

budgetRows.addEventListener("input", updateRatioSum);

async function loadBudget() {
  const projectId = state.projectId;
  const profile = await call("context:budget:get", { projectId });
  if (state.projectId !== projectId) return;
  state.profile = profile;
  state.conflict = null;
  fillBudgetForm(profile);
  $("budget-status").textContent = "";
}

$("budget-reload").addEventListener("click", () => {
  void guarded("context:budget:get", loadBudget);
});

/**
 * Send `patch` as an update of `version`. On CONTEXT_BUDGET_CONFLICT nothing
 * was saved: fetch the newer profile and show both; only the user's explicit
 * "Reapply" sends the patch again, on the newer version.
 */
async function saveBudget(patch, version) {
  const projectId = state.projectId;
  const base = state.profile;
  setBusy(1);
  $("budget-save").disabled = true;
  try {
    const saved = await call("context:budget:update", { projectId, version, ...patch });
    if (state.projectId !== projectId) return;
    state.profile = saved;
    state.conflict = null;
    fillBudgetForm(saved);
    $("budget-status").textContent = `Saved as version ${saved.version}.`;
    await reinspect();
  } catch (err) {
    report("context:budget:update", err);
    if (err instanceof StrataRpcError && err.dataCode === "CONTEXT_BUDGET_CONFLICT") {
      const latest = await guarded("context:budget:get", () => call("context:budget:get", { projectId }));
      if (latest !== undefined && state.projectId === projectId) showConflict(patch, base, latest);
    }
  } finally {
    $("budget-save").disabled = state.profile === null;
    setBusy(-1);
  }
}

$("budget-form").addEventListener("submit", (event) => {
  event.preventDefault();
  if (state.profile === null) return;
  const patch = budgetPatch(state.profile, readBudgetForm());
  if (Object.keys(patch).length === 0) {
    $("budget-status").textContent = "Nothing changed.";
    return;
  }
  void saveBudget(patch, state.profile.version);
});

function showConflict(patch, base, latest) {
  state.conflict = { patch, base, latest };
  const mine = flatBudget(patch);
  const was = flatBudget(base);
  const now = flatBudget(latest);
  const fields = Object.keys(now).filter((f) => f in mine || now[f] !== was[f]);
  const rows = fields.map((field) => {
    const yours = field in mine;
    const theirs = now[field] !== was[field];
    const note = yours && theirs ? "both changed: yours wins on reapply" : yours ? "your change" : "their change, kept";
    return el("tr", { class: yours && theirs ? "changed" : "", dataset: { field } },
      el("th", { scope: "row", class: "mono", text: field }),
      el("td", { class: "num", text: String(was[field]) }),
      el("td", { class: "num", text: yours ? String(mine[field]) : "" }),
      el("td", { class: "num", text: String(now[field]) }),
      el("td", { class: "muted", text: note }));
  });
  const box = $("budget-conflict");
  box.replaceChildren(
    el("p", {}, el("b", { text: "Version conflict: nothing was saved. " }),
      `You edited version ${base.version}; another client has since saved version ${latest.version}.`),
    el("div", { class: "table-wrap" }, el("table", { class: "data", id: "conflict-table" },
      el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "field" }),
        el("th", { class: "num", scope: "col", text: `v${base.version}` }),
        el("th", { class: "num", scope: "col", text: "yours" }),
        el("th", { class: "num", scope: "col", text: `now v${latest.version}` }),
        el("th", { scope: "col", text: "" }))),
      el("tbody", {}, rows))),
    el("div", { class: "row" },
      el("button", {
        id: "conflict-reapply", type: "button", class: "primary", text: `Reapply my changes on v${latest.version}`,
        onclick: () => {
          state.profile = latest;
          fillBudgetForm(withPatch(latest, patch));
          void saveBudget(patch, latest.version);
        },
      }),
      el("button", {
        id: "conflict-discard", type: "button", text: `Discard mine, load v${latest.version}`,
        onclick: () => {
          state.profile = latest;
          state.conflict = null;
          fillBudgetForm(latest);
          $("budget-status").textContent = `Loaded version ${latest.version}.`;
          void reinspect();
        },
      })),
  );
  box.hidden = false;
  $("budget-version").textContent = `version ${base.version} (now ${latest.version} on the server)`;
  $("budget-status").textContent = "Not saved: version conflict.";
}


// --- profile editor ----------------------------------------------------------

const editorText = $("pe-json");
const NEW_PROFILE = {
  schema: "strata.profile/1",
  name: "my-profile",
  description: "A profile of this project.",
  variables: { topic: { description: "what the conversation is about", default: "the story" } },
  sections: {
    persona: { order: 10, role: "system", stable: true, content: ["You help the writer with ${topic}."] },
    question: { order: 20, role: "user", source: "instruction" },
  },
};

function setEditorEnabled() {
  const on = isConnected() && state.projectId !== "";
  const open = on && state.editor !== null;
  const builtIn = open && state.editor.builtIn;
  editorText.disabled = !open;
  editorText.readOnly = builtIn;
  $("pe-validate").disabled = !open;
  $("pe-save").disabled = !open || builtIn;
  $("pe-delete").disabled = !open || builtIn || state.editor.version === null;
  $("pe-copy-name").disabled = !open;
  $("pe-copy").disabled = !open;
  resetDelete();
}

/** Show `opened` ({name, profile, version, builtIn}; name and version null for a new one) in the editor. */
function openInEditor(opened) {
  state.editor = opened === null ? null
    : { name: opened.name, version: opened.version ?? null, builtIn: Boolean(opened.builtIn) };
  state.editorConflict = null;
  editorText.value = opened === null ? "" : JSON.stringify(opened.profile, null, 2);
  editorText.scrollTop = 0;
  $("pe-conflict").hidden = true;
  $("pe-conflict").replaceChildren();
  $("pe-result").replaceChildren();
  $("pe-status").textContent = "";
  const version = $("pe-version");
  const note = $("pe-note");
  if (opened === null) {
    version.textContent = "";
    version.dataset.version = "";
    note.textContent = "Open a profile of the project, or a built-in one (read-only: save a copy under a new name).";
    note.className = "muted";
  } else if (state.editor.builtIn) {
    version.textContent = `${opened.name} · built-in`;
    version.dataset.version = "";
    note.textContent = `${opened.name} is built in and read-only: save a copy under a new name to change it.`;
    note.className = "note read-only";
  } else if (state.editor.version === null) {
    version.textContent = "new";
    version.dataset.version = "";
    note.textContent = "A new profile: Save creates it under the name in the JSON.";
    note.className = "muted";
  } else {
    version.textContent = `${opened.name} · version ${state.editor.version}`;
    version.dataset.version = String(state.editor.version);
    note.textContent = `The project's profile ${opened.name}. Save sends the version it was opened at.`;
    note.className = "muted";
  }
  editorText.dataset.name = state.editor?.name ?? "";
  setEditorEnabled();
}

async function openProfile(name) {
  const projectId = state.projectId;
  const got = await call("profile:get", { projectId, name });
  if (state.projectId !== projectId) return;
  openInEditor({ name, profile: got.profile, version: got.builtIn ? null : got.version, builtIn: got.builtIn });
  $("pe-status").textContent = `Opened ${name}.`;
}

$("pe-open").addEventListener("click", () => {
  const name = $("pe-name").value;
  if (name !== "") void guarded("profile:get", () => openProfile(name));
});

$("pe-new").addEventListener("click", () => {
  openInEditor({ name: null, version: null, builtIn: false, profile: NEW_PROFILE });
});

/** The editor's JSON as an object, or null (reported, with the place selected) if it is not one. */
function parseEditor() {
  const text = editorText.value;
  try {
    const value = JSON.parse(text);
    if (value === null || typeof value !== "object" || Array.isArray(value)) throw new SyntaxError("a profile is a JSON object");
    return value;
  } catch (err) {
    report("profile JSON", new Error(`The profile is not a JSON object: ${err.message}`));
    const at = /position (\d+)/.exec(err.message);
    if (at) selectRange(Number(at[1]), Number(at[1]) + 1);
    return null;
  }
}

/**
 * Where each value of a JSON text is: JSON pointer segments (as a JSON array string) ->
 * {start (of its key, if any), end, keyEnd}. Stops quietly at the first syntax error.
 */
function locateJson(text) {
  const spans = new Map();
  let i = 0;
  const fail = () => {
    throw new SyntaxError(`JSON syntax at ${i}`);
  };
  const ws = () => {
    while (i < text.length && (text[i] === " " || text[i] === "\n" || text[i] === "\r" || text[i] === "\t")) i++;
  };
  const string = () => {
    if (text[i] !== "\"") fail();
    const start = i++;
    while (i < text.length && text[i] !== "\"") i += text[i] === "\\" ? 2 : 1;
    if (i >= text.length) fail();
    i++;
    return JSON.parse(text.slice(start, i));
  };
  const value = (path, keyStart, keyEnd) => {
    ws();
    const start = i;
    if (text[i] === "{" || text[i] === "[") {
      const array = text[i] === "[";
      i++;
      ws();
      if (text[i] === (array ? "]" : "}")) i++;
      else {
        for (let n = 0; ; n++) {
          ws();
          if (array) value([...path, String(n)]);
          else {
            const ks = i;
            const key = string();
            const ke = i;
            ws();
            if (text[i] !== ":") fail();
            i++;
            value([...path, key], ks, ke);
          }
          ws();
          if (text[i] === ",") i++;
          else if (text[i] === (array ? "]" : "}")) {
            i++;
            break;
          } else fail();
        }
      }
    } else if (text[i] === "\"") {
      string();
    } else {
      const token = /^(?:-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/.exec(text.slice(i, i + 64));
      if (token === null) fail();
      i += token[0].length;
    }
    spans.set(JSON.stringify(path), { start: keyStart ?? start, end: i, keyEnd: keyEnd ?? i });
  };
  try {
    value([]);
  } catch {
    // keep the places found before the error
  }
  return spans;
}

/** A JSON pointer's segments ("/sections/a~1b/0" -> ["sections", "a/b", "0"]). */
function pointerSegments(pointer) {
  if (pointer === "" || pointer === "/") return [];
  return pointer.replace(/^\//, "").split("/").map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
}

function selectRange(start, end) {
  editorText.focus();
  editorText.setSelectionRange(start, end);
  const line = editorText.value.slice(0, start).split("\n").length - 1;
  const height = parseFloat(getComputedStyle(editorText).lineHeight) || 18;
  editorText.scrollTop = Math.max(0, line * height - editorText.clientHeight / 3);
  editorText.scrollLeft = 0;
}

/**
 * Select the place a problem's path names in the JSON text: the key and value it points at,
 * or, when that is missing (a required field, a bad key), the key of the nearest parent.
 */
function selectPointer(pointer) {
  const spans = locateJson(editorText.value);
  let segments = pointerSegments(pointer);
  let exact = true;
  while (segments.length > 0 && !spans.has(JSON.stringify(segments))) {
    segments = segments.slice(0, -1);
    exact = false;
  }
  const span = spans.get(JSON.stringify(segments));
  if (span === undefined) return false;
  const whole = exact || segments.length === 0;
  selectRange(span.start, whole ? span.end : span.keyEnd);
  editorText.dataset.selected = pointer;
  editorText.dataset.exact = String(exact);
  return true;
}

/** List problems ({path, message}) under `heading`; clicking one selects its place in the text. */
function showProblems(heading, problems) {
  const list = el("ol", { id: "pe-problems", class: "problems" }, problems.map((p) => {
    const item = el("li", { dataset: { path: p.path ?? "" } });
    item.append(el("button", {
      type: "button", class: "problem", title: "select this place in the JSON",
      onclick: () => {
        for (const other of list.children) other.removeAttribute("aria-current");
        item.setAttribute("aria-current", "true");
        if (!selectPointer(p.path ?? "")) $("pe-status").textContent = `${p.path} is not in the text.`;
      },
    }, el("code", { class: "path", text: p.path || "/" }), " ", el("span", { text: p.message }),
    p.profile ? el("span", { class: "muted", text: ` (in profile ${p.profile})` }) : null));
    return item;
  }));
  $("pe-result").replaceChildren(el("h3", { class: "bad-head", text: heading }), list);
}

$("pe-validate").addEventListener("click", () => {
  const profile = parseEditor();
  if (profile === null) return;
  void guarded("profile:validate", async () => {
    const result = await call("profile:validate", { profile, projectId: state.projectId });
    if (result.valid) {
      const sections = Object.keys(result.resolved?.sections ?? {});
      $("pe-result").replaceChildren(el("p", { class: "valid", id: "pe-valid" },
        el("span", { class: "badge same", text: "valid" }),
        ` ${sections.length} section${sections.length === 1 ? "" : "s"}: ${sections.join(", ")}` +
        (hasDocumentWindow(result.resolved) ? " · has a document window" : " · no document window")));
      $("pe-status").textContent = "Valid.";
    } else {
      showProblems(`${result.problems.length} problem${result.problems.length === 1 ? "" : "s"} (click one to select it)`, result.problems);
      $("pe-status").textContent = "Not valid.";
    }
  });
});

/** After a save or a delete: the lists, the chosen profile, and the inspection if it used `name`. */
async function afterProfileChange(name) {
  await guarded("profile:list", () => loadProfiles(state.profileId));
  if (state.baseRequest !== null && state.baseRequest.profileId === name && state.profileId === name) await reinspect();
}

/**
 * Save the editor's JSON as `name`: an update of `version`, or a new profile when it is null.
 * PROFILE_INVALID lists the problems; PROFILE_CONFLICT saves nothing and shows both versions.
 */
async function saveProfile(name, profile, version, action = "profile:put") {
  const projectId = state.projectId;
  const params = { projectId, name, profile };
  if (version !== null) params.version = version;
  setBusy(1);
  try {
    const saved = await call("profile:put", params);
    if (state.projectId !== projectId) return;
    if (saved?.resolved) state.resolved.set(name, saved.resolved);
    else state.resolved.delete(name);
    const savedVersion = typeof saved?.version === "number" ? saved.version
      : (await call("profile:get", { projectId, name })).version;
    const text = editorText.value;
    openInEditor({ name, profile, version: savedVersion, builtIn: false });
    if (version !== null) editorText.value = text; // keep the writer's own layout of an update
    $("pe-name").value = name;
    $("pe-status").textContent = `Saved ${name} as version ${savedVersion}.`;
    await afterProfileChange(name);
    if ([...$("pe-name").options].some((o) => o.value === name)) $("pe-name").value = name;
  } catch (err) {
    report(action, err);
    if (!(err instanceof StrataRpcError)) return;
    if (err.dataCode === "PROFILE_INVALID") {
      const problems = Array.isArray(err.data?.problems) ? err.data.problems : [];
      showProblems(`Not saved: ${problems.length} problem${problems.length === 1 ? "" : "s"} (PROFILE_INVALID)`, problems);
      $("pe-status").textContent = "Not saved: PROFILE_INVALID.";
    } else if (err.dataCode === "PROFILE_CONFLICT" && version !== null) {
      const latest = await guarded("profile:get", () => call("profile:get", { projectId, name }));
      if (latest !== undefined && state.projectId === projectId) showProfileConflict(name, profile, version, latest);
      else $("pe-status").textContent = "Not saved: PROFILE_CONFLICT.";
    } else {
      $("pe-status").textContent = `Not saved: ${err.dataCode ?? err.code}.`;
    }
  } finally {
    setBusy(-1);
  }
}

$("pe-save").addEventListener("click", () => {
  if (state.editor === null || state.editor.builtIn) return;
  const profile = parseEditor();
  if (profile === null) return;
  const name = state.editor.name ?? (typeof profile.name === "string" ? profile.name : "");
  if (name === "") {
    report("profile:put", new Error("The profile needs a name (its \"name\" field)."));
    return;
  }
  void saveProfile(name, profile, state.editor.version);
});

$("pe-copy").addEventListener("click", () => {
  if (state.editor === null) return;
  const name = $("pe-copy-name").value.trim();
  if (name === "") {
    report("save as copy", new Error("Type the name of the copy first."));
    $("pe-copy-name").focus();
    return;
  }
  const profile = parseEditor();
  if (profile === null) return;
  const copy = { ...profile, name };
  openInEditor({ name: null, version: null, builtIn: false, profile: copy });
  void saveProfile(name, copy, null, "profile:put (copy)").then(() => {
    if (state.editor?.name === name) $("pe-copy-name").value = "";
  });
});

/** Lines of `text` not among the lines of `other`, marked; the rest plain. */
function markedLines(text, other) {
  const theirs = new Set(other.split("\n"));
  return text.split("\n").flatMap((line, index) => {
    const node = theirs.has(line) ? line : el("mark", { class: "diffline", text: line });
    return index === 0 ? [node] : ["\n", node];
  });
}

function showProfileConflict(name, mine, baseVersion, latest) {
  state.editorConflict = { name, mine, baseVersion, latest };
  const yours = JSON.stringify(mine, null, 2);
  const theirs = JSON.stringify(latest.profile, null, 2);
  const box = $("pe-conflict");
  box.replaceChildren(
    el("p", {}, el("b", { text: "Version conflict: nothing was saved. " }),
      `You edited version ${baseVersion} of ${name}; another client has since saved version ${latest.version}. ` +
      "Lines that differ are marked."),
    el("div", { class: "versions" },
      el("figure", {}, el("figcaption", { text: `yours (edited from v${baseVersion})` }),
        el("pre", { class: "json", id: "pe-conflict-mine" }, markedLines(yours, theirs))),
      el("figure", {}, el("figcaption", { text: `now v${latest.version} on the server` }),
        el("pre", { class: "json", id: "pe-conflict-theirs" }, markedLines(theirs, yours)))),
    el("div", { class: "row" },
      el("button", {
        id: "pe-reapply", type: "button", class: "primary", text: `Save mine over v${latest.version}`,
        onclick: () => {
          const profile = parseEditor();
          if (profile !== null) void saveProfile(name, profile, latest.version);
        },
      }),
      el("button", {
        id: "pe-discard", type: "button", text: `Discard mine, load v${latest.version}`,
        onclick: () => {
          openInEditor({ name, profile: latest.profile, version: latest.version, builtIn: latest.builtIn });
          $("pe-status").textContent = `Loaded version ${latest.version}.`;
        },
      })),
  );
  box.hidden = false;
  for (const pre of box.querySelectorAll("pre.json")) {
    const mark = pre.querySelector("mark.diffline");
    if (mark !== null) pre.scrollTop = Math.max(0, mark.offsetTop - pre.offsetTop - 36);
  }
  $("pe-version").textContent = `${name} · version ${baseVersion} (now ${latest.version} on the server)`;
  $("pe-status").textContent = "Not saved: version conflict.";
}

function resetDelete() {
  const button = $("pe-delete");
  delete button.dataset.confirm;
  button.textContent = "Delete";
}

$("pe-delete").addEventListener("blur", resetDelete);

$("pe-delete").addEventListener("click", () => {
  const editor = state.editor;
  if (editor === null || editor.builtIn || editor.version === null) return;
  const button = $("pe-delete");
  if (button.dataset.confirm !== "true") {
    button.dataset.confirm = "true";
    button.textContent = `Really delete ${editor.name} v${editor.version}?`;
    return;
  }
  resetDelete();
  const projectId = state.projectId;
  void guarded("profile:delete", async () => {
    try {
      await call("profile:delete", { projectId, name: editor.name, version: editor.version });
    } catch (err) {
      if (err instanceof StrataRpcError && err.dataCode === "PROFILE_CONFLICT") {
        $("pe-status").textContent = `Not deleted: another client saved version ${err.data?.currentVersion ?? "?"}; open it again.`;
      }
      throw err;
    }
    if (state.projectId !== projectId) return;
    state.resolved.delete(editor.name);
    openInEditor(null);
    $("pe-status").textContent = `Deleted ${editor.name}.`;
    await afterProfileChange(editor.name);
  });
});

// --- constraints -------------------------------------------------------------

async function loadConstraints() {
  const projectId = state.projectId;
  const { constraints } = await call("constraints:list", { projectId });
  if (state.projectId !== projectId) return;
  state.constraints = constraints;
  for (const c of constraints) state.labels.set(`constraint:${c.id}`, c.text);
  $("constraints-count").textContent = `(${constraints.length})`;
  $("constraint-list").replaceChildren(...constraints.map((c) => el("li", { dataset: { id: String(c.id) } },
    el("span", { class: "prio", title: "priority", text: String(c.priority) }),
    el("span", {}, el("span", { class: "ctext", text: c.text }),
      state.newConstraints.has(c.id) ? el("span", { class: "badge new", text: "new" }) : null,
      el("span", { class: "meta", text: `${c.kind} · ${c.source} · #${c.id}` })),
    el("button", { type: "button", class: "small danger", "aria-label": `Delete constraint ${c.id}`, text: "Delete",
      onclick: () => void guarded("constraints:delete", () => deleteConstraint(c.id)) }))));
}

async function deleteConstraint(id) {
  await call("constraints:delete", { projectId: state.projectId, id });
  state.newConstraints.delete(id);
  state.labels.delete(`constraint:${id}`);
  await loadConstraints();
  await reinspect();
}

$("constraint-form").addEventListener("submit", (event) => {
  event.preventDefault();
  void guarded("constraints:create", async () => {
    const params = {
      projectId: state.projectId,
      kind: $("c-kind").value,
      text: $("c-text").value,
      source: $("c-source").value,
      priority: Math.trunc(Number($("c-priority").value) || 0),
    };
    const { constraint } = await call("constraints:create", params);
    state.newConstraints.add(constraint.id);
    $("c-text").value = "";
    await loadConstraints();
    await reinspect();
  });
});

// --- start -------------------------------------------------------------------

function start() {
  setConnected(false);
  setBusy(0);
  const fromHash = new URLSearchParams(location.hash.slice(1));
  const token = fromHash.get("token") ?? "";
  const url = fromHash.get("url") ?? defaultServerUrl();
  if (location.hash !== "") {
    // Drop the token from the address bar and from history at once.
    history.replaceState(history.state, "", location.pathname + location.search);
  }
  $("server-url").value = url;
  if (token !== "" && url !== "") void connect(url, token);
  document.body.dataset.ready = "true";
}

start();
