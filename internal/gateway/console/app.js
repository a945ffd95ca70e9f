// Lakehouse console: plain JavaScript, no build step, no other host.
// Every text from the API is shown with textContent (never innerHTML): a document that
// contains <script> shows as text. Highlight fragments come HTML-escaped with <mark> added
// (the only literal tags): they are split at the marks, unescaped and shown as text nodes
// and <mark> elements, never parsed as HTML.
"use strict";

// Scores sent by "right answer" and "wrong answer" (the playbook takes [-1, 1]).
const WRONG_SCORE = -1;
const RIGHT_SCORE = 1;
const TOKEN_KEY = "lakehouse-token";
const SNIPPET = 400;
const FACETS = ["corpus", "tags", "type"];
const BROWSE_PAGE = 25;
const BROWSE_MAX = 1000;  // keyword search's k ceiling: the newest 1,000 matches are browsable

const $ = (id) => document.getElementById(id);

// el("a", {href: "#/x", className: "c"}, "text", child...): a DOM node; strings become text nodes.
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (key === "dataset") Object.assign(node.dataset, value);
    else node[key] = value;
  }
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function short(text, width) {
  const s = String(text || "").replace(/\s+/g, " ").trim();
  return s.length <= width ? s : s.slice(0, width - 1) + "…";
}

function num(x, digits = 4) {
  return typeof x === "number" && Number.isFinite(x) ? x.toFixed(digits) : "–";
}

// ---- the API, with a bearer token when the gateway asks for one --------------------------

class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field;
  }
  describe() {
    return `${this.code}${this.field ? ` (${this.field})` : ""}: ${this.message}`;
  }
}

let tokenWaiters = null;

function askToken(refused) {
  if (tokenWaiters) return new Promise((resolve) => tokenWaiters.push(resolve));
  tokenWaiters = [];
  const dialog = $("token-dialog");
  $("token-prompt").textContent = refused
    ? "That token was refused. Enter a valid bearer token."
    : "This Lakehouse needs a bearer token.";
  $("token").value = "";
  return new Promise((resolve) => {
    tokenWaiters.push(resolve);
    dialog.showModal();
  });
}

function tokenEntered(token) {
  sessionStorage.setItem(TOKEN_KEY, token);
  $("forget-token").hidden = false;
  const waiters = tokenWaiters || [];
  tokenWaiters = null;
  for (const resolve of waiters) resolve(token);
}

// Read-your-writes within this tab: the highest WAL position a write answered with
// (Lakehouse-LSN) goes with every later request, so a search after a record sees it even
// when a read replica answers.
const LSN_KEY = "lakehouse.lsn";

function lsnValue(text) {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text || "");
  return m ? (BigInt("0x" + m[1]) << 32n) + BigInt("0x" + m[2]) : null;
}

function noteLsn(text) {
  const seen = lsnValue(text);
  const kept = lsnValue(sessionStorage.getItem(LSN_KEY));
  if (seen !== null && (kept === null || seen > kept)) sessionStorage.setItem(LSN_KEY, text);
}

async function api(method, path, body) {
  let refused = false;
  for (;;) {
    const headers = {};
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    const lsn = sessionStorage.getItem(LSN_KEY);
    if (lsn) headers["Lakehouse-LSN"] = lsn;
    const resp = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit", cache: "no-store",
    });
    noteLsn(resp.headers.get("Lakehouse-LSN"));
    if (resp.status === 401) {
      if (token) { sessionStorage.removeItem(TOKEN_KEY); refused = true; }
      await askToken(refused);
      continue;
    }
    let payload = null;
    try { payload = await resp.json(); } catch (_) { payload = null; }
    if (!resp.ok) {
      const err = (payload && payload.error) || {};
      throw new ApiError(resp.status, err.code || `http_${resp.status}`,
                         err.message || resp.statusText, err.field);
    }
    return payload;
  }
}

function showError(node, err) {
  node.textContent = err instanceof ApiError ? err.describe() : `error: ${err.message || err}`;
  node.classList.add("error");
}

function showStatus(node, text) {
  node.textContent = text;
  node.classList.remove("error");
}

// ---- what this Lakehouse serves ----------------------------------------------------------

const state = {
  settings: { playbook_corpus: "playbook_memory" },
  corpora: [],        // names offered in the picker
  smartSearch: false, // POST /v1/matrix/smart_search exists: the "ask" mode
  answers: false,     // POST /v1/matrix/answer exists: the Answer panel
  actions: null,      // the key's actions (GET /v1/keys/self); null: every action
  manageKeys: false,  // the Keys page is offered (an admin key, auth on)
  last: null,         // {key, ranks: Map("corpus\u0000id" -> rank)} of the previous search
  results: null,
  facetFilter: null,  // {tags, type}: the facet values picked (each a filter)
  facetCorpus: null,  // the corpus facet value picked: search only it
  browse: { corpus: "", page: 0, cursors: [""] },  // the browsed corpus; cursors: each page's `after`
  view: null,         // the view shown (route() reads the one before: where "back" leads)
};

function may(action) {
  return state.actions === null || state.actions.includes(action);
}

async function loadSurface() {
  try {
    state.settings = await api("GET", "/console/settings.json");
  } catch (_) { /* defaults */ }
  try {
    const doc = await api("GET", "/openapi.json");
    state.smartSearch = Boolean(doc.paths && doc.paths["/v1/matrix/smart_search"]);
    state.answers = Boolean(doc.paths && doc.paths["/v1/matrix/answer"]);
  } catch (_) {
    state.smartSearch = false;
    state.answers = false;
  }
  $("with-answer-option").hidden = !state.answers;
  try {
    const self = await api("GET", "/v1/keys/self");
    state.actions = self.actions && !self.actions.includes("admin") ? self.actions : null;
    // Keys mean something only with auth on (a caller with a key id) and are an admin's.
    state.manageKeys = Boolean(self.key_id) && state.actions === null;
  } catch (_) {
    state.actions = null;  // an older gateway: show everything, the API still decides
    state.manageKeys = false;
  }
  // What the key may not do is not offered: feedback buttons, the sync page and button.
  $("nav-sync").hidden = !may("read");
  $("sync-now").hidden = !may("write");
  $("nav-keys").hidden = !state.manageKeys;
  if (state.smartSearch && !$("mode").querySelector('option[value="ask"]')) {
    $("mode").append(el("option", { value: "ask" }, "ask (plan + reflect)"));
  }
}

async function loadCorpora() {
  const list = $("corpus-list");
  try {
    const out = await api("GET", "/v1/matrix/corpora");
    const names = (out.corpora || []).map((c) => c.name);
    state.corpora = names;
    list.replaceChildren(...names.map((name) => el("label", { className: "corpus-option" },
      el("input", {
        type: "checkbox", value: name, name: "corpus",
        checked: name !== state.settings.playbook_corpus,
      }),
      " ", el("span", { className: "badge" }, name))));
    updateCorpusSummary();
  } catch (err) {
    list.replaceChildren(el("p", { className: "error" },
      err instanceof ApiError ? err.describe() : String(err)));
  }
}

function pickedCorpora() {
  return [...document.querySelectorAll('#corpus-list input[name="corpus"]:checked')].map((i) => i.value);
}

function updateCorpusSummary() {
  const picked = pickedCorpora();
  const all = state.corpora.filter((c) => c !== state.settings.playbook_corpus);
  $("corpus-summary").textContent =
    picked.length === all.length && all.every((c) => picked.includes(c)) ? `all (${picked.length})`
      : picked.length === 0 ? "none picked" : picked.join(", ");
}

// ---- the learned ranker: the model searches with feedback use, and its figures ----------------

function rankerLine(model) {
  const cv = `cross-validated nDCG@10 on the records: boost alone ${num(model.ndcg10_boost)}, ` +
    `learned ranker ${num(model.ndcg10_ranker)}`;
  const what = model.used ? `model ${model.id}, ${model.trees} trees` : `model ${model.id} not used (the boost alone): ${model.reason}`;
  return `learned ranker: ${what} · ${cv} · ${model.records} records, ` +
    `${model.queries} questions · ${(model.corpora || []).join(", ")}`;
}

async function loadRanker() {
  const node = $("ranker-status");
  if (!may("read") && !may("search")) { node.hidden = true; return; }
  try {
    const out = await api("GET",
      `/v1/matrix/ranker?playbook_corpus=${encodeURIComponent(state.settings.playbook_corpus)}`);
    const current = (out.models || []).filter((m) => m.current);
    const lines = current.map(rankerLine);
    if (!lines.length) lines.push("learned ranker: no model yet (searches with feedback use the boost alone)");
    for (const t of out.training || []) lines.push(`learned ranker: training since ${String(t.started_at).slice(0, 19)}`);
    node.replaceChildren(...lines.map((line, i) => (i ? [el("br"), line] : [line])).flat());
    node.dataset.models = String(current.length);
  } catch (err) {
    node.textContent = err instanceof ApiError ? `learned ranker: ${err.describe()}` : "";
  }
}

// ---- search ------------------------------------------------------------------------------

const MODE_HELP = {
  hybrid: "meaning and words together: best for most questions",
  vector: "meaning only: paraphrases",
  lexical: "ranked words (BM25): rare terms",
  keyword: "exact substrings: names, ids, error codes",
  ask: "plans sub-queries, checks coverage, searches again for what is missing",
};

function hitKey(hit) { return `${hit.corpus}\u0000${hit.id}`; }

async function search(event) {
  if (event) event.preventDefault();
  const query = $("q").value.trim();
  const status = $("search-status");
  if (!query) { showStatus(status, "type a question first"); return; }
  const mode = $("mode").value;
  const k = Number.parseInt($("k").value, 10) || 10;
  const corpora = pickedCorpora();
  if (corpora.length === 0) { showError(status, new Error("pick at least one corpus")); return; }
  const usePlaybook = $("use-playbook").checked;
  const body = { query_text: query, corpora, k };
  let path = "/v1/matrix/search";
  if (mode === "ask") {
    path = "/v1/matrix/smart_search";  // plans and reflects; it picks the modes itself
  } else {
    body.mode = mode;
    body.use_playbook = usePlaybook;
    body.highlight = true;
    body.facets = FACETS;
    if ($("one-per-page").checked) body.group_by = "parent";
    const filter = facetFilter();
    if (filter) body.filter = filter;
    if (state.facetCorpus) body.corpora = [state.facetCorpus];
  }
  if (state.answers && $("with-answer").checked) {
    // The answer asks the same search (its corpora, filter, mode, feedback) and comes on
    // its own, above the hits.
    const asked = { query_text: query, corpora: body.corpora, k, use_playbook: usePlaybook };
    if (mode !== "ask") asked.mode = mode;
    if (body.filter) asked.filter = body.filter;
    answerQuestion(asked);
  } else {
    $("answer").hidden = true;
  }
  showStatus(status, "searching…");
  $("search-btn").disabled = true;
  try {
    const out = await api("POST", path, body);
    const key = JSON.stringify([query, mode, corpora, k]);
    const previous = state.last && state.last.key === key ? state.last.ranks : null;
    renderHits(out, query, previous);
    markCited();
    state.last = { key, ranks: new Map((out.hits || []).map((h, i) => [hitKey(h), h.rank || i + 1])) };
    const notes = [`${(out.hits || []).length} hits`, `mode ${out.mode || mode}`, `${num(out.took_ms, 1)} ms`];
    const weighed = (out.corpora || []).filter((c) => typeof c.weight === "number");
    if (weighed.length) {
      notes.push(`weighed for the question: ${weighed.map((c) => `${c.corpus} ×${num(c.weight, 2)}`).join(", ")}`);
    }
    if (out.playbook_boosted) notes.push(`${out.playbook_boosted} boosted by feedback`);
    if (out.ranker) {
      notes.push(out.ranker.applied ? `ordered by the learned ranker (model ${out.ranker.id})`
        : `the boost alone: ${out.ranker.reason}`);
    }
    if (out.degraded && out.degraded.length) notes.push(`degraded: ${out.degraded.join(", ")}`);
    showStatus(status, notes.join(" · "));
    renderAsk(mode === "ask" ? out : null);
    if (usePlaybook) loadRanker();  // a model trained since (by itself) shows
    renderFacets(out.facets);
    document.body.dataset.searches = String(Number(document.body.dataset.searches || 0) + 1);
  } catch (err) {
    showError(status, err);
  } finally {
    $("search-btn").disabled = false;
  }
}

function scoreChips(hit) {
  const chips = [];
  const scores = hit.scores || {};
  for (const layer of ["vector", "lexical", "symbolic"]) {
    if (scores[layer] !== null && scores[layer] !== undefined) {
      chips.push(el("span", { className: `score layer-${layer}` }, `${layer} ${num(scores[layer])}`));
    }
  }
  if (typeof hit.distance === "number") chips.push(el("span", { className: "score" }, `distance ${num(hit.distance)}`));
  if (typeof hit.merge_score === "number") chips.push(el("span", { className: "score" }, `merged ${num(hit.merge_score)}`));
  if (typeof hit.ranker_score === "number") chips.push(el("span", { className: "score ranker" }, `ranker ${num(hit.ranker_score)}`));
  return chips;
}

function renderHits(out, query, previous) {
  const hits = out.hits || [];
  const list = $("hits");
  if (hits.length === 0) {
    list.replaceChildren(el("li", { className: "empty" }, "No hits."));
    return;
  }
  list.replaceChildren(...hits.map((hit, i) => {
    const rank = hit.rank || i + 1;
    const badges = [];
    const factor = hit.boost_factor;
    if (typeof factor === "number" && factor < 1) {
      badges.push(el("span", { className: "boosted", title: "ranked higher by recorded feedback" },
        `boosted ×${num(1 / factor, 2)}`));
    } else if (typeof factor === "number" && factor > 1) {
      badges.push(el("span", { className: "demoted", title: "ranked lower by recorded feedback" },
        `demoted ×${num(1 / factor, 2)}`));
    }
    const before = previous ? previous.get(hitKey(hit)) : undefined;
    if (before !== undefined && before !== rank) {
      badges.push(el("span", { className: before > rank ? "moved up" : "moved down" },
        before > rank ? `↑ from #${before}` : `↓ from #${before}`));
    } else if (previous && before === undefined) {
      badges.push(el("span", { className: "moved new" }, "new"));
    }
    const layers = (hit.matched_layers || []).map((l) => el("span", { className: `layer layer-${l}` }, l));
    const feedback = el("span", { className: "feedback-status", role: "status" });
    const right = el("button", { type: "button", className: "right" }, "right answer");
    const wrong = el("button", { type: "button", className: "wrong" }, "wrong answer");
    right.addEventListener("click", () => record(query, hit, RIGHT_SCORE, feedback, right, wrong));
    wrong.addEventListener("click", () => record(query, hit, WRONG_SCORE, feedback, right, wrong));
    const itemHref = `#/item/${encodeURIComponent(hit.corpus)}/${encodeURIComponent(hit.id)}`;
    // A key that may not read items is not offered a link that would answer `forbidden`.
    const title = may("read") ? el("a", { className: "title", href: itemHref }, hit.title || hit.id)
      : el("span", { className: "title" }, hit.title || hit.id);
    const doc = hit.document_id && hit.document_id !== hit.id
      ? el("span", { className: "muted document", title: "the document this is a part of" }, `of ${hit.document_id}`) : null;
    return el("li", { className: "hit", dataset: { corpus: hit.corpus, id: hit.id, rank: String(rank) } },
      el("div", { className: "hit-head" },
        el("span", { className: "rank" }, `#${rank}`),
        el("span", { className: "badge corpus" }, hit.corpus),
        title,
        el("code", { className: "id" }, hit.id),
        doc,
        ...badges),
      el("p", { className: "snippet" }, ...snippetOf(hit)),
      groupNote(hit),
      el("div", { className: "hit-scores" }, ...scoreChips(hit),
        layers.length ? el("span", { className: "layers" }, "matched: ", ...layers) : null),
      may("feedback") ? el("div", { className: "hit-actions" }, right, wrong, feedback) : null);
  }));
}

// ---- highlights, groups, facets -------------------------------------------------------------

const ENTITIES = { "&lt;": "<", "&gt;": ">", "&amp;": "&", "&quot;": "\"", "&#x27;": "'" };

function unescapeText(text) {
  return text.replace(/&(lt|gt|amp|quot|#x27);/g, (m) => ENTITIES[m]);
}

// A fragment as nodes: text between the marks as text nodes, the marked words in <mark>.
function fragmentNodes(fragment) {
  const nodes = [];
  let marked = false;
  for (const part of String(fragment).split(/(<mark>|<\/mark>)/)) {
    if (part === "<mark>") marked = true;
    else if (part === "</mark>") marked = false;
    else if (part) nodes.push(marked ? el("mark", {}, unescapeText(part)) : unescapeText(part));
  }
  return nodes;
}

function snippetOf(hit) {
  const frags = hit.highlight && hit.highlight.text;
  const kind = hit.highlight_kind && hit.highlight_kind.text;
  if (!Array.isArray(frags) || frags.length === 0 || kind !== "lexical") {
    return [short(hit.text, SNIPPET)];
  }
  return frags.flatMap((f, i) => (i ? [" … ", ...fragmentNodes(f)] : fragmentNodes(f)));
}

function groupNote(hit) {
  const g = hit.group;
  if (!g || typeof g.count !== "number" || g.count < 2) return null;
  return el("p", { className: "group muted" }, `${g.count} matching parts of ${g.key}`);
}

function facetFilter() {
  const f = state.facetFilter || {};
  const out = {};
  if (f.tags) out.tags_any = [f.tags];
  if (f.type) out.type = f.type;
  return Object.keys(out).length ? out : null;
}

function facetPicked(field, value) {
  if (field === "corpus") {
    state.facetCorpus = state.facetCorpus === value ? null : value;
  } else {
    state.facetFilter = state.facetFilter || {};
    state.facetFilter[field] = state.facetFilter[field] === value ? null : value;
  }
  search();
}

function renderFacets(facets) {
  const panel = $("facets");
  if (!facets) { panel.replaceChildren(); panel.hidden = true; return; }
  const active = { ...(state.facetFilter || {}), corpus: state.facetCorpus };
  const groups = Object.entries(facets).filter(([, counts]) => Object.keys(counts).length);
  panel.hidden = groups.length === 0;
  panel.replaceChildren(...groups.map(([field, counts]) => el("div", { className: "facet", dataset: { field } },
    el("h4", {}, field),
    ...Object.entries(counts).map(([value, n]) => {
      const b = el("button", { type: "button", className: active[field] === value ? "facet-value on" : "facet-value",
        dataset: { value } }, `${value} (${n})`);
      b.addEventListener("click", () => facetPicked(field, value));
      return b;
    }))));
}

async function record(query, hit, score, statusNode, ...buttons) {
  for (const b of buttons) b.disabled = true;
  try {
    // A chunk of a document (a page, a document added as text) records the document: the
    // judgement holds for each of its chunks, as the console shows one hit per page.
    await api("POST", "/v1/matrix/playbooks/record",
      { query_text: query, answer_id: hit.document_id || hit.id, answer_corpus: hit.corpus, score });
    showStatus(statusNode, score === RIGHT_SCORE
      ? "recorded as right · search with “use feedback” to see it boosted"
      : "recorded as wrong · search with “use feedback” to see it demoted");
    statusNode.classList.add("ok");
  } catch (err) {
    showError(statusNode, err);
  } finally {
    for (const b of buttons) b.disabled = false;
  }
}

function renderAsk(out) {
  const box = $("ask-details");
  if (!out) { box.hidden = true; return; }
  box.hidden = false;
  $("plan").textContent = JSON.stringify(out.plan ?? null, null, 2);
  $("iterations").replaceChildren(...(out.iterations || []).map((it) =>
    el("li", {}, el("pre", {}, JSON.stringify(it, null, 2)))));
}

// ---- corpora, item, sync -----------------------------------------------------------------

async function showCorpora() {
  const status = $("corpora-status");
  showStatus(status, "loading…");
  try {
    const out = await api("GET", "/v1/vectors/corpora");
    // Browsing lists ids (read or write); a key without them sees the names alone.
    const browses = may("read") || may("write");
    const rows = (out.corpora || []).map((c) => el("tr", { dataset: { corpus: c.name } },
      el("td", {}, browses ? el("a", { className: "badge", href: `#/browse/${encodeURIComponent(c.name)}` }, c.name)
        : el("span", { className: "badge" }, c.name)),
      el("td", { className: "num" }, c.documents ?? "–"),
      el("td", { className: "num" }, c.count ?? "–"),
      el("td", { className: "num" }, c.dim ?? "–"),
      el("td", {}, c.model || "–"),
      el("td", {}, languagesOf(c)),
      el("td", {}, c.created_at ? new Date(c.created_at).toLocaleString() : "–"),
      el("td", { className: "about" }, ...aboutCell(c))));
    $("corpora-table").tBodies[0].replaceChildren(...rows);
    showStatus(status, `${rows.length} corpora`);
  } catch (err) {
    showError(status, err);
  }
}

// The languages a corpus's items are stored in, most first ("english 2030, simple 2");
// its setting while it holds none ("auto").
function languagesOf(c) {
  const held = Object.entries(c.languages || {}).sort((a, b) => b[1] - a[1]);
  return held.length ? held.map(([lang, n]) => `${lang} ${n}`).join(", ") : (c.language || "–");
}

// A corpus's description (what a search over several corpora weighs it by), and a form
// to change it: PATCH /v1/vectors/corpora/{name}.
function aboutCell(c) {
  const text = el("span", { className: "description" }, c.description || "–");
  const input = el("input", { type: "text", value: c.description || "", hidden: true,
    placeholder: "what it is about", ariaLabel: `description of ${c.name}` });
  const button = el("button", { type: "button", className: "describe" }, "edit");
  button.addEventListener("click", async () => {
    if (input.hidden) { input.hidden = false; text.hidden = true; button.textContent = "save"; input.focus(); return; }
    button.disabled = true;
    try {
      const out = await api("PATCH", `/v1/vectors/corpora/${encodeURIComponent(c.name)}`,
        { description: input.value.trim() || null });
      text.textContent = out.description || "–";
      input.hidden = true; text.hidden = false; button.textContent = "edit";
    } catch (err) {
      showError($("corpora-status"), err);
    } finally {
      button.disabled = false;
    }
  });
  return [text, input, button];
}

// The item page's way back: to the list it was opened from (a corpus's items), else to
// the search results.
function setBack(fromBrowse) {
  const back = $("item-back");
  const corpus = state.browse.corpus;
  back.href = fromBrowse ? `#/browse/${encodeURIComponent(corpus)}` : "#/";
  back.textContent = fromBrowse ? `← back to the items of ${corpus}` : "← back to the results";
}

async function showItem(corpus, id) {
  const status = $("item-status");
  showStatus(status, "loading…");
  for (const node of ["item-title", "item-corpus", "item-id", "item-text"]) $(node).textContent = "";
  $("item-fields").replaceChildren();
  try {
    const item = await api("GET",
      `/v1/vectors/corpora/${encodeURIComponent(corpus)}/items/${encodeURIComponent(id)}`);
    $("item-title").textContent = item.title || item.id;
    $("item-corpus").textContent = item.corpus || corpus;
    $("item-id").textContent = item.id;
    const fields = [["language", item.language], ["tags", (item.tags || []).join(", ")],
      ["updated", item.updated_at], ["metadata", JSON.stringify(item.metadata || {}, null, 1)]];
    $("item-fields").replaceChildren(...fields.flatMap(([k, v]) =>
      [el("dt", {}, k), el("dd", {}, v === undefined || v === null || v === "" ? "–" : String(v))]));
    $("item-text").textContent = item.text || "";
    showStatus(status, "");
  } catch (err) {
    if (err instanceof ApiError && err.status === 404 && err.field === "id" && await showDocument(corpus, id)) return;
    showError(status, err);
  }
}

// An id that is no item but a document's (a synced page, a document added as text): the
// document, its text and links to its chunks. False when there is no such document.
async function showDocument(corpus, id) {
  let doc;
  try {
    doc = await api("GET", `/v1/corpora/${encodeURIComponent(corpus)}/documents/${encodeURIComponent(id)}`);
  } catch (_) {
    return false;
  }
  $("item-title").textContent = doc.title || doc.id;
  $("item-corpus").textContent = doc.corpus || corpus;
  $("item-id").textContent = doc.id;
  const chunks = el("dd", {}, ...(doc.chunks || []).flatMap((c, i) => [i ? " " : "",
    el("a", { href: `#/item/${encodeURIComponent(corpus)}/${encodeURIComponent(c)}` }, c)]));
  $("item-fields").replaceChildren(el("dt", {}, "document of"), chunks,
    el("dt", {}, "language"), el("dd", {}, doc.language || "–"),
    el("dt", {}, "updated"), el("dd", {}, doc.updated_at || "–"));
  $("item-text").textContent = doc.text || "";
  showStatus($("item-status"), `a document of ${(doc.chunks || []).length} chunks`);
  return true;
}

// A corpus's items a page at a time: by id (keyset pages of GET .../ids), or, with a text,
// the items containing it (keyword search: a substring of title or text), newest first.
async function showBrowse(corpus, page) {
  const status = $("browse-status");
  const b = state.browse.corpus === corpus ? state.browse : { corpus, page: 0, cursors: [""] };
  b.page = page;
  state.browse = b;
  $("browse-corpus").textContent = corpus;
  showStatus(status, "loading…");
  const text = $("browse-filter").value.trim();
  const link = (id, title) => el("a", { href: `#/item/${encodeURIComponent(corpus)}/${encodeURIComponent(id)}` }, title || id);
  try {
    let rows;
    let more;
    if (text) {
      const k = Math.min(BROWSE_MAX, (page + 1) * BROWSE_PAGE + 1);
      const out = await api("POST", "/v1/vectors/search", { mode: "keyword", k, corpora: [corpus], query_text: text });
      const hits = out.hits || [];
      rows = hits.slice(page * BROWSE_PAGE, (page + 1) * BROWSE_PAGE).map((h) => el("li", { dataset: { id: h.id } },
        link(h.id, h.title), " ", el("code", {}, h.id), el("p", { className: "snippet" }, short(h.text, 200))));
      more = hits.length > (page + 1) * BROWSE_PAGE;
    } else {
      const after = b.cursors[page] || "";
      const out = await api("GET", `/v1/vectors/corpora/${encodeURIComponent(corpus)}/ids?limit=${BROWSE_PAGE}&after=${encodeURIComponent(after)}`);
      rows = (out.items || []).map((r) => el("li", { dataset: { id: r.id } },
        link(r.id, r.title), ...(r.title ? [" ", el("code", {}, r.id)] : [])));
      more = Boolean(out.next_after);
      if (more) b.cursors[page + 1] = out.next_after;
    }
    $("browse-list").replaceChildren(...rows);
    $("browse-prev").disabled = page === 0;
    $("browse-next").disabled = !more;
    const first = rows.length ? page * BROWSE_PAGE + 1 : 0;
    showStatus(status, `items ${first}–${page * BROWSE_PAGE + rows.length}${text ? ` containing “${text}”` : ""}`);
  } catch (err) {
    showError(status, err);
  }
}

async function showSync() {
  const status = $("sync-status");
  const button = $("sync-now");
  showStatus(status, "loading…");
  $("sync-fields").replaceChildren();
  $("sync-errors").replaceChildren();
  try {
    const out = await api("GET", "/v1/sync/status");
    const last = out.last_run || {};
    const fields = [["wiki folder", out.wiki_dir], ["corpus", out.corpus], ["every", `${out.interval} s`],
      ["running", out.running ? "yes" : "no"], ["runs", out.runs], ["last run", out.last_finished_at],
      ["last counts", out.last_run ? ["added", "updated", "deleted", "unchanged"].map((k) => `${k} ${last[k] ?? 0}`).join(", ") : "–"],
      ["last errors", out.last_run ? String((last.errors || []).length) : "–"], ["next run", out.next_run_at]];
    $("sync-fields").replaceChildren(...fields.flatMap(([k, v]) =>
      [el("dt", {}, k), el("dd", {}, v === undefined || v === null ? "–" : String(v))]));
    // Each error of the last run with its message ("." is the whole run).
    const errors = out.last_run ? last.errors || [] : [];
    // Then what the run did that its settings may not have meant (a language map's folder
    // that matches no page): warnings, the run itself succeeded.
    const warnings = out.last_run ? last.warnings || [] : [];
    $("sync-errors").replaceChildren(
      ...errors.map((e) => el("li", { className: "error" },
        e.path === "." ? "" : el("code", {}, e.path), e.path === "." ? "" : " ", e.error)),
      ...warnings.map((w) => el("li", { className: "warning" }, `warning: ${w}`)));
    button.disabled = false;
    if (out.running) showStatus(status, "a sync is running");
    else if (errors.some((e) => e.path === ".")) showError(status, new Error("the last run failed"));
    else showStatus(status, errors.length ? "idle · the last run left pages out" : "idle");
  } catch (err) {
    // Not configured, or syncd stopped on its configuration (the stand-in's 503
    // `config_error` names the setting, the value and why): nothing to run until fixed.
    button.disabled = err instanceof ApiError && ["sync_not_configured", "config_error"].includes(err.code);
    if (button.disabled && err.code === "sync_not_configured") {
      showStatus(status, "Sync is not configured: set [sync] wiki_dir in lakehouse.toml.");
    } else {
      showError(status, err);
    }
  }
}

async function syncNow() {
  const button = $("sync-now");
  button.disabled = true;
  $("sync-result").textContent = "syncing…";
  try {
    const out = await api("POST", "/v1/sync/run");
    $("sync-result").textContent = ["added", "updated", "deleted", "unchanged"]
      .map((k) => `${k} ${out[k] ?? 0}`).join(", ") +
      `; ${(out.errors || []).length} errors; ${num(out.seconds, 2)} s` +
      ((out.warnings || []).length ? `; ${out.warnings.join("; ")}` : "");
  } catch (err) {
    $("sync-result").textContent = err instanceof ApiError ? err.describe() : String(err);
  } finally {
    button.disabled = false;
    showSync();
  }
}

// ---- navigation --------------------------------------------------------------------------

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/");
  const view = parts[0] || "search";
  const previous = state.view;
  state.view = view;
  for (const name of ["search", "corpora", "item", "sync", "browse", "keys"]) {
    $(`view-${name}`).hidden = name !== view;
  }
  for (const a of document.querySelectorAll("header nav a")) {
    a.classList.toggle("active", a.id === `nav-${view}`);
  }
  if (view !== "keys") hideSecret();
  if (view === "corpora") showCorpora();
  else if (view === "keys") showKeys();
  else if (view === "sync") showSync();
  else if (view === "browse" && parts.length >= 2) {
    const corpus = decodeURIComponent(parts[1]);
    if (previous === "item" && state.browse.corpus === corpus) {
      showBrowse(corpus, state.browse.page);  // back from an item: the same page and filter
    } else {
      $("browse-filter").value = "";
      state.browse = { corpus: "", page: 0, cursors: [""] };
      showBrowse(corpus, 0);
    }
  }
  else if (view === "item" && parts.length >= 3) {
    const corpus = decodeURIComponent(parts[1]);
    if (previous !== "item") setBack(previous === "browse");  // item to item: the same way back
    showItem(corpus, decodeURIComponent(parts.slice(2).join("/")));
  }
}

function modeChanged() {
  $("mode-help").textContent = MODE_HELP[$("mode").value] || "";
}

async function start() {
  $("token-form").addEventListener("submit", () => tokenEntered($("token").value.trim()));
  $("token-dialog").addEventListener("cancel", (e) => e.preventDefault());
  $("forget-token").hidden = !sessionStorage.getItem(TOKEN_KEY);
  $("forget-token").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $("forget-token").hidden = true;
  });
  $("search-form").addEventListener("submit", search);
  $("mode").addEventListener("change", modeChanged);
  $("corpus-list").addEventListener("change", updateCorpusSummary);
  $("corpora-all").addEventListener("click", () => {
    for (const i of document.querySelectorAll('#corpus-list input[name="corpus"]')) i.checked = true;
    updateCorpusSummary();
  });
  $("corpora-none").addEventListener("click", () => {
    for (const i of document.querySelectorAll('#corpus-list input[name="corpus"]')) i.checked = false;
    updateCorpusSummary();
  });
  $("sync-now").addEventListener("click", syncNow);
  initKeys();
  initAnswer();
  $("browse-form").addEventListener("submit", (e) => { e.preventDefault(); showBrowse(state.browse.corpus, 0); });
  $("browse-prev").addEventListener("click", () => showBrowse(state.browse.corpus, state.browse.page - 1));
  $("browse-next").addEventListener("click", () => showBrowse(state.browse.corpus, state.browse.page + 1));
  window.addEventListener("hashchange", route);
  modeChanged();
  await loadSurface();  // what the key may do, before a view offers anything
  route();
  await loadCorpora();
  await loadRanker();
  document.body.dataset.ready = "true";
}

start();
