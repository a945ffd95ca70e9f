"""What each corpus is about, kept by vectord in the background, never on a search's path.

A corpus's profile is read from what the lexical index keeps exact already and from a
sample of its items: its documents and the document frequency of each lexeme held by
at least `MIN_SHARE` of them (the lexical index's `_lexdf`, kept by its triggers as items
arrive and leave), the words of a sample that make those lexemes (so a question is
matched against it with no statement: internal.vectord.search.selection), the words of
its name and description, and those embedded by the corpus's model (through embedd's
bulk lane, as documents are). The fan-out's resource
selection reads the profiles of the corpora a search covers from memory
(`Profiles.get`); `upkeep` builds the profiles whose corpus moved since (a write, a
delete, a new description) and loads what any vectord built.

Bounded: a build reads at most `TERMS` lexemes and `SAMPLE` items, and a corpus is built
again at most every `GAP_FACTOR` times its last build's time (at least `MIN_GAP`
seconds), so a bulk load pays a few percent of a core for its profile, whatever its
size; a new description is taken at once.
"""

from __future__ import annotations

import asyncio
import re
import time
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import structlog
from psycopg import sql

from internal.clients.embed import EmbedClient
from internal.common.errors import LakehouseError
from internal.vectord import tables
from internal.vectord.lexical import sql_index

log = structlog.get_logger()

MIN_SHARE = 0.002  # a lexeme is kept when this share of the documents holds it (and 2)
TERMS = 4000  # lexemes kept at most, the most frequent first
SAMPLE = 2000  # items read for the words
MIN_GAP = 1.0  # seconds between two builds of one corpus, at least
GAP_FACTOR = 20.0  # ... and this many times its last build's time
RETRY_GAP = 30.0  # seconds between two tries at embedding a corpus's name and description
# pg_try_advisory_xact_lock(LOCK_CLASS, corpus_id): one builder a corpus across vectords.
LOCK_CLASS = 0x5E1
MAX_WORD = 64  # longer runs of letters are not words a question holds
FINGERPRINT = 4096  # buckets of a profile's fingerprint
WORD = re.compile(r"[\W_]+")  # as the statements' `[^[:alnum:]]+`, after lower()

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Profile:
    """One corpus's profile as built at its lexical `version`."""

    corpus_id: int
    version: int
    about: str  # the name and description it was built with
    documents: int
    sampled: int  # items whose words were read
    terms: dict[str, int]  # lexeme -> documents holding it
    # word -> its lexemes of `terms`, one a language the sample's documents are in
    words: dict[str, list[str]]
    described: dict[str, str]  # each word of the name and the description -> its lexeme
    build_ms: float
    built_at: datetime
    # The name and description embedded by the corpus's model (None: not yet, or embedd
    # serves no such model), and that model.
    about_vector: F32 | None = None
    about_model: str | None = None
    # The shares of its lexemes, hashed into FINGERPRINT buckets and of unit length: two
    # corpora's dot product says how alike their documents are (a set split into parts:
    # 0.99; tldr's Linux and common pages: 0.93).
    fingerprint: F32 = field(init=False, repr=False, compare=False)
    described_lexemes: frozenset[str] = field(init=False, repr=False, compare=False)
    name_words: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "described_lexemes", frozenset(self.described.values()))
        object.__setattr__(self, "name_words", frozenset(
            w for w in WORD.split(self.about.partition("\n")[0].lower()) if w))
        vec = np.zeros(FINGERPRINT, dtype=np.float32)
        for lexeme, df in self.terms.items():
            vec[zlib.crc32(lexeme.encode()) % FINGERPRINT] += df / max(self.documents, 1)
        norm = float(np.linalg.norm(vec))
        object.__setattr__(self, "fingerprint", vec / norm if norm > 0 else vec)

    def lexemes_of(self, word: str) -> list[str]:
        """The word's lexemes in this corpus's documents, name and description."""
        got = self.words.get(word, [])
        named = self.described.get(word)
        return got if named is None or named in got else [*got, named]


def about(name: str, description: str | None) -> str:
    return f"{name}\n{description or ''}"


def about_text(name: str, description: str | None) -> str:
    """What is embedded of a corpus's name and description: "cisco ios: Commands for..."."""
    words = name.replace("_", " ")
    return f"{words}: {description}" if description else words


# Each corpus with its lexical version, its description, and its profile's state.
STATES = """
SELECT c.id, c.name, c.description, c.model, c.dim, coalesce(v.version, 0), p.version,
       p.about, p.about_model, p.built_at, p.build_ms
FROM vectord_corpora c
LEFT JOIN vectord_lex_versions v ON v.corpus_id = c.id
LEFT JOIN vectord_profiles p ON p.corpus_id = c.id"""

TERMS_SQL = """
SELECT lexeme, df FROM {dfs}
WHERE df >= greatest(2, ceil(%(share)s * %(n)s))
ORDER BY df DESC, lexeme LIMIT %(terms)s"""

# The sample: the whole corpus when small, else pages drawn at random (the same pages
# while nothing moves: REPEATABLE), at most `sample` rows.
_SAMPLE = "(SELECT {cols} FROM {items} {tablesample} LIMIT %(sample)s)"

# The sample's words (split as lexical/corpus_words.py splits them) that make a kept
# lexeme, and the items sampled.
WORDS_SQL = """
WITH s AS {sample},
w AS (SELECT DISTINCT s.language, w
      FROM s, regexp_split_to_table(lower(coalesce(s.title, '') || ' ' || s.text),
                                    '[^[:alnum:]]+') w
      WHERE w <> '' AND length(w) <= %(max_word)s)
SELECT w.w, l.lexeme, (SELECT count(*) FROM s)
FROM w, LATERAL (SELECT CASE WHEN count(*) = 1 THEN min(lexeme) END AS lexeme
                 FROM unnest(to_tsvector(w.language, w.w))) l
WHERE l.lexeme = ANY(%(terms)s)"""

# The words of the name and description, each with its lexeme in the corpus's most
# common language (`simple` while it holds nothing); its stop words make none.
DESCRIBED_SQL = """
WITH w AS (SELECT DISTINCT w FROM regexp_split_to_table(lower(%(about)s), '[^[:alnum:]]+') w
           WHERE w <> '' AND length(w) <= %(max_word)s),
l AS (SELECT coalesce((SELECT language FROM {stats} WHERE n > 0 ORDER BY n DESC, language
                       LIMIT 1), 'simple'::regconfig) AS language)
SELECT w.w, x.lexeme
FROM w, l, LATERAL (SELECT lexeme FROM unnest(to_tsvector(l.language, w.w)) LIMIT 1) x"""

UPSERT = """
INSERT INTO vectord_profiles (corpus_id, version, about, documents, sampled, terms, words,
                              described, about_vector, about_model, build_ms, built_at)
VALUES (%(id)s, %(version)s, %(about)s, %(documents)s, %(sampled)s, %(terms)s, %(words)s,
        %(described)s, %(about_vector)s, %(about_model)s, %(build_ms)s, clock_timestamp())
ON CONFLICT (corpus_id) DO UPDATE SET version = EXCLUDED.version, about = EXCLUDED.about,
    documents = EXCLUDED.documents, sampled = EXCLUDED.sampled, terms = EXCLUDED.terms,
    words = EXCLUDED.words, described = EXCLUDED.described,
    about_vector = EXCLUDED.about_vector, about_model = EXCLUDED.about_model,
    build_ms = EXCLUDED.build_ms, built_at = EXCLUDED.built_at"""

LOAD = """
SELECT corpus_id, version, about, documents, sampled, terms, words, described, build_ms,
       built_at, about_vector, about_model
FROM vectord_profiles WHERE corpus_id = ANY(%(ids)s)"""

_json = msgspec.json.Encoder()


def _sample(corpus_id: int, documents: int, cols: str) -> sql.Composed:
    # Pages drawn at 1.5x the share wanted: their rows are about as many, often more.
    share = min(100.0, 150.0 * SAMPLE / max(documents, 1))
    tablesample = (sql.SQL("") if share >= 100.0 else sql.SQL(
        "TABLESAMPLE SYSTEM ({}) REPEATABLE (0)").format(sql.Literal(round(share, 6))))
    return sql.SQL(_SAMPLE).format(cols=sql.SQL(cols), items=tables.items_table(corpus_id),
                                   tablesample=tablesample)


@dataclass(frozen=True)
class State:
    """A corpus's row in STATES: what its profile must reflect, and what it reflects."""

    corpus_id: int
    name: str
    description: str | None
    model: str | None
    dim: int
    version: int
    built_version: int | None
    built_about: str | None
    about_model: str | None
    built_at: datetime | None
    build_ms: float | None

    def stale(self, now: datetime, embeds: bool) -> bool:
        """Built from other contents (not too recently for its size), another
        description (at once), or without its name's vector while embedd may give it
        (every `RETRY_GAP` seconds)."""
        if self.built_version is None or self.built_about != about(self.name, self.description):
            return True
        if self.built_at is None:
            return False
        since = (now - self.built_at).total_seconds()
        if (embeds and self.about_model is None) or (
                self.model is not None and self.about_model not in (None, self.model)):
            return since >= RETRY_GAP
        if self.built_version == self.version:
            return False
        return since >= max(MIN_GAP, GAP_FACTOR * (self.build_ms or 0.0) / 1000)


async def about_vector(embed: EmbedClient | None, s: State) -> tuple[list[float] | None, str | None]:
    """The name and description embedded by the corpus's model (embedd's bulk lane), and
    that model; None when embedd cannot (down, no such model, another dimension)."""
    if embed is None:
        return None, None
    try:
        got = await embed.embed([about_text(s.name, s.description)], "document", s.model)
    except LakehouseError as exc:
        log.info("profile_about_unembedded", corpus=s.name, error=exc.message)
        return None, None
    if got.dim != s.dim or not got.vectors:
        return None, None
    return list(got.vectors[0]), got.model


async def build(conn: Any, s: State, vector: list[float] | None, model: str | None
                ) -> Profile | None:
    """The corpus's profile now, stored (None: another vectord is building it)."""
    started = time.perf_counter()
    corpus_id = s.corpus_id
    async with conn.transaction():
        cur = await conn.execute("SELECT pg_try_advisory_xact_lock(%s, %s)",
                                 (LOCK_CLASS, corpus_id))
        row = await cur.fetchone()
        if not (row and row[0]):
            return None
        # One core: a parallel plan took both of a small machine's from the searches.
        await conn.execute("SET LOCAL max_parallel_workers_per_gather = 0")
        version = await version_of(conn, corpus_id)
        cur = await conn.execute(sql.SQL("SELECT coalesce(sum(n), 0) FROM {}").format(
            sql_index.stats_table(corpus_id)))
        row = await cur.fetchone()
        documents = int(row[0]) if row else 0
        cur = await conn.execute(sql.SQL(TERMS_SQL).format(dfs=sql_index.dfs_table(corpus_id)),
                                 {"share": MIN_SHARE, "n": documents, "terms": TERMS})
        terms = {str(t): int(df) for t, df in await cur.fetchall()}
        cur = await conn.execute(sql.SQL(WORDS_SQL).format(
            sample=_sample(corpus_id, documents, "title, text, language")),
            {"sample": SAMPLE, "max_word": MAX_WORD, "terms": list(terms)})
        rows = await cur.fetchall()
        words: dict[str, list[str]] = {}
        for w, t, _ in rows:
            if str(t) not in (got := words.setdefault(str(w), [])):
                got.append(str(t))
        sampled = int(rows[0][2]) if rows else min(documents, SAMPLE)
        text = about(s.name, s.description)
        cur = await conn.execute(sql.SQL(DESCRIBED_SQL).format(
            stats=sql_index.stats_table(corpus_id)), {"about": text, "max_word": MAX_WORD})
        described = {str(w): str(t) for w, t in await cur.fetchall()}
        ms = round((time.perf_counter() - started) * 1000, 3)
        await conn.execute(UPSERT, {
            "id": corpus_id, "version": version, "about": text, "documents": documents,
            "sampled": sampled, "terms": _json.encode(terms).decode(),
            "words": _json.encode(words).decode(), "described": _json.encode(described).decode(),
            "about_vector": vector, "about_model": model, "build_ms": ms})
    return _profile((corpus_id, version, text, documents, sampled, terms, words, described,
                     ms, datetime.now(UTC), vector, model))


def _unit(values: list[float] | None) -> F32 | None:
    if values is None:
        return None
    vec = np.asarray(values, dtype=np.float32)
    norm = float(np.linalg.norm(vec))
    return vec / norm if norm > 0 else None


def _profile(r: Any) -> Profile:
    """A profile from a LOAD row (or the same values built)."""
    return Profile(int(r[0]), int(r[1]), str(r[2]), int(r[3]), int(r[4]), dict(r[5]),
                   dict(r[6]), dict(r[7]), float(r[8]), r[9], _unit(r[10]),
                   None if r[11] is None else str(r[11]))


async def version_of(conn: Any, corpus_id: int) -> int:
    """The corpus's lexical version now (what a current profile reflects)."""
    cur = await conn.execute("SELECT coalesce((SELECT version FROM vectord_lex_versions "
                             "WHERE corpus_id = %s), 0)", (corpus_id,))
    row = await cur.fetchone()
    return int(row[0]) if row else 0


async def states(conn: Any) -> list[State]:
    cur = await conn.execute(STATES)
    return [State(int(r[0]), str(r[1]), r[2], r[3], int(r[4]), int(r[5]),
                  None if r[6] is None else int(r[6]), r[7], r[8], r[9],
                  None if r[10] is None else float(r[10]))
            for r in await cur.fetchall()]


async def load(conn: Any, ids: list[int]) -> list[Profile]:
    """The stored profiles of these corpora."""
    if not ids:
        return []
    cur = await conn.execute(LOAD, {"ids": ids})
    return [_profile(r) for r in await cur.fetchall()]


class Profiles:
    """This vectord's profiles in memory, by corpus id (what a search reads)."""

    def __init__(self) -> None:
        self._by_id: dict[int, Profile] = {}
        self.builds = 0  # built by this process (tests, the log's readers)
        self.failures = 0

    def get(self, corpus_id: int) -> Profile | None:
        return self._by_id.get(corpus_id)

    async def upkeep(self, pool: Any, embed: EmbedClient | None, build: bool = True) -> None:
        """Build the stale profiles (when `build`), then load what changed; forget the
        corpora deleted."""
        async with pool.connection() as conn:
            rows = await states(conn)
        now = datetime.now(UTC)
        if build:
            for s in rows:
                if s.stale(now, embed is not None):
                    await self._build(pool, embed, s)
                    await asyncio.sleep(0)
        async with pool.connection() as conn:
            rows = await states(conn)
            changed = [s.corpus_id for s in rows if s.built_at is not None and (
                (p := self._by_id.get(s.corpus_id)) is None or p.built_at != s.built_at)]
            for p in await load(conn, changed):
                self._by_id[p.corpus_id] = p
        alive = {s.corpus_id for s in rows}
        for cid in [c for c in self._by_id if c not in alive]:
            del self._by_id[cid]

    async def _build(self, pool: Any, embed: EmbedClient | None, s: State) -> None:
        try:
            vector, model = await about_vector(embed, s)
            async with pool.connection() as conn:
                built = await build(conn, s, vector, model)
        except Exception as exc:  # reported; the search goes on with the profile it had
            self.failures += 1
            log.warning("profile_failed", corpus=s.name, error=str(exc))
            return
        if built is not None:
            self.builds += 1
            log.info("profile_built", corpus=s.name, version=built.version,
                     documents=built.documents, terms=len(built.terms), ms=built.build_ms)
