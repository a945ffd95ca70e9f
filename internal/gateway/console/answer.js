// Lakehouse console: the Answer panel above the hits (POST /v1/matrix/answer, streamed).
// Loaded before app.js; uses its helpers (api's token and LSN handling, el, $, record) when
// called. The answer's text arrives as server-sent events: the citations first, then the
// text a piece at a time, then the whole answer. Every text is shown with textContent.
"use strict";

const answerState = { controller: null, query: "", answer: null };

// The answer's stream: fetch's body read as server-sent events, each event's JSON handed
// to onEvent. A 401 asks for the token and tries again, as api() does.
async function answerStream(body, onEvent, signal) {
  let refused = false;
  for (;;) {
    const headers = { "Content-Type": "application/json", Accept: "text/event-stream" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    const lsn = sessionStorage.getItem(LSN_KEY);
    if (lsn) headers["Lakehouse-LSN"] = lsn;
    const resp = await fetch("/v1/matrix/answer", {
      method: "POST", headers, body: JSON.stringify({ ...body, stream: true }),
      credentials: "omit", cache: "no-store", signal,
    });
    if (resp.status === 401) {
      if (token) { sessionStorage.removeItem(TOKEN_KEY); refused = true; }
      await askToken(refused);
      continue;
    }
    if (!resp.ok) {
      let err = {};
      try { err = (await resp.json()).error || {}; } catch (_) { err = {}; }
      throw new ApiError(resp.status, err.code || `http_${resp.status}`,
                         err.message || resp.statusText, err.field);
    }
    const reader = resp.body.getReader();
    const decoder = new TextDecoder();
    let buffered = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffered += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buffered.indexOf("\n\n")) >= 0) {
        const frame = buffered.slice(0, cut);
        buffered = buffered.slice(cut + 2);
        const data = frame.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n");
        if (!data || data === "[DONE]") continue;
        onEvent(JSON.parse(data));
      }
    }
  }
}

function itemHref(corpus, id) {
  return `#/item/${encodeURIComponent(corpus)}/${encodeURIComponent(id)}`;
}

// The answer's text with each marker [n] a link to the item its citation names.
function answerNodes(text, citations) {
  const byMarker = new Map(citations.map((c) => [String(c.marker), c]));
  return String(text).split(/(\[\d+\])/).filter(Boolean).map((part) => {
    const m = /^\[(\d+)\]$/.exec(part);
    const c = m ? byMarker.get(m[1]) : null;
    if (!c) return part;
    return el("a", { className: "marker", href: itemHref(c.corpus, c.id),
      title: `${c.corpus} · ${c.title || c.id}`, dataset: { marker: m[1] } }, part);
  });
}

function renderCitations(citations, query) {
  $("answer-citations").replaceChildren(...citations.map((c) => {
    const status = el("span", { className: "feedback-status", role: "status" });
    const right = el("button", { type: "button", className: "right" }, "right");
    const wrong = el("button", { type: "button", className: "wrong" }, "wrong");
    const hit = { corpus: c.corpus, id: c.id };
    right.addEventListener("click", () => record(query, hit, RIGHT_SCORE, status, right, wrong));
    wrong.addEventListener("click", () => record(query, hit, WRONG_SCORE, status, right, wrong));
    return el("li", { className: "citation", dataset: { marker: String(c.marker), corpus: c.corpus, id: c.id } },
      el("span", { className: "marker" }, `[${c.marker}]`), " ",
      el("span", { className: "badge corpus" }, c.corpus), " ",
      el("a", { className: "title", href: itemHref(c.corpus, c.id) }, c.title || c.id),
      el("q", { className: "passage" }, c.passage),
      may("feedback") ? el("span", { className: "hit-actions" }, right, wrong, status) : null);
  }));
}

// The hits the answer cites, marked in the hit list (whichever of the two came last).
function markCited() {
  const answer = answerState.answer;
  for (const node of document.querySelectorAll("#hits li.hit .cited")) node.remove();
  if (!answer) return;
  for (const c of answer.citations || []) {
    const li = document.querySelector(`#hits li.hit[data-corpus="${CSS.escape(c.corpus)}"][data-id="${CSS.escape(c.id)}"]`);
    if (li) li.querySelector(".hit-head").append(el("span", { className: "cited", title: "cited by the answer" }, `cited [${c.marker}]`));
  }
}

async function answerFeedback(score) {
  const answer = answerState.answer;
  const status = $("answer-feedback-status");
  if (!answer || !answer.citations.length) return;
  const buttons = [$("answer-right"), $("answer-wrong")];
  for (const b of buttons) b.disabled = true;
  try {
    const out = await api("POST", "/v1/matrix/answer/feedback", {
      query_text: answerState.query, score,
      cited: answer.citations.map((c) => ({ corpus: c.corpus, id: c.id })),
    });
    showStatus(status, `recorded ${out.recorded.length} cited hits as ${score > 0 ? "right" : "wrong"}`);
    status.classList.add("ok");
  } catch (err) {
    showError(status, err);
  } finally {
    for (const b of buttons) b.disabled = false;
  }
}

// Ask for the answer of the search being run; the panel fills as the answer comes.
async function answerQuestion(body) {
  if (answerState.controller) answerState.controller.abort();
  const controller = new AbortController();
  answerState.controller = controller;
  answerState.query = body.query_text;
  answerState.answer = null;
  markCited();
  const panel = $("answer");
  const textNode = $("answer-text");
  const status = $("answer-status");
  panel.hidden = false;
  panel.dataset.state = "running";
  textNode.replaceChildren();
  $("answer-citations").replaceChildren();
  $("answer-actions").hidden = true;
  showStatus($("answer-feedback-status"), "");
  showStatus(status, "answering…");
  let text = "";
  let citations = [];
  try {
    await answerStream(body, (event) => {
      if (event.type === "citations" || event.type === "reset") {
        citations = event.citations;
        text = "";
        renderCitations(citations, body.query_text);
      } else if (event.type === "delta") {
        text += event.text;
      } else if (event.type === "done") {
        const a = event.answer;
        answerState.answer = a;
        text = a.text;
        citations = a.citations;
        renderCitations(citations, body.query_text);
        const g = a.generator;
        const notes = [a.answered ? `${citations.length} sources` : `no answer (${a.reason})`,
          `written by ${g.kind}${g.model ? ` ${g.model}` : ""}`, `${num(a.took_ms, 1)} ms`];
        if (g.fallback) notes.push(`the model failed: ${g.fallback}`);
        showStatus(status, notes.join(" · "));
        $("answer-actions").hidden = !(a.answered && citations.length && may("feedback"));
        panel.dataset.state = a.answered ? "answered" : "refused";
        markCited();
      } else if (event.type === "error") {
        throw new ApiError(500, event.code, event.message);
      }
      textNode.replaceChildren(...answerNodes(text, citations));
    }, controller.signal);
  } catch (err) {
    if (err.name === "AbortError") return;
    panel.dataset.state = "failed";
    showError(status, err);
  }
}

function initAnswer() {
  $("answer-right").addEventListener("click", () => answerFeedback(RIGHT_SCORE));
  $("answer-wrong").addEventListener("click", () => answerFeedback(WRONG_SCORE));
}
