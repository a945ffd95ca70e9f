"""One hit per page: a synced wiki's chunks carry metadata.parent_id, and
`group_by: "parent"` over them (real vectord, real embedd) never shows a page twice."""

from __future__ import annotations

from pathlib import Path

import aiohttp

from internal.clients.embed import EmbedClient
from internal.clients.vectord import VectordClient
from tests.sync.conftest import make_syncer

TOPICS = {
    "printing.md": "printer jam toner paper tray queue",
    "network/vpn.md": "vpn tunnel printer driver remote office",
    "guides/laptop.md": "laptop battery printer setup charger dock",
    "faq.md": "printer password reset account guest",
}


def _page(title: str, words: str) -> str:
    sections = [f"## Part {n}\n\n" + " ".join(f"{w} note {n}." for w in words.split()) * 4
                for n in range(5)]
    return f"# {title}\n\n" + "\n\n".join(sections) + "\n"


async def test_group_by_parent_over_a_synced_wiki(tmp_path: Path, corpus: str,
                                                  session: aiohttp.ClientSession,
                                                  documents_url: str, embedd_url: str) -> None:
    wiki = tmp_path / "wiki"
    for rel, words in TOPICS.items():
        (wiki / rel).parent.mkdir(parents=True, exist_ok=True)
        (wiki / rel).write_text(_page(rel, words), encoding="utf-8")
    vectord = VectordClient(session, documents_url)
    embed = EmbedClient(session, embedd_url)
    report = await make_syncer(wiki, corpus, vectord, EmbedClient(session, embedd_url), chunk_chars=300).request_run()
    assert report.errors == []
    q = (await embed.embed(["the printer is stuck"], input_type="query")).vectors[0]
    body = {"corpora": [corpus], "mode": "hybrid", "query_text": "printer", "query_vector": q,
            "k": 8}
    async with session.post(f"{documents_url}/v1/vectors/search", json=body) as r:
        plain = await r.json()
    pages = [h["metadata"]["parent_id"] for h in plain["hits"]]
    assert len(pages) == 8 and len(set(pages)) < len(pages)  # chunks of a page crowd in
    assert all(h["id"].startswith(h["metadata"]["parent_id"] + "#") for h in plain["hits"])
    async with session.post(f"{documents_url}/v1/vectors/search",
                            json={**body, "group_by": "parent", "group_size": 3}) as r:
        grouped = await r.json()
    pages = [h["metadata"]["parent_id"] for h in grouped["hits"]]
    assert sorted(pages) == sorted(TOPICS)
    for h in grouped["hits"]:
        assert h["group"]["count"] >= 5 and len(h["group"]["hits"]) == 2
        assert {m["metadata"]["parent_id"] for m in h["group"]["hits"]} == {h["group"]["key"]}
