"""Query analysis: entities, time range, question type, complexity, sub-queries.

I/O-free given the spaCy pipeline (internal.understanding.nlp): entities come from its
named-entity recogniser, dates from internal.understanding.temporal (dateparser), and
the question typing and decomposition are rules over its tags and parse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from spacy.language import Language
from spacy.tokens import Doc, Span, Token

from internal.api.responses import AnalyzedEntity, AnalyzeResponse, TemporalRange
from internal.understanding import temporal

EntityType = Literal["person", "location", "organization", "unknown"]
QuestionType = Literal["factual", "temporal", "comparative", "aggregation", "multi-hop",
                       "conceptual"]
Complexity = Literal["low", "medium", "high"]

# OntoNotes labels -> the four entity types; numeric and date labels are not entities.
_LABELS: dict[str, EntityType] = {
    "PERSON": "person", "GPE": "location", "LOC": "location", "FAC": "location",
    "ORG": "organization", "NORP": "unknown", "PRODUCT": "unknown", "EVENT": "unknown",
    "WORK_OF_ART": "unknown", "LAW": "unknown", "LANGUAGE": "unknown",
}
_DATE_LABELS = ("DATE", "TIME")
# Auxiliaries and light verbs carry no topic of their own.
_LIGHT = frozenset("be is are was were been being am has have had having do does did done "
                   "doing get gets got go goes went going make made can could would should "
                   "will shall may might must both also".split())

_TEMPORAL_Q = re.compile(
    r"^\s*(?:when\b|since when\b|how long\b|what (?:year|month|day|date|time|week)\b"
    r"|which (?:year|month|day|date|week)\b|at what (?:time|age)\b|in what year\b)"
    r"|\b(?:what|which) (?:year|month|date|day)\b",
    re.IGNORECASE)
_COMPARATIVE_Q = re.compile(
    r"\b(?:compare[ds]?|comparison|difference between|differ(?:s|ence)?|versus|vs\.?"
    r"|better than|worse than|more than|less than|rather than|prefer|same as|similar to"
    r"|(?:more|less) \w+ (?:than|in)|\w+er than|both)\b",
    re.IGNORECASE)
_AGGREGATION_Q = re.compile(
    r"^\s*(?:how many|how much|how often|list\b|name (?:all|the)\b|count\b)"
    r"|\b(?:in total|altogether|all (?:the|of)|every|number of|how many|how often)\b",
    re.IGNORECASE)
_CONCEPTUAL_Q = re.compile(
    r"^\s*(?:why\b|how (?:does|do|did|can|could|would|should|is|are|to)\b|explain\b|describe\b"
    r"|what (?:is|are) (?:the )?(?:meaning|purpose|concept|idea|role|reason)\b"
    r"|would\b|might\b|could\b|is it likely\b)",
    re.IGNORECASE)
_WH = re.compile(r"^\s*(who|whom|whose|where|when|why|how many|how much|how|what|which)\b",
                 re.IGNORECASE)
_INFO_BY_WH = {
    "who": "person", "whom": "person", "whose": "person", "where": "location", "when": "date",
    "why": "reason", "how many": "number", "how much": "number", "how": "method",
    "what": "fact", "which": "fact",
}


@dataclass(frozen=True)
class Entity:
    name: str
    type: EntityType


@dataclass(frozen=True)
class Analysis:
    query: str
    entities: list[Entity]
    temporal_range: temporal.Range | None
    question_type: QuestionType
    complexity: Complexity
    confidence: float
    required_info_types: list[str]
    sub_queries: list[str]
    # Content words (nouns, proper nouns, verbs, adjectives, numbers) for lexical sub-queries.
    terms: list[str] = field(default_factory=list)
    # Pairs (i, j): sub-query j needs the answer of sub-query i (a dependent chain).
    dependencies: list[tuple[int, int]] = field(default_factory=list)
    # How the question was split: "" (not), "items", "clauses", "relative", "possessive",
    # or "readings" (keyword readings of a question with no structure to split on).
    split: str = ""

    def names(self, kind: EntityType) -> list[str]:
        return [e.name for e in self.entities if e.type == kind]

    def to_wire(self) -> AnalyzeResponse:
        """The analyze route's answer."""
        rng = self.temporal_range
        return AnalyzeResponse(
            query=self.query,
            entities=[AnalyzedEntity(name=e.name, type=e.type) for e in self.entities],
            persons=self.names("person"),
            locations=self.names("location"),
            organizations=self.names("organization"),
            temporal_range=None if rng is None else TemporalRange(
                start=rng.start.isoformat() if rng.start else None,
                end=rng.end.isoformat() if rng.end else None, relative=rng.relative),
            question_type=self.question_type,
            complexity=self.complexity,
            confidence=self.confidence,
            required_info_types=self.required_info_types,
            sub_queries=self.sub_queries,
        )


# ---- entities -----------------------------------------------------------------------------

def entities(doc: Doc) -> list[Entity]:
    """Named entities, first mention order, each name once; possessive 's dropped."""
    out: dict[str, Entity] = {}
    for ent in doc.ents:
        kind = _LABELS.get(ent.label_)
        if kind is None:
            continue
        name = re.sub(r"(?:'s|’s|')$", "", ent.text.strip()).strip()
        if name and name.lower() not in {k.lower() for k in out}:
            out[name] = Entity(name, kind)
    # A capitalised proper noun the recogniser missed, not at the start of the question.
    for tok in doc:
        if (tok.pos_ == "PROPN" and tok.i > 0 and tok.text[:1].isupper() and not tok.ent_type_
                and tok.text.lower() not in {k.lower() for k in out} and len(tok.text) > 1):
            out[tok.text] = Entity(tok.text, "unknown")
    return list(out.values())


def content_terms(doc: Doc) -> list[str]:
    """Content words in order, each once: what a lexical sub-query should match."""
    out: list[str] = []
    seen: set[str] = set()
    for tok in doc:
        if tok.is_punct or tok.ent_type_ in _DATE_LABELS or tok.lower_ in _LIGHT:
            continue
        # spaCy's stop list holds content verbs and nouns too ("move", "name", "part").
        if tok.is_stop and tok.pos_ not in ("NOUN", "PROPN", "VERB"):
            continue
        if tok.pos_ in ("NOUN", "PROPN", "VERB", "ADJ", "NUM", "X") and len(tok.text) > 1:
            word = re.sub(r"(?:'s|’s)$", "", tok.text)
            if word.lower() not in seen:
                seen.add(word.lower())
                out.append(word)
    return out


# ---- question type ------------------------------------------------------------------------

def question_type(text: str, doc: Doc, ents: list[Entity]) -> tuple[QuestionType, float]:
    """Rule-based type and how sure the rules are (an explicit cue beats structure)."""
    if _TEMPORAL_Q.search(text):
        return "temporal", 0.9
    if _COMPARATIVE_Q.search(text) or (_has_alternatives(doc) and _WH.match(text)
                                       and text.lower().lstrip().startswith(("which", "who", "would"))):
        return "comparative", 0.8
    if _AGGREGATION_Q.search(text) or _asks_for_plural(doc):
        return "aggregation", 0.75
    if _is_multi_hop(doc, ents):
        return "multi-hop", 0.7
    if _CONCEPTUAL_Q.search(text):
        return "conceptual", 0.7
    return "factual", 0.6 if _WH.match(text) else 0.5


def _has_alternatives(doc: Doc) -> bool:
    return any(t.lower_ == "or" and t.dep_ == "cc" for t in doc)


def _asks_for_plural(doc: Doc) -> bool:
    """'What activities ...', 'Which books ...': a wh-determiner on a plural noun."""
    toks = [t for t in doc if not t.is_punct]
    if len(toks) < 2 or toks[0].lower_ not in ("what", "which"):
        return False
    nxt = toks[1]
    return nxt.tag_ == "NNS" or (nxt.pos_ == "ADJ" and len(toks) > 2 and toks[2].tag_ == "NNS")


def _is_multi_hop(doc: Doc, ents: list[Entity]) -> bool:
    """Two named things to connect, a chain of possessives, or a relative clause."""
    named = [e for e in ents if e.type != "unknown"]
    if len({e.name for e in named}) >= 2:
        return True
    if sum(1 for t in doc if t.tag_ == "POS") >= 2:
        return True
    if any(t.dep_ in ("relcl", "acl") and t.pos_ == "VERB" for t in doc):
        return True
    verbs = [t for t in doc if t.pos_ == "VERB" and t.dep_ in ("ROOT", "conj")]
    return len(verbs) >= 2 and any(t.lower_ == "and" and t.dep_ == "cc" and t.head.pos_ == "VERB"
                                   for t in doc)


# ---- decomposition ------------------------------------------------------------------------

def _tidy(text: str) -> str:
    return re.sub(r"\s+([?.,!;:]|'s|’s)", r"\1", text).strip()


def _span_text(tokens: list[Token]) -> str:
    return _tidy(" ".join(t.text for t in tokens))


def _coordinated(doc: Doc) -> list[list[Span]]:
    """Groups of coordinated noun chunks or entities ('Caroline and Melanie', 'A or B')."""
    groups: list[list[Span]] = []
    chunks = list(doc.noun_chunks) + [e for e in doc.ents if e.label_ in _LABELS]
    by_root: dict[int, Span] = {}
    for c in chunks:
        by_root.setdefault(c.root.i, c)
    for c in chunks:
        if c.root.dep_ == "conj" or c.root.i not in by_root:
            continue
        conj = [by_root[t.i] for t in c.root.conjuncts if t.i in by_root and t.i > c.root.i]
        if conj:
            groups.append([c, *conj])
    return groups


def decompose(text: str, doc: Doc, qtype: QuestionType, ents: list[Entity],
              terms: list[str]) -> tuple[list[str], list[tuple[int, int]], str]:
    """Sub-queries, their dependencies (i before j) and how it split; [text] when not."""
    out: list[str] = []
    deps: list[tuple[int, int]] = []
    how = ""
    # 1. Coordinated items: one sub-query per item, the rest of the question kept.
    for group in _coordinated(doc):
        start, end = group[0].start, group[-1].end
        before, after = doc[:start].text, doc[end:].text
        for item in group:
            words = f"{before} {item.text} {after}".split()
            out.append(_tidy(" ".join(w for w in words if w.lower() != "both")))
        if out:
            how = "items"
            break
    # 2. Coordinated clauses: "Where did X move from and what did she study?"
    if not out:
        for t in doc:
            if (t.lower_ == "and" and t.dep_ == "cc" and t.head.pos_ in ("VERB", "AUX")
                    and t.i + 1 < len(doc) and doc[t.i + 1].tag_ in ("WDT", "WP", "WRB", "WP$")):
                out = [doc[:t.i].text.rstrip(" ,"), doc[t.i + 1:].text]
                how = "clauses"
                break
    # 3. A relative clause: "the friend of Jon who works at Microsoft" -> find him first.
    if not out:
        for t in doc:
            if t.dep_ == "relcl" and t.head.pos_ in ("NOUN", "PROPN"):
                head = t.head
                inner = _span_text(list(head.subtree))
                rest = _span_text([x for x in doc if x not in set(head.subtree) or x == head])
                out = [inner, rest]
                deps.append((0, 1))
                how = "relative"
                break
    # 4. A possessive chain: "Jon's friend's employer" -> Jon's friend, then the rest.
    if not out:
        pos = [t for t in doc if t.tag_ == "POS"]
        if len(pos) >= 2:
            out = [_span_text(list(doc[:pos[1].i])), text]
            deps.append((0, 1))
            how = "possessive"
    # 5. Multi-hop, aggregation or comparative without structure to split on: an
    #    entity-focused and a topic-focused reading, so the parts are searched apart.
    if not out and qtype in ("multi-hop", "aggregation", "comparative"):
        named = [e.name for e in ents]
        topic = [w for w in terms if w not in named]
        if named and topic:
            out = [" ".join(named + topic), " ".join(topic)]
        elif len(topic) >= 2:
            half = (len(topic) + 1) // 2
            out = [" ".join(topic[:half]), " ".join(topic[half:])]
        how = "readings"
    out = [q.strip() for q in out if q.strip()]
    uniq = list(dict.fromkeys(out))
    if len(uniq) < 2:
        return [text], [], ""
    return uniq, deps if len(uniq) == len(out) else [], how


# ---- the analysis -------------------------------------------------------------------------

def complexity_of(ents: list[Entity], subs: list[str], qtype: QuestionType, doc: Doc
                  ) -> Complexity:
    """Low, medium or high from entities, parts, clauses and length."""
    clauses = sum(1 for t in doc if t.pos_ == "VERB" and t.dep_ in ("ROOT", "conj", "relcl",
                                                                   "advcl", "ccomp", "xcomp"))
    words = sum(1 for t in doc if not t.is_punct)
    score = len(ents) + (len(subs) - 1) * 2 + max(0, clauses - 1) + (words > 15) + (words > 30)
    if qtype in ("multi-hop", "comparative", "aggregation"):
        score += 1
    if score <= 2:
        return "low"
    return "medium" if score <= 4 else "high"


def required_info(text: str, qtype: QuestionType) -> list[str]:
    out: list[str] = []
    m = _WH.match(text)
    if m:
        out.append(_INFO_BY_WH[m.group(1).lower()])
    extra = {"temporal": "date", "comparative": "comparison", "aggregation": "list",
             "multi-hop": "relation", "conceptual": "explanation"}.get(qtype)
    if extra and extra not in out:
        out.append(extra)
    return out or ["fact"]


def analyze(nlp: Language, text: str, now: datetime) -> Analysis:
    """Everything the planner needs to know about one question (blocking: run in a thread)."""
    query = " ".join(text.split())
    doc = nlp(query)
    ents = entities(doc)
    date_spans = [(e.start_char, e.end_char) for e in doc.ents if e.label_ in _DATE_LABELS]
    rng = temporal.query_range(query, now, date_spans)
    qtype, confidence = question_type(query, doc, ents)
    terms = content_terms(doc)
    subs, deps, how = decompose(query, doc, qtype, ents, terms)
    if qtype == "factual" and len(subs) >= 2:
        qtype, confidence = "multi-hop", 0.6
    return Analysis(
        query=query, entities=ents, temporal_range=rng, question_type=qtype,
        complexity=complexity_of(ents, subs, qtype, doc), confidence=confidence,
        required_info_types=required_info(query, qtype), sub_queries=subs, terms=terms,
        dependencies=deps, split=how)
