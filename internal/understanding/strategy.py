"""search_auto's choice of strategy and its measured cost model (I/O-free).

The choice: a query that is one quoted string or a lone identifier is a `keyword`
search; a few words that are not a question go `lexical`; multi-hop, temporal,
aggregation and comparative questions go `smart`; the rest `hybrid` (LoCoMo: keyword
search inside a question and vector for conceptual questions both lost recall to
hybrid). `vector` remains a fallback under a budget. The cost of each strategy is the median of its recent requests'
times; before a strategy has any, its prior is scaled by how the measured strategies
compare with theirs. A strategy expected to exceed the budget gives way to the best
cheaper one that fits.
"""

from __future__ import annotations

import re
import statistics
from collections import deque
from dataclasses import dataclass

from lakehouse.wire.modes import MODES

# A strategy is a search mode (lakehouse.wire.modes) or SMART: a planned search.
Strategy = str
SMART = "smart"


def strategies() -> tuple[Strategy, ...]:
    """Every strategy: the modes registered, then smart search."""
    return (*MODES, SMART)


# Starting points only (ms on a 2-core box, from bench/suite/smart.py); replaced by
# measurements as requests come in. A mode without one starts at DEFAULT_PRIOR.
PRIORS: dict[Strategy, float] = {"keyword": 6.0, "lexical": 10.0, "vector": 15.0,
                                 "hybrid": 25.0, "smart": 90.0}
DEFAULT_PRIOR = 25.0
# What each strategy gives way to when over budget, best first (none listed: none).
FALLBACK: dict[Strategy, tuple[Strategy, ...]] = {
    "smart": ("hybrid", "lexical", "keyword"),
    "hybrid": ("lexical", "vector", "keyword"),
    "vector": ("lexical", "keyword"),
    "lexical": ("keyword",),
    "keyword": (),
}
SMART_TYPES = ("multi-hop", "temporal", "aggregation", "comparative")
WINDOW = 64

_QUOTED = re.compile(r"\"([^\"]{2,})\"|“([^”]{2,})”|'([^']{2,})'(?!\w)")
_IDENT = re.compile(
    r"^(?:[A-Za-z_][\w]*_[\w]+|[a-z]+[A-Z]\w*|[A-Z][a-z]+[A-Z]\w*|[A-Z0-9_]{3,}"
    r"|[\w-]+(?:\.[\w-]+)+|/?[\w.-]+(?:/[\w.-]+)+|[A-Za-z]+\d[\w-]*|0x[0-9a-fA-F]+"
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")
_QUESTION = re.compile(r"\?\s*$|^\s*(?:who|what|when|where|why|how|which|whose|whom|is|are|"
                       r"do|does|did|can|could|would|should|will)\b", re.IGNORECASE)


class CostModel:
    """Per-strategy times of recent requests (ms), and estimates from them."""

    def __init__(self, window: int = WINDOW) -> None:
        self.window = window
        self.samples: dict[Strategy, deque[float]] = {
            s: deque(maxlen=window) for s in strategies()}

    def observe(self, strategy: Strategy, ms: float) -> None:
        if ms >= 0:
            self.samples.setdefault(strategy, deque(maxlen=self.window)).append(ms)

    def estimate(self, strategy: Strategy) -> tuple[float, str]:
        """(ms, source): 'measured' from its own requests, else 'scaled_prior' or 'prior'."""
        own = self.samples.get(strategy)
        if own:
            return statistics.median(own), "measured"
        prior = PRIORS.get(strategy, DEFAULT_PRIOR)
        ratios = [statistics.median(v) / PRIORS.get(s, DEFAULT_PRIOR)
                  for s, v in self.samples.items() if v]
        if ratios:
            return prior * statistics.median(ratios), "scaled_prior"
        return prior, "prior"


def quoted(text: str) -> str | None:
    """The first quoted string in the query, if any."""
    m = _QUOTED.search(text)
    return next((g for g in m.groups() if g), None) if m else None


def is_identifier(text: str) -> bool:
    """One token that looks like code: snake_case, camelCase, a path, a dotted name, an id."""
    words = text.split()
    return len(words) == 1 and _IDENT.match(words[0].strip("`")) is not None


@dataclass(frozen=True)
class Choice:
    strategy: Strategy
    wanted: Strategy  # what the query called for, before the budget
    reason: str
    estimated_ms: float
    estimate_source: str


def wants(text: str, question_type: str | None, has_entities: bool) -> tuple[Strategy, str]:
    """The strategy the query calls for, and why (question_type None: not analysed)."""
    q = quoted(text)
    if q is not None and q.strip() == text.strip().strip("\"“”'").strip():
        return "keyword", f"quoted string {q!r}: exact match"
    if is_identifier(text):
        return "keyword", "an identifier: exact match"
    words = len(text.split())
    if words <= 3 and not _QUESTION.search(text):
        return "lexical", f"{words} word(s), not a question: term match"
    if question_type in SMART_TYPES:
        return SMART, f"{question_type} question: planned sub-queries and reflection"
    return "hybrid", f"{question_type or 'plain'} query: vector and lexical fused"


def needs_analysis(text: str) -> bool:
    """False when the surface alone decides (quotes, identifiers, a few words)."""
    return not (wants(text, None, False)[0] == "keyword"
                or (len(text.split()) <= 3 and not _QUESTION.search(text)))


def choose(text: str, question_type: str | None, has_entities: bool, costs: CostModel,
           budget_ms: float | None) -> Choice:
    """The strategy to run: the one wanted, or the best that fits the budget."""
    wanted, reason = wants(text, question_type, has_entities)
    est, src = costs.estimate(wanted)
    if budget_ms is None or budget_ms <= 0 or est <= budget_ms:
        return Choice(wanted, wanted, reason, round(est, 2), src)
    for alt in FALLBACK.get(wanted, ()):
        alt_est, alt_src = costs.estimate(alt)
        if alt_est <= budget_ms:
            return Choice(alt, wanted, f"{reason}; expected {est:.0f} ms > budget "
                          f"{budget_ms:g} ms, so {alt} (expected {alt_est:.0f} ms)",
                          round(alt_est, 2), alt_src)
    options = [wanted, *FALLBACK.get(wanted, ())]
    cheapest = min(options, key=lambda s: costs.estimate(s)[0])
    c_est, c_src = costs.estimate(cheapest)
    return Choice(cheapest, wanted, f"{reason}; nothing fits the budget {budget_ms:g} ms, "
                  f"so the cheapest: {cheapest} (expected {c_est:.0f} ms)", round(c_est, 2), c_src)
