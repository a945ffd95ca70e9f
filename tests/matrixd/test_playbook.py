"""The learning loop through real matrixd, vectord and embedd, in-process:
recall of recorded answers, wrong marks, the downgrade gate, playbook housekeeping."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from internal.config import Config
from internal.matrixd import boost
from internal.matrixd.server import make_app
from tests.helpers import serve, url_of, with_section

PETS = [
    "Cats are small domesticated felines that people keep as pets.",
    "Dogs are loyal companions and were domesticated from wolves.",
    "Parrots can imitate human speech and live for decades.",
    "Goldfish are a common choice for a first pet aquarium.",
    "Hamsters are small rodents that run on wheels at night.",
    "The Moon orbits the Earth roughly every twenty-seven days.",
    "Jupiter is the largest planet in the Solar System.",
    "Volcanoes erupt when magma rises through the crust.",
]
Q = "which pet can learn to talk"


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
async def matrix(base_cfg: Config, vectord_url: str, embedd_url: str) -> AsyncIterator[str]:
    cfg = with_section(base_cfg, "matrixd", vectord_url=vectord_url, embedd_url=embedd_url,
                       playbook_corpus=unique("pb"))
    server = await serve(make_app(cfg))
    yield url_of(server)
    await server.close()


async def make_corpus(vectord_url: str, embedd_url: str, texts: list[str]) -> str:
    name = unique("pets")
    async with aiohttp.ClientSession() as s:
        vec, emb = VectordClient(s, vectord_url), EmbedClient(s, embedd_url)
        e = await emb.embed(texts)
        await vec.create_corpus(name, e.dim, model=e.model)
        await vec.upsert(name, [{"id": f"p{i}", "vector": v, "text": t}
                                for i, (t, v) in enumerate(zip(texts, e.vectors, strict=True))],
                         model=e.model)
    return name


@pytest.fixture
async def pets(vectord_url: str, embedd_url: str) -> AsyncIterator[str]:
    name = await make_corpus(vectord_url, embedd_url, PETS)
    yield name
    async with aiohttp.ClientSession() as s:
        await VectordClient(s, vectord_url).delete_corpus(name)


async def post(http: aiohttp.ClientSession, url: str, body: Any) -> tuple[int, Any]:
    async with http.post(url, json=body) as r:
        return r.status, await r.json()


async def search(http: aiohttp.ClientSession, matrix: str, body: dict[str, Any]) -> Any:
    status, out = await post(http, f"{matrix}/v1/matrix/search", body)
    assert status == 200, out
    return out


async def record(http: aiohttp.ClientSession, matrix: str, corpus: str, answer_id: str,
                 score: float, pb: str, query: str = Q) -> str:
    status, out = await post(http, f"{matrix}/v1/matrix/playbooks/record",
                             {"query_text": query, "answer_id": answer_id, "answer_corpus": corpus,
                              "score": score, "playbook_corpus": pb})
    assert status == 200, out
    return str(out["playbook_id"])


def order(out: Any) -> list[str]:
    return [h["id"] for h in out["hits"]]


# ---- negative feedback --------------------------------------------------------------------

async def test_wrong_mark_moves_a_hit_down_by_exactly_1_5(http: aiohttp.ClientSession, matrix: str,
                                                          pets: str) -> None:
    pb = unique("pb")
    q = {"query_text": Q, "mode": "vector", "corpora": [pets], "k": 8, "playbook_corpus": pb}
    base = await search(http, matrix, q)
    top = base["hits"][0]
    await record(http, matrix, pets, top["id"], -1.0, pb)
    out = await search(http, matrix, {**q, "use_playbook": True})
    hit = next(h for h in out["hits"] if h["id"] == top["id"])
    assert hit["distance"] == top["distance"] * 1.5
    assert hit["original_distance"] == top["distance"]
    assert hit["boost_factor"] == 1.5
    assert out["playbook_boosted"] == 0 and out["playbook"]["demoted"] == 1
    assert order(out).index(top["id"]) > 0
    assert [h["distance"] for h in out["hits"]] == sorted(h["distance"] for h in out["hits"])
    others = [h for h in out["hits"] if h["id"] != top["id"]]
    assert all(h["boost_factor"] == 1.0 for h in others)


async def test_wrong_then_delete_restores_the_order(http: aiohttp.ClientSession, matrix: str,
                                                    pets: str) -> None:
    # Lexical: the factor applies to the merged list, exactly. (Hybrid applies it inside the
    # fusion, to the answer's distance and BM25: test_hybrid_boost_inside_the_fusion.)
    pb = unique("pb")
    q = {"query_text": Q, "mode": "lexical", "corpora": [pets], "k": 8, "playbook_corpus": pb,
         "use_playbook": True}
    base = await search(http, matrix, q)
    hits = base["hits"]
    # the first hit whose follower beats it once its score is divided by 1.5
    i = next(i for i in range(len(hits) - 1)
             if hits[i + 1]["merge_score"] > hits[i]["merge_score"] / 1.5)
    target = hits[i]
    pid = await record(http, matrix, pets, target["id"], -1.0, pb)
    dropped = await search(http, matrix, q)
    hit = next(h for h in dropped["hits"] if h["id"] == target["id"])
    assert hit["merge_score"] == target["merge_score"] / 1.5
    assert order(dropped).index(target["id"]) > i
    async with http.delete(f"{matrix}/v1/matrix/playbooks/{pid}",
                           params={"playbook_corpus": pb}) as r:
        assert r.status == 200, await r.text()
    restored = await search(http, matrix, q)
    assert order(restored) == order(base)


async def test_hybrid_boost_inside_the_fusion(http: aiohttp.ClientSession, matrix: str,
                                             pets: str) -> None:
    """Hybrid: a right answer is fused with its distance halved and BM25 doubled, so even the
    last hit comes first; a wrong one sinks; the hits say their factor."""
    pb = unique("pb")
    q = {"query_text": Q, "mode": "hybrid", "corpora": [pets], "k": 8, "playbook_corpus": pb,
         "use_playbook": True}
    base = await search(http, matrix, q)
    last, first = base["hits"][-1], base["hits"][0]
    await record(http, matrix, pets, last["id"], 1.0, pb)
    await record(http, matrix, pets, first["id"], -1.0, pb)
    out = await search(http, matrix, q)
    ids = order(out)
    assert ids.index(last["id"]) < len(ids) - 1 and ids.index(first["id"]) > 0
    up = next(h for h in out["hits"] if h["id"] == last["id"])
    down = next(h for h in out["hits"] if h["id"] == first["id"])
    assert up["boost_factor"] == 0.5 and down["boost_factor"] == 1.5
    assert up["distance"] == pytest.approx(last["distance"])  # the true distance is shown
    assert out["playbook_boosted"] == 1


# ---- recall of recorded answers (needs vectord's `include`) -------------------------------

async def test_recorded_answer_outside_the_candidates_is_found(
        http: aiohttp.ClientSession, matrix: str, pets: str) -> None:
    pb = unique("pb")
    q = {"query_text": Q, "mode": "vector", "corpora": [pets], "playbook_corpus": pb}
    full = await search(http, matrix, {**q, "k": 8})
    third = full["hits"][2]["distance"]
    # the first hit beyond the top 3 whose halved distance beats the third
    target = next(h for h in full["hits"][3:] if h["distance"] * 0.5 < third)
    before = await search(http, matrix, {**q, "k": 3, "use_playbook": True})
    assert target["id"] not in order(before)
    await record(http, matrix, pets, target["id"], 1.0, pb)
    out = await search(http, matrix, {**q, "k": 3, "use_playbook": True})
    assert out["degraded"] == []
    assert target["id"] in order(out)
    hit = next(h for h in out["hits"] if h["id"] == target["id"])
    assert hit["from_playbook"] is True
    assert hit["original_distance"] == pytest.approx(target["distance"], abs=1e-6)
    assert hit["distance"] == hit["original_distance"] * 0.5
    assert out["playbook"]["recalled"] == 1 and out["playbook"]["missing"] == 0
    assert all(h["from_playbook"] is False for h in out["hits"] if h["id"] != target["id"])


async def test_deleted_recorded_answer_is_skipped(http: aiohttp.ClientSession, matrix: str,
                                                  pets: str, vectord_url: str) -> None:
    pb = unique("pb")
    await record(http, matrix, pets, "p4", 1.0, pb)
    async with aiohttp.ClientSession() as s:
        assert await VectordClient(s, vectord_url).delete_items(pets, ["p4"]) == 1
    for mode in ("vector", "hybrid"):
        out = await search(http, matrix, {"query_text": Q, "mode": mode, "corpora": [pets], "k": 3,
                                          "use_playbook": True, "playbook_corpus": pb})
        assert "p4" not in order(out)
        assert out["degraded"] == []
        assert out["playbook"]["entries"] == 1
        assert out["playbook"]["missing"] == 1 and out["playbook"]["recalled"] == 0


# ---- the downgrade gate ---------------------------------------------------------------------

async def test_weak_hits_go_below_the_rest(http: aiohttp.ClientSession, matrix: str,
                                           pets: str) -> None:
    q = {"query_text": Q, "mode": "vector", "corpora": [pets], "k": 8}
    base = await search(http, matrix, q)
    cut = (base["hits"][1]["distance"] + base["hits"][2]["distance"]) / 2
    out = await search(http, matrix, {**q, "downgrade": {"max_distance": cut}})
    assert order(out) == order(base)  # distance order already puts weak hits last
    assert [h["downgraded"] for h in out["hits"]][:2] == [[], []]
    assert all(h["downgraded"] == ["weak"] for h in out["hits"][2:])
    assert out["downgrade"]["downgraded"] == 6
    # hybrid: the hit's fused score below min_score is weak; the others keep their order
    hq = {**q, "mode": "hybrid"}
    hbase = await search(http, matrix, hq)
    scores = sorted({h["score"] for h in hbase["hits"]})
    floor = scores[len(scores) // 2]
    hout = await search(http, matrix, {**hq, "downgrade": {"min_score": floor}})
    weak = [h["id"] for h in hbase["hits"] if h["score"] < floor]
    assert order(hout) == [i for i in order(hbase) if i not in weak] + weak
    assert {h["id"] for h in hout["hits"] if h["downgraded"]} == set(weak)


async def test_disputed_answer_goes_last_even_when_near(http: aiohttp.ClientSession, matrix: str,
                                                        pets: str) -> None:
    pb = unique("pb")
    q = {"query_text": Q, "mode": "vector", "corpora": [pets], "k": 8, "playbook_corpus": pb}
    base = await search(http, matrix, q)
    top = base["hits"][0]["id"]
    await record(http, matrix, pets, top, -0.2, pb)
    # the gate alone (no use_playbook): only the disputed hit moves, to the very end
    out = await search(http, matrix, {**q, "downgrade": {"disputed": True}})
    assert order(out) == [*order(base)[1:], top]
    assert out["hits"][-1]["downgraded"] == ["disputed"]
    assert all(h["downgraded"] == [] for h in out["hits"][:-1])
    assert out["downgrade"]["downgraded"] == 1
    assert all(h["boost_factor"] == 1.0 for h in out["hits"])


async def test_stale_hits_go_below_fresh_ones(http: aiohttp.ClientSession, matrix: str,
                                              vectord_url: str, embedd_url: str) -> None:
    name = await make_corpus(vectord_url, embedd_url, PETS[:4])
    try:
        await asyncio.sleep(6.0)
        async with aiohttp.ClientSession() as s:
            e = await EmbedClient(s, embedd_url).embed([PETS[4]])
            await VectordClient(s, vectord_url).upsert(
                name, [{"id": "fresh", "vector": e.vectors[0], "text": PETS[4]}])
        q = {"query_text": Q, "mode": "vector", "corpora": [name], "k": 5}
        base = await search(http, matrix, q)
        out = await search(http, matrix, {**q, "downgrade": {"max_age_days": 3 / 86400}})
    finally:
        async with aiohttp.ClientSession() as s:
            await VectordClient(s, vectord_url).delete_corpus(name)
    assert order(out) == ["fresh"] + [i for i in order(base) if i != "fresh"]
    assert out["hits"][0]["downgraded"] == []
    assert all(h["downgraded"] == ["stale"] for h in out["hits"][1:])


@pytest.mark.parametrize(("downgrade", "field"), [
    ({"weak": 0.5}, "downgrade.weak"),
    ({"max_distance": -0.1}, "downgrade.max_distance"),
    ({"min_score": -1}, "downgrade.min_score"),
    ({"max_age_days": -3}, "downgrade.max_age_days"),
    ({"max_age_days": "7"}, "downgrade.max_age_days"),
    ({"disputed": "yes"}, "downgrade.disputed"),
])
async def test_bad_downgrade_names_the_key(http: aiohttp.ClientSession, matrix: str, pets: str,
                                           downgrade: dict[str, Any], field: str) -> None:
    status, out = await post(http, f"{matrix}/v1/matrix/search",
                             {"query_text": Q, "corpora": [pets], "downgrade": downgrade})
    assert status == 400, out
    assert out["error"]["field"] == field


# ---- record: bad input, unknown answers ------------------------------------------------------

@pytest.mark.parametrize(("score", "field"), [(1.5, "score"), (-1.5, "score"), ("high", "score"),
                                              (None, "score")])
async def test_bad_scores(http: aiohttp.ClientSession, matrix: str, pets: str, score: Any,
                          field: str) -> None:
    status, out = await post(http, f"{matrix}/v1/matrix/playbooks/record",
                             {"query_text": Q, "answer_id": "p0", "answer_corpus": pets,
                              "score": score})
    assert status == 400, out
    assert out["error"]["field"] == field


async def test_nan_score_names_score(http: aiohttp.ClientSession, matrix: str, pets: str) -> None:
    raw = f'{{"query_text": "q", "answer_id": "p0", "answer_corpus": "{pets}", "score": NaN}}'
    async with http.post(f"{matrix}/v1/matrix/playbooks/record", data=raw,
                         headers={"Content-Type": "application/json"}) as r:
        assert r.status == 400
        assert (await r.json())["error"]["field"] == "score"


async def test_empty_query_text(http: aiohttp.ClientSession, matrix: str, pets: str) -> None:
    status, out = await post(http, f"{matrix}/v1/matrix/playbooks/record",
                             {"query_text": "", "answer_id": "p0", "answer_corpus": pets, "score": 1})
    assert status == 400 and out["error"]["field"] == "query_text"


async def test_unknown_answers_are_404(http: aiohttp.ClientSession, matrix: str, pets: str) -> None:
    pb = unique("pb")
    status, out = await post(http, f"{matrix}/v1/matrix/playbooks/record",
                             {"query_text": Q, "answer_id": "p0", "answer_corpus": unique("none"),
                              "score": 1, "playbook_corpus": pb})
    assert status == 404 and out["error"]["field"] == "answer_corpus", out
    status, out = await post(http, f"{matrix}/v1/matrix/playbooks/record",
                             {"query_text": Q, "answer_id": "no-such-id", "answer_corpus": pets,
                              "score": 1, "playbook_corpus": pb})
    assert status == 404 and out["error"]["field"] == "answer_id", out
    async with http.get(f"{matrix}/v1/matrix/playbooks", params={"playbook_corpus": pb}) as r:
        assert (await r.json())["entries"] == []  # nothing stored blindly


# ---- housekeeping ---------------------------------------------------------------------------

async def test_list_and_delete_round_trip(http: aiohttp.ClientSession, matrix: str,
                                          pets: str) -> None:
    pb = unique("pb")
    url = f"{matrix}/v1/matrix/playbooks"
    async with http.get(url, params={"playbook_corpus": pb}) as r:
        assert r.status == 200 and (await r.json())["entries"] == []  # no playbook yet
    first = await record(http, matrix, pets, "p2", 1.0, pb)
    second = await record(http, matrix, pets, "p0", -1.0, pb, query="cats?")
    third = await record(http, matrix, pets, "p2", 0.5, pb, query="birds that talk")
    assert first == boost.playbook_id(Q, "p2", pets)

    async with http.get(url, params={"playbook_corpus": pb}) as r:
        assert r.status == 200
        listed = (await r.json())["entries"]
    assert {e["playbook_id"] for e in listed} == {first, second, third}
    by_id = {e["playbook_id"]: e for e in listed}
    assert by_id[second] == {"playbook_id": second, "query_text": "cats?", "answer_id": "p0",
                             "answer_corpus": pets, "score": -1.0, "tags": [],
                             "recorded_at": by_id[second]["recorded_at"]}
    assert by_id[second]["recorded_at"]
    recorded = [e["recorded_at"] for e in listed]
    assert recorded == sorted(recorded, reverse=True)  # newest first

    async with http.get(url, params={"playbook_corpus": pb, "answer_id": "p2",
                                     "answer_corpus": pets}) as r:
        assert {e["playbook_id"] for e in (await r.json())["entries"]} == {first, third}
    async with http.get(url, params={"playbook_corpus": pb, "limit": "1"}) as r:
        assert len((await r.json())["entries"]) == 1

    async with http.delete(f"{url}/{first}", params={"playbook_corpus": pb}) as r:
        assert r.status == 200 and (await r.json())["deleted"] == first
    async with http.get(url, params={"playbook_corpus": pb}) as r:
        assert {e["playbook_id"] for e in (await r.json())["entries"]} == {second, third}
    async with http.delete(f"{url}/{first}", params={"playbook_corpus": pb}) as r:
        assert r.status == 404 and (await r.json())["error"]["field"] == "playbook_id"


@pytest.mark.parametrize(("params", "field"), [
    ({"limit": "0"}, "limit"), ({"limit": "ten"}, "limit"), ({"limit": "1001"}, "limit"),
    ({"answer_corpus": "Bad!"}, "answer_corpus"), ({"playbook_corpus": "Bad!"}, "playbook_corpus"),
])
async def test_bad_list_requests(http: aiohttp.ClientSession, matrix: str, params: dict[str, str],
                                 field: str) -> None:
    async with http.get(f"{matrix}/v1/matrix/playbooks", params=params) as r:
        assert r.status == 400
        assert (await r.json())["error"]["field"] == field


async def test_bad_delete_id(http: aiohttp.ClientSession, matrix: str) -> None:
    async with http.delete(f"{matrix}/v1/matrix/playbooks/not-a-hash") as r:
        assert r.status == 400
        assert (await r.json())["error"]["field"] == "playbook_id"


# ---- the CLI: record --wrong, playbooks list|delete ------------------------------------------

async def cli(url: str, *argv: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "internal.cli.main", *argv, "--url", url,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await proc.communicate()
    return int(proc.returncode or 0), out.decode(), err.decode()


async def test_cli_record_wrong_list_delete(matrix: str, pets: str) -> None:
    pb = unique("pb")
    code, out, err = await cli(matrix, "record", Q, "p1", "--corpus", pets, "--wrong",
                               "--playbook-corpus", pb)
    assert code == 0, err
    pid = boost.playbook_id(Q, "p1", pets)
    assert pid in out
    code, out, err = await cli(matrix, "playbooks", "list", "--playbook-corpus", pb, "--json")
    assert code == 0, err
    entries = json.loads(out)["entries"]
    assert [(e["playbook_id"], e["score"], e["answer_id"]) for e in entries] == [(pid, -1.0, "p1")]
    code, out, err = await cli(matrix, "playbooks", "list", "--playbook-corpus", pb)
    assert code == 0 and "-1.00" in out and f"{pets}/p1" in out, err
    code, out, err = await cli(matrix, "playbooks", "delete", pid, "--playbook-corpus", pb)
    assert code == 0 and f"deleted: {pid}" in out, err
    code, out, err = await cli(matrix, "playbooks", "delete", pid, "--playbook-corpus", pb)
    assert code == 1 and "HTTP 404" in err and "playbook_id" in err
    code, out, err = await cli(matrix, "record", Q, "nope", "--corpus", pets, "--wrong",
                               "--playbook-corpus", pb)
    assert code == 1 and "HTTP 404" in err and "(answer_id)" in err


async def test_a_record_answers_with_the_lsn_of_its_write(http: aiohttp.ClientSession,
                                                          matrix: str, pets: str) -> None:
    """matrixd's answer carries the Lakehouse-LSN vectord gave the playbook write, and a
    search sending a position back is accepted (a malformed one is a 400 naming it)."""
    pb = unique("pb")
    base = await search(http, matrix, {"query_text": Q, "mode": "vector", "corpora": [pets]})
    async with http.post(f"{matrix}/v1/matrix/playbooks/record", json={
            "query_text": Q, "answer_id": base["hits"][0]["id"], "answer_corpus": pets,
            "score": 1.0, "playbook_corpus": pb}) as resp:
        assert resp.status == 200, await resp.text()
        lsn = resp.headers["Lakehouse-LSN"]
    assert "/" in lsn
    async with http.post(f"{matrix}/v1/matrix/search", headers={"Lakehouse-LSN": lsn}, json={
            "query_text": Q, "corpora": [pets], "playbook_corpus": pb,
            "use_playbook": True}) as resp:
        assert resp.status == 200, await resp.text()
    async with http.post(f"{matrix}/v1/matrix/search", headers={"Lakehouse-LSN": "soon"},
                         json={"query_text": Q, "corpora": [pets]}) as resp:
        body = await resp.json()
    assert resp.status == 400 and body["error"]["field"] == "Lakehouse-LSN", body
