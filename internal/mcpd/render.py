"""Short text renderings of tool results, for models that read text (I/O-free).

The structured result (the route's JSON) is the full answer; this is its summary:
rank, corpus, id, title and a snippet per hit, a line per corpus, the run's counts.
"""

from __future__ import annotations

import html
import json
from typing import Any

SNIPPET = 240


def _short(text: Any, width: int = SNIPPET) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _num(x: Any) -> str:
    return f"{x:.4f}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "-"


def _snippet(h: dict[str, Any]) -> str:
    """The hit's highlighted passages as plain text (marks as **bold**), else its text."""
    hl = h.get("highlight")
    frags = hl.get("text") if isinstance(hl, dict) else None
    if isinstance(frags, list) and frags:
        # Fragments are HTML-escaped with <mark> added: the only literal tags are the marks.
        text = " … ".join(str(f) for f in frags).replace("<mark>", "**").replace("</mark>", "**")
        return _short(html.unescape(text))
    return _short(h.get("text"))


def hits(out: dict[str, Any]) -> str:
    """One line per hit (rank, corpus, id, title, snippet), then the search's notes."""
    lines: list[str] = []
    for i, h in enumerate(out.get("hits") or []):
        if not isinstance(h, dict):
            continue
        title = _short(h.get("title"), 100)
        head = f"{h.get('rank', i + 1)}. [{h.get('corpus')}] {h.get('id')}"
        if title:
            head += f" — {title}"
        boost = h.get("boost_factor")
        if isinstance(boost, (int, float)) and boost != 1.0:
            head += f" (feedback boost ×{1 / boost:.2f})" if boost > 0 else ""
        layers = h.get("matched_layers")
        if isinstance(layers, list) and layers:
            head += f" [matched: {', '.join(str(x) for x in layers)}]"
        lines.append(head)
        snippet = _snippet(h)
        if snippet:
            lines.append(f"   {snippet}")
        group = h.get("group")
        if isinstance(group, dict) and isinstance(group.get("count"), int) and group["count"] > 1:
            lines.append(f"   ({group['count']} hits in {group.get('key')})")
    if not lines:
        lines.append("no hits")
    notes = []
    for key in ("strategy", "mode"):
        if out.get(key):
            notes.append(f"{key} {out[key]}")
    if out.get("reason"):
        notes.append(f"because {out['reason']}")
    if out.get("degraded"):
        notes.append(f"degraded: {', '.join(map(str, out['degraded']))}")
    if out.get("did_you_mean"):
        notes.append(f"did you mean: {out['did_you_mean']}")
    failed = out.get("failed_corpora")
    if failed:
        notes.append("failed corpora: " + ", ".join(str(f.get("corpus")) for f in failed
                                                     if isinstance(f, dict)))
    skipped = out.get("skipped_corpora")
    if skipped:
        notes.append("searched without vectors: " + ", ".join(
            str(s.get("corpus")) for s in skipped if isinstance(s, dict)))
    weighed = [f"{c.get('corpus')} ×{c['weight']:.2f}" for c in out.get("corpora") or []
               if isinstance(c, dict) and isinstance(c.get("weight"), (int, float))]
    if weighed:
        notes.append("corpora weighed for the question: " + ", ".join(weighed))
    if out.get("playbook_boosted"):
        notes.append(f"{out['playbook_boosted']} boosted by feedback")
    facets = out.get("facets")
    if isinstance(facets, dict):
        for name, counts in facets.items():
            if isinstance(counts, dict):
                notes.append(f"{name}: " + ", ".join(f"{v} {n}" for v, n in counts.items()))
    if out.get("took_ms") is not None:
        notes.append(f"{out['took_ms']} ms")
    if notes:
        lines.append("(" + "; ".join(notes) + ")")
    return "\n".join(lines)


def smart(out: dict[str, Any]) -> str:
    """The hits, then the plan's sub-queries and what each iteration did."""
    lines = [hits(out)]
    plan = out.get("plan")
    if isinstance(plan, dict):
        subs = plan.get("sub_queries") or []
        for s in subs:
            q = s.get("query", s.get("query_text", s)) if isinstance(s, dict) else s
            lines.append(f"plan: {_short(q, 160)}")
    iterations = out.get("iterations")
    if isinstance(iterations, list):
        lines.append(f"{len(iterations)} iteration(s)")
        for n, it in enumerate(iterations, 1):
            if isinstance(it, dict):
                why = it.get("stopped") or it.get("stop_reason") or it.get("reason") or ""
                missing = it.get("missing") or []
                lines.append(f"  {n}: missing {json.dumps(missing, ensure_ascii=False)[:160]}"
                             + (f"; {_short(why, 120)}" if why else ""))
    return "\n".join(lines)


def corpora(out: dict[str, Any]) -> str:
    rows = out.get("corpora") or []
    if not rows:
        return "no corpora yet"
    return "\n".join(
        f"{c.get('name')}: {c.get('count')} items, language {c.get('language')}, "
        f"dim {c.get('dim')}, model {c.get('model') or '-'}"
        + (f" — {_short(c['description'], 200)}" if c.get("description") else "")
        for c in rows if isinstance(c, dict))


def item(out: dict[str, Any]) -> str:
    head = f"[{out.get('corpus')}] {out.get('id')}"
    if out.get("title"):
        head += f" — {out['title']}"
    meta = out.get("metadata")
    lines = [head]
    if out.get("tags"):
        lines.append("tags: " + ", ".join(map(str, out["tags"])))
    if meta:
        lines.append("metadata: " + json.dumps(meta, ensure_ascii=False)[:400])
    lines.append("")
    lines.append(str(out.get("text") or ""))
    return "\n".join(lines)


def feedback(out: dict[str, Any]) -> str:
    return (f"recorded (playbook {out.get('playbook_corpus')}, id {out.get('playbook_id')}); "
            "searches with use_playbook now take it into account")


def sync_run(out: dict[str, Any]) -> str:
    counts = ", ".join(f"{k} {out.get(k, 0)}" for k in ("added", "updated", "deleted", "unchanged"))
    errors = out.get("errors") or []
    tail = f"; {len(errors)} error(s): " + "; ".join(
        f"{e.get('path')}: {_short(e.get('error'), 80)}" for e in errors[:5] if isinstance(e, dict)
    ) if errors else ""
    return f"sync done in {_num(out.get('seconds'))} s: {counts}{tail}"


def sync_status(out: dict[str, Any]) -> str:
    last = out.get("last_run")
    lines = [f"wiki {out.get('wiki_dir')} -> corpus {out.get('corpus')}, every "
             f"{out.get('interval')} s; running: {bool(out.get('running'))}; runs: {out.get('runs')}"]
    if isinstance(last, dict):
        lines.append(f"last run ({out.get('last_finished_at')}): " + sync_run(last))
    if out.get("next_run_at"):
        lines.append(f"next run at {out['next_run_at']}")
    return "\n".join(lines)


def analysis(out: dict[str, Any]) -> str:
    lines = [f"question type {out.get('question_type')}, complexity {out.get('complexity')}, "
             f"confidence {_num(out.get('confidence'))}"]
    ents = out.get("entities") or []
    if ents:
        lines.append("entities: " + ", ".join(
            f"{e.get('name')} ({e.get('type')})" for e in ents if isinstance(e, dict)))
    if out.get("temporal_range"):
        lines.append("dates: " + json.dumps(out["temporal_range"], ensure_ascii=False))
    for s in out.get("sub_queries") or []:
        lines.append(f"sub-query: {s}")
    return "\n".join(lines)


def observations(out: dict[str, Any]) -> str:
    lines = []
    for o in out.get("observations") or []:
        if isinstance(o, dict):
            kw = ", ".join(map(str, o.get("keywords") or []))
            lines.append(f"- {o.get('text')}" + (f"  [keywords: {kw}]" if kw else ""))
    return "\n".join(lines) or "no observations"


def answer(out: dict[str, Any]) -> str:
    """The answer with its sources, or the refusal with the nearest hits."""
    if not out.get("answered"):
        nearest = hits(out)
        return f"No answer: {out.get('text')} ({out.get('reason')})\nNearest hits:\n{nearest}"
    lines = [str(out.get("text") or ""), "", "Sources:"]
    for c in out.get("citations") or []:
        if isinstance(c, dict):
            title = f" — {_short(c.get('title'), 80)}" if c.get("title") else ""
            lines.append(f"[{c.get('marker')}] [{c.get('corpus')}] {c.get('id')}{title}: "
                         f"{_short(c.get('passage'))}")
    g = out.get("generator")
    if isinstance(g, dict):
        note = f"written by {g.get('kind')}" + (f" {g['model']}" if g.get("model") else "")
        if g.get("fallback"):
            note += f"; the model failed ({_short(g['fallback'], 120)}): extractive instead"
        lines.append(f"({note}; {out.get('took_ms')} ms)")
    return "\n".join(lines)


RENDER = {
    "answer": answer,
    "search": hits, "search_auto": hits, "smart_search": smart, "list_corpora": corpora,
    "get_item": item, "record_feedback": feedback, "sync_now": sync_run,
    "sync_status": sync_status, "analyze_query": analysis, "normalize_observations": observations,
}


def render(tool: str, out: Any) -> str:
    """The text rendering of a tool's structured result."""
    fn = RENDER.get(tool)
    if fn is None or not isinstance(out, dict):
        return json.dumps(out, ensure_ascii=False)[:4000]
    return fn(out)
