"""What a corpus is about and how a search over several weighs it: a corpus's profile
(GET /v1/vectors/corpora/{name}/profile) and each searched corpus's resource selection
(a matrix search's `corpora[].selection` with `explain`; docs/API.md, "Resource
selection")."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec


class SelectionEvidence(msgspec.Struct, omit_defaults=True):
    """Why a corpus scored for a question: the question's word, its lexeme, where it
    matched (`content`: the corpus's documents; `name`, `description`: the corpus's own;
    `about`: the question's vector nearest its name and description embedded, word and
    lexeme empty), what it added, and for content the share of the corpus's documents
    holding it and the largest share of another searched corpus (for `about`: the
    similarity, and the next corpus's)."""

    word: str
    lexeme: str
    source: Literal["content", "name", "description", "about"]
    value: float
    share: float | None = None
    others: float | None = None


class CorpusSelection(msgspec.Struct):
    """A searched corpus's resource selection for the question: its score, the weight
    its hits were ranked with (1: none; an explicit `corpus_weights` entry wins), why."""

    score: float
    weight: float
    evidence: list[SelectionEvidence] = []


class CorpusStatus(msgspec.Struct, omit_defaults=True):
    """A searched corpus's row of a search over several: its hits, time and status; its
    hits' weight when not 1 (resource selection's, or corpus_weights'); with `explain`, why."""

    corpus: str
    hits: int
    ms: float | None
    status: Literal["ok", "failed"]
    weight: float | None = None
    selection: CorpusSelection | None = None


class ProfileTerm(msgspec.Struct, omit_defaults=True):
    """A lexeme a corpus's documents hold, a word of them that makes it, the documents
    holding it and their share, and the largest share among the other corpora the
    caller may see."""

    lexeme: str
    word: str
    documents: int
    share: float
    others: float | None = None


class CorpusProfile(msgspec.Struct):
    """GET /v1/vectors/corpora/{name}/profile: what the corpus is about, as the fan-out's
    resource selection reads it: its description, the documents the profile was built
    from (`version`: the corpus's lexical version then; `current`: no write since), and
    its most distinctive lexemes against the other corpora the caller may see."""

    corpus: str
    description: str | None
    current: bool
    documents: int = 0
    sampled: int = 0  # items whose words were read
    lexemes: int = 0  # lexemes it keeps (held by at least 0.2% of its documents)
    distinctive: list[ProfileTerm] = []
    version: int | None = None
    built_at: datetime | None = None
    build_ms: float | None = None
