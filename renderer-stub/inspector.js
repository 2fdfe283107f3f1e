/**
 * inspector.js: Strata's debug inspector panel. Plain ES module, no framework,
 * no build step; it speaks the protocol only through ./strata-client.js.
 *
 * It connects with the inspector token (typed in, or read once from
 * `location.hash` as `#token=...` and removed from the address bar at once, so
 * it never lands in a URL that is logged or shared), then lets a developer
 * pick a project, a document and a cursor, run `context:inspect`, and see why
 * the prompt is what it is. Everything the user or the server provided is
 * put into the page with textContent, never as HTML.
 */

import { StrataClient, StrataConnectionError, StrataRpcError } from "./strata-client.js";

const LAYERS = ["rules", "settings", "retrieved", "immediate"];
const SEPARATOR = "\n\n";
const DEFAULT_SKILLS = ["continue", "polish", "expand", "rewrite"];
const SKILL_NAMES = { continue: "续写", polish: "润色", expand: "扩写", rewrite: "改写" };
const SEGMENT_NAMES = {
  system: "system prompt",
  rules: "rules",
  settings: "settings",
  retrieved: "retrieved",
  immediate: "immediate",
  joins: "layer joins",
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
    for (const id of ["assemble", "whatif-run", "budget-save", "budget-reload", "c-add", "cursor", "cursor-end"]) {
      $(id).disabled = true;
    }
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
  clearResults();
  renderDocument();
  for (const id of ["assemble", "cursor", "cursor-end"]) $(id).disabled = true;
  $("document").replaceChildren();
  $("constraint-list").replaceChildren();
  fillBudgetForm(null);
  const enabled = projectId !== "";
  $("c-add").disabled = !enabled;
  $("budget-reload").disabled = !enabled;
  if (!enabled) return;
  await Promise.all([
    guarded("document:list", loadDocuments),
    guarded("context:budget:get", loadBudget),
    guarded("constraints:list", loadConstraints),
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
  $("assemble").disabled = !has;
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

// --- assembling --------------------------------------------------------------

function currentRequest() {
  const params = {
    projectId: state.projectId,
    documentId: state.documentId,
    cursorPosition: state.cursor,
    skillId: $("skill").value,
  };
  const instruction = $("instruction").value;
  if (instruction.trim() !== "") params.additionalInput = instruction;
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

/** Where two stable prefixes first differ, measured like the server does. */
function prefixDivergence(previous, current) {
  const join = (p) => [p.rules, p.settings].filter((t) => t !== "").join(SEPARATOR);
  const a = encoder.encode(join(previous));
  const b = encoder.encode(join(current));
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  if (i === a.length && i === b.length) return null;
  const rulesEnd = Math.max(byteLength(previous.rules), byteLength(current.rules));
  return { layer: i < rulesEnd ? "rules" : "settings", byteOffset: i };
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
  $("assemble").disabled = true;
  try {
    const result = await inspect(params, "context:inspect");
    if (result === null || !stillShowing(params)) return;
    const key = [params.projectId, params.documentId, params.skillId].join("\u0000");
    const current = { hash: result.stablePrefixHash, rules: result.layerTexts.rules, settings: result.layerTexts.settings };
    const previous = state.prefixes.get(key);
    state.baseCompare = previous === undefined ? null : {
      changed: previous.hash !== current.hash,
      divergence: previous.hash === current.hash ? null : prefixDivergence(previous, current),
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
    $("assemble").disabled = state.documentId === "";
    setBusy(-1);
  }
}

/** Whether the page still shows the project and document a request was made for. */
function stillShowing(params) {
  return params.projectId === state.projectId && params.documentId === state.documentId;
}

async function reinspect() {
  if (state.baseRequest !== null && state.baseRequest.projectId === state.projectId) {
    await runBase(state.baseRequest);
  }
}

$("assemble").addEventListener("click", () => {
  if (state.documentId === "") return;
  void runBase(currentRequest());
});

// --- what-if -----------------------------------------------------------------

async function runWhatIf(total) {
  if (state.base === null || state.baseRequest === null) return;
  const budget = state.base.budget;
  const contextWindow = total + budget.outputReserve + budget.systemPromptTokens;
  const budgetOverride = { contextWindow };
  // A profile may not hold a minimum above its window: lower those to the window, and say so.
  const lowered = LAYERS.filter((l) => state.base.arithmetic.minimums[l] > contextWindow);
  if (lowered.length > 0) budgetOverride.minimums = Object.fromEntries(lowered.map((l) => [l, contextWindow]));
  $("whatif-note").textContent =
    `total ${fmt(total)} = context window ${fmt(contextWindow)} − output reserve ${fmt(budget.outputReserve)} ` +
    `− system prompt ${fmt(budget.systemPromptTokens)} (budgetOverride, not saved)` +
    (lowered.length ? `; minimums above the window lowered to it: ${lowered.map((l) =>
      `${l} ${fmt(state.base.arithmetic.minimums[l])} → ${fmt(contextWindow)}`).join(", ")}` : "");
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
  const rows = [
    ...LAYERS.map((layer) => [layer, base.layers[layer].tokens, what.layers[layer].tokens]),
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
    for (const id of ["summary", "budget-bar", "budget-legend", "prefix", "warnings", "layers", "system-prompt", "prompt"]) {
      $(id).replaceChildren();
    }
    return;
  }
  renderSummary(result, isWhatIf);
  renderBudgetBar(result);
  renderPrefix(result, isWhatIf);
  renderWarnings(result);
  renderLayers(result);
  renderPrompt(result, isWhatIf);
}

function renderSummary(r, isWhatIf) {
  const req = state.baseRequest;
  const times = Object.entries(r.timingsMs ?? {}).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(", ");
  $("summary").replaceChildren(el("span", {},
    isWhatIf ? el("span", { class: "badge trimmed", text: "what-if, not saved" }) : null,
    isWhatIf ? " " : null,
    el("b", { text: fmt(r.tokenCount) }), ` of `, el("b", { text: fmt(r.budget.total) }), " tokens",
    ` · ${req.documentId} @ ${fmt(req.cursorPosition)} · ${req.skillId}`,
    ` · ${r.tokenizer.encoding}${r.tokenizer.exact ? "" : " (estimate)"}`,
    times ? el("span", { class: "muted", text: ` · ms: ${times}` }) : null,
  ));
}

function renderBudgetBar(r) {
  const b = r.budget;
  const layerSum = LAYERS.reduce((sum, layer) => sum + r.layers[layer].tokens, 0);
  const segments = [
    ["system", b.systemPromptTokens],
    ...LAYERS.map((layer) => [layer, r.layers[layer].tokens]),
    ["joins", r.tokenCount - layerSum],
    ["free", b.total - r.tokenCount],
    ["reserve", b.outputReserve],
  ];
  const window = Math.max(1, b.contextWindow);
  const bar = $("budget-bar");
  bar.replaceChildren(...segments.filter(([, n]) => n > 0).map(([name, n]) => {
    const seg = el("div", { class: `seg seg-${name}`, title: `${SEGMENT_NAMES[name]}: ${fmt(n)} tokens`, dataset: { segment: name, tokens: String(n) } });
    seg.style.flex = `0 0 ${(100 * n) / window}%`;
    return seg;
  }));
  bar.setAttribute("aria-label", segments.map(([name, n]) => `${SEGMENT_NAMES[name]} ${n}`).join(", ") + ` of ${b.contextWindow}`);
  $("budget-legend").replaceChildren(
    ...segments.filter(([name, n]) => n !== 0 || name !== "joins").map(([name, n]) => el("li", { dataset: { segment: name } },
      el("span", { class: `swatch seg-${name}` }),
      `${SEGMENT_NAMES[name]} `, el("b", { text: fmt(n) }))),
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
      : " of this document and skill to compare with";
  let local;
  if (isWhatIf) {
    const same = state.base !== null && state.base.stablePrefixHash === r.stablePrefixHash;
    const d = same || state.base === null ? null : prefixDivergence(state.base.layerTexts, r.layerTexts);
    local = [el("span", { class: `badge ${same ? "same" : "changed"}`, text: same ? "same as saved budget" : "differs from saved budget" }),
      d ? ` · ${divergenceText(d)}` : ""];
  } else if (state.baseCompare === null) {
    local = [el("span", { class: "badge neutral", text: "first inspection" })];
  } else {
    local = [el("span", { class: `badge ${state.baseCompare.changed ? "changed" : "same"}`, text: state.baseCompare.changed ? "changed" : "unchanged" }),
      state.baseCompare.divergence ? ` · ${divergenceText(state.baseCompare.divergence)}` : ""];
  }
  const hashes = LAYERS.map((layer) => `${layer} ${r.prefixHashes[layer].slice(0, 12)}`).join(" · ");
  $("prefix").replaceChildren(
    el("dt", { text: "stable prefix hash" }), el("dd", { class: "hash", id: "prefix-hash", text: r.stablePrefixHash }),
    el("dt", { text: "since last context:assemble" }), el("dd", { id: "prefix-server" }, serverBadge, serverNote),
    el("dt", { text: isWhatIf ? "vs saved budget" : "since previous inspection" }), el("dd", { id: "prefix-local" }, ...local),
    el("dt", { text: "hash up to end of" }), el("dd", { class: "hash muted", text: hashes }),
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

function keyText(c) {
  const value = Number.isInteger(c.key) ? String(c.key) : c.key.toFixed(3).replace(/0+$/, "").replace(/\.$/, "");
  return `${c.keyName} ${value}`;
}

function renderLayers(r) {
  const a = r.arithmetic;
  const sections = LAYERS.map((layer) => {
    const info = r.layers[layer];
    const items = r.candidates.filter((c) => c.layer === layer);
    const head = el("div", { class: "layer-head" },
      el("span", { class: `swatch seg-${layer}` }),
      el("h3", { text: layer[0].toUpperCase() + layer.slice(1) }),
      el("span", { class: "muted", text: `${fmt(info.tokens)} tokens · share ${fmt(a.shares[layer])} · minimum ${fmt(a.minimums[layer])}` +
        (layer === "retrieved" ? ` · ${info.chunks} chunks` : "") }),
      info.truncated ? el("span", { class: "badge trimmed", text: "truncated" }) : null);
    if (items.length === 0) return el("section", { class: "layer", dataset: { layer } }, head, el("p", { class: "none", text: "No candidates." }));
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
    return el("section", { class: "layer", dataset: { layer } }, head, el("div", { class: "table-wrap" }, table));
  });
  $("layers").replaceChildren(...sections);
}

function renderPrompt(r, isWhatIf) {
  $("system-prompt").replaceChildren(
    el("div", { class: "prompt-tag" }, el("span", { text: `system prompt · ${fmt(r.budget.systemPromptTokens)} tokens · sent beside the prompt` })),
    el("pre", { class: "prompt-text", text: r.systemPrompt }));
  const texts = LAYERS.map((layer) => [layer, r.layerTexts[layer]]).filter(([, text]) => text !== "");
  const joined = texts.map(([, text]) => text).join(SEPARATOR);
  const box = $("prompt");
  if (joined !== r.prompt) {
    box.replaceChildren(el("p", { class: "none", text: "The layer texts do not join to the prompt; showing the prompt as sent." }),
      el("pre", { class: "prompt-text", text: r.prompt }));
    return;
  }
  const divergence = isWhatIf
    ? (state.base && state.base.stablePrefixHash !== r.stablePrefixHash ? prefixDivergence(state.base.layerTexts, r.layerTexts) : null)
    : (state.baseCompare?.divergence ?? r.prefixDivergence ?? null);
  const blocks = [];
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
    blocks.push(el("div", { class: `prompt-block layer-${layer}`, dataset: { layer } },
      el("div", { class: "prompt-tag" },
        el("span", { text: `${layer} · ${fmt(r.layers[layer].tokens)} tokens · bytes ${fmt(start)}–${fmt(offset)}` }),
        el("span", { class: "hash", text: `hash to here ${r.prefixHashes[layer].slice(0, 16)}…` })),
      pre));
    if (layer === "settings" || (layer === "rules" && !texts.some(([l]) => l === "settings"))) {
      blocks.push(el("p", { class: "boundary", text: `▲ end of the stable prefix (${fmt(offset)} bytes, hash ${r.stablePrefixHash.slice(0, 16)}…)` }));
    }
  }
  box.replaceChildren(...blocks);
}

// --- budget profile ----------------------------------------------------------

const budgetRows = $("budget-rows");
budgetRows.replaceChildren(...LAYERS.map((layer) => el("tr", {},
  el("th", { scope: "row" }, el("span", { class: `swatch seg-${layer}` }), ` ${layer}`),
  el("td", {}, el("input", { id: `b-ratio-${layer}`, type: "number", min: "0", max: "1", step: "0.01", disabled: true, "aria-label": `${layer} ratio` })),
  el("td", {}, el("input", { id: `b-min-${layer}`, type: "number", min: "0", step: "1", disabled: true, "aria-label": `${layer} minimum` }))))
);

function budgetInputs() {
  return [$("b-contextWindow"), $("b-outputReserve"), ...LAYERS.flatMap((l) => [$(`b-ratio-${l}`), $(`b-min-${l}`)])];
}

function fillBudgetForm(profile) {
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
  for (const layer of LAYERS) {
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
    ratios: Object.fromEntries(LAYERS.map((l) => [l, Number($(`b-ratio-${l}`).value)])),
    minimums: Object.fromEntries(LAYERS.map((l) => [l, int(`b-min-${l}`)])),
  };
}

/**
 * The fields the user changed relative to `base`, as a context:budget:update
 * patch. Ratios travel together (they must sum to 1), minimums one by one.
 */
function budgetPatch(base, form) {
  const patch = {};
  if (form.contextWindow !== base.contextWindow) patch.contextWindow = form.contextWindow;
  if (form.outputReserve !== base.outputReserve) patch.outputReserve = form.outputReserve;
  if (LAYERS.some((l) => form.ratios[l] !== base.ratios[l])) patch.ratios = { ...form.ratios };
  const minimums = Object.fromEntries(LAYERS.filter((l) => form.minimums[l] !== Math.round(base.minimums[l])).map((l) => [l, form.minimums[l]]));
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
  for (const l of LAYERS) if (p.ratios?.[l] !== undefined) flat[`ratios.${l}`] = p.ratios[l];
  for (const l of LAYERS) if (p.minimums?.[l] !== undefined) flat[`minimums.${l}`] = Math.round(p.minimums[l]);
  return flat;
}

function updateRatioSum() {
  const cell = $("ratio-sum");
  const values = LAYERS.map((l) => $(`b-ratio-${l}`).value);
  if (values.some((v) => v === "")) {
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
