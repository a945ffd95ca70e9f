"""A search mode and a fusion method are one declaration and one function each.

A toy mode is declared in lakehouse.wire.modes and its search registered in vectord
(what docs/ARCHITECTURE.md's "Adding a search mode" says a new mode's two code files
hold); nothing else is touched, and it is validated (a missing need is a 400 naming the
field), searched end to end through matrixd and vectord, merged across corpora by its
declared rule, offered by the CLI's parser, listed by the OpenAPI document, the evaluator
and search_auto's strategies. The same for a toy fusion method.
"""

from __future__ import annotations

import ast
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from internal.api.vectord import Corpus, Hit
from internal.cli.main import build_parser
from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.evaluation import runner
from internal.evaluation.modes import table_modes
from internal.gateway.openapi import build
from internal.matrixd.server import make_app
from internal.understanding.strategy import strategies
from internal.vectord.search import fusion, hits, union_merge
from internal.vectord.search.options import Options
from internal.vectord.search.outcome import Federation, Outcome, each
from internal.vectord.search.registry import SEARCHES, searches
from internal.vectord.storage.store import Store
from lakehouse.wire.modes import FUSIONS, MODES, FusionSpec, ModeSpec
from tests.helpers import serve, url_of, with_section

TOY = ModeSpec("toy_shortest", needs="text", embeds=False, merge="score", fusion=False,
               summary="the items holding the words, shortest first")
TOY_FUSION = FusionSpec("toy_lexical_first", tuned_by=(),
                        summary="the lexical list as it is, then the vector-only candidates")
TEXTS = {"a": ["tea in a pot", "green tea leaves steeped for three minutes", "coffee"],
         "b": ["tea", "a long afternoon of black tea with milk and biscuits", "milk"]}


async def toy_search(store: Store, p: Options, outcomes: list[Outcome],
                     fed: Federation) -> list[Hit]:
    """Each corpus's items holding the text, scored 1 / length: shortest first, merged
    across corpora by score as its entry declares (union_merge.merged_hits)."""
    async def run(corpus: Corpus) -> list[Hit]:
        rows = await store.keyword_search(corpus, p.text.strip(), p.k, p.where, p.params)
        return [hits.hit(corpus, row, score=1.0 / len(row["text"])) for row in rows]

    found = await each(store, outcomes, run)
    ranked = union_merge.merged_hits(((o.position, fed.weight(o), h) for o, h in found),
                                     TOY.merge)
    return ranked[:p.k]


def lexical_first(branches: Mapping[str, Sequence[tuple[Any, float]]], *, k: int = 60,
                  weights: Mapping[str, float] | None = None,
                  symbolic: Mapping[Any, float] | None = None,
                  vector_spaces: Sequence[Sequence[tuple[Any, float]]] | None = None,
                  limit: int | None = None) -> list[fusion.Fused[Any]]:
    """The lexical branch in its order, then the candidates only the vector one found."""
    lex = list(branches.get(fusion.LEXICAL, []))
    vec = [r for space in (vector_spaces or []) for r in space]
    raw = {fusion.VECTOR: dict(vec), fusion.LEXICAL: dict(lex)}
    ranks = {fusion.VECTOR: {c: i for i, (c, _) in enumerate(vec, 1)},
             fusion.LEXICAL: {c: i for i, (c, _) in enumerate(lex, 1)}}
    order = [c for c, _ in lex] + [c for c, _ in vec if c not in raw[fusion.LEXICAL]]
    out = [fusion.Fused(c, float(len(order) - i), raw, ranks, (fusion.VECTOR, fusion.LEXICAL))
           for i, c in enumerate(order)]
    return out if limit is None else out[:limit]


@pytest.fixture
def toy_mode(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(MODES, TOY.name, TOY)  # the declaration (lakehouse/wire/modes.py)
    searches(TOY.name)(toy_search)  # its search (internal/vectord/search/modes/<mode>.py)
    yield
    del SEARCHES[TOY.name]


@pytest.fixture
def toy_fusion(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(FUSIONS, TOY_FUSION.name, TOY_FUSION)  # lakehouse/wire/modes.py
    fusion.method(TOY_FUSION.name)(lexical_first)  # internal/vectord/search/fusion.py
    yield
    del fusion.METHODS[TOY_FUSION.name]


@pytest.fixture(scope="module")
async def matrix(base_cfg: Config, vectord_url: str, embedd_url: str) -> AsyncIterator[str]:
    cfg = with_section(base_cfg, "matrixd", vectord_url=vectord_url, embedd_url=embedd_url,
                       playbook_corpus=f"pb_{uuid.uuid4().hex[:10]}")
    server = await serve(make_app(cfg))
    yield url_of(server)
    await server.close()


@pytest.fixture(scope="module")
async def corpora(vectord_url: str, embedd_url: str) -> AsyncIterator[list[str]]:
    names = []
    async with aiohttp.ClientSession() as s:
        vec, emb = VectordClient(s, vectord_url), EmbedClient(s, embedd_url)
        for prefix, texts in TEXTS.items():
            name = f"toy_{prefix}_{uuid.uuid4().hex[:8]}"
            e = await emb.embed(texts)
            await vec.create_corpus(name, e.dim, model=e.model)
            await vec.upsert(name, [{"id": f"{prefix}{i}", "vector": v, "text": t} for i, (t, v)
                                    in enumerate(zip(texts, e.vectors, strict=True))],
                             model=e.model)
            names.append(name)
        yield names
        for name in names:
            await vec.delete_corpus(name)


async def post(http: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with http.post(url, json=body) as r:
        return r.status, await r.json()


@pytest.mark.usefixtures("toy_mode")
async def test_a_toy_mode_is_validated_searched_merged_and_offered(
        http: aiohttp.ClientSession, matrix: str, vectord_url: str, corpora: list[str]) -> None:
    search = f"{matrix}/v1/matrix/search"
    # Validated from its entry: it needs text (a vector alone is a 400 naming query_text).
    status, out = await post(http, search, {"corpora": corpora, "mode": TOY.name,
                                            "query_vector": [0.1] * 384})
    assert status == 400 and out["error"]["field"] == "query_text", out
    status, out = await post(http, f"{vectord_url}/v1/vectors/search",
                             {"corpora": corpora, "mode": TOY.name})
    assert status == 400 and out["error"]["field"] == "query_text", out
    status, out = await post(http, search, {"corpora": corpora, "mode": "toy_unknown",
                                            "query_text": "tea"})
    assert status == 400 and out["error"]["field"] == "mode", out
    # Searched through matrixd and vectord, the two corpora merged by score (1 / length):
    # shortest first, whichever corpus holds it.
    status, out = await post(http, search, {"corpora": corpora, "mode": TOY.name,
                                            "query_text": "tea", "k": 5})
    assert status == 200, out
    assert out["mode"] == TOY.name and out["requested_mode"] == TOY.name
    texts = [h["text"] for h in out["hits"]]
    holding = [t for ts in TEXTS.values() for t in ts if "tea" in t]
    assert texts == sorted(holding, key=len)
    assert {h["corpus"] for h in out["hits"]} == set(corpora)
    assert [h["merge_score"] for h in out["hits"]] == [1.0 / len(t) for t in texts]
    assert [h["rank"] for h in out["hits"]] == [1, 2, 3, 4]
    assert out["embed_ms"] is None  # its entry says matrixd does not embed for it
    # Offered by the CLI, the OpenAPI document, the evaluator and search_auto.
    assert build_parser().parse_args(["search", "tea", "--mode", TOY.name]).mode == TOY.name
    schema = build(False)["components"]["schemas"]["MatrixSearchRequest"]
    assert TOY.name in schema["properties"]["mode"]["anyOf"][0]["enum"]
    assert table_modes()[TOY.name] == (TOY.name, None)
    assert TOY.name in strategies()


def test_the_cli_offers_the_modes_registered_and_no_other() -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["search", "tea", "--mode", TOY.name])
    for name in MODES:
        assert build_parser().parse_args(["search", "tea", "--mode", name]).mode == name


@pytest.mark.usefixtures("toy_fusion")
async def test_a_toy_fusion_method_is_validated_and_fuses(
        http: aiohttp.ClientSession, matrix: str, corpora: list[str]) -> None:
    search = f"{matrix}/v1/matrix/search"
    body = {"corpora": corpora, "query_text": "tea with milk", "mode": "hybrid", "k": 6,
            "prf": {"docs": 0}}
    status, out = await post(http, search, {**body, "fusion": "toy_unknown"})
    assert status == 400 and out["error"]["field"] == "fusion", out
    status, out = await post(http, search, {**body, "fusion": TOY_FUSION.name})
    assert status == 200, out
    lexical = [h["ranks"]["lexical"] for h in out["hits"]]
    found = [r for r in lexical if r is not None]
    assert found and found == sorted(found)  # the lexical list in its order, merged corpora
    assert lexical[:len(found)] == found  # then the vector-only candidates
    assert len(found) < len(lexical)
    schema = build(False)["components"]["schemas"]["MatrixSearchRequest"]
    assert TOY_FUSION.name in schema["properties"]["fusion"]["anyOf"][0]["enum"]
    assert table_modes()[f"hybrid-{TOY_FUSION.name}"] == ("hybrid", TOY_FUSION.name)
    options = runner.SearchOptions(hybrid={"rrf_k": 5, "weights": {"vector": 1.0}})
    sent = runner.search_body(f"hybrid-{TOY_FUSION.name}", "tea", [0.1], options)
    assert sent["fusion"] == TOY_FUSION.name and "rrf_k" not in sent and "weights" not in sent


def _typed_out(tree: ast.AST, names: set[str], full: set[str]) -> list[int]:
    """Lines of a literal list of names: every mode (or method) typed out, or two or
    more of them compared against (`mode in ("vector", "hybrid")`)."""
    def strings(node: ast.AST) -> list[str] | None:
        if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return None
        values = [e.value for e in node.elts
                  if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return values if len(values) == len(node.elts) else None

    lines = []
    for node in ast.walk(tree):
        values = strings(node)
        if values is not None and len(values) >= 2 and set(values) == full:
            lines.append(node.lineno)
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn))
                                                  for op in node.ops):
            for right in node.comparators:
                values = strings(right)
                if values and len(values) >= 2 and set(values) <= names:
                    lines.append(node.lineno)
    return lines


def test_no_list_of_modes_or_fusions_outside_their_registry() -> None:
    """A list of modes typed out a second time is a bug waiting for the next mode: every
    layer reads lakehouse.wire.modes (STYLE.md 31)."""
    root = Path(__file__).resolve().parents[2]
    registry = root / "clients/python/lakehouse/wire/modes.py"
    found = []
    for path in [*root.joinpath("internal").rglob("*.py"),
                 *root.joinpath("clients/python/lakehouse").rglob("*.py")]:
        if path == registry:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for names in (set(MODES), set(FUSIONS)):
            found += [f"{path.relative_to(root)}:{line}"
                      for line in _typed_out(tree, names, names)]
    assert found == []
